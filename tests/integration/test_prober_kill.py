"""A prober SIGKILLed mid-probe beside a second one costs its cycle no result, on real processes.

The gateway and both probers are processes of their own (``tests/drills.py``);
discovery and the judge run here on a real NATS and Redis, with the
short-cycle settings compressed and the default 60 s request timeout.  Before
the bounded ack wait the task consumer's ``ack_wait`` followed that timeout (370 s) and
the killed prober's tasks came back after their cycle had closed: 3 of 55
results missing, their providers frozen (``python -m tests.drills``).
"""

from __future__ import annotations

import pytest

from tests.drills import prober_kill_drill

pytestmark = [pytest.mark.integration, pytest.mark.drill]


async def test_a_prober_sigkilled_mid_probe_costs_its_cycle_no_result_and_nothing_counts_twice(infra):
    """SIGKILL one of two probers while it holds tasks: the cycle's results complete, each stored and counted once."""
    report = await prober_kill_drill(nats_url=infra.nats_url, redis_url=infra.redis_url,
                                     namespace=infra.namespace, workdir=infra.workdir, log=True)
    print(report.line())
    assert report.ack_wait_s == 2.0  # an eighth of the 9 s window, at least 2 s
    assert report.tasks >= 50 and report.held_at_kill > 0
    assert report.missing == 0 and report.frozen_missing == [], report.line()
    assert report.results_stored == report.tasks, report.line()
    assert report.stored_twice == 0 and report.counted_twice == 0, report.line()
    assert report.by_survivor_after_kill > 0
    assert report.heal_s is not None
