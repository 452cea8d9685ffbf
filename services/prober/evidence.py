"""Evidence bundles: the probes behind a decision as field cases that ``canary check`` reads.

What lives here: turning logged :class:`~reverie_canary.shared.contract.events.ProbeResult`
events into the recorded-reply format of :mod:`reverie_canary.services.prober.recorded` (one JSON
object per request), so that anyone, a provider included, can run the same
checks on the same replies and get the same verdicts: an evidence
bundle behind every decision.  Pure: the log is read by ``canary evidence``
(:mod:`reverie_canary.canary.cli_evidence`).

One line per request the prober sent: a probe with confirmations (the language
probe's three tries) gives one line per try, each with the try's own verdict in
``expected`` / ``accept``; :func:`probe_verdict` folds reruns back into the
probe's verdict by the prober's majority rule.  Each line carries:

- the request: ``kind`` (the case kind of the probe kind), ``request_language``,
  ``schema``, ``meta.prompt``, ``meta.expected_prefix``, ``meta.sentinel``,
  ``meta.max_tokens``, ``meta.ttft_threshold_s``, ``meta.response_format`` (as
  :func:`reverie_canary.services.prober.prompts.build` makes them at the
  result's ``prompt_version``);
- the reply as the prober assembled it within its caps: ``output_text``,
  ``finish_reason``, ``meta.reasoning_text``, the timings (``meta.ttft_s``,
  ``first_content_delta_s``, ``first_reasoning_delta_s``), ``meta.http_status``,
  ``meta.usage``, ``meta.error`` and ``meta.reply`` (transport facts);
- who served it: ``meta.provider`` (the name the response gave),
  ``meta.pinned`` (the provider tag and name the probe was pinned to, and
  ``same_name``, the model's other endpoints of that name, so that ``canary
  check`` applies the prober's pin rule);
- ``meta.probe``: the task, cycle, try, the probe's verdict, the generation id,
  the quantization the listing gave, the prompt and checks versions, and the
  checks' verdicts (``[check, outcome, reason]``);
- for a tool probe (kind ``tools``): the request's ``tools``, ``expected_tool``,
  ``expected_arguments``, ``meta.variant``, ``meta.tool_result_value``; the reply's
  ``tool_calls`` (index, id, name, the raw arguments as kept, ``arguments_bytes``
  received), ``meta.stream`` and ``meta.reply.tool_faults`` / ``streamed`` (what the
  reader saw while it assembled them), so that ``canary check`` judges the same calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import msgspec

from reverie_canary.services.prober.prompts import PROMPT_VERSION, build
from reverie_canary.shared.contract.errors import CanaryError
from reverie_canary.shared.contract.events import Endpoint, ProbeResult, ReplyEvidence

#: Probe kind -> the field-case kind that ``canary check`` maps back to it
#: (:data:`reverie_canary.services.prober.recorded.KIND_MAP`; ``corruption`` with the echo prompt is ``echo``).
CASE_KIND: dict[str, str] = {"ttft": "latency", "refusal": "refusal", "structured": "structured",
                             "language": "language", "echo": "corruption", "tools": "tools"}


class EvidenceError(CanaryError, ValueError):
    """A result that cannot be written as a case (a prompt version this code does not build)."""


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _text(reply: ReplyEvidence) -> str:
    return reply.first_bytes + reply.text_rest


def cases_of(result: ProbeResult, endpoint: Endpoint | None = None, *, source: str = "",
             same_name: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The field cases of one probe result: one per request it sent (none for a probe that sent none).

    Args:
        result: the logged result.
        endpoint: the endpoint as the cycle's listing gave it (display name for
            the pin, quantization); ``None`` when the log no longer has it.
        source: what the bundle is for (``canary evidence <decision id>``).
        same_name: the cycle's other endpoints of the same display name
            (:func:`reverie_canary.services.discovery.core.same_names`), written
            as ``meta.pinned.same_name`` so that ``canary check`` says what the
            pin check cannot prove as the prober did.

    Raises:
        EvidenceError: the result's prompt version is not the one this code builds.
    """
    if result.outcome == "not_applicable" and not result.reply.http_status and not result.attempts:
        return []  # gated: no request was sent
    version = result.prompt_version or PROMPT_VERSION
    if version != PROMPT_VERSION:
        raise EvidenceError(f"{result.task_id}: prompt version {version}, this code builds {PROMPT_VERSION}")
    threshold_s = (result.ttft_threshold_ms or 10_000.0) / 1000.0
    tries = ([(a.outcome, a.reason, a.checks, a.reply, a.variant or result.variant) for a in result.attempts]
             if result.attempts else [(result.outcome, result.reason, result.checks, result.reply, result.variant)])
    out = []
    for number, (outcome, reason, checks, reply, variant) in enumerate(tries, 1):
        spec = build(result.kind, result.language or "en", max_tokens=result.max_tokens or 320,
                     ttft_threshold_s=threshold_s, variant=variant or "call").spec
        meta: dict[str, Any] = {
            "provider": reply.served_by,
            "prompt": spec.prompt,
            "expected_prefix": spec.expected_prefix,
            "sentinel": spec.sentinel,
            "max_tokens": spec.max_tokens,
            "ttft_threshold_s": threshold_s,
            "response_format": spec.response_format,
            "reasoning_text": reply.reasoning,
            "native_finish_reason": reply.native_finish_reason,
            "http_status": reply.http_status,
            "usage": dict(reply.usage),
            "ttft_s": _seconds(reply.ttft_ms),
            "first_content_delta_s": _seconds(reply.first_content_ms),
            "first_reasoning_delta_s": _seconds(reply.first_reasoning_ms),
            "error": reply.error_json,
            "reply": {
                "transport_error": reply.transport_error, "timed_out": reply.timed_out, "done": reply.done,
                "keepalives": reply.keepalives, "tool_calls": reply.tool_calls, "tool_names": list(reply.tool_names),
                "output_bytes": reply.output_bytes, "wire_bytes": reply.wire_bytes, "cut": reply.cut,
                "invalid_utf8": reply.invalid_utf8, "total_ms": reply.total_ms, "generation_id": reply.generation_id,
            },
            "probe": {
                "task_id": result.task_id, "model": result.model, "provider": result.provider,
                "cycle": result.cycle, "kind": result.kind, "language": result.language,
                "try": number, "tries": len(tries), "outcome": result.outcome, "reason": result.reason,
                "at": _iso(result.at), "started_at": _iso(result.started_at),
                "generation_id": reply.generation_id, "served_by": reply.served_by,
                "quantization": endpoint.quantization if endpoint is not None else None,
                "prompt_version": version, "checks_version": result.checks_version,
                "checks": [[c.check, c.outcome, c.reason] for c in checks],
                "text_cut": reply.text_cut,
            },
        }
        if endpoint is not None:
            meta["pinned"] = {"provider": result.provider, "provider_name": endpoint.provider_name}
            if same_name:
                meta["pinned"]["same_name"] = list(same_name)
        tool_fields: dict[str, Any] = {}
        if result.kind == "tools":
            meta.update(stream=reply.streamed, variant=spec.variant, tool_result_value=spec.tool_result_value)
            meta["reply"].update(tool_faults=list(reply.tool_faults), streamed=reply.streamed)
            tool_fields = {
                "tools": spec.tools, "expected_tool": spec.expected_tool, "expected_arguments": spec.expected_arguments,
                "tool_calls": [{"index": c.index, "id": c.id, "name": c.name, "arguments": c.arguments,
                                "arguments_bytes": c.arguments_bytes} for c in reply.calls],
            }
        out.append({
            "id": f"{result.task_id}#{number}",
            "source": source,
            "kind": CASE_KIND[result.kind],
            "request_language": spec.language,
            "schema": spec.schema,
            "output_text": _text(reply),
            "finish_reason": reply.finish_reason,
            "expected": outcome,
            "accept": [outcome],
            "note": (f"{result.provider} {result.kind} probe ({result.language}) of {result.cycle}, try {number} of "
                     f"{len(tries)}: {outcome} {reason}".rstrip()
                     + (f"; {reply.text_cut} characters of the reply were not kept: the rerun may differ"
                        if reply.text_cut else "")),
            "meta": meta,
            **tool_fields,
        })
    return out


def _iso(at: datetime | None) -> str | None:
    return None if at is None else msgspec.json.encode(at).decode().strip('"')


def probe_verdict(tries: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """One probe's ``(outcome, reason)`` from its tries' verdicts, by the prober's rule.

    One try: its verdict.  Several (the language probe's confirmations): the
    outcome most of them have, with the reason of the first try that has it;
    no strict majority: ``inconclusive`` / ``no_majority``
    (:func:`reverie_canary.services.prober.core.run_probe`; docs/concepts/probes.md, the language contract).
    """
    tries = list(tries)
    if len(tries) == 1:
        return tries[0]
    outcome, count = Counter(o for o, _ in tries).most_common(1)[0]
    if count * 2 <= len(tries):
        return "inconclusive", "no_majority"
    return outcome, next(r for o, r in tries if o == outcome)
