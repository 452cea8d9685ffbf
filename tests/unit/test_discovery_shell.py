"""Discovery's shell on the memory store: retests kept until planned, probe times carried to the next process."""

from __future__ import annotations

from datetime import datetime, timezone

from reverie_canary.services.discovery.service import Discovery
from reverie_canary.services.discovery.store import MemoryDiscoveryStore
from reverie_canary.shared.contract.events import RetestRequested
from reverie_canary.shared.runtime.broker import Delivery
from reverie_canary.shared.runtime.service import Shell
from reverie_canary.shared.runtime.settings import Settings

MODEL = "acme/chat-1"
AT = datetime(2026, 11, 1, 12, tzinfo=timezone.utc)
DELIVERY = Delivery(subject="canary.retest.x", stream_seq=1, deliveries=1, headers={})


def discovery(store: MemoryDiscoveryStore) -> Discovery:
    return Discovery(Shell("discovery", Settings.load(env={}, models=[MODEL])), store)


async def test_a_retest_request_is_kept_for_its_cycle_once():
    """A RetestRequested delivered twice is one retest of that model's cycle, none of another cycle's."""
    store = MemoryDiscoveryStore()
    d = discovery(store)
    asked = RetestRequested(at=AT, model=MODEL, provider="a/fp8", language="pt", for_cycle_no=12, reason="test")
    await d.remember_retest(asked, DELIVERY)
    await d.remember_retest(asked, DELIVERY)
    assert await d._retests(MODEL, 12) == [("a/fp8", "pt")]
    assert await d._retests(MODEL, 13) == []


async def test_probe_times_measured_by_one_discovery_size_the_next_ones_first_cycle():
    """What one discovery folded and saved, the next one on the same store loads."""
    store = MemoryDiscoveryStore()
    first = discovery(store)
    for _ in range(5):
        first.tally.add("ttft", 1.5, "prober-1")
    first.size(10, {})
    await first.save_times()
    second = discovery(store)
    await second.load_times()
    assert {k: v.mean_s for k, v in second.times.kinds.items()} == {"ttft": 1.5}
    assert second.times.probers == 1
