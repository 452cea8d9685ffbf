"""The real output of a running ``canary up``: every line JSON in JSON mode, from every library, no secret in it.

The process gets secrets where they are printed in practice: the admin
password inside ``NATS_URL``, a Redis password inside ``REDIS_URL``, an API key,
and a Slack-style webhook URL whose path is the credential, pointed at a receiver
that answers 500 (so the notifier's retries print errors naming the URL).  At
DEBUG, FastStream, nats-py, httpx and uvicorn all log.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from reverie_canary.canary.embedded import BinaryMissing, start_redis
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator.gateway import create_app as create_gateway
from reverie_canary.simulator.scenario import load_scenario
from reverie_canary.simulator.server import serve

pytestmark = pytest.mark.integration

CANARY = Path(sys.executable).parent / "canary"
API_KEY = "sk-or-v1-" + uuid.uuid4().hex
REDIS_PASSWORD = "r" + uuid.uuid4().hex
HOOK_TOKEN = "Zq" + uuid.uuid4().hex
HOOK_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


def receiver(hits: list[str]) -> Starlette:
    """A webhook endpoint that is down: it answers 500 to every POST."""

    async def hook(request):
        hits.append(request.url.path)
        return PlainTextResponse("down for maintenance", status_code=500)

    return Starlette(routes=[Route("/services/{rest:path}", hook, methods=["POST"])])


async def test_canary_up_logs_only_json_lines_from_every_library_and_no_secret(secured, tmp_path):
    """canary up, JSON at DEBUG for a few cycles: each line parses, libraries included, secrets masked."""
    try:
        redis_server = start_redis(tmp_path / "redis-auth", password=REDIS_PASSWORD)
    except BinaryMissing as exc:
        pytest.skip(f"needs redis-server: {exc}")
    admin = secured.passwords["admin"]
    host_port = secured.nats_url.removeprefix("nats://")
    nats_url = f"nats://admin:{admin}@{host_port}"
    redis_url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:{redis_server.port}/0"
    scenario = load_scenario("default")
    hits: list[str] = []
    try:
        await ensure_streams(Settings.load(env={}, nats_url=nats_url))
        async with serve(create_gateway(scenario)) as gateway_url, serve(receiver(hits)) as hook_base:
            hook = hook_base.removesuffix("/api/v1") + f"/services/T0/B0/{HOOK_TOKEN}"
            env = {
                "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
                "NATS_URL": nats_url, "REDIS_URL": redis_url, "CANARY_NAMESPACE": secured.namespace,
                "OPENROUTER_BASE_URL": gateway_url, "OPENROUTER_API_KEY": API_KEY,
                "CANARY_WEBHOOK_URL": hook, "CANARY_WEBHOOK_SECRET": HOOK_SECRET, "CANARY_MODELS": scenario.models[0].id, "CANARY_MODE": "enforce",
                "CANARY_CYCLE_INTERVAL_S": "3", "CANARY_PROBE_WINDOW_S": "2.4", "CANARY_TTFT_THRESHOLD_S": "1",
                "CANARY_REQUEST_TIMEOUT_S": "2", "CANARY_LANGUAGES_PER_CYCLE": "1",
                "CANARY_LANGUAGE_COVERAGE_CYCLES": "17", "CANARY_MAX_DELIVER": "3",
                "CANARY_RETRY_DELAY_S": "0.3", "CANARY_LOG_FORMAT": "json", "CANARY_LOG_LEVEL": "DEBUG",
                "CANARY_METRICS_PORTS": "discovery=0,prober=0,judge=0,router=0,notifier=0",
                "CANARY_CONFIG": "",
            }
            out, err = tmp_path / "stdout", tmp_path / "stderr"
            with open(out, "wb") as stdout, open(err, "wb") as stderr:
                process = subprocess.Popen([str(CANARY), "up"], env=env, stdout=stdout, stderr=stderr,
                                           start_new_session=True)
            try:
                deadline = time.monotonic() + 90
                # until the webhook has been tried (and failed) a few times and two cycles ran
                while not (len(hits) >= 3 and err.read_text(errors="replace").count('"cycle_started"') >= 2):
                    assert process.poll() is None, f"canary up exited with {process.returncode}: " \
                                                   f"{err.read_text(errors='replace')[-2000:]}"
                    assert time.monotonic() < deadline, f"no webhook attempts ({len(hits)}) or cycles in 90 s"
                    await asyncio.sleep(0.2)
            finally:
                process.send_signal(signal.SIGTERM)
                stopping = time.monotonic()
                try:
                    await asyncio.to_thread(process.wait, 30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    raise
    finally:
        redis_server.stop()
    assert process.returncode == 0
    assert time.monotonic() - stopping < 30
    text = out.read_text(errors="replace") + err.read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) > 50
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line[:300]}")
    assert all(isinstance(r, dict) and {"event", "level", "timestamp", "logger"} <= set(r) for r in records)
    loggers = {r["logger"].split(".")[0] for r in records}
    # FastStream keeps the lifecycle and the connection but handles no message (the consumers are the
    # runtime's own), so it has no line of its own here: had it one, it is JSON like every other
    assert {"canary", "httpx", "httpcore", "redis"} <= loggers, loggers
    for secret in (admin, REDIS_PASSWORD, API_KEY, HOOK_TOKEN, hook, HOOK_SECRET, HOOK_SECRET[6:]):
        assert secret not in text
    masked_hook = hook_base.removesuffix("/api/v1") + "/***"
    assert masked_hook in text  # the webhook URL was printed (the notifier's retries) and masked
    library_lines = [r for r in records if not r["logger"].startswith("canary.")]
    assert any(r.get("service") for r in library_lines)  # a library's line still says which service caused it
