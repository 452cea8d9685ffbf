"""Run every benchmark, one after another: ``python benchmarks/run_all.py [--quick]``.

Each prints its figures beside a baseline measured in the same run, as ratios
(the machine is shared and noisy; absolute times drift).  ``--quick`` runs every
benchmark once at its smallest size (about a minute in all on 2 cores): it proves
that each still runs and that the targets it judges at that size hold, not the
figures, which need the full sizes.  The test suite runs ``--quick``
(``tests/integration/test_benchmarks.py``), so a benchmark cannot rot unseen.

Every ``benchmarks/*.py`` is either a benchmark in :data:`BENCHMARKS` or a helper
in :data:`NOT_BENCHMARKS`; a script in neither, or a listed one that is gone, fails
the run.  Exit status 1 when a benchmark fails (its name is printed).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Each benchmark with its arguments for a full run.
BENCHMARKS = {
    "checks_bench.py": [],
    "guard_bench.py": [],
    "tool_checks.py": [],
    "language_table.py": ["--limit", "120"],
    "judge_bench.py": [],
    "prober_bench.py": [],
    "hostile_bench.py": [],
    "routing_bench.py": [],
    "notifier_bench.py": [],
    "log_storage.py": [],
    "replay_bench.py": [],
    "tracing_bench.py": [],
    "dashboard_bench.py": [],
    "feed_bench.py": [],
    "fleet_bench.py": [],
    "chat_traffic.py": [],
    "soak.py": ["--cycles", "1000"],
}
#: Each benchmark once at its smallest size (``--quick``): every one listed, one repetition.
QUICK = {
    "checks_bench.py": ["--runs", "5"],
    "guard_bench.py": ["--runs", "5"],
    "tool_checks.py": ["--runs", "5", "--no-real-text"],
    "language_table.py": ["--limit", "2", "--variants-limit", "2"],
    "judge_bench.py": ["--providers", "10,20", "--events", "200", "--repeat", "1"],
    "prober_bench.py": ["--probes", "10", "--concurrency", "4", "--inflight", "2", "--timing-probes", "4",
                        "--repeat", "1", "--loop", "asyncio"],
    "hostile_bench.py": ["--cycles", "1", "--repeat", "1"],
    "routing_bench.py": ["--decisions", "2", "--clients", "1,2", "--rtt-requests", "20", "--repeat", "1"],
    "notifier_bench.py": ["--notices", "10", "--burst", "20", "--repeat", "1"],
    # S2 compresses the log in blocks: with fewer results the 1 kB goal is not reached (5,000: 1.5 kB)
    "log_storage.py": ["--cycles", "1", "--results", "20000", "--scenario", "default"],
    "replay_bench.py": ["--models", "2", "--providers", "3", "--cycles", "2", "--repeat", "1"],
    "tracing_bench.py": ["--messages", "200"],
    "dashboard_bench.py": ["--models", "2", "--providers", "3", "--cycles", "2", "--repeat", "1"],
    "feed_bench.py": ["--models", "2", "--providers", "3", "--cycles", "2", "--readers", "5", "--repeat", "2"],
    "fleet_bench.py": ["--models", "1", "--providers", "3", "--probers", "1", "--window-s", "8", "--gap-s", "1",
                       "--cycles", "1", "--lead-s", "3"],
    "chat_traffic.py": ["--rpm", "120", "--onset-s", "2", "--run-s", "8", "--defect", "first_bytes"],
    "soak.py": ["--cycles", "3", "--report-every", "3", "--cycle-s", "4"],
}
#: Scripts here that are not benchmarks (this runner; a profile reader that needs a profile to read).
NOT_BENCHMARKS = frozenset({"run_all.py", "top_frames.py"})


def unlisted() -> list[str]:
    """Scripts of ``benchmarks/`` that are neither a benchmark nor a known helper, and listed ones that are gone."""
    present = {p.name for p in HERE.glob("*.py") if not p.name.startswith("_")}
    return sorted((present - set(BENCHMARKS) - NOT_BENCHMARKS) | (set(BENCHMARKS) - present))


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    stray = unlisted()
    if stray:
        print(f"not in run_all.py's BENCHMARKS (or gone from benchmarks/): {', '.join(stray)}", flush=True)
    failed = list(stray)
    start = time.perf_counter()
    for name, args in BENCHMARKS.items():
        path = HERE / name
        if not path.exists():
            continue
        argv = QUICK[name] if quick else args
        print(f"\n===== {name} {' '.join(argv)}", flush=True)
        t0 = time.perf_counter()
        code = subprocess.call([sys.executable, str(path), *argv])
        print(f"===== {name}: exit {code} after {time.perf_counter() - t0:.0f} s", flush=True)
        if code:
            failed.append(name)
    print(f"\n{len(BENCHMARKS)} benchmarks in {time.perf_counter() - start:.0f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
