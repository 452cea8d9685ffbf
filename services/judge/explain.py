"""Plain-text explanations of judge state for operators (``canary explain``, ``canary report``).

Headers name the mode per probe kind whenever the kinds are not all in one mode
(:func:`modes_text`), and every decision line says the mode it was made in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from msgspec import Struct

from reverie_canary.services.judge.core import ModelState, Policy, human_duration, mode_of
from reverie_canary.shared.contract import quantization as quant
from reverie_canary.shared.contract.events import PROBE_KINDS, CycleVerdict, EndpointsDiscovered, Mode
from reverie_canary.shared.contract.timefmt import utc_text


def modes_text(modes: dict[str, Mode]) -> str:
    """``mode: enforce`` when every kind has one mode, else ``modes: enforce for ttft, echo; observe for refusal``."""
    if not modes:
        return "mode: unknown"
    values = sorted(set(modes.values()))
    if len(values) == 1:
        return f"mode: {values[0]}"
    parts = [f"{m} for {', '.join(k for k, v in modes.items() if v == m)}" for m in ("enforce", "observe")
             if m in values]
    return "modes: " + "; ".join(parts)


def modes_of(state: ModelState, policy: Policy, kinds: Iterable[str] = PROBE_KINDS) -> dict[str, Mode]:
    """The mode the judge runs each probe kind in for this model (:func:`~reverie_canary.services.judge.core.mode_of`)."""
    return {kind: mode_of(state, policy, kind) for kind in kinds}


def decision_line(d: Any) -> str:
    """One decision (a :class:`~reverie_canary.shared.contract.events.Decision` or a view of one), with the mode it was made in."""
    until = f" until {utc_text(d.until, missing='-')}" if getattr(d, "until", None) else ""
    kind = f" ({d.kind})" if getattr(d, "kind", None) else ""
    return f"{utc_text(d.at, missing='-')}  {d.action:<14} [{d.mode}]{kind}{until}  {d.reason}: {d.detail}"


def explain_provider(state: ModelState, provider: str, policy: Policy, *, kinds: Iterable[str] = PROBE_KINDS,
                     decisions: Sequence[Any] = ()) -> str:
    """Why ``provider`` is where it is: streaks, suspension, ladder, recent cycles and their results.

    Args:
        state: the model's judge state.
        provider: the provider tag.
        policy: the thresholds (and default modes).
        kinds: the configured probe kinds, for the header's modes.
        decisions: the provider's recent decisions from the log (oldest first), shown with their modes.

    Raises:
        KeyError: the provider is unknown to this model's state.
    """
    ps = state.providers[provider]
    modes = modes_of(state, policy, kinds)
    mixed = len(set(modes.values())) > 1
    lines = [f"{provider} on {state.model} ({modes_text(modes)})"]
    if ps.suspension is not None:
        s = ps.suspension
        kind = "SUSPENDED [enforce]" if s.enforced else "would be suspended [observe]"
        lines.append(f"  {kind} since {utc_text(s.since, missing='-')} until {utc_text(s.until, missing='-')} (ladder step {s.level}, decision {s.decision_id})")
        lines.append(f"    because of cycles: {', '.join(s.cycles)}")
        for r in s.evidence:
            now_in = f" [{modes.get(r.kind, mode_of(state, policy, r.kind))} now]" if mixed else ""
            lines.append(f"    - {r.cycle}  {r.kind}: {r.outcome} {r.reason}  (task {r.task_id}){now_in}")
        lines.append(f"    it ends early after {policy.passed_cycles_to_recover} passed cycles in a row "
                     f"(now {ps.passed_streak})")
    else:
        lines.append("  not suspended")
    lines.append(f"  streaks: failed {ps.failed_streak} (suspends at {policy.failed_cycles_to_suspend}), "
                 f"passed {ps.passed_streak}, frozen {ps.frozen_streak}")
    step = min(ps.ladder_level, len(policy.ladder_s) - 1)
    lines.append(f"  ladder: {ps.ladder_level} suspension(s) since it last reset; next would last "
                 f"{human_duration(policy.ladder_s[step])}; last suspension {utc_text(ps.last_suspension_at, missing='-')}; "
                 f"resets {human_duration(policy.ladder_reset_s)} after it")
    if not ps.present:
        lines.append("  not listed by the gateway in the latest discovery (history kept)")
    if ps.history:
        lines.append("  recent cycles:")
        for h in ps.history[-8:]:
            why = ", ".join(h.reasons) if h.reasons else ""
            lines.append(f"    {utc_text(h.at, missing='-')}  {h.verdict:<7} {why}")
            for r in h.results:
                if r.outcome != "pass":
                    now_in = f" [{modes.get(r.kind, mode_of(state, policy, r.kind))} now]" if mixed else ""
                    lines.append(f"        {r.kind}: {r.outcome} {r.reason} ({r.task_id}){now_in}")
    if decisions:
        lines.append("  recent decisions (the mode each was made in):")
        for d in decisions:
            lines.append("    " + decision_line(d))
    return "\n".join(lines)


class ShadowCallView(Struct, frozen=True, kw_only=True):
    """One observe-mode would-be suspension and how it turned out (UTC times)."""

    decision_id: str
    provider: str
    at: datetime
    outcome: str
    resolved_at: datetime | None = None
    mode: Mode = "observe"


#: The group of endpoints that declare no quantization in :class:`QuantGroup`.
UNDECLARED = "undeclared"


class QuantGroup(Struct, frozen=True, kw_only=True):
    """The cycle verdicts of one model's endpoints of one quantization (``canary report``).

    ``quantization``: as the listing declared it at each verdict (``undeclared``
    when it declared none); ``providers`` the endpoints counted in it;
    ``passed``/``failed``/``frozen``/``blind`` their cycle verdicts;
    ``failed_share`` failed over judged (passed + failed) cycles, ``None`` when none was judged.
    """

    quantization: str
    providers: list[str]
    passed: int = 0
    failed: int = 0
    frozen: int = 0
    blind: int = 0
    failed_share: float | None = None


class QuantTally:
    """Counts cycle verdicts per model and quantization while the log is folded (bounded by models x endpoints).

    Feed it discovery's listings (:meth:`see`: each endpoint's quantization, a large
    listing's parts merged) and the judge's verdicts (:meth:`count`: each provider's
    verdict under the quantization its latest listing declared).
    """

    def __init__(self) -> None:
        self._quant: dict[str, dict[str, str | None]] = {}
        self._counts: dict[str, dict[str, Counter[str]]] = {}
        self._providers: dict[str, dict[str, set[str]]] = {}

    def see(self, event: EndpointsDiscovered) -> None:
        """Remember the quantization each endpoint of the listing declares."""
        known = self._quant.setdefault(event.model, {})
        for e in event.endpoints:
            known[e.provider] = quant.normalise(e.quantization)

    def count(self, verdict: CycleVerdict) -> None:
        """Count each provider's verdict of a closed cycle under its quantization."""
        known = self._quant.get(verdict.model, {})
        counts = self._counts.setdefault(verdict.model, {})
        providers = self._providers.setdefault(verdict.model, {})
        for pv in verdict.verdicts:
            q = known.get(pv.provider) or UNDECLARED
            counts.setdefault(q, Counter())[pv.verdict] += 1
            providers.setdefault(q, set()).add(pv.provider)

    def groups(self, model: str) -> list[QuantGroup]:
        """The model's groups, most bits first (``undeclared`` and values outside the table last)."""
        out = []
        for q, c in self._counts.get(model, {}).items():
            judged = c["passed"] + c["failed"]
            out.append(QuantGroup(quantization=q, providers=sorted(self._providers[model][q]), passed=c["passed"],
                                  failed=c["failed"], frozen=c["frozen"], blind=c["blind"],
                                  failed_share=round(c["failed"] / judged, 4) if judged else None))
        return sorted(out, key=lambda g: (-quant.BITS.get(g.quantization, 0), g.quantization))


def quant_lines(groups: Sequence[QuantGroup]) -> list[str]:
    """``  fp8 (9 providers): 120 passed, 3 failed (2.4% of judged cycles), 5 frozen`` per group."""
    lines = []
    for g in groups:
        share = f" ({g.failed_share:.1%} of judged cycles)" if g.failed_share is not None else ""
        extra = "".join(f", {n} {word}" for n, word in ((g.frozen, "frozen"), (g.blind, "blind")) if n)
        lines.append(f"    {g.quantization} ({len(g.providers)} provider{'s' if len(g.providers) != 1 else ''}): "
                     f"{g.passed} passed, {g.failed} failed{share}{extra}")
    return lines


class ShadowReport(Struct, frozen=True, kw_only=True):
    """Observe mode's record for one model (``canary report --json``).

    ``source`` says what it was folded from (``log``); ``events`` how many log
    events; ``log_start`` when the log's oldest event was stored (calls before it
    are not counted); ``redis_calls`` how many calls the judge's stored state
    holds (``None``: no state in Redis), ``redis_agrees`` whether it holds the same;
    ``by_quantization`` the log's cycle verdicts grouped by the quantization each
    endpoint declared (:class:`QuantGroup`).
    """

    model: str
    modes: dict[str, Mode]
    calls: list[ShadowCallView]
    right: int
    wrong: int
    pending: int
    precision: float | None
    source: str = "log"
    events: int = 0
    log_start: datetime | None = None
    redis_calls: int | None = None
    redis_agrees: bool | None = None
    by_quantization: list[QuantGroup] = []


def shadow_scorecard(state: ModelState, policy: Policy, *, kinds: Iterable[str] = PROBE_KINDS,
                     modes_by_decision: dict[str, Mode] | None = None, events: int = 0,
                     log_start: datetime | None = None, stored: ModelState | None = None,
                     by_quantization: list[QuantGroup] | None = None) -> ShadowReport:
    """Observe mode's scorecard of ``state`` (folded from the log), compared with the ``stored`` one.

    Args:
        modes_by_decision: decision id -> the mode its decision was made in (from the fold's effects).
        by_quantization: the verdicts per quantization (:meth:`QuantTally.groups`).
    """
    modes_by_decision = modes_by_decision or {}
    calls = [ShadowCallView(decision_id=c.decision_id, provider=c.provider, at=c.at, outcome=c.outcome,
                            resolved_at=c.resolved_at, mode=modes_by_decision.get(c.decision_id, "observe"))
             for c in state.shadow_calls]
    counts = Counter(c.outcome for c in state.shadow_calls)
    resolved = counts["right"] + counts["wrong"]
    return ShadowReport(
        model=state.model, modes=modes_of(state, policy, kinds), calls=calls, right=counts["right"],
        wrong=counts["wrong"], pending=counts["pending"],
        precision=round(counts["right"] / resolved, 4) if resolved else None, events=events, log_start=log_start,
        redis_calls=len(stored.shadow_calls) if stored is not None else None,
        redis_agrees=(stored.shadow_calls == state.shadow_calls) if stored is not None else None,
        by_quantization=list(by_quantization or []),
    )


def shadow_report(state: ModelState, policy: Policy | None = None, *, report: ShadowReport | None = None) -> str:
    """Observe mode's scorecard as text: would-be suspensions that proved right, wrong, or are pending."""
    r = report or shadow_scorecard(state, policy or Policy())
    total = len(r.calls)
    lines = [f"{r.model} ({modes_text(r.modes)}): {total} would-be suspension(s): {r.right} right (kept failing), "
             f"{r.wrong} wrong (passed the next cycles), {r.pending} pending"]
    if r.precision is not None:
        lines.append(f"  precision so far: {r.precision:.0%} of the resolved calls were right")
    for c in r.calls[-20:]:
        lines.append(f"  {utc_text(c.at, missing='-')}  {c.provider:<28} [{c.mode}] {c.outcome:<8} resolved {utc_text(c.resolved_at, missing='-')}")
    if r.by_quantization:
        lines.append("  cycle verdicts by quantization (as each endpoint's listing declared it):")
        lines += quant_lines(r.by_quantization)
    return "\n".join(lines)
