"""The checks: pure functions from a finished reply to an outcome.

``evaluate(reply, spec)`` runs every check that applies to the probe kind plus
behavioural integrity, and folds them into one :class:`Evaluation`
(DESIGN.md, "The four probe contracts (plus one)").  No network, no clock.

Folding rule: a transport error decides alone (content cannot be judged);
otherwise any ``fail`` makes the probe ``fail`` (the first failing check gives
the reason), else any ``inconclusive`` makes it ``inconclusive``, else ``pass``.
"""

from __future__ import annotations

from msgspec import Struct

from services.prober.checks.latency import check_ttft
from services.prober.checks.structured import check_structured
from services.prober.checks.transport import check_transport
from services.prober.reply import ProbeSpec, Reply
from shared.events import CheckResult, Outcome


class Evaluation(Struct, frozen=True, kw_only=True):
    """The probe's outcome, its reason code and every check's result."""

    outcome: Outcome
    reason: str = ""
    checks: list[CheckResult] = []


def evaluate(reply: Reply, spec: ProbeSpec) -> Evaluation:
    """Run the checks for ``spec.kind`` on ``reply`` and fold them.

    Args:
        reply: the finished reply.
        spec: what the probe asked for.

    Returns:
        The folded :class:`Evaluation`.
    """
    transport = check_transport(reply)
    if transport.outcome == "transport_error":
        return Evaluation(outcome="transport_error", reason=transport.reason, checks=[transport])
    checks: list[CheckResult] = []
    if spec.kind == "ttft":
        checks.append(check_ttft(reply, spec))
    if spec.kind == "structured":
        checks.append(check_structured(reply, spec))
    return fold(checks)


def fold(checks: list[CheckResult]) -> Evaluation:
    """Combine check results: fail > inconclusive > pass."""
    for outcome in ("fail", "inconclusive"):
        for c in checks:
            if c.outcome == outcome:
                return Evaluation(outcome=outcome, reason=c.reason, checks=checks)
    return Evaluation(outcome="pass", reason="", checks=checks)
