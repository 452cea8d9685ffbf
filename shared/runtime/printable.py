"""Text from the log or Redis made safe to print on an operator's terminal.

Operator free text (reasons, references, actors) and anything a provider or another
service wrote travels through the log and Redis and ends on other operators'
terminals (``override list``, ``incident``, ``status``, ``replay`` ...).  A C0 or C1
control character in it (``ESC ]0;...BEL`` retitles the terminal, ``ESC [2J`` clears
it, ``CSI`` = U+009B starts the same) would be obeyed by the terminal.  The wire now
refuses them in operator commands (:mod:`reverie_canary.shared.contract.commands`), but old
records and other fields may hold them: every CLI printer of such text passes it
through :func:`printable` (one string) or :func:`printable_view` (a whole read-model
Struct), which show each control character as its escape (``\\x1b``), never raw.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

#: The code points escaped: C0 (U+0000..U+001F, tab and newline included), DEL and C1 (U+0080..U+009F).
CONTROL = (*range(0x20), *range(0x7F, 0xA0))
_ESCAPES = {code: f"\\x{code:02x}" for code in CONTROL} | {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_KEEP_NEWLINES = {code: text for code, text in _ESCAPES.items() if code != 0x0A}

T = TypeVar("T")


def control_at(text: str) -> int | None:
    """The index of the first control character of :data:`CONTROL` in ``text`` (``None``: there is none)."""
    for index, char in enumerate(text):
        code = ord(char)
        if code < 0x20 or 0x7F <= code < 0xA0:
            return index
    return None


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control character shown as its escape (``\\x1b``, ``\\t``, ``\\n``).

    Args:
        newlines: keep ``\\n`` as it is (a multi-line text the CLI itself composed).
    """
    return text.translate(_KEEP_NEWLINES if newlines else _ESCAPES)


def printable_view(value: T) -> T:
    """``value`` (a Struct, list, tuple, dict or string, nested) with every string passed through :func:`printable`.

    The shape and every other value are kept, so a printer takes it in place of the
    original; dictionary keys are escaped too.
    """
    return _walk(value)


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, msgspec.Struct):
        changes = {}
        for name in value.__struct_fields__:
            old = getattr(value, name)
            new = _walk(old)
            if new is not old:
                changes[name] = new
        return msgspec.structs.replace(value, **changes) if changes else value
    if isinstance(value, list):
        return [_walk(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v) for v in value)
    if isinstance(value, dict):
        return {_walk(k): _walk(v) for k, v in value.items()}
    return value
