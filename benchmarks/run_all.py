"""Run every benchmark, one after another: ``python benchmarks/run_all.py``.

Each prints its figures beside a baseline measured in the same run, as ratios
(the machine is shared and noisy; absolute times drift).  Pass ``--quick`` for
smaller sizes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
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
    "fleet_bench.py": [],
}
QUICK = {
    "guard_bench.py": ["--runs", "50"],
    "tool_checks.py": ["--runs", "100", "--no-real-text"],
    "language_table.py": ["--limit", "40"],
    "judge_bench.py": ["--cycles", "12", "--repeat", "2"],
    "prober_bench.py": ["--probes", "200", "--repeat", "1", "--timing-probes", "16"],
    "hostile_bench.py": ["--cycles", "4", "--repeat", "1"],
    "notifier_bench.py": ["--notices", "100", "--burst", "200"],
    "log_storage.py": ["--cycles", "3", "--results", "20000"],
    "replay_bench.py": ["--models", "10", "--cycles", "6", "--repeat", "1"],
    "tracing_bench.py": ["--messages", "5000"],
    "dashboard_bench.py": ["--models", "10", "--repeat", "2"],
    "fleet_bench.py": ["--models", "5", "--providers", "20", "--window-s", "120"],
}


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    failed = []
    for name, args in BENCHMARKS.items():
        path = HERE / name
        if not path.exists():
            continue
        argv = QUICK.get(name, args) if quick else args
        print(f"\n===== {name} {' '.join(argv)}", flush=True)
        t0 = time.perf_counter()
        code = subprocess.call([sys.executable, str(path), *argv])
        print(f"===== {name}: exit {code} after {time.perf_counter() - t0:.0f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
