"""Fault drills on real processes: the harness shared by the tests and ``benchmarks/drills_bench.py``.

Each drill starts the simulated gateway and the probers as processes of their
own, the judge and discovery in this process, on the NATS and Redis the
caller gives, breaks something mid-cycle and reports what the books say
afterwards: how many results of the broken cycle went missing, how many were
published twice, how long the pipeline took to heal.

- :func:`prober_kill_drill`: two probers; one is SIGKILLed while it holds
  tasks of a cycle.  Its tasks must come back to the other within the task
  consumer's ``ack_wait`` (short, because a prober says a task is in progress
  while it probes), so that the cycle's results complete, each counted once.
- :func:`prober_split_drill`: two probers, then two more started beside them:
  the work of a cycle with two and of a cycle with four, split per prober, and
  no probe done twice to completion (each task's result published once).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from reverie_canary.canary.embedded import free_port
from reverie_canary.canary.runtime import running
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.events import CycleVerdict
from reverie_canary.shared.runtime import eventlog, streams
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator import SIMULATED_KEY
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


@dataclass
class _Drill:
    """A drill's running parts: the gateway process, its settings and streams, the probers it started."""

    http: httpx.AsyncClient
    settings: Settings
    env: dict[str, str]
    out: object  # name -> the file (or DEVNULL) a process writes to
    prefix: str
    probers: dict[str, subprocess.Popen] = field(default_factory=dict)

    def spawn(self, name: str, extra_env: dict[str, str] | None = None) -> int:
        """Start prober ``name`` (``CANARY_PROBER_ID`` ``<prefix>-<name>``); return its metrics port."""
        mport = free_port()
        self.probers[name] = subprocess.Popen(
            [_canary(), "run", "prober"], stdout=self.out(f"prober-{name}"), stderr=subprocess.STDOUT,
            env={**self.env, **(extra_env or {}), "CANARY_PROBER_ID": f"{self.prefix}-{name}",
                 "CANARY_METRICS_PORT": str(mport)})
        return mport

    async def ready(self, name: str, mport: int) -> None:
        """Wait (60 s at most) until prober ``name`` answers ``/readyz`` on its metrics port."""
        await waits.until(lambda: _ready(self.http, f"http://127.0.0.1:{mport}/readyz"), timeout_s=60,
                          what=f"prober {name} is ready")


@contextlib.asynccontextmanager
async def _drill(*, nats_url: str, redis_url: str, namespace: str, workdir: Path, cycle_s: float,
                 window_s: float, concurrency: int, mode: str, log: bool, prefix: str) -> AsyncIterator[_Drill]:
    """The simulated gateway (scenario ``default``) as a process, the drill's settings and streams.

    The settings are the short-cycle ones of docs/getting-started.md, compressed (``cycle_s``,
    ``window_s``, a 1 s latency bar).  On exit every prober the drill started
    and the gateway are stopped (SIGTERM, then SIGKILL after 15 s) and the
    log files (``<prefix>-*.log`` in ``workdir`` when ``log``) closed.

    Raises:
        tests.waits.WaitTimeout: the gateway did not answer within 30 s.
    """
    [model] = load_scenario("default").models
    port = free_port()
    outs: list = []

    def out(name: str):
        if not log:
            return subprocess.DEVNULL
        f = open(workdir / f"{prefix}-{name}.log", "w")  # noqa: SIM115
        outs.append(f)
        return f

    sim = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario", "default",
                            "--port", str(port)], stdout=out("gateway"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api/v1"
    drill: _Drill | None = None
    try:
        async with httpx.AsyncClient(timeout=2.0) as http:
            await waits.until(lambda: _ready(http, url + "/models"), timeout_s=30, what="the simulated gateway answers")
            settings = Settings.load(
                env={}, nats_url=nats_url, redis_url=redis_url, namespace=namespace, models=[model.id],
                openrouter_base_url=url, openrouter_api_key=SIMULATED_KEY, cycle_interval_s=cycle_s, probe_window_s=window_s, ttft_threshold_s=1.0,
                prober_concurrency=concurrency, languages_per_cycle=2, language_coverage_cycles=9, mode=mode,
                log_level="WARNING", exclusions_file="", controls={"refusal": "control-filter/strict"})
            await ensure_streams(settings)
            drill = _Drill(http, settings, {**os.environ, **settings.environment(with_secrets=True)}, out, prefix)
            yield drill
    finally:
        for proc in (*(drill.probers.values() if drill else ()), sim):
            _wait_proc(proc)
        for f in outs:
            f.close()


async def prober_kill_drill(*, nats_url: str, redis_url: str, namespace: str, workdir: Path,
                            cycle_s: float = 12.0, window_s: float = 9.0, concurrency: int = 3,
                            extra_env: dict[str, str] | None = None, log: bool = False) -> KillReport:
    """Two probers share the task consumer; SIGKILL one while it holds tasks of the first cycle.

    The settings are the short-cycle ones of docs/getting-started.md, compressed (``cycle_s``,
    ``window_s``, a 1 s latency bar) with the default request timeout (60 s):
    when the consumer's ``ack_wait`` followed that timeout
    (370 s) and the dead prober's tasks came back after their cycle closed.

    Args:
        concurrency: probes each prober runs at once (small, so a cycle's
            tasks take several rounds and the killed prober holds some).
        extra_env: more environment for the probers (``CANARY_TASK_ACK_WAIT_S``).
        log: keep each process's output in ``workdir`` (``drill-*.log``).

    Raises:
        tests.waits.WaitTimeout: the gateway, a prober or the cycle did not come in time.
    """
    started = time.monotonic()
    async with _drill(nats_url=nats_url, redis_url=redis_url, namespace=namespace, workdir=workdir, cycle_s=cycle_s,
                      window_s=window_s, concurrency=concurrency, mode="enforce", log=log, prefix="drill") as drill:
        settings = drill.settings
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
        ports = {name: drill.spawn(name, extra_env) for name in ("a", "b")}  # both start at once
        for name, mport in ports.items():
            await drill.ready(name, mport)
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
            drill.probers["a"].kill()
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


@dataclass
class SplitCycle:
    """One cycle of a split drill: its tasks, who did them, what went twice or missing."""

    probers: int  # probers running from before its first task
    cycle: str = ""
    tasks: int = 0
    by_prober: dict[str, int] = field(default_factory=dict)  # results of the cycle per prober
    published_twice: int = 0  # task ids whose result was published more than once (a probe done twice)
    stored_twice: int = 0  # task ids with more than one result in the log
    missing: int = 0  # task ids the cycle's verdict calls missing
    sized_probers: int = 0  # probers discovery's sizing counted (CycleSized)
    per_prober: int = 0  # probes each prober was told to run at once (the tasks' concurrency)

    def line(self) -> str:
        split = ", ".join(f"{p} {n}" for p, n in sorted(self.by_prober.items()))
        return (f"{self.probers} probers: {self.tasks} tasks, split {split}; sized for {self.sized_probers} x "
                f"{self.per_prober}; missing {self.missing}, probed twice {self.published_twice}, stored twice "
                f"{self.stored_twice}")


async def prober_split_drill(*, nats_url: str, redis_url: str, namespace: str, workdir: Path,
                             fleets: tuple[int, ...] = (2, 4), cycle_s: float = 12.0, window_s: float = 9.0,
                             concurrency: int = 3, log: bool = False) -> list[SplitCycle]:
    """Probers share the task consumer: a cycle with ``fleets[0]`` probers, then more started beside them.

    For each fleet size the drill takes the first cycle whose first task came
    after all of that fleet's probers were ready, waits for its verdict and
    reports how its tasks split over the probers (``ProbeResult.prober``),
    whether any task's result was published twice (a probe done twice: core
    NATS sees every publish, also those JetStream drops as duplicates), stored
    twice, or missing.

    Args:
        fleets: probers running in each measured cycle, rising (the ones
            before keep running).
        concurrency: each prober's ceiling (``prober_concurrency``), small so
            that no one prober can take a whole cycle.
        log: keep each process's output in ``workdir`` (``split-*.log``).

    Raises:
        tests.waits.WaitTimeout: the gateway, a prober or a cycle did not come in time.
    """
    async with _drill(nats_url=nats_url, redis_url=redis_url, namespace=namespace, workdir=workdir, cycle_s=cycle_s,
                      window_s=window_s, concurrency=concurrency, mode="observe", log=log, prefix="split") as drill:
        settings = drill.settings
        nc = await nats_connect(settings)
        js = nc.jetstream()
        task_cycle: dict[str, str] = {}
        first_task: dict[str, float] = {}
        published: Counter[str] = Counter()
        result_by: dict[str, str] = {}
        verdicts: dict[str, CycleVerdict] = {}
        sized: dict[int, object] = {}
        concurrency_of: dict[str, int] = {}

        async def on_task(msg) -> None:
            task = codec.PROBE_TASK.decode(msg.data)
            task_cycle[task.task_id] = task.cycle
            first_task.setdefault(task.cycle, time.monotonic())
            concurrency_of[task.cycle] = task.concurrency

        async def on_result(msg) -> None:
            r = codec.PROBE_RESULT.decode(msg.data)
            published[r.task_id] += 1
            result_by.setdefault(r.task_id, r.prober)

        async def on_verdict(msg) -> None:
            v = codec.VERDICT.decode(msg.data)
            verdicts.setdefault(v.cycle, v)

        async def on_sized(msg) -> None:
            e = codec.SIZED.decode(msg.data)
            sized[e.cycle_no] = e

        await nc.subscribe(subjects.ALL_TASKS, cb=on_task)
        await nc.subscribe(subjects.ALL_RESULTS, cb=on_result)
        await nc.subscribe(subjects.ALL_VERDICTS, cb=on_verdict)
        await nc.subscribe(subjects.CYCLES_SIZED, cb=on_sized)

        reports: list[SplitCycle] = []
        async with running(settings, ["judge", "discovery"]):
            for size in fleets:
                for i in range(len(drill.probers), size):
                    name = "abcdefghijklmnopqrstuvwxyz"[i]
                    await drill.ready(name, drill.spawn(name))
                ready = time.monotonic()

                def after_ready(ready: float = ready) -> str | None:
                    later = [c for c, at in first_task.items() if at > ready]
                    return min(later) if later else None

                await waits.until(after_ready, timeout_s=cycle_s * 2 + 20,
                                  what=f"a cycle starting after {size} probers were ready")
                cycle = after_ready()
                await waits.until(lambda cycle=cycle: cycle in verdicts, timeout_s=cycle_s * 2 + 30,
                                  what=f"the verdict of cycle {cycle} with {size} probers")
                reports.append(SplitCycle(probers=size, cycle=cycle))
            logged = await eventlog.read_log(js, prefixes=eventlog.prefixes_of([subjects.ALL_RESULTS]),
                                             idle_s=1.0)
        stored = Counter(e.event.task_id for e in logged)
        for report in reports:
            mine = {t for t, c in task_cycle.items() if c == report.cycle}
            report.tasks = len(mine)
            report.by_prober = dict(Counter(result_by[t] for t in mine if t in result_by))
            report.published_twice = sum(1 for t in mine if published[t] > 1)
            report.stored_twice = sum(1 for t in mine if stored[t] > 1)
            verdict = verdicts[report.cycle]
            report.missing = sum(len(v.missing) + v.missing_cut for v in verdict.verdicts)
            report.per_prober = concurrency_of.get(report.cycle, 0)
            e = sized.get(verdict.cycle_no)
            report.sized_probers = e.probers if e is not None else 0
        await nc.drain()
        return reports


if __name__ == "__main__":  # pragma: no cover - a manual run: python -m tests.drills
    import tempfile

    from reverie_canary.shared.runtime import metrics as _metrics
    from tests.conftest import servers

    _metrics.STANDARD_PORTS = dict.fromkeys(_metrics.STANDARD_PORTS, 0)  # never the standard ports

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp, servers(Path(tmp)) as (nats_url, redis_url):
            report = await prober_kill_drill(nats_url=nats_url, redis_url=redis_url, namespace="drill",
                                             workdir=Path(tmp), log=True)
            print(report.line())

    asyncio.run(main())
