"""The one reversible encoding of slugs into subject tokens, and what a chat backend reads.

Provider tags (``deepinfra/fp8``), model ids (``deepseek/deepseek-chat-v3.1``,
``meta-llama/llama-3.3-70b-instruct:free``) contain ``/``, ``.`` and ``:``; a NATS
subject token must not contain ``.``, ``*``, ``>`` or whitespace, and a KV key
must match ``[-/_=.a-zA-Z0-9]+`` (nats-py ``js/kv.py::VALID_KEY_RE``).  Every
subject and key in the project is built from :func:`encode_token`, so the
encoding lives in one place (docs/concepts/messages.md, "Subjects"); the other subject
builders are in :mod:`reverie_canary.shared.contract.subjects`.

The encoding keeps ``[A-Za-z0-9-]`` and writes every other character as ``_``
followed by its code point in upper-case hex, framed by the width:
``_XX`` for code points below 0x100, ``__XXXX`` below 0x10000 and
``___XXXXXX`` above.  ``_`` itself is written ``_5F``, so decoding is exact.
"""

from __future__ import annotations

import re

from reverie_canary.client.errors import CanaryError

PREFIX = "canary"
_SAFE = re.compile(r"[A-Za-z0-9-]")
_TOKEN = re.compile(r"(?:[A-Za-z0-9-]|_[0-9A-F]{2}|__[0-9A-F]{4}|___[0-9A-F]{6})+")


class SubjectError(CanaryError, ValueError):
    """Raised when a slug cannot be encoded or a token cannot be decoded."""


def encode_token(value: str) -> str:
    """Encode a provider tag, model id or verb as one subject token (and KV key).

    Args:
        value: any non-empty string.

    Returns:
        A token of ``[A-Za-z0-9_-]`` characters that :func:`decode_token` maps back.

    Raises:
        SubjectError: when ``value`` is empty.
    """
    if not value:
        raise SubjectError("cannot encode an empty slug as a subject token")
    out: list[str] = []
    for ch in value:
        if _SAFE.fullmatch(ch):
            out.append(ch)
            continue
        cp = ord(ch)
        if cp < 0x100:
            out.append(f"_{cp:02X}")
        elif cp < 0x10000:
            out.append(f"__{cp:04X}")
        else:
            out.append(f"___{cp:06X}")
    return "".join(out)


def decode_token(token: str) -> str:
    """Invert :func:`encode_token`.

    Raises:
        SubjectError: when ``token`` is not a valid encoding.
    """
    if not token or not _TOKEN.fullmatch(token):
        raise SubjectError(f"not an encoded subject token: {token!r}")
    out: list[str] = []
    i = 0
    while i < len(token):
        if token[i] != "_":
            out.append(token[i])
            i += 1
            continue
        width = 1
        while i + width < len(token) and token[i + width] == "_" and width < 3:
            width += 1
        digits = {1: 2, 2: 4, 3: 6}[width]
        hexpart = token[i + width : i + width + digits]
        out.append(chr(int(hexpart, 16)))
        i += width + digits
    return "".join(out)



#: The KV bucket that holds every model's latest IgnoreSnapshot (history kept).
ROUTING_BUCKET = "canary-routing"


def routing(model: str) -> str:
    """``canary.routing.<model>``: every new IgnoreSnapshot."""
    return f"{PREFIX}.routing.{encode_token(model)}"


def served(model: str) -> str:
    """``canary.served.<model>``: a chat backend's ServedCounts (requests per provider; counts only)."""
    return f"{PREFIX}.served.{encode_token(model)}"


def live(model: str) -> str:
    """``canary.live.<model>``: a chat backend's LiveCounts (replies per provider and outcome reason; counts only)."""
    return f"{PREFIX}.live.{encode_token(model)}"


def kv_key(model: str) -> str:
    """Key of a model's IgnoreSnapshot in the ``canary-routing`` KV bucket."""
    return encode_token(model)
