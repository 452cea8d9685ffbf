"""Time to first token (DESIGN.md, contract 1).

The clock runs from request start to the first non-empty content **or**
reasoning delta; keep-alive comments and empty deltas never start it (cases
FP-01, FP-09).  Above the threshold, or nothing before the client gave up on
an open 200 stream: ``fail`` with reason ``ttft_exceeded`` (FC-24, FC-25).
"""

from __future__ import annotations

from services.prober.reply import ProbeSpec, Reply
from shared.events import CheckResult


def check_ttft(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Compare ``reply.ttft_ms`` with ``spec.ttft_threshold_ms``."""
    name = "latency.ttft"
    threshold = spec.ttft_threshold_ms
    evidence = {"ttft_ms": reply.ttft_ms, "threshold_ms": threshold}
    if reply.ttft_ms is None:
        if reply.timed_out or reply.http_status == 200:
            return CheckResult(check=name, outcome="fail", reason="ttft_exceeded", evidence=evidence)
        return CheckResult(check=name, outcome="inconclusive", reason="no_timing", evidence=evidence)
    if reply.ttft_ms > threshold:
        return CheckResult(check=name, outcome="fail", reason="ttft_exceeded", evidence=evidence)
    return CheckResult(check=name, outcome="pass", evidence=evidence)
