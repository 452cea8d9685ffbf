"""The one way a message comes into a service: a durable pull consumer read by :class:`Consumer`.

Every consumer of every service is pulled by the same loop over nats-py, on the
service's one NATS connection: fetch what there is room for, keep each message in
hand (saying it is in progress four times per ``ack_wait``, so a live process keeps
its messages however long they take and a dead one's come back within ``ack_wait``),
hand it to the service, settle it by the one table
(:mod:`reverie_canary.shared.runtime.settle`), and at a stop give back (``nak``,
redelivered at once) what is still in hand.  Two ways of handing messages over:

- **one at a time** (``apply(event, delivery)``): up to ``workers`` messages are handled
  at once, each in a task of its own, and a message is fetched only when a worker is
  free, so none waits in a queue with no word to the server.  ``workers=1`` is strict
  log order (with the consumer's ``max_ack_pending=1`` the server delivers the next
  message only once this one is settled: the router, the notifier); a work queue
  shared by processes takes a number, or a function that says it before every fetch
  (the prober: what discovery sized the cycle to).
- **ordered batches** (``fold(items)``): a fold that must see every message in stream
  order, ``batch`` at a time (the judge).  With a batch in flight the server no longer
  keeps the order (a message a dead process held, or one given back, comes back after
  later ones), so the messages in hand are applied only when they are provably every
  message not yet acknowledged: *clean* while each fetch continues the consumer's
  delivery sequence without a gap; otherwise (at start, after a gap, after the gate was
  taken anew) the consumer's ``num_ack_pending`` must equal the messages in hand, and
  until it does the loop keeps what it has and fetches what comes back.  A batch that
  fails is kept in hand and applied again after the table's delay from its first message,
  one message, then two, four ... up to ``batch`` at a time, so one message that keeps
  failing is found and dead-lettered alone while the others' delivery counts are not spent.
  ``gate()`` says whether this process may take messages now (the judge's lease); without
  it, everything in hand is given back.

Why not FastStream's subscribers (measured): its pull loop fetches a batch and queues
it in front of the handlers with no in-progress signal, so a work queue over-fetches
(ag2ai/faststream#2563) and a slow prober's queued tasks ran out their ``ack_wait``;
its batches are handled concurrently, in no order; and its per-message middleware
cost the router 1.46 ms from publish to handler against 0.92 ms pulled here
(``benchmarks/routing_bench.py``, benchmarks/README.md).  FastStream keeps the app's
lifecycle and the connection (:class:`reverie_canary.shared.runtime.service.Shell`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from nats.errors import Error as NatsError
from nats.js.errors import APIError

from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.codec import Codec
from reverie_canary.shared.contract.errors import Rejected, Transient, Undecodable
from reverie_canary.shared.runtime import settle, tracing
from reverie_canary.shared.runtime.aio import stop_task
from reverie_canary.shared.runtime.broker import Delivery, Publisher, _span_attributes
from reverie_canary.shared.runtime.metrics import ServiceMetrics
from reverie_canary.shared.runtime.streams import HEARTBEATS_PER_ACK_WAIT, ConsumerSpec

#: Handles one message; raises as the settle table says.
Apply = Callable[[Any, Delivery], Awaitable[None]]
#: Applies a batch of ``(event, delivery)`` in order, all or nothing; returns the items it refused
#: (index, a :class:`reverie_canary.shared.contract.errors.Rejected`) to dead-letter.
Fold = Callable[[list[tuple[Any, Delivery]]], Awaitable[list[tuple[int, Exception]]]]

#: Seconds one fetch waits for messages when none is in hand.
FETCH_S = 1.0
#: Seconds one fetch waits while ordered messages are in hand, and between two looks at the consumer.
RECHECK_S = 0.05
#: Seconds to wait before asking the gate again when it said no (another process holds the lease).
GATE_WAIT_S = 2.0
#: Longest wait for one handler task to stop at shutdown (seconds).
STOP_S = 10.0


class Retake(Transient):
    """The gate of an ordered consumer was lost or taken anew while a batch was applied: check the order again."""


class Held:
    """A JetStream message in hand: its body, where it came from, and whether it is settled."""

    __slots__ = ("raw", "body", "delivery", "settled")

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.body: bytes = raw.data
        meta = raw.metadata
        self.delivery = Delivery(subject=raw.subject, stream_seq=meta.sequence.stream,
                                 deliveries=meta.num_delivered, headers=dict(raw.headers or {}))
        self.settled = False

    async def give_back(self) -> None:
        """``nak`` now (redelivered at once), unless already settled; a lost one comes back after ``ack_wait``."""
        if not self.settled:
            self.settled = True
            with contextlib.suppress(NatsError, OSError):
                await asyncio.shield(self.raw.nak())


class Consumer:
    """One durable pull consumer of a service (module docstring).

    Args:
        name: the service (its log lines, series and dead letters).
        connection: a function that gives the service's connected nats-py client.
        spec: the durable consumer.
        decoder: the strict decoder of every message its subjects may carry.
        apply: handle one message (one at a time, up to ``workers`` at once).
        fold: apply a batch in stream order (ordered batches); exactly one of ``apply`` and ``fold``.
        workers: messages handled at once, or a function that says it before every fetch.
        batch: messages applied together by ``fold``.
        gate: whether this process may take messages now (ordered batches).
        generation: changes when the gate was taken anew (the order is then proven again).
        max_deliver: attempts a message gets (the settle table).
        retry_delay_s: the base of the redelivery delay.
    """

    def __init__(self, name: str, connection: Callable[[], Any], spec: ConsumerSpec, decoder: Codec, *,
                 publisher: Publisher, series: ServiceMetrics, log: Any, max_deliver: int, retry_delay_s: float,
                 apply: Apply | None = None, fold: Fold | None = None, workers: int | Callable[[], int] = 1,
                 batch: int = 1, gate: Callable[[], Awaitable[bool]] | None = None,
                 generation: Callable[[], int] = lambda: 0) -> None:
        if (apply is None) == (fold is None):
            raise TypeError("a Consumer takes apply (one message at a time) or fold (ordered batches)")
        self.name = name
        self.connection = connection
        self.spec = spec
        self.decoder = decoder
        self.publisher = publisher
        self.series = series
        self.log = log
        self.max_deliver = max_deliver
        self.retry_delay_s = retry_delay_s
        self.apply = apply
        self.fold = fold
        self.limit: Callable[[], int] = workers if callable(workers) else (lambda: workers)
        self.batch = batch
        self.gate = gate
        self.generation = generation
        self.heartbeat_s = spec.ack_wait_s / HEARTBEATS_PER_ACK_WAIT
        #: stream sequence -> the message in hand (its latest delivery)
        self.in_hand: dict[int, Held] = {}
        self._freed = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._sub: Any = None
        # ordered batches
        self.dirty = True
        self.last_dseq = 0
        self.window = batch
        self.attempts = 0  # failed attempts of the batch at the head of the messages in hand
        self._said_waiting = False

    # -- the loop -------------------------------------------------------------------------------------

    async def bind(self) -> None:
        """Create (or bind) the durable, so that what is published from now on is read (before :meth:`run`)."""
        js = self.connection().jetstream()
        self._sub = await js.pull_subscribe(self.spec.filter_subjects[0], durable=self.spec.durable,
                                            stream=self.spec.stream, config=self.spec.config())

    async def run(self) -> None:
        """Pull, hand over and settle until cancelled; give back what is in hand at the end."""
        if self._sub is None:  # not bound at start, or bound again after a crash
            await self.bind()
        sub, self._sub = self._sub, None
        js = self.connection().jetstream()
        beats = asyncio.create_task(self._heartbeat(), name=f"{self.name}-heartbeat")
        seen_generation: int | None = None
        try:
            while True:
                if self.gate is not None and not await self._admitted():
                    continue
                if self.generation() != seen_generation:
                    seen_generation, self.dirty = self.generation(), True
                room = self._room()
                if room > 0:
                    fetched = await self._fetch(sub, room)
                else:  # every worker busy, or a whole batch in hand waiting to be applied
                    await self._wait_for_room()
                    fetched = []
                if self.fold is None:
                    for held in fetched:
                        task = asyncio.create_task(self._handle(held), name=f"{self.name}-message")
                        self._running.add(task)
                        task.add_done_callback(self._running.discard)
                elif self.in_hand and (not self.dirty or await self._order_proven(js)):
                    await self._fold_in_hand()
        finally:
            beats.cancel()
            for task in list(self._running):
                task.cancel()
            for task in list(self._running):
                await stop_task(task, STOP_S)
            await stop_task(beats, STOP_S)
            await self._give_back()
            with contextlib.suppress(NatsError, OSError):
                await sub.unsubscribe()

    async def _admitted(self) -> bool:
        assert self.gate is not None
        try:
            allowed = await self.gate()
        except Transient:  # the gate's store away (Redis restarting): keep what is in hand, ask again
            await asyncio.sleep(FETCH_S)
            return False
        if not allowed:
            await self._give_back()
            await asyncio.sleep(GATE_WAIT_S)
        return allowed

    def _room(self) -> int:
        return (self.batch if self.fold is not None else max(1, self.limit())) - len(self.in_hand)

    async def _wait_for_room(self) -> None:
        if self.fold is not None:
            await asyncio.sleep(RECHECK_S)  # a full batch waits for its order to be proven
            return
        self._freed.clear()
        with contextlib.suppress(TimeoutError):  # the limit may rise meanwhile
            await asyncio.wait_for(self._freed.wait(), FETCH_S)

    async def _fetch(self, sub: Any, room: int) -> list[Held]:
        """Fetch up to ``room`` messages and take them in hand; nothing when there is none or NATS is away."""
        timeout = RECHECK_S if self.fold is not None and self.in_hand else FETCH_S
        try:
            messages = await sub.fetch(batch=room, timeout=timeout)
        except TimeoutError:  # nothing to do (nats-py raises the builtin when a fetch expires empty)
            return []
        except NatsError:  # NATS away (reconnecting, closed): ask again in a while
            await asyncio.sleep(FETCH_S)
            return []
        taken = []
        for raw in messages:
            held = Held(raw)
            seq = held.delivery.stream_seq
            assert seq is not None
            consumer_seq = raw.metadata.sequence.consumer
            if not self.dirty and consumer_seq != self.last_dseq + 1:
                self.dirty = True  # a delivery went elsewhere, or one came back: prove the order again
            self.last_dseq = max(self.last_dseq, consumer_seq)
            self.in_hand[seq] = held
            taken.append(held)
        return taken

    async def _heartbeat(self) -> None:
        """Say every message in hand is in progress, four times per ``ack_wait``: held ones are not redelivered."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            for held in list(self.in_hand.values()):
                if held.settled:
                    continue
                try:
                    await held.raw.in_progress()
                except (NatsError, OSError):  # disconnected: the next beat tries again
                    break

    async def _give_back(self) -> None:
        """Give back every message in hand: a process stopping or without the gate holds none."""
        for held in list(self.in_hand.values()):
            await held.give_back()
        self.in_hand.clear()
        self.dirty = True

    # -- one message at a time ------------------------------------------------------------------------

    async def _handle(self, held: Held) -> None:
        """Decode, check the subject, apply in the message's span, settle; never raises but a cancellation."""
        assert self.apply is not None
        delivery = held.delivery
        try:
            event = self.decoder.decode(held.body)
            codec.check_origin(delivery.subject, event)
            # one span per handled message, child of the context its headers carry (shared/runtime/tracing.py)
            with tracing.span(f"{self.name} {codec.message_name(event)}", headers=delivery.headers,
                              attributes=_span_attributes(event, delivery)):
                await self.apply(event, delivery)
        except asyncio.CancelledError:
            await held.give_back()  # stopping: now, not after ack_wait
            raise
        except Exception as exc:  # the outermost boundary of a message: the settle table says what it means
            await self._settle(held, exc, attempt=delivery.deliveries)
        else:
            await self._settle(held, None, attempt=delivery.deliveries)
        finally:
            self.in_hand.pop(delivery.stream_seq or 0, None)
            self._freed.set()

    async def _settle(self, held: Held, exc: BaseException | None, *, attempt: int,
                      messages: int = 1) -> settle.Settlement:
        """Carry out the settle table's word on ``held`` (ordered batches: a ``nak`` is a wait, the batch kept)."""
        delivery = held.delivery
        outcome = settle.settle(exc, attempt=attempt, max_deliver=self.max_deliver,
                                retry_delay_s=self.retry_delay_s)
        if outcome.bug:
            self.log.error("handler_error", subject=delivery.subject, stream_seq=delivery.stream_seq,
                           messages=messages, error=repr(exc), exc_info=exc)
        if outcome.action == "nak":
            self.log.warning("message_retry", subject=delivery.subject, stream_seq=delivery.stream_seq,
                             messages=messages, attempt=attempt, retry_in_s=round(outcome.delay_s or 0.0, 2),
                             error=str(exc), error_type=type(exc).__name__)
            self.series.inc("messages", outcome="nak")
            if self.fold is None:
                held.settled = True
                await self._quietly(held.raw.nak(delay=outcome.delay_s))
            return outcome
        if outcome.action == "term":
            assert outcome.reason is not None and exc is not None
            if outcome.reason == settle.GAVE_UP:
                self.log.error("message_gave_up", subject=delivery.subject, stream_seq=delivery.stream_seq,
                               deliveries=delivery.deliveries, attempts=attempt, error=str(exc),
                               error_type=type(exc).__name__)
            else:
                self.log.warning("message_rejected", reason=outcome.reason, subject=delivery.subject,
                                 error=str(exc), **_context(exc))
            await self.publisher.dead_letter(delivery, held.body, outcome.reason,
                                             repr(exc) if outcome.reason == settle.GAVE_UP else str(exc))
            held.settled = True
            await self._quietly(held.raw.term())
            self.series.inc("messages", outcome="term")
            return outcome
        held.settled = True
        await self._quietly(held.raw.ack())  # a lost ack: the message comes back, already applied
        self.series.inc("messages", outcome="ack")
        return outcome

    @staticmethod
    async def _quietly(settling: Awaitable[None]) -> None:
        with contextlib.suppress(NatsError, OSError):
            await settling

    # -- ordered batches ------------------------------------------------------------------------------

    async def _order_proven(self, js: Any) -> bool:
        try:
            info = await asyncio.wait_for(js.consumer_info(self.spec.stream, self.spec.durable), timeout=5.0)
        except (NatsError, TimeoutError, APIError):
            await asyncio.sleep(RECHECK_S)
            return False
        if (info.num_ack_pending or 0) != len(self.in_hand):
            if not self._said_waiting:
                self.log.info("waiting_for_order", durable=self.spec.durable, in_hand=len(self.in_hand),
                              pending=info.num_ack_pending,
                              reason="messages delivered earlier are not back yet (a process that stopped, "
                                     "or a delivery to another process): nothing is applied before them")
                self._said_waiting = True
            return False
        self.dirty, self._said_waiting = False, False
        self.last_dseq = max(self.last_dseq, info.delivered.consumer_seq or 0)
        return True

    async def _fold_in_hand(self) -> None:
        assert self.fold is not None
        items: list[tuple[Any, Held]] = []
        for seq in sorted(self.in_hand):
            held = self.in_hand[seq]
            try:
                event = self.decoder.decode(held.body)
                codec.check_origin(held.delivery.subject, event)
            except (Undecodable, Rejected) as exc:  # the table refuses it before the fold sees it
                await self._settle(held, exc, attempt=held.delivery.deliveries)
                del self.in_hand[seq]
                continue
            items.append((event, held))
        while items:
            chunk = items[:self.window]
            try:
                refused = await self.fold([(event, held.delivery) for event, held in chunk])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the outermost boundary of a batch: kept in hand, tried again or given up
                if not await self._failed([held for _, held in chunk], exc):
                    return
                items = items[1:]  # the head was given up
                continue
            refused_at = dict(refused)
            for i, (_, held) in enumerate(chunk):
                await self._settle(held, refused_at.get(i), attempt=held.delivery.deliveries)
                self.in_hand.pop(held.delivery.stream_seq or 0, None)
            items = items[len(chunk):]
            self.attempts = 0
            self.window = min(self.batch, self.window * 2)

    async def _failed(self, chunk: list[Held], exc: Exception) -> bool:
        """A batch failed: wait and let it be applied again (``False``), or give its one message up (``True``)."""
        first = chunk[0]
        if isinstance(exc, Retake):
            # the gate was lost or taken anew under this batch: prove the order again before anything else
            self.log.info("batch_retaken", messages=len(chunk), first_seq=first.delivery.stream_seq, reason=str(exc))
            self.dirty = True
            return False
        self.attempts += 1
        # a batch of several is never given up: it is narrowed to its first message first
        attempt = self.attempts if len(chunk) == 1 else min(self.attempts, self.max_deliver - 1)
        outcome = await self._settle(first, exc, attempt=attempt, messages=len(chunk))
        if outcome.action == "term":  # given up and dead-lettered
            self.in_hand.pop(first.delivery.stream_seq or 0, None)
            self.attempts = 0
            return True
        self.window = 1  # again from the first message alone: one that keeps failing is found
        await asyncio.sleep(outcome.delay_s or 0.0)
        return False


def _context(exc: BaseException) -> dict[str, Any]:
    """An error's context for the log line, minus the keys the line already has."""
    return {k: v for k, v in getattr(exc, "context", {}).items()
            if isinstance(v, str | int | float) and k not in ("subject", "reason", "error", "event")}
