"""Notifier service: fold the log into notices, deliver each to each channel once, on its own schedule.

Two halves, apart so that a down channel never holds anything up:

- **Folding** (durable ``notifier-v4``, one message at a time, in log order):
  decisions, cycle verdicts, ignore-list versions and the answers to operator
  commands (``CommandApplied`` / ``CommandRefused``) are
  folded by :func:`reverie_canary.services.notifier.core.fold`; the new state,
  the stream position and the notices, with one pending delivery entry per
  channel that wants them, are saved in one compare-and-set
  (:mod:`reverie_canary.services.notifier.store`).  Every notice is also one
  ``notice`` log line.
- **Delivery** (one loop per channel): take the entries due now, try them
  (a few at a time), record the outcome.  A failure is tried again at
  :func:`reverie_canary.services.notifier.core.next_attempt` (exponential
  backoff, full jitter, stored due times: a restart keeps the schedule); a
  notice still failing after ``notify_give_up_s`` goes to
  ``canary.notices.dead.<channel>`` with its error.  When a failing channel
  answers again, its waiting notices are made due at once.

``canary notices resend`` publishes a ``ResendNotices`` (durable
``notifier-resend-v1``): the named dead letters become pending again and go
through the same schedule, signing and exactly-once book; the answer is a
``NoticesResent`` on ``canary.notices.resent``.

Counts per channel (``delivered``, ``failed``, ``dead_lettered``) are in
:attr:`Notifier.counts` and in the ``canary_notices_total`` counter.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any

import httpx
from faststream import FastStream
from nats.errors import Error as NatsError
from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError

from reverie_canary.services.notifier.channels import Channel, DeliveryFailed, mask_all, open_channels
from reverie_canary.services.notifier.core import (
    FoldPolicy,
    FoldState,
    Schedule,
    fold,
    next_attempt,
    wants,
    webhook_id,
)
from reverie_canary.services.notifier.store import BookRecord, DeliveryBook, Entry, Queued, RedisDeliveryBook
from reverie_canary.shared.contract import codec, inputs, subjects
from reverie_canary.shared.contract.commands import ResendNotices
from reverie_canary.shared.contract.errors import ConfigError, Transient
from reverie_canary.shared.contract.events import (
    NOTICE_CHANNELS_MAX,
    NOTICES_RESENT_MAX,
    Notice,
    NoticeDeadLettered,
    NoticeRef,
    NoticesResent,
)
from reverie_canary.shared.runtime import eventlog, metrics, streams
from reverie_canary.shared.runtime.aio import wait_event
from reverie_canary.shared.runtime.broker import Delivery, Publisher
from reverie_canary.shared.runtime.config import NotifierConfig, RuntimeConfig, StreamsConfig, config_of
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.service import Shell, redis_client
from reverie_canary.shared.runtime.settings import SEVERITIES, Settings

NOTIFIER_INPUT = inputs.decoder("notifier")
#: A claimed entry is someone else's for the attempt's timeout plus this margin (seconds); a
#: notifier that stops gives its claims back at once, one that dies leaves them for this long.
LEASE_MARGIN_S = 5.0
#: Dead letters looked at to resolve a ``msg_…`` webhook id, per channel.
RESOLVE_LIMIT = 1000


def _count(channel: str, outcome: str, severity: str) -> None:
    """One delivery outcome in ``canary_notices_total{channel, outcome, severity}``."""
    metrics.of("notifier").inc("notices", channel=channel, outcome=outcome, severity=severity)


def schedule_of(settings: Settings) -> Schedule:
    """The delivery schedule in the settings (through the notifier's config)."""
    config = config_of(settings, NotifierConfig)
    return Schedule(base_s=config.notify_retry_base_s, max_delay_s=config.notify_retry_max_s,
                    give_up_s=config.notify_give_up_s)


async def refold_log(js: Any, policy: FoldPolicy, until_seq: int) -> FoldState:
    """The notifier's fold of the log's notifier inputs up to stream sequence ``until_seq``, notices dropped.

    The same pure :func:`~reverie_canary.services.notifier.core.fold` the service applies
    message by message, over what the log still holds (retention may have dropped its
    oldest messages: the fold starts at the first one left).
    """
    state = FoldState()

    def on_event(item: eventlog.LoggedEvent) -> None:
        nonlocal state
        state, _ = fold(state, item.event, policy)

    await eventlog.scan_log(js, on_event, prefixes=inputs.prefixes("notifier"), until_seq=until_seq)
    return state


class Notifier:
    """The notifier's shell: fold and queue (``apply``), deliver (``run_channel``), resend (``resend``).

    Args:
        book: the delivery book.
        channels: the configured channels, with senders.
        publisher: publishes dead letters and resend answers.
        policy, schedule: from the settings.
        now: the clock (epoch seconds); ``jitter``: uniform in [0, 1).
        namespace: the deployment's (``Settings.namespace``): resolves ``msg_…`` webhook ids.
        rebuild: folds the log up to a stream sequence into the notifier's state
            (:func:`refold_log`); used when the book is empty but the log was already
            consumed (Redis lost or flushed), so that a state held before the loss keeps
            its reminders and its end instead of being told again as new.  ``None``: an
            empty book starts from an empty state.
        consumed_before: whether the notifier's durable consumer folded messages before
            (:func:`consumed_before`: it acknowledged some, or took over an older durable's
            position); asked only when the book is empty.  An empty book and a consumer that
            never acknowledged anything is a new deployment, not a lost book: its first
            message is past the log's first (other services publish before it) and there is
            nothing to rebuild.  ``None``: an empty book is never taken for a lost one.
    """

    def __init__(self, book: DeliveryBook, channels: list[Channel], publisher: Publisher | None, policy: FoldPolicy,
                 schedule: Schedule, *, concurrency: int = 4, timeout_s: float = 10.0, poll_s: float = 1.0,
                 now: Callable[[], float] = time.time, jitter: Callable[[], float] = random.random,
                 namespace: str = "canary", rebuild: Callable[[int], Awaitable[FoldState]] | None = None,
                 consumed_before: Callable[[], Awaitable[bool]] | None = None) -> None:
        self.book = book
        self.rebuild = rebuild
        self.consumed_before = consumed_before
        self.namespace = namespace
        self.channels = channels
        self.publisher = publisher
        self.policy = policy
        self.schedule = schedule
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.now = now
        self.jitter = jitter
        self.log = get_logger("notifier")
        self.counts: dict[str, Counter[str]] = {ch.name: Counter() for ch in channels}
        self.failing_since: dict[str, float] = {}
        self._wake = {ch.name: asyncio.Event() for ch in channels}
        self._record: BookRecord | None = None  # the last record this replica saved (the CAS guards it)

    # -- folding --------------------------------------------------------------------------

    async def apply(self, event, delivery: Delivery) -> list[Notice]:
        """Fold one log message; queue its notices on the channels that want them.

        Returns:
            The notices the event gave (empty for a redelivery already folded).

        Raises:
            Transient: the book is unreachable or another replica saved first.
        """
        seq = delivery.stream_seq
        record = self._record if self._record is not None else await self._load(seq)
        if seq is not None and seq <= record.position:
            return []  # folded already, together with its notices
        state, notices = fold(record.state, event, self.policy)
        if state is record.state and not notices and record.revision > 0:
            return []  # a message that changes nothing; the first one is saved all the same: a book that
            # exists is what tells a later empty one (Redis lost) from a new deployment's
        queued = [Queued(notice=n, channels=[c.name for c in self.channels if wants(c.min_severity, n.severity)])
                  for n in notices]
        new = BookRecord(state=state, position=seq if seq is not None else record.position,
                         revision=record.revision + 1)
        try:
            created = await self.book.save(new, expected_revision=record.revision, queued=queued, now=self.now())
        except Transient:
            self._record = None  # another replica saved, or Redis is away: read it again on redelivery
            raise
        self._record = new
        for q in queued:
            n = q.notice
            self.log.info("notice", notice_id=n.notice_id, severity=n.severity, action=n.action, phase=n.phase,
                          model=n.model, provider=n.provider or None, message=n.text, channels=q.channels,
                          **({"repeated": True} if q.channels and not created else {}))
        for q in queued:
            for name in q.channels:
                self._wake[name].set()
        return notices

    async def _load(self, seq: int | None) -> BookRecord:
        """The stored record; an empty one with the log's earlier messages folded in when the book was lost.

        Revision 0 while the durable consumer had already folded messages (``consumed_before``:
        it acknowledged some, every one of which saved the book) means the book is gone (Redis
        restarted empty, flushed) while the durable kept its position: the state is rebuilt
        from the log up to the message before, its notices dropped (they were queued before
        the loss), and saved with the next message's notices.  Revision 0 and a consumer that
        never acknowledged anything is a new deployment: an empty state, no warning, whatever
        the message's position in the log.
        """
        record = await self.book.load()
        if (record.revision == 0 and self.rebuild is not None and seq is not None and seq > 1
                and self.consumed_before is not None and await self.consumed_before()):
            state = await self.rebuild(seq - 1)
            self.log.warning("book_rebuilt_from_log", position=seq - 1, held=len(state.held),
                             reason="no book in Redis, but the log was already consumed")
            record = BookRecord(state=state, position=seq - 1, revision=0)
        return record

    # -- delivery ---------------------------------------------------------------------------

    def _channel(self, name: str) -> Channel | None:
        return next((c for c in self.channels if c.name == name), None)

    async def run_channel(self, channel: Channel) -> None:
        """Deliver ``channel``'s due notices for the life of the service."""
        wake = self._wake[channel.name]
        while True:
            wake.clear()
            try:
                if await self.deliver_due(channel):
                    continue
                nxt = await self.book.next_due(channel.name)
            except Transient as exc:
                self.log.warning("delivery_book_unavailable", channel=channel.name, error=str(exc))
                nxt = None
            wait = self.poll_s if nxt is None else min(self.poll_s, max(0.0, nxt - self.now()))
            if wait > 0:
                await wait_event(wake, wait)  # not asyncio.wait_for: on 3.11 it can swallow the stop's cancellation

    async def run(self) -> None:
        """Every channel's delivery loop, side by side (none waits for another)."""
        if self.channels:
            await asyncio.gather(*(self.run_channel(ch) for ch in self.channels))

    async def deliver_due(self, channel: Channel) -> int:
        """Try the entries of ``channel`` due now, up to ``concurrency`` at once; returns how many.

        While the channel is failing, one attempt at a time: a down receiver
        is probed, not hammered (and a hung one holds one connection, not many).
        """
        limit = 1 if channel.name in self.failing_since else self.concurrency
        claimed = await self.book.claim(channel.name, self.now(), limit, self.timeout_s + LEASE_MARGIN_S)
        if claimed:
            await asyncio.gather(*(self._attempt(channel, entry, notice) for entry, notice in claimed))
        return len(claimed)

    async def _attempt(self, channel: Channel, entry: Entry, notice: Notice | None) -> None:
        due_before = entry.due_at
        try:
            await self._try(channel, entry, notice)
        except asyncio.CancelledError:  # stopping: the attempt did not happen, the entry is due as it was
            with contextlib.suppress(Transient, asyncio.CancelledError):
                await self.book.release(entry, due_before)
            raise

    async def _try(self, channel: Channel, entry: Entry, notice: Notice | None) -> None:
        started = self.now()
        entry.attempts += 1
        entry.first_at = entry.first_at if entry.first_at is not None else started
        if notice is None:
            await self._dead(channel, entry, None, "the notice's content is gone from the book")
            return
        try:
            await channel.sender.send(notice)
        except DeliveryFailed as exc:
            error = str(exc)
        except Exception as exc:  # a bug in a sender: never lose the notice, say what it was
            error = mask_all(self.channels, f"{type(exc).__name__}: {exc}")[:500]
            self.log.error("notice_sender_error", channel=channel.name, notice_id=entry.notice_id, error=error)
        else:
            now = self.now()
            await self.book.delivered(entry, now)
            self.counts[channel.name]["delivered"] += 1
            _count(channel.name, "delivered", notice.severity)
            self.log.info("notice_delivered", channel=channel.name, notice_id=entry.notice_id,
                          attempts=entry.attempts, generation=entry.generation)
            since = self.failing_since.pop(channel.name, None)
            if since is not None:
                moved = await self.book.expedite(channel.name, now)
                self.log.info("channel_recovered", channel=channel.name, down_s=round(now - since, 1),
                              waiting_notices=moved)
                self._wake[channel.name].set()
            return
        now = self.now()
        self.counts[channel.name]["failed"] += 1
        _count(channel.name, "failed", notice.severity)
        if channel.name not in self.failing_since:
            self.failing_since[channel.name] = now
            self.log.warning("channel_failing", channel=channel.name, error=error, notice_id=entry.notice_id,
                             retry="exponential backoff with full jitter", give_up_after_s=self.schedule.give_up_s)
        due = next_attempt(self.schedule, entry.attempts, entry.first_at, now, self.jitter())
        if due is None:
            await self._dead(channel, entry, notice, error)
        else:
            await self.book.failed(entry, now, due, error)

    async def _dead(self, channel: Channel, entry: Entry, notice: Notice | None, error: str) -> None:
        now = self.now()
        if notice is not None and self.publisher is not None:
            letter = NoticeDeadLettered(
                at=datetime.fromtimestamp(now, timezone.utc), notice=notice, channel=channel.name,
                attempts=entry.attempts, error=error[:4000], generation=entry.generation,
                first_attempt_at=datetime.fromtimestamp(entry.first_at or now, timezone.utc))
            try:
                await self.publisher.publish(letter, subjects.notice_dead(channel.name),
                                             f"ndl|{channel.name}|{entry.notice_id}|{entry.generation}", streams.NOTICES)
            except Transient as exc:  # not recorded: keep it pending and try again shortly
                self.log.warning("dead_letter_not_published", channel=channel.name, notice_id=entry.notice_id,
                                 error=str(exc))
                await self.book.failed(entry, now, now + self.schedule.base_s, error)
                return
        await self.book.dead(entry, now, error)
        self.counts[channel.name]["dead_lettered"] += 1
        _count(channel.name, "dead_lettered", notice.severity if notice is not None else "")
        self.log.error("notice_dead_lettered", channel=channel.name, notice_id=entry.notice_id,
                       attempts=entry.attempts, error=error, resend="canary notices resend")

    # -- resend -------------------------------------------------------------------------------

    async def _resolve(self, ident: str, names: list[str]) -> str:
        """A notice id from a notice id or a ``msg_…`` webhook id (found among dead letters)."""
        if not ident.startswith("msg_"):
            return ident
        for name in names:
            for e in await self.book.entries("dead", channel=name, limit=RESOLVE_LIMIT):
                if webhook_id(self.namespace, e.notice_id) == ident:
                    return e.notice_id
        for e in await self.book.recent(200):
            if webhook_id(self.namespace, e.notice_id) == ident:
                return e.notice_id
        return ident

    async def resend(self, cmd: ResendNotices, delivery: Delivery | None = None) -> NoticesResent:
        """Make the named (or all) dead letters pending again; publish and return the answer.

        A ``channel`` the notifier does not know (neither configured nor in the
        book) is refused: the answer's ``refused`` says so and ``channels`` names
        the known ones.  Idempotent: a redelivered command finds its entries pending or
        delivered and requeues nothing more.
        """
        configured = [c.name for c in self.channels]
        known = sorted(set(configured) | set(await self.book.channels()))
        now = self.now()
        if cmd.channel and cmd.channel not in known:  # a typo must not read as "nothing to resend"
            refused = (f"unknown channel {cmd.channel!r}: the notifier knows "
                       f"{', '.join(known[:NOTICE_CHANNELS_MAX]) if known else 'no channel (none configured)'}")
            return await self._answer(cmd, NoticesResent(at=datetime.fromtimestamp(now, timezone.utc),
                                                         command_id=cmd.command_id, refused=refused[:400],
                                                         channels=known[:NOTICE_CHANNELS_MAX]))
        names = [cmd.channel] if cmd.channel else known
        requeued: list[NoticeRef] = []
        skipped: list[NoticeRef] = []
        targets: list[tuple[str, str]] = []
        if cmd.all:
            for name in names:
                targets += [(name, e.notice_id) for e in await self.book.entries("dead", channel=name, limit=1000)]
        for ident in cmd.notice_ids:
            nid = await self._resolve(ident, names)
            found = [(name, nid) for name in names if await self.book.entry(name, nid) is not None]
            if not found:
                skipped.append(NoticeRef(notice_id=ident, channel=cmd.channel or "*", why="no such notice"))
            targets += [t for t in found if t not in targets]
        for name, nid in targets:
            entry = await self.book.entry(name, nid)
            if name not in configured:
                skipped.append(NoticeRef(notice_id=nid, channel=name, why="channel not configured"))
            elif entry is None:
                skipped.append(NoticeRef(notice_id=nid, channel=name, why="no such notice"))
            elif entry.status == "delivered":
                skipped.append(NoticeRef(notice_id=nid, channel=name, why="already delivered"))
            elif entry.status == "pending":
                skipped.append(NoticeRef(notice_id=nid, channel=name, why=f"still being tried ({entry.attempts} "
                                                                            "attempt(s) so far)"))
            elif await self.book.requeue(name, nid, now) is not None:
                requeued.append(NoticeRef(notice_id=nid, channel=name))
                self._wake[name].set()
        answer = NoticesResent(at=datetime.fromtimestamp(now, timezone.utc), command_id=cmd.command_id,
                               requeued=requeued[:NOTICES_RESENT_MAX], skipped=skipped[:NOTICES_RESENT_MAX],
                               channels=known[:NOTICE_CHANNELS_MAX])
        return await self._answer(cmd, answer, skipped=len(skipped), requeued=len(requeued))

    async def _answer(self, cmd: ResendNotices, answer: NoticesResent, **counts: int) -> NoticesResent:
        """Log and publish the answer to ``cmd`` (``resent|<command id>``: a redelivery answers once)."""
        self.log.info("notices_resend", command_id=cmd.command_id, actor=cmd.actor, channel=cmd.channel,
                      **counts, **({"refused": answer.refused} if answer.refused else {}))
        if self.publisher is not None:
            await self.publisher.publish(answer, subjects.NOTICES_RESENT, f"resent|{cmd.command_id}", streams.NOTICES)
        return answer


async def consumed_before(js: Any, durable: str) -> bool:
    """Whether the notifier's durable ``durable`` on the log folded messages before this start.

    True when it acknowledged any message (its ack floor's consumer sequence: the stream
    sequence of a new durable that delivers new messages only is the stream's last one
    from the start, before it delivered anything), or when it was made to start
    where an older durable stopped (:func:`prepare`: deliver by start sequence past the
    log's first message).  A durable that does not exist has folded nothing.

    Raises:
        Transient: NATS did not answer within 5 s (the message is delivered again).
    """
    try:
        info = await asyncio.wait_for(js.consumer_info(streams.LOG, durable), timeout=5.0)
    except NotFoundError:
        return False
    except (TimeoutError, NatsError) as exc:
        raise Transient(f"consumer info of {durable} on {streams.LOG}: {type(exc).__name__}: {exc}") from exc
    if info.ack_floor is not None and (info.ack_floor.consumer_seq or 0) > 0:
        return True  # the consumer sequence: a durable that starts with new messages has a stream ack floor at once
    config = info.config
    return bool(config is not None and config.deliver_policy == DeliverPolicy.BY_START_SEQUENCE
                and (config.opt_start_seq or 0) > 1)


async def prepare(js: Any, settings: Settings) -> None:
    """Check the notices stream exists; let the notifier's durable take over an older one's position.

    An older notifier durable (``streams.NOTIFIER_PREVIOUS_DURABLES``) is
    replaced by a new one that starts right after the last message the old
    one acknowledged, so an upgrade neither loses nor repeats notices.

    Raises:
        ConfigError: the ``CANARY_NOTICES`` stream does not exist (run ``canary init``).
    """
    log = get_logger("notifier")
    try:
        await js.stream_info(streams.NOTICES)
    except NotFoundError as exc:
        raise ConfigError(f"stream {streams.NOTICES} does not exist: run `canary init` (admin credential)") from exc
    spec = streams.notifier_consumer(settings)
    try:
        await js.consumer_info(streams.LOG, spec.durable)
        return
    except NotFoundError:
        pass
    for old in streams.NOTIFIER_PREVIOUS_DURABLES:
        try:
            info = await js.consumer_info(streams.LOG, old)
        except NotFoundError:
            continue
        start = (info.ack_floor.stream_seq if info.ack_floor else 0) + 1
        config = spec.config()
        config.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
        config.opt_start_seq = start
        await js.add_consumer(streams.LOG, config)
        await js.delete_consumer(streams.LOG, old)
        log.warning("consumer_migrated", old=old, new=spec.durable, start_seq=start)
        return


def create_app(settings: Settings | None = None) -> FastStream:
    """The notifier's FastStream app.

    Raises:
        ConfigError: a channel is misconfigured (named, its URL never printed).
    """
    settings = settings or Settings.load()
    shell = Shell("notifier", settings)
    wiring = NotifierWiring(shell, settings)
    shell.on_startup(wiring.open)
    shell.on_shutdown(wiring.close)
    shell.consume(streams.notifier_consumer(settings), NOTIFIER_INPUT, wiring.apply)
    shell.consume(streams.notifier_resend_consumer(settings), codec.RESEND, wiring.resend)
    shell.background(wiring.deliver)
    shell.app.notifier = wiring  # type: ignore[attr-defined]  # tests and the demo read the counts here
    return shell.app


class NotifierWiring:
    """The notifier's channels and delivery book, opened at start and closed at the stop."""

    def __init__(self, shell: Shell, settings: Settings) -> None:
        self.shell = shell
        self.settings = settings
        self.http = httpx.AsyncClient(follow_redirects=False)
        self.channels = open_channels(settings, self.http)
        self.redis: Any = None
        self._notifier: Notifier | None = None

    @property
    def notifier(self) -> Notifier:
        if self._notifier is None:
            raise Transient("the notifier has not started")
        return self._notifier

    async def open(self) -> None:
        shell, settings = self.shell, self.settings
        await prepare(shell.connection.jetstream(), settings)
        self.redis = redis_client(settings)
        config = config_of(settings, NotifierConfig)
        namespace = config_of(settings, RuntimeConfig).namespace
        policy = FoldPolicy(remind_every_s=config.notify_remind_s)
        durable = streams.notifier_consumer(settings).durable
        self._notifier = Notifier(
            RedisDeliveryBook(self.redis, namespace, keep_s=config_of(settings, StreamsConfig).log_max_age_s),
            self.channels, shell.publisher, policy, schedule_of(settings),
            concurrency=config.notify_concurrency, timeout_s=config.notify_timeout_s, poll_s=config.notify_poll_s,
            namespace=namespace, rebuild=lambda until: refold_log(shell.connection.jetstream(), policy, until),
            consumed_before=lambda: consumed_before(shell.connection.jetstream(), durable))
        shell.log.info("notifier_channels", channels=[c.describe() for c in self.channels] or
                       "none: notices are only logged (set CANARY_NOTIFY_URLS or CANARY_WEBHOOK_URL)")
        for channel in self.channels:  # every channel's series exist from the start, for rates and alerts
            for severity in SEVERITIES:
                for outcome in ("delivered", "failed", "dead_lettered"):
                    shell.metrics.touch("notices", channel=channel.name, outcome=outcome, severity=severity)

    async def close(self) -> None:
        await self.http.aclose()
        if self.redis is not None:
            await self.redis.aclose()

    async def apply(self, event: Any, delivery: Delivery) -> None:
        await self.notifier.apply(event, delivery)

    async def resend(self, cmd: ResendNotices, delivery: Delivery) -> None:
        await self.notifier.resend(cmd, delivery)

    async def deliver(self) -> None:
        await self.notifier.run()
