"""Subject names, KV keys and the one reversible encoding of slugs into tokens.

Provider tags (``deepinfra/fp8``), model ids (``deepseek/deepseek-chat-v3.1``,
``meta-llama/llama-3.3-70b-instruct:free``) contain ``/``, ``.`` and ``:``; a NATS
subject token must not contain ``.``, ``*``, ``>`` or whitespace, and a KV key
must match ``[-/_=.a-zA-Z0-9]+`` (nats-py ``js/kv.py::VALID_KEY_RE``).  Every
subject and key in the project is built here, from :func:`encode_token`, so the
encoding lives in one place (DESIGN.md, "Subjects and streams").

The encoding keeps ``[A-Za-z0-9-]`` and writes every other character as ``_``
followed by its code point in upper-case hex, framed by the width:
``_XX`` for code points below 0x100, ``__XXXX`` below 0x10000 and
``___XXXXXX`` above.  ``_`` itself is written ``_5F``, so decoding is exact.
"""

from __future__ import annotations

import re

PREFIX = "canary"
_SAFE = re.compile(r"[A-Za-z0-9-]")
_TOKEN = re.compile(r"(?:[A-Za-z0-9-]|_[0-9A-F]{2}|__[0-9A-F]{4}|___[0-9A-F]{6})+")


class SubjectError(ValueError):
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


# -- subjects -----------------------------------------------------------------

def discovery(model: str) -> str:
    """``canary.discovery.<model>``: EndpointsDiscovered and CycleClosed."""
    return f"{PREFIX}.discovery.{encode_token(model)}"


def task(model: str, provider: str) -> str:
    """``canary.tasks.<model>.<provider>``: ProbeTask on the work-queue stream."""
    return f"{PREFIX}.tasks.{encode_token(model)}.{encode_token(provider)}"


def result(model: str, provider: str) -> str:
    """``canary.results.<model>.<provider>``: ProbeResult."""
    return f"{PREFIX}.results.{encode_token(model)}.{encode_token(provider)}"


def verdicts(model: str) -> str:
    """``canary.verdicts.<model>``: the judge's CycleVerdict."""
    return f"{PREFIX}.verdicts.{encode_token(model)}"


def decision(model: str, provider: str | None) -> str:
    """``canary.decisions.<model>.<provider>``; model-wide decisions use ``*``."""
    return f"{PREFIX}.decisions.{encode_token(model)}.{encode_token(provider or '*')}"


def retest(model: str) -> str:
    """``canary.retest.<model>``: the judge's RetestRequested for discovery."""
    return f"{PREFIX}.retest.{encode_token(model)}"


def routing(model: str) -> str:
    """``canary.routing.<model>``: every new IgnoreSnapshot."""
    return f"{PREFIX}.routing.{encode_token(model)}"


def ops(verb: str) -> str:
    """``canary.ops.<verb>``: operator commands (publish permission: operators)."""
    return f"{PREFIX}.ops.{encode_token(verb)}"


def router_event(model: str) -> str:
    """``canary.router.<model>``: router facts (override applied, exclusions loaded)."""
    return f"{PREFIX}.router.{encode_token(model)}"


def answer(service: str, command_id: str) -> str:
    """``canary.answers.<service>.<command id>``: a service's CommandApplied or CommandRefused.

    Only ``service``'s credential may publish on its own ``canary.answers.<service>.>``
    (``shared/nats/server.conf``).
    """
    return f"{PREFIX}.answers.{encode_token(service)}.{encode_token(command_id)}"


def answers_to(command_id: str) -> str:
    """The filter that matches the answer to ``command_id`` from whichever service owns it."""
    return f"{PREFIX}.answers.*.{encode_token(command_id)}"


def deadletter(service: str) -> str:
    """``canary.deadletter.<service>``: rejected input with its reason."""
    return f"{PREFIX}.deadletter.{encode_token(service)}"


def notice_dead(channel: str) -> str:
    """``canary.notices.dead.<channel>``: a notice that exhausted its delivery schedule."""
    return f"{PREFIX}.notices.dead.{encode_token(channel)}"


#: ``ResendNotices`` from operators; the notifier's ``NoticesResent`` answers on the next one.
NOTICES_RESEND = f"{PREFIX}.notices.resend"
NOTICES_RESENT = f"{PREFIX}.notices.resent"


def kv_key(model: str) -> str:
    """Key of a model's IgnoreSnapshot in the ``canary-routing`` KV bucket."""
    return encode_token(model)


def model_from_subject(subject: str, position: int = 2) -> str:
    """Decode the model token of a ``canary.<kind>.<model>...`` subject.

    Raises:
        SubjectError: when the subject has no such token.
    """
    parts = subject.split(".")
    if len(parts) <= position:
        raise SubjectError(f"subject {subject!r} has no token at {position}")
    return decode_token(parts[position])


ALL_DISCOVERY = f"{PREFIX}.discovery.>"
ALL_TASKS = f"{PREFIX}.tasks.>"
ALL_RESULTS = f"{PREFIX}.results.>"
ALL_VERDICTS = f"{PREFIX}.verdicts.>"
ALL_DECISIONS = f"{PREFIX}.decisions.>"
ALL_RETEST = f"{PREFIX}.retest.>"
ALL_ROUTING = f"{PREFIX}.routing.>"
ALL_OPS = f"{PREFIX}.ops.>"
ALL_ROUTER = f"{PREFIX}.router.>"
ALL_DEADLETTER = f"{PREFIX}.deadletter.>"
ALL_NOTICES = f"{PREFIX}.notices.>"
ALL_NOTICES_DEAD = f"{PREFIX}.notices.dead.>"
ALL_ANSWERS = f"{PREFIX}.answers.>"
