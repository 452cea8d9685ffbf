"""The prober's core: one task in, one ProbeResult out.

Everything a probe decides beyond a single reply lives here: capability
gating (a kind whose parameter the endpoint does not declare is
``not_applicable``, not broken: :func:`reverie_canary.shared.contract.events.missing_parameters`),
pin verification (a reply served by another
provider proves nothing: ``inconclusive``/``pin_violated``; the served-by name
proves the provider, not which of its endpoints served: :func:`pin_check`) and the
confirmation by majority: on a language anomaly
(:data:`reverie_canary.shared.contract.events.LANGUAGE_ANOMALIES`; docs/concepts/probes.md, the language contract) and
on a tool probe's declined or unexpected call
(:data:`reverie_canary.client.checks.tools.TOOL_TRIGGER_REASONS`: the model's own randomness
can do either; contract 6), two more tries at once, sent concurrently; the majority decides,
all replies kept.  A tool probe's task names its variant (``ProbeTask.variant``), and so do
its result and each of its attempts.  The checks themselves are in
:mod:`reverie_canary.client.checks`.

No NATS, no httpx objects: the request goes through the ``send`` callable the
shell passes in, and time through ``now``.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeGuard

import msgspec

from reverie_canary.client.bounds import TOKEN_CHARS, clamp, label
from reverie_canary.client.checks import CHECKS_VERSION, Evaluation, evaluate
from reverie_canary.client.checks.tools import TOOL_TRIGGER_REASONS
from reverie_canary.client.reply import (
    MAX_TOOL_CALLS,
    MAX_TOOL_FAULTS,
    TOOL_FAULT_CHARS,
    TOOL_VARIANTS,
    ProbeSpec,
    Reply,
)
from reverie_canary.services.prober.prompts import PROMPT_VERSION, ProbeRequest, build
from reverie_canary.shared.contract.events import (
    EVIDENCE_REASONING_CHARS,
    EVIDENCE_TEXT_CHARS,
    FIRST_BYTES_CHARS,
    LANGUAGE_ANOMALIES,
    CheckResult,
    ProbeAttempt,
    ProbeResult,
    ProbeTask,
    ReplyEvidence,
    missing_parameters,
)

#: The reasons of a first reply that two more tries confirm, per kind (the module docstring).
CONFIRMED_REASONS: dict[str, frozenset[str]] = {
    "language": LANGUAGE_ANOMALIES,
    "tools": TOOL_TRIGGER_REASONS,
}

Send = Callable[[ProbeTask, ProbeRequest], Awaitable[Reply]]
#: Judges one reply (:func:`reverie_canary.client.checks.evaluate`); the shell
#: may run it off the event loop.
Judge = Callable[[Reply, ProbeSpec], Awaitable[Evaluation]]


async def judge_inline(reply: Reply, spec: ProbeSpec) -> Evaluation:
    """Run the checks on this thread (the default :data:`Judge`)."""
    return evaluate(reply, spec)


def gate(task: ProbeTask) -> CheckResult | None:
    """``not_applicable`` when the endpoint does not declare a parameter the kind sends.

    The parameters are :data:`reverie_canary.shared.contract.events.PROBE_PARAMETERS`
    (``structured_outputs``; ``tools`` and ``tool_choice``).  An endpoint that lists no
    parameters at all is probed (the listing is old), but for the tool probe, which only an
    endpoint that advertises tools gets (docs/concepts/probes.md, the tool-call contract).
    """
    missing = missing_parameters(task.kind, task.supported_parameters)
    if missing:
        return CheckResult(check="capability", outcome="not_applicable", reason="unsupported_parameter",
                           evidence={"missing": missing})
    return None


def verify_pin(task: ProbeTask, reply: Reply) -> CheckResult | None:
    """What the served-by name proves about the pin (:func:`pin_check`)."""
    return pin_check(task.provider, task.provider_name, reply.served_by, task.same_name)


def pin_check(provider: str, provider_name: str, served_by: str | None,
              same_name: Sequence[str] = ()) -> CheckResult | None:
    """What the served-by name of a reply proves about the pin (``canary check`` applies it to a recorded reply).

    The gateway names the provider that served a reply by display name only
    (OpenRouter's streaming documentation: ``provider`` in the chunks; the tag is not
    echoed), so the name is compared with the endpoint's listed
    ``provider_name``, case and spaces aside.  It can prove which *provider*
    served, never which of its endpoints: ``fireworks`` and ``fireworks/fast``
    both answer ``Fireworks``.  The request itself pins the tag with fallbacks
    off; this check is the evidence beside it.

    Returns:
        ``None`` when the name matches and no other listed endpoint has it: the
        pin is proven.  ``inconclusive`` / ``pin_violated`` when the reply names
        another provider: proven violated.  ``not_applicable`` (nothing proven
        either way; the probe's outcome stands) with reason
        ``pin_endpoint_unproven`` when the name matches but ``same_name`` lists
        the model's other endpoints of that name (evidence: ``proves``
        ``provider``, ``cannot_tell`` the tags), or ``pin_unverifiable`` when
        there is nothing to compare: the reply named no provider, or the
        listing gave the endpoint no provider name.
    """
    expected = " ".join(provider_name.split()).lower()
    seen = " ".join((served_by or "").split()).lower()
    evidence = {"pinned": provider, "expected": provider_name, "served_by": served_by}
    if not expected or not seen:
        missing = "the reply named no provider" if not seen else "the listing gave the endpoint no provider name"
        return CheckResult(check="pin", outcome="not_applicable", reason="pin_unverifiable",
                           evidence={**evidence, "why": missing})
    if seen != expected:
        return CheckResult(check="pin", outcome="inconclusive", reason="pin_violated", evidence=evidence)
    if same_name:
        return CheckResult(check="pin", outcome="not_applicable", reason="pin_endpoint_unproven",
                           evidence={**evidence, "proves": "provider", "cannot_tell": [provider, *same_name][:8]})
    return None


def with_pin(evaluation: Evaluation, pin: CheckResult | None) -> Evaluation:
    """``evaluation`` as the probe counts it, with what the pin check said.

    ``inconclusive`` / ``pin_violated`` when another provider served it; a pin
    check that proves nothing either way (``not_applicable``) is kept among
    the checks as evidence and leaves the outcome as it is.  A reply that never
    came (``transport_error``, ``blind``) has no pin to check.
    """
    if pin is None or evaluation.outcome in ("transport_error", "blind"):
        return evaluation
    if pin.reason == "pin_violated":
        return Evaluation(outcome="inconclusive", reason="pin_violated", checks=[*evaluation.checks, pin])
    return msgspec.structs.replace(evaluation, checks=[*evaluation.checks, pin])


#: What the evidence keeps of a reply's ``usage``: token counts, and ``cost`` (USD, OpenRouter's API documentation
#: section 3) for the canary's own spend (``canary_probe_cost_usd_total``).
USAGE_KEPT = ("prompt_tokens", "completion_tokens", "total_tokens", "cost")


def _finite_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _reasoning_tokens(usage: dict[str, Any]) -> int | float | None:
    details = usage.get("completion_tokens_details")
    value = usage.get("reasoning_tokens", details.get("reasoning_tokens") if isinstance(details, dict) else None)
    return value if _finite_number(value) and value > 0 else None


def evidence_of(reply: Reply) -> ReplyEvidence:
    """The evidence kept from a reply: what ``canary check`` needs to judge it again.

    Status, finish reasons, timings, the visible text (``first_bytes`` its first
    160 characters, ``text_rest`` the rest, together at most
    ``EVIDENCE_TEXT_CHARS``), the reasoning (``EVIDENCE_REASONING_CHARS``), how
    much of them was left out (``text_cut``), the reply's transport facts and its tool calls
    as assembled (raw arguments, the reader's facts, whether it streamed).  Every field is
    bounded (finish reasons 64 characters, labels 128, ``error`` 300, the error
    object and ``usage`` the wire's free-JSON bounds, ``usage`` the token counts,
    reasoning tokens and cost), whatever the reply's size.  What a read cap cut
    is in the deciding check's evidence (``bounds.reply_size``: ``output_bytes``,
    ``kept_chars``; ``transport``: ``cut``, ``wire_bytes``).
    """
    text = reply.text[:EVIDENCE_TEXT_CHARS]
    reasoning = reply.reasoning_text[:EVIDENCE_REASONING_CHARS]
    usage = {k: v for k, v in reply.usage.items() if k in USAGE_KEPT and _finite_number(v)}
    reasoning_tokens = _reasoning_tokens(reply.usage)
    if reasoning_tokens is not None:
        usage["reasoning_tokens"] = reasoning_tokens
    return ReplyEvidence(
        http_status=reply.http_status,
        finish_reason=label(reply.finish_reason, TOKEN_CHARS),
        native_finish_reason=label(reply.native_finish_reason, TOKEN_CHARS),
        served_by=label(reply.served_by),
        generation_id=label(reply.generation_id),
        ttft_ms=None if reply.ttft_ms is None else round(reply.ttft_ms, 1),
        total_ms=None if reply.total_ms is None else round(reply.total_ms, 1),
        first_bytes=text[:FIRST_BYTES_CHARS],
        output_chars=len(reply.text),
        error=(reply.transport_error or (str(reply.error)[:300] if reply.error else None)),
        usage=usage,
        text_rest=text[FIRST_BYTES_CHARS:],
        reasoning=reasoning,
        text_cut=len(reply.text) - len(text) + len(reply.reasoning_text) - len(reasoning),
        first_content_ms=None if reply.first_content_ms is None else round(reply.first_content_ms, 1),
        first_reasoning_ms=None if reply.first_reasoning_ms is None else round(reply.first_reasoning_ms, 1),
        transport_error=label(reply.transport_error, TOKEN_CHARS),
        error_json=None if reply.error is None else clamp(reply.error),
        timed_out=reply.timed_out,
        done=reply.done,
        keepalives=reply.keepalives,
        tool_calls=reply.tool_calls,
        tool_names=[name[:TOKEN_CHARS] for name in reply.tool_names[:8]],
        output_bytes=reply.output_bytes,
        wire_bytes=reply.wire_bytes,
        cut=label(reply.cut, TOKEN_CHARS),
        invalid_utf8=reply.invalid_utf8,
        calls=list(reply.calls[:MAX_TOOL_CALLS]),
        tool_faults=[fact[:TOOL_FAULT_CHARS] for fact in reply.tool_faults[:MAX_TOOL_FAULTS]],
        streamed=reply.streamed,
    )


async def run_probe(
    task: ProbeTask,
    send: Send,
    now: Callable[[], datetime],
    *,
    max_tokens: int,
    ttft_threshold_s: float,
    confirmations: int,
    prober: str,
    judge: Judge = judge_inline,
) -> ProbeResult:
    """Run ``task`` and return its result.

    Args:
        task: the work item.
        send: sends one request and returns the finished reply.
        now: UTC clock, for ``started_at`` and ``at``.
        max_tokens: output budget of each request.
        ttft_threshold_s: latency bar (docs/concepts/probes.md, the latency contract).
        confirmations: extra tries on a language anomaly or a tool probe's declined or
            unexpected call (two: the majority of three decides).
        prober: this prober's id, recorded in the result.
        judge: runs the checks on a reply (default: inline).
    """
    started = now()
    gated = gate(task)
    if gated is not None:
        return _result(task, started, now(), "not_applicable", gated.reason, [gated], ReplyEvidence(), [], prober)
    if task.kind == "tools" and task.variant not in TOOL_VARIANTS:
        unknown = CheckResult(check="variant", outcome="inconclusive", reason="unknown_variant",
                              evidence={"variant": task.variant[:TOKEN_CHARS], "known": list(TOOL_VARIANTS)})
        return _result(task, started, now(), "inconclusive", unknown.reason, [unknown], ReplyEvidence(), [], prober)
    probe = build(task.kind, task.language, max_tokens=max_tokens, ttft_threshold_s=ttft_threshold_s,
                  variant=task.variant or "call")
    attempts = [await _attempt(task, probe, send, judge)]
    first = attempts[0]
    if first[1].outcome != "pass" and first[1].reason in CONFIRMED_REASONS.get(task.kind, ()):
        attempts.extend(await asyncio.gather(*(_attempt(task, probe, send, judge) for _ in range(confirmations))))
    outcome, reason, chosen = _majority(attempts)
    reply, evaluation = chosen
    kept = [ProbeAttempt(outcome=ev.outcome, reason=ev.reason, checks=ev.checks, reply=evidence_of(r),
                         variant=task.variant)
            for r, ev in attempts] if len(attempts) > 1 else []
    return _result(task, started, now(), outcome, reason, evaluation.checks, evidence_of(reply), kept, prober,
                   probe.spec)


async def _attempt(task: ProbeTask, probe: ProbeRequest, send: Send, judge: Judge) -> tuple[Reply, Evaluation]:
    reply = await send(task, probe)
    evaluation = await judge(reply, probe.spec)
    return reply, with_pin(evaluation, verify_pin(task, reply))


def _majority(attempts: list[tuple[Reply, Evaluation]]) -> tuple[str, str, tuple[Reply, Evaluation]]:
    if len(attempts) == 1:
        reply, ev = attempts[0]
        return ev.outcome, ev.reason, attempts[0]
    votes = Counter(ev.outcome for _, ev in attempts)
    outcome, count = votes.most_common(1)[0]
    if count * 2 <= len(attempts):
        # no majority (e.g. fail / pass / transport_error): nothing is proven
        chosen = attempts[0]
        return "inconclusive", "no_majority", chosen
    chosen = next(a for a in attempts if a[1].outcome == outcome)
    return outcome, chosen[1].reason, chosen


def _result(task: ProbeTask, started: datetime, at: datetime, outcome: str, reason: str, checks: list[CheckResult],
            reply: ReplyEvidence, attempts: list[ProbeAttempt], prober: str, spec: ProbeSpec | None = None) -> ProbeResult:
    return ProbeResult(
        at=at,
        started_at=started,
        task_id=task.task_id,
        model=task.model,
        provider=task.provider,
        kind=task.kind,
        language=task.language,
        cycle=task.cycle,
        outcome=outcome,  # type: ignore[arg-type]
        reason=reason,
        checks=checks,
        reply=reply,
        attempts=attempts,
        control=task.control,
        prober=prober,
        prompt_version=PROMPT_VERSION,
        max_tokens=spec.max_tokens or 0 if spec is not None else 0,
        ttft_threshold_ms=spec.ttft_threshold_ms if spec is not None else 0.0,
        checks_version=CHECKS_VERSION if spec is not None else "",
        variant=task.variant,
        confirms=task.confirms,
    )
