"""The judge service's exactly-once: real Redis store, real NATS publishing, crashes and duplicates."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.services.judge.service import Judge
from reverie_canary.services.judge.store import RedisJudgeStore
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import CycleClosed, Decision
from reverie_canary.shared.runtime.broker import Publisher, make_broker
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from tests.judge_events import MODEL, cycle_events, healthy

pytestmark = pytest.mark.integration
FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8")
POLICY = Policy(mode="enforce")


def failing_log():
    out = healthy(*FLEET)
    out["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    return cycle_events(0, out) + cycle_events(1, out)


class CrashOnce(Publisher):
    """The real publisher, except that the first publish after ``arm()`` dies (a crash after the save)."""

    armed = False

    async def publish(self, event, subject, msg_id, stream):
        if self.armed:
            self.armed = False
            raise Transient("simulated crash between save and publish")
        return await super().publish(event, subject, msg_id, stream)


@pytest.fixture
async def parts(infra):
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url)
    await ensure_streams(settings)
    broker = make_broker(settings, "judge")
    await broker.connect()
    client = aioredis.from_url(infra.redis_url)
    publisher = CrashOnce(broker, "judge")
    store = RedisJudgeStore(client, infra.namespace)
    yield Judge(store, publisher, POLICY, [MODEL]), store, publisher, broker
    await client.aclose()
    await broker.stop()


async def stored_decisions(broker) -> list[str]:
    js = broker._connection.jetstream()  # noqa: SLF001 - test reads the log directly
    from reverie_canary.services.judge.replay import read_log

    logged = await read_log(js, judge_only=False)
    return [e.event.decision_id for e in logged if isinstance(e.event, Decision)]


async def test_a_crash_between_save_and_publish_is_repaired_by_redelivery(parts):
    """Save done, publish lost: the redelivered message re-publishes the saved outbox, once in the log."""
    judge, store, publisher, broker = parts
    events = failing_log()
    for seq, event in enumerate(events, 1):
        if isinstance(event, CycleClosed) and event.cycle_no == 1:
            publisher.armed = True
            with pytest.raises(Transient):
                await judge.apply_to(MODEL, event, seq)
            assert (await store.load(MODEL)).position == seq  # the state was saved
            await judge.apply_to(MODEL, event, seq)  # redelivery
            await judge.apply_to(MODEL, event, seq)  # and once more: still nothing new
        else:
            await judge.apply_to(MODEL, event, seq)
    decisions = await stored_decisions(broker)
    assert decisions.count(f"dec|{MODEL}|a/fp8|suspend|1") == 1
    expected, _ = fold(events, POLICY)
    assert (await store.load(MODEL)).state == expected[MODEL]


async def test_the_same_event_published_twice_changes_nothing(parts):
    """A ProbeResult and a CycleClosed arriving again under new stream positions: same state, no new decision."""
    judge, store, _, broker = parts
    events = failing_log()
    seq = 0
    for event in events:
        seq += 1
        await judge.apply_to(MODEL, event, seq)
    before = await store.load(MODEL)
    published_before = await stored_decisions(broker)
    for event in (events[1], events[-1]):  # a result and the last close, again
        seq += 1
        effects = await judge.apply_to(MODEL, event, seq)
        assert effects == []
    after = await store.load(MODEL)
    assert after.state == before.state
    assert await stored_decisions(broker) == published_before
    assert published_before.count(f"dec|{MODEL}|a/fp8|suspend|1") == 1


async def test_positions_already_applied_are_skipped(parts):
    """A stale redelivery (position below the stored one) neither changes state nor publishes."""
    judge, store, _, broker = parts
    events = failing_log()
    for seq, event in enumerate(events, 1):
        await judge.apply_to(MODEL, event, seq)
    record = await store.load(MODEL)
    assert await judge.apply_to(MODEL, events[3], 4) == []
    assert (await store.load(MODEL)) == record
