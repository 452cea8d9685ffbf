"""Notifier: decision -> signed webhook latency, and throughput to a healthy channel while another is down.

1. **Latency.** Publish ``--notices`` judge decisions (``suspend``, each its
   own provider) at ``--rate`` per second and time each from just before the
   JetStream publish to the moment a local webhook receiver has it (signature
   verified).  The path is the real one: JetStream log -> the notifier's
   ordered durable -> fold -> Redis (state + delivery entries, one script) ->
   the channel's delivery loop -> HTTP POST -> receiver.  Printed: median and
   p99, beside the round trip of a bare NATS request/reply on the same server.
2. **Throughput with a channel down.** Publish ``--burst`` decisions at once and
   time until the healthy channel has them all, three ways side by side: the
   healthy channel alone (baseline), plus a channel refusing connections, plus
   a channel that accepts and never answers (each attempt waits its timeout).
   Printed: notices/s delivered to the healthy channel and the ratio to the
   baseline.

Each figure is run ``--repeat`` times (the spread is printed).  Starts its own
NATS and Redis (canary.embedded, no authorization) and the notifier in-process,
with the default delivery schedule (5 s backoff base, 10 s attempt timeout).

    python benchmarks/notifier_bench.py [--notices 300] [--rate 50] [--burst 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats  # noqa: E402

from reverie_canary.canary.demo import notice_receiver  # noqa: E402
from reverie_canary.canary.embedded import aservers, free_port  # noqa: E402
from reverie_canary.services.notifier.service import create_app  # noqa: E402
from reverie_canary.shared.contract import codec, ids, subjects  # noqa: E402
from reverie_canary.shared.contract.events import Decision, make_decision  # noqa: E402
from reverie_canary.shared.runtime.logging import configure  # noqa: E402
from reverie_canary.shared.runtime.service import ensure_streams  # noqa: E402
from reverie_canary.shared.runtime.settings import Settings  # noqa: E402
from reverie_canary.shared.runtime.streams import LOG  # noqa: E402
from reverie_canary.simulator.server import serve  # noqa: E402

MODEL = "bench/model-1"


class Clock:
    """Receive times per notice id (monotonic seconds)."""

    def __init__(self) -> None:
        self.got: dict[str, float] = {}
        self.changed = asyncio.Event()

    async def on_notice(self, notice) -> None:
        self.got.setdefault(notice.notice_id, time.monotonic())
        self.changed.set()

    async def wait(self, wanted: set[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not wanted <= self.got.keys():
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{len(wanted - self.got.keys())} of {len(wanted)} notices never arrived")
            try:
                await asyncio.wait_for(self.changed.wait(), timeout=left)
            except TimeoutError:
                pass


async def blackhole() -> tuple[asyncio.AbstractServer, int]:
    """A TCP server that accepts connections and never answers (a hung receiver)."""
    held: list[asyncio.StreamWriter] = []

    async def accept(reader, writer) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def decision(tag: str, n: int) -> Decision:
    at = datetime(2026, 11, 1, tzinfo=timezone.utc) + timedelta(seconds=n)
    provider = f"{tag}-{n}/fp8"
    return make_decision(at=at, decision_id=ids.decision_id(MODEL, provider, "suspend", tag), model=MODEL,
                    provider=provider, action="suspend", reason="failed_cycles", until=at + timedelta(days=1),
                    ladder_level=1, detail="2 failed cycles in a row (ttft:ttft_exceeded)")


async def publish(js, d: Decision) -> None:
    await js.publish(subjects.decision(MODEL, d.provider), codec.encode(d), stream=LOG,
                     headers={"Nats-Msg-Id": d.decision_id})


async def rtt(nc, n: int = 300) -> float:
    """Median NATS request/reply round trip (ms)."""
    inbox = f"bench.echo.{uuid.uuid4().hex}"

    async def echo(msg) -> None:
        await msg.respond(msg.data)

    sub = await nc.subscribe(inbox, cb=echo)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await nc.request(inbox, b"x", timeout=5)
        times.append((time.perf_counter() - t0) * 1000)
    await sub.unsubscribe()
    return statistics.median(times)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} (min {min(values):.1f}, max {max(values):.1f})"


async def main(args) -> int:
    configure("console", "ERROR")
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    clock = Clock()
    hole, hole_port = await blackhole()
    closed_port = free_port()  # nothing listens: connection refused
    with tempfile.TemporaryDirectory(prefix="notifier-bench-") as tmp:
        async with aservers(Path(tmp)) as (nats_server, redis_server), \
                serve(notice_receiver(secret, clock.on_notice)) as url:
            hook = url.removesuffix("/api/v1") + "/notices"
            base = Settings.load(env={}, nats_url=nats_server.url, redis_url=redis_server.url, models=[MODEL])
            await ensure_streams(base)
            nc = await nats.connect(nats_server.url)
            js = nc.jetstream()
            bare_ms = await rtt(nc)
            print(f"NATS request/reply round trip (median): {bare_ms:.2f} ms")

            async def run(urls: dict[str, str], decisions: list[Decision], pace_s: float) -> list[tuple[float, float]]:
                """(published, received) monotonic times of each decision's notice on the healthy channel."""
                settings = base.replace(namespace=f"b{uuid.uuid4().hex[:8]}", notify_urls=urls,
                                        notify_secrets={k: secret for k, v in urls.items() if v.startswith("http")})
                app = create_app(settings)
                await app.start()
                try:
                    sent: dict[str, float] = {}
                    t0 = time.monotonic()
                    for k, d in enumerate(decisions):
                        if pace_s:
                            await asyncio.sleep(max(0.0, t0 + k * pace_s - time.monotonic()))
                        sent[d.decision_id] = time.monotonic()
                        await publish(js, d)
                    await clock.wait(set(sent), timeout_s=120)
                    return [(sent[i], clock.got[i]) for i in sent]
                finally:
                    await app.stop()

            latencies: list[list[float]] = []
            for r in range(args.repeat):
                warm = [decision(f"warm{r}", n) for n in range(5)]
                await run({"fast": hook}, warm, 0.01)
                got = await run({"fast": hook}, [decision(f"lat{r}", n) for n in range(args.notices)], 1.0 / args.rate)
                latencies.append(sorted((received - sent) * 1000 for sent, received in got))
            medians = [statistics.median(x) for x in latencies]
            p99s = [x[min(len(x) - 1, int(round(0.99 * (len(x) - 1))))] for x in latencies]
            print(f"\n1. decision published -> signed webhook received, {args.notices} notices at {args.rate}/s, "
                  f"{args.repeat} runs:")
            print(f"   median {spread(medians)} ms; p99 {spread(p99s)} ms; "
                  f"median = {statistics.median(medians) / bare_ms:.0f}x a bare NATS round trip")

            setups = {
                "healthy channel alone": {"fast": hook},
                "+ a channel refusing connections": {"fast": hook, "down": f"http://127.0.0.1:{closed_port}/x"},
                "+ a channel that never answers": {"fast": hook, "hung": f"http://127.0.0.1:{hole_port}/x"},
            }
            rates: dict[str, list[float]] = {k: [] for k in setups}
            for r in range(args.repeat):
                for name, urls in setups.items():  # side by side in each repetition
                    burst = [decision(f"burst{r}-{'-'.join(sorted(urls))}", n) for n in range(args.burst)]
                    got = await run(urls, burst, 0.0)
                    elapsed = max(received for _, received in got) - min(sent for sent, _ in got)
                    rates[name].append(args.burst / elapsed)
            base_rate = statistics.median(rates["healthy channel alone"])
            print(f"\n2. burst of {args.burst} decisions: notices/s delivered to the healthy channel, "
                  f"{args.repeat} runs:")
            for name, values in rates.items():
                print(f"   {name:<34} {spread(values)} /s  ratio {statistics.median(values) / base_rate:.2f}")
            await nc.close()
    hole.close()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notices", type=int, default=300)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    raise SystemExit(asyncio.run(main(parser.parse_args())))
