"""Plain-text explanations of judge state for operators (``canary explain``, ``canary report``)."""

from __future__ import annotations

from collections import Counter

from reverie_canary.services.judge.core import ModelState, Policy, human_duration, mode_of


def _t(dt) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ") if dt else "-"


def explain_provider(state: ModelState, provider: str, policy: Policy) -> str:
    """Why ``provider`` is where it is: streaks, suspension, ladder, recent cycles and their results.

    Raises:
        KeyError: the provider is unknown to this model's state.
    """
    ps = state.providers[provider]
    lines = [f"{provider} on {state.model} (mode: {mode_of(state, policy)})"]
    if ps.suspension is not None:
        s = ps.suspension
        kind = "SUSPENDED" if s.enforced else "would be suspended (observe mode)"
        lines.append(f"  {kind} since {_t(s.since)} until {_t(s.until)} (ladder step {s.level}, decision {s.decision_id})")
        lines.append(f"    because of cycles: {', '.join(s.cycles)}")
        for r in s.evidence:
            lines.append(f"    - {r.cycle}  {r.kind}: {r.outcome} {r.reason}  (task {r.task_id})")
        lines.append(f"    it ends early after {policy.passed_cycles_to_recover} passed cycles in a row "
                     f"(now {ps.passed_streak})")
    else:
        lines.append("  not suspended")
    lines.append(f"  streaks: failed {ps.failed_streak} (suspends at {policy.failed_cycles_to_suspend}), "
                 f"passed {ps.passed_streak}, frozen {ps.frozen_streak}")
    step = min(ps.ladder_level, len(policy.ladder_s) - 1)
    lines.append(f"  ladder: {ps.ladder_level} suspension(s) since it last reset; next would last "
                 f"{human_duration(policy.ladder_s[step])}; last suspension {_t(ps.last_suspension_at)}; "
                 f"resets {human_duration(policy.ladder_reset_s)} after it")
    if not ps.present:
        lines.append("  not listed by the gateway in the latest discovery (history kept)")
    if ps.history:
        lines.append("  recent cycles:")
        for h in ps.history[-8:]:
            why = ", ".join(h.reasons) if h.reasons else ""
            lines.append(f"    {_t(h.at)}  {h.verdict:<7} {why}")
            for r in h.results:
                if r.outcome != "pass":
                    lines.append(f"        {r.kind}: {r.outcome} {r.reason} ({r.task_id})")
    return "\n".join(lines)


def shadow_report(state: ModelState) -> str:
    """Observe mode's scorecard: would-be suspensions that proved right, wrong, or are pending."""
    counts = Counter(c.outcome for c in state.shadow_calls)
    total = sum(counts.values())
    lines = [f"{state.model}: {total} would-be suspension(s): {counts['right']} right (kept failing), "
             f"{counts['wrong']} wrong (passed the next cycles), {counts['pending']} pending"]
    if counts["right"] + counts["wrong"]:
        share = counts["right"] / (counts["right"] + counts["wrong"])
        lines.append(f"  precision so far: {share:.0%} of the resolved calls were right")
    for c in state.shadow_calls[-20:]:
        lines.append(f"  {_t(c.at)}  {c.provider:<28} {c.outcome:<8} resolved {_t(c.resolved_at)}")
    return "\n".join(lines)
