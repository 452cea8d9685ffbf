"""The one way times are written for people: UTC, ISO 8601, ``Z``.

Every message, table and log detail that shows a time uses :func:`utc_text`
(six functions formatted UTC times, some with and some without the
zone).  Pure: it formats the time it is given, it never reads the clock.
"""

from __future__ import annotations

from datetime import datetime, timezone

_FORMATS = {
    "s": "%Y-%m-%dT%H:%M:%SZ",
    "us": "%Y-%m-%dT%H:%M:%S.%fZ",
    "clock": "%H:%M:%S",
}


def utc_text(at: datetime | None, *, precision: str = "s", missing: str = "never") -> str:
    """Write ``at`` in UTC: ``2026-06-11T18:00:00Z``.

    Args:
        at: an aware datetime (any zone; converted to UTC), or ``None``.
        precision: ``s`` (to the second, the default), ``us`` (microseconds,
            as cycle ids carry them) or ``clock`` (``18:00:00``, for the demo's
            running commentary, where the date is the run's).
        missing: what to write for ``None``.

    Raises:
        ValueError: for a naive datetime (every time in the system is UTC-aware)
            or an unknown precision.
    """
    if at is None:
        return missing
    if at.tzinfo is None:
        raise ValueError(f"naive datetime {at!r}: every time in the system is UTC-aware")
    try:
        pattern = _FORMATS[precision]
    except KeyError:
        raise ValueError(f"unknown precision {precision!r}; one of {', '.join(_FORMATS)}") from None
    return at.astimezone(timezone.utc).strftime(pattern)


def age_text(seconds: float | None) -> str:
    """A duration for people: ``4 s``, ``12 min``, ``3.5 h``, ``2.0 d`` (``-`` for none)."""
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}".removesuffix(".0") + " h"
    return f"{seconds / 86400:.1f}".removesuffix(".0") + " d"
