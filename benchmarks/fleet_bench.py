"""A fleet of endpoints at realistic gateway latency: cycle wall time against its latency-bound ideal (issue 11).

The simulated gateway serves ``--models`` models of ``--providers`` healthy
providers each (default 100 x 20 = 2,000 endpoints), every one with its own
time to first token (drawn from ``--ttft`` seconds, seeded) and tokens every
``--chunk-ms``; every probe kind runs.  The gateway, discovery, the judge and
``--probers`` probers each run in a process of their own (``canary run``) on
embedded NATS and Redis, so each one's CPU and memory are its own.  One cycle
is measured; its start is put a few seconds after the services are up (the
interval is chosen so that a cycle boundary falls there).

Printed:

- cycle wall time (the cycle's start to its last result) beside the
  latency-bound ideal: the sum of every probe's own duration (its reply's
  ``total_ms``, what the gateway took) spread over every prober slot
  (``probers x concurrency``), or the longest probe when that is longer;
- probes per second; results missing at the cycle's close;
- judge lag: the judge's verdict after the cycle's close, and the judge
  consumer's largest backlog while results came in;
- per service: peak RSS (``VmHWM``), CPU seconds, CPU ms per probe.

    python benchmarks/fleet_bench.py [--models 100] [--providers 20] [--probers 2] [--concurrency 64]
                                     [--ttft 0.2-1.5] [--chunk-ms 25] [--window-s 900]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from reverie_canary.canary.embedded import free_port, start_nats, start_redis  # noqa: E402
from reverie_canary.shared import codec, streams, subjects  # noqa: E402
from reverie_canary.shared.events import CycleClosed, EndpointsDiscovered  # noqa: E402
from reverie_canary.shared.service import ensure_streams, nats_connect  # noqa: E402
from reverie_canary.shared.settings import Settings  # noqa: E402
from tests.hostile_fleet import _canary, _cpu_s, _rss_mb  # noqa: E402

SERVICES = ("discovery", "judge")


def scenario_toml(models: int, providers: int, ttft: tuple[float, float], chunk_s: float, seed: int) -> str:
    """A simulated fleet of ``models`` x ``providers`` healthy endpoints, each with its own time to first token."""
    rng = random.Random(seed)
    lines = [f"seed = {seed}", "keepalive_s = 0.5", f"chunk_interval_s = {chunk_s}", ""]
    for m in range(models):
        lines += ["[[models]]", f'id = "bench/model-{m:03d}"', f'name = "Bench model {m:03d}"', ""]
        for p in range(providers):
            lines += ["[[models.endpoints]]", f'tag = "prov{p:02d}/fp8"', f'provider_name = "Prov{p:02d}"',
                      'quantization = "fp8"', f"ttft_s = {rng.uniform(*ttft):.3f}",
                      'pricing = { prompt = "0.0000002", completion = "0.0000008" }', 'note = "healthy"', ""]
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> None:
    lo, hi = (float(x) for x in args.ttft.split("-"))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        scenario = workdir / "fleet.toml"
        scenario.write_text(scenario_toml(args.models, args.providers, (lo, hi), args.chunk_ms / 1000.0, args.seed))
        nats = start_nats(workdir / "nats")
        redis = start_redis(workdir / "redis")
        procs: dict[str, subprocess.Popen] = {}
        try:
            port = free_port()
            log = open(workdir / "gateway.log", "w")  # noqa: SIM115
            procs["gateway"] = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario",
                                                 str(scenario), "--port", str(port)], stdout=log, stderr=log)
            url = f"http://127.0.0.1:{port}/api/v1"
            async with httpx.AsyncClient(timeout=5.0) as http:
                for _ in range(300):
                    try:
                        if (await http.get(url + "/models")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    await asyncio.sleep(0.1)
                # a cycle boundary LEAD_S from now: interval = (start epoch) / n for a whole n
                start_at = time.time() + args.lead_s
                interval = args.window_s + 60.0
                interval = start_at / round(start_at / interval)
                models = [f"bench/model-{m:03d}" for m in range(args.models)]
                settings = Settings.load(
                    env={}, nats_url=nats.url, redis_url=redis.url, namespace="fleet", models=models,
                    openrouter_base_url=url, cycle_interval_s=interval, probe_window_s=args.window_s,
                    ttft_threshold_s=10.0, request_timeout_s=60.0, prober_concurrency=args.concurrency,
                    mode="observe", log_level="WARNING", exclusions_file="", log_format="json")
                await ensure_streams(settings)
                nc = await nats_connect(settings, max_reconnect_attempts=-1)
                js = nc.jetstream()
                seen: dict[str, float] = {}
                tasks_of: Counter[str] = Counter()
                results: list = []
                closed: dict[str, float] = {}
                verdicts: dict[str, tuple[float, object]] = {}
                started: dict[str, float] = {}

                async def on_task(msg) -> None:
                    t = codec.PROBE_TASK.decode(msg.data)
                    tasks_of[t.cycle] += 1

                async def on_result(msg) -> None:
                    r = codec.PROBE_RESULT.decode(msg.data)
                    if r.task_id not in seen:
                        seen[r.task_id] = time.time()
                        results.append(r)

                async def on_discovery(msg) -> None:
                    try:
                        e = codec.ENDPOINTS_OR_CLOSE.decode(msg.data)
                    except Exception:  # noqa: BLE001 - not ours to judge here
                        return
                    if isinstance(e, EndpointsDiscovered):
                        started.setdefault(e.cycle, time.time())
                    elif isinstance(e, CycleClosed):
                        closed.setdefault(f"{e.model}|{e.cycle}", time.time())

                async def on_verdict(msg) -> None:
                    v = codec.VERDICT.decode(msg.data)
                    verdicts.setdefault(f"{v.model}|{v.cycle}", (time.time(), v))

                await nc.subscribe(subjects.ALL_TASKS, cb=on_task)
                await nc.subscribe(subjects.ALL_RESULTS, cb=on_result)
                await nc.subscribe(subjects.ALL_DISCOVERY, cb=on_discovery)
                await nc.subscribe(subjects.ALL_VERDICTS, cb=on_verdict)
                env = {**os.environ, **settings.environment(with_secrets=True)}
                names = [*SERVICES, *(f"prober-{i + 1}" for i in range(args.probers))]
                for name in names:
                    out = open(workdir / f"{name}.log", "w")  # noqa: SIM115
                    service = name.split("-")[0]
                    procs[name] = subprocess.Popen([_canary(), "run", service], stdout=out, stderr=out,
                                                   env={**env, "CANARY_METRICS_PORT": "-1",
                                                        "CANARY_PROBER_ID": name})
                judge_spec = streams.judge_consumer(settings)
                backlog = 0
                # CPU from the cycle's start: the services' start-up (imports, detectors) is not a probe's
                await asyncio.sleep(max(0.0, start_at - 0.5 - time.time()))
                cpu0 = {n: _cpu_s(p.pid) for n, p in procs.items()}
                deadline = start_at + args.window_s + 120
                verdicts_wanted = len(models)
                while time.time() < deadline and len(verdicts) < verdicts_wanted:
                    try:
                        info = await js.consumer_info(judge_spec.stream, judge_spec.durable)
                        backlog = max(backlog, info.num_pending or 0)
                    except Exception:  # noqa: BLE001 - not created yet
                        pass
                    await asyncio.sleep(0.5)
                cpu = {n: _cpu_s(p.pid) - cpu0[n] for n, p in procs.items()}
                rss = {n: _rss_mb(p.pid, "VmHWM") for n, p in procs.items()}
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
    report(args, start_at, tasks_of, results, seen, closed, verdicts, backlog, cpu, rss)


def report(args, start_at, tasks_of, results, seen, closed, verdicts, backlog, cpu, rss) -> None:
    endpoints = args.models * args.providers
    tasks = sum(tasks_of.values())
    if not results:
        print(f"no results in {args.window_s:g} s: nothing to report (tasks published: {tasks})")
        return
    last = max(seen.values())
    wall = last - start_at
    slots = args.probers * args.concurrency
    durations = [(r.reply.total_ms or 0.0) / 1000.0 for r in results]
    ideal = max(max(durations), sum(durations) / slots)
    missing = sum(len(pv.missing) + pv.missing_cut for _, v in verdicts.values() for pv in v.verdicts)
    lags = [at - closed[key] for key, (at, v) in verdicts.items() if key in closed]
    print(f"fleet: {args.models} models x {args.providers} providers = {endpoints} endpoints, "
          f"{args.probers} probers x {args.concurrency}, ttft {args.ttft} s, a token every {args.chunk_ms} ms")
    print(f"tasks {tasks}, results {len(results)}, verdicts {len(verdicts)}/{args.models}, results missing {missing}")
    print(f"cycle wall {wall:.1f} s  latency-bound ideal {ideal:.1f} s  (ratio {wall / ideal:.2f}); "
          f"mean probe {sum(durations) / len(durations):.2f} s; {len(results) / wall:.1f} probes/s")
    if lags:
        print(f"judge lag: verdicts {min(lags):.2f}-{max(lags):.2f} s after the cycle's close; "
              f"largest judge backlog {backlog} messages")
    print(f"{'service':<12}{'peak RSS MB':>12}{'CPU s':>9}{'CPU ms/probe':>14}")
    for name in sorted(cpu):
        print(f"{name:<12}{rss[name]:>12.0f}{cpu[name]:>9.1f}{1000 * cpu[name] / len(results):>14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--providers", type=int, default=20)
    parser.add_argument("--probers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--ttft", default="0.2-1.5", help="range of the endpoints' times to first token, seconds")
    parser.add_argument("--chunk-ms", type=float, default=25.0, help="ms between streamed tokens")
    parser.add_argument("--window-s", type=float, default=900.0, help="the cycle's probe window, seconds")
    parser.add_argument("--lead-s", type=float, default=25.0, help="seconds from now to the cycle's start")
    parser.add_argument("--seed", type=int, default=11)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
