"""Placeholder: the chat backends' served-by counts (issue 14, section 2) are read here."""

from __future__ import annotations

from datetime import datetime
from typing import Any


async def read_served(reader: Any, model: str, at: datetime, window_s: float) -> dict[str, int] | None:
    """The chat backends' request counts per provider in ``at`` +- ``window_s`` (``None``: none published)."""
    return None
