"""Bounds on what a probe keeps from a reply: every value the prober publishes has a size.

A hostile or broken gateway decides what it sends; the prober decides what it
keeps.  :func:`clamp` cuts any JSON-like value (an error object, ``usage``, a
check's evidence) so that it always passes the wire's bound on free-form JSON
(:data:`FREE_JSON`, checked by every reader at
decoding): a reply of any size makes a result of bounded size that the judge
accepts (a 20 MB reply made a result over NATS's 1 MiB
``max_payload`` that was lost without a dead letter).

Limits: strings :data:`MAX_CHARS` characters (a cut one ends with ``…``),
containers :data:`MAX_ITEMS` entries, nesting ``FREE_JSON.depth`` containers,
and in all at most ``FREE_JSON.text`` characters of keys and strings and
``FREE_JSON.items`` values: once the text is spent, further strings are cut to
``…``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FreeJsonLimits:
    """Bounds of a free-form JSON mapping (check evidence, usage), checked at decoding.

    ``depth`` counts containers (the mapping itself is 1); ``text`` is the total
    of characters of all keys and strings; ``items`` the total of values.
    """

    keys: int = 32
    depth: int = 4
    string: int = 400
    container: int = 32
    text: int = 1200
    items: int = 128


#: The bounds of check evidence and of the gateway's ``usage`` object.
FREE_JSON = FreeJsonLimits()


MAX_CHARS = min(300, FREE_JSON.string)
MAX_ITEMS = min(16, FREE_JSON.container, FREE_JSON.keys)
#: Characters kept of a display label from the wire (provider name, generation id): the wire's ``Name``.
LABEL_CHARS = 128
#: Characters kept of a machine token from the wire (a finish reason): the wire's ``Token``.
TOKEN_CHARS = 64


class _Budget:
    __slots__ = ("text", "items")

    def __init__(self) -> None:
        self.text = FREE_JSON.text
        self.items = FREE_JSON.items

    def string(self, value: str, chars: int) -> str:
        limit = min(chars, self.text)
        if len(value) > limit:
            value = value[: max(0, limit - 1)] + "…" if limit > 0 else ""
        self.text -= len(value)
        return value


def clamp(value: Any, *, chars: int = MAX_CHARS, items: int = MAX_ITEMS) -> Any:
    """Return ``value`` cut so that it passes ``FREE_JSON`` (a new value; the input is kept).

    Args:
        value: JSON-like data (``str``, numbers, ``bool``, ``None``, lists,
            tuples, dicts).  Anything else becomes its cut ``repr``; keys become
            strings of at most 64 characters.
        chars: characters kept per string.
        items: entries kept per list or dict.

    Returns:
        The bounded value; numbers, booleans and ``None`` pass unchanged.
    """
    return _clamp(value, chars, items, FREE_JSON.depth, _Budget())


def _clamp(value: Any, chars: int, items: int, depth: int, budget: _Budget) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return budget.string(value, chars)
    if not isinstance(value, (dict, list, tuple)) or depth <= 0:
        return budget.string(repr(value) if not isinstance(value, str) else value, chars)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if len(out) >= items or budget.items <= 0:
                break
            budget.items -= 1
            key = budget.string(str(k), 64)
            if key in out:
                continue
            out[key] = _clamp(v, chars, items, depth - 1, budget)
        return out
    kept = []
    for v in value[:items]:
        if budget.items <= 0:
            break
        budget.items -= 1
        kept.append(_clamp(v, chars, items, depth - 1, budget))
    return kept


def label(value: str | None, chars: int = LABEL_CHARS) -> str | None:
    """A short label from the wire, cut to ``chars`` characters (:data:`LABEL_CHARS` by default)."""
    return value if value is None or len(value) <= chars else value[:chars]
