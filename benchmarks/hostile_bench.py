"""Eight hostile providers beside eight healthy ones: prober memory, token timing, outcomes in time.

The simulated gateway (scenario ``hostile``: keep-alives forever, tokens
forever, headers then silence, HTML with 200, bad UTF-8, a stream without
``[DONE]``, a 20 MB reply as SSE and as one body) and the prober each run in a
process of their own; discovery and the judge in this one, on embedded NATS and
Redis.  Time is compressed (a cycle of ``--cycle-s`` seconds, the latency bar
1 s).  Printed, per repetition and with the spread over ``--repeat`` runs:

- the prober's peak RSS (``VmHWM``) against the 340 MB goal;
- healthy providers: results that passed, and the time-to-first-token error
  (reported minus injected delay, p50/p99/max) against the 20 ms goal, beside
  the same error measured against the simulator's own first-token time (its
  ``/generation`` record): the difference is the gateway's own queueing;
- hostile providers: each kind's outcomes and reasons, the latest result
  against its task's deadline;
- the largest result on the bus against NATS's 1 MiB ``max_payload``.

    python benchmarks/hostile_bench.py [--cycles 10] [--cycle-s 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reverie_canary.canary.embedded import start_nats, start_redis  # noqa: E402
from tests.hostile_fleet import run_fleet  # noqa: E402

MAX_PAYLOAD = 1024 * 1024


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def once(cycles: int, cycle_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        nats = start_nats(Path(tmp) / "nats")
        redis = start_redis(Path(tmp) / "redis")
        try:
            run = await run_fleet(nats_url=nats.url, redis_url=redis.url, namespace=f"b{uuid.uuid4().hex[:6]}",
                                  cycles=cycles, cycle_s=cycle_s, gateway_ttft=True)
        finally:
            redis.stop()
            nats.stop()
    counted = set(run.cycles(cycles))
    healthy = [o for o in run.results if o.result.provider in run.injected_ms and o.result.cycle in counted]
    errors = [o.result.reply.ttft_ms - run.injected_ms[o.result.provider] for o in healthy
              if o.result.reply.ttft_ms is not None]
    prober_errors = [o.result.reply.ttft_ms - o.sim_ttft_ms for o in healthy
                     if o.result.reply.ttft_ms is not None and o.sim_ttft_ms is not None]
    outcomes: dict[str, Counter] = defaultdict(Counter)
    late = 0
    slack: list[float] = []
    for o in run.results:
        if o.result.cycle not in counted or o.deadline is None:
            continue
        slack.append((o.deadline - o.result.at).total_seconds())
        late += o.result.at > o.deadline
        kind = run.hostile.get(o.result.provider)
        if kind is not None:
            outcomes[f"{kind} ({o.result.provider})"][f"{o.result.outcome}/{o.result.reason}"] += 1
    planned = [t for t, d in run.tasks.items() if any(t for o in run.results if o.result.task_id == t)]
    verdicts = [pv for v in run.verdicts if v.cycle in counted for pv in v.verdicts
                if pv.provider in run.injected_ms]
    return {
        "rss": run.prober_peak_rss_mb,
        "healthy_pass": sum(o.result.outcome == "pass" for o in healthy), "healthy_n": len(healthy),
        "healthy_passed_cycles": sum(pv.verdict == "passed" for pv in verdicts), "healthy_cycles": len(verdicts),
        "err": errors, "prober_err": prober_errors, "outcomes": outcomes, "late": late,
        "min_slack_s": min(slack) if slack else float("nan"),
        "max_size": max((o.size for o in run.results), default=0),
        "results": len(run.results), "tasks": len(run.tasks), "answered": len(planned), "wall_s": run.wall_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--cycle-s", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    runs = [asyncio.run(once(args.cycles, args.cycle_s)) for _ in range(args.repeat)]
    print(f"hostile gateway: 8 hostile + 8 healthy providers, {args.cycles} cycles of {args.cycle_s:g} s, "
          f"{args.repeat} runs; gateway and prober in their own processes")
    print(f"{'run':>4} {'prober peak RSS MB':>19} {'healthy pass':>13} {'passed cycles':>14} "
          f"{'TTFT err p50/p99/max ms':>24} {'vs gateway p50/p99/max':>23} {'late':>5} {'min slack s':>12} "
          f"{'largest result B':>17}")
    for i, r in enumerate(runs, 1):
        e, p = r["err"], r["prober_err"]
        print(f"{i:>4} {r['rss']:>19.0f} {r['healthy_pass']:>6}/{r['healthy_n']:<6} "
              f"{r['healthy_passed_cycles']:>7}/{r['healthy_cycles']:<6} "
              f"{pct(e, .5):>8.1f}/{pct(e, .99):.1f}/{max(e, default=float('nan')):.1f} "
              f"{pct(p, .5):>11.1f}/{pct(p, .99):.1f}/{max(p, default=float('nan')):.1f} "
              f"{r['late']:>5} {r['min_slack_s']:>12.2f} {r['max_size']:>17}")
    rss = [r["rss"] for r in runs]
    p99 = [pct(r["err"], .99) for r in runs]
    print(f"spread over {len(runs)} runs: peak RSS {min(rss):.0f}-{max(rss):.0f} MB (goal < 340), "
          f"TTFT error p99 {min(p99):.1f}-{max(p99):.1f} ms (goal <= 20), largest result "
          f"{max(r['max_size'] for r in runs)} B of {MAX_PAYLOAD} max_payload")
    print("hostile outcomes (last run):")
    for kind, counts in sorted(runs[-1]["outcomes"].items()):
        print(f"  {kind:<40} " + ", ".join(f"{k} x{n}" for k, n in counts.most_common()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
