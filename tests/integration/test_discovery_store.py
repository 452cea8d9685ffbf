"""The discovery store port: one contract, run against every adapter (Redis and memory)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import redis.asyncio as aioredis

from reverie_canary.services.discovery.sizing import KindTime, ProbeTimes
from reverie_canary.services.discovery.store import (
    MAX_TIMES_BYTES,
    MemoryDiscoveryStore,
    RedisDiscoveryStore,
    decode_times,
)
from reverie_canary.shared.contract.errors import Undecodable

pytestmark = pytest.mark.integration

MODEL = "acme/chat-1"
AT = datetime(2026, 11, 1, 12, tzinfo=timezone.utc)


@pytest.fixture(params=["redis", "memory"])
async def store(request, infra):
    if request.param == "memory":
        yield MemoryDiscoveryStore()
        return
    client = aioredis.from_url(infra.redis_url)
    yield RedisDiscoveryStore(client, infra.namespace)
    await client.aclose()


async def test_nothing_stored_loads_no_times_and_no_retests(store):
    """A fresh store: no probe times, no retests for any cycle."""
    assert await store.load_times() is None
    assert await store.retests(MODEL, 7) == []


async def test_saved_times_load_back_equal_and_a_save_replaces_them(store):
    """Probe times survive a save and a load exactly; the next save replaces them whole."""
    first = ProbeTimes(kinds={"ttft": KindTime(mean_s=1.25, samples=5), "echo": KindTime(mean_s=0.5, samples=9)},
                       probers=2, at=AT)
    await store.save_times(first)
    assert await store.load_times() == first
    second = ProbeTimes(kinds={"language": KindTime(mean_s=3.0, samples=1)}, probers=1, at=AT)
    await store.save_times(second)
    assert await store.load_times() == second


async def test_retests_are_a_set_per_model_and_cycle(store):
    """The same retest twice is kept once; other cycles and models see none of it; they come back sorted."""
    await store.add_retests(MODEL, 7, [("b/fp8", "pt"), ("a/fp8", "ja")], 600)
    await store.add_retests(MODEL, 7, [("b/fp8", "pt")], 600)
    await store.add_retests(MODEL, 7, [], 600)
    assert await store.retests(MODEL, 7) == [("a/fp8", "ja"), ("b/fp8", "pt")]
    assert await store.retests(MODEL, 8) == []
    assert await store.retests("acme/chat-2", 7) == []


def test_stored_times_out_of_bounds_or_shape_are_undecodable_and_impossible_means_dropped():
    """Above the byte bound or not a ProbeTimes: Undecodable; a kind whose mean is not positive and finite is dropped."""
    with pytest.raises(Undecodable):
        decode_times(b'{"kinds": {}, "pad": "' + b"x" * MAX_TIMES_BYTES + b'"}')
    with pytest.raises(Undecodable):
        decode_times(b'{"kinds": {"ttft": {"mean_s": "slow"}}}')
    kept = decode_times(b'{"kinds": {"ttft": {"mean_s": 1.5}, "echo": {"mean_s": -2}, "refusal": {"mean_s": 0}},'
                        b' "probers": -1}')
    assert ({k: v.mean_s for k, v in kept.kinds.items()}, kept.probers) == ({"ttft": 1.5}, 0)
