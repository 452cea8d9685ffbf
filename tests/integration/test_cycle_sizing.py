"""A cycle sized to fit, on the whole pipeline: each service its own NATS and Redis user.

Discovery measures the probe times in the live results and sizes the next
cycle from them; with a ceiling of one probe per prober the default fleet's
55 probes cannot end in the demo's window, and that is a fact on the log
(``CycleSized`` with ``fits`` false) before the first task of that cycle, and
a warning notice on the operators' channel.
"""

from __future__ import annotations

import time

import pytest

from reverie_canary.canary.demo import pipeline
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.events import PROBE_KINDS
from reverie_canary.shared.runtime.service import nats_connect
from tests import waits

pytestmark = pytest.mark.integration


async def test_a_plan_the_probers_cannot_run_in_the_window_is_told_before_its_first_task(tmp_path):
    async with pipeline(workdir=tmp_path, scenario="default", prober_concurrency=1) as p:
        nc = await nats_connect(p.settings)
        sized: dict[int, tuple[float, object]] = {}
        first_task: dict[float, tuple[float, object]] = {}  # cycle deadline -> (seen at, the first task)

        async def on_sized(msg) -> None:
            e = codec.SIZED.decode(msg.data)
            sized.setdefault(e.cycle_no, (time.monotonic(), e))

        async def on_task(msg) -> None:
            t = codec.PROBE_TASK.decode(msg.data)
            first_task.setdefault(t.deadline.timestamp(), (time.monotonic(), t))

        await nc.subscribe(subjects.CYCLES_SIZED, cb=on_sized)
        await nc.subscribe(subjects.ALL_TASKS, cb=on_task)

        def measured():  # the first cycle sized on probe times measured (some kinds or all): judged
            return next((e for _, (_, e) in sorted(sized.items()) if e.basis != "prior"), None)

        interval = p.settings.cycle_interval_s
        await waits.until(measured, timeout_s=interval * 4 + 30, what="a cycle sized on measured probe times")
        e = measured()
        deadline = e.deadline.timestamp()
        await waits.until(lambda: deadline in first_task, timeout_s=interval + 10,
                          what=f"the first task of cycle {e.cycle_no}")
        await waits.until(lambda: any(n.action == "cycle_does_not_fit" for n in p.observer.notices),
                          timeout_s=30, what="the cycle_does_not_fit notice")
        await nc.close()
        notices = [n for n in p.observer.notices if n.action == "cycle_does_not_fit"]

    assert e.probes >= 50 and e.probers == 1 and e.ceiling == 1
    assert (e.per_prober, e.in_flight) == (1, 1)
    assert e.basis in ("measured", "partial") and e.expected_wall_s > e.window_s and e.fits is False
    assert set(e.probe_s) == set(PROBE_KINDS)
    # before the cycle: the fact came before the first of its tasks, and every task carries the sizing
    told_at, _ = sized[e.cycle_no]
    task_at, task = first_task[deadline]
    assert told_at <= task_at and task.concurrency == 1
    # a first cycle, nothing measured yet, is not judged
    first = min(sized)
    assert sized[first][1].basis == "prior" and sized[first][1].fits is True
    [start] = [n for n in notices if n.phase == "start"]
    assert start.severity == "warning" and f"cycle {e.cycle_no}" in start.title
    assert "start more probers or raise CANARY_PROBER_CONCURRENCY" in start.text
