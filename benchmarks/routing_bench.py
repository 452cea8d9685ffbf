"""Routing latency: a judge decision published -> the new ignore list applied by N chat-backend clients.

For 1, 10 and 100 watching ``IgnoreListClient``s (each its own NATS
connection and KV watch), publish ``--decisions`` judge decisions one after
another (after two unmeasured warm-up decisions; alternately ``suspend`` and
``end`` of one provider, so every decision changes the snapshot) and time each
from just before the JetStream publish to the moment the last client applied
the new version.  The path is the real one: JetStream log -> the router's
durable pull consumer -> Redis -> KV compare-and-set -> every client's KV watch.

Each decision is also cut into its steps, and each step printed beside its
anchor, measured on the same servers in the same repetition:

======================================  ==================================================
step                                     anchor
======================================  ==================================================
published -> router received             bare NATS request/reply (512 B), two connections
  (JetStream store, pull delivery, decode)
received -> KV put sent                  bare Redis PING round trip
  (decide, the record saved in Redis)
KV put sent -> put acknowledged          bare KV put -> its acknowledgement
KV put sent -> all N clients applied     bare KV put -> N bare watchers' callbacks (N
  (fan-out, decode, apply)               connections, no decoding)
published -> all N applied (the total)   goal: <= 2 x RTT + 5 ms
======================================  ==================================================

"router received" is when ``Router.step`` is entered for the decision, "KV put"
the router's ``KeyValue.update`` of the model's key: both are read by wrapping
those two methods in this process (the router runs in-process, on the same event
loop as the clients, as in every earlier figure of this benchmark).  Each
repetition (``--repeat``, default 3) measures every anchor and every client
count again; the table gives the median over the repetitions of each
repetition's median (and p99) and, in brackets, their min-max.  Starts its own
NATS and Redis (canary.embedded, no authorization).

    python benchmarks/routing_bench.py [--decisions 30] [--clients 1,10,100] [--rtt-requests 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402
from nats.js.api import DeliverPolicy  # noqa: E402
from nats.js.kv import KeyValue  # noqa: E402

from reverie_canary.canary.embedded import aservers  # noqa: E402
from reverie_canary.canary.runtime import running  # noqa: E402
from reverie_canary.client import IgnoreListClient  # noqa: E402
from reverie_canary.services.router.service import Router  # noqa: E402
from reverie_canary.shared.contract import codec, subjects  # noqa: E402
from reverie_canary.shared.contract.events import Decision, Suspended, SuspensionEnded  # noqa: E402
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot  # noqa: E402
from reverie_canary.shared.runtime.logging import configure  # noqa: E402
from reverie_canary.shared.runtime.service import ensure_streams  # noqa: E402
from reverie_canary.shared.runtime.settings import Settings  # noqa: E402

MODEL = "bench/chat-1"
PROVIDER = "slow/fp8"
WARMUP = 2
#: Pause between two decisions (s): each is measured alone, not behind the previous one.
PAUSE_S = 0.02
BARE_BUCKET = "bench-bare"


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; the max for small samples at high q."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- the router's steps, read by wrapping two methods ------------------------------------------

@dataclass
class Marks:
    """perf_counter() times (s) of one decision's steps in the router."""

    received: float | None = None
    put_sent: float | None = None
    put_acked: float | None = None


MARKS: dict[str, Marks] = {}  # decision id -> its marks
CURRENT: dict[str, str] = {}  # "id": the decision in flight (the KV put that follows it is its own)
KV_KEY = subjects.kv_key(MODEL)


def instrument() -> None:
    """Wrap ``Router.step`` and ``KeyValue.update`` to note when a bench decision reaches each."""
    step, update = Router.step, KeyValue.update

    async def timed_step(self, event, position):
        if isinstance(event, Decision) and event.decision_id in MARKS:
            MARKS[event.decision_id].received = time.perf_counter()
        return await step(self, event, position)

    async def timed_update(self, key, value, last=None, *args, **kwargs):
        marks = MARKS.get(CURRENT.get("id", "")) if key == KV_KEY else None
        if marks is not None and marks.put_sent is None:
            marks.put_sent = time.perf_counter()
        revision = await update(self, key, value, last, *args, **kwargs)
        if marks is not None and marks.put_acked is None:
            marks.put_acked = time.perf_counter()
        return revision

    Router.step = timed_step  # type: ignore[method-assign]
    KeyValue.update = timed_update  # type: ignore[method-assign]


# -- anchors ---------------------------------------------------------------------------------

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


async def redis_rtt(url: str, n: int) -> list[float]:
    """Round-trip times (s) of ``n`` Redis PINGs on one connection."""
    client = aioredis.from_url(url)
    for _ in range(30):
        await client.ping()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await client.ping()
        times.append(time.perf_counter() - started)
    await client.aclose()
    return times


async def bare_kv(url: str, n: int, puts: int, size: int) -> tuple[list[float], list[float]]:
    """A bare KV put of ``size`` bytes and ``n`` bare watchers (each its own connection, an ordered
    consumer on the key with a callback that only notes the time, no decoding).

    Returns:
        (put -> its acknowledgement, put -> the last of the n watchers' callbacks), seconds, per put.
    """
    writer = await nats.connect(url)
    js = writer.jetstream()
    kv = await js.key_value(BARE_BUCKET)
    await kv.put("k", b"0")
    watchers = [await nats.connect(url) for _ in range(n)]
    seen: dict[int, list[float]] = {}
    done: dict[int, asyncio.Event] = {}

    def make_cb():
        async def cb(msg) -> None:
            stamp = time.perf_counter()
            revision = msg.metadata.sequence.stream
            times = seen.setdefault(revision, [])
            times.append(stamp)
            if len(times) == n:
                done.setdefault(revision, asyncio.Event()).set()
        return cb

    subs = [await w.jetstream().subscribe(f"$KV.{BARE_BUCKET}.k", stream=f"KV_{BARE_BUCKET}", cb=make_cb(),
                                          ordered_consumer=True, deliver_policy=DeliverPolicy.NEW)
            for w in watchers]
    for w in watchers:
        await w.flush()
    await asyncio.sleep(0.2)
    payload = b"x" * size
    acks, fanned = [], []
    try:
        for k in range(WARMUP + puts):
            started = time.perf_counter()
            revision = await kv.put("k", payload)
            acked = time.perf_counter()
            await asyncio.wait_for(done.setdefault(revision, asyncio.Event()).wait(), 10)
            if k >= WARMUP:
                acks.append(acked - started)
                fanned.append(max(seen[revision]) - started)
            await asyncio.sleep(PAUSE_S)
    finally:
        for sub in subs:
            await sub.unsubscribe()
        for w in watchers:
            await w.close()
        await writer.close()
    return acks, fanned


# -- the routed path -------------------------------------------------------------------------

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


@dataclass
class Routed:
    """One client count's decisions, each step in seconds."""

    total: list[float] = field(default_factory=list)  # published -> last client applied
    each: list[float] = field(default_factory=list)  # published -> every client applied
    received: list[float] = field(default_factory=list)  # published -> router received
    to_put: list[float] = field(default_factory=list)  # received -> KV put sent
    put: list[float] = field(default_factory=list)  # KV put sent -> acknowledged
    fan: list[float] = field(default_factory=list)  # KV put sent -> last client applied
    size: int = 0  # bytes of the last snapshot


async def measure(url: str, js, n: int, decisions: int) -> Routed:
    """Publish ``decisions`` decisions (after WARMUP unmeasured ones) to a fleet of ``n`` clients."""
    fleet = Fleet(url, n)
    await fleet.start()
    out = Routed()
    try:
        version = max(c.version for c in fleet.clients)
        if min(c.version for c in fleet.clients) != version:
            await fleet.wait_version(version)
        run = uuid.uuid4().hex[:8]
        for k in range(WARMUP + decisions):
            now = datetime.now(timezone.utc)
            common = {"at": now, "decision_id": f"bench|{run}|{k}", "model": MODEL, "provider": PROVIDER,
                      "reason": "bench"}
            decision: Decision = (Suspended(**common, until=now + timedelta(days=1)) if k % 2 == 0
                                  else SuspensionEnded(**common))
            data = codec.encode(decision)
            marks = MARKS[decision.decision_id] = Marks()
            CURRENT["id"] = decision.decision_id
            version += 1
            started = time.perf_counter()
            await js.publish(subjects.decision(MODEL, PROVIDER), data, headers={"Nats-Msg-Id": decision.decision_id})
            await fleet.wait_version(version)
            if k >= WARMUP:
                times = fleet.seen[version]
                last = max(times)
                out.total.append(last - started)
                out.each.extend(t - started for t in times)
                if None not in (marks.received, marks.put_sent, marks.put_acked):
                    out.received.append(marks.received - started)
                    out.to_put.append(marks.put_sent - marks.received)
                    out.put.append(marks.put_acked - marks.put_sent)
                    out.fan.append(last - marks.put_sent)
            await asyncio.sleep(PAUSE_S)
        snapshot = fleet.clients[0].snapshot
        out.size = len(codec.encode(snapshot)) if snapshot is not None else 0
        return out
    finally:
        CURRENT.clear()
        await fleet.stop()


# -- printing --------------------------------------------------------------------------------

def cell(reps: list[list[float]], q: float | None) -> str:
    """Median over the repetitions of each one's median (``q`` None) or ``q`` quantile, with the min-max, in ms."""
    values = [(statistics.median(r) if q is None else quantile(r, q)) * 1000 for r in reps if r]
    if not values:
        return f"{'-':>20}"
    return f"{statistics.median(values):6.2f} ({min(values):5.2f}-{max(values):5.2f})"


def row(label: str, reps: list[list[float]], anchor_label: str, anchors: list[list[float]]) -> str:
    ratio = ""
    meds = [statistics.median(r) for r in reps if r]
    amed = [statistics.median(a) for a in anchors if a]
    if meds and amed:
        ratio = f"{statistics.median(meds) / statistics.median(amed):6.1f}x"
    return (f"  {label:<34} {cell(reps, None)} {cell(reps, 0.99)}   {anchor_label:<28} "
            f"{cell(anchors, None)} {cell(anchors, 0.99)} {ratio:>7}")


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=30, help="decisions per client count (default 30)")
    parser.add_argument("--clients", default="1,10,100", help="client counts, comma-separated (default 1,10,100)")
    parser.add_argument("--rtt-requests", type=int, default=300, help="bare request/replies for the anchor")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (default 3)")
    args = parser.parse_args(argv)
    counts = [int(x) for x in args.clients.split(",") if x.strip()]

    configure("console", "WARNING", stream=sys.stderr)
    instrument()
    rtts: list[list[float]] = []
    pings: list[list[float]] = []
    kv_ack: dict[int, list[list[float]]] = {n: [] for n in counts}
    kv_fan: dict[int, list[list[float]]] = {n: [] for n in counts}
    routed: dict[int, list[Routed]] = {n: [] for n in counts}
    with tempfile.TemporaryDirectory(prefix="routing-bench-") as tmp:
        async with aservers(Path(tmp)) as (nats_server, redis_server):
            settings = Settings.load(env={}, nats_url=nats_server.url, redis_url=redis_server.url,
                                     namespace="bench", models=[MODEL], mode="enforce", log_level="WARNING")
            await ensure_streams(settings)
            nc = await nats.connect(nats_server.url)
            js = nc.jetstream()
            await js.create_key_value(bucket=BARE_BUCKET, history=1)
            async with running(settings, ["router"]):
                for _ in range(args.repeat):
                    rtts.append(await bare_rtt(nats_server.url, args.rtt_requests))
                    pings.append(await redis_rtt(redis_server.url, args.rtt_requests))
                    for n in counts:
                        result = await measure(nats_server.url, js, n, args.decisions)
                        routed[n].append(result)
                        acks, fanned = await bare_kv(nats_server.url, n, args.decisions, max(result.size, 64))
                        kv_ack[n].append(acks)
                        kv_fan[n].append(fanned)
            await nc.close()

    rtt_med = statistics.median(statistics.median(r) for r in rtts)
    print(f"routing benchmark: {args.repeat} repetitions, {args.decisions} decisions per client count and repetition; "
          "ms: median over the repetitions of each one's median / p99 (min-max)")
    print(f"  bare NATS request/reply (512 B): {cell(rtts, None)}  p99 {cell(rtts, 0.99)}")
    print(f"  bare Redis PING:                 {cell(pings, None)}  p99 {cell(pings, 0.99)}")
    goal = 2 * rtt_med + 0.005
    print(f"  goal: all N applied <= 2 x RTT + 5 ms = {goal * 1000:.2f} ms")
    header = (f"  {'step':<34} {'median':>20} {'p99':>20}   {'anchor':<28} {'median':>20} {'p99':>20} "
              f"{'÷ anchor':>7}")
    for n in counts:
        reps = routed[n]
        size = reps[-1].size if reps else 0
        print()
        print(f"{n} client(s) (snapshot {size} B)")
        print(header)
        print(row("published -> router received", [r.received for r in reps], "NATS request/reply", rtts))
        print(row("received -> KV put sent", [r.to_put for r in reps], "Redis PING", pings))
        print(row("KV put sent -> acknowledged", [r.put for r in reps], "bare KV put -> ack", kv_ack[n]))
        print(row(f"KV put sent -> all {n} applied", [r.fan for r in reps], f"bare KV put -> {n} watchers",
                  kv_fan[n]))
        print(row(f"published -> all {n} applied", [r.total for r in reps], "NATS request/reply", rtts))
        print(row("published -> each client applied", [r.each for r in reps], "NATS request/reply", rtts))
        meds = [statistics.median(r.total) for r in reps if r.total]
        p99s = [quantile(r.total, 0.99) for r in reps if r.total]
        if meds:
            verdict = "PASS" if statistics.median(p99s) <= goal else "FAIL"
            print(f"  all {n} applied: median {statistics.median(meds) * 1000:.2f} ms, p99 "
                  f"{statistics.median(p99s) * 1000:.2f} ms against the goal {goal * 1000:.2f} ms: {verdict} (info)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
