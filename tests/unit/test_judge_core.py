"""The judge's policy as a pure fold: every rule of docs/concepts/judge.md."""

from __future__ import annotations

from datetime import timedelta

import pytest

from reverie_canary.services.judge.core import Policy, decide, fold, initial
from reverie_canary.shared.contract.commands import LiftSuspension, SetMode
from reverie_canary.shared.contract.events import CycleVerdict, Decision, RetestRequested
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot
from reverie_canary.shared.runtime.settings import Settings
from tests.judge_events import CYCLE, MODEL, T0, cycle_events, healthy

ENFORCE = Policy(mode="enforce")
FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8", "e/fp8")


def bad(provider: str, kind: str = "ttft", reason: str = "ttft_exceeded") -> dict:
    out = healthy(*FLEET)
    out[provider][kind] = ("fail", reason)
    return out


def run(cycles: list[list], policy: Policy = ENFORCE):
    states, effects = fold([e for c in cycles for e in c], policy)
    return states[MODEL], effects


def decisions(effects, action: str | None = None) -> list[Decision]:
    return [e for e in effects if isinstance(e, Decision) and (action is None or e.action == action)]


def test_two_consecutive_failed_cycles_suspend_for_one_day():
    """Two failed cycles in a row suspend the provider for the first ladder step (1 day)."""
    state, effects = run([cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))])
    [suspend] = decisions(effects, "suspend")
    assert suspend.provider == "a/fp8"
    assert suspend.until == T0 + CYCLE + timedelta(minutes=10) + timedelta(days=1)
    assert suspend.ladder_level == 1
    assert [r.reason for r in suspend.evidence] == ["ttft_exceeded", "ttft_exceeded"]
    assert len(suspend.cycles) == 2
    assert state.providers["a/fp8"].suspension is not None


def test_one_failed_cycle_does_not_suspend():
    """One strange cycle is not proof: a single failed cycle decides nothing."""
    _, effects = run([cycle_events(0, bad("a/fp8"))])
    assert decisions(effects) == []


def test_passed_cycle_between_failures_resets_the_streak():
    """failed, passed, failed: the streak restarts, no suspension."""
    _, effects = run([cycle_events(0, bad("a/fp8")), cycle_events(1, healthy(*FLEET)), cycle_events(2, bad("a/fp8"))])
    assert decisions(effects, "suspend") == []


def test_transport_errors_freeze_the_streak():
    """failed, transport-only, failed: frozen neither grows nor resets, so the second failure suspends."""
    flaky = healthy(*FLEET)
    flaky["a/fp8"] = {"ttft": ("transport_error", "http_503"), "structured": ("transport_error", "http_502")}
    state, effects = run([cycle_events(0, bad("a/fp8")), cycle_events(1, flaky), cycle_events(2, bad("a/fp8"))])
    verdicts = [v for e in effects if isinstance(e, CycleVerdict) for v in e.verdicts if v.provider == "a/fp8"]
    assert [v.verdict for v in verdicts] == ["failed", "frozen", "failed"]
    assert [d.provider for d in decisions(effects, "suspend")] == ["a/fp8"]


def test_flaky_provider_is_never_suspended():
    """A provider with only transport errors over many cycles never grows a streak."""
    cycles = []
    for n in range(8):
        out = healthy(*FLEET)
        out["a/fp8"] = {"ttft": ("transport_error", "http_500"), "structured": "pass"} if n % 2 else healthy("a/fp8")["a/fp8"]
        cycles.append(cycle_events(n, out))
    state, effects = run(cycles)
    assert decisions(effects) == []
    assert state.providers["a/fp8"].failed_streak == 0


def test_missing_results_freeze():
    """A result missing at CycleClosed makes the cycle frozen, not passed."""
    state, effects = run([cycle_events(0, healthy(*FLEET), missing={("a/fp8", "ttft")})])
    [verdict] = [e for e in effects if isinstance(e, CycleVerdict)]
    a = next(v for v in verdict.verdicts if v.provider == "a/fp8")
    assert a.verdict == "frozen" and a.missing
    assert state.providers["a/fp8"].frozen_streak == 1


def test_quality_fail_beats_transport_error_in_the_same_cycle():
    """Any quality fail makes the cycle failed, even next to transport errors."""
    out = healthy(*FLEET)
    out["a/fp8"] = {"ttft": ("transport_error", "http_503"), "structured": ("fail", "schema_invalid")}
    _, effects = run([cycle_events(0, out)])
    verdict = next(e for e in effects if isinstance(e, CycleVerdict))
    assert next(v for v in verdict.verdicts if v.provider == "a/fp8").verdict == "failed"


def test_ladder_is_one_three_seven_days():
    """Successive suspensions last 1, 3, then 7 days (and 7 again after that)."""
    cycles, n, lengths = [], 0, []
    for _ in range(4):
        cycles += [cycle_events(n, bad("a/fp8")), cycle_events(n + 1, bad("a/fp8"))]
        n += 2
        # after the suspension expires (at most 7 days = 336 cycles), start again
        n += 7 * 48 + 1
        cycles.append(cycle_events(n, healthy(*FLEET)))
        n += 1
    _, effects = run(cycles)
    for d in decisions(effects, "suspend"):
        lengths.append((d.until - d.at).days)
    assert lengths == [1, 3, 7, 7]


def test_ladder_resets_after_fourteen_quiet_days():
    """14 days without a new suspension: the next one is 1 day again."""
    first = [cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))]
    n = 1 + 14 * 48 + 2
    second = [cycle_events(n, bad("a/fp8")), cycle_events(n + 1, bad("a/fp8"))]
    _, effects = run(first + [cycle_events(100, healthy(*FLEET))] + second)
    lengths = [(d.until - d.at).days for d in decisions(effects, "suspend")]
    assert lengths == [1, 1]


def test_ladder_advances_within_fourteen_days():
    """A second suspension 13 days after the first is 3 days long."""
    first = [cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))]
    n = 13 * 48
    second = [cycle_events(n, bad("a/fp8")), cycle_events(n + 1, bad("a/fp8"))]
    _, effects = run(first + [cycle_events(100, healthy(*FLEET))] + second)
    assert [(d.until - d.at).days for d in decisions(effects, "suspend")] == [1, 3]


def test_suspension_expires_at_its_until():
    """A suspension ends with reason expired, stamped at its until, at the next event after it."""
    cycles = [cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))]
    later = 1 + 48 + 2
    state, effects = run(cycles + [cycle_events(later, healthy(*FLEET))])
    [end] = decisions(effects, "end")
    [suspend] = decisions(effects, "suspend")
    assert end.reason == "expired" and end.at == suspend.until
    assert state.providers["a/fp8"].suspension is None


def test_two_passed_cycles_end_a_suspension_early_and_keep_the_ladder():
    """Recovered: two passed cycles in a row end the suspension; the next one is 3 days."""
    cycles = [cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8")),
              cycle_events(2, healthy(*FLEET)), cycle_events(3, healthy(*FLEET)),
              cycle_events(4, bad("a/fp8")), cycle_events(5, bad("a/fp8"))]
    state, effects = run(cycles)
    ends = decisions(effects, "end")
    assert [e.reason for e in ends] == ["recovered"]
    assert [(d.until - d.at).days for d in decisions(effects, "suspend")] == [1, 3]
    assert state.providers["a/fp8"].ladder_level == 2


def test_a_suspended_provider_that_keeps_failing_stays_suspended():
    """Failing while suspended neither ends nor renews the suspension."""
    cycles = [cycle_events(n, bad("a/fp8")) for n in range(6)]
    _, effects = run(cycles)
    assert len(decisions(effects, "suspend")) == 1
    assert decisions(effects, "end") == []


def test_capacity_floor_holds_and_is_reconsidered_each_failed_cycle():
    """Floor 4 of 5 hosts, two failing: the second suspension would leave 3 < 4, held every failed cycle."""
    out = healthy(*FLEET)
    out["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    out["b/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    state, effects = run([cycle_events(n, out) for n in range(4)], Policy(mode="enforce", min_hosts=4))
    suspended = [d.provider for d in decisions(effects, "suspend")]
    held = decisions(effects, "floor_held")
    assert suspended == ["a/fp8"]
    assert [d.provider for d in held] == ["b/fp8", "b/fp8", "b/fp8"]
    assert "only 3 usable host(s) would remain (floor 4)" in held[0].detail


def test_capacity_floor_counts_routing_exclusions_and_overrides():
    """Hosts already ignored by reviewed exclusions or overrides do not count as usable."""
    snapshot = IgnoreSnapshot(at=T0, model=MODEL, version=1, entries=[
        IgnoreEntry(provider="c/fp8", reasons=[IgnoreReason(layer="exclusion", reason="reviewed")]),
        IgnoreEntry(provider="d/fp8", reasons=[IgnoreReason(layer="override", reason="incident", actor="ops")]),
        IgnoreEntry(provider="e/fp8", reasons=[IgnoreReason(layer="override", reason="incident", actor="ops")]),
    ])
    _, effects = run([[snapshot], cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))])
    # usable: a, b; suspending a leaves only b
    assert decisions(effects, "suspend") == []
    assert [d.provider for d in decisions(effects, "floor_held")] == ["a/fp8"]


def test_expired_override_counts_as_usable_again():
    """An override whose until has passed at the decision time no longer reduces capacity."""
    snapshot = IgnoreSnapshot(at=T0, model=MODEL, version=1, entries=[
        IgnoreEntry(provider=p, reasons=[IgnoreReason(layer="override", reason="x", until=T0 + timedelta(minutes=5))])
        for p in ("c/fp8", "d/fp8", "e/fp8")
    ])
    _, effects = run([[snapshot], cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))])
    assert [d.provider for d in decisions(effects, "suspend")] == ["a/fp8"]


def test_observe_mode_announces_would_suspend_and_scores_the_call():
    """Observe mode: would_suspend instead of suspend; a later failure makes the call 'right'."""
    policy = Policy(mode="observe")
    cycles = [cycle_events(n, bad("a/fp8")) for n in range(3)]
    state, effects = run(cycles, policy)
    assert decisions(effects, "suspend") == []
    [would] = decisions(effects, "would_suspend")
    assert would.mode == "observe"
    assert [c.outcome for c in state.shadow_calls] == ["right"]


def test_observe_mode_call_is_wrong_when_the_provider_passes_next():
    """A would-be suspension followed by two passed cycles is scored 'wrong' and would_end recovered."""
    policy = Policy(mode="observe")
    cycles = [cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8")),
              cycle_events(2, healthy(*FLEET)), cycle_events(3, healthy(*FLEET))]
    state, effects = run(cycles, policy)
    assert [c.outcome for c in state.shadow_calls] == ["wrong"]
    assert [d.reason for d in decisions(effects, "would_end")] == ["recovered"]


def test_per_kind_observe_mode_shadows_a_new_kind():
    """A kind set to observe yields would_suspend while enforce kinds suspend."""
    policy = Policy(mode="enforce", kind_modes={"echo": "observe"})
    out = {p: {"ttft": "pass", "echo": "pass"} for p in FLEET}
    out["a/fp8"]["echo"] = ("fail", "echo_mismatch")
    out["b/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    _, effects = run([cycle_events(0, out), cycle_events(1, out)], policy)
    assert [d.provider for d in decisions(effects, "would_suspend")] == ["a/fp8"]
    assert [d.provider for d in decisions(effects, "suspend")] == ["b/fp8"]


def test_operator_switches_mode_at_run_time():
    """SetMode to enforce turns the next streak into a real suspension."""
    policy = Policy(mode="observe")
    cmd = SetMode(command_id="m1", actor="alice", at=T0, mode="enforce", model=MODEL)
    state, effects = run([[cmd], cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))], policy)
    assert [d.action for d in decisions(effects)] == ["mode_changed", "suspend"]


def test_lift_ends_a_suspension_at_once_and_starts_clean_streaks():
    """An operator lift ends the suspension (actor recorded); one more failed cycle does not re-suspend."""
    cycles = [cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))]
    lift = LiftSuspension(command_id="lift-1", actor="bob", at=T0 + 2 * CYCLE, provider="a/fp8", model=MODEL,
                          reason="false alarm, provider fixed")
    state, effects = run(cycles + [[lift], cycle_events(3, bad("a/fp8"))])
    [end] = decisions(effects, "end")
    assert end.reason == "lifted" and end.actor == "bob"
    assert state.providers["a/fp8"].suspension is None
    assert state.providers["a/fp8"].failed_streak == 1


def test_duplicate_events_change_nothing():
    """Every event delivered twice gives the same state and the same effects as once."""
    events = cycle_events(0, bad("a/fp8")) + cycle_events(1, bad("a/fp8"))
    once_states, once_effects = fold(events, ENFORCE)
    twice_states, twice_effects = fold([e for ev in events for e in (ev, ev)], ENFORCE)
    assert twice_states == once_states
    assert twice_effects == once_effects


def test_results_in_any_order_within_a_cycle_give_the_same_state():
    """Reordering results inside a cycle does not change the state or the decisions."""
    c0, c1 = cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))
    shuffled = [c0[0], *reversed(c0[1:-1]), c0[-1], c1[0], *reversed(c1[1:-1]), c1[-1]]
    s1, e1 = fold(c0 + c1, ENFORCE)
    s2, e2 = fold(shuffled, ENFORCE)
    assert s1 == s2
    assert [d for d in e1 if isinstance(d, Decision)] == [d for d in e2 if isinstance(d, Decision)]


def test_late_results_after_close_do_not_count():
    """A result arriving after its cycle closed changes nothing."""
    c0 = cycle_events(0, healthy(*FLEET), missing={("a/fp8", "ttft")})
    late = cycle_events(0, bad("a/fp8"))[1:-1]
    state_a, _ = fold(c0, ENFORCE)
    state_b, effects = fold(c0 + late, ENFORCE)
    assert state_a == state_b


def test_common_mode_freezes_a_kind_most_providers_fail():
    """More than half of the providers failing one kind freezes that kind for everyone."""
    out = healthy(*FLEET)
    for p in ("a/fp8", "b/fp8", "c/fp8"):
        out[p]["structured"] = ("fail", "schema_invalid")
    state, effects = run([cycle_events(0, out), cycle_events(1, out)])
    assert decisions(effects, "suspend") == []
    assert len(decisions(effects, "common_mode")) == 2
    verdict = next(e for e in effects if isinstance(e, CycleVerdict))
    assert verdict.common_mode == ["structured"]
    assert {v.verdict for v in verdict.verdicts} == {"frozen"}


def test_positive_control_passing_makes_the_kind_unproven():
    """A control that passes: that kind's results prove nothing this cycle, operators are told."""
    out = bad("a/fp8", kind="refusal", reason="refusal")
    for p in FLEET:
        out[p].setdefault("refusal", "pass")
    controls = {"ctl/filter": {"refusal": "pass"}}
    state, effects = run([cycle_events(0, out, controls=controls), cycle_events(1, out, controls=controls)])
    assert decisions(effects, "suspend") == []
    [first, second] = decisions(effects, "control_passed")
    assert first.kind == "refusal"
    assert "ctl/filter" not in state.providers


def test_positive_control_failing_lets_results_count():
    """A control that fails as expected: the kind is proven and failures suspend."""
    out = bad("a/fp8", kind="refusal", reason="refusal")
    for p in FLEET:
        out[p].setdefault("refusal", "pass")
    controls = {"ctl/filter": {"refusal": ("fail", "refusal")}}
    _, effects = run([cycle_events(0, out, controls=controls), cycle_events(1, out, controls=controls)])
    assert [d.provider for d in decisions(effects, "suspend")] == ["a/fp8"]


def test_pin_violation_freezes_and_is_reported():
    """A pinned probe served by another provider is inconclusive and reported as pin_violated."""
    out = healthy(*FLEET)
    out["a/fp8"]["ttft"] = ("inconclusive", "pin_violated")
    state, effects = run([cycle_events(0, out)])
    [d] = decisions(effects, "pin_violated")
    assert d.provider == "a/fp8"
    assert state.providers["a/fp8"].frozen_streak == 1


def test_pin_violation_is_announced_once_a_stretch():
    """Violated three cycles running: one decision; served right once, then violated again: a second one."""
    out = healthy(*FLEET)
    out["a/fp8"]["ttft"] = ("inconclusive", "pin_violated")
    gone = {p: v for p, v in healthy(*FLEET).items() if p != "a/fp8"}
    cycles = [cycle_events(0, out), cycle_events(1, out), cycle_events(2, out), cycle_events(3, healthy(*FLEET)),
              cycle_events(4, out), cycle_events(5, gone), cycle_events(6, out)]
    _, effects = run(cycles)
    assert [d.at for d in decisions(effects, "pin_violated")] == [
        T0 + n * CYCLE + timedelta(minutes=10) for n in (0, 4, 6)]


def test_unjudgeable_after_six_frozen_cycles_is_reported_once():
    """Six frozen cycles in a row: one unjudgeable decision, not one per cycle."""
    out = healthy(*FLEET)
    out["a/fp8"] = {"ttft": ("transport_error", "http_503"), "structured": ("transport_error", "http_503")}
    _, effects = run([cycle_events(n, out) for n in range(9)])
    [d] = decisions(effects, "unjudgeable")
    assert d.provider == "a/fp8" and len(d.cycles) == 6


def test_language_anomaly_requests_a_retest_next_cycle():
    """A language fail asks discovery to probe that language again in the next cycle."""
    out = {p: {"language": "pass"} for p in FLEET}
    out["a/fp8"]["language"] = ("fail", "language_switch")
    _, effects = run([cycle_events(3, out)])
    [retest] = [e for e in effects if isinstance(e, RetestRequested)]
    assert (retest.provider, retest.language, retest.for_cycle_no) == ("a/fp8", "pt", 4)


@pytest.mark.parametrize("outcome, reason, retest", [
    ("fail", "language_mix", True),
    ("fail", "encoding_broken", True),
    ("fail", "foreign_script", True),
    ("inconclusive", "neighbour", True),
    ("inconclusive", "no_majority", True),
    # the same reply failing a behavioural check: nothing language-specific to retest
    ("fail", "leading_junk", False),
    ("fail", "bytelevel_tokens", False),
    ("fail", "word_salad", False),
    ("fail", "reserved_tokens", False),
    ("fail", "refusal", False),
    ("inconclusive", "too_short", False),
    ("inconclusive", "pin_violated", False),
    ("transport_error", "http_503", False),
])
def test_only_a_language_anomaly_asks_for_a_retest(outcome, reason, retest):
    """docs/concepts/probes.md, the language contract: switch, mixing, encoding, ambiguity are the language's; the rest are not."""
    out = {p: {"language": "pass"} for p in FLEET}
    out["a/fp8"]["language"] = (outcome, reason)
    _, effects = run([cycle_events(3, out)])
    retests = [(e.provider, e.language) for e in effects if isinstance(e, RetestRequested)]
    assert retests == ([("a/fp8", "pt")] if retest else [])


def test_a_language_result_missing_at_close_is_probed_again_next_cycle():
    """A late language result leaves its language unproven: retest it (reason missing); a late ttft asks nothing."""
    out = {p: {"language": "pass", "ttft": "pass"} for p in FLEET}
    _, effects = run([cycle_events(5, out, missing={("a/fp8", "language"), ("b/fp8", "ttft")})])
    retests = [(e.provider, e.language, e.for_cycle_no, e.reason) for e in effects if isinstance(e, RetestRequested)]
    assert retests == [("a/fp8", "pt", 6, "missing")]


def test_provider_that_disappears_keeps_its_history():
    """A provider missing from discovery keeps its streak and resumes it when it returns."""
    c0 = cycle_events(0, bad("a/fp8"))
    without = {p: v for p, v in healthy(*FLEET).items() if p != "a/fp8"}
    c1 = cycle_events(1, without)
    c2 = cycle_events(2, bad("a/fp8"))
    state, effects = run([c0, c1, c2])
    assert [d.provider for d in decisions(effects, "suspend")] == ["a/fp8"]


def test_foreign_and_unknown_events_are_ignored():
    """Events of another model, or of no known type, return the same state object."""
    state = initial(MODEL)
    other = cycle_events(0, bad("a/fp8"), model="other/model")[0]
    assert decide(state, other, ENFORCE) == (state, [])
    assert decide(state, object(), ENFORCE) == (state, [])


def test_observe_mode_calls_do_not_climb_the_real_ladder():
    """Two would-be suspensions in observe mode, then enforce: the first real suspension is 1 day, not 7."""
    policy = Policy(mode="observe")
    cycles = []
    n = 0
    for _ in range(2):
        cycles += [cycle_events(n, bad("a/fp8")), cycle_events(n + 1, bad("a/fp8"))]
        n += 2 + 3 * 48 + 1
        cycles.append(cycle_events(n, healthy(*FLEET)))
        n += 1
    go_live = SetMode(command_id="live", actor="alice", at=T0 + n * CYCLE, mode="enforce", model=MODEL)
    cycles += [[go_live], cycle_events(n + 1, bad("a/fp8")), cycle_events(n + 2, bad("a/fp8"))]
    state, effects = run(cycles, policy)
    assert [(d.until - d.at).days for d in decisions(effects, "would_suspend")] == [1, 3]
    [real] = decisions(effects, "suspend")
    assert (real.until - real.at).days == 1 and real.ladder_level == 1
    assert (state.providers["a/fp8"].ladder_level, state.providers["a/fp8"].shadow_level) == (1, 2)


def test_a_longer_cycle_interval_keeps_judging():
    """Cycle numbers drop when the interval grows (epoch // interval); later cycles are still judged."""
    from datetime import datetime, timezone

    start = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
    short = [cycle_events(n, bad("a/fp8"), start=start + i * timedelta(seconds=20))
             for i, n in enumerate((89_000_000, 89_000_001))]
    later = start + timedelta(minutes=5)
    long_ = [cycle_events(n, bad("b/fp8"), start=later + i * timedelta(seconds=60))
             for i, n in enumerate((29_700_000, 29_700_001))]
    state, effects = run(short + long_)
    assert [d.provider for d in decisions(effects, "suspend")] == ["a/fp8", "b/fp8"]


def test_a_stale_discovery_from_before_the_last_closed_cycle_is_ignored():
    """An EndpointsDiscovered older than the last closed cycle (a replayed old message) opens nothing."""
    c0, c1 = cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))
    state, _ = run([c0, c1])
    again, effects = decide(state, c0[0], ENFORCE)
    assert again is state and effects == []


def test_a_provider_failing_across_a_switch_to_enforce_is_suspended_at_the_second_failed_cycle():
    """Mode decides the action, never the evidence: failed in observe, switched, failed again: suspend at once."""
    policy = Policy(mode="observe")
    go_live = SetMode(command_id="live", actor="alice", at=T0 + CYCLE - timedelta(minutes=1), mode="enforce",
                      model=MODEL)
    state, effects = run([cycle_events(0, bad("a/fp8")), [go_live], cycle_events(1, bad("a/fp8"))], policy)
    [suspend] = decisions(effects, "suspend")
    assert (suspend.provider, suspend.mode, suspend.ladder_level) == ("a/fp8", "enforce", 1)
    assert len(suspend.cycles) == 2 and [r.reason for r in suspend.evidence] == ["ttft_exceeded", "ttft_exceeded"]
    assert decisions(effects, "would_suspend") == []
    assert state.providers["a/fp8"].suspension.enforced


def test_a_shadow_suspension_gives_way_at_the_first_enforced_failure():
    """Two failed cycles in observe (would_suspend), switch, one more failed cycle: a real suspension then."""
    policy = Policy(mode="observe")
    go_live = SetMode(command_id="live", actor="alice", at=T0 + 2 * CYCLE - timedelta(minutes=1), mode="enforce",
                      model=MODEL)
    state, effects = run([cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8")), [go_live],
                          cycle_events(2, bad("a/fp8"))], policy)
    assert [(d.action, d.at) for d in decisions(effects) if d.provider] == [
        ("would_suspend", T0 + CYCLE + timedelta(minutes=10)), ("suspend", T0 + 2 * CYCLE + timedelta(minutes=10))]
    ps = state.providers["a/fp8"]
    assert ps.suspension.enforced and (ps.ladder_level, ps.shadow_level) == (1, 1)
    assert [c.outcome for c in state.shadow_calls] == ["right"]


def test_the_mode_of_the_kinds_failing_in_the_closing_cycle_decides():
    """Enforce model, echo in observe: ttft failed, then echo failed: would_suspend (echo is observed)."""
    policy = Policy(mode="enforce", kind_modes={"echo": "observe"})
    first = {p: {"ttft": "pass", "echo": "pass"} for p in FLEET}
    first["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    second = {p: {"ttft": "pass", "echo": "pass"} for p in FLEET}
    second["a/fp8"]["echo"] = ("fail", "echo_mismatch")
    state, effects = run([cycle_events(0, first), cycle_events(1, second)], policy)
    assert [d.action for d in decisions(effects)] == ["would_suspend"]
    # and the reverse order: the closing cycle's ttft is enforced
    _, effects = run([cycle_events(0, second), cycle_events(1, first)], policy)
    assert [d.action for d in decisions(effects)] == ["suspend"]


def test_a_shadow_suspension_in_observe_mode_stays_one_call_while_failures_go_on():
    """In observe mode a provider that keeps failing gets one would_suspend, not one per cycle."""
    state, effects = run([cycle_events(n, bad("a/fp8")) for n in range(5)], Policy(mode="observe"))
    assert [d.action for d in decisions(effects)] == ["would_suspend"]
    assert state.providers["a/fp8"].failed_streak == 5


def test_the_routing_decisions_of_one_close_say_how_many_of_them_follow():
    """Three providers suspended at one close: routing_follows 2, 1, 0 (the router makes one version of them)."""
    out = healthy(*FLEET, "f/fp8", "g/fp8")
    for p in ("a/fp8", "b/fp8", "c/fp8"):
        out[p]["ttft"] = ("fail", "ttft_exceeded")
    _, effects = run([cycle_events(0, out), cycle_events(1, out)])
    assert [(d.provider, d.routing_follows) for d in decisions(effects, "suspend")] == [
        ("a/fp8", 2), ("b/fp8", 1), ("c/fp8", 0)]
    # one suspension alone: nothing follows it
    _, effects = run([cycle_events(0, bad("a/fp8")), cycle_events(1, bad("a/fp8"))])
    assert [d.routing_follows for d in decisions(effects, "suspend")] == [0]
def test_a_new_kind_keeps_its_default_mode_on_a_model_in_enforce_until_that_kind_is_switched():
    """tools observes whatever the model's or the policy's mode; a kind command or a configured kind mode switches it."""
    from reverie_canary.services.judge.core import ModelState, mode_of

    policy = Policy(mode="enforce")
    assert policy.new_kind_modes == {"tools": "observe", "template": "observe"}
    enforced = ModelState(model="m/x", mode="enforce")
    assert (mode_of(enforced, policy, "tools"), mode_of(enforced, policy, "ttft")) == ("observe", "enforce")
    assert mode_of(ModelState(model="m/x", mode="enforce", kind_modes={"tools": "enforce"}), policy, "tools") == "enforce"
    configured = Policy(mode="enforce", kind_modes={"tools": "enforce"})
    assert mode_of(enforced, configured, "tools") == "enforce"
    assert mode_of(enforced, Policy(mode="enforce", new_kind_modes={}), "tools") == "enforce"
    settings = Settings.load(env={"CANARY_CONFIG": ""})
    assert Policy.from_settings(settings).new_kind_modes == {"tools": "observe", "template": "observe"}
    assert settings.mode_for("tools") == "observe"
