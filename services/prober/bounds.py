"""Bounds on what a probe keeps from a reply: every value the prober publishes has a size.

A hostile or broken gateway decides what it sends; the prober decides what it
keeps.  :func:`clamp` cuts any JSON-like value (an error object, ``usage``, a
check's evidence) to a few kilobytes, so that a reply of any size makes a
result of bounded size (issue 11 §2: a 20 MB reply made a result over NATS's
1 MiB ``max_payload`` that was lost without a dead letter).

Limits: strings :data:`MAX_CHARS` characters (cut ones end with ``…``),
lists and dicts :data:`MAX_ITEMS` entries, nesting :data:`MAX_DEPTH` levels
(deeper values become their cut ``repr``).  With them one evidence object is
at most a few kB of JSON.
"""

from __future__ import annotations

from typing import Any

MAX_CHARS = 300
MAX_ITEMS = 16
MAX_DEPTH = 4
#: Characters kept of a short label from the wire (provider name, generation id, finish reason).
LABEL_CHARS = 128


def clamp(value: Any, *, chars: int = MAX_CHARS, items: int = MAX_ITEMS, depth: int = MAX_DEPTH) -> Any:
    """Return ``value`` with every string, list and dict cut to the limits (a new value; the input is kept).

    Args:
        value: JSON-like data (``str``, numbers, ``bool``, ``None``, lists,
            tuples, dicts with string keys).  Anything else becomes its cut
            ``repr``.
        chars: characters kept per string (keys included).
        items: entries kept per list or dict.
        depth: nesting levels kept.

    Returns:
        The bounded value; numbers, booleans and ``None`` pass unchanged.
    """
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value if len(value) <= chars else value[: chars - 1] + "…"
    if depth <= 0:
        return clamp(repr(value), chars=chars)
    if isinstance(value, dict):
        out = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= items:
                break
            out[clamp(str(k), chars=64)] = clamp(v, chars=chars, items=items, depth=depth - 1)
        return out
    if isinstance(value, (list, tuple)):
        return [clamp(v, chars=chars, items=items, depth=depth - 1) for v in value[:items]]
    return clamp(repr(value), chars=chars)


def label(value: str | None) -> str | None:
    """A short label from the wire, cut to :data:`LABEL_CHARS` characters."""
    return value if value is None or len(value) <= LABEL_CHARS else value[:LABEL_CHARS]
