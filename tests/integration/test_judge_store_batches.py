"""The judge store's batch contract, against every adapter: commit in parts, one atomic step, under a lease."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
import redis.asyncio as aioredis

from reverie_canary.services.judge.core import Folder, Policy, fold, initial
from reverie_canary.services.judge.store import (
    Fenced,
    JudgeRecord,
    MemoryJudgeStore,
    ModelChange,
    RedisJudgeStore,
    delta,
)
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import ProbeResult
from tests.judge_events import MODEL, cycle_events, healthy

pytestmark = pytest.mark.integration
OTHER = "other/model-2"
POLICY = Policy(mode="enforce")


@pytest.fixture(params=["redis", "memory"])
async def store(request, infra):
    if request.param == "memory":
        yield MemoryJudgeStore()
        return
    client = aioredis.from_url(infra.redis_url)
    yield RedisJudgeStore(client, infra.namespace)
    await client.aclose()


def log(model: str = MODEL, cycles: int = 2, providers: int = 4):
    table = healthy(*(f"p{i}/x" for i in range(providers)))
    table["p0/x"]["ttft"] = ("fail", "ttft_exceeded")
    return [e for n in range(cycles) for e in cycle_events(n, table, model=model)]


async def commit_in_batches(store, lease, events, size: int) -> dict[str, JudgeRecord]:
    """Fold ``events`` batch by batch through a Folder and commit each batch; the records as the judge holds them."""
    records = {m: JudgeRecord(state=initial(m)) for m in {e.model for e in events}}
    folder = Folder(POLICY)
    for start in range(0, len(events), size):
        folder.share()
        touched, outboxes = {}, {}
        for seq, event in enumerate(events[start:start + size], start + 1):
            outboxes.setdefault(event.model, []).extend(folder.apply(event.model, event))
            touched[event.model] = seq
        changes = [ModelChange(model=m, before=records[m].state if records[m].revision else None,
                               after=folder.state(m), position=p, expected_revision=records[m].revision,
                               outbox=outboxes[m]) for m, p in touched.items()]
        await store.commit(changes, lease=lease)
        for c in changes:
            records[c.model] = JudgeRecord(state=c.after, position=c.position, revision=c.revision, outbox=c.outbox)
    return records


async def test_batches_committed_in_parts_load_back_as_the_fold(store):
    """Two models folded and committed 7 events at a time: each record loads back as the pure fold, position and outbox."""
    token, _ = await store.acquire("judge-a", 30)
    events = [e for pair in zip(log(MODEL), log(OTHER), strict=False) for e in pair]
    held = await commit_in_batches(store, token, events, 7)
    expected, _ = fold(events, POLICY)
    loaded = await store.load_many([MODEL, OTHER])
    for model in (MODEL, OTHER):
        assert loaded[model].state == expected[model]
        assert loaded[model] == held[model]
    assert loaded[MODEL].position == len(events) - 1 and loaded[OTHER].position == len(events)
    assert any(d.action == "suspend" for d in loaded[OTHER].outbox if hasattr(d, "action"))
    assert loaded[OTHER].unsent
    await store.mark_sent({OTHER: loaded[OTHER].position})
    assert not (await store.load(OTHER)).unsent
    assert await store.models() == sorted([MODEL, OTHER])


async def test_a_result_writes_one_result_and_the_time_whatever_the_size_of_the_model():
    """delta() of one probe result folded in place: two parts, at 4 providers and at 200."""
    for providers in (4, 200):
        events = log(cycles=1, providers=providers)
        folder = Folder(POLICY)
        for event in events[:-2]:  # discovery and every result but the last
            folder.apply(MODEL, event)
        before = folder.state(MODEL)
        folder.share()
        last = events[-2]
        assert isinstance(last, ProbeResult)
        folder.apply(MODEL, last)
        sets, deletes = delta(before, folder.state(MODEL))
        assert sorted(sets) == ["m:updated_at", f"r:{last.cycle} {last.task_id}"] and deletes == []


async def test_a_commit_is_all_or_nothing_and_refuses_a_stale_revision(store):
    """One of two changes expects a revision that moved on: Transient, and neither model is written."""
    token, _ = await store.acquire("judge-a", 30)
    first = log(MODEL)[:3]
    folder = Folder(POLICY)
    for e in first:
        folder.apply(MODEL, e)
    await store.commit([ModelChange(model=MODEL, before=None, after=folder.state(MODEL), position=3,
                                    expected_revision=0)], lease=token)
    other = Folder(POLICY)
    for e in log(OTHER)[:2]:
        other.apply(OTHER, e)
    with pytest.raises(Transient):
        await store.commit([ModelChange(model=OTHER, before=None, after=other.state(OTHER), position=9,
                                        expected_revision=0),
                            ModelChange(model=MODEL, before=None, after=initial(MODEL), position=9,
                                        expected_revision=0)], lease=token)
    assert (await store.load(OTHER)).revision == 0
    record = await store.load(MODEL)
    assert (record.revision, record.position, record.state) == (1, 3, folder.state(MODEL))


async def test_a_judge_without_the_lease_cannot_write(store):
    """A second judge cannot take a held lease; the holder's token that expired or was released is fenced."""
    token, owner = await store.acquire("judge-a", 0.4)
    assert owner == "judge-a"
    assert await store.acquire("judge-b", 30) == (None, "judge-a")
    change = ModelChange(model=MODEL, before=None, after=initial(MODEL), position=1, expected_revision=0)
    with pytest.raises(Fenced):
        await store.commit([change], lease="judge-b|forged")
    assert await store.renew(token, 0.4)
    await asyncio.sleep(0.6)  # the holder paused past its lease
    assert not await store.renew(token, 30)
    second, _ = await store.acquire("judge-b", 30)
    assert second is not None and second != token
    with pytest.raises(Fenced):  # the paused judge wakes up and tries to save behind the new one
        await store.commit([change], lease=token)
    assert (await store.load(MODEL)).revision == 0
    await store.commit([change], lease=second)
    assert (await store.load(MODEL)).revision == 1
    await store.release(token)  # not the holder: nothing
    assert await store.acquire("judge-c", 30) == (None, "judge-b")
    await store.release(second)
    third, _ = await store.acquire("judge-c", 30)
    assert third is not None


async def test_a_record_in_the_layout_before_batches_is_read_and_rewritten_whole(infra):
    """One ``doc`` field (the first layout): loaded as it was, and the first commit leaves no doc."""
    client = aioredis.from_url(infra.redis_url)
    store = RedisJudgeStore(client, infra.namespace)
    try:
        states, effects = fold(log(), POLICY)
        old = JudgeRecord(state=states[MODEL], position=12, revision=5, outbox=effects[-2:])
        await client.hset(store.key(MODEL), mapping={"rev": "5", "doc": msgspec.json.encode(old)})
        loaded = await store.load(MODEL)
        assert loaded == old and loaded.unsent
        token, _ = await store.acquire("judge-a", 30)
        await store.commit([ModelChange(model=MODEL, before=loaded.state, after=loaded.state, position=13,
                                        expected_revision=5)], lease=token)
        fields = {k.decode() for k in await client.hkeys(store.key(MODEL))}
        assert "doc" not in fields and "p:p0/x" in fields
        again = await store.load(MODEL)
        assert (again.state, again.position, again.revision, again.outbox) == (states[MODEL], 13, 6, [])
    finally:
        await client.aclose()
