"""``canary demo --keep``: the env files it writes reach the running demo as operator and as chat backend."""

from __future__ import annotations

import asyncio
import shlex
import stat

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.canary.demo import pipeline, write_env_files

pytestmark = pytest.mark.integration


def read_env(path) -> dict[str, str]:
    """The ``export K=V`` lines as a dict, as ``. FILE`` in a shell would set them."""
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        out[key] = shlex.split(value)[0] if value else ""
    return out


async def test_keep_env_files_let_the_operator_and_the_backend_in(tmp_path):
    async with pipeline(workdir=tmp_path / "demo", scenario="default") as p:
        assert await p.wait_cycles(1)
        files = write_env_files(p, tmp_path)
        runner = CliRunner()
        operator, backend = read_env(files["operator"]), read_env(files["backend"])
        added = await asyncio.to_thread(runner.invoke, app, ["override", "add", "fireworks", "--reason",
                                                             "trying it", "--for", "2m"], env=operator)
        watched = await asyncio.to_thread(runner.invoke, app, ["watch", "--once"], env=backend)
        refused = await asyncio.to_thread(runner.invoke, app, ["override", "add", "novita/fp8", "--reason", "x"],
                                          env=backend)
    for path in files.values():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert operator["NATS_USER"] == "operator" and backend["NATS_USER"] == "backend"
    assert operator["CANARY_NAMESPACE"] == p.settings.namespace and operator["CANARY_MODE"] == "enforce"
    assert added.exit_code == 0 and "override added: fireworks" in added.output, added.output
    assert watched.exit_code == 0 and '"fireworks"' in watched.output, watched.output
    assert refused.exit_code == 1, refused.output  # the chat backend's credential may not publish commands
