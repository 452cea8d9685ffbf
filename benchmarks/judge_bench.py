"""Judge throughput: the pure policy alone, and the judge folding into a real Redis.

Printed side by side with the same Redis's own throughput measured in the same
run (plain SETs of a record-sized value, one round trip each, and pipelined),
so the ratios show the judge's overhead whatever the machine is doing.

    python benchmarks/judge_bench.py [--providers 10] [--cycles 40] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis  # noqa: E402

from reverie_canary.canary.embedded import start_redis  # noqa: E402
from reverie_canary.services.judge.core import Policy, fold  # noqa: E402
from reverie_canary.services.judge.service import Judge  # noqa: E402
from reverie_canary.services.judge.store import RedisJudgeStore  # noqa: E402
from tests.judge_events import MODEL, cycle_events  # noqa: E402

KINDS = ("ttft", "refusal", "structured", "language", "echo")


class DiscardPublisher:
    """Publishes nothing: isolates the judge's Redis path from NATS."""

    async def publish(self, event, subject, msg_id, stream) -> bool:
        return True


def make_log(providers: int, cycles: int) -> list:
    names = [f"p{i:02d}/fp8" for i in range(providers)]
    events = []
    for n in range(cycles):
        table = {}
        for i, name in enumerate(names):
            table[name] = {k: "pass" for k in KINDS}
            if i == 0 or (i == 1 and n % 3):
                table[name]["ttft"] = ("fail", "ttft_exceeded")
            if i == 2 and n % 2:
                table[name]["structured"] = ("transport_error", "http_503")
        events += cycle_events(n, table)
    return events


def bench_policy(events: list, repeat: int) -> float:
    policy = Policy(mode="enforce")
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fold(events, policy)
        rates.append(len(events) / (time.perf_counter() - t0))
    return statistics.median(rates)


async def bench_judge(url: str, events: list, repeat: int) -> float:
    rates = []
    for r in range(repeat):
        client = aioredis.from_url(url)
        judge = Judge(RedisJudgeStore(client, f"bench{r}"), DiscardPublisher(), Policy(mode="enforce"), [MODEL])
        t0 = time.perf_counter()
        for seq, event in enumerate(events, 1):
            await judge.apply_to(MODEL, event, seq)
        rates.append(len(events) / (time.perf_counter() - t0))
        await client.aclose()
    return statistics.median(rates)


async def bench_redis(url: str, value: bytes, n: int, repeat: int) -> tuple[float, float]:
    client = aioredis.from_url(url)
    single, piped = [], []
    for r in range(repeat):
        t0 = time.perf_counter()
        for i in range(n):
            await client.set(f"plain{r}:{i % 16}", value)
        single.append(n / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        async with client.pipeline(transaction=False) as pipe:
            for i in range(n):
                pipe.set(f"piped{r}:{i % 16}", value)
            await pipe.execute()
        piped.append(n / (time.perf_counter() - t0))
    await client.aclose()
    return statistics.median(single), statistics.median(piped)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--providers", type=int, default=10)
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    events = make_log(args.providers, args.cycles)
    policy_rate = bench_policy(events, args.repeat)
    states, _ = fold(events, Policy(mode="enforce"))
    import msgspec

    record_size = len(msgspec.json.encode(states[MODEL]))
    with tempfile.TemporaryDirectory() as tmp:
        server = start_redis(Path(tmp))
        try:
            judge_rate = await bench_judge(server.url, events, args.repeat)
            single, piped = await bench_redis(server.url, b"x" * record_size, len(events), args.repeat)
        finally:
            server.stop()

    print(f"judge benchmark: {len(events)} events ({args.providers} providers x {len(KINDS)} kinds x "
          f"{args.cycles} cycles), state record ~{record_size / 1024:.1f} KiB; median of {args.repeat}")
    print(f"{'what':<52} {'events/s':>10} {'ratio':>8}")
    rows = [
        ("policy alone, no I/O (fold)", policy_rate),
        ("judge into Redis (load, decide, compare-and-set save)", judge_rate),
        ("Redis: plain SET of a record-sized value, 1 RTT each", single),
        ("Redis: the same SETs pipelined", piped),
    ]
    for name, rate in rows:
        print(f"{name:<52} {rate:>10.0f} {rate / single:>7.2f}x")
    print(f"judge vs one plain SET per event: {judge_rate / single:.2f}x "
          f"(a judged event costs an HGET, a compare-and-set script and the fold, JSON both ways)")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
