"""The router store port: one contract, run against every adapter (Redis and memory)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import redis.asyncio as aioredis

from reverie_canary.services.router.core import RouterPolicy, SnapshotMade, Tick, decide, initial
from reverie_canary.services.router.store import MemoryRouterStore, RedisRouterStore, RouterRecord, StaleRecord
from reverie_canary.shared.contract.commands import AddOverride
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import CommandApplied, make_decision

pytestmark = pytest.mark.integration

MODEL = "acme/chat-1"
AT = datetime(2026, 11, 1, 12, tzinfo=timezone.utc)


@pytest.fixture(params=["redis", "memory"])
async def store(request, infra):
    if request.param == "memory":
        yield MemoryRouterStore()
        return
    client = aioredis.from_url(infra.redis_url)
    yield RedisRouterStore(client, infra.namespace)
    await client.aclose()


def folded() -> RouterRecord:
    """A record with an override, a suspension, published versions and an outbox of a snapshot and an answer."""
    policy = RouterPolicy(models=(MODEL,))
    state, _ = decide(initial(), Tick(), AT, policy)
    state, _ = decide(state, make_decision(at=AT, decision_id="d1", model=MODEL, provider="bad/fp8", action="suspend",
                                      until=datetime(2026, 11, 2, tzinfo=timezone.utc)), AT, policy)
    command = AddOverride(command_id="c1", actor="alice", at=AT, provider="lambda/fp8", model=MODEL, reason="r")
    state, effects = decide(state, command, AT, policy)
    assert [type(e) for e in effects] == [SnapshotMade, CommandApplied]
    return RouterRecord(state=state, position=42, revision=1, outbox=effects)


async def test_a_fresh_store_loads_an_empty_record(store):
    """Nothing saved: revision 0, position 0, no layers, no outbox."""
    record = await store.load()
    assert (record.revision, record.position, record.outbox) == (0, 0, [])
    assert record.state.overrides == {} and record.state.suspensions == {}


async def test_a_saved_record_loads_back_equal(store):
    """State (layers, versions), position and outbox (snapshot and answer) survive a save and a load exactly."""
    record = folded()
    await store.save(record, expected_revision=0)
    assert await store.load() == record


async def test_a_stale_writer_is_refused_and_the_newer_record_kept(store):
    """Saving over a revision that moved on raises StaleRecord (a Transient) and writes nothing."""
    record = folded()
    await store.save(record, expected_revision=0)
    with pytest.raises(StaleRecord):
        await store.save(RouterRecord(position=99, revision=1), expected_revision=0)
    assert issubclass(StaleRecord, Transient)
    newer = RouterRecord(state=record.state, position=43, revision=2)
    await store.save(newer, expected_revision=1)
    assert (await store.load()).position == 43


async def test_a_lost_record_is_seen_by_the_next_save(store, infra):
    """A record that vanished (Redis flushed) fails the next save at its old revision: nothing is written over it."""
    await store.save(folded(), expected_revision=0)
    if isinstance(store, MemoryRouterStore):
        store.raw = None
    else:
        await store.client.flushall()
    assert (await store.load()).revision == 0
    with pytest.raises(StaleRecord):
        await store.save(RouterRecord(position=50, revision=2), expected_revision=1)
    assert (await store.load()).revision == 0
