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
from reverie_canary.client import IgnoreListClient
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.commands import AddOverride
from reverie_canary.shared.contract.events import Decision, make_decision
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot
from reverie_canary.shared.runtime import streams
from reverie_canary.shared.runtime.auth import generate_passwords, server_config, server_env
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, ROUTING_BUCKET
from tests import waits

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
    decision = make_decision(at=now, decision_id=decision_id or f"dec|{MODEL}|{provider}|suspend|{uuid.uuid4().hex[:8]}",
                        model=MODEL, provider=provider, action="suspend", until=until, reason="failed_cycles",
                        detail="ttft_exceeded in 2 cycles")
    nc = await connect(infra, "judge")
    try:
        await nc.jetstream().publish(subjects.decision(MODEL, provider), codec.encode(decision),
                                     headers={"Nats-Msg-Id": decision.decision_id})
    finally:
        await nc.close()
    return decision


async def router_caught_up(infra) -> bool:
    """True when the router's durable has delivered, and had acknowledged, everything the log holds for it."""
    nc = await connect(infra, "admin")
    try:
        return await waits.caught_up(nc.jetstream(), LOG, streams.router_consumer(settings_for(infra)).durable)
    finally:
        await nc.close()


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
        await waits.until(lambda: client.ignore() == ["lambda/fp8"], timeout_s=10, what="the client ignores lambda/fp8")
        assert client.version == first + 1
        assert client.provider({"sort": "price", "ignore": ["mine/x"]}) == {
            "sort": "price", "ignore": ["lambda/fp8", "mine/x"]}
        (entry,) = client.snapshot.entries
        assert entry.reasons == [IgnoreReason(layer="override", reason="incident 42", actor="alice",
                                              since=command.at, until=command.at + timedelta(days=365))]


async def test_a_judge_suspension_reaches_a_watching_client(secured):
    """A suspend decision published by the judge user appears in the client with its until and decision id."""
    async with router_and_client(secured) as client:
        until = (utcnow() + timedelta(days=1)).replace(microsecond=0)
        decision = await suspend(secured, "baseten/fp8", until)
        await waits.until(lambda: client.ignore() == ["baseten/fp8"], timeout_s=10,
                          what="the client ignores baseten/fp8")
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
            await waits.until(lambda: follower.ignore() == ["flaky/fp8", "slow/fp8"], timeout_s=10,
                              what="the follower ignores flaky/fp8 and slow/fp8")
            await waits.until(lambda: ahead.version == follower.version, timeout_s=10,
                              what="both clients at the same version")
            version = follower.version
            inputs = await stored(infra, "canary.decisions.>") + await stored(infra, "canary.ops.>")

            # the client drops expired entries itself, before (and without) any new snapshot
            offset[0] = suspended_until - utcnow() + timedelta(milliseconds=1)
            assert ahead.ignore() == ["flaky/fp8"] and ahead.version == version
            offset[0] = override_until - utcnow() + timedelta(milliseconds=1)
            assert ahead.ignore() == [] and ahead.version == version

            # the router publishes a new version at each expiry
            await waits.until(lambda: follower.version == version + 1, timeout_s=10,
                              what="a new version at the suspension's expiry")
            first = follower.snapshot
            assert [e.provider for e in first.entries] == ["flaky/fp8"]
            assert timedelta(0) <= first.at - suspended_until < timedelta(seconds=1)
            await waits.until(lambda: follower.version == version + 2, timeout_s=10,
                              what="a new version at the override's expiry")
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
        await waits.until(lambda: client.ignore() == ["baseten/fp8", "lambda/fp8"], timeout_s=10,
                          what="the client ignores baseten/fp8 and lambda/fp8")
        await client.stop()
    before, revision = await kv_snapshot(infra)
    published = await stored(infra, subjects.routing(MODEL))

    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        # the consumer resumes where it was and the expiry loop merges at start: nothing new is published
        await waits.until(lambda: router_caught_up(infra), timeout_s=10, what="the new router's consumer caught up")

        async def unchanged() -> bool:
            return await kv_snapshot(infra) == (before, revision)

        await waits.holds(unchanged, for_s=1.0, what="the snapshot and its revision as the old router left them")
        after, revision_after = await kv_snapshot(infra)
        assert (after, revision_after) == (before, revision)
        assert await stored(infra, subjects.routing(MODEL)) == published
        # the new router applies new input on top of the kept state
        await add_override(infra, "other/fp8")
        client = backend_client(infra)
        await client.start()
        try:
            await waits.until(lambda: client.ignore() == ["baseten/fp8", "lambda/fp8", "other/fp8"], timeout_s=10,
                              what="the restarted router applied the override of other/fp8")
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
                await waits.until(lambda: client.ignore() == ["parasail/fp8"], timeout_s=10,
                                  what="the client ignores the excluded parasail/fp8")
                version = client.version
                started = time.monotonic()
                path.write_text(entry.format(p="parasail/fp8") + "\n" + entry.format(p="novita/bf16"))
                await waits.until(lambda: client.ignore() == ["novita/bf16", "parasail/fp8"], timeout_s=8,
                                  what="the changed exclusions file reached the client")
                assert time.monotonic() - started <= 5.5
                assert client.version == version + 1
                (reason,) = client.snapshot.entries[0].reasons
                assert (reason.layer, reason.reason, reason.reference) == ("exclusion", "measured defect", "T-1")

                path.write_text(entry.format(p="parasail/fp8") + "\n" + entry.format(p="parasail/fp8"))
                await waits.until(lambda: any(e.get("event") == "exclusions_refused" for e in logs), timeout_s=8,
                                  what="the invalid exclusions file refused in the log")
                await waits.holds(lambda: client.version == version + 1, for_s=0.5, what="the version before the invalid file")
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
        await waits.until(lambda: client.version == 5, timeout_s=10, what="the client at version 5")
        await kv.put(subjects.kv_key(MODEL), snap(3, "b/fp8"))
        await waits.until(lambda: client.refused == 1, timeout_s=10, what="version 3 refused")
        assert (client.version, client.ignore()) == (5, ["a/fp8"])
        assert client.refused_rollbacks == 1 and "refusing v3 from the bus" in (client.health().problem or "")
        assert codec.SNAPSHOT.decode(cache.read_bytes()).version == 5
        await kv.put(subjects.kv_key(MODEL), snap(6, "c/fp8"))
        await waits.until(lambda: client.version == 6, timeout_s=10, what="the client at version 6")
        assert client.ignore() == ["c/fp8"] and client.refused == 1
    finally:
        await client.stop()
        await admin.close()


async def test_a_client_with_a_cache_of_an_old_store_follows_the_new_store(secured, tmp_path):
    """The reported case: cache v7 [baseten, lambda] of an old store, bucket v4 [lambda] of a new one: v4 served."""
    infra = secured
    await ensure_streams(settings_for(infra))
    admin = await connect(infra, "admin")
    kv = await admin.jetstream().key_value(ROUTING_BUCKET)

    def snap(version: int, epoch: str, *providers: str) -> bytes:
        entries = [IgnoreEntry(provider=p, reasons=[IgnoreReason(layer="override", reason="r")]) for p in providers]
        return codec.encode(IgnoreSnapshot(at=utcnow(), model=MODEL, version=version, entries=entries, epoch=epoch))

    cache = tmp_path / "cache.json"
    cache.write_bytes(snap(7, "20261001T000000Z-aaaaaaaaaaaa", "baseten/fp8", "lambda/fp8"))
    client = backend_client(infra, cache_path=cache)
    try:
        await kv.put(subjects.kv_key(MODEL), snap(4, "20261101T000000Z-bbbbbbbbbbbb", "lambda/fp8"))
        await client.start()
        await waits.until(lambda: client.version == 4, timeout_s=10, what="the new store's v4 served")
        health = client.health()
        assert (client.ignore(), health.problem, health.epoch_changes) == (["lambda/fp8"], None, 1)
        assert codec.SNAPSHOT.decode(cache.read_bytes()).version == 4
    finally:
        await client.stop()
        await admin.close()


async def test_a_watching_client_refuses_malformed_values_and_skips_a_delete(secured):
    """Values the watch delivers go through apply: bad bytes and an oversized list refused, a delete ignored."""
    infra = secured
    await ensure_streams(settings_for(infra))
    admin = await connect(infra, "admin")
    kv = await admin.jetstream().key_value(ROUTING_BUCKET)
    key = subjects.kv_key(MODEL)

    def snap(version: int, *providers: str) -> bytes:
        entries = [IgnoreEntry(provider=p, reasons=[IgnoreReason(layer="override", reason="r")]) for p in providers]
        return codec.encode(IgnoreSnapshot(at=utcnow(), model=MODEL, version=version, entries=entries))

    entry = b'{"provider":"x/fp8","reasons":[{"layer":"override","reason":"r"}]}'
    too_many = (b'{"type":"ignore_snapshot","at":"2026-01-01T00:00:00Z","model":"' + MODEL.encode()
                + b'","version":9,"entries":[' + b",".join([entry] * 257) + b"]}")  # above 256 endpoints
    client = backend_client(infra)
    try:
        await kv.put(key, snap(2, "a/fp8"))
        await client.start()
        await waits.until(lambda: client.version == 2, timeout_s=10, what="the client at version 2")
        await kv.put(key, b"{not json")
        await waits.until(lambda: client.refused == 1, timeout_s=10, what="the bad bytes refused")
        await kv.put(key, too_many)
        await waits.until(lambda: client.refused == 2, timeout_s=10, what="the oversized list refused")
        await kv.delete(key)
        await kv.put(key, snap(3, "b/fp8"))
        await waits.until(lambda: client.version == 3, timeout_s=10, what="the client at version 3")
        assert client.ignore() == ["b/fp8"] and client.refused == 2  # the delete was neither applied nor refused
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
        await waits.until(lambda: first.ignore() == ["lambda/fp8"], timeout_s=10, what="the first client ignores lambda/fp8")
        cached_version = first.version
        await first.stop()

        infra.stop_nats()
        client = backend_client(infra, cache_path=cache)
        await client.start()
        try:
            assert client.ignore() == ["lambda/fp8"] and client.version == cached_version
            assert await client.wait_ready(0.5)  # a cached snapshot is served
            assert client.connected is False and client.age_s is None  # and the bus never confirmed it
            await waits.holds(lambda: client.ignore() == ["lambda/fp8"], for_s=1.5,
                              what="the cached ignore list served while NATS is down")
            assert client.ignore() == ["lambda/fp8"]
            # it says why, without the credential
            assert "refused or unreachable" in (client.problem or ""), client.problem
            assert infra.passwords["backend"] not in client.problem

            infra.start_nats()
            await waits.until(lambda: client.age_s is not None, timeout_s=20, what="the bus confirmed the snapshot")
            await waits.until(lambda: client.problem is None, timeout_s=5, what="no problem left on the client")
            await add_override(infra, "baseten/fp8")
            await waits.until(lambda: client.ignore() == ["baseten/fp8", "lambda/fp8"], timeout_s=20,
                              what="the override sent after NATS returned reached the client")
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
        await waits.until(lambda: refused.problem is not None, timeout_s=5, what="the refused client says why")
        assert "authorization" in refused.problem.lower(), refused.problem
        assert refused.provider() == {"ignore": []}
    finally:
        await refused.stop()

    client = backend_client(infra)
    await client.start()
    try:
        await waits.until(lambda: "does not exist yet" in (client.problem or ""), timeout_s=10,
                          what="the client says the bucket does not exist yet")
        await ensure_streams(settings_for(infra))
        await waits.until(lambda: "no snapshot for" in (client.problem or ""), timeout_s=10,
                          what="the client says there is no snapshot yet")
        async with running(settings_for(infra), ["router"], passwords=infra.passwords):
            await waits.until(lambda: client.version >= 1 and client.problem is None, timeout_s=20,
                              what="the router's first snapshot at the client, no problem left")
    finally:
        await client.stop()


@contextlib.asynccontextmanager
async def following_then_nats_down(infra):
    """A router and a client following an override of lambda/fp8; NATS is stopped on entry."""
    async with router_and_client(infra) as client:
        await add_override(infra, "lambda/fp8")
        await waits.until(lambda: client.ignore() == ["lambda/fp8"], timeout_s=10, what="the client ignores lambda/fp8")
        infra.stop_nats()
        await waits.until(lambda: client.connected is False, timeout_s=10, what="the client sees NATS gone")
        yield client


async def test_a_connected_client_catches_up_within_seconds_of_a_nats_restart(restartable):
    """A client that was following when NATS restarted resumes at once, not after its watch times out."""
    infra = restartable
    async with following_then_nats_down(infra) as client:
        infra.start_nats()
        await waits.until(lambda: client.connected, timeout_s=20, what="the client reconnected")
        await add_override(infra, "baseten/fp8")  # stored once the server is back
        stored_at = time.monotonic()
        await waits.until(lambda: client.ignore() == ["baseten/fp8", "lambda/fp8"], timeout_s=20,
                          what="the override stored after the restart reached the client")
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


async def test_a_client_whose_nats_hangs_says_so_within_seconds_and_recovers(restartable, tmp_path):
    """A frozen NATS keeps the socket open: the client's pings find it out, health() says so, then recovers."""
    import signal

    from reverie_canary.client.ignore_list import MAX_OUTSTANDING_PINGS, PING_INTERVAL_S

    infra = restartable
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        client = backend_client(infra, cache_path=tmp_path / "cache.json")
        await client.start()
        try:
            assert await client.wait_ready(10)
            await waits.until(lambda: client.health().connected and client.health().problem is None, timeout_s=10,
                              what="a connected client without a problem")
            infra.nats.process.send_signal(signal.SIGSTOP)
            try:
                bound = PING_INTERVAL_S * (MAX_OUTSTANDING_PINGS + 2) + 5
                await waits.until(lambda: client.health().problem is not None, timeout_s=bound,
                                  what="the hung NATS said in health().problem")
                health = client.health()
                assert health.connected is False and "lost" in (health.problem or ""), health
                assert client.ignore() == []  # the last good snapshot is served meanwhile
            finally:
                infra.nats.process.send_signal(signal.SIGCONT)
            await waits.until(lambda: client.health().connected and client.health().problem is None, timeout_s=30,
                              what="the client connected again without a problem")
        finally:
            await client.stop()
