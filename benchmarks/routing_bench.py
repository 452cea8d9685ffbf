"""Routing latency: a judge decision published -> the new ignore list seen by N chat-backend clients.

For 1, 10 and 100 watching ``IgnoreListClient``s (each its own NATS
connection and KV watch), publish ~30 judge decisions one after another
(after two unmeasured warm-up decisions)
(alternately ``suspend`` and ``end`` of one provider, so every decision
changes the snapshot) and time each from just before the JetStream publish to
the moment the last client applied the new version.  The path is the real one:
JetStream log -> the router's durable pull consumer -> Redis -> KV
compare-and-set -> every client's KV watch.

Printed beside the round-trip time of a bare NATS request/reply on the same
server in the same run, so the ratio travels between machines.  Starts its own
NATS and Redis (canary.embedded, no authorization) and the router in-process.

    python benchmarks/routing_bench.py [--decisions 30] [--clients 1,10,100] [--rtt-requests 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats  # noqa: E402

from reverie_canary.canary.embedded import aservers  # noqa: E402
from reverie_canary.canary.runtime import running  # noqa: E402
from reverie_canary.shared import codec, subjects  # noqa: E402
from reverie_canary.client import IgnoreListClient  # noqa: E402
from reverie_canary.shared.events import Decision  # noqa: E402
from reverie_canary.shared.logging import configure  # noqa: E402
from reverie_canary.shared.service import ensure_streams  # noqa: E402
from reverie_canary.shared.settings import Settings  # noqa: E402
from reverie_canary.shared.snapshots import IgnoreSnapshot  # noqa: E402

MODEL = "bench/chat-1"
PROVIDER = "slow/fp8"


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; the max for small samples at high q."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def bare_rtt(url: str, n: int) -> list[float]:
    """Round-trip times (s) of ``n`` core NATS request/replies between two connections."""
    responder = await nats.connect(url)
    requester = await nats.connect(url)

    async def echo(msg) -> None:
        await msg.respond(msg.data)

    await responder.subscribe("bench.echo", cb=echo)
    await responder.flush()
    payload = b"x" * 512
    for _ in range(30):  # warm up
        await requester.request("bench.echo", payload, timeout=2)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await requester.request("bench.echo", payload, timeout=2)
        times.append(time.perf_counter() - started)
    await requester.close()
    await responder.close()
    return times


class Fleet:
    """N clients; records when each applied each version."""

    def __init__(self, url: str, n: int) -> None:
        self.clients: list[IgnoreListClient] = []
        self.seen: dict[int, list[float]] = {}
        self.complete: dict[int, asyncio.Event] = {}
        self.n = n
        for _ in range(n):
            self.clients.append(IgnoreListClient(url, MODEL, on_change=self._changed))

    def _changed(self, snapshot: IgnoreSnapshot) -> None:
        times = self.seen.setdefault(snapshot.version, [])
        times.append(time.perf_counter())
        if len(times) == self.n:
            self.complete.setdefault(snapshot.version, asyncio.Event()).set()

    async def start(self) -> None:
        await asyncio.gather(*(c.start() for c in self.clients))
        ready = await asyncio.gather(*(c.wait_ready(30) for c in self.clients))
        if not all(ready):
            raise RuntimeError("some clients saw no snapshot within 30 s")

    async def wait_version(self, version: int, timeout_s: float = 30.0) -> None:
        event = self.complete.setdefault(version, asyncio.Event())
        await asyncio.wait_for(event.wait(), timeout_s)

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.clients))


WARMUP = 2


async def measure(url: str, js, n: int, decisions: int) -> tuple[list[float], list[float]]:
    """Publish ``decisions`` decisions (after WARMUP unmeasured ones).

    Returns:
        (time until all N clients applied each decision, time until each client did), in seconds.
    """
    fleet = Fleet(url, n)
    await fleet.start()
    try:
        version = max(c.version for c in fleet.clients)
        if min(c.version for c in fleet.clients) != version:
            await fleet.wait_version(version)
        all_seen: list[float] = []
        each: list[float] = []
        run = uuid.uuid4().hex[:8]
        for k in range(WARMUP + decisions):
            now = datetime.now(timezone.utc)
            action = "suspend" if k % 2 == 0 else "end"
            decision = Decision(at=now, decision_id=f"bench|{run}|{k}", model=MODEL, provider=PROVIDER,
                                action=action, reason="bench", until=now + timedelta(days=1) if k % 2 == 0 else None)
            data = codec.encode(decision)
            version += 1
            started = time.perf_counter()
            await js.publish(subjects.decision(MODEL, PROVIDER), data, headers={"Nats-Msg-Id": decision.decision_id})
            await fleet.wait_version(version)
            if k >= WARMUP:
                times = fleet.seen[version]
                all_seen.append(max(times) - started)
                each.extend(t - started for t in times)
            await asyncio.sleep(0.02)
        return all_seen, each
    finally:
        await fleet.stop()


def ms(x: float) -> str:
    return f"{x * 1000:8.2f}"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=30, help="decisions per client count (default 30)")
    parser.add_argument("--clients", default="1,10,100", help="client counts, comma-separated (default 1,10,100)")
    parser.add_argument("--rtt-requests", type=int, default=300, help="bare request/replies for the baseline")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.clients.split(",") if x.strip()]

    configure("console", "WARNING", stream=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="routing-bench-") as tmp:
        async with aservers(Path(tmp)) as (nats_server, redis_server):
            settings = Settings.load(env={}, nats_url=nats_server.url, redis_url=redis_server.url,
                                     namespace="bench", models=[MODEL], mode="enforce", log_level="WARNING")
            await ensure_streams(settings)
            async with running(settings, ["router"]):
                nc = await nats.connect(nats_server.url)
                js = nc.jetstream()
                rtt = await bare_rtt(nats_server.url, args.rtt_requests)
                results = []
                for n in counts:
                    all_seen, each = await measure(nats_server.url, js, n, args.decisions)
                    results.append((n, all_seen, each))
                rtt_after = await bare_rtt(nats_server.url, args.rtt_requests)
                await nc.close()

    rtt_all = rtt + rtt_after
    rtt_med = statistics.median(rtt_all)
    print(f"bare NATS request/reply (512 B, same server, same run): median {rtt_med * 1000:.3f} ms, "
          f"p99 {quantile(rtt_all, 0.99) * 1000:.3f} ms over {len(rtt_all)} round trips "
          f"(before the runs {statistics.median(rtt) * 1000:.3f} ms, "
          f"after {statistics.median(rtt_after) * 1000:.3f} ms)")
    print()
    print("decision published -> new ignore list applied (ms); 'all' = the last of the N clients, "
          "'each' = every client")
    print(f"{'clients':>7} {'decisions':>9} {'all med':>8} {'all p99':>8} {'each med':>8} {'each p99':>8} "
          f"{'all med / RTT med':>18}")
    for n, all_seen, each in results:
        med = statistics.median(all_seen)
        print(f"{n:>7} {len(all_seen):>9} {ms(med)} {ms(quantile(all_seen, 0.99))} "
              f"{ms(statistics.median(each))} {ms(quantile(each, 0.99))} {med / rtt_med:>17.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
