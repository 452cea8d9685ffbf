"""The documentation site builds in MkDocs' strict mode: no broken link, anchor or page missing from the nav.

``.ci/run`` installs MkDocs and Material (the ``docs`` extra, part of ``test``) and sets
``CANARY_REQUIRE_MKDOCS=1``: there a missing MkDocs fails this test instead of skipping it.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _mkdocs_or_skip() -> None:
    missing = [name for name in ("mkdocs", "material") if importlib.util.find_spec(name) is None]
    if missing:
        message = f"{', '.join(missing)} not installed: pip install -e '.[docs]' (.ci/run installs it)"
        if os.environ.get("CANARY_REQUIRE_MKDOCS") == "1":
            pytest.fail(message)
        pytest.skip(message)


def test_the_site_builds_in_strict_mode(tmp_path):
    """`mkdocs build --strict` passes: every page in the nav exists, every link and anchor resolves."""
    _mkdocs_or_skip()
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "settings" / "index.html").exists()
    html = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in html  # the built site names no external host


def test_every_page_under_docs_is_in_the_nav():
    """A Markdown page the nav leaves out is reachable only by search: the nav lists every one."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(node) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for v in node.values() for p in pages(v)]
        return [p for item in node for p in pages(item)]

    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk == listed, (sorted(on_disk - listed), sorted(listed - on_disk))
