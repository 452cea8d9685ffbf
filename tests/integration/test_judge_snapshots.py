"""Snapshots of the judge's fold in NATS: a rebuild starts from the last one, not from the log's start."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import redis.asyncio as aioredis
from structlog.testing import capture_logs

from reverie_canary.canary.demo import judge_record
from reverie_canary.canary.runtime import running
from reverie_canary.services.judge import snapshots
from reverie_canary.services.judge.core import Policy, fold, initial
from reverie_canary.services.judge.replay import scan_refold
from reverie_canary.shared.contract import inputs
from reverie_canary.shared.runtime import streams
from reverie_canary.shared.runtime.eventlog import read_log
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from tests import waits
from tests.judge_events import MODEL, cycle_events, healthy, publish_events

pytestmark = pytest.mark.integration
FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8")


def failing(n: int) -> list:
    table = healthy(*FLEET)
    table["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    if n % 2:
        table["b/fp8"]["structured"] = ("transport_error", "http_503")
    return cycle_events(n, table)


async def caught_up(js) -> None:
    durable = streams.judge_consumer(Settings.load(env={})).durable
    await waits.until(lambda: waits.caught_up(js, streams.LOG, durable), timeout_s=20,
                      what="the judge caught up with the log")


async def test_a_rebuild_after_redis_lost_the_state_starts_from_the_last_snapshot(infra):
    """Snapshots every 8 events; FLUSHALL; the restarted judge folds only the log after the newest one, to the same state."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL], mode="enforce", judge_snapshot_events=8)
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    events = [e for n in range(4) for e in failing(n)]
    try:
        async with running(settings, ["judge"]):
            for n in range(4):  # a batch per cycle or less: several snapshots
                await publish_events(js, failing(n))
                await caught_up(js)
            before = await judge_record(settings, MODEL)
        held = await snapshots.positions(js)
        assert sorted(held) == ["judge-a", "judge-b"] and len(set(held.values())) == 2
        newest = max(held.values())
        assert 0 < newest <= before.position
        client = aioredis.from_url(infra.redis_url)
        await client.flushall()
        await client.aclose()
        with capture_logs() as logs:
            async with running(settings, ["judge"]):
                await caught_up(js)
                after = await judge_record(settings, MODEL)
        refolded = [e for e in logs if e["event"] == "state_refolded"]
        assert [(e["from_snapshot"], e["until"]) for e in refolded] == [(newest, before.position)]
        expected, _ = fold(events, Policy.from_settings(settings))
        assert after.state == before.state == expected[MODEL] and after.position == before.position
    finally:
        await nc.close()


async def test_a_snapshot_beyond_the_position_rebuilt_to_is_passed_over(infra):
    """The newest snapshot lies after the acknowledged position: the older one is used; with none usable, the log's start."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL], mode="enforce")
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    try:
        events = failing(0) + failing(1)
        await publish_events(js, events)
        logged = await read_log(js, prefixes=inputs.prefixes("judge"), idle_s=0.5)
        policy = Policy.from_settings(settings)
        at = datetime.now(timezone.utc)
        writer = snapshots.SnapshotWriter(js, every=1)
        early = fold([e.event for e in logged[:5]], policy)[0]
        late = fold([e.event for e in logged], policy)[0]
        assert await writer.write(early, logged[4].seq, at) and await writer.write(late, logged[-1].seq, at)
        chosen = await snapshots.latest(js, logged[-2].seq)
        assert chosen is not None and chosen.position == logged[4].seq and chosen.states == early
        refold = await scan_refold(js, policy, until_seq=logged[-2].seq, keep=None, snapshot=chosen)
        assert refold.events == len(logged) - 5 - 1  # only what came after the snapshot, up to the position
        assert refold.states[MODEL] == fold([e.event for e in logged[:-1]], policy)[0][MODEL]
        assert await snapshots.latest(js, logged[3].seq) is None
        assert (await snapshots.latest(js, logged[-1].seq)).states == late
        assert initial(MODEL) != late[MODEL]
    finally:
        await nc.close()
