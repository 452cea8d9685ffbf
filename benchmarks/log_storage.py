"""Bytes per probe result on disk in the event log, without and with S2 compression, side by side.

```
python benchmarks/log_storage.py [--cycles 6] [--results 80000] [--goal-bytes 1000]
```

1. Runs the whole system (the demo's pipeline: the simulated gateway's full
   fleet, real sentences when the data folder is there, five services) for
   ``--cycles`` cycles and copies its event log, every message with its subject
   and headers.
2. Makes a long log of about ``--results`` probe results from it: the captured
   cycles again and again, each copy shifted in time with its own cycle
   numbers, task and message ids, jittered timings and other real sentences
   of each reply's language and length in its excerpts (what differs between
   two cycles of a steady fleet).
3. Publishes that same log into a fresh NATS server per variant, configured by
   ``shared/runtime/streams.py`` (``stream_compression`` none, then s2; the byte limit
   of the settings), and measures the stream's files on disk.

Prints the log's bytes per result on disk (all of the log: discovery,
verdicts, decisions, snapshots counted against the results, as an operator
sizes the disk) beside the stream's own byte count, for each variant, the
ratio, and PASS/FAIL against the goal of at most 1 kB a result (a 2,000-endpoint fleet's 35 days in 24 GiB).
JetStream compresses a block when it is full (16 MiB for the log's limits), so
the last block is measured uncompressed: the figure is for the whole log as
written, slightly pessimistic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reverie_canary.canary import embedded  # noqa: E402
from reverie_canary.canary.demo import pipeline  # noqa: E402
from reverie_canary.shared.runtime import streams  # noqa: E402
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect  # noqa: E402
from reverie_canary.shared.runtime.settings import Settings  # noqa: E402

TIMESTAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)")
TEXT = re.compile(rb'"(first_bytes|text_rest|reasoning|span|junk)":"((?:[^"\\]|\\.)*)"')
LANGUAGE = re.compile(rb'"language":"([a-z]{2})"')
CYCLE_NO = re.compile(rb"\|(\d{6,})\|")
TIMING = re.compile(rb'"(ttft_ms|total_ms)":(\d+(\.\d+)?)')
GENERATION = re.compile(rb"gen-\d+-[A-Za-z0-9]+")


@dataclass
class Message:
    subject: str
    headers: dict[str, str]
    data: bytes


async def capture(cycles: int, workdir: Path, scenario: str = "full") -> tuple[list[Message], float]:
    """Run the pipeline for ``cycles`` cycles; every message of its log, and the cycle length (s)."""
    sentences = Path(os.environ.get("CANARY_SHARED_DIR") or ROOT.parent / "shared") / "data" / "lang" / "sentences"
    async with pipeline(workdir=workdir, scenario=scenario, sentences=str(sentences) if sentences.exists() else None) as p:
        if not await p.wait_cycles(cycles):
            raise SystemExit("the pipeline closed no cycle: cannot measure")
        interval = p.settings.cycle_interval_s
        nc = await nats_connect(p.settings)
        js = nc.jetstream()
        info = await js.stream_info(streams.LOG)
        out: list[Message] = []
        done = asyncio.Event()

        async def on(msg) -> None:
            out.append(Message(msg.subject, dict(msg.headers or {}), msg.data))
            if msg.metadata.sequence.stream >= info.state.last_seq:
                done.set()

        sub = await js.subscribe(">", stream=streams.LOG, cb=on, ordered_consumer=True)
        await asyncio.wait_for(done.wait(), timeout=60)
        await sub.unsubscribe()
        await nc.close()
    return out, interval


def corpus() -> dict[str, list[str]]:
    """Real sentences per language (``data/lang/sentences`` of the data folder, ``$CANARY_SHARED_DIR``), or none."""
    folder = ROOT.parent / "shared" / "data" / "lang" / "sentences"
    if not folder.exists():
        return {}
    return {p.stem: [line for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
            for p in folder.glob("*.txt")}


SENTENCES = corpus()


def fresh_text(data: bytes, rng: random.Random) -> bytes:
    """Each reply excerpt replaced by other real text of its language and length: no two copies share a reply."""
    language = LANGUAGE.search(data)
    pool = SENTENCES.get(language.group(1).decode() if language else "en") or SENTENCES.get("en")
    if not pool:
        return data

    def swap(m: re.Match) -> bytes:
        length = len(json.loads(b'"' + m.group(2) + b'"'))
        text = ""
        while len(text) < length:
            text += rng.choice(pool) + " "
        return b'"%s":%s' % (m.group(1), json.dumps(text[:length], ensure_ascii=False).encode())

    return TEXT.sub(swap, data)


def copy_of(messages: list[Message], k: int, interval_s: float, rng: random.Random) -> list[Message]:
    """The captured log shifted by ``k`` of its own lengths: times, cycle numbers, ids, timings and reply texts
    changed (what differs between two cycles of a steady fleet)."""
    span = len({m for msg in messages for m in CYCLE_NO.findall(msg.data)}) or 1
    shift = timedelta(seconds=interval_s * span * k)

    def times(m: re.Match) -> bytes:
        text = m.group(0).decode().replace("Z", "+00:00")
        moved = datetime.fromisoformat(text) + shift
        return moved.strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()

    def body(data: bytes) -> bytes:
        data = TIMESTAMP.sub(times, data)
        data = CYCLE_NO.sub(lambda m: b"|%d|" % (int(m.group(1)) + span * k), data)
        data = TIMING.sub(lambda m: b'"%s":%.1f' % (m.group(1), float(m.group(2)) * rng.uniform(0.8, 1.25)), data)
        data = GENERATION.sub(lambda m: b"gen-%d-%016x" % (rng.randrange(10**9), rng.getrandbits(64)), data)
        return fresh_text(data, rng) if k else data

    return [Message(m.subject, {**m.headers, "Nats-Msg-Id": f"{m.headers.get('Nats-Msg-Id', '')}~{k}"}, body(m.data))
            for m in messages]


def on_disk(store: Path) -> int:
    """Bytes of the log stream's files in a server's store directory."""
    found = [p for p in store.rglob(f"streams/{streams.LOG}") if p.is_dir()]
    return sum(f.stat().st_size for d in found for f in d.rglob("*") if f.is_file())


async def measure(messages: list[Message], copies: int, interval_s: float, compression: str,
                  workdir: Path) -> tuple[int, int, int]:
    """Publish ``copies`` copies of the log into a fresh server with ``compression``: (results, disk, stream bytes)."""
    server = embedded.start_nats(workdir)
    try:
        settings = Settings.load(env={}, nats_url=server.url, stream_compression=compression)
        await ensure_streams(settings)
        nc = await nats_connect(settings)
        js = nc.jetstream()
        rng = random.Random(7)
        results = 0
        for k in range(copies):
            batch = copy_of(messages, k, interval_s, rng)
            for i in range(0, len(batch), 256):
                await asyncio.gather(*(js.publish(m.subject, m.data, headers=m.headers, timeout=30)
                                       for m in batch[i:i + 256]))
            results += sum(1 for m in batch if m.subject.startswith("canary.results."))
        info = await js.stream_info(streams.LOG)
        await nc.close()
    finally:
        server.stop()
    return results, on_disk(workdir), info.state.bytes


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument("--results", type=int, default=80_000)
    parser.add_argument("--scenario", default="full", help="the demo fleet whose log is captured (default or full)")
    parser.add_argument("--goal-bytes", type=float, default=1000.0, help="the goal: at most this many bytes a result")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="log-storage-") as tmp:
        t0 = time.perf_counter()
        messages, interval = await capture(args.cycles, Path(tmp) / "capture", args.scenario)
        per_copy = sum(1 for m in messages if m.subject.startswith("canary.results."))
        copies = max(1, -(-args.results // max(per_copy, 1)))
        raw = sum(len(m.data) for m in messages)
        print(f"captured {len(messages)} messages, {per_copy} probe results, {raw / max(per_copy, 1):.0f} bytes of "
              f"JSON per result, in {time.perf_counter() - t0:.0f} s; writing {copies} copies "
              f"({copies * per_copy} results)")
        rows = []
        for compression in ("none", "s2"):
            t1 = time.perf_counter()
            results, disk, logical = await measure(messages, copies, interval, compression,
                                                   Path(tmp) / f"store-{compression}")
            rows.append((compression, results, disk, logical))
            print(f"  {compression:5} {results:8} results  {disk / results:7.0f} B/result on disk  "
                  f"(stream bytes {logical / results:7.0f} B/result)  {time.perf_counter() - t1:.0f} s")
    (_, _, before, _), (_, results, after, _) = rows
    ratio = before / after
    ok = after / results <= args.goal_bytes
    print(f"\nbytes per result on disk: {before / results:.0f} without compression, {after / results:.0f} with S2 "
          f"({ratio:.2f}x smaller); goal <= {args.goal_bytes:.0f}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
