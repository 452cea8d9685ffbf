"""Packaging: one import namespace, mapped from the repository's top-level folders.

DESIGN.md, packaging: everything imports under ``reverie_canary.…``; a chat backend with
its own ``shared/`` or ``services/`` package must not collide with ours.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("shared", "services", "simulator", "canary")
BARE_IMPORT = re.compile(rf"^\s*(?:from|import)\s+(?:{'|'.join(FOLDERS)})(?:\.|\s|$)", re.M)


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed_under_the_namespace():
    """Each folder with an __init__.py is a listed reverie_canary subpackage, and no listed one is missing."""
    on_disk = {
        "reverie_canary." + ".".join(init.parent.relative_to(ROOT).parts)
        for folder in FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert set(_setuptools()["packages"]) == on_disk


def test_the_namespace_maps_the_top_level_folders():
    """The package-dir table maps reverie_canary.<folder> to <folder>, nothing at the top level."""
    assert _setuptools()["package-dir"] == {f"reverie_canary.{f}": f for f in FOLDERS}


def test_no_module_imports_a_bare_top_level_name():
    """No source file imports ``shared``, ``services``, ``simulator`` or ``canary`` outside the namespace."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        if ".venv" in path.parts or "build" in path.parts:
            continue
        for match in BARE_IMPORT.finditer(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(ROOT)}: {match.group(0).strip()}")
    assert offenders == []
