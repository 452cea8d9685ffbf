"""The way out of every service: its broker connection, publishing and dead letters.

A service's one NATS connection is its FastStream ``NatsBroker`` (:func:`make_broker`);
:class:`Publisher` publishes on it into JetStream with deterministic ``Nats-Msg-Id``s
(one message, or many pipelined with every acknowledgement checked) and records refused
messages on ``canary.deadletter.<service>``.  What comes in is read by
:class:`reverie_canary.shared.runtime.consumer.Consumer` and settled by the one table,
:mod:`reverie_canary.shared.runtime.settle`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from faststream.nats import NatsBroker, NatsUserPassword
from faststream.nats.security import NatsSecurity
from nats.errors import ConnectionClosedError, ConnectionReconnectingError
from nats.errors import Error as NatsError

from reverie_canary.shared.contract import codec, ids, subjects
from reverie_canary.shared.contract.bounds import MESSAGE_MAX_BYTES, fit
from reverie_canary.shared.contract.errors import TooLarge, Transient
from reverie_canary.shared.contract.events import DEAD_LETTER_ERROR_MAX, DEAD_LETTER_PAYLOAD_MAX, DeadLetter
from reverie_canary.shared.runtime import clock, metrics, retry, tracing
from reverie_canary.shared.runtime.logging import adopt_library_loggers
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.settings import Settings, nats_servers
from reverie_canary.shared.runtime.streams import DEADLETTER
from reverie_canary.shared.runtime.tls import nats_tls

PUBLISH_TIMEOUT_S = 5.0
#: Messages of one :meth:`Publisher.publish_many` sent before their acknowledgements are awaited.
PIPELINE_WINDOW = 1000
#: nats-py's bound on a JetStream context's unacknowledged asynchronous publishes (above the window).
PIPELINE_MAX_PENDING = 4 * PIPELINE_WINDOW


@dataclass(frozen=True)
class Outgoing:
    """One message of :meth:`Publisher.publish_many`: the event, where it goes, its id and its own headers."""

    event: Any
    subject: str
    msg_id: str
    headers: dict[str, str] = field(default_factory=dict)

#: FastStream's own lines (the app's start and stop, the broker's connection) go here: under ``faststream``, which
#: :func:`reverie_canary.shared.runtime.logging.configure` keeps quiet below WARNING unless the level is DEBUG.
BROKER_LOGGER = logging.getLogger("faststream.canary")


async def drain_or_close(connection: Any) -> bool:
    """Drain a nats-py connection, or close it when NATS is away (reconnecting: nothing to drain).

    nats-py refuses to drain a connection that is reconnecting or closed
    (``ConnectionReconnectingError``), and its close writes the unsent buffer to the dead
    transport on the way (``RuntimeError``, or ``ConnectionResetError`` from its drain), by
    then marked closed with its reconnect loop cancelled: nothing it could still send is lost.

    Returns:
        ``True`` when it was drained, ``False`` when it was closed undrained.
    """
    try:
        await connection.drain()
        return True
    except (ConnectionReconnectingError, ConnectionClosedError):
        with contextlib.suppress(RuntimeError, OSError):
            await connection.close()
        return False


class CanaryBroker(NatsBroker):
    """FastStream's ``NatsBroker`` whose stop closes a connection it cannot drain.

    A stop drains the connection (its subscriptions finish, its pending publishes are
    flushed); nats-py refuses to drain one that is reconnecting or closed
    (``ConnectionReconnectingError``): NATS is away, there is nothing to flush.  Stopping
    during an outage (Ctrl-C) then closes the connection instead, ends the reconnect loop,
    and says so in one line (``nats_closed_undrained``) instead of a traceback; the
    service's own shutdown steps after the broker's (its Redis client, its metrics port)
    still run.
    """

    def __init__(self, *args: Any, service: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.service = service

    async def stop(self, exc_type: type[BaseException] | None = None, exc_val: BaseException | None = None,
                   exc_tb: Any = None) -> None:
        """Stop the subscribers and drain the connection; close it instead when NATS is away."""
        try:
            await super().stop(exc_type, exc_val, exc_tb)
        except (ConnectionReconnectingError, ConnectionClosedError) as exc:
            connection, self._connection = self._connection, None
            if connection is not None:
                await drain_or_close(connection)  # reconnecting: closed (the dead transport's errors kept quiet)
            self.config.disconnect()
            get_logger(self.service or "nats").info(
                "nats_closed_undrained", why=f"NATS unreachable at the stop ({type(exc).__name__}): nothing to drain")


def make_broker(settings: Settings, service: str, *, callbacks: dict[str, Any] | None = None) -> NatsBroker:
    """A NatsBroker for ``service`` that reconnects forever.

    Credentials come from ``NATS_USER`` / ``NATS_PASSWORD`` (one per service,
    ``shared/nats/server.conf``); the connection is named after the service.

    Args:
        callbacks: nats-py ``disconnected_cb`` / ``reconnected_cb``
            (:meth:`reverie_canary.shared.runtime.health.Link.nats_callbacks`).
    """
    adopt_library_loggers()  # FastStream's own stdout handler would print beside structlog
    kwargs: dict[str, Any] = dict(callbacks or {})
    tls = nats_tls(settings)  # a tls:// URL: the settings' CA and client certificate
    if settings.nats_user:
        kwargs["security"] = NatsUserPassword(settings.nats_user, settings.nats_password, ssl_context=tls)
    elif tls is not None:
        kwargs["security"] = NatsSecurity(ssl_context=tls)
    return CanaryBroker(
        nats_servers(settings.nats_url),
        name=f"canary-{service}",
        service=service,
        max_reconnect_attempts=-1,
        # nats-py has no reconnect jitter of its own: the wait is drawn once per connection so that
        # the services and probers of a fleet do not all reconnect in step after an outage
        reconnect_time_wait=retry.reconnect_wait_s(),
        connect_timeout=5,
        graceful_timeout=10.0,
        error_cb=nats_error_cb,
        logger=BROKER_LOGGER,
        log_level=logging.DEBUG,
        **kwargs,
    )


_nats_errors = {"last": 0.0, "suppressed": 0}
NATS_ERROR_EVERY_S = 30.0


async def nats_error_cb(exc: Exception) -> None:
    """nats-py error callback: one log line per 30 s, no traceback.

    nats-py's default logs every failed reconnect attempt at ERROR with a
    traceback (once a second per connection during an outage).
    """
    now = time.monotonic()
    if now - _nats_errors["last"] < NATS_ERROR_EVERY_S:
        _nats_errors["suppressed"] += 1
        return
    get_logger("nats").warning("nats_error", error=f"{type(exc).__name__}: {exc}",
                               suppressed_since_last=_nats_errors["suppressed"])
    _nats_errors["last"], _nats_errors["suppressed"] = now, 0


@dataclass(frozen=True)
class Delivery:
    """Where a message came from: subject, stream position, delivery count."""

    subject: str
    stream_seq: int | None
    deliveries: int
    headers: dict[str, str]


class Publisher:
    """Publishes events into JetStream with deterministic ``Nats-Msg-Id``s.

    Raises :class:`reverie_canary.shared.contract.errors.Transient` when NATS does not acknowledge in
    time, so that the caller's message is redelivered and the same id retried.
    """

    def __init__(self, broker: NatsBroker, service: str) -> None:
        self.broker = broker
        self.service = service
        self._js: Any = None
        self._js_of: Any = None

    async def publish(self, event: Any, subject: str, msg_id: str, stream: str) -> bool:
        """Publish ``event`` on ``subject`` and wait for JetStream's acknowledgement.

        Returns:
            ``True`` if stored, ``False`` if JetStream dropped it as a duplicate.

        An event above ``MESSAGE_MAX_BYTES`` is first fitted (:func:`reverie_canary.shared.contract.bounds.fit`:
        its longest free texts cut, a verdict's references shed), deterministically, so that a
        redelivered input publishes the same bytes under the same id.

        Raises:
            TooLarge: the event is above ``MESSAGE_MAX_BYTES`` even fitted (nothing is sent; the
                settle table dead-letters the input that produced it, reason ``too_large``).
            Transient: NATS unreachable or no acknowledgement within 5 s.
        """
        body = self._body(event, subject, msg_id)
        try:
            ack = await self.broker.publish(
                body,
                subject,
                # the current span's trace context travels with the message (shared/runtime/tracing.py)
                headers=tracing.inject({"Nats-Msg-Id": msg_id, "content-type": "application/json"}),
                stream=stream,
                timeout=PUBLISH_TIMEOUT_S,
            )
        except (NatsError, TimeoutError) as exc:  # timeouts, no stream response, connection closed ...
            raise Transient(f"publish to {subject} failed: {exc!r}", subject=subject, msg_id=msg_id) from exc
        return not bool(getattr(ack, "duplicate", False))

    async def publish_many(self, messages: Iterable[Outgoing], *, stream: str) -> list[bool]:
        """Publish ``messages`` pipelined: every one sent without waiting, then every acknowledgement checked.

        They go in windows of :data:`PIPELINE_WINDOW`: a window is sent, then its
        acknowledgements awaited (:data:`PUBLISH_TIMEOUT_S` at most), then the next.  Each message keeps its own ``Nats-Msg-Id``, so
        a call repeated after a failure stores nothing twice.  A message's ``headers`` are its own
        (each may carry its own trace context); ``Nats-Msg-Id`` and the content type are added.

        Returns:
            Per message, in order: ``True`` if stored, ``False`` if a duplicate.

        Raises:
            TooLarge: a message above the wire bound even fitted (nothing of the call is sent).
            Transient: NATS unreachable, a refusal, or an acknowledgement missing
                :data:`PUBLISH_TIMEOUT_S` after its window was sent; some may be stored.
        """
        batch = [(m, self._body(m.event, m.subject, m.msg_id)) for m in messages]
        js = self._pipeline()
        stored: list[bool] = []
        for start in range(0, len(batch), PIPELINE_WINDOW):
            stored += await self._window(js, batch[start:start + PIPELINE_WINDOW], stream)
        return stored

    async def _window(self, js: Any, window: list[tuple[Outgoing, bytes]], stream: str) -> list[bool]:
        """Send ``window`` without waiting, then wait for every acknowledgement (:meth:`publish_many`)."""
        acks: list[asyncio.Future[Any]] = []
        try:
            for message, body in window:
                headers = {**message.headers, "Nats-Msg-Id": message.msg_id, "content-type": "application/json"}
                # no wait_stall: the window is below nats-py's pending bound, so this never waits; with one,
                # every call yielded to the loop and nats-py flushed each message alone (a send per message)
                acks.append(await js.publish_async(message.subject, body, stream=stream, headers=headers))
            done, pending = await asyncio.wait(acks, timeout=PUBLISH_TIMEOUT_S)
        except (NatsError, TimeoutError) as exc:  # the connection closed
            for ack in acks:
                ack.cancel()
            raise Transient(f"publishing {len(window)} messages to {stream} failed after {len(acks)}: {exc!r}",
                            stream=stream) from exc
        for ack in pending:
            ack.cancel()
        if pending:
            raise Transient(f"{len(pending)} of {len(window)} messages to {stream} not acknowledged within "
                            f"{PUBLISH_TIMEOUT_S:g} s", stream=stream)
        stored = []
        for (message, _), ack in zip(window, acks, strict=True):
            error = ack.exception()
            if error is not None:
                raise Transient(f"publish to {message.subject} failed: {error!r}", subject=message.subject,
                                msg_id=message.msg_id) from error
            stored.append(not bool(getattr(ack.result(), "duplicate", False)))
        return stored

    def _pipeline(self) -> Any:
        """The JetStream context of the pipelined publishes (one per connection: its reply inbox is set up once)."""
        connection = self.broker.connection
        if self._js is None or self._js_of is not connection:
            self._js, self._js_of = connection.jetstream(publish_async_max_pending=PIPELINE_MAX_PENDING), connection
        return self._js

    def _body(self, event: Any, subject: str, msg_id: str) -> bytes:
        """``event``'s bytes, fitted under the wire bound when above it (:meth:`publish`)."""
        body = codec.encode(event)
        if len(body) <= MESSAGE_MAX_BYTES:
            return body
        try:
            fitted = fit(event)
        except TooLarge as exc:
            raise TooLarge(f"a {type(event).__name__} of {len(body)} bytes for {subject}: above the bound of "
                           f"{MESSAGE_MAX_BYTES} bytes every wire message keeps, even cut; not published",
                           subject=subject, msg_id=msg_id, size=len(body)) from exc
        smaller = codec.encode(fitted)
        get_logger(self.service).warning("message_fitted", type=type(event).__name__, subject=subject,
                                         msg_id=msg_id, bytes_before=len(body), bytes_after=len(smaller),
                                         bound=MESSAGE_MAX_BYTES)
        return smaller

    async def dead_letter(self, delivery: Delivery, body: bytes, reason: str, error: str) -> None:
        """Record a refused message on ``canary.deadletter.<service>`` (best effort, logged)."""
        letter = DeadLetter(
            at=clock.now(),
            service=self.service,
            subject=delivery.subject,
            reason=reason,
            error=error[:DEAD_LETTER_ERROR_MAX],
            payload=body[:DEAD_LETTER_PAYLOAD_MAX].decode("utf-8", errors="replace"),
            stream_seq=delivery.stream_seq,
            deliveries=delivery.deliveries,
        )
        anchor = f"{delivery.subject}|{delivery.stream_seq}" if delivery.stream_seq else ids.content_id("body", body)
        metrics.of(self.service).inc("dead_letters", reason=reason)
        try:
            await self.publish(letter, subjects.deadletter(self.service), f"dl|{self.service}|{anchor}", DEADLETTER)
        except Transient as exc:
            get_logger(self.service).error("dead_letter_publish_failed", subject=delivery.subject, error=str(exc))


def _span_attributes(event: Any, delivery: Delivery) -> dict[str, Any]:
    """The attributes of a handled message's span: its subject, stream sequence and identifying fields."""
    attributes: dict[str, Any] = {"messaging.destination.name": delivery.subject,
                                  "canary.stream_seq": delivery.stream_seq, "canary.deliveries": delivery.deliveries}
    for name in ("task_id", "model", "provider", "kind", "cycle", "decision_id", "action", "version"):
        value = getattr(event, name, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            attributes[f"canary.{name}"] = value
    return attributes
