"""The wall clock, for service shells only.

Cores never call this: time reaches a policy through the ``at`` of events
(docs/concepts/index.md: no decision reads the wall clock inside the policy).
"""

from __future__ import annotations

from datetime import datetime, timezone


def now() -> datetime:
    """Current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)
