"""NATS and Redis stopped and started again under running services: said once each way, /readyz follows, nothing fails.

Real servers on free ports, stopped and restarted on the same port (and, for
NATS, the same JetStream store), as an operator's restart does.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from structlog.testing import capture_logs

from reverie_canary.canary.embedded import BinaryMissing, RunningServer, start_nats, start_redis
from reverie_canary.canary.runtime import running
from reverie_canary.shared.runtime import metrics
from reverie_canary.shared.runtime.health import REDIS_WATCH_S
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect, redis_client
from reverie_canary.shared.runtime.settings import Settings
from tests.judge_events import MODEL, cycle_events, healthy, publish_events

pytestmark = pytest.mark.integration


@dataclass
class Servers:
    """NATS and Redis that a test stops and starts again on the same ports."""

    workdir: Path
    nats: RunningServer
    redis: RunningServer
    namespace: str

    def restart_nats(self) -> None:
        self.nats = start_nats(self.workdir / "nats", port=self.nats.port)

    def restart_redis(self) -> None:
        self.redis = start_redis(self.workdir / "redis", port=self.redis.port)

    def settings(self, **overrides) -> Settings:
        return Settings.load(env={}, nats_url=self.nats.url, redis_url=self.redis.url, namespace=self.namespace,
                             models=[MODEL], mode="enforce", cycle_interval_s=3600, probe_window_s=600,
                             # no gateway is asked here; without a key the real one would be refused at start
                             openrouter_base_url="http://127.0.0.1:9/api/v1", **overrides)


@pytest.fixture
def servers(tmp_path) -> Iterator[Servers]:
    try:
        nats_server = start_nats(tmp_path / "nats")
    except BinaryMissing as exc:
        pytest.skip(f"needs nats-server: {exc}")
    try:
        redis_server = start_redis(tmp_path / "redis")
    except BinaryMissing as exc:
        nats_server.stop()
        pytest.skip(f"needs redis-server: {exc}")
    found = Servers(tmp_path, nats_server, redis_server, f"t{uuid.uuid4().hex[:8]}")
    try:
        yield found
    finally:
        found.redis.stop()
        found.nats.stop()


async def wait_status(http: httpx.AsyncClient, url: str, status: int, timeout_s: float) -> httpx.Response:
    """GET ``url`` until it answers ``status``; fail saying what it answered last after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last = "nothing"
    while time.monotonic() < deadline:
        try:
            response = await http.get(url)
            if response.status_code == status:
                return response
            last = f"{response.status_code} {response.text.strip()}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        await asyncio.sleep(0.2)
    raise AssertionError(f"{url} did not answer {status} within {timeout_s} s; last: {last}")


def acked(service: str) -> float:
    return metrics.of(service).sample_value("canary_messages_total", service=service, outcome="ack") or 0.0


async def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout_s} s for: {what}"
        await asyncio.sleep(0.05)


def outage_lines(logs: list[dict], service: str, dependency: str) -> list[dict]:
    return [e for e in logs if e.get("service") == service
            and e["event"] in (f"{dependency}_disconnected", f"{dependency}_reconnected")]


async def test_a_redis_restart_is_said_once_each_way_readyz_follows_and_no_command_fails(servers):
    """Redis down 2 s: judge, router, notifier each say it once each way, 503 then 200, no command fails after."""
    settings = servers.settings()
    await ensure_streams(settings)
    survivor = redis_client(settings)  # a client that was in use before the restart, like a service's
    await survivor.set(f"{servers.namespace}:probe", b"1")
    acked_before = acked("judge")  # the series live for the whole process: count from here
    with capture_logs() as logs:
        async with running(settings, ["judge", "router", "notifier"]):
            judge, router, notifier = metrics.endpoint("judge"), metrics.endpoint("router"), metrics.endpoint("notifier")
            async with httpx.AsyncClient(timeout=5) as http:
                for ep in (judge, router, notifier):
                    await wait_status(http, f"{ep.base_url}/readyz", 200, 15)
                await wait_for(lambda: acked("judge") > acked_before, 15, "the judge applied the router's first snapshot")
                servers.redis.stop()
                stopped = time.monotonic()
                down = await wait_status(http, f"{judge.base_url}/readyz", 503, 10)
                assert "redis" in down.text and f"127.0.0.1:{servers.redis.port}" in down.text, down.text
                await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - stopped)))  # a 2 s outage
                servers.restart_redis()
                back_at, said_before = time.monotonic(), len(logs)
                for ep in (judge, router, notifier):
                    await wait_status(http, f"{ep.base_url}/readyz", 200, 15)
                outage_max = time.monotonic() - stopped
                # the first command on the old connection works (Redis came back empty)
                assert await survivor.get(f"{servers.namespace}:probe") is None
                # and the judge's next event is applied on its first delivery, from the log it rebuilds
                nc = await nats_connect(settings)
                try:
                    await publish_events(nc.jetstream(), cycle_events(0, healthy("a/fp8", "b/fp8", "c/fp8")))
                finally:
                    await nc.close()
                await wait_for(lambda: metrics.of("judge").sample_value("canary_cycle_last_number", model=MODEL) == 0,
                               15, "the judge closed cycle 0 after the restart")
    await survivor.aclose()
    for service in ("judge", "router", "notifier"):
        lines = outage_lines(logs, service, "redis")
        assert [e["event"] for e in lines] == ["redis_disconnected", "redis_reconnected"], lines
        # counted from the last answered ping: at most one watch interval longer than the real outage
        assert 2.0 <= lines[1]["outage_s"] <= outage_max + REDIS_WATCH_S + 0.5, (lines[1], outage_max)
        assert metrics.of(service).sample_value("canary_dependency_last_outage_seconds", service=service,
                                                dependency="redis") >= 2.0
    assert back_at - stopped >= 2.0
    after = logs[said_before:]
    assert not [e for e in after if e.get("service") == "judge" and e["event"] in ("message_retry", "handler_error")]
    # the notifier's first commands on its old connections (its book, its delivery loop) do not fail either
    assert not [e for e in after if e.get("service") == "notifier"
                and e["event"] in ("message_retry", "handler_error", "background_loop_crashed")], after


async def test_a_nats_restart_is_said_once_per_service_with_its_outage_length(servers):
    """NATS down 2 s: each service logs one nats_disconnected and one nats_reconnected, over all its connections."""
    settings = servers.settings()
    await ensure_streams(settings)
    with capture_logs() as logs:
        async with running(settings, ["judge", "router", "prober"]):
            endpoints = {name: metrics.endpoint(name) for name in ("judge", "router", "prober")}
            async with httpx.AsyncClient(timeout=5) as http:
                for ep in endpoints.values():
                    await wait_status(http, f"{ep.base_url}/readyz", 200, 15)
                servers.nats.stop()
                stopped = time.monotonic()
                down = await wait_status(http, f"{endpoints['prober'].base_url}/readyz", 503, 10)
                assert "nats" in down.text, down.text
                healthz = await http.get(f"{endpoints['prober'].base_url}/healthz")
                assert healthz.status_code == 200  # alive, only not ready
                await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - stopped)))
                servers.restart_nats()
                for ep in endpoints.values():
                    await wait_status(http, f"{ep.base_url}/readyz", 200, 30)
                outage_max = time.monotonic() - stopped
    for service in ("judge", "router", "prober"):
        lines = outage_lines(logs, service, "nats")
        assert [e["event"] for e in lines] == ["nats_disconnected", "nats_reconnected"], (service, lines)
        assert 1.5 <= lines[1]["outage_s"] <= outage_max + 0.5, (service, lines[1], outage_max)
    assert metrics.of("prober").sample_value("canary_dependency_up", service="prober", dependency="nats") == 1


async def test_an_override_that_expires_while_redis_is_down_is_published_once_redis_is_back_empty(servers):
    """The router's expiry falls in a Redis outage and Redis comes back empty: the next version drops it.

    Found by a fresh SRE run: the rebuilt record took a version for the change and never wrote it, so the
    bucket kept the expired entry (clients drop it on their own clock) until the next command, whose
    version skipped one, and no ``ignore_list_changed`` was told.
    """
    from datetime import datetime, timedelta, timezone

    from reverie_canary.canary.demo import current_snapshot
    from reverie_canary.shared.contract import codec, subjects
    from reverie_canary.shared.contract.commands import AddOverride
    from tests import waits

    settings = servers.settings()
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    now = datetime.now(timezone.utc)
    short = AddOverride(command_id="ov-short", actor="alice", at=now, provider="c/fp8", model=MODEL,
                        reason="incident 11", expires_at=now + timedelta(seconds=4))
    kept = AddOverride(command_id="ov-kept", actor="alice", at=now, provider="d/fp8", model=MODEL,
                       reason="incident 12")

    async def published() -> list[str] | None:  # the list as the bucket's snapshot was written, not as read now
        snap = await current_snapshot(settings, MODEL)
        return None if snap is None else snap.ignore_at(snap.at)

    async with running(settings, ["router"]):
        for cmd in (short, kept):
            await js.publish(subjects.ops("override-add"), codec.encode(cmd), headers={"Nats-Msg-Id": cmd.command_id})
        await waits.until(lambda: _equals(published, ["c/fp8", "d/fp8"]), timeout_s=15,
                          what="both overrides in the bucket")
        before = (await current_snapshot(settings, MODEL)).version
        servers.redis.stop()
        await waits.until(lambda: datetime.now(timezone.utc) > short.expires_at + timedelta(seconds=1), timeout_s=10,
                          what="the short override's expiry to pass while Redis is down")
        servers.restart_redis()
        await waits.until(lambda: _equals(published, ["d/fp8"]), timeout_s=20,
                          what="a version without the expired override, once Redis is back")
        after = await current_snapshot(settings, MODEL)
    await nc.close()
    assert after.version == before + 1  # no version taken and never written


async def _equals(read, wanted) -> bool:
    return await read() == wanted
