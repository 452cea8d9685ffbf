"""``canary demo --keep``: the env files it writes reach the running demo as operator and as chat backend."""

from __future__ import annotations

import asyncio
import json
import shlex
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.canary.demo import write_env_files

pytestmark = pytest.mark.integration


def read_env(path) -> dict[str, str]:
    """The ``export K=V`` lines as a dict, as ``. FILE`` in a shell would set them."""
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        out[key] = shlex.split(value)[0] if value else ""
    return out


async def test_keep_env_files_let_the_operator_and_the_backend_in(tmp_path, default_demo_last):
    """The env files of a running demo (the default demo the reading modules share; this test's override comes
    after all of them read it): the operator's adds an override, the chat backend's watches and may not."""
    p = default_demo_last.p
    assert await default_demo_last.run(p.wait_cycles(1))
    files = write_env_files(p, tmp_path)
    runner = CliRunner()
    operator, backend = read_env(files["operator"]), read_env(files["backend"])
    added = await asyncio.to_thread(runner.invoke, app, ["override", "add", "fireworks", "--reason",
                                                         "trying it", "--for", "2m"], env=operator)
    watched = await asyncio.to_thread(runner.invoke, app, ["watch", "--once"], env=backend)
    refused = await asyncio.to_thread(runner.invoke, app, ["override", "add", "novita/fp8", "--reason", "x"],
                                      env=backend)
    listed = await asyncio.to_thread(runner.invoke, app, ["notices", "list", "--json"], env=operator)
    resent = await asyncio.to_thread(runner.invoke, app, ["notices", "resend", "--all", "--channel", "nosuch"],
                                     env=operator)
    (secret,) = p.settings.notify_secrets.values()
    (url,) = p.settings.notify_urls.values()
    for path in files.values():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        text = path.read_text()  # whoever holds an env file cannot sign notices nor post to the channels
        assert secret not in text and url not in text, path.name
        assert not {"CANARY_NOTIFY_URLS", "CANARY_NOTIFY_SECRETS", "CANARY_WEBHOOK_URL",
                    "CANARY_WEBHOOK_SECRET"} & set(read_env(path)), path.name
    # the operator's notice commands work without the channels: the book in Redis, the notifier's answer on NATS
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout)["channels_with_deliveries"] == ["demo"]
    assert resent.exit_code == 2 and "the notifier knows demo" in resent.output, resent.output
    assert operator["NATS_USER"] == "operator" and backend["NATS_USER"] == "backend"
    assert operator["CANARY_NAMESPACE"] == p.settings.namespace and operator["CANARY_MODE"] == "enforce"
    assert added.exit_code == 0 and "override added: fireworks" in added.output, added.output
    assert watched.exit_code == 0 and '"fireworks"' in watched.output, watched.output
    assert refused.exit_code == 1, refused.output  # the chat backend's credential may not publish commands


async def test_status_against_a_kept_demo_names_every_provider_with_the_summarys_state(tmp_path):
    """``canary demo --keep`` as a process; ``canary status --json`` with its printed operator.env; Ctrl-C; compare.

    The status is read right after a cycle closed (the demo prints each one), and the
    demo is stopped at once, so that both describe the same cycle.
    """
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANARY_", "NATS_", "REDIS_", "OPENROUTER_"))}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "reverie_canary.canary", "demo", "--keep",
                                                "--cycles", "2", "--json", env=env, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    operator_env = None
    progress: list[str] = []
    try:
        async def line() -> str:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the kept demo did not print its operator.env and a later cycle within 120 s:\n" \
                + "".join(progress[-20:])
            text = (await asyncio.wait_for(proc.stderr.readline(), timeout=remaining)).decode()
            assert text, "the demo ended early:\n" + "".join(progress[-20:])
            progress.append(text)
            return text

        dashboard_url = login = None
        while operator_env is None:
            text = await line()
            if text.strip().endswith("this demo's settings") and "operator.env" in text:
                operator_env = text.split()[1]
            if text.startswith("dashboard (read-only, live): "):
                dashboard_url = text.split()[-1]
            if text.startswith("dashboard login: user "):
                login = (text.split()[3].rstrip(","), Path(text.split()[-1]))
        import httpx

        async with httpx.AsyncClient(timeout=30) as http:  # before the cycle the status is compared on
            refused = await http.get(dashboard_url) if dashboard_url else None
            password, mode = login[1].read_text().strip(), login[1].stat().st_mode & 0o777
            page = await http.get(dashboard_url, auth=(login[0], password)) if dashboard_url else None
        dashboard_env = read_env(Path(operator_env).with_name("dashboard.env"))
        incident = await asyncio.to_thread(CliRunner().invoke, app, [
            "incident", "--model", "deepseek/deepseek-chat-v3.1", "--at", time.strftime("%H:%M:%S", time.gmtime()),
            "--window", "30s", "--json"], env=dashboard_env)
        while not (await line()).startswith("-- cycle"):
            pass
        await asyncio.sleep(0.5)  # the cycle's decisions reach the router (as the demo's own summary waits)
        status = await asyncio.to_thread(CliRunner().invoke, app, ["status", "--json"],
                                         env=read_env(Path(operator_env)))

    finally:
        proc.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]
    said = "".join(progress) + err.decode()
    # the services' start checks publish empty bodies the log refuses: the demo's own subscribers skip them
    assert "nats_error" not in said and "Undecodable" not in said, said[-3000:]
    summary = json.loads(out)
    assert status.exit_code == 0, status.output
    (model,) = json.loads(status.stdout)["models"]
    rows = {row["provider"]: row for row in model["providers"]}
    assert model["last_cycle_no"] == summary["probes"][-1]["cycle_no"]  # the same cycle on both sides
    assert set(rows) == set(summary["providers"]) and len(rows) >= 8
    for provider, info in summary["providers"].items():
        expected = "suspended" if info["suspended"] else "active"
        assert rows[provider]["state"] == expected, (provider, rows[provider]["state"], info)
    assert model["ignore_list"]["ignored"] == summary["ignore"]
    # the kept demo printed its dashboard's URL; the page names every provider; incident reads as the dashboard user
    assert dashboard_url and dashboard_url.startswith("http://127.0.0.1:"), "".join(progress[-30:])
    assert refused.status_code == 401 and login[0] == "demo" and mode == 0o600
    assert password not in "".join(progress) + err.decode()  # the output names the file, never the password
    assert page.status_code == 200 and all(f'data-provider="{p}"' in page.text for p in summary["providers"])
    assert dashboard_env["NATS_USER"] == "dashboard"
    assert incident.exit_code == 0, incident.output
    answer = json.loads(incident.stdout)
    assert answer["snapshot_version"] >= 1 and {p["provider"] for p in answer["providers"]} == set(rows)
