"""Routing end to end on real NATS (with the project's authorization) and Redis.

Operators, the judge, the router and chat-backend clients each use their own
credential (``shared/nats/server.conf``); the router runs in-process as the
``router`` user; clients are :class:`reverie_canary.client.IgnoreListClient` as the
``backend`` user.  Nothing about the bus or the store is mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nats
import pytest
from structlog.testing import capture_logs

from reverie_canary.canary.embedded import BinaryMissing, RunningServer, start_nats, start_redis
from reverie_canary.canary.runtime import running
from reverie_canary.shared import codec, subjects
from reverie_canary.shared.auth import generate_passwords, server_config, server_env
from reverie_canary.client import IgnoreListClient
from reverie_canary.shared.commands import AddOverride
from reverie_canary.shared.events import Decision
from reverie_canary.shared.logging import get as get_logger
from reverie_canary.shared.service import ensure_streams
from reverie_canary.shared.settings import Settings
from reverie_canary.shared.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot
from reverie_canary.shared.streams import LOG, ROUTING_BUCKET

pytestmark = pytest.mark.integration

MODEL = "acme/chat-1"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def settings_for(infra, user: str = "admin", **changes) -> Settings:
    return Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                         models=[MODEL], mode="enforce", cycle_interval_s=3600, probe_window_s=600,
                         nats_user=user, nats_password=infra.passwords[user], retry_delay_s=0.2,
                         openrouter_base_url="http://127.0.0.1:9/api/v1", **changes)


async def connect(infra, user: str, **kw):
    return await nats.connect(infra.nats_url, user=user, password=infra.passwords[user], **kw)


def backend_client(infra, **kw) -> IgnoreListClient:
    return IgnoreListClient(infra.nats_url, MODEL, user="backend", password=infra.passwords["backend"], **kw)


async def add_override(infra, provider: str, *, reason: str = "incident 42", expires_at: datetime | None = None,
                       model: str = MODEL) -> AddOverride:
    """Publish an AddOverride as the operator; returns the command."""
    command = AddOverride(command_id=str(uuid.uuid4()), actor="alice", at=utcnow(), provider=provider,
                          model=model, reason=reason, expires_at=expires_at)
    nc = await connect(infra, "operator")
    try:
        await nc.jetstream().publish(subjects.ops("override-add"), codec.encode(command),
                                     headers={"Nats-Msg-Id": command.command_id})
    finally:
        await nc.close()
    return command


async def suspend(infra, provider: str, until: datetime, decision_id: str | None = None) -> Decision:
    """Publish a judge ``suspend`` decision as the judge user; returns it."""
    now = utcnow()
    decision = Decision(at=now, decision_id=decision_id or f"dec|{MODEL}|{provider}|suspend|{uuid.uuid4().hex[:8]}",
                        model=MODEL, provider=provider, action="suspend", until=until, reason="failed_cycles",
                        detail="ttft_exceeded in 2 cycles")
    nc = await connect(infra, "judge")
    try:
        await nc.jetstream().publish(subjects.decision(MODEL, provider), codec.encode(decision),
                                     headers={"Nats-Msg-Id": decision.decision_id})
    finally:
        await nc.close()
    return decision


async def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


async def stored(infra, subject: str) -> int:
    """How many messages the log holds on ``subject`` (wildcards allowed)."""
    nc = await connect(infra, "admin")
    try:
        info = await nc.jetstream().stream_info(LOG, subjects_filter=subject)
        return sum((info.state.subjects or {}).values())
    finally:
        await nc.close()


async def kv_snapshot(infra) -> tuple[IgnoreSnapshot, int]:
    """The model's snapshot in the KV bucket and its revision."""
    nc = await connect(infra, "admin")
    try:
        entry = await (await nc.jetstream().key_value(ROUTING_BUCKET)).get(subjects.kv_key(MODEL))
        return codec.SNAPSHOT.decode(entry.value), entry.revision
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def router_and_client(infra):
    """Streams, a running router and a backend client that has the bus's current snapshot; yields the client."""
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        client = backend_client(infra)
        await client.start()
        try:
            assert await client.wait_ready(10)
            yield client
        finally:
            await client.stop()


# -- the three ways in -----------------------------------------------------------------------------


async def test_an_operator_override_reaches_a_watching_client(secured):
    """An AddOverride from the operator appears in the backend client's provider object, with its reason."""
    async with router_and_client(secured) as client:
        first = client.version
        assert first >= 1 and client.ignore() == []
        command = await add_override(secured, "lambda/fp8")
        assert await wait_for(lambda: client.ignore() == ["lambda/fp8"])
        assert client.version == first + 1
        assert client.provider({"sort": "price", "ignore": ["mine/x"]}) == {
            "sort": "price", "ignore": ["lambda/fp8", "mine/x"]}
        (entry,) = client.snapshot.entries
        assert entry.reasons == [IgnoreReason(layer="override", reason="incident 42", actor="alice",
                                              since=command.at, until=None)]


async def test_a_judge_suspension_reaches_a_watching_client(secured):
    """A suspend decision published by the judge user appears in the client with its until and decision id."""
    async with router_and_client(secured) as client:
        until = (utcnow() + timedelta(days=1)).replace(microsecond=0)
        decision = await suspend(secured, "baseten/fp8", until)
        assert await wait_for(lambda: client.ignore() == ["baseten/fp8"])
        (reason,) = client.snapshot.entries[0].reasons
        assert (reason.layer, reason.until, reason.reference, reason.reason) == (
            "suspension", until, decision.decision_id, "ttft_exceeded in 2 cycles")
        assert client.snapshot.entries[0].expires_at() == until


async def test_expiry_removes_entries_without_any_new_event(secured):
    """A suspension and an override with a near until drop out on the client's own clock, and the
    router publishes a new version at each expiry although no decision or command arrived."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        offset = [timedelta(0)]
        follower = backend_client(infra)
        ahead = backend_client(infra, now=lambda: utcnow() + offset[0])  # a client whose clock we move
        await follower.start()
        await ahead.start()
        try:
            assert await follower.wait_ready(10) and await ahead.wait_ready(10)
            suspended_until = utcnow() + timedelta(seconds=2.5)
            override_until = suspended_until + timedelta(seconds=1.5)
            await suspend(infra, "slow/fp8", suspended_until)
            await add_override(infra, "flaky/fp8", expires_at=override_until)
            assert await wait_for(lambda: follower.ignore() == ["flaky/fp8", "slow/fp8"])
            assert await wait_for(lambda: ahead.version == follower.version)
            version = follower.version
            inputs = await stored(infra, "canary.decisions.>") + await stored(infra, "canary.ops.>")

            # the client drops expired entries itself, before (and without) any new snapshot
            offset[0] = suspended_until - utcnow() + timedelta(milliseconds=1)
            assert ahead.ignore() == ["flaky/fp8"] and ahead.version == version
            offset[0] = override_until - utcnow() + timedelta(milliseconds=1)
            assert ahead.ignore() == [] and ahead.version == version

            # the router publishes a new version at each expiry
            assert await wait_for(lambda: follower.version == version + 1, timeout=10)
            first = follower.snapshot
            assert [e.provider for e in first.entries] == ["flaky/fp8"]
            assert timedelta(0) <= first.at - suspended_until < timedelta(seconds=1)
            assert await wait_for(lambda: follower.version == version + 2, timeout=10)
            second = follower.snapshot
            assert second.entries == []
            assert timedelta(0) <= second.at - override_until < timedelta(seconds=1)
            assert await stored(infra, "canary.decisions.>") + await stored(infra, "canary.ops.>") == inputs
        finally:
            await follower.stop()
            await ahead.stop()


# -- the router's own state ----------------------------------------------------------------------------


async def test_a_router_restart_loses_nothing_and_publishes_nothing_new(secured):
    """Overrides and suspensions live in Redis: a new router keeps the snapshot as it was, same version."""
    infra = secured
    await ensure_streams(settings_for(infra))
    until = (utcnow() + timedelta(days=1)).replace(microsecond=0)
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        client = backend_client(infra)
        await client.start()
        assert await client.wait_ready(10)
        await add_override(infra, "lambda/fp8")
        await suspend(infra, "baseten/fp8", until, decision_id="dec-restart-1")
        assert await wait_for(lambda: client.ignore() == ["baseten/fp8", "lambda/fp8"])
        await client.stop()
    before, revision = await kv_snapshot(infra)
    published = await stored(infra, subjects.routing(MODEL))

    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        await asyncio.sleep(3.0)  # the expiry loop merges at start; the consumer resumes
        after, revision_after = await kv_snapshot(infra)
        assert (after, revision_after) == (before, revision)
        assert await stored(infra, subjects.routing(MODEL)) == published
        # the new router applies new input on top of the kept state
        await add_override(infra, "other/fp8")
        client = backend_client(infra)
        await client.start()
        try:
            assert await wait_for(lambda: client.ignore() == ["baseten/fp8", "lambda/fp8", "other/fp8"])
            assert client.version == before.version + 1
        finally:
            await client.stop()


async def test_a_changed_exclusions_file_is_reloaded_and_an_invalid_one_refused(secured, tmp_path):
    """The router notices a new exclusions file by itself; an invalid one is logged with its line, the old stays."""
    infra = secured
    path = tmp_path / "exclusions.toml"
    entry = '[[exclusion]]\nprovider = "{p}"\nmodel = "*"\nreason = "measured defect"\nreference = "T-1"\n' \
            'date = 2026-01-01\n'
    path.write_text(entry.format(p="parasail/fp8"))
    settings = settings_for(infra, exclusions_file=str(path))
    await ensure_streams(settings)
    get_logger("test")  # configure logging before capturing it
    with capture_logs() as logs:
        async with running(settings, ["router"], passwords=infra.passwords):
            client = backend_client(infra)
            await client.start()
            try:
                assert await wait_for(lambda: client.ignore() == ["parasail/fp8"])
                version = client.version
                started = time.monotonic()
                path.write_text(entry.format(p="parasail/fp8") + "\n" + entry.format(p="novita/bf16"))
                assert await wait_for(lambda: client.ignore() == ["novita/bf16", "parasail/fp8"], timeout=8)
                assert time.monotonic() - started <= 5.5
                assert client.version == version + 1
                (reason,) = client.snapshot.entries[0].reasons
                assert (reason.layer, reason.reason, reason.reference) == ("exclusion", "measured defect", "T-1")

                path.write_text(entry.format(p="parasail/fp8") + "\n" + entry.format(p="parasail/fp8"))
                assert await wait_for(lambda: any(e.get("event") == "exclusions_refused" for e in logs), timeout=8)
                await asyncio.sleep(0.5)
                assert client.version == version + 1
                assert client.ignore() == ["novita/bf16", "parasail/fp8"]
            finally:
                await client.stop()
    refused = [e for e in logs if e.get("event") == "exclusions_refused"]
    assert len(refused) == 1  # logged once per change of the file, not at every poll
    assert f"{path}:8: duplicate of the exclusion at line 1" in refused[0]["error"]
    assert refused[0]["kept"] == 2


# -- the client through outages -----------------------------------------------------------------------


async def test_a_client_refuses_a_snapshot_older_than_one_it_applied(secured, tmp_path):
    """A lower version in the bucket is refused: the client and its cache file keep the newer one."""
    infra = secured
    await ensure_streams(settings_for(infra))
    admin = await connect(infra, "admin")
    kv = await admin.jetstream().key_value(ROUTING_BUCKET)

    def snap(version: int, *providers: str) -> bytes:
        entries = [IgnoreEntry(provider=p, reasons=[IgnoreReason(layer="override", reason="r")]) for p in providers]
        return codec.encode(IgnoreSnapshot(at=utcnow(), model=MODEL, version=version, entries=entries))

    cache = tmp_path / "cache.json"
    client = backend_client(infra, cache_path=cache)
    try:
        await kv.put(subjects.kv_key(MODEL), snap(5, "a/fp8"))
        await client.start()
        assert await wait_for(lambda: client.version == 5)
        await kv.put(subjects.kv_key(MODEL), snap(3, "b/fp8"))
        assert await wait_for(lambda: client.refused == 1)
        assert (client.version, client.ignore()) == (5, ["a/fp8"])
        assert codec.SNAPSHOT.decode(cache.read_bytes()).version == 5
        await kv.put(subjects.kv_key(MODEL), snap(6, "c/fp8"))
        assert await wait_for(lambda: client.version == 6)
        assert client.ignore() == ["c/fp8"] and client.refused == 1
    finally:
        await client.stop()
        await admin.close()


@dataclass
class Restartable:
    """NATS (with the project's authorization) that a test may stop and start again on the same port and store."""

    workdir: Path
    passwords: dict[str, str]
    nats: RunningServer
    redis: RunningServer
    namespace: str

    @property
    def nats_url(self) -> str:
        return self.nats.url

    @property
    def redis_url(self) -> str:
        return self.redis.url

    def stop_nats(self) -> None:
        self.nats.stop()

    def start_nats(self) -> None:
        self.nats = start_nats(self.workdir / "nats", server_config(), port=self.nats.port,
                               env=server_env(self.passwords))


@pytest.fixture
def restartable(tmp_path):
    """Like ``secured``, but the NATS server can be stopped and restarted (same port, same JetStream store)."""
    passwords = generate_passwords()
    try:
        nats_server = start_nats(tmp_path / "nats", server_config(), env=server_env(passwords))
    except BinaryMissing as exc:
        pytest.skip(f"needs the nats-server binary: {exc}")
    try:
        redis_server = start_redis(tmp_path / "redis")
    except BinaryMissing as exc:
        nats_server.stop()
        pytest.skip(f"needs redis-server: {exc}")
    infra = Restartable(tmp_path, passwords, nats_server, redis_server, f"t{uuid.uuid4().hex[:8]}")
    try:
        yield infra
    finally:
        infra.redis.stop()
        infra.nats.stop()


async def test_a_client_started_while_nats_is_down_serves_its_cache_and_catches_up(restartable, tmp_path):
    """With NATS down a new client serves the cached snapshot at once; when NATS returns it catches up."""
    infra = restartable
    await ensure_streams(settings_for(infra))
    cache = tmp_path / "backend-cache.json"
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        first = backend_client(infra, cache_path=cache)
        await first.start()
        assert await first.wait_ready(10)
        await add_override(infra, "lambda/fp8")
        assert await wait_for(lambda: first.ignore() == ["lambda/fp8"])
        cached_version = first.version
        await first.stop()

        infra.stop_nats()
        client = backend_client(infra, cache_path=cache)
        await client.start()
        try:
            assert client.ignore() == ["lambda/fp8"] and client.version == cached_version
            assert await client.wait_ready(0.5)  # a cached snapshot is served
            assert client.connected is False and client.age_s is None  # and the bus never confirmed it
            await asyncio.sleep(1.5)
            assert client.ignore() == ["lambda/fp8"]
            # it says why, without the credential
            assert "refused or unreachable" in (client.problem or ""), client.problem
            assert infra.passwords["backend"] not in client.problem

            infra.start_nats()
            assert await wait_for(lambda: client.age_s is not None, timeout=20)
            assert await wait_for(lambda: client.problem is None, timeout=5), client.problem
            await add_override(infra, "baseten/fp8")
            assert await wait_for(lambda: client.ignore() == ["baseten/fp8", "lambda/fp8"], timeout=20)
            assert client.version == cached_version + 1
            assert codec.SNAPSHOT.decode(cache.read_bytes()).version == cached_version + 1
        finally:
            await client.stop()


async def test_a_client_says_why_it_has_no_current_snapshot(secured):
    """Credential refused, bucket missing, no snapshot yet: each is a one-line problem; then none."""
    infra = secured
    refused = IgnoreListClient(infra.nats_url, MODEL, user="backend", password="wrong-password-1")
    await refused.start()
    try:
        assert not await refused.wait_ready(1.5)
        assert await wait_for(lambda: refused.problem is not None, timeout=5)
        assert "authorization" in refused.problem.lower(), refused.problem
        assert refused.provider() == {"ignore": []}
    finally:
        await refused.stop()

    client = backend_client(infra)
    await client.start()
    try:
        assert await wait_for(lambda: "does not exist yet" in (client.problem or ""), timeout=10), client.problem
        await ensure_streams(settings_for(infra))
        assert await wait_for(lambda: "no snapshot for" in (client.problem or ""), timeout=10), client.problem
        async with running(settings_for(infra), ["router"], passwords=infra.passwords):
            assert await wait_for(lambda: client.version >= 1 and client.problem is None, timeout=20), client.problem
    finally:
        await client.stop()


@contextlib.asynccontextmanager
async def following_then_nats_down(infra):
    """A router and a client following an override of lambda/fp8; NATS is stopped on entry."""
    async with router_and_client(infra) as client:
        await add_override(infra, "lambda/fp8")
        assert await wait_for(lambda: client.ignore() == ["lambda/fp8"])
        infra.stop_nats()
        assert await wait_for(lambda: client.connected is False, timeout=10)
        yield client


async def test_a_connected_client_catches_up_within_seconds_of_a_nats_restart(restartable):
    """A client that was following when NATS restarted resumes at once, not after its watch times out."""
    infra = restartable
    async with following_then_nats_down(infra) as client:
        infra.start_nats()
        assert await wait_for(lambda: client.connected, timeout=20)
        await add_override(infra, "baseten/fp8")  # stored once the server is back
        stored_at = time.monotonic()
        assert await wait_for(lambda: client.ignore() == ["baseten/fp8", "lambda/fp8"], timeout=20)
        assert time.monotonic() - stored_at < 5.0, "the client waited for its watch to time out"


async def test_provider_never_blocks_while_the_bus_is_down(restartable):
    """With NATS gone, provider() answers from memory in well under 5 ms, every time."""
    infra = restartable
    async with following_then_nats_down(infra) as client:
        slowest = 0.0
        for i in range(400):
            started = time.perf_counter()
            body = client.provider({"sort": "latency"})
            slowest = max(slowest, time.perf_counter() - started)
            assert body == {"sort": "latency", "ignore": ["lambda/fp8"]}
            if i % 20 == 0:
                await asyncio.sleep(0.01)  # let the client's reconnect attempts run in between
        assert slowest < 0.005, f"provider() took {slowest * 1000:.2f} ms"
        age = client.age_s
        await asyncio.sleep(0.3)
        assert client.age_s is not None and client.age_s >= age + 0.25  # it says how old the snapshot is
