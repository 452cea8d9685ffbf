"""Packaging: one import namespace, mapped from the repository's top-level folders.

docs/development.md, "Layout": everything imports under ``reverie_canary.…``; a chat backend with
its own ``shared/`` or ``services/`` package must not collide with ours.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("shared", "services", "simulator", "canary")  # the main distribution; client/ is its own


def _imports(path: Path) -> list[str]:
    """Every module name a source file imports (absolute imports only; strings are not imports)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


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
        offenders += [f"{path.relative_to(ROOT)}: {name}" for name in _imports(path)
                      if name.split(".")[0] in FOLDERS + ("client",)]
    assert offenders == []


def test_the_client_folder_is_its_own_light_distribution():
    """client/ builds reverie-canary-client: reverie_canary.client and its checks, nats-py and msgspec only."""
    project = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())
    assert project["project"]["name"] == "reverie-canary-client"
    assert sorted(d.split(">")[0].split("=")[0] for d in project["project"]["dependencies"]) == ["msgspec", "nats-py"]
    on_disk = {"reverie_canary." + ".".join(("client", *init.parent.relative_to(ROOT / "client").parts))
               for init in (ROOT / "client").rglob("__init__.py") if "build" not in init.parts}
    assert set(project["tool"]["setuptools"]["packages"]) == on_disk
    assert project["tool"]["setuptools"]["package-dir"] == {
        name: "/".join(name.split(".")[2:]) or "." for name in on_disk}


def test_the_client_imports_nothing_of_the_main_distribution():
    """Nothing in client/ imports reverie_canary.shared, .services, .simulator or .canary (or their libraries)."""
    heavy = re.compile(r"^(?:reverie_canary\.(?:shared|services|simulator|canary)|structlog|faststream|redis|httpx)\b")
    offenders = [f"{p.relative_to(ROOT)}: {name}" for p in (ROOT / "client").rglob("*.py") for name in _imports(p)
                 if heavy.match(name)]
    assert offenders == []


def test_discovery_starts_last():
    """The cycle clock starts once probers, judge and router run (a first cycle planned earlier closes empty)."""
    from reverie_canary.canary.runtime import SERVICES, start_order

    assert start_order(SERVICES)[-1] == "discovery"
    assert sorted(start_order(SERVICES)) == sorted(SERVICES)
    assert start_order(["discovery", "prober"]) == ["prober", "discovery"]
    assert start_order(["judge"]) == ["judge"]


#: Where one service may read another's types: the read-only dashboard is a read model of the judge's
#: state (its core folds the judge's ModelState with the judge's own Policy and explanations; its
#: sources read the judge's store read-only) and reads nothing else of another service.
READS_ANOTHER_SERVICE = {"dashboard": {"judge"}}


def test_imports_point_one_way():
    """shared/ imports no service, simulator or CLI; a service imports no other service (the read-only dashboard
    reads the judge's types)."""
    offenders = []
    for path in (ROOT / "shared").rglob("*.py"):
        offenders += [f"{path.relative_to(ROOT)}: {name}" for name in _imports(path)
                      if re.match(r"^reverie_canary\.(?:services|simulator|canary)\b", name)]
    for path in (ROOT / "services").rglob("*.py"):
        own = path.relative_to(ROOT / "services").parts[0]
        allowed = {own} | READS_ANOTHER_SERVICE.get(own, set())
        for name in _imports(path):
            match = re.match(r"^reverie_canary\.services\.(\w+)", name)
            if match and match.group(1) not in allowed:
                offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []
