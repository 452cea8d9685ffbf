"""The notifier's delivery book: one contract, run against every adapter (Redis and memory)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import redis.asyncio as aioredis

from reverie_canary.services.notifier.core import FoldPolicy, FoldState, fold
from reverie_canary.services.notifier.store import BookRecord, MemoryDeliveryBook, Queued, RedisDeliveryBook
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import Notice, make_decision

pytestmark = pytest.mark.integration
AT = datetime(2026, 11, 1, tzinfo=timezone.utc)


@pytest.fixture(params=["redis", "memory"])
async def book(request, infra):
    if request.param == "memory":
        yield MemoryDeliveryBook()
        return
    client = aioredis.from_url(infra.redis_url)
    yield RedisDeliveryBook(client, infra.namespace)
    await client.aclose()


def notice(n: int, severity: str = "critical") -> Notice:
    return Notice(notice_id=f"dec|m/x|p{n}|suspend|{n}", at=AT, severity=severity, action="suspend",  # type: ignore[arg-type]
                  title=f"suspend p{n}")


async def queue(book, *notices: Notice, channels=("hook", "pager"), now: float = 100.0, position: int = 1) -> int:
    record = await book.load()
    return await book.save(BookRecord(state=record.state, position=position, revision=record.revision + 1),
                           expected_revision=record.revision,
                           queued=[Queued(notice=n, channels=list(channels)) for n in notices], now=now)


async def test_a_fresh_book_is_empty(book):
    """Nothing stored: revision 0, position 0, no channels, nothing due."""
    record = await book.load()
    assert (record.revision, record.position, record.state) == (0, 0, FoldState())
    assert await book.channels() == [] and await book.claim("hook", 1e12, 10, 5.0) == []


async def test_state_position_and_entries_are_saved_together(book):
    """A save stores the fold, its position and one pending entry per channel; loading gives them back."""
    state, notices = fold(FoldState(), make_decision(at=AT, decision_id="dec|m/x|p|floor_held|1", model="m/x", provider="p",
                                                action="floor_held"), FoldPolicy())
    created = await book.save(BookRecord(state=state, position=7, revision=1), expected_revision=0,
                              queued=[Queued(notice=notices[0], channels=["hook"])], now=50.0)
    assert created == 1
    assert await book.load() == BookRecord(state=state, position=7, revision=1)
    (entry,) = await book.entries("pending", "hook")
    assert (entry.notice_id, entry.status, entry.attempts, entry.due_at) == (notices[0].notice_id, "pending", 0, 50.0)
    assert await book.notice(notices[0].notice_id) == notices[0]
    assert await book.channels() == ["hook"] and await book.next_due("hook") == 50.0


async def test_a_stale_writer_is_refused(book):
    """Saving over a revision that moved on raises Transient and queues nothing."""
    await queue(book, notice(1))
    with pytest.raises(Transient):
        await book.save(BookRecord(position=9, revision=1), expected_revision=0,
                        queued=[Queued(notice=notice(2), channels=["hook"])], now=1.0)
    assert (await book.load()).position == 1 and await book.entry("hook", notice(2).notice_id) is None


async def test_a_notice_is_queued_once_per_channel(book):
    """Queueing the same notice id again (a redelivered decision) creates no second entry."""
    assert await queue(book, notice(1)) == 2
    assert await queue(book, notice(1), notice(2), position=2) == 2
    assert sorted(e.notice_id for e in await book.entries("pending", "hook")) == [notice(1).notice_id,
                                                                                    notice(2).notice_id]


async def test_claim_leases_due_entries_and_skips_the_rest(book):
    """A claim takes due entries (oldest first) and pushes them a lease ahead; later claims skip them."""
    await queue(book, notice(1), now=10.0)
    await queue(book, notice(2), now=20.0, position=2)
    claimed = await book.claim("hook", 15.0, 10, 30.0)
    assert [(e.notice_id, n.title) for e, n in claimed] == [(notice(1).notice_id, "suspend p1")]
    assert [e.notice_id for e, _ in await book.claim("hook", 25.0, 10, 30.0)] == [notice(2).notice_id]
    assert await book.claim("hook", 40.0, 10, 30.0) == []
    assert [e.notice_id for e, _ in await book.claim("hook", 45.0, 10, 30.0)] == [notice(1).notice_id]


async def test_failure_delivery_and_recent(book):
    """A failure keeps the entry pending with its schedule; a delivery removes it and lists it as recent."""
    await queue(book, notice(1))
    (entry, _), = await book.claim("hook", 100.0, 1, 30.0)
    entry.attempts, entry.first_at = 1, 100.0
    await book.failed(entry, 101.0, 160.0, "HTTP 503 Service Unavailable")
    (stored,) = await book.entries("pending", "hook")
    assert (stored.attempts, stored.first_at, stored.due_at, stored.last_error) == (1, 100.0, 160.0,
                                                                                   "HTTP 503 Service Unavailable")
    assert await book.claim("hook", 150.0, 1, 30.0) == []
    (entry, _), = await book.claim("hook", 160.0, 1, 30.0)
    entry.attempts = 2
    await book.delivered(entry, 161.0)
    assert await book.entries("pending", "hook") == []
    (recent,) = await book.recent()
    assert (recent.notice_id, recent.channel, recent.status, recent.attempts, recent.delivered_at) == (
        notice(1).notice_id, "hook", "delivered", 2, 161.0)
    await book.failed(entry, 170.0, 200.0, "late")  # a stale writer cannot bring a delivered entry back
    assert (await book.entry("hook", notice(1).notice_id)).status == "delivered"


async def test_dead_entries_leave_the_queue_and_requeue_starts_a_fresh_schedule(book):
    """Dead: out of the queue, listed; requeued: pending now, attempts from zero, one more generation."""
    await queue(book, notice(1), notice(2))
    for entry, _ in await book.claim("hook", 100.0, 2, 30.0):
        entry.attempts, entry.first_at = 5, 10.0
        await book.dead(entry, 100.0 + int(entry.notice_id[-1]), "HTTP 410")
    dead = await book.entries("dead", "hook")
    assert [e.notice_id for e in dead] == [notice(2).notice_id, notice(1).notice_id]  # latest first
    assert await book.claim("hook", 1e9, 10, 30.0) == [] and await book.next_due("hook") is None
    again = await book.requeue("hook", notice(1).notice_id, 500.0)
    assert (again.status, again.attempts, again.first_at, again.due_at, again.generation) == (
        "pending", 0, None, 500.0, 1)
    assert await book.requeue("hook", notice(1).notice_id, 501.0) is None  # not dead any more
    assert await book.requeue("pager", "no such notice", 501.0) is None
    assert [e.notice_id for e, _ in await book.claim("hook", 500.0, 10, 30.0)] == [notice(1).notice_id]


async def test_a_released_claim_is_due_again_at_once(book):
    """A notifier that stops mid-attempt gives its claim back: the entry is due as it was, not after the lease."""
    await queue(book, notice(1), channels=["hook"], now=100.0)
    (entry, _), = await book.claim("hook", 100.0, 1, 30.0)
    assert entry.due_at == 100.0
    await book.release(entry, entry.due_at)
    assert [e.notice_id for e, _ in await book.claim("hook", 101.0, 1, 30.0)] == [notice(1).notice_id]


async def test_expedite_makes_waiting_entries_due_now(book):
    """When a channel answers again, every entry waiting for a later attempt becomes due at once."""
    await queue(book, notice(1), notice(2), channels=["hook"])
    for entry, _ in await book.claim("hook", 100.0, 2, 30.0):
        entry.attempts, entry.first_at = 3, 100.0
        await book.failed(entry, 100.0, 700.0, "ConnectError")
    assert await book.expedite("hook", 200.0) == 2
    assert len(await book.claim("hook", 200.0, 10, 30.0)) == 2


async def test_the_redis_book_keeps_what_the_log_keeps_not_a_fixed_35_days(infra):
    """keep_s (the log's age): delivered entries and notices expire after it; a dead id that old leaves its set.

    The soak found it (benchmarks/soak.py): with the log's age scaled down, the book kept every
    notice for 35 days and grew by two keys a notice for the whole run.
    """
    client = aioredis.from_url(infra.redis_url)
    try:
        book = RedisDeliveryBook(client, infra.namespace, keep_s=50)
        await queue(book, notice(1), notice(2), notice(3), channels=("hook",))
        prefix = f"{infra.namespace}:notifier:"
        assert 0 < await client.ttl(prefix + "notice:" + notice(1).notice_id) <= 50
        claimed = {e.notice_id: e for e, _ in await book.claim("hook", 100.0, 3, 30.0)}
        first, second, third = (claimed[notice(n).notice_id] for n in (1, 2, 3))
        await book.delivered(first, 101.0)
        assert 0 < await client.ttl(prefix + "entry:hook:" + first.notice_id) <= 50
        assert 0 < await client.ttl(prefix + "notice:" + first.notice_id) <= 50
        await book.dead(second, 100.0, "HTTP 410")
        assert 0 < await client.ttl(prefix + "entry:hook:" + second.notice_id) <= 50
        await book.dead(third, 200.0, "HTTP 410")  # 100 s later: the first dead id is past keep_s
        assert [m.decode() for m in await client.zrange(prefix + "dead:hook", 0, -1)] == [third.notice_id]
    finally:
        await client.aclose()
