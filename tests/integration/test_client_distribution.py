"""The chat backend's distribution, installed alone beside an application's own packages.

A field report: a chat backend with its own ``shared/`` package could not import the
client (``ModuleNotFoundError: No module named 'shared.client'``), and it had to
install 168 MB of dependencies and a nats-server binary to read one KV key.
Here both wheels are built from this checkout; only ``reverie-canary-client`` goes
into a fresh virtual environment, and an application that has its own ``shared/``
and ``services/`` packages follows the ignore list of a running router.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import nats
import pytest

from reverie_canary.canary.runtime import running
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.commands import AddOverride
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODEL = "acme/chat-1"
BUILD_TIMEOUT_S = 300

APP = '''
import asyncio, json, os, sys

import shared            # the application's own packages, first on sys.path
import services
from reverie_canary.client import IgnoreListClient


async def main():
    assert shared.OWN == "app" and services.OWN == "app"
    client = IgnoreListClient(os.environ["NATS_URL"], sys.argv[1], user="backend",
                              password=os.environ["NATS_PASSWORD"])
    await client.start()
    try:
        for line in sys.stdin:          # one request line in, one provider object out
            want = json.loads(line)
            deadline = asyncio.get_running_loop().time() + 20
            while (not client.version or client.ignore() != want) and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
            print(json.dumps({"provider": client.provider({"sort": "latency"}), "version": client.version}),
                  flush=True)
    finally:
        await client.stop()

asyncio.run(main())
'''


def _run(*argv: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)
    assert done.returncode == 0, f"{argv[:3]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """Both wheels, built from this checkout with pip (``--no-deps``: nothing else is fetched)."""
    out = tmp_path_factory.mktemp("wheels")
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", out, ROOT, ROOT / "client")
    found = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert set(found) == {"reverie_canary", "reverie_canary_client"}
    return found


def _venv(path: Path) -> Path:
    """A fresh virtual environment at ``path`` without even pip in it (this pip installs into it with
    ``--python``: 0.1 s instead of the 2.7 s of bootstrapping a pip of its own); returns its python."""
    _run(sys.executable, "-m", "venv", "--without-pip", path)
    return path / "bin" / "python"


def _pip(python: Path, *args: str | Path) -> str:
    """This environment's pip acting on the environment of ``python``."""
    return _run(sys.executable, "-m", "pip", "--python", python, *args)


@pytest.fixture(scope="module")
def client_venv(wheels, tmp_path_factory) -> Path:
    """A fresh virtual environment holding only the client wheel and what it depends on."""
    venv = tmp_path_factory.mktemp("client-venv")
    _pip(_venv(venv), "install", "--quiet", wheels["reverie_canary_client"])
    return venv


def _top_levels(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {name.split("/")[0] for name in z.namelist() if not name.split("/")[0].endswith(".dist-info")}


def test_each_wheel_holds_the_namespace_only(wheels):
    """The main wheel installs reverie_canary/ and nothing else; the client wheel reverie_canary/client/ (and its checks) only."""
    assert _top_levels(wheels["reverie_canary"]) == {"reverie_canary"}
    with zipfile.ZipFile(wheels["reverie_canary"]) as z:
        parts = {tuple(n.split("/")[:2]) for n in z.namelist() if n.startswith("reverie_canary/")}
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert {p[1] for p in parts} == {"shared", "services", "simulator", "canary"}
    assert "Requires-Dist: reverie-canary-client" in metadata  # the wire types are defined once, in the client
    # the dashboard's every page and asset ships in the wheel (no CDN, no build step), read from the package
    from reverie_canary.services.dashboard.web import asset_dir

    with zipfile.ZipFile(wheels["reverie_canary"]) as z:
        shipped = {n.removeprefix("reverie_canary/services/dashboard/") for n in z.namelist()
                   if n.startswith("reverie_canary/services/dashboard/") and n.count("/") == 4}
    assets = {f"{d}/{p.name}" for d in ("templates", "static") for p in asset_dir(d).iterdir() if p.is_file()}
    assert assets and assets <= shipped, assets - shipped
    with zipfile.ZipFile(wheels["reverie_canary_client"]) as z:
        files = {n for n in z.namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert {f.rsplit("/", 1)[0] for f in files} == {"reverie_canary/client", "reverie_canary/client/checks"}
    assert not any(f.endswith(("pyproject.toml", "README.md")) for f in files)


def test_the_main_wheel_installs_no_top_level_shared(wheels, tmp_path):
    """In a fresh environment with only the main wheel, ``import shared`` fails and the namespace is there."""
    venv = tmp_path / "venv"
    _pip(_venv(venv), "install", "--quiet", "--no-deps", wheels["reverie_canary"])
    probe = ("import importlib.util as u; import json; print(json.dumps([u.find_spec(n) is not None for n in "
             "('shared', 'services', 'simulator', 'canary', 'reverie_canary.shared', 'reverie_canary.services')]))")
    found = json.loads(_run(venv / "bin" / "python", "-c", probe, cwd=tmp_path))
    assert found == [False, False, False, False, True, True]
    done = subprocess.run([venv / "bin" / "python", "-c", "import shared"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1 and "No module named 'shared'" in done.stderr


def test_the_client_environment_holds_the_client_nats_and_msgspec_only(client_venv):
    """pip lists nothing but the client, nats-py and msgspec in the client's environment."""
    listed = json.loads(_pip(client_venv / "bin" / "python", "list", "--format", "json"))
    names = {p["name"].lower() for p in listed} - {"pip", "setuptools", "wheel"}
    assert names == {"reverie-canary-client", "nats-py", "msgspec"}


async def test_an_application_with_its_own_shared_package_follows_the_ignore_list(client_venv, secured, tmp_path):
    """The app's own shared/ and services/ import first; the installed client follows a running router."""
    app = tmp_path / "app"
    for package in ("shared", "services"):
        (app / package).mkdir(parents=True)
        (app / package / "__init__.py").write_text('OWN = "app"\n')
    (app / "shared" / "client.py").write_text("raise RuntimeError('the application module, not ours')\n")
    (app / "main.py").write_text(APP)

    settings = Settings.load(env={}, nats_url=secured.nats_url, redis_url=secured.redis_url,
                             namespace=secured.namespace, models=[MODEL], mode="enforce", nats_user="admin",
                             nats_password=secured.passwords["admin"], openrouter_base_url="http://127.0.0.1:9/api/v1")
    await ensure_streams(settings)
    env = {"PATH": os.environ.get("PATH", ""), "NATS_URL": secured.nats_url,
           "NATS_PASSWORD": secured.passwords["backend"]}
    async with running(settings, ["router"], passwords=secured.passwords):
        proc = await asyncio.create_subprocess_exec(
            str(client_venv / "bin" / "python"), "main.py", MODEL, cwd=app, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            async def ask(ignore: list[str]) -> dict:
                proc.stdin.write((json.dumps(ignore) + "\n").encode())
                await proc.stdin.drain()
                line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
                assert line, (await proc.stderr.read()).decode()[-2000:]
                return json.loads(line)

            first = await ask([])
            assert first["provider"] == {"sort": "latency", "ignore": []} and first["version"] >= 1

            command = AddOverride(command_id=str(uuid.uuid4()), actor="alice", at=datetime.now(timezone.utc),
                                  provider="lambda/fp8", model=MODEL, reason="incident 42")
            nc = await nats.connect(secured.nats_url, user="operator", password=secured.passwords["operator"])
            try:
                await nc.jetstream().publish(subjects.ops("override-add"), codec.encode(command),
                                             headers={"Nats-Msg-Id": command.command_id})
            finally:
                await nc.close()
            after = await ask(["lambda/fp8"])
            assert after == {"provider": {"sort": "latency", "ignore": ["lambda/fp8"]},
                             "version": first["version"] + 1}
        finally:
            if proc.returncode is None:
                proc.stdin.close()
                try:
                    await asyncio.wait_for(proc.wait(), timeout=10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
