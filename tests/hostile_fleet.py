"""Eight hostile providers beside eight healthy ones, on real processes: the harness of the bounded-prober goal.

The simulated gateway (scenario ``hostile``) and the prober run in processes of
their own, so the prober's memory is its own (peak RSS from ``/proc``) and the
gateway's work never shares the prober's event loop; discovery and the judge
run in this process, on the NATS and Redis the caller gives.  Time is
compressed: a cycle of ``cycle_s`` seconds, the latency bar 1 s (healthy providers answer in
0.15-0.5 s), a request timeout of 0.6 cycles, the window 0.8 cycles.  (The bar was 1.5 s for a
while: every probe then opened a new connection, all of a cycle's at once, and the clock
counted the wait; see ``services/prober/http.py``, "The clock".)

Used by ``tests/integration/test_hostile_fleet.py`` (which asserts the goal)
and ``benchmarks/hostile_bench.py`` (which prints the figures).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import httpx

from reverie_canary.canary.embedded import free_port
from reverie_canary.canary.runtime import running
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.events import CycleVerdict, ProbeResult
from reverie_canary.shared.runtime import streams
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.scenario import load_scenario
from tests import waits

SCENARIO = os.environ.get("HOSTILE_SCENARIO", "hostile")


@dataclass
class Observed:
    """One result as it came off the bus: the result, its size on the wire, its task's deadline."""

    result: ProbeResult
    size: int
    deadline: datetime | None
    sim_ttft_ms: float | None = None


@dataclass
class FleetRun:
    """What a run saw."""

    settings: Settings
    injected_ms: dict[str, float]
    hostile: dict[str, str]
    results: list[Observed] = field(default_factory=list)
    verdicts: list[CycleVerdict] = field(default_factory=list)
    tasks: dict[str, datetime] = field(default_factory=dict)
    task_seen: dict[str, datetime] = field(default_factory=dict)
    task_provider: dict[str, str] = field(default_factory=dict)
    task_cycle: dict[str, str] = field(default_factory=dict)
    prober_peak_rss_mb: float = 0.0
    prober_cpu_s: float = 0.0
    gateway_cpu_s: float = 0.0
    prober_rss_samples_mb: list[float] = field(default_factory=list)
    queue_samples: list[tuple[float, int, int, int]] = field(default_factory=list)
    wall_s: float = 0.0

    def cycles(self, n: int) -> list[str]:
        """The ids of the first ``n`` cycles with a verdict (cycle order)."""
        return [v.cycle for v in sorted(self.verdicts, key=lambda v: v.cycle_no)][:n]


def _rss_mb(pid: int, key: str) -> float:
    """``VmRSS`` or ``VmHWM`` (peak) of process ``pid`` in MB, 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _cpu_s(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (``/proc/PID/stat``), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _canary() -> str:
    exe = Path(sys.executable).with_name("canary")
    return str(exe) if exe.exists() else (shutil.which("canary") or "canary")


async def run_fleet(*, nats_url: str, redis_url: str, namespace: str, cycles: int = 10,
                    cycle_s: float = 4.0, log: Path | None = None, gateway_ttft: bool = False) -> FleetRun:
    """Run the hostile fleet for ``cycles`` cycles and return what was observed.

    Args:
        gateway_ttft: also read each healthy reply's ``/generation`` record for the
            simulator's own time to first token (``Observed.sim_ttft_ms``).

    Raises:
        tests.waits.WaitTimeout: the gateway, the prober or the cycles did not come in time.
    """
    scenario = load_scenario(SCENARIO)
    [model] = scenario.models
    injected = {e.tag: e.ttft_s * 1000.0 for e in model.endpoints if not e.faults}
    hostile = {e.tag: type(e.faults[0]).__struct_config__.tag for e in model.endpoints if e.faults}
    port = free_port()
    out = open(log, "w") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    sim = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario", SCENARIO,
                            "--port", str(port)], stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}/api/v1"
    prober: subprocess.Popen | None = None
    try:
        async with httpx.AsyncClient(timeout=2.0) as http:
            async def gateway_up() -> bool:
                try:
                    return (await http.get(url + "/models")).status_code == 200
                except httpx.HTTPError:
                    return False

            await waits.until(gateway_up, timeout_s=30, what="the simulated gateway answers")
            settings = Settings.load(
                env={}, nats_url=nats_url, redis_url=redis_url, namespace=namespace, models=[model.id],
                openrouter_base_url=url, openrouter_api_key=SIMULATED_KEY, cycle_interval_s=cycle_s, probe_window_s=0.8 * cycle_s,
                ttft_threshold_s=1.0, request_timeout_s=0.6 * cycle_s, prober_concurrency=96,
                language_coverage_cycles=17, mode="observe", log_level="WARNING", exclusions_file="",
                metrics_ports={"prober": 0})  # any free port: the standard 9472 may be taken by a running canary
            run = FleetRun(settings=settings, injected_ms=injected, hostile=hostile)
            await ensure_streams(settings)
            nc = await nats_connect(settings)

            async def on_task(msg) -> None:
                task = codec.PROBE_TASK.decode(msg.data)
                run.tasks[task.task_id] = task.deadline
                run.task_seen[task.task_id] = datetime.now(timezone.utc)
                run.task_provider[task.task_id] = task.provider
                run.task_cycle[task.task_id] = task.cycle

            async def on_result(msg) -> None:
                result = codec.PROBE_RESULT.decode(msg.data)
                run.results.append(Observed(result, len(msg.data), run.tasks.get(result.task_id)))

            async def on_verdict(msg) -> None:
                run.verdicts.append(codec.VERDICT.decode(msg.data))

            await nc.subscribe(subjects.ALL_TASKS, cb=on_task)
            await nc.subscribe(subjects.ALL_RESULTS, cb=on_result)
            await nc.subscribe(subjects.ALL_VERDICTS, cb=on_verdict)
            env = {**os.environ, **settings.environment(with_secrets=True)}
            command = [_canary(), "run", "prober"]
            if os.environ.get("HOSTILE_PROBER_SCRIPT"):  # a wrapped prober (profile, asyncio debug)
                command = [sys.executable, *os.environ.get("HOSTILE_PROBER_ARGS", "").split(),
                           os.environ["HOSTILE_PROBER_SCRIPT"]]
            prober = subprocess.Popen(command, env=env, stdout=out, stderr=out)
            js = nc.jetstream()
            durable = streams.prober_consumer(settings)

            async def prober_pulls() -> bool:
                try:
                    info = await js.consumer_info(durable.stream, durable.durable)
                except Exception:  # noqa: BLE001 - not created yet
                    return False
                return (info.num_waiting or 0) > 0

            await waits.until(prober_pulls, timeout_s=60, what="the prober process pulls tasks")
            started = time.monotonic()
            cpu0 = _cpu_s(prober.pid), _cpu_s(sim.pid)

            async def sample_rss() -> None:
                while True:
                    run.prober_rss_samples_mb.append(_rss_mb(prober.pid, "VmRSS"))
                    if os.environ.get("HOSTILE_QUEUE_SAMPLES"):
                        info = await js.consumer_info(durable.stream, durable.durable)
                        run.queue_samples.append((time.time(), info.num_ack_pending, info.num_pending,
                                                  info.num_waiting or 0))
                    await asyncio.sleep(0.25)

            sampler = asyncio.create_task(sample_rss())
            try:
                async with running(settings, ["judge", "discovery"]):
                    await waits.until(lambda: len({v.cycle_no for v in run.verdicts}) >= cycles,
                                      timeout_s=cycles * cycle_s * 3 + 30, what=f"{cycles} cycle verdicts")
            finally:
                sampler.cancel()
            run.wall_s = time.monotonic() - started
            run.prober_peak_rss_mb = _rss_mb(prober.pid, "VmHWM")
            run.prober_cpu_s, run.gateway_cpu_s = _cpu_s(prober.pid) - cpu0[0], _cpu_s(sim.pid) - cpu0[1]
            await nc.drain()
            # the simulator's own time to first token of each healthy reply (its /generation record)
            for obs in run.results if gateway_ttft else ():
                gen = obs.result.reply.generation_id
                if obs.result.provider in injected and gen:
                    r = await http.get(url + "/generation", params={"id": gen})
                    if r.status_code == 200:
                        data = r.json()["data"]
                        obs.sim_ttft_ms = data["latency"] - data["generation_time"]
            return run
    finally:
        for proc in (prober, sim):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (prober, sim):
            if proc is not None:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        if log is not None:
            out.close()


def by_provider_and_cycle(run: FleetRun, cycles: list[str]) -> dict[tuple[str, str], list[Observed]]:
    """The results of ``cycles``, grouped by (provider, cycle)."""
    out: dict[tuple[str, str], list[Observed]] = defaultdict(list)
    for obs in run.results:
        if obs.result.cycle in cycles:
            out[(obs.result.provider, obs.result.cycle)].append(obs)
    return out
