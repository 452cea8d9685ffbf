"""Prober throughput against an instant simulated provider, and its CPU cost per probe.

One prober service (the real FastStream app: pull tasks from JetStream, send the
pinned streaming request, run the checks, publish the result, ack) against a
simulated provider that answers at once (time to first token 0, no pause
between chunks).  The simulator and NATS run in their own processes, so this
process's CPU time is the prober's.  Printed beside a baseline measured in the
same run: the same streaming requests sent by a bare httpx loop that only reads
the stream, with no checks and no bus -- the ratio is what the prober adds.

    python benchmarks/prober_bench.py [--probes 600] [--batch 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from reverie_canary.canary.embedded import free_port, start_nats  # noqa: E402
from reverie_canary.canary.runtime import running  # noqa: E402
from reverie_canary.services.prober.http import request_body  # noqa: E402
from reverie_canary.services.prober.prompts import build  # noqa: E402
from reverie_canary.shared import clock, codec, subjects  # noqa: E402
from reverie_canary.shared.events import PROBE_KINDS, ProbeTask  # noqa: E402
from reverie_canary.shared.service import ensure_streams, nats_connect  # noqa: E402
from reverie_canary.shared.settings import LANGUAGES, Settings  # noqa: E402
from reverie_canary.shared.streams import TASKS  # noqa: E402

MODEL = "bench/instant-1"
PROVIDER = "instant/fp8"
SCENARIO = f"""
seed = 1
keepalive_s = 0.2
chunk_interval_s = 0.0
[[models]]
id = "{MODEL}"
name = "Instant"
[[models.endpoints]]
tag = "{PROVIDER}"
provider_name = "Instant"
ttft_s = 0.0
chunk_interval_s = 0.0
"""


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def tasks(n: int) -> list[ProbeTask]:
    now = clock.now()
    out = []
    for i in range(n):
        kind = PROBE_KINDS[i % len(PROBE_KINDS)]
        language = LANGUAGES[i % len(LANGUAGES)] if kind in ("language", "ttft", "refusal") else "en"
        out.append(ProbeTask(at=now, task_id=f"bench-{i}", model=MODEL, provider=PROVIDER, provider_name="Instant",
                             kind=kind, language=language, cycle="bench", deadline=now + timedelta(hours=1),
                             supported_parameters=["max_tokens", "response_format", "structured_outputs"]))
    return out


async def bench_prober(settings: Settings, work: list[ProbeTask]) -> tuple[float, float, dict]:
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    done = asyncio.Event()
    outcomes: dict[str, int] = {}

    async def on_result(msg):
        result = codec.PROBE_RESULT.decode(msg.data)
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
        if sum(outcomes.values()) >= len(work):
            done.set()

    await nc.subscribe(subjects.ALL_RESULTS, cb=on_result)
    async with running(settings, ["prober"]):
        # warm up outside the measurement: the language models load on first use
        from reverie_canary.services.prober.checks import evaluate
        from reverie_canary.services.prober.reply import Reply

        warm = build("language", "pt")
        evaluate(Reply(text="O farol ergue-se sobre as rochas e a luz varre o mar.", finish_reason="stop",
                       http_status=200, ttft_ms=1.0), warm.spec)
        c0, t0 = cpu_s(), time.perf_counter()
        for t in work:  # publishing is part of the measured CPU: ~0.1 ms a task
            await js.publish(subjects.task(MODEL, PROVIDER), codec.encode(t), stream=TASKS,
                             headers={"Nats-Msg-Id": t.task_id})
        await asyncio.wait_for(done.wait(), timeout=600)
        wall = time.perf_counter() - t0
        cpu = cpu_s() - c0
    await nc.close()
    return len(work) / wall, cpu * 1000 / len(work), outcomes


async def bench_bare(url: str, work: list[ProbeTask], concurrency: int) -> tuple[float, float]:
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url + "/", timeout=30) as client:
        async def one(t: ProbeTask) -> None:
            body = request_body(MODEL, PROVIDER, build(t.kind, t.language), require_parameters=False)
            async with gate, client.stream("POST", "chat/completions", json=body) as response:
                async for _ in response.aiter_lines():
                    pass

        c0, t0 = cpu_s(), time.perf_counter()
        await asyncio.gather(*(one(t) for t in work))
        wall = time.perf_counter() - t0
    return len(work) / wall, (cpu_s() - c0) * 1000 / len(work)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probes", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=32, help="probes in flight in the prober")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "instant.toml"
        scenario.write_text(SCENARIO)
        port = free_port()
        sim = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario", str(scenario), "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        nats = start_nats(Path(tmp) / "nats")
        url = f"http://127.0.0.1:{port}/api/v1"
        try:
            for _ in range(100):
                try:
                    httpx.get(url + "/models", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            settings = Settings.load(env={}, nats_url=nats.url, openrouter_base_url=url, models=[MODEL],
                                     prober_concurrency=args.concurrency, log_level="WARNING")
            work = tasks(args.probes)
            bare_rate, bare_cpu = await bench_bare(url, work, args.concurrency)
            rate, cpu_ms, outcomes = await bench_prober(settings, work)
        finally:
            nats.stop()
            sim.terminate()
            sim.wait(timeout=10)

    print(f"prober benchmark: {args.probes} probes (all 5 kinds, 17 languages) against one instant simulated "
          f"provider, {args.concurrency} in flight; simulator and NATS in their own processes")
    print(f"{'what':<58} {'per s':>8} {'CPU ms each':>12} {'ratio':>7}")
    print(f"{'bare httpx: same streaming requests, read and discarded':<58} {bare_rate:>8.0f} {bare_cpu:>12.2f} "
          f"{1.0:>6.2f}x")
    print(f"{'prober service: pull task, probe, check, publish, ack':<58} {rate:>8.0f} {cpu_ms:>12.2f} "
          f"{rate / bare_rate:>6.2f}x")
    print(f"outcomes: {json.dumps(outcomes, sort_keys=True)} (language probes with an anomaly are sent 3 times)")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
