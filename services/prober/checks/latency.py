"""Time to first token (DESIGN.md, contract 1).

The clock runs from request start to the first non-empty content **or**
reasoning delta; keep-alive comments and empty deltas never start it (cases
FP-01, FP-09): a reasoning model that thinks before it speaks is not slow.
Above the threshold (``spec.ttft_threshold_ms``, 10 000 ms by default), or
nothing at all before the client gave up on an open ``200`` stream: ``fail``
with reason ``ttft_exceeded`` (FC-24, FC-25; the time is censored at the
client timeout).
"""

from __future__ import annotations

from reverie_canary.services.prober.reply import ProbeSpec, Reply
from reverie_canary.shared.events import CheckResult

CHECK = "latency.ttft"


def first_token_ms(reply: Reply) -> float | None:
    """The earliest of ``ttft_ms``, ``first_content_ms``, ``first_reasoning_ms`` (ms), or ``None``."""
    times = [t for t in (reply.ttft_ms, reply.first_content_ms, reply.first_reasoning_ms) if t is not None]
    return min(times) if times else None


def check_ttft(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Compare the time to first token with ``spec.ttft_threshold_ms``.

    Returns:
        ``CheckResult(check="latency.ttft")``: ``pass``; ``fail`` /
        ``ttft_exceeded`` (also when nothing came before the client timeout
        on a ``200`` stream); ``inconclusive`` / ``no_timing`` when the reply
        carries no timing at all.  Evidence: ``ttft_ms``, ``threshold_ms``,
        ``keepalives``, ``total_ms``.
    """
    threshold = spec.ttft_threshold_ms
    ttft = first_token_ms(reply)
    evidence = {"ttft_ms": ttft, "threshold_ms": threshold, "keepalives": reply.keepalives,
                "total_ms": reply.total_ms}
    if ttft is None:
        if reply.timed_out or (reply.http_status == 200 and not reply.text and not reply.reasoning_text):
            evidence["censored"] = True
            return CheckResult(check=CHECK, outcome="fail", reason="ttft_exceeded", evidence=evidence)
        return CheckResult(check=CHECK, outcome="inconclusive", reason="no_timing", evidence=evidence)
    if ttft > threshold:
        return CheckResult(check=CHECK, outcome="fail", reason="ttft_exceeded", evidence=evidence)
    return CheckResult(check=CHECK, outcome="pass", evidence=evidence)
