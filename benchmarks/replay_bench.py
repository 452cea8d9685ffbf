#!/usr/bin/env python
"""Rebuild / replay of the log: streamed fold beside the list it replaced and the pure fold.

Usage::

    python benchmarks/replay_bench.py [--models 100] [--providers 20] [--cycles 6] [--repeat 3]

A generated log of ``models × providers`` endpoints (100 × 20 = the 2,000-endpoint fleet),
six probes per endpoint and cycle (every kind, language twice), each result carrying the
checks a passing probe records, is published to an embedded JetStream.  Then, each in a fresh
process so that its peak memory is its own (``ru_maxrss``), side by side in one run:

- **pure fold**: the same events, already decoded in a list, through the judge's ``decide``
  (the anchor: the fastest any replay can be);
- **streamed**: ``scan_refold`` (what the judge's rebuild and ``canary replay`` do): pull
  requests kept ahead on an ephemeral consumer, each event decoded strictly and folded in place
  (``Folder``) as it arrives, the log never held;
- **list**: ``read_log`` then ``refold`` (what the rebuild did before): the whole log in memory.

Each prints events/s and peak RSS; the extrapolation to 30 days of the fleet (1,440 cycles,
about 15 M events) follows from the streamed rate (time) and from the list's growth (memory:
the streamed fold holds only the states, so its memory does not grow with the log).  A rebuild
after Redis lost the state reads only the log after the judge's newest fold snapshot
(``CANARY_JUDGE_SNAPSHOT_EVENTS``, 200,000 by default): its time is printed from the same rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KINDS = ("ttft", "refusal", "structured", "language", "echo")
MONTH_CYCLES = 30 * 48


def make_log(models: int, providers: int, cycles: int) -> list:
    """Discovery, results and closes of ``cycles`` cycles of every model; provider 0 of each model fails ttft."""
    import msgspec

    from reverie_canary.shared.contract.events import CheckResult, ProbeResult
    from tests.judge_events import CYCLE, T0, cycle_events

    checks = [CheckResult(check=name, outcome="pass") for name in
              ("transport", "latency.ttft", "refusal.finish_reason", "refusal.empty", "corruption.leading_junk",
               "corruption.control_tokens", "encoding", "language")]
    events = []
    for n in range(cycles):
        for m in range(models):
            table = {}
            for p in range(providers):
                kinds = dict.fromkeys(KINDS, "pass")
                if p == 0:
                    kinds["ttft"] = ("fail", "ttft_exceeded")
                table[f"p{p:02d}/fp8"] = kinds
            batch = cycle_events(n, table, model=f"bench/model-{m:03d}", start=T0 + n * CYCLE + timedelta(seconds=m))
            for i, ev in enumerate(batch):
                if isinstance(ev, ProbeResult):
                    batch[i] = msgspec.structs.replace(ev, checks=checks, prompt_version="v3", prober="bench-p1")
            events += batch
    return events


async def publish(url: str, events: list) -> None:
    import nats

    from reverie_canary.shared.runtime.service import ensure_streams
    from reverie_canary.shared.runtime.settings import Settings
    from tests.judge_events import publish_events

    await ensure_streams(Settings.load(env={}, nats_url=url, log_max_bytes=8 * 1024 ** 3))
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        for i in range(0, len(events), 2000):
            await publish_events(js, events[i:i + 2000])
    finally:
        await nc.close()


def measure(mode: str, url: str, models: int, providers: int, cycles: int) -> dict:
    """One measurement in this process: ``{"events", "seconds", "maxrss_mb"}``."""
    from reverie_canary.services.judge.core import Policy
    from reverie_canary.services.judge.replay import read_log, refold, scan_refold

    policy = Policy(mode="enforce", models=tuple(f"bench/model-{m:03d}" for m in range(models)))
    if mode == "pure":
        from reverie_canary.services.judge.replay import Refold
        from reverie_canary.shared.runtime.eventlog import LoggedEvent

        logged = [LoggedEvent(seq=i + 1, subject="", event=e) for i, e in enumerate(make_log(models, providers, cycles))]
        t0 = time.perf_counter()
        fold = Refold(policy, keep=None)
        for item in logged:
            fold.feed(item)
        return {"events": fold.events, "seconds": time.perf_counter() - t0, "maxrss_mb": _maxrss_mb()}

    async def run() -> tuple[int, float]:
        import nats

        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            t0 = time.perf_counter()
            if mode == "streamed":
                fold = await scan_refold(js, policy, keep=None)
                return fold.events, time.perf_counter() - t0
            logged = await read_log(js)
            refold(logged, policy)
            return len(logged), time.perf_counter() - t0
        finally:
            await nc.close()

    events, seconds = asyncio.run(run())
    return {"events": events, "seconds": seconds, "maxrss_mb": _maxrss_mb()}


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--providers", type=int, default=20)
    parser.add_argument("--cycles", type=int, default=6, help="cycles in the generated log (a month is 1,440)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--measure", choices=("pure", "streamed", "list"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.url, args.models, args.providers, args.cycles)))
        return 0

    from reverie_canary.canary.embedded import start_nats

    with tempfile.TemporaryDirectory() as workdir:
        server = start_nats(Path(workdir))
        try:
            events = make_log(args.models, args.providers, args.cycles)
            results = sum(1 for e in events if type(e).__name__ == "ProbeResult")
            t0 = time.perf_counter()
            asyncio.run(publish(server.url, events))
            print(f"log: {len(events)} events ({results} results) of {args.models} models × {args.providers} "
                  f"providers × {args.cycles} cycles, published in {time.perf_counter() - t0:.0f} s")
            rows: dict[str, list[dict]] = {"pure": [], "streamed": [], "list": []}
            for _ in range(args.repeat):
                for mode in rows:  # side by side in each repetition: the machine's noise hits all three
                    out = subprocess.run([sys.executable, __file__, "--measure", mode, "--url", server.url,
                                          "--models", str(args.models), "--providers", str(args.providers),
                                          "--cycles", str(args.cycles)], capture_output=True, text=True,
                                         timeout=3600, check=True)
                    rows[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
        finally:
            server.stop()
    print("\n| fold | events/s median (min–max) | ÷ pure fold | peak RSS MB (median) |")
    print("|---|---|---|---|")
    pure_rate = statistics.median(r["events"] / r["seconds"] for r in rows["pure"])
    for mode, label in (("pure", "pure fold, decoded list (anchor)"), ("streamed", "streamed from JetStream"),
                        ("list", "read_log list + refold (before)")):
        rates = [r["events"] / r["seconds"] for r in rows[mode]]
        rss = statistics.median(r["maxrss_mb"] for r in rows[mode])
        print(f"| {label} | {statistics.median(rates):,.0f} ({min(rates):,.0f}–{max(rates):,.0f}) | "
              f"{statistics.median(rates) / pure_rate:.2f} | {rss:.0f} |")
    streamed = statistics.median(r["events"] / r["seconds"] for r in rows["streamed"])
    per_cycle = len(events) / args.cycles
    month = per_cycle * MONTH_CYCLES * 2000 / (args.models * args.providers)
    listed = statistics.median(r["maxrss_mb"] for r in rows["list"])
    base = statistics.median(r["maxrss_mb"] for r in rows["streamed"])
    minutes = month / streamed / 60
    print(f"\n30 days of 2,000 endpoints ≈ {month / 1e6:.1f} M events: streamed ≈ {minutes:.1f} min "
          f"at the measured rate ({'PASS' if minutes <= 10 else 'FAIL'}: goal <= 10 min), memory ≈ {base:.0f} MB "
          f"(the states; it does not grow with the log); "
          f"the list would hold ≈ {(listed - base) * month / len(events) / 1024:.1f} GB more")
    from reverie_canary.shared.runtime.settings import Settings

    every = Settings.load(env={}).judge_snapshot_events
    print(f"a rebuild from the newest fold snapshot reads at most {every:,} events: ≈ {every / streamed:.0f} s "
          "at the same rate, whatever the log's length")
    return 0


if __name__ == "__main__":
    sys.exit(main())
