"""The soak's faults are a pure function of its seed: a failing run is replayed by rerunning its seed."""

from __future__ import annotations

from collections import Counter

from tests.soak import FAULT_WEIGHTS, SERVICES, plan_faults


def test_the_same_seed_draws_the_same_faults_in_the_same_cycles_and_another_seed_others():
    """plan_faults(seed) twice is equal, fault for fault; a different seed gives a different plan."""
    a = plan_faults(27, 1000)
    assert a == plan_faults(27, 1000)
    assert [str(f) for f in a] == [str(f) for f in plan_faults(27, 1000)]
    assert a != plan_faults(28, 1000)


def test_a_long_plan_draws_every_kind_and_kills_each_service_in_turn_without_overlap():
    """1,000 cycles: every fault kind appears, kills go round the services, no fault starts while one runs."""
    plan = plan_faults(27, 1000)
    assert set(Counter(f.kind for f in plan)) == set(FAULT_WEIGHTS)
    kills = [f.target for f in plan if f.kind == "kill"]
    assert kills[: len(SERVICES)] == list(SERVICES)
    for before, after in zip(plan, plan[1:], strict=False):
        assert after.cycle > before.cycle + before.cycles - 1
    assert all(3 <= f.cycle <= 1000 - 4 for f in plan)  # none before the services run, none in the quiet tail


def test_a_shorter_run_with_the_same_seed_keeps_the_faults_of_the_cycles_it_has():
    """The draw goes cycle by cycle: a 200-cycle run with seed N has the first faults of the 1,000-cycle run."""
    short = plan_faults(27, 200)
    assert short == [f for f in plan_faults(27, 1000) if f.cycle <= 200 - 4]


def test_kills_until_drops_the_later_kills_and_keeps_every_other_fault_of_the_seed():
    """--kills-until 200: no kill after cycle 200, the kills before it and every other fault as without the limit."""
    full = plan_faults(27, 1000)
    limited = plan_faults(27, 1000, kills_until=200)
    assert [f for f in limited if f.kind == "kill"] == [f for f in full if f.kind == "kill" and f.cycle <= 200]
    assert [f for f in limited if f.kind != "kill"] == [f for f in full if f.kind != "kill"]
    assert any(f.kind == "kill" and f.cycle > 200 for f in full)  # the limit dropped something
