"""The soak's short form: every service its own process, a fault of each family, nothing lost, replay equals live.

``benchmarks/soak.py`` runs the same harness (``tests/soak.py``) for a thousand
compressed cycles with faults drawn from a seed and measures growth; here a dozen
cycles of 4 s with a fixed handful of faults, each at a share of its cycle: a
prober and the judge SIGKILLed and restarted, junk on the results and the operator
subjects, NATS restarted, Redis emptied, a hostile answer from a healthy host, the
canary blind for a cycle, an override, and discovery's clock jumping a cycle ahead.
What must hold whatever the load: every planned result of a closed cycle is in the
log once, no verdict or decision is stored twice, every notice the notifier's fold
gives for the log reached the receiver once, the replay of the log equals the live
state in Redis, and every stream stays within its limits.
"""

from __future__ import annotations

import pytest

from tests.soak import Fault, Soak

pytestmark = [pytest.mark.integration, pytest.mark.drill]

FAULTS = [
    Fault(cycle=2, share=0.3, kind="kill", target="prober-a"),
    Fault(cycle=3, share=0.2, kind="junk", target="results"),
    Fault(cycle=3, share=0.5, kind="kill", target="judge"),
    Fault(cycle=4, share=0.4, kind="nats_restart"),
    Fault(cycle=5, share=0.3, kind="junk", target="ops"),
    Fault(cycle=5, share=0.5, kind="redis_empty"),
    Fault(cycle=6, share=0.2, kind="hostile", target="together=6"),
    Fault(cycle=7, share=0.5, kind="blind", target="401"),
    Fault(cycle=7, share=0.8, kind="override", target="fireworks"),
    Fault(cycle=8, share=0.3, kind="clock_jump"),
]


async def test_a_short_soak_with_faults_loses_and_doubles_nothing_and_replays_to_the_live_state(tmp_path):
    """10 cycles with faults of every family: no result, decision or notice lost or doubled; replay == live."""
    lines: list[str] = []
    soak = Soak(seed=0, cycles=10, cycle_s=4.0, settle_cycles=2, workdir=tmp_path, report_every=1000, faults=FAULTS,
                say=lines.append)
    result = await soak.run()
    print("\n".join(lines))
    [last] = result.reports
    acc = last.accounting
    assert acc["cycles_closed"] >= 5 and acc["results_planned"] > 400, acc
    assert acc["decisions"] >= 3, acc  # the canary saw the defects (a blind one decides nothing but blindness)
    assert acc["results_lost"] == 0 and acc["results_doubled"] == 0, (acc, last.details)
    # a NATS restart or a prober's restart takes real seconds, most of a 4 s cycle on a loaded machine: a task
    # may expire unprobed; its verdict then names it missing (results_missing), which is no loss
    assert acc["verdicts_doubled"] == 0 and acc["decisions_doubled"] == 0, acc
    assert acc["notices_lost"] == 0 and acc["notices_twice"] == 0, (acc, last.details)
    assert last.replay_problems == []
    assert result.failures == []
    assert all(not limit or size <= limit for size, _, limit, _ in last.streams.values())
