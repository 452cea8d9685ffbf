"""Judge throughput beside raw pipelined Redis HSETs of the same Redis, at a small and a large model.

    python benchmarks/judge_bench.py [--providers 10,250] [--events 6000] [--repeat 3] [--no-service]

For each size (providers of one model; the wire bounds a model at 256 endpoints) a
generated log of about ``--events`` events (listings, one result per provider and
kind, closes; some providers failing or flaky) is folded, in each repetition side by
side so that the machine's noise hits every row alike:

- **anchor**: raw ``HSET`` s of one result-sized field each, pipelined 256 at a time
  (the judge's batch), into the same Redis;
- the policy alone: the pure ``fold()`` (``decide`` per event) and the in-place
  ``Folder`` the judge and replays use;
- **judge into Redis**: the judge's own path (``Judge.apply_batch``: fold the batch in
  memory, one atomic save of what it changed, the outbox to a publisher that discards
  it), 256 events a batch; a tree without batches (``--per-event``, or before batched saves)
  goes through ``Judge.apply_to`` one event at a time (load, decide, compare-and-set save);
- **running service**: the judge service itself (``create_app``) on an embedded NATS and
  Redis, the log published first, from its first acknowledgement to its last (it reads
  the durable, folds, saves, publishes verdicts and decisions, acknowledges).

Each row: events/s, median of the repetitions (min-max), and the ratio to the anchor;
then, per row, the rate at the largest size divided by the rate at the smallest
(the goal: >= 0.9, the cost of an event does not grow with the model).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402
import redis.asyncio as aioredis  # noqa: E402

from reverie_canary.canary.embedded import start_nats, start_redis  # noqa: E402
from reverie_canary.services.judge import core  # noqa: E402
from reverie_canary.services.judge.core import Policy, fold  # noqa: E402
from reverie_canary.services.judge.service import Judge  # noqa: E402
from reverie_canary.services.judge.store import RedisJudgeStore  # noqa: E402
from reverie_canary.shared.runtime.broker import Delivery  # noqa: E402
from tests.judge_events import MODEL, cycle_events, publish_events  # noqa: E402

KINDS = ("ttft", "refusal", "structured", "language", "echo")
BATCH = 256


class DiscardPublisher:
    """Publishes nothing: isolates the judge's Redis path from NATS."""

    async def publish(self, event, subject, msg_id, stream) -> bool:
        return True


def make_log(providers: int, events: int) -> list:
    names = [f"p{i:03d}/fp8" for i in range(providers)]
    cycles = max(2, math.ceil(events / (providers * len(KINDS) + 2)))
    out = []
    for n in range(cycles):
        table = {}
        for i, name in enumerate(names):
            table[name] = dict.fromkeys(KINDS, "pass")
            if i == 0 or (i == 1 and n % 3):
                table[name]["ttft"] = ("fail", "ttft_exceeded")
            if i == 2 and n % 2:
                table[name]["structured"] = ("transport_error", "http_503")
        out += cycle_events(n, table)
    return out


def rate_pure(events: list) -> float:
    t0 = time.perf_counter()
    fold(events, Policy(mode="enforce"))
    return len(events) / (time.perf_counter() - t0)


def rate_folder(events: list) -> float | None:
    if not hasattr(core, "Folder"):
        return None
    folder = core.Folder(Policy(mode="enforce"))
    t0 = time.perf_counter()
    for event in events:
        folder.apply(MODEL, event)
    return len(events) / (time.perf_counter() - t0)


async def rate_hset(url: str, n: int, value: bytes, tag: str) -> float:
    client = aioredis.from_url(url)
    try:
        t0 = time.perf_counter()
        for start in range(0, n, BATCH):
            async with client.pipeline(transaction=False) as pipe:
                for i in range(start, min(n, start + BATCH)):
                    pipe.hset(f"anchor:{tag}", f"r:{i}", value)
                await pipe.execute()
        return n / (time.perf_counter() - t0)
    finally:
        await client.delete(f"anchor:{tag}")
        await client.aclose()


async def rate_judge(url: str, events: list, tag: str, per_event: bool) -> float:
    client = aioredis.from_url(url)
    try:
        judge = Judge(RedisJudgeStore(client, f"bench-{tag}"), DiscardPublisher(), Policy(mode="enforce"), [MODEL])
        batched = hasattr(judge, "apply_batch") and not per_event
        t0 = time.perf_counter()
        if batched:
            for start in range(0, len(events), BATCH):
                await judge.apply_batch([(e, Delivery(subject="", stream_seq=seq, deliveries=1, headers={}))
                                         for seq, e in enumerate(events[start:start + BATCH], start + 1)])
        else:
            for seq, event in enumerate(events, 1):
                await judge.apply_to(MODEL, event, seq)
        return len(events) / (time.perf_counter() - t0)
    finally:
        await client.aclose()


async def rate_service(workdir: Path, redis_url: str, events: list, tag: str) -> float:
    """The judge service on a NATS of its own (a fresh log and durable), from its start to its last acknowledgement."""
    import nats
    from nats.js.errors import NotFoundError

    from reverie_canary.services.judge.service import create_app
    from reverie_canary.shared.runtime import streams
    from reverie_canary.shared.runtime.service import ensure_streams
    from reverie_canary.shared.runtime.settings import Settings

    server = start_nats(workdir / f"nats-{tag}")
    try:
        settings = Settings.load(env={}, nats_url=server.url, redis_url=redis_url, namespace=f"svc-{tag}",
                                 models=[MODEL], mode="enforce", metrics_port=-1)
        await ensure_streams(settings)
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        durable = streams.judge_consumer(settings).durable
        try:
            for start in range(0, len(events), 2000):
                await publish_events(js, events[start:start + 2000])
            last_seq = (await js.stream_info(streams.LOG)).state.last_seq
            app = create_app(settings)
            await app.start()  # connected, its records read: the pull loop starts now
            started = time.perf_counter()
            try:
                while True:
                    try:
                        info = await js.consumer_info(streams.LOG, durable)
                    except NotFoundError:  # the judge's pull loop has not bound it yet
                        await asyncio.sleep(0.005)
                        continue
                    floor = info.ack_floor.stream_seq if info.ack_floor else 0
                    if floor >= last_seq and not info.num_ack_pending:
                        finished = time.perf_counter()
                        break
                    await asyncio.sleep(0.005)
            finally:
                await app.stop()
            return last_seq / (finished - started)
        finally:
            await nc.close()
    finally:
        server.stop()


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):>9,.0f} ({min(values):,.0f}-{max(values):,.0f})"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--providers", default="10,250", help="providers of the one model, comma-separated")
    parser.add_argument("--events", type=int, default=6000, help="events per log (whole cycles)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--per-event", action="store_true", help="the judge path one event at a time")
    parser.add_argument("--no-service", action="store_true", help="leave out the running service")
    args = parser.parse_args(argv)
    sizes = [int(p) for p in args.providers.split(",")]
    logs = {p: make_log(p, args.events) for p in sizes}
    result_size = max(len(msgspec.json.encode(e)) for e in logs[sizes[0]][1:3]) // 3  # a stored result reference
    rows: dict[int, dict[str, list[float]]] = {p: {} for p in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        redis_server = start_redis(Path(tmp) / "redis")
        try:
            for r in range(args.repeat):
                for p in sizes:
                    events = logs[p]
                    got = rows[p]
                    got.setdefault("anchor", []).append(await rate_hset(redis_server.url, len(events),
                                                                        b"x" * result_size, f"{p}-{r}"))
                    got.setdefault("pure", []).append(rate_pure(events))
                    folder = rate_folder(events)
                    if folder is not None:
                        got.setdefault("folder", []).append(folder)
                    got.setdefault("judge", []).append(await rate_judge(redis_server.url, events, f"{p}-{r}",
                                                                        args.per_event))
                    if not args.no_service:
                        got.setdefault("service", []).append(await rate_service(Path(tmp), redis_server.url,
                                                                                events, f"{p}-{r}"))
        finally:
            redis_server.stop()

    labels = {
        "anchor": f"anchor: raw pipelined HSET ({result_size} B, {BATCH} a pipeline)",
        "pure": "policy alone: pure fold(), decide per event",
        "folder": "policy alone: Folder (in place)",
        "judge": "judge into Redis (" + ("per event" if args.per_event or "folder" not in rows[sizes[0]]
                                         else f"batches of {BATCH}") + ")",
        "service": "running judge service (NATS + Redis)",
    }
    print(f"judge benchmark: one model, {args.repeat} repetitions, events/s median (min-max)")
    for p in sizes:
        n = len(logs[p])
        print(f"\n{p} providers x {len(KINDS)} kinds: {n} events")
        print(f"{'what':<56} {'events/s (min-max)':>26} {'÷ anchor':>9}")
        anchor = statistics.median(rows[p]["anchor"])
        for key, label in labels.items():
            if key in rows[p]:
                print(f"{label:<56} {spread(rows[p][key]):>26} {statistics.median(rows[p][key]) / anchor:>8.2f}")
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        print(f"\nat {large} providers ÷ at {small} (the same row, medians):")
        for key, label in labels.items():
            if key in rows[small] and key != "anchor":
                print(f"  {label:<54} {statistics.median(rows[large][key]) / statistics.median(rows[small][key]):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
