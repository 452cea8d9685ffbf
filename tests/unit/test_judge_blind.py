"""The canary's own health in the judge's fold (docs/concepts/health.md)."""

from __future__ import annotations

from datetime import timedelta

from reverie_canary.services.judge.core import Policy, decide, fold, initial
from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract.commands import LiftSuspension
from reverie_canary.shared.contract.events import CycleUnplanned, CycleVerdict, Decision
from tests.judge_events import CYCLE, MODEL, T0, WINDOW, cycle_events, healthy

FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8", "e/fp8")
#: Suspensions of three cycles: one that starts at cycle 1's close (T0+40 min) comes due at T0+130 min,
#: inside cycle 4; a blind moment holds what comes due within two cycles (the default hold).
POLICY = Policy(mode="enforce", ladder_s=(3 * 1800.0, 9 * 1800.0, 21 * 1800.0))
HOLD = timedelta(seconds=POLICY.blind_hold_s)


def bad(provider: str = "a/fp8") -> dict:
    out = healthy(*FLEET)
    out[provider]["ttft"] = ("fail", "ttft_exceeded")
    return out


def blind(reason: str = "gateway_auth") -> dict:
    return {p: {"ttft": ("blind", reason), "structured": ("blind", reason)} for p in FLEET}


def unplanned(n: int, cause: str = "gateway_unreachable") -> CycleUnplanned:
    start = T0 + n * CYCLE
    return CycleUnplanned(at=start + WINDOW, model=MODEL, cycle=ids.cycle_id(MODEL, start), cycle_no=n,
                          deadline=start + WINDOW, cause=cause, attempts=12)


def suspended_then(*later: list) -> list:
    """a/fp8 fails cycles 0 and 1 (suspended until T0+130 min), cycle 2 is healthy, then ``later``."""
    return [*cycle_events(0, bad()), *cycle_events(1, bad()), *cycle_events(2, healthy(*FLEET)),
            *[e for events in later for e in events]]


def decisions(effects, action: str | None = None) -> list[Decision]:
    return [e for e in effects if isinstance(e, Decision) and (action is None or e.action == action)]


def streaks(state) -> dict[str, tuple[int, int, int]]:
    return {n: (ps.failed_streak, ps.passed_streak, ps.frozen_streak) for n, ps in state.providers.items()}


def close_of(n: int):
    return T0 + n * CYCLE + WINDOW


def test_blind_results_are_told_once_hold_the_due_suspension_and_move_no_streak():
    """401 in cycles 3 and 4: one canary_blind in cycle 3, a/fp8's suspension held, no streak moved; cycle 5 sees."""
    before, _ = fold(suspended_then(), POLICY)
    states, effects = fold(suspended_then(cycle_events(3, blind()), cycle_events(4, blind())), POLICY)
    state = states[MODEL]
    assert streaks(state) == streaks(before[MODEL])
    [went] = decisions(effects, "canary_blind")
    assert (went.provider, went.reason, went.at, went.cycles) == ("", "gateway_auth", close_of(3),
                                                                  [ids.cycle_id(MODEL, T0 + 3 * CYCLE)])
    assert [(h.provider, h.until, h.held_until) for h in went.held] == [
        ("a/fp8", T0 + timedelta(minutes=130), close_of(3) + HOLD)]
    held = decisions(effects, "suspension_held")
    assert [(d.provider, d.at, d.until, d.mode) for d in held] == [
        ("a/fp8", close_of(3), close_of(3) + HOLD, "enforce"), ("a/fp8", close_of(4), close_of(4) + HOLD, "enforce")]
    assert decisions(effects, "end") == [] and len(decisions(effects, "suspend")) == 1
    verdicts = [e for e in effects if isinstance(e, CycleVerdict) and e.cycle_no in (3, 4)]
    assert [{v.verdict for v in cv.verdicts} for cv in verdicts] == [{"blind"}, {"blind"}]
    assert verdicts[0].verdicts[0].reasons == ["structured:gateway_auth", "ttft:gateway_auth"]
    assert state.blind_since == close_of(3) and state.providers["a/fp8"].suspension.until == close_of(4) + HOLD

    # the key is valid again: one canary_sees, and the held suspension ends once a/fp8 is judged again
    states, effects = fold(suspended_then(cycle_events(3, blind()), cycle_events(4, blind()),
                                          cycle_events(5, healthy(*FLEET))), POLICY)
    [sees] = decisions(effects, "canary_sees")
    assert (sees.provider, sees.at, sees.reason) == ("", close_of(5), "judged_again")
    [end] = decisions(effects, "end")
    assert (end.provider, end.at, end.reason) == ("a/fp8", close_of(5), "expired")
    assert end.decision_id == ids.decision_id(MODEL, "a/fp8", "end", decisions(effects, "suspend")[0].decision_id)
    assert len(decisions(effects, "canary_blind")) == 1
    assert states[MODEL].blind_since is None and states[MODEL].providers["a/fp8"].blind_since is None


def test_unplanned_cycles_are_blind_cycles_for_every_listed_provider():
    """Gateway down in cycles 3 and 4: blind verdicts from CycleUnplanned, one canary_blind with the cause, held, seen."""
    before, _ = fold(suspended_then(), POLICY)
    states, effects = fold(suspended_then([unplanned(3)], [unplanned(4)], cycle_events(5, healthy(*FLEET))), POLICY)
    verdicts = {e.cycle_no: e for e in effects if isinstance(e, CycleVerdict)}
    assert [v.provider for v in verdicts[3].verdicts] == list(FLEET)
    assert {(v.verdict, tuple(v.reasons)) for v in verdicts[4].verdicts} == {("blind", ("unplanned:gateway_unreachable",))}
    [went] = decisions(effects, "canary_blind")
    assert (went.reason, went.at, [h.provider for h in went.held]) == ("gateway_unreachable", close_of(3), ["a/fp8"])
    assert "could not be planned" in went.detail
    assert [d.at for d in decisions(effects, "suspension_held")] == [close_of(3), close_of(4)]
    assert [d.action for d in decisions(effects) if d.at > close_of(2)] == [
        "canary_blind", "suspension_held", "suspension_held", "end", "canary_sees"]
    [end] = decisions(effects, "end")
    assert end.at == close_of(5)
    assert len(decisions(effects, "canary_sees")) == 1
    # the blind cycles moved nothing: cycle 5's pass is the only change since cycle 2
    assert streaks(states[MODEL]) == {p: (f, passed + 1, z) for p, (f, passed, z) in streaks(before[MODEL]).items()}
    history = states[MODEL].providers["b/fp8"].history
    assert [h.verdict for h in history[-3:]] == ["blind", "blind", "passed"]


def test_a_stretch_without_cycles_is_not_blindness():
    """Nothing at all from cycle 3 to 9 (services stopped): the suspension expires at its until, as before."""
    _, effects = fold(suspended_then(cycle_events(10, healthy(*FLEET))), POLICY)
    [end] = decisions(effects, "end")
    assert (end.at, end.reason) == (T0 + timedelta(minutes=130), "expired")
    assert decisions(effects, "canary_blind") == decisions(effects, "suspension_held") == []


def test_a_hold_lapses_when_the_cycles_stop():
    """Blind in cycle 3 (held two cycles), then nothing until cycle 10: it ends at the hold's end, once."""
    _, effects = fold(suspended_then(cycle_events(3, blind()), cycle_events(10, healthy(*FLEET))), POLICY)
    [end] = decisions(effects, "end")
    assert (end.at, end.reason) == (close_of(3) + HOLD, "expired")
    assert len(decisions(effects, "suspension_held")) == 1 and len(decisions(effects, "canary_sees")) == 1


def test_an_operator_lifts_a_held_suspension():
    """Held while blind, lifted by an operator: it ends at the lift; the next blind moment holds nothing."""
    lift = LiftSuspension(at=close_of(3) + timedelta(minutes=5), command_id="c1", model=MODEL, provider="a/fp8",
                          actor="alice", reason="known outage")
    _, effects = fold(suspended_then(cycle_events(3, blind()), [lift], cycle_events(4, blind())), POLICY)
    assert [(d.action, d.reason) for d in decisions(effects) if d.at > close_of(2)] == [
        ("canary_blind", "gateway_auth"), ("suspension_held", "canary_blind"), ("end", "lifted")]


def test_a_quality_failure_beside_a_blind_result_still_counts():
    """A fail before the key was revoked is evidence: that provider is failed, the others blind."""
    mixed = blind()
    mixed["a/fp8"] = {"ttft": ("fail", "ttft_exceeded"), "structured": ("blind", "gateway_auth")}
    states, effects = fold([*cycle_events(0, bad()), *cycle_events(1, mixed)], POLICY)
    [verdict] = [e for e in effects if isinstance(e, CycleVerdict) and e.cycle_no == 1]
    assert {v.provider: v.verdict for v in verdict.verdicts} == {"a/fp8": "failed", **dict.fromkeys(FLEET[1:], "blind")}
    assert len(decisions(effects, "suspend")) == 1 and len(decisions(effects, "canary_blind")) == 1


def test_blind_input_is_folded_exactly_once():
    """A CycleUnplanned or a blind close delivered again changes nothing; replaying gives the same effects."""
    events = suspended_then([unplanned(3)], cycle_events(4, blind()))
    states, effects = fold(events, POLICY)
    state = states[MODEL]
    for event in events[-20:]:
        again, more = decide(state, event, POLICY)
        assert again is state and more == []
    assert fold(events, POLICY) == (states, effects)
    twice, effects_twice = fold([e for ev in events for e in (ev, ev)], POLICY)
    assert effects_twice == effects and twice == states


def test_a_blind_cycle_does_not_end_or_count_an_unjudgeable_streak():
    """Frozen, blind, frozen ...: blind cycles neither count as frozen nor reset the unjudgeable report."""
    flaky = healthy(*FLEET)
    flaky["a/fp8"]["ttft"] = ("transport_error", "http_503")
    events = []
    for n in range(8):
        events += [unplanned(n)] if n in (2, 5) else cycle_events(n, flaky)
    states, effects = fold(events, Policy(mode="enforce", unjudgeable_after=6))
    assert states[MODEL].providers["a/fp8"].frozen_streak == 6
    [unjudgeable] = decisions(effects, "unjudgeable")
    assert unjudgeable.at == close_of(7) and len(unjudgeable.cycles) == 6
    assert initial(MODEL).blind_since is None


def test_the_judge_exports_blindness_and_the_last_cycle_closed():
    """canary_blind per model, canary_provider_blind and _suspension_held per provider; last closed stays the close's."""
    from reverie_canary.services.judge.gauges import samples

    states, _ = fold(suspended_then(cycle_events(3, blind()), [unplanned(4)]), POLICY)
    got = {(key, tuple(sorted(labels.items()))): value for key, labels, value in
           samples(states, POLICY, cycle_interval_s=1800.0)}
    m = (("model", MODEL),)
    assert got[("canary_blind", m)] == 1
    assert got[("provider_blind", (*m, ("provider", "a/fp8")))] == 1
    assert got[("provider_suspension_held", (*m, ("provider", "a/fp8")))] == 1
    assert got[("provider_suspension_held", (*m, ("provider", "b/fp8")))] == 0
    assert got[("provider_verdict", (*m, ("provider", "b/fp8"), ("verdict", "blind")))] == 1
    assert got[("cycle_closed_at", m)] == close_of(3).timestamp()  # an unplanned cycle closed nothing
    seen, _ = fold(suspended_then(cycle_events(3, blind()), [unplanned(4)], cycle_events(5, healthy(*FLEET))), POLICY)
    got = {(key, tuple(sorted(labels.items()))): value for key, labels, value in
           samples(seen, POLICY, cycle_interval_s=1800.0)}
    assert got[("canary_blind", m)] == 0 and got[("cycle_closed_at", m)] == close_of(5).timestamp()
