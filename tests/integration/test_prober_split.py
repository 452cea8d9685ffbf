"""Two probers, then four: the work of a cycle splits over all of them and no probe is done twice, on real processes.

The gateway and the probers are processes of their own (``tests/drills.py``,
:func:`~tests.drills.prober_split_drill`); discovery and the judge run here on
a real NATS and Redis with the short-cycle settings of docs/getting-started.md compressed.  Two
probers more are started beside the first two between two cycles: no
configuration changes, the shared durable hands the next cycle's tasks to all
four, and discovery's sizing counts the probers it saw.
"""

from __future__ import annotations

import pytest

from tests.drills import prober_split_drill

pytestmark = [pytest.mark.integration, pytest.mark.drill]


async def test_two_then_four_probers_split_each_cycle_and_nothing_is_probed_twice(infra):
    """A cycle with 2 probers and one with 4: every prober did some of it, each task probed, stored and counted once."""
    two, four = await prober_split_drill(nats_url=infra.nats_url, redis_url=infra.redis_url,
                                         namespace=infra.namespace, workdir=infra.workdir, log=True)
    for report in (two, four):
        print(report.line())
        assert report.tasks >= 50, report.line()
        assert sum(report.by_prober.values()) == report.tasks, report.line()  # every task has its result
        assert report.missing == 0, report.line()
        assert report.published_twice == 0 and report.stored_twice == 0, report.line()
        assert 1 <= report.per_prober <= 3, report.line()  # sized, within the ceiling
    assert set(two.by_prober) == {"split-a", "split-b"}, two.line()
    assert set(four.by_prober) == {"split-a", "split-b", "split-c", "split-d"}, four.line()
    assert all(n > 0 for n in four.by_prober.values()), four.line()
    # counted from the results of the cycle before, which the third and fourth probers (started one after
    # the other) may have joined part of the way: 2, 3 or 4 of them, never more or fewer
    assert 2 <= four.sized_probers <= 4, four.line()
