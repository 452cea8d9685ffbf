"""Fault drills on real processes (issue 11): the harness shared by the tests and ``benchmarks/drills_bench.py``.

Each drill starts the simulated gateway and the probers as processes of their
own, the judge and discovery in this process, on the NATS and Redis the
caller gives, breaks something mid-cycle and reports what the books say
afterwards: how many results of the broken cycle went missing, how many were
published twice, how long the pipeline took to heal.

- :func:`prober_kill_drill`: two probers; one is SIGKILLed while it holds
  tasks of a cycle.  Its tasks must come back to the other within the task
  consumer's ``ack_wait`` (short, because a prober says a task is in progress
  while it probes), so that the cycle's results complete, each counted once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from reverie_canary.canary.embedded import free_port
from reverie_canary.canary.runtime import running
from reverie_canary.shared import codec, eventlog, streams, subjects
from reverie_canary.shared.events import CycleVerdict
from reverie_canary.shared.service import ensure_streams, nats_connect
from reverie_canary.shared.settings import Settings
from reverie_canary.simulator.scenario import load_scenario
from tests import waits
from tests.hostile_fleet import _canary


@dataclass
class KillReport:
    """What a prober-kill drill saw (times in seconds from the kill)."""

    ack_wait_s: float
    tasks: int = 0  # tasks of the cycle the kill hit
    held_at_kill: int = 0  # tasks delivered and not yet acknowledged when the prober died
    results_stored: int = 0  # distinct task ids of that cycle with a result in the log
    stored_twice: int = 0  # task ids with more than one result in the log (0: JetStream deduplicated)
    published_twice: int = 0  # task ids whose result was published more than once (a probe done twice)
    missing: int = 0  # task ids the cycle's verdict calls missing
    counted_twice: int = 0  # task ids the verdict lists more than once
    frozen_missing: list[str] = field(default_factory=list)  # providers frozen for missing results
    by_survivor_after_kill: int = 0  # results of that cycle the surviving prober published after the kill
    heal_s: float | None = None  # kill -> the cycle's last result (None: some never came)
    verdict_s: float | None = None  # kill -> the cycle's verdict
    wall_s: float = 0.0

    def line(self) -> str:
        heal = "never" if self.heal_s is None else f"{self.heal_s:.1f} s"
        return (f"ack_wait {self.ack_wait_s:g} s: {self.tasks} tasks, {self.held_at_kill} held by the killed prober "
                f"or in flight; results stored {self.results_stored}/{self.tasks}, missing {self.missing}"
                f" ({', '.join(self.frozen_missing) or 'no provider frozen for it'}), stored twice "
                f"{self.stored_twice}, probed twice {self.published_twice}, counted twice {self.counted_twice}; "
                f"survivor took over {self.by_survivor_after_kill}; healed in {heal}")


def _wait_proc(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


async def _ready(http: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await http.get(url)).status_code == 200
    except httpx.HTTPError:
        return False


async def prober_kill_drill(*, nats_url: str, redis_url: str, namespace: str, workdir: Path,
                            cycle_s: float = 12.0, window_s: float = 9.0, concurrency: int = 3,
                            extra_env: dict[str, str] | None = None, log: bool = False) -> KillReport:
    """Two probers share the task consumer; SIGKILL one while it holds tasks of the first cycle.

    The settings are the README's short-cycle ones, compressed (``cycle_s``,
    ``window_s``, a 1 s latency bar) with the default request timeout (60 s):
    before issue 11 §1 the consumer's ``ack_wait`` followed that timeout
    (370 s) and the dead prober's tasks came back after their cycle closed.

    Args:
        concurrency: probes each prober runs at once (small, so a cycle's
            tasks take several rounds and the killed prober holds some).
        extra_env: more environment for the probers (``CANARY_TASK_ACK_WAIT_S``).
        log: keep each process's output in ``workdir`` (``drill-*.log``).

    Raises:
        tests.waits.WaitTimeout: the gateway, a prober or the cycle did not come in time.
    """
    scenario = load_scenario("default")
    [model] = scenario.models
    port = free_port()
    outs: list = []

    def out(name: str):
        if not log:
            return subprocess.DEVNULL
        f = open(workdir / f"drill-{name}.log", "w")  # noqa: SIM115
        outs.append(f)
        return f

    sim = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario", "default",
                            "--port", str(port)], stdout=out("gateway"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api/v1"
    probers: dict[str, subprocess.Popen] = {}
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(timeout=2.0) as http:
            await waits.until(lambda: _ready(http, url + "/models"), timeout_s=30, what="the simulated gateway answers")
            settings = Settings.load(
                env={}, nats_url=nats_url, redis_url=redis_url, namespace=namespace, models=[model.id],
                openrouter_base_url=url, cycle_interval_s=cycle_s, probe_window_s=window_s, ttft_threshold_s=1.0,
                prober_concurrency=concurrency, languages_per_cycle=2, language_coverage_cycles=9, mode="enforce",
                log_level="WARNING", exclusions_file="", controls={"refusal": "control-filter/strict"})
            await ensure_streams(settings)
            nc = await nats_connect(settings)
            js = nc.jetstream()
            task_cycle: dict[str, str] = {}
            published: Counter[str] = Counter()
            result_at: dict[str, float] = {}
            result_by: dict[str, str] = {}
            verdicts: dict[str, tuple[float, CycleVerdict]] = {}

            async def on_task(msg) -> None:
                task = codec.PROBE_TASK.decode(msg.data)
                task_cycle[task.task_id] = task.cycle

            async def on_result(msg) -> None:  # core NATS sees every publish, also those JetStream drops as duplicates
                r = codec.PROBE_RESULT.decode(msg.data)
                published[r.task_id] += 1
                result_at.setdefault(r.task_id, time.monotonic())
                result_by.setdefault(r.task_id, r.prober)

            async def on_verdict(msg) -> None:
                v = codec.VERDICT.decode(msg.data)
                verdicts.setdefault(v.cycle, (time.monotonic(), v))

            await nc.subscribe(subjects.ALL_TASKS, cb=on_task)
            await nc.subscribe(subjects.ALL_RESULTS, cb=on_result)
            await nc.subscribe(subjects.ALL_VERDICTS, cb=on_verdict)
            env = {**os.environ, **settings.environment(with_secrets=True), **(extra_env or {})}
            for name in ("a", "b"):
                mport = free_port()
                probers[name] = subprocess.Popen(
                    [_canary(), "run", "prober"], stdout=out(f"prober-{name}"), stderr=subprocess.STDOUT,
                    env={**env, "CANARY_PROBER_ID": f"drill-{name}", "CANARY_METRICS_PORT": str(mport)})
                await waits.until(lambda: _ready(http, f"http://127.0.0.1:{mport}/readyz"), timeout_s=60,
                                  what=f"prober {name} is ready")
            spec = streams.prober_consumer(settings)
            info = await js.consumer_info(spec.stream, spec.durable)
            report = KillReport(ack_wait_s=info.config.ack_wait or 0.0)
            async with running(settings, ["judge", "discovery"]):
                def first_cycle() -> str | None:
                    return min(task_cycle.values(), default=None)

                def a_is_busy() -> bool:
                    cycle = first_cycle()
                    if cycle is None:
                        return False
                    mine = [t for t, c in task_cycle.items() if c == cycle]
                    by_a = sum(1 for t in mine if result_by.get(t) == "drill-a")
                    left = sum(1 for t in mine if t not in result_at)
                    return by_a >= 2 and left >= 3 * concurrency

                await waits.until(a_is_busy, timeout_s=cycle_s * 2 + 20,
                                  what="prober a has published results of the first cycle and tasks are left")
                cycle = first_cycle()
                probers["a"].kill()
                killed = time.monotonic()
                info = await js.consumer_info(spec.stream, spec.durable)
                report.held_at_kill = info.num_ack_pending or 0
                await waits.until(lambda: cycle in verdicts, timeout_s=cycle_s * 3 + 30,
                                  what=f"the verdict of cycle {cycle}")
                at, verdict = verdicts[cycle]
            report.wall_s = time.monotonic() - started
            mine = {t for t, c in task_cycle.items() if c == cycle}
            report.tasks = len(mine)
            logged = await eventlog.read_log(js, prefixes=eventlog.prefixes_of([subjects.ALL_RESULTS]), idle_s=1.0)
            stored = Counter(e.event.task_id for e in logged if e.event.task_id in mine)
            report.results_stored = len(stored)
            report.stored_twice = sum(1 for n in stored.values() if n > 1)
            report.published_twice = sum(1 for t in mine if published[t] > 1)
            report.by_survivor_after_kill = sum(1 for t in mine if result_by.get(t) == "drill-b"
                                                and result_at[t] > killed)
            listed: Counter[str] = Counter()
            for v in verdict.verdicts:
                report.missing += len(v.missing) + v.missing_cut
                listed.update(r.task_id for r in v.results)
                if any(reason.startswith("missing:") for reason in v.reasons):
                    report.frozen_missing.append(v.provider)
            report.counted_twice = sum(1 for n in listed.values() if n > 1)
            times = [result_at[t] for t in mine if t in result_at]
            if len(times) == len(mine):
                report.heal_s = max(0.0, max(times) - killed)
            report.verdict_s = at - killed
            await nc.drain()
            return report
    finally:
        for proc in (*probers.values(), sim):
            _wait_proc(proc)
        for f in outs:
            f.close()


if __name__ == "__main__":  # pragma: no cover - a manual run: python -m tests.drills
    import tempfile

    from reverie_canary.shared import metrics as _metrics
    from tests.conftest import servers

    _metrics.STANDARD_PORTS = {name: 0 for name in _metrics.STANDARD_PORTS}  # never the standard ports

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp, servers(Path(tmp)) as (nats_url, redis_url):
            report = await prober_kill_drill(nats_url=nats_url, redis_url=redis_url, namespace="drill",
                                             workdir=Path(tmp), log=True)
            print(report.line())

    asyncio.run(main())
