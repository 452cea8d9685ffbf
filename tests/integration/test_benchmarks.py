"""Every benchmark runs: ``benchmarks/run_all.py --quick`` (each once at its smallest size) passes.

No figure is judged here (the machine is shared; a benchmark's figures need its full
size): the run proves that every script still starts, measures and meets the targets
it judges at that size, so that none can rot unseen between full runs.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

sys.path.insert(0, str(ROOT / "benchmarks"))
import run_all  # noqa: E402


def test_every_script_of_benchmarks_is_listed_with_a_smallest_size():
    """Each benchmarks/*.py is a benchmark or a known helper, and each benchmark has its --quick arguments."""
    assert run_all.unlisted() == []
    assert set(run_all.QUICK) == set(run_all.BENCHMARKS)


def test_run_all_quick_runs_every_benchmark_and_each_passes():
    """run_all.py --quick: exit 0, and each benchmark ran once and exited 0 (bounded: 15 min, not timed)."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    ran = dict(re.findall(r"^===== (\S+): exit (\d+) after", done.stdout, flags=re.MULTILINE))
    assert ran == dict.fromkeys(run_all.BENCHMARKS, "0"), done.stdout[-4000:] + done.stderr[-4000:]
    assert done.returncode == 0, done.stdout[-2000:]
