"""A fleet of endpoints at realistic gateway latency: cycle wall time against its latency-bound ideal.

The simulated gateway serves ``--models`` models of ``--providers`` healthy
providers each (default 100 x 20 = 2,000 endpoints), every one with its own
time to first token (``--ttft`` seconds, default 0.3-2) and streaming time for
a mean reply (``--stream-ms``, default 150-400: the chunk interval is that over
:data:`MEAN_PIECES`), both drawn per endpoint, seeded; every probe kind runs, and
every setting is at its default but the cycle's clock (``--window-s``, a cycle
starting ``--lead-s`` from now): five language probes an endpoint, nine probes in
all, 18,000 a cycle (``--languages-per-cycle`` sets another number).  The gateway,
every service and ``--probers`` probers each run in a process of their own
(``canary run``) on embedded NATS and Redis, so each one's CPU and memory are its own.

``--cycles`` cycles run back to back (default 2).  Discovery sizes each cycle
from the probe times it measured in the cycles before
(``CycleSized``): the first one, with nothing measured, runs every prober at its
ceiling (``--ceiling``, ``prober_concurrency``), the next ones at the probes in
flight that end the plan within ``--window-s x --fill-share`` (600 x 0.25 =
150 s).

Printed per cycle:

- its sizing (probes in flight per prober and in all, the expected wall);
- how long discovery took to publish the cycle's tasks (the first task seen to the
  last; goal: 5 s);
- cycle wall time, the first task published to the last result folded by the
  judge (its consumer has nothing pending), beside the latency-bound ideal at
  the concurrency it ran: the sum of every probe's time (how long it held its
  prober: ``at - started_at`` of its result) over the probes in flight, or the
  longest probe when that is longer;
- probes per second; results missing (tasks of the cycle with no result
  when it closed, or when the run stopped);
- judge lag: from the last result published to the last one folded, and the
  judge consumer's largest backlog; with ``--wait-close`` also the verdicts'
  lag after the cycle's close (waits for the deadline: 600 s by default);
- per service: peak RSS (``VmHWM``) over the run, CPU seconds and CPU ms per
  probe during the cycle (the NATS server's too).

    python benchmarks/fleet_bench.py [--models 100] [--providers 20] [--probers 2] [--ceiling 64]
                                     [--ttft 0.3-2] [--stream-ms 150-400] [--window-s 600] [--fill-share 0.25]
                                     [--cycles 2] [--wait-close]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from reverie_canary.canary.embedded import free_port, start_nats, start_redis  # noqa: E402
from reverie_canary.shared.contract import codec, subjects  # noqa: E402
from reverie_canary.shared.contract.events import CycleClosed  # noqa: E402
from reverie_canary.shared.runtime import streams  # noqa: E402
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect  # noqa: E402
from reverie_canary.shared.runtime.settings import LANGUAGES, Settings  # noqa: E402
from reverie_canary.simulator import SIMULATED_KEY  # noqa: E402
from tests.hostile_fleet import _canary, _cpu_s, _rss_mb  # noqa: E402

#: Every service in a process of its own (``canary run``), the probers beside them.
SERVICES = ("discovery", "judge", "router", "notifier")
#: Stream pieces of a mean probe reply from the simulator (ttft 10, refusal 14, structured 2.4, language 17,
#: echo 3.2 pieces; six probes an endpoint with two language ones): measured with the prober against it.
MEAN_PIECES = 10.6


def scenario_toml(models: int, providers: int, ttft: tuple[float, float], stream_s: tuple[float, float],
                  seed: int) -> str:
    """A simulated fleet of ``models`` x ``providers`` healthy endpoints, each with its own latency."""
    rng = random.Random(seed)
    lines = [f"seed = {seed}", "keepalive_s = 0.5", ""]
    for m in range(models):
        lines += ["[[models]]", f'id = "bench/model-{m:03d}"', f'name = "Bench model {m:03d}"', ""]
        for p in range(providers):
            lines += ["[[models.endpoints]]", f'tag = "prov{p:02d}/fp8"', f'provider_name = "Prov{p:02d}"',
                      'quantization = "fp8"', f"ttft_s = {rng.uniform(*ttft):.3f}",
                      f"chunk_interval_s = {rng.uniform(*stream_s) / MEAN_PIECES:.4f}",
                      'pricing = { prompt = "0.0000002", completion = "0.0000008" }', 'note = "healthy"', ""]
    return "\n".join(lines)


@dataclass
class Cycle:
    """What one cycle did (times are epoch seconds)."""

    deadline: float
    sized: object = None
    tasks: set = field(default_factory=set)
    first_task: float | None = None
    last_task: float | None = None
    results: dict = field(default_factory=dict)  # task id -> (seen at, seconds held, prober)
    folded: float | None = None
    backlog: int = 0
    closed: dict = field(default_factory=dict)
    verdicts: dict = field(default_factory=dict)
    cpu0: dict = field(default_factory=dict)
    cpu: dict = field(default_factory=dict)


def _range(text: str) -> tuple[float, float]:
    lo, hi = (float(x) for x in text.split("-"))
    return lo, hi


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.logs) if args.logs else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        scenario = workdir / "fleet.toml"
        stream = tuple(x / 1000.0 for x in _range(args.stream_ms))
        scenario.write_text(scenario_toml(args.models, args.providers, _range(args.ttft), stream, args.seed))
        nats = start_nats(workdir / "nats")
        redis = start_redis(workdir / "redis")
        procs: dict[str, subprocess.Popen] = {}
        cycles: list[Cycle] = []
        try:
            port = free_port()
            log = open(workdir / "gateway.log", "w")  # noqa: SIM115
            procs["gateway"] = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario",
                                                 str(scenario), "--port", str(port)], stdout=log, stderr=log)
            url = f"http://127.0.0.1:{port}/api/v1"
            async with httpx.AsyncClient(timeout=5.0) as http:
                for _ in range(600):
                    try:
                        if (await http.get(url + "/models")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.1)
            # the first cycle boundary LEAD_S from now: interval = (start epoch) / n for a whole n
            start_at = time.time() + args.lead_s
            interval = args.window_s + args.gap_s
            interval = start_at / round(start_at / interval)
            models = [f"bench/model-{m:03d}" for m in range(args.models)]
            lpc = args.languages_per_cycle
            settings = Settings.load(
                env={}, nats_url=nats.url, redis_url=redis.url, namespace="fleet", models=models,
                openrouter_base_url=url, openrouter_api_key=SIMULATED_KEY, cycle_interval_s=interval, probe_window_s=args.window_s,
                probe_fill_share=args.fill_share, prober_concurrency=args.ceiling,
                **({"languages_per_cycle": lpc, "language_coverage_cycles": math.ceil(len(LANGUAGES) / lpc)}
                   if lpc else {}),
                exclusions_file="", log_format="json", log_level=args.log_level)
            await ensure_streams(settings)
            nc = await nats_connect(settings, max_reconnect_attempts=-1)
            js = nc.jetstream()
            for k in range(args.cycles):
                cycles.append(Cycle(deadline=start_at + k * interval + args.window_s))
            by_deadline = {round(c.deadline): c for c in cycles}
            published: Counter[str] = Counter()

            def cycle_of(deadline_epoch: float) -> Cycle | None:
                return by_deadline.get(round(deadline_epoch))

            async def on_task(msg) -> None:
                t = codec.PROBE_TASK.decode(msg.data)
                c = cycle_of(t.deadline.timestamp())
                if c is not None:
                    c.first_task = c.first_task or time.time()
                    c.last_task = time.time()
                    c.tasks.add(t.task_id)

            async def on_result(msg) -> None:
                r = codec.PROBE_RESULT.decode(msg.data)
                published[r.task_id] += 1
                if published[r.task_id] > 1 and args.logs:
                    print("twice", r.task_id, r.prober, r.started_at, r.at, flush=True)
                for c in cycles:
                    if r.task_id in c.tasks and r.task_id not in c.results:
                        held = (r.at - r.started_at).total_seconds() if r.started_at else 0.0
                        c.results[r.task_id] = (time.time(), held, r.prober)

            async def on_sized(msg) -> None:
                e = codec.SIZED.decode(msg.data)
                c = cycle_of(e.deadline.timestamp())
                if c is not None:
                    c.sized = e

            async def on_discovery(msg) -> None:
                try:
                    e = codec.ENDPOINTS_OR_CLOSE.decode(msg.data)
                except Exception:  # noqa: BLE001 - not ours to judge here
                    return
                if isinstance(e, CycleClosed):
                    c = cycle_of(e.at.timestamp())
                    if c is not None:
                        c.closed.setdefault(e.model, time.time())

            async def on_verdict(msg) -> None:
                v = codec.VERDICT.decode(msg.data)
                c = cycle_of(v.at.timestamp())  # a verdict is stamped at its cycle's close
                if c is not None:
                    c.verdicts.setdefault(v.model, (time.time(), v))

            await nc.subscribe(subjects.ALL_TASKS, cb=on_task)
            await nc.subscribe(subjects.ALL_RESULTS, cb=on_result)
            await nc.subscribe(subjects.CYCLES_SIZED, cb=on_sized)
            await nc.subscribe(subjects.ALL_DISCOVERY, cb=on_discovery)
            await nc.subscribe(subjects.ALL_VERDICTS, cb=on_verdict)
            env = {**os.environ, **settings.environment(with_secrets=True)}
            names = [*SERVICES, *(f"prober-{i + 1}" for i in range(args.probers))]
            for name in names:
                out = open(workdir / f"{name}.log", "w")  # noqa: SIM115
                service = name.split("-")[0]
                procs[name] = subprocess.Popen([_canary(), "run", service], stdout=out, stderr=out,
                                               env={**env, "CANARY_METRICS_PORT": "-1", "CANARY_PROBER_ID": name})
            pids = {**{n: p.pid for n, p in procs.items()}, "nats": nats.process.pid}
            judge_spec = streams.judge_consumer(settings)
            for k, c in enumerate(cycles):
                last_cycle = k + 1 == len(cycles)
                await asyncio.sleep(max(0.0, start_at + k * interval - 0.5 - time.time()))
                c.cpu0 = {n: _cpu_s(pid) for n, pid in pids.items()}
                stop = c.deadline + 30 if (args.wait_close and last_cycle) else c.deadline
                while time.time() < stop:
                    try:
                        info = await js.consumer_info(judge_spec.stream, judge_spec.durable)
                        pending = (info.num_pending or 0) + (info.num_ack_pending or 0)
                        c.backlog = max(c.backlog, info.num_pending or 0)
                    except Exception:  # noqa: BLE001 - not created yet
                        pending = 1
                    done = c.sized is not None and c.first_task is not None and len(c.results) >= c.sized.probes
                    if c.folded is None and done and not pending:
                        c.folded = time.time()
                        c.cpu = {n: _cpu_s(pid) - c.cpu0[n] for n, pid in pids.items()}
                    if c.folded is not None and not (last_cycle and args.wait_close
                                                     and len(c.verdicts) < len(models)):
                        break
                    await asyncio.sleep(0.2)
                if not c.cpu:
                    c.cpu = {n: _cpu_s(pid) - c.cpu0[n] for n, pid in pids.items()}
            rss = {n: _rss_mb(pid, "VmHWM") for n, pid in pids.items()}
            twice = sum(1 for n in published.values() if n > 1)
            await nc.close()
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.terminate()
            for p in procs.values():
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
            redis.stop()
            nats.stop()
    report(args, cycles, rss, twice)


def report(args, cycles: list[Cycle], rss: dict, twice: int) -> None:
    endpoints = args.models * args.providers
    print(f"fleet: {args.models} models x {args.providers} providers = {endpoints} endpoints, {args.probers} probers "
          f"(ceiling {args.ceiling} each), ttft {args.ttft} s, streaming {args.stream_ms} ms, window "
          f"{args.window_s:g} s x fill share {args.fill_share:g}; results published twice: {twice}")
    for k, c in enumerate(cycles, 1):
        s = c.sized
        results = list(c.results.values())
        print(f"-- cycle {k}: tasks {len(c.tasks)}, results {len(results)}, results missing "
              f"{len(c.tasks) - len(results)}")
        if s is not None:
            print(f"   sized ({s.basis}): {s.probers} probers x {s.per_prober} = {s.in_flight} in flight "
                  f"(needed {s.needed}, ceiling {s.ceiling}); work {s.work_s:g} s, expected wall "
                  f"{s.expected_wall_s:g} s of target {s.target_s:g} s; fits {s.fits}; probe s {s.probe_s}")
        if not results or c.first_task is None:
            continue
        split = Counter(p for _, _, p in results)
        # the concurrency it ran at: each prober that worked at the tasks' per_prober (a first cycle's
        # sizing counts one prober, as nothing was seen yet; every prober ran at its ceiling)
        in_flight = (s.per_prober if s is not None else args.ceiling) * len(split)
        held = [h for _, h, _ in results]
        ideal = max(max(held), sum(held) / in_flight)
        last = max(at for at, _, _ in results)
        end = c.folded or last
        wall = end - c.first_task
        published_s = (c.last_task or c.first_task) - c.first_task
        print(f"   tasks published in {published_s:.1f} s (first task seen -> last; goal <= 5 s)")
        print(f"   cycle wall {wall:.1f} s (first task -> last result folded)  latency-bound ideal at {in_flight} in "
              f"flight {ideal:.1f} s  (ratio {wall / ideal:.2f}; goal <= 1.10); mean probe "
              f"{sum(held) / len(held):.2f} s; {len(results) / wall:.1f} probes/s")
        print(f"   judge lag: last result folded {end - last:.2f} s after it was published; largest judge "
              f"backlog {c.backlog} messages" + (f"; verdicts {_lags(c)}" if c.verdicts else ""))
        print("   work split: " + ", ".join(f"{p} {n}" for p, n in sorted(split.items())))
        print(f"   {'service':<12}{'peak RSS MB':>12}{'CPU s':>9}{'CPU ms/probe':>14}")
        for name in sorted(c.cpu):
            print(f"   {name:<12}{rss.get(name, 0):>12.0f}{c.cpu[name]:>9.1f}{1000 * c.cpu[name] / len(results):>14.2f}")


def _lags(c: Cycle) -> str:
    lags = [at - c.closed[m] for m, (at, _) in c.verdicts.items() if m in c.closed]
    return f"{min(lags):.2f}-{max(lags):.2f} s after the close" if lags else "(no close seen)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--providers", type=int, default=20)
    parser.add_argument("--probers", type=int, default=2)
    parser.add_argument("--ceiling", type=int, default=64, help="prober_concurrency: the most probes a prober runs")
    parser.add_argument("--ttft", default="0.3-2", help="range of the endpoints' times to first token, seconds")
    parser.add_argument("--stream-ms", default="150-400", help="range of the endpoints' streaming time of a mean reply")
    parser.add_argument("--languages-per-cycle", type=int, default=0,
                        help="language probes per endpoint and cycle (0: the settings' default, 5 of 17 languages)")
    parser.add_argument("--window-s", type=float, default=600.0, help="the cycles' probe window, seconds")
    parser.add_argument("--fill-share", type=float, default=0.25, help="share of the window a cycle is sized to take")
    parser.add_argument("--gap-s", type=float, default=10.0, help="seconds between a window's end and the next cycle")
    parser.add_argument("--cycles", type=int, default=2, help="cycles to run (the first is sized on nothing measured)")
    parser.add_argument("--wait-close", action="store_true", help="wait for the last cycle's close and verdicts")
    parser.add_argument("--lead-s", type=float, default=25.0, help="seconds from now to the first cycle's start")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--logs", default="", help="keep every process's log in this folder")
    parser.add_argument("--log-level", default="WARNING", help="the services' log level")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
