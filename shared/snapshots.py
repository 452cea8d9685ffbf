"""The IgnoreSnapshot: the merged ``provider.ignore`` list of one model.

Written by the router to the KV bucket ``canary-routing`` (key: the encoded
model id) and published on ``canary.routing.<model>`` (DESIGN.md, "The router").
Each entry says which layer(s) put a provider there, why, and until when.
"""

from __future__ import annotations

from datetime import datetime

from msgspec import Struct

from reverie_canary.shared.commands import Layer
from reverie_canary.shared.events import Event, Slug, UtcDatetime


class IgnoreReason(Struct, frozen=True, kw_only=True):
    """Why one layer ignores a provider.

    ``layer``: ``exclusion`` (reviewed file), ``override`` (operator) or
    ``suspension`` (canary).  ``until``: UTC expiry, ``None`` for no expiry.
    """

    layer: Layer
    reason: str
    reference: str = ""
    actor: str = ""
    since: UtcDatetime | None = None
    until: UtcDatetime | None = None


class IgnoreEntry(Struct, frozen=True, kw_only=True):
    """One ignored provider and every layer that ignores it."""

    provider: Slug
    reasons: list[IgnoreReason]

    def expires_at(self) -> datetime | None:
        """UTC time when the last layer lets go; ``None`` if one never expires."""
        ends = [r.until for r in self.reasons]
        if any(u is None for u in ends):
            return None
        return max(ends)  # type: ignore[type-var]

    def active_at(self, now: datetime) -> IgnoreEntry | None:
        """This entry with expired layers dropped, or ``None`` if none is left."""
        live = [r for r in self.reasons if r.until is None or r.until > now]
        if not live:
            return None
        return self if len(live) == len(self.reasons) else IgnoreEntry(provider=self.provider, reasons=live)


class IgnoreSnapshot(Event, frozen=True, kw_only=True, tag="ignore_snapshot"):
    """The merged ignore list of ``model`` at ``at`` (UTC), version ``version``.

    Versions increase by one per change and never go back; a client refuses a
    lower version than one it applied (no rollback).
    """

    model: Slug
    version: int
    entries: list[IgnoreEntry] = []

    def ignore_at(self, now: datetime) -> list[str]:
        """Provider tags to put in ``provider.ignore`` at ``now`` (UTC), sorted."""
        return sorted(e.provider for e in self.entries if e.active_at(now) is not None)

    @property
    def ignore(self) -> list[str]:
        """All provider tags of the snapshot, regardless of expiry, sorted."""
        return sorted(e.provider for e in self.entries)
