"""Months without growth: a compressed-time soak with faults drawn from a printed seed.

Every service is its own ``canary run`` process (two probers), the dashboard too;
the simulated gateway runs ``benchmarks/soak_fleet.toml`` (every quality defect the
simulator knows, four healthy hosts, a positive control).  One 30-minute cycle takes
``--cycle-s`` seconds and every retention age is scaled by the same factor
(``tests/soak.py`` says which limits are scaled and which are not).  Faults are drawn
from ``--seed``: SIGKILL and restart of each service in turn, NATS restarted, Redis
restarted (empty) or flushed, the gateway down, the canary blind (401/402/403), hostile
answers from a healthy host, malformed and oversized messages on every subject family
the services read, operator commands (override add/remove, lift, mode switch,
exclusions reload) and discovery's clock jumping a cycle ahead.

Every ``--report-every`` cycles and at the end it prints each service's RSS and open
file descriptors, Redis memory and keys by prefix, each stream's bytes and messages,
the KV history per model, the notifier's book, results planned vs folded (lost) and
doubled, decisions doubled, notices lost or sent twice, and whether a replay of the
log equals the live state; then the goals (nothing lost or doubled, replay equals
live, RSS and Redis memory within 5 % from cycle 200 to the end, streams within
their limits).  Exit status 1 when a goal is missed.

    python benchmarks/soak.py --cycles 1000 --seed 7 [--cycle-s 5] [--report-every 100] [--kills-until 200]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.soak import Soak  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=None, help="fault sequence (default: a random one, printed)")
    parser.add_argument("--cycle-s", type=float, default=5.0, help="seconds of one 30-minute cycle")
    parser.add_argument("--report-every", type=int, default=100)
    parser.add_argument("--rate", type=float, default=0.3, help="chance of a fault in a cycle without one")
    parser.add_argument("--warmup", type=int, default=200, help="growth is measured from this cycle on")
    parser.add_argument("--kills-until", type=int, default=None,
                        help="the last cycle a service may be killed in (default: any); later the services "
                             "run as one process each, so that RSS growth is one process's")
    parser.add_argument("--retention-days", type=float, default=35.0,
                        help="scaled days every stream keeps (default 35); shorter than the run, the replay "
                             "starts from the judge's newest snapshot")
    parser.add_argument("--kinds", default="", help="comma-separated fault kinds to draw (default: all)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep servers' and services' files here")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)

    def say(line: str) -> None:
        print(line, flush=True)

    async def run(workdir: Path) -> int:
        soak = Soak(seed=seed, cycles=args.cycles, cycle_s=args.cycle_s, workdir=workdir,
                    report_every=args.report_every, rate=args.rate, warmup=args.warmup, say=say,
                    kinds=tuple(k for k in args.kinds.split(",") if k) or None, kills_until=args.kills_until,
                    retention_days=args.retention_days)
        result = await soak.run()
        return 1 if result.failures else 0

    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return asyncio.run(run(args.workdir))
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        return asyncio.run(run(Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
