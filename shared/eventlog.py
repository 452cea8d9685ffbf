"""Reading the event log (``CANARY_LOG``) back, in stream order.

Audits (``canary replay``) and the services' recovery from a lost Redis both
fold the log again: a service's Redis state is a cache of a fold over the log,
so when it is gone and the service's durable consumer has already moved on,
the state is rebuilt from the log up to the consumer's acknowledged position
(DESIGN.md, "Subjects and streams": the log keeps at least 30 days).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from reverie_canary.shared import codec, subjects
from reverie_canary.shared.aio import wait_event
from reverie_canary.shared.errors import Rejected, Undecodable
from reverie_canary.shared.streams import LOG


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
                   until_seq: int | None = None, idle_s: float = 2.0) -> list[LoggedEvent]:
    """Read ``CANARY_LOG`` in order with an ordered consumer.

    Args:
        js: a JetStream context.
        prefixes: keep only subjects starting with one of these (default: all).
        since: start at this UTC time (default: the beginning).
        until_seq: stop after this stream sequence (default: the last at start).
        idle_s: give up when nothing arrived for this many seconds.

    Returns:
        Decoded events in stream order; undecodable ones and ones on a subject
        they do not belong on are skipped (the services refused them too).
    """
    info = await js.stream_info(LOG)
    last = info.state.last_seq if until_seq is None else min(until_seq, info.state.last_seq)
    out: list[LoggedEvent] = []
    if last == 0 or info.state.messages == 0:
        return out
    done = asyncio.Event()
    seen = [0]
    config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since.isoformat()) if since \
        else ConsumerConfig(deliver_policy=DeliverPolicy.ALL)

    async def on_message(msg) -> None:
        seq = msg.metadata.sequence.stream
        seen[0] = seq
        if seq > last:
            done.set()
            return
        if prefixes is None or msg.subject.startswith(prefixes):
            try:
                event = codec.LOG_EVENT.decode(msg.data)
                codec.check_origin(msg.subject, event)
                out.append(LoggedEvent(seq=seq, subject=msg.subject, event=event))
            except (Undecodable, Rejected):
                pass  # the services refused it live too: a replay must not apply it
        if seq >= last or msg.metadata.num_pending == 0:
            done.set()

    sub = await js.subscribe(f"{subjects.PREFIX}.>", stream=LOG, cb=on_message, ordered_consumer=True,
                             config=config)
    try:
        while True:
            before = seen[0]
            if await wait_event(done, idle_s) or seen[0] == before:
                break
    finally:
        await sub.unsubscribe()
    return out


async def acknowledged_position(js: JetStreamContext, stream: str, durable: str) -> int:
    """The stream sequence a durable consumer has acknowledged up to (0: never ran)."""
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        return 0
    return info.ack_floor.stream_seq if info.ack_floor else 0
