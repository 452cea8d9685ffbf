"""Discovery's probe times on a real Redis, as its own ACL user: a restarted discovery sizes on what was measured.

Before, the measurements lived in memory only and a restarted discovery sized
its first cycle on the prior with every prober at its ceiling.  Now each
cycle's fold is written to ``<ns>:discovery:probe-times``; the next discovery
reads it at start.  A value that is not a ``ProbeTimes``, one above the bound,
and a Redis that refuses the key (an ACL file rendered before it existed)
leave the prior, with a warning, and never stop discovery.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import redis.asyncio as aioredis
from structlog.testing import capture_logs

from reverie_canary.canary.embedded import start_redis
from reverie_canary.services.discovery import store as discovery_store
from reverie_canary.services.discovery.core import plan
from reverie_canary.services.discovery.service import Discovery
from reverie_canary.services.discovery.store import RedisDiscoveryStore
from reverie_canary.shared.contract.events import PROBE_KINDS, Endpoint
from reverie_canary.shared.runtime.auth import generate_redis_passwords, redis_url_for, render_redis_acl
from reverie_canary.shared.runtime.service import Shell
from reverie_canary.shared.runtime.settings import LANGUAGES, Settings

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"
START = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
ENDPOINTS = [Endpoint(provider=f"p{i}/fp8", provider_name=f"P{i}") for i in range(6)]
#: Seconds each kind held its prober in the measured cycle (5 results each: MIN_SAMPLES).
HELD_S = {"ttft": 1.2, "refusal": 2.0, "structured": 2.5, "language": 4.0, "echo": 0.8, "tools": 1.5}


@pytest.fixture
def acl_redis(tmp_path):
    """A redis-server running the rendered ACL of one namespace; yields (server, passwords, namespace)."""
    passwords = generate_redis_passwords()
    namespace = "ptimes"
    server = start_redis(tmp_path / "redis", acl=render_redis_acl(passwords, namespace))
    try:
        yield server, passwords, namespace
    finally:
        server.stop()


def discovery_as(server, passwords, namespace: str, user: str = "discovery") -> Discovery:
    settings = Settings.load(env={}, redis_url=redis_url_for(server.url, user, passwords[user]),
                             namespace=namespace, models=[MODEL], prober_concurrency=64)
    d = Discovery(Shell("discovery", settings))
    d.store = RedisDiscoveryStore(aioredis.from_url(settings.redis_url, driver_info=None), namespace)
    return d


def planned(cycle_no: int):
    event, tasks = plan(model=MODEL, cycle_no=cycle_no, start=START, window_s=600, endpoints=ENDPOINTS,
                        kinds=PROBE_KINDS, languages=list(LANGUAGES), language_coverage_cycles=9, controls={},
                        retests=[], max_retests=4)
    return {MODEL: (event, tasks)}


async def test_a_restarted_discovery_sizes_its_first_cycle_on_the_times_measured_before(acl_redis):
    first = discovery_as(*acl_redis)
    second = discovery_as(*acl_redis)
    try:
        assert first.size(10, planned(10)).basis == "prior"  # nothing measured yet
        for kind, held in HELD_S.items():
            for i in range(5):
                first.tally.add(kind, held, f"prober-{i % 2}")
        before = first.size(11, planned(11))
        await first.save_times()
        assert before.basis == "measured" and before.probers == 2

        with capture_logs() as logs:
            await second.load_times()
        after = second.size(11, planned(11))
    finally:
        await first.store.client.aclose()
        await second.store.client.aclose()
    assert {k: v.mean_s for k, v in second.times.kinds.items()} == pytest.approx(HELD_S)
    assert second.times.probers == 2
    # the same sizing as the discovery that measured them: not the prior, not every prober at its ceiling
    assert (after.basis, after.per_prober, after.in_flight, after.probe_s) == \
           (before.basis, before.per_prober, before.in_flight, before.probe_s)
    assert after.per_prober < 64
    assert [e["event"] for e in logs] == ["probe_times_loaded"]


@pytest.mark.parametrize("stored", [b"not json", b'{"kinds": {"ttft": {"mean_s": "slow"}}}',
                                    b'{"kinds": {}, "pad": "' + b"x" * discovery_store.MAX_TIMES_BYTES + b'"}'],
                         ids=["not-json", "wrong-type", "above-the-bound"])
async def test_an_unreadable_stored_value_leaves_the_prior_with_a_warning(acl_redis, stored):
    server, passwords, namespace = acl_redis
    admin = aioredis.from_url(redis_url_for(server.url, "admin", passwords["admin"]), driver_info=None)
    d = discovery_as(*acl_redis)
    try:
        await admin.set(f"{namespace}:discovery:probe-times", stored)
        with capture_logs() as logs:
            await d.load_times()
        sized = d.size(10, planned(10))
    finally:
        await admin.aclose()
        await d.store.client.aclose()
    assert sized.basis == "prior" and sized.per_prober == 64
    [warning] = logs
    assert warning["event"] == "probe_times_unreadable" and warning["log_level"] == "warning"


async def test_a_kind_with_an_impossible_mean_is_dropped_and_the_rest_kept(acl_redis):
    server, passwords, namespace = acl_redis
    admin = aioredis.from_url(redis_url_for(server.url, "admin", passwords["admin"]), driver_info=None)
    d = discovery_as(*acl_redis)
    try:
        await admin.set(f"{namespace}:discovery:probe-times",
                        b'{"kinds": {"ttft": {"mean_s": 1.5, "samples": 5}, "echo": {"mean_s": -2, "samples": 5},'
                        b' "refusal": {"mean_s": 0, "samples": 5}}, "probers": 3}')
        await d.load_times()
    finally:
        await admin.aclose()
        await d.store.client.aclose()
    assert {k: v.mean_s for k, v in d.times.kinds.items()} == {"ttft": 1.5}
    assert d.times.probers == 3


async def test_a_redis_that_refuses_the_key_leaves_the_prior_and_discovery_runs_on(acl_redis):
    """As another service's user (or under an ACL file from before the key): NOPERM is a warning, not a stop."""
    d = discovery_as(*acl_redis, user="router")
    try:
        with capture_logs() as logs:
            await d.load_times()
            for kind, held in HELD_S.items():
                for _i in range(5):
                    d.tally.add(kind, held, "prober-0")
            sized = d.size(11, planned(11))
            await d.save_times()
    finally:
        await d.store.client.aclose()
    assert sized.basis == "measured"  # measured in memory all the same
    assert [(e["event"], e["log_level"]) for e in logs] == [("probe_times_unavailable", "warning"),
                                                          ("probe_times_not_saved", "warning")]
