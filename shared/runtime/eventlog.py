"""Reading the event log (``CANARY_LOG``) back, in stream order.

Audits (``canary replay``) and the services' recovery from a lost Redis both
fold the log again: a service's Redis state is a cache of a fold over the log,
so when it is gone and the service's durable consumer has already moved on,
the state is rebuilt from the log up to the consumer's acknowledged position
(docs/concepts/messages.md, "Subjects": the log keeps at least 30 days).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.errors import Rejected, Transient, Undecodable
from reverie_canary.shared.runtime.retry import NATS_FAULTS
from reverie_canary.shared.runtime.streams import LOG


@dataclass(frozen=True)
class LoggedEvent:
    """One decoded event of the log and its stream sequence."""

    seq: int
    subject: str
    event: Any


def prefixes_of(filters: list[str]) -> tuple[str, ...]:
    """Subject prefixes of consumer filters like ``canary.results.>``."""
    return tuple(f.removesuffix(">") for f in filters)


async def read_log(js: JetStreamContext, *, prefixes: tuple[str, ...] | None = None, since: datetime | None = None,
                   until_seq: int | None = None, idle_s: float = 2.0, dense: bool = False) -> list[LoggedEvent]:
    """Read ``CANARY_LOG`` in order with an ordered consumer.

    Args:
        js: a JetStream context.
        prefixes: keep only subjects starting with one of these (default: all).
        since: start at this UTC time (default: the beginning).
        until_seq: stop after this stream sequence (default: the last at start).
        idle_s: give up when nothing arrived for this many seconds.
        dense: ``prefixes`` match most of the log (:func:`scan_log`).

    Returns:
        Decoded events in stream order; undecodable ones and ones on a subject
        they do not belong on are skipped (the services refused them too).
    """
    out: list[LoggedEvent] = []
    await scan_log(js, out.append, prefixes=prefixes, since=since, until_seq=until_seq, idle_s=idle_s, dense=dense)
    return out


async def scan_log(js: JetStreamContext, on_event: Callable[[LoggedEvent], None], *,
                   prefixes: tuple[str, ...] | None = None, since: datetime | None = None,
                   from_seq: int | None = None, until_seq: int | None = None, idle_s: float = 2.0,
                   dense: bool = False) -> int:
    """Hand each event of ``CANARY_LOG`` to ``on_event``, in stream order, without keeping them.

    The streaming form of :func:`read_log`, for readers that fold the log into a
    bounded view (``canary status``) instead of holding every event in memory.

    Args:
        js: a JetStream context.
        on_event: called once per decoded event that passes ``prefixes``.
        prefixes: keep only subjects starting with one of these (default: all).
        since: start at this UTC time (default: the beginning).
        from_seq: start at this stream sequence instead (wins over ``since``).
        until_seq: stop after this stream sequence (default: the last at start).
        idle_s: give up when nothing arrived for this many seconds.
        dense: ``prefixes`` match most of the log (the judge's inputs: every probe result):
            the server is asked for the whole log under one filter and the rest is dropped here.
            A consumer with several filters (``filter_subjects``) is delivered about 4x slower
            than one with a single filter by nats-server 2.10-2.15 (its multi-filter lookup per
            message; nats-io/nats-server#4888, #7014): 9-11 k against 32-46 k events/s for the
            judge's four families (``benchmarks/replay_bench.py``), while dropping the few
            other messages costs this side little.  Leave it off when the prefixes match a small
            part of the log (decisions, verdicts): the server's filter then saves the transfer.

    Returns:
        The last stream sequence looked at (the stream's last sequence at start,
        or ``until_seq``; ``from_seq - 1`` or 0 when there was nothing to read),
        so that a follower can go on from the next one.

    Raises:
        LogUnreadable: the reader's consumer has events pending that never arrive
            (a credential without ``CONSUMER.MSG.NEXT``), instead of an empty read.
    """
    info = await js.stream_info(LOG)
    last = info.state.last_seq if until_seq is None else min(until_seq, info.state.last_seq)
    first = from_seq if from_seq is not None else 1
    if last == 0 or info.state.messages == 0 or last < first:
        return max(0, min(first - 1, info.state.last_seq))
    if from_seq is None and since is not None and await _last_before(js, last, since):
        return last  # nothing as recent as `since`: do not wait idle_s for a message that will not come
    if from_seq is not None:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=from_seq)
    elif since is not None:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since.isoformat())
    else:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
    # An ephemeral pull consumer, filtered by the server, nothing acknowledged, read as a stream:
    # two pull requests of SCAN_BATCH messages are always outstanding, and the messages are handled
    # in the subscription's own callback as they arrive (nats-py's fetch() awaits a timer per
    # message: about half the time of a replay went there; benchmarks/replay_bench.py).
    wanted = _filters(None if dense else prefixes)
    config.ack_policy = AckPolicy.NONE
    config.inactive_threshold = max(30.0, 4 * idle_s)  # the server drops it if this reader dies
    config.filter_subjects = wanted
    reader = _Reader(on_event, prefixes, last, idle_s)
    created = await js.add_consumer(LOG, config)
    nc = js._nc  # noqa: SLF001 - the context's connection: nats-py offers no raw pull otherwise
    request_subject = f"{js._prefix}.CONSUMER.MSG.NEXT.{LOG}.{created.name}"  # noqa: SLF001
    inbox = nc.new_inbox()
    reader.ask = lambda: nc.publish(request_subject, reader.request, reply=inbox)
    sub = await nc.subscribe(inbox, cb=reader.on_msg, pending_msgs_limit=4 * SCAN_BATCH,
                             pending_bytes_limit=0)
    try:
        await reader.run()
        if reader.silent:
            await _refuse_silent_read(js, created.name, idle_s)
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        with contextlib.suppress(Exception):
            await js.delete_consumer(LOG, created.name)
    if reader.error is not None:
        raise reader.error
    return max(last if reader.complete else reader.seen, first - 1)


class _Reader:
    """One scan's stream of messages: pull requests kept ahead, each message decoded and handed on.

    Two requests of :data:`SCAN_BATCH` messages are outstanding at any time (a new one is sent
    whenever fewer than one request's worth remain), each expiring after ``idle_s``, so the server
    streams while this side folds; the scan ends at ``last``, when the filter matches nothing
    more (``num_pending`` 0), or after ``idle_s`` without a message.
    """

    def __init__(self, on_event: Callable[[LoggedEvent], None], prefixes: tuple[str, ...] | None, last: int,
                 idle_s: float) -> None:
        self.on_event = on_event
        self.prefixes = prefixes
        self.last = last
        self.idle_s = idle_s
        self.request = json.dumps({"batch": SCAN_BATCH, "expires": int(idle_s * 1e9)}).encode()
        self.ask: Callable[[], Any] | None = None
        self.outstanding = 0
        self.seen = 0
        self.complete = False
        self.error: BaseException | None = None
        self.finished = asyncio.Event()
        self.arrived = 0  # messages with data
        self.statuses = 0  # the server's status messages (a request expired ...)
        self.silent = False  # nothing at all came, not even a status: see _refuse_silent_read
        self.no_responders = 0  # pull requests the server answered 503 (no responders) to, asked again

    async def run(self) -> None:
        await self._more()
        await self._more()
        while not self.finished.is_set():
            before = self.arrived
            try:
                await asyncio.wait_for(self.finished.wait(), timeout=self.idle_s)
            except TimeoutError:
                if self.arrived == before:  # nothing for idle_s: with nothing ever seen, nothing matched
                    self.complete = self.seen == 0
                    self.silent = self.arrived == 0 and self.statuses == 0
                    return

    async def _more(self) -> None:
        self.outstanding += SCAN_BATCH
        await self.ask()

    async def on_msg(self, msg: Any) -> None:
        if self.finished.is_set():
            return
        try:
            if not msg.data and msg.headers and STATUS_HEADER in msg.headers:
                self.statuses += 1
                await self._status(msg)
                return
            self.arrived += 1
            self.outstanding -= 1
            seq, pending = _position(msg.reply)
            if seq > self.last:
                self._finish(complete=True)
                return
            self.seen = seq
            if self.prefixes is None or msg.subject.startswith(self.prefixes):
                try:
                    event = codec.LOG_EVENT.decode(msg.data)
                    codec.check_origin(msg.subject, event)
                except (Undecodable, Rejected):
                    event = None  # the services refused it live too: a replay must not apply it
                if event is not None:
                    self.on_event(LoggedEvent(seq=seq, subject=msg.subject, event=event))
            if seq >= self.last or pending == 0:
                self._finish(complete=True)  # the filter matches nothing more up to `last`
            elif self.outstanding < SCAN_BATCH:
                await self._more()
        except Exception as exc:  # the callback's outermost boundary: the scan ends and its reader raises it
            self.error = exc
            self._finish(complete=False)

    async def _status(self, msg: Any) -> None:
        status = msg.headers.get(STATUS_HEADER)
        if status == "408":  # a request expired with this many of its messages not sent
            self.outstanding -= int(msg.headers.get("Nats-Pending-Messages", SCAN_BATCH))
            await self._more()
        elif status == "503" and self.no_responders < NO_RESPONDERS_RETRIES:
            # no responders: in a cluster the new consumer's leader is not up yet (seen right after a
            # node came back): the request went nowhere, so it is asked again after a short wait
            self.no_responders += 1
            self.outstanding -= SCAN_BATCH
            await asyncio.sleep(min(1.0, 0.1 * 2 ** (self.no_responders - 1)))
            await self._more()
        elif status not in ("100", "404"):
            self.error = Transient(f"reading {LOG}: the server answered {status} "
                                   f"{msg.headers.get('Description', '')}".rstrip())
            self._finish(complete=False)

    def _finish(self, *, complete: bool) -> None:
        self.complete = complete
        self.finished.set()


STATUS_HEADER = "Status"
#: Pull requests answered 503 (no responders: a cluster's new consumer without its leader yet) asked again
#: before the scan gives up with a Transient (waits of 0.1, 0.2, 0.4, 0.8, 1 s: about 2.5 s in all).
NO_RESPONDERS_RETRIES = 5


class LogUnreadable(Transient):
    """The log holds events for this reader that the server did not hand over (a permission, not an empty log).

    Transient: a service that meets it while rebuilding naks its input and tries again later, never
    saving a state folded from nothing.
    """


async def _refuse_silent_read(js: JetStreamContext, consumer: str, idle_s: float) -> None:
    """Raise :class:`LogUnreadable` when the reader's consumer has events pending but none came in ``idle_s``.

    A credential without ``$JS.API.CONSUMER.MSG.NEXT`` creates the consumer and then
    gets nothing: the server reports the violation only to the connection's error
    callback, and the read would look like an empty log (the dashboard once showed
    an empty fleet that way).  ``num_pending`` tells the two apart.
    """
    try:
        info = await js.consumer_info(LOG, consumer)
    except NATS_FAULTS:  # the consumer's info is refused too: nothing more to tell
        return
    if info.num_pending:
        raise LogUnreadable(f"the log has {info.num_pending} event(s) for this reader but none arrived in "
                            f"{idle_s:g} s: the credential may lack $JS.API.CONSUMER.MSG.NEXT on {LOG}",
                            pending=info.num_pending)


def _position(reply: str) -> tuple[int, int]:
    """Stream sequence and messages still pending, from a JetStream message's reply subject."""
    tokens = reply.split(".")
    if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
        return int(tokens[5]), int(tokens[8])
    meta = Msg.Metadata._from_reply(reply)  # noqa: SLF001 - the longer form with a domain and account
    return meta.sequence.stream, meta.num_pending


#: Messages fetched per pull request while scanning the log.
SCAN_BATCH = 1000


def _filters(prefixes: tuple[str, ...] | None) -> list[str]:
    """Server-side filters for ``prefixes`` (``canary.results.`` -> ``canary.results.>``); all when any is not a token prefix."""
    if not prefixes or any(not p.endswith(".") for p in prefixes):
        return [f"{subjects.PREFIX}.>"]
    return [f"{p}>" for p in prefixes]


async def _last_before(js: JetStreamContext, last: int, since: datetime) -> bool:
    """Whether message ``last`` of the log was stored before ``since`` (``False`` when it cannot be read)."""
    try:
        msg = await js.get_msg(LOG, last)
    except NATS_FAULTS:  # NotFoundError (a deleted message), a permission the credential lacks: just read
        return False
    return msg.time is not None and msg.time < since


async def acknowledged_position(js: JetStreamContext, stream: str, durable: str) -> int:
    """The stream sequence a durable consumer has acknowledged up to (0: never ran)."""
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        return 0
    return info.ack_floor.stream_seq if info.ack_floor else 0
