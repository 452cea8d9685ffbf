"""Transport: was there a reply to judge at all? (docs/concepts/probes.md, the latency contract).

No response headers, connection errors, 408/429/5xx (any status but 200), an
error body, an in-band error chunk, ``finish_reason: error`` or an error in
``native_finish_reason`` are transport errors, never quality failures (cases
FC-26, FC-27, FC-28; OpenRouter's streaming documentation).  A ``200`` stream that
stopped without a finish reason (no ``[DONE]``) was cut; one the client gave
up on after output had started stalled.  Content cannot be judged in either
case.  A read the prober stopped at a cap on bytes on the wire
(``response_too_large``, ``line_too_long``) is a transport error
too; one it stopped at the cap on text (``Reply.cut == "reply_max_bytes"``) is
not cut: the checks judge it (``reply_too_large``).

One exception is a quality ``fail``: a content filter speaking through an
HTTP error.  A ``403`` moderation refusal of the benign canary prompt
(OpenRouter's error documentation, "Moderation (403)"), and any other 4xx whose error
body says a content filter blocked the prompt or the output (Azure's
``content_filter`` code, Anthropic's "Output blocked by content filtering
policy", OpenAI's ``content_policy_violation``, DashScope's
``DataInspectionFailed``, OpenRouter's ``error_type`` ``content_policy_violation``
or ``refusal``, the upstream's ``metadata.raw``: :func:`filter_evidence`), is
a filter stopping supported traffic, reason ``content_filter``: no retry
clears it.  Other 4xx stay transport errors (or ``blind``).

The tool-call probe (``spec.kind == "tools"``) is sent only to endpoints that list ``tools``
among their supported parameters, with ``require_parameters`` (docs/concepts/probes.md, the tool-call contract): a
``400`` or ``422`` to that valid request is the endpoint failing the capability it advertises,
a quality ``fail`` / ``tool_capability_error`` (TC-17: Novita's "function calling not support"),
not a transport error; the gateway's own ``404`` "No endpoints found that support tool use" (or
"… the provided 'tool_choice' value") says no endpoint can take the request:
``not_applicable`` / ``tools_unsupported`` (OpenRouter's tool-calling documentation).

Answers about the canary itself are ``blind``, never a provider's transport
error (docs/concepts/health.md): ``401`` (``gateway_auth``: the
key is missing or revoked), ``402`` (``gateway_credit``: no credit left), any
other ``403`` (``gateway_forbidden``), and no connection to the gateway at all
(``gateway_unreachable``: refused, unresolvable, connect timeout).  Through the
gateway a provider's trouble comes back as 408/429/5xx or an error chunk; a
connection the canary cannot open is always the gateway's.
"""

from __future__ import annotations

import re
from typing import Any

from reverie_canary.client.reply import BLIND_STATUS, CheckResult, ProbeSpec, Reply

CHECK = "transport"

#: The HTTP layer's errors that mean the gateway itself could not be reached
#: (:func:`reverie_canary.services.prober.http.send_probe`): ``blind`` / ``gateway_unreachable``.
UNREACHABLE = frozenset({"connect_error", "connect_timeout"})

#: Substrings of a native finish reason that mean the upstream failed
#: (``network_error``, ``error``, ``provider_error`` ...; FC-28).
ERROR_NATIVE = ("error", "timeout", "abort", "cancel", "interrupted", "overloaded", "unavailable")

#: The gateway's own answer when no endpoint of the model takes a tool request (OpenRouter's tool-calling documentation).
NO_TOOL_ENDPOINT = re.compile(r"No endpoints found that support (?:tool use|the provided 'tool_choice')", re.I)
#: Statuses that refuse a valid tool request: the endpoint fails the capability it lists.
TOOL_REFUSAL_STATUS = frozenset({400, 422})

#: ``error.metadata.error_type`` values that are a filter, not a breakage.
FILTER_ERROR_TYPES = frozenset({"content_policy_violation", "refusal", "moderation"})


#: Error codes and types that name a content filter (lower case; the provider's own codes, or OpenRouter's).
FILTER_CODES = frozenset({"content_filter", "content_policy_violation", "content_filtered", "refusal", "moderation",
                          "data_inspection_failed", "datainspectionfailed", "prohibited_content", "safety",
                          "responsibleaipolicyviolation", "guardrail_intervened"})

#: What an error message says when a content filter blocked the prompt or the output.  Specific on
#: purpose: "content must be a string", "data policy", "Request blocked: provider not allowed" (the
#: canary's own key settings) do not match.
FILTER_TEXT = re.compile(
    r"content[\s_-]*filter"                                             # content filter, content_filter(ing)
    r"|content[\s_-]*(?:management[\s_-]*)?polic(?:y|ies)"               # content (management) policy
    r"|safety[\s_-]*(?:system|filter|settings|polic)"                    # our safety system
    r"|(?:response|output|completion|generation)\s+(?:was\s+|has\s+been\s+)?(?:blocked|filtered)"
    r"|blocked\b[^.\n]{0,40}?\b(?:safety|moderation|prohibited|sensitive)"
    r"|inappropriate\s+content|sensitive\s+content|prohibited[\s_-]*content|content\s+exists\s+risk"
    r"|considered\s+high\s+risk|data[\s_-]*inspection|guardrail[\s_-]*interven"
    r"|不安全|敏感内容|违规",
    re.IGNORECASE,
)
#: Characters of each error string read (an upstream's raw error may be long).
FILTER_SCAN_CHARS = 2048
#: Statuses never judged for a filter: the canary's own key (blind) and the ones a retry clears.
NOT_FILTER_STATUS = frozenset({401, 402, 408, 429})


def _strings(error: Any, depth: int = 0) -> list[str]:
    """The strings of an error body (codes, types, messages, the upstream's raw error), bounded."""
    if depth > 4:
        return []
    if isinstance(error, str):
        return [error[:FILTER_SCAN_CHARS]]
    if isinstance(error, dict):
        return [s for key, value in list(error.items())[:32] if key not in ("availability", "flagged_input")
                for s in _strings(value, depth + 1)]
    if isinstance(error, list):
        return [s for value in error[:16] for s in _strings(value, depth + 1)]
    return []


def filter_evidence(error: dict[str, Any] | None) -> str | None:
    """What in an HTTP error body says a content filter blocked the request or its output, or ``None``.

    An error code or type of :data:`FILTER_CODES` (``error.code``,
    ``error.type``, ``metadata.error_type``, ``metadata.provider_code``), the
    moderation flag (``metadata.flagged_input``), or a message of
    :data:`FILTER_TEXT` anywhere in the body, the upstream's
    ``metadata.raw`` included.  An ``availability`` answer (routing) is never
    a filter.

    Returns:
        The code or the words that matched (at most 80 characters), or ``None``.
    """
    if not isinstance(error, dict):
        return None
    inner = error.get("error", error)
    if not isinstance(inner, dict):
        inner = error
    if "availability" in inner:
        return None
    meta = inner.get("metadata") if isinstance(inner.get("metadata"), dict) else {}
    if "flagged_input" in meta:
        return "flagged_input"
    for value in (inner.get("code"), inner.get("type"), inner.get("error_type"), meta.get("error_type"),
                  meta.get("provider_code"), error.get("code")):
        if isinstance(value, str) and value.strip().lower() in FILTER_CODES:
            return value[:80]
    for text in _strings(error):
        m = FILTER_TEXT.search(text)
        if m is not None:
            return m.group()[:80]
    return None


def _is_moderation(error: dict[str, Any] | None) -> bool:
    if not isinstance(error, dict):
        return False
    inner = error.get("error", error)
    if not isinstance(inner, dict):
        return False
    meta = inner.get("metadata") or {}
    kind = (meta.get("error_type") if isinstance(meta, dict) else None) or inner.get("error_type")
    return kind in FILTER_ERROR_TYPES or (isinstance(meta, dict) and "flagged_input" in meta)


def _message(error: dict[str, Any] | None) -> str:
    """The ``message`` of an error object (``{"error": {...}}`` or the inner object), else ``""``."""
    if not isinstance(error, dict):
        return ""
    inner = error.get("error", error)
    message = inner.get("message") if isinstance(inner, dict) else None
    return message[:2000] if isinstance(message, str) else ""


def check_transport(reply: Reply, spec: ProbeSpec | None = None) -> CheckResult:
    """Decide whether the exchange itself broke.

    Args:
        reply: the finished reply.
        spec: optional; with it, a stalled stream whose first token was
            already late is left to the latency check.

    Returns:
        ``pass``; ``transport_error`` with reason ``<transport_error>``,
        ``http_<status>``, ``in_band_error``, ``finish_reason_error``,
        ``native_finish_reason_error``, ``stream_cut`` or ``stream_stalled``;
        ``fail`` / ``content_filter`` for a 403 moderation refusal or a 4xx
        whose body says a content filter blocked it (evidence ``filter``:
        what said so); for the tool probe ``fail`` / ``tool_capability_error``
        (400, 422) and ``not_applicable`` / ``tools_unsupported`` (the gateway's
        404 for no tool endpoint); ``blind``
        with ``gateway_auth`` (401), ``gateway_credit`` (402),
        ``gateway_forbidden`` (another 403) or ``gateway_unreachable``.
    """
    if reply.transport_error in UNREACHABLE:
        return CheckResult(check=CHECK, outcome="blind", reason="gateway_unreachable",
                           evidence={"error": reply.transport_error})
    if reply.transport_error:
        evidence: dict[str, Any] = {"http_status": reply.http_status}
        for key in ("content_type", "cut"):
            if getattr(reply, key) is not None:
                evidence[key] = getattr(reply, key)
        if reply.cut is not None:
            evidence["wire_bytes"] = reply.wire_bytes
        if reply.transport_error == "body_parse" and reply.text:
            evidence["first_bytes"] = reply.text[:120]
        return CheckResult(check=CHECK, outcome="transport_error", reason=reply.transport_error,
                           evidence=evidence)
    status = reply.http_status
    if status is not None and status != 200:
        evidence = {"http_status": status, "error": reply.error}
        if status == 403 and _is_moderation(reply.error):
            return CheckResult(check=CHECK, outcome="fail", reason="content_filter", evidence=evidence)
        if 400 <= status < 500 and status not in NOT_FILTER_STATUS:
            said = filter_evidence(reply.error)
            if said is not None:
                return CheckResult(check=CHECK, outcome="fail", reason="content_filter",
                                   evidence={**evidence, "filter": said})
        if spec is not None and spec.kind == "tools":
            if status in TOOL_REFUSAL_STATUS:
                return CheckResult(check=CHECK, outcome="fail", reason="tool_capability_error", evidence=evidence)
            if status == 404 and NO_TOOL_ENDPOINT.search(_message(reply.error)):
                return CheckResult(check=CHECK, outcome="not_applicable", reason="tools_unsupported",
                                   evidence=evidence)
        if status in BLIND_STATUS:
            return CheckResult(check=CHECK, outcome="blind", reason=BLIND_STATUS[status], evidence=evidence)
        return CheckResult(check=CHECK, outcome="transport_error", reason=f"http_{status}", evidence=evidence)
    if reply.error is not None:
        return CheckResult(check=CHECK, outcome="transport_error", reason="in_band_error",
                           evidence={"error": reply.error})
    if reply.finish_reason == "error":
        return CheckResult(check=CHECK, outcome="transport_error", reason="finish_reason_error",
                           evidence={"native_finish_reason": reply.native_finish_reason})
    native = (reply.native_finish_reason or "").lower()
    if native and any(marker in native for marker in ERROR_NATIVE):
        return CheckResult(check=CHECK, outcome="transport_error", reason="native_finish_reason_error",
                           evidence={"native_finish_reason": reply.native_finish_reason})
    produced = bool(reply.text or reply.reasoning_text)
    called = bool(reply.calls or reply.tool_calls)
    if reply.timed_out and (produced or called):
        first = min((t for t in (reply.ttft_ms, reply.first_content_ms, reply.first_reasoning_ms) if t is not None),
                    default=None)
        if spec is None or first is None or first <= spec.ttft_threshold_ms:
            return CheckResult(check=CHECK, outcome="transport_error", reason="stream_stalled",
                               evidence={"ttft_ms": first, "total_ms": reply.total_ms})
    elif status == 200 and reply.finish_reason is None and reply.cut is None \
            and (produced or (called and not reply.done)):
        # calls that came whole (``[DONE]`` or a complete body) with no finish reason are judged as calls:
        # the finish reason does not make a call (the OpenAI tool-call wire as OpenRouter passes it: ``finish_reason: null`` with calls)
        return CheckResult(check=CHECK, outcome="transport_error", reason="stream_cut",
                           evidence={"output_chars": len(reply.text)})
    return CheckResult(check=CHECK, outcome="pass")
