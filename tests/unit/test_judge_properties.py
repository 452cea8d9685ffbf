"""Property-based tests of the judge's fold over random event sequences (hypothesis)."""

from __future__ import annotations

from datetime import timedelta

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reverie_canary.services.judge.core import ModelState, Policy, decide, fold, initial
from reverie_canary.shared.contract.commands import LiftSuspension
from reverie_canary.shared.contract.events import CycleClosed, CycleVerdict, Decision, EndpointsDiscovered, ProbeResult
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot
from tests.judge_events import CYCLE, MODEL, T0, cycle_events, healthy

PROVIDERS = ("a/x", "b/x", "c/x", "d/x", "e/x")
KINDS = ("ttft", "structured")
OUTCOMES = ("pass", "pass", "pass", "fail", "transport_error", "inconclusive", "missing")
DAY = 48  # cycles per day

outcome_st = st.sampled_from(OUTCOMES)
cycle_st = st.fixed_dictionaries({p: st.fixed_dictionaries(dict.fromkeys(KINDS, outcome_st)) for p in PROVIDERS})
gap_st = st.one_of(st.just(1), st.just(1), st.just(1), st.integers(2, 5), st.sampled_from([DAY, 3 * DAY, 7 * DAY, 15 * DAY]))
extra_st = st.sampled_from(["none", "none", "none", "lift", "override"])


@st.composite
def logs(draw, max_cycles: int = 14):
    """A random log: cycles with random outcomes and gaps, some lifts and routing snapshots."""
    n = 0
    events = []
    version = 0
    for _ in range(draw(st.integers(1, max_cycles))):
        n += draw(gap_st)
        outcomes = draw(cycle_st)
        table, missing = {}, set()
        for p, kinds in outcomes.items():
            table[p] = {}
            for k, o in kinds.items():
                if o == "missing":
                    table[p][k] = "pass"
                    missing.add((p, k))
                else:
                    table[p][k] = (o, "r_" + o)
        events += cycle_events(n, table, missing=missing)
        extra = draw(extra_st)
        at = T0 + n * CYCLE + timedelta(minutes=15)
        if extra == "lift":
            events.append(LiftSuspension(command_id=f"lift{n}", actor="op", at=at, model=MODEL,
                                         provider=draw(st.sampled_from(PROVIDERS)), reason="test"))
        elif extra == "override":
            version += 1
            ignored = draw(st.lists(st.sampled_from(PROVIDERS), max_size=3, unique=True))
            events.append(IgnoreSnapshot(at=at, model=MODEL, version=version, entries=[
                IgnoreEntry(provider=p, reasons=[IgnoreReason(layer="override", reason="incident")]) for p in ignored]))
    return events


policies = st.sampled_from([Policy(mode="enforce"), Policy(mode="observe"), Policy(mode="enforce", min_hosts=3),
                            Policy(mode="enforce", kind_modes={"structured": "observe"})])
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def steps(events, policy):
    """Yield (event, before, after, effects) for each event folded in order."""
    state = initial(MODEL)
    for event in events:
        after, effects = decide(state, event, policy)
        yield event, state, after, effects
        state = after


@FAST
@given(logs(), policies)
def test_frozen_cycles_never_change_a_streak(events, policy):
    """A provider frozen in a cycle keeps its failed and passed streaks (unless its suspension ended)."""
    for event, before, after, effects in steps(events, policy):
        if not isinstance(event, CycleClosed):
            continue
        ended = {d.provider for d in effects if isinstance(d, Decision) and d.action in ("end", "would_end")}
        verdict = next((e for e in effects if isinstance(e, CycleVerdict)), None)
        if verdict is None:
            continue
        for v in verdict.verdicts:
            if v.verdict != "frozen" or v.provider in ended or v.provider not in before.providers:
                continue
            b, a = before.providers[v.provider], after.providers[v.provider]
            assert (a.failed_streak, a.passed_streak) == (b.failed_streak, b.passed_streak)


@FAST
@given(logs(), policies)
def test_no_suspension_without_two_consecutive_failed_cycles(events, policy):
    """Every (would-)suspension names two cycles the provider failed, with only frozen ones between them.

    The verdicts are taken from every cycle's CycleVerdict of the run, not from
    the provider's kept history: that keeps the last 12 cycles, and a failure,
    eleven frozen cycles (transport errors) and a failure is a streak of two
    whose first cycle has left it (a Hypothesis example found it).
    """
    verdicts: dict[str, list[tuple[str, str]]] = {}  # provider -> [(cycle, verdict)] in cycle order
    for _event, _before, _after, effects in steps(events, policy):
        for e in effects:
            if isinstance(e, CycleVerdict):
                for v in e.verdicts:
                    verdicts.setdefault(v.provider, []).append((e.cycle, v.verdict))
        for d in effects:
            if isinstance(d, Decision) and d.action in ("suspend", "would_suspend"):
                assert len(d.cycles) == 2
                seen = verdicts[d.provider]
                first, last = (next(i for i, (c, _) in enumerate(seen) if c == cycle) for cycle in d.cycles)
                between = [v for _, v in seen[first:last + 1]]
                assert between[0] == between[-1] == "failed" and set(between[1:-1]) <= {"frozen"}, (d, seen)
                assert last == len(seen) - 1  # the second is the cycle that closed now


def usable(state: ModelState, at) -> int:
    count = 0
    for name, ps in state.providers.items():
        if not ps.present or (ps.suspension is not None and ps.suspension.enforced):
            continue
        if name in state.routing.ignored:
            continue
        count += 1
    return count


@FAST
@given(logs(), policies)
def test_the_capacity_floor_is_never_broken_by_a_suspension(events, policy):
    """After any step that suspends, at least min_hosts usable hosts remain."""
    for event, _before, after, effects in steps(events, policy):
        if any(isinstance(d, Decision) and d.action == "suspend" for d in effects):
            assert usable(after, event.at) >= policy.min_hosts


@FAST
@given(logs(max_cycles=20))
def test_ladder_is_one_three_seven_days_and_resets_after_fourteen_quiet_days(events):
    """Suspension lengths follow 1/3/7 days per provider, restarting after 14 days without one."""
    policy = Policy(mode="enforce")
    _, effects = fold(events, policy)
    last: dict[str, tuple] = {}
    for d in effects:
        if not isinstance(d, Decision) or d.action != "suspend":
            continue
        previous = last.get(d.provider)
        if previous is None or (d.at - previous[0]) >= timedelta(days=14):
            level = 0
        else:
            level = previous[1] + 1
        assert d.until - d.at == timedelta(days=(1, 3, 7)[min(level, 2)])
        last[d.provider] = (d.at, level)


@FAST
@given(logs(), policies)
def test_replaying_the_log_gives_the_state_built_live(events, policy):
    """Live (one event at a time, state stored as JSON between events) equals one fold of the log."""
    folded, _ = fold(events, policy)
    state = initial(MODEL)
    for event in events:
        state, _ = decide(state, event, policy)
        state = msgspec.json.decode(msgspec.json.encode(state), type=ModelState)
    assert state == folded.get(MODEL, initial(MODEL))


@FAST
@given(logs(), policies, st.randoms(use_true_random=False))
def test_duplicates_and_reordering_within_a_cycle_change_nothing(events, policy, rnd):
    """Each event delivered twice, and results shuffled inside their cycle, give the same state and decisions."""
    baseline, base_effects = fold(events, policy)
    doubled, doubled_effects = fold([e for ev in events for e in (ev, ev)], policy)
    assert doubled == baseline and doubled_effects == base_effects

    shuffled, block = [], []
    for event in events:
        if isinstance(event, ProbeResult):
            block.append(event)
            continue
        if block:
            rnd.shuffle(block)
            shuffled += block
            block = []
        shuffled.append(event)
    shuffled += block
    reordered, reordered_effects = fold(shuffled, policy)
    assert reordered == baseline
    decisions = lambda effs: [e for e in effs if isinstance(e, Decision)]  # noqa: E731
    assert decisions(reordered_effects) == decisions(base_effects)


def test_events_builder_emits_discovery_results_close():
    """The generator used above really produces the judge's three kinds of cycle events."""
    events = cycle_events(0, {"a/x": {"ttft": "pass"}})
    assert [type(e) for e in events] == [EndpointsDiscovered, ProbeResult, CycleClosed]


def test_a_failure_eleven_frozen_cycles_and_a_failure_suspend_with_both_cycles_named():
    """The case Hypothesis found: frozen cycles keep a streak, beyond the 12 cycles the kept history holds.

    d/x fails in cycle 1, answers transport errors for cycles 2-12 (frozen; unjudgeable after 6) and fails
    again in cycle 13: that is two failed cycles with only frozen ones between, so the judge suspends
    and names cycles 1 and 13, though cycle 1 has left d/x's history.
    """
    fleet = ("a/x", "b/x", "c/x", "d/x", "e/x")
    events = []
    for n in range(1, 14):
        out = healthy(*fleet)
        out["d/x"]["structured"] = ("fail", "r_fail") if n in (1, 13) else ("transport_error", "r_transport_error")
        events += cycle_events(n, out)
    actions = []
    history = []
    for _event, _before, after, effects in steps(events, Policy(mode="enforce")):
        for d in effects:
            if isinstance(d, Decision) and d.provider == "d/x":
                actions.append((d.action, d.cycles))
                history = [h.cycle_no for h in after.providers["d/x"].history]
    cycle = {n: cycle_events(n, healthy(*fleet))[0].cycle for n in (1, 13)}
    assert actions[-1] == ("suspend", [cycle[1], cycle[13]])
    assert actions[0][:1] == ("unjudgeable", )  # said once the frozen cycles ran past unjudgeable_after
    assert 1 not in history and history[-1] == 13
