"""Redis lost (flushed, replaced without persistence): judge and router rebuild their state from the log."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import msgspec
import pytest
import redis.asyncio as aioredis

from reverie_canary.canary.demo import current_snapshot, judge_record
from reverie_canary.canary.runtime import running
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.commands import AddOverride
from reverie_canary.shared.runtime import streams
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from tests import waits
from tests.judge_events import MODEL, cycle_events, healthy, publish_events

pytestmark = pytest.mark.integration
FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8", "e/fp8")


async def publish_log(js) -> None:
    """Two failed cycles of a/fp8 (ending an hour ago) and an operator override of b/fp8."""
    now = datetime.now(timezone.utc)
    out = healthy(*FLEET)
    out["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    for n, start in ((0, now - timedelta(hours=2)), (1, now - timedelta(hours=1, minutes=30))):
        await publish_events(js, cycle_events(n, out, start=start))
    cmd = AddOverride(command_id="ov-1", actor="alice", at=now, provider="b/fp8", model=MODEL, reason="incident 9")
    await js.publish(subjects.ops("override-add"), codec.encode(cmd), headers={"Nats-Msg-Id": cmd.command_id})


async def ignored(settings) -> list[str] | None:
    """The snapshot's ignore list now (``None``: no snapshot)."""
    snap = await current_snapshot(settings, MODEL)
    return None if snap is None else snap.ignore_at(datetime.now(timezone.utc))


async def wait_ignore(settings, wanted: list[str], timeout_s: float = 15.0) -> None:
    async def reached() -> bool:
        return await ignored(settings) == wanted

    await waits.until(reached, timeout_s=timeout_s, what=f"the ignore list {wanted}")


async def settled(js) -> None:
    """Wait until the judge and the router consumed and acknowledged everything in the log."""
    settings = Settings.load(env={})
    durables = (streams.judge_consumer(settings).durable, streams.router_consumer(settings).durable)
    await waits.until(lambda: waits.caught_up(js, streams.LOG, *durables), timeout_s=15,
                      what="the judge and the router caught up with the log")


def settings_for(infra) -> Settings:
    return Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                         models=[MODEL], mode="enforce", cycle_interval_s=3600, probe_window_s=600)


async def established(settings, js):
    """Publish the log, wait until a/fp8 (suspended) and b/fp8 (override) are ignored; the judge's record and version."""
    await publish_log(js)
    await wait_ignore(settings, ["a/fp8", "b/fp8"])
    await settled(js)
    return await judge_record(settings, MODEL), (await current_snapshot(settings, MODEL)).version


def replay_cli(settings: Settings):
    """``canary replay`` as an auditor runs it against this system."""
    from typer.testing import CliRunner

    from reverie_canary.canary.cli import app

    env = {"NATS_URL": settings.nats_url, "REDIS_URL": settings.redis_url, "CANARY_NAMESPACE": settings.namespace,
           "CANARY_MODE": "enforce", "CANARY_MODELS": MODEL, "CANARY_CONFIG": "",
           "CANARY_CYCLE_INTERVAL_S": "3600", "CANARY_PROBE_WINDOW_S": "600"}
    return CliRunner().invoke(app, ["replay"], env=env)


async def snapshot_history(js) -> list:
    """Every IgnoreSnapshot the KV bucket kept for MODEL, oldest first."""
    kv = await js.key_value("canary-routing")
    return [codec.SNAPSHOT.decode(e.value) for e in await kv.history(subjects.kv_key(MODEL)) if e.value]


async def flush(infra) -> None:
    client = aioredis.from_url(infra.redis_url)
    await client.flushall()
    await client.aclose()


async def test_flushed_redis_is_rebuilt_from_the_log_and_routing_drops_nothing(infra):
    """After FLUSHALL and a restart: same judge state, overrides and suspensions kept, no empty snapshot."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    async with running(settings, ["judge", "router"]):
        before, version_before = await established(settings, js)
        agreed = await asyncio.to_thread(replay_cli, settings)
    await flush(infra)
    # the auditor's replay sees the loss (and says the judge will rebuild), exit 1
    lost = await asyncio.to_thread(replay_cli, settings)
    assert agreed.exit_code == 0 and "agrees with the log" in agreed.output, agreed.output
    assert lost.exit_code == 1, lost.output
    assert f"live state of {MODEL}: NONE in Redis" in lost.output and "rebuilds it" in lost.output

    async with running(settings, ["judge", "router"]):
        await settled(js)

        async def still_ignored() -> bool:
            return await ignored(settings) == ["a/fp8", "b/fp8"]

        await waits.holds(still_ignored, for_s=1.0, what="a/fp8 and b/fp8 ignored after the rebuild")
        after = await judge_record(settings, MODEL)
        snapshot = await current_snapshot(settings, MODEL)
    history = await snapshot_history(js)
    await nc.close()

    assert after.state == before.state
    assert after.position == before.position
    assert snapshot.ignore_at(datetime.now(timezone.utc)) == ["a/fp8", "b/fp8"]
    # no version after the restart ever published a list without them
    assert all({"a/fp8", "b/fp8"} <= set(s.ignore) for s in history if s.version >= version_before)


async def test_redis_lost_under_running_services_is_rebuilt_before_anything_is_published(infra):
    """FLUSHALL while judge and router run: the next input rebuilds first; no snapshot drops a/fp8 or b/fp8."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    async with running(settings, ["judge", "router"]):
        before, version_before = await established(settings, js)
        await flush(infra)

        cmd = AddOverride(command_id="ov-2", actor="alice", at=datetime.now(timezone.utc), provider="c/fp8",
                          model=MODEL, reason="incident 10")
        await js.publish(subjects.ops("override-add"), codec.encode(cmd), headers={"Nats-Msg-Id": cmd.command_id})
        await wait_ignore(settings, ["a/fp8", "b/fp8", "c/fp8"])
        # the judge reads the command too (decodes it, skips it) and rebuilds before it does: the router's
        # snapshot can come first, so the judge's record is read once both have acknowledged it
        await settled(js)
        after = await judge_record(settings, MODEL)
    history = await snapshot_history(js)
    await nc.close()

    assert all({"a/fp8", "b/fp8"} <= set(s.ignore) for s in history if s.version >= version_before)
    assert after.state.providers == before.state.providers
    assert after.state.mode == before.state.mode


async def router_record(settings):
    from reverie_canary.services.router.store import RedisRouterStore

    client = aioredis.from_url(settings.redis_url)
    try:
        return await RedisRouterStore(client, settings.namespace).load()
    finally:
        await client.aclose()


async def test_replay_checks_the_routers_state_against_the_log_too(infra):
    """An override missing from the router's record (the judge agreeing) is a difference: exit 1, named."""
    from reverie_canary.services.router.core import override_key
    from reverie_canary.services.router.store import RedisRouterStore, RouterRecord

    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    async with running(settings, ["judge", "router"]):
        await established(settings, nc.jetstream())
    await nc.close()
    agreed = await asyncio.to_thread(replay_cli, settings)
    assert agreed.exit_code == 0, agreed.output
    assert "router state (position #" in agreed.output
    assert "agrees with the log: 1 override(s), 1 suspension(s), 0 quantization floor(s) in force" in agreed.output

    client = aioredis.from_url(infra.redis_url)
    store = RedisRouterStore(client, settings.namespace)
    record = await store.load()
    overrides = {k: v for k, v in record.state.overrides.items() if k != override_key("b/fp8", MODEL)}
    tampered = RouterRecord(state=msgspec.structs.replace(record.state, overrides=overrides),
                            position=record.position, revision=record.revision + 1, outbox=record.outbox)
    await store.save(tampered, expected_revision=record.revision)
    await client.aclose()

    differs = await asyncio.to_thread(replay_cli, settings)
    assert differs.exit_code == 1, differs.output
    assert f"live state of {MODEL} (position #" in differs.output  # the judge still agrees ...
    assert "router state (position #" in differs.output and "DIFFERS in 1 place(s)" in differs.output
    assert f"override b/fp8 on {MODEL}: replay=" in differs.output and "live=none" in differs.output


async def test_a_rebuilt_router_drops_what_expired_while_its_state_was_lost(infra):
    """Redis flushed while an override expired: the rebuilt record holds only what is still in force."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    now = datetime.now(timezone.utc)
    short = AddOverride(command_id="ov-short", actor="alice", at=now, provider="c/fp8", model=MODEL,
                        reason="incident 11", expires_at=now + timedelta(seconds=2))
    kept = AddOverride(command_id="ov-kept", actor="alice", at=now, provider="d/fp8", model=MODEL,
                       reason="incident 12")
    async with running(settings, ["router"]):
        for cmd in (short, kept):
            await js.publish(subjects.ops("override-add"), codec.encode(cmd), headers={"Nats-Msg-Id": cmd.command_id})
        await wait_ignore(settings, ["c/fp8", "d/fp8"])
    await waits.until(lambda: datetime.now(timezone.utc) > short.expires_at, timeout_s=5,
                      what="the short override's expiry to pass")
    await flush(infra)
    async with running(settings, ["router"]):
        await wait_ignore(settings, ["d/fp8"])
        record = await router_record(settings)
    await nc.close()
    assert record.position > 0  # rebuilt up to where the consumer was, not started afresh
    assert [o.provider for o in record.state.overrides.values()] == ["d/fp8"]


async def test_an_upgraded_router_takes_over_router_v1s_position_without_applying_anything_twice(infra):
    """router-v1 had applied an override: v2 starts after it, rebuilds the override from the log, v1 is gone."""
    from nats.js.api import ConsumerConfig

    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    cmd = AddOverride(command_id="ov-old", actor="alice", at=datetime.now(timezone.utc), provider="b/fp8",
                      model=MODEL, reason="incident 8")
    await js.publish(subjects.ops("override-add"), codec.encode(cmd), headers={"Nats-Msg-Id": cmd.command_id})
    # the old router's durable, as it was declared, with the command acknowledged
    await js.add_consumer("CANARY_LOG", ConsumerConfig(durable_name="router-v1", ack_policy="explicit",
                                                       filter_subjects=["canary.decisions.>", "canary.ops.>"]))
    old = await js.pull_subscribe_bind("router-v1", stream="CANARY_LOG")
    [msg] = await old.fetch(1, timeout=5)
    await msg.ack_sync()
    async with running(settings, ["router"]):
        await wait_ignore(settings, ["b/fp8"])
        record = await router_record(settings)
        names = [c.name for c in await js.consumers_info("CANARY_LOG")]
        v2 = await js.consumer_info("CANARY_LOG", "router-v2")
    history = await snapshot_history(js)
    await nc.close()
    assert "router-v1" not in names and "router-v2" in names
    assert v2.config.opt_start_seq == msg.metadata.sequence.stream + 1  # starts after what v1 had applied
    assert record.position == msg.metadata.sequence.stream and "ov-old" in record.state.commands
    assert [s.ignore for s in history] == [["b/fp8"]]  # one version, with the override: nothing applied twice
