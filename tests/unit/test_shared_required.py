"""``CANARY_REQUIRE_SHARED`` (``.ci/run``): without the shared data folder the suite fails instead of skipping."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

#: A module whose tests read the shared data (the language targets) and skip without it.
READER = "tests/unit/test_language_targets.py"


def _pytest(shared: str, require: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CANARY_SHARED_DIR", "CANARY_REQUIRE_SHARED",
                                                            "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env["CANARY_SHARED_DIR"] = shared
    if require:
        env["CANARY_REQUIRE_SHARED"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", READER],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_missing_shared_folder_skips_locally_and_fails_when_required(tmp_path):
    """No folder: skipped (exit 0) locally; with CANARY_REQUIRE_SHARED the run stops at once naming the path."""
    missing = str(tmp_path / "no-such-shared")
    assert _pytest(missing, require=False).returncode == 0
    required = _pytest(missing, require=True)
    assert required.returncode != 0 and missing in required.stdout + required.stderr


def test_a_test_skipped_for_a_missing_shared_file_fails_when_required(tmp_path):
    """The folder is there but lacks the data a test reads: with CANARY_REQUIRE_SHARED that skip is a failure."""
    required = _pytest(str(tmp_path), require=True)
    assert required.returncode == 1, required.stdout
    assert "CANARY_REQUIRE_SHARED is set" in required.stdout and " skipped" not in required.stdout
