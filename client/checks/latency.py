"""Time to first token (docs/concepts/probes.md, the latency contract).

The clock runs from request start to the first content **or** reasoning
delta that holds a visible (non-whitespace) character; keep-alive comments,
empty and whitespace-only deltas never start it (cases FP-01, FP-09; the one
rule of :mod:`reverie_canary.client.chunks`): a reasoning model that
thinks before it speaks is not slow.

Rules, in order:

1. A measured time above the bar (``spec.ttft_threshold_ms``, 10 000 ms by
   default): ``fail`` / ``ttft_exceeded`` (FC-24).
2. Nothing visible before the client stopped waiting on an open ``200``
   stream (``reply.timed_out``): the time is **censored** at the wait.  A wait
   that reached the bar is ``fail`` / ``ttft_exceeded`` with ``censored``
   (FC-25); a wait cut short before the bar (the task's deadline came first)
   proves nothing: ``inconclusive`` / ``timed_out``.
3. A reply that *finished* (a finish reason, ``[DONE]`` or a complete JSON
   body) without visible text or reasoning has no first token to time: the
   latency check is ``not_applicable`` / ``no_text`` and the checks made for
   it judge the reply (``content_filter``, ``empty_output``,
   ``unexpected_tool_calls``, ``budget_exhausted`` ...).  A quick empty
   reply is never reported as a slow one.
4. Visible text without any recorded time: ``inconclusive`` / ``no_timing``.
"""

from __future__ import annotations

from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

CHECK = "latency.ttft"


def first_token_ms(reply: Reply) -> float | None:
    """The earliest of ``ttft_ms``, ``first_content_ms``, ``first_reasoning_ms`` (ms), or ``None``."""
    times = [t for t in (reply.ttft_ms, reply.first_content_ms, reply.first_reasoning_ms) if t is not None]
    return min(times) if times else None


def has_visible_output(reply: Reply) -> bool:
    """Whether the reply holds a non-whitespace character of text or reasoning."""
    return bool(reply.text.strip() or reply.reasoning_text.strip())


def check_ttft(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Compare the time to first token with ``spec.ttft_threshold_ms`` (rules in the module docstring).

    Returns:
        ``CheckResult(check="latency.ttft")``: ``pass``; ``fail`` /
        ``ttft_exceeded`` (measured, or censored at a client wait that
        reached the bar: ``censored: true``); ``inconclusive`` / ``timed_out``
        (the wait ended before the bar) or ``no_timing``; ``not_applicable``
        / ``no_text`` for a reply that finished without visible output.
        Evidence: ``ttft_ms``, ``threshold_ms``, ``keepalives``, ``total_ms``.
    """
    threshold = spec.ttft_threshold_ms
    ttft = first_token_ms(reply)
    evidence = {"ttft_ms": ttft, "threshold_ms": threshold, "keepalives": reply.keepalives,
                "total_ms": reply.total_ms}
    if ttft is None:
        if reply.timed_out:
            evidence["censored"] = True
            if reply.total_ms is not None and reply.total_ms < threshold:
                return CheckResult(check=CHECK, outcome="inconclusive", reason="timed_out", evidence=evidence)
            return CheckResult(check=CHECK, outcome="fail", reason="ttft_exceeded", evidence=evidence)
        if not has_visible_output(reply):
            evidence["finish_reason"] = reply.finish_reason
            return CheckResult(check=CHECK, outcome="not_applicable", reason="no_text", evidence=evidence)
        return CheckResult(check=CHECK, outcome="inconclusive", reason="no_timing", evidence=evidence)
    if ttft > threshold:
        return CheckResult(check=CHECK, outcome="fail", reason="ttft_exceeded", evidence=evidence)
    return CheckResult(check=CHECK, outcome="pass", evidence=evidence)
