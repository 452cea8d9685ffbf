"""The shell every service shares: broker, publishing and the ack mapping.

:func:`handle` is the one place where an exception becomes an ack action
(CONVENTIONS.md, "Errors say what to do"):

============== ============================================ ==================
error          meaning (dead-letter reason)                 action
============== ============================================ ==================
(none)         applied                                      ``ack``
Undecodable    bad bytes or wrong shape (``undecodable``),  dead-letter, ``term``
               another schema version
               (``unsupported_version``), above the wire
               bound (``oversize``)
Rejected       well-formed but refused (``rejected``), or   dead-letter, ``term``
               what it makes is above the wire bound
               (``too_large``)
Transient      a dependency hiccup                          ``nak(delay)``;
                                                            dead-letter and
                                                            ``term`` on the
                                                            last delivery
                                                            (``gave_up``)
anything else  a bug: logged with its traceback, then       as Transient
               treated as transient so nothing is lost
============== ============================================ ==================
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from faststream.nats import NatsBroker, NatsMessage, NatsUserPassword
from faststream.nats.security import NatsSecurity
from nats.errors import Error as NatsError

from reverie_canary.shared.contract import codec, ids, subjects
from reverie_canary.shared.runtime import clock, metrics, retry, tracing
from reverie_canary.shared.contract.bounds import MESSAGE_MAX_BYTES, fit
from reverie_canary.shared.contract.codec import Codec
from reverie_canary.shared.contract.errors import Oversize, Rejected, TooLarge, Transient, Undecodable, UnsupportedVersion
from reverie_canary.shared.contract.events import DEAD_LETTER_ERROR_MAX, DEAD_LETTER_PAYLOAD_MAX, DeadLetter
from reverie_canary.shared.runtime.logging import adopt_library_loggers
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.settings import Settings, nats_servers
from reverie_canary.shared.runtime.streams import DEADLETTER
from reverie_canary.shared.runtime.tls import nats_tls

PUBLISH_TIMEOUT_S = 5.0

class _EmptyFetchFilter(logging.Filter):
    """Drop FastStream's 'raised an exception, retrying' for a pull fetch that found nothing.

    FastStream's pull loop suppresses ``nats.errors.TimeoutError``, but nats-py
    2.16 raises the builtin ``TimeoutError`` when a fetch expires empty; the
    supervisor then logs a traceback and restarts the loop, which is harmless.
    Any other exception still gets through.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, TimeoutError) and "raised an exception" in record.getMessage())


#: FastStream's own lines (per-message, task callbacks) go here: under ``faststream``, which
#: :func:`reverie_canary.shared.runtime.logging.configure` keeps quiet below WARNING unless the level is DEBUG.
_BROKER_LOGGER = logging.getLogger("faststream.canary")
_BROKER_LOGGER.addFilter(_EmptyFetchFilter())


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
    return NatsBroker(
        nats_servers(settings.nats_url),
        name=f"canary-{service}",
        max_reconnect_attempts=-1,
        # nats-py has no reconnect jitter of its own: the wait is drawn once per connection so that
        # the services and probers of a fleet do not all reconnect in step after an outage
        reconnect_time_wait=retry.reconnect_wait_s(),
        connect_timeout=5,
        graceful_timeout=10.0,
        error_cb=nats_error_cb,
        logger=_BROKER_LOGGER,
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


#: The dead-letter reason of each kind of undecodable message (``DeadLetter.reason``, the metric's label).
_REASONS: dict[type, str] = {UnsupportedVersion: "unsupported_version", Oversize: "oversize", Undecodable: "undecodable"}
#: Every dead-letter reason the shared shell gives (:func:`handle` here, ``OrderedBatches`` in
#: shared/runtime/service.py): the ``reason`` values of ``canary_dead_letters_total``, created at 0 at start.
DEAD_LETTER_REASONS: tuple[str, ...] = (*dict.fromkeys(_REASONS.values()), "rejected", "too_large", "gave_up")
#: The ``outcome`` values of ``canary_messages_total``.
MESSAGE_OUTCOMES: tuple[str, ...] = ("ack", "term", "nak")


@dataclass(frozen=True)
class Delivery:
    """Where a message came from: subject, stream position, delivery count."""

    subject: str
    stream_seq: int | None
    deliveries: int
    headers: dict[str, str]


def delivery_of(msg: NatsMessage) -> Delivery:
    """Read subject, stream sequence and delivery count off a JetStream message."""
    raw = msg.raw_message
    seq: int | None = None
    deliveries = 1
    try:
        meta = raw.metadata
        seq = meta.sequence.stream
        deliveries = meta.num_delivered
    except Exception:  # a core NATS message has no JetStream metadata
        pass
    return Delivery(subject=raw.subject, stream_seq=seq, deliveries=deliveries, headers=dict(raw.headers or {}))


class Publisher:
    """Publishes events into JetStream with deterministic ``Nats-Msg-Id``s.

    Raises :class:`reverie_canary.shared.contract.errors.Transient` when NATS does not acknowledge in
    time, so that the caller's message is redelivered and the same id retried.
    """

    def __init__(self, broker: NatsBroker, service: str) -> None:
        self.broker = broker
        self.service = service

    async def publish(self, event: Any, subject: str, msg_id: str, stream: str) -> bool:
        """Publish ``event`` on ``subject``.

        Returns:
            ``True`` if stored, ``False`` if JetStream dropped it as a duplicate.

        An event above ``MESSAGE_MAX_BYTES`` is first fitted (:func:`reverie_canary.shared.contract.bounds.fit`:
        its longest free texts cut, a verdict's references shed), deterministically, so that a
        redelivered input publishes the same bytes under the same id.

        Raises:
            TooLarge: the event is above ``MESSAGE_MAX_BYTES`` even fitted (nothing is sent;
                :func:`handle` dead-letters the input that produced it, reason ``too_large``).
            Transient: NATS unreachable or no acknowledgement within 5 s.
        """
        body = codec.encode(event)
        if len(body) > MESSAGE_MAX_BYTES:
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
            body = smaller
        try:
            ack = await self.broker.publish(
                body,
                subject,
                # the current span's trace context travels with the message (shared/runtime/tracing.py)
                headers=tracing.inject({"Nats-Msg-Id": msg_id, "content-type": "application/json"}),
                stream=stream,
                timeout=PUBLISH_TIMEOUT_S,
            )
        except (NatsError, asyncio.TimeoutError) as exc:  # timeouts, no stream response, connection closed ...
            raise Transient(f"publish to {subject} failed: {exc!r}", subject=subject, msg_id=msg_id) from exc
        return not bool(getattr(ack, "duplicate", False))

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


async def handle(
    msg: NatsMessage,
    *,
    service: str,
    decoder: Codec,
    apply: Callable[[Any, Delivery], Awaitable[None]],
    publisher: Publisher,
    settings: Settings,
) -> None:
    """Decode ``msg`` strictly, check it belongs on its subject, apply it, and ack / term / nak.

    ``apply(event, delivery)`` does the work; it raises :class:`Rejected` or
    :class:`Transient` (see the module table).  This function never raises:
    a service keeps running whatever one message contains.
    """
    log = get_logger(service)
    delivery = delivery_of(msg)
    body: bytes = msg.body
    try:
        event = decoder.decode(body)
        codec.check_origin(delivery.subject, event)
        # one span per handled message, child of the context its headers carry (shared/runtime/tracing.py)
        with tracing.span(f"{service} {type(event).__name__}", headers=delivery.headers,
                          attributes=_span_attributes(event, delivery)):
            await apply(event, delivery)
    except Undecodable as exc:
        reason = _REASONS.get(type(exc), "undecodable")
        log.warning("message_rejected", reason=reason, subject=delivery.subject, error=str(exc))
        await publisher.dead_letter(delivery, body, reason, str(exc))
        await msg.reject()
        metrics.of(service).inc("messages", outcome="term")
        return
    except Rejected as exc:
        reason = "too_large" if isinstance(exc, TooLarge) else "rejected"
        log.warning("message_rejected", reason=reason, subject=delivery.subject, error=str(exc), **_ctx(exc))
        await publisher.dead_letter(delivery, body, reason, str(exc))
        await msg.reject()
        metrics.of(service).inc("messages", outcome="term")
        return
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # Transient, or a bug: never lose the message, never crash
        transient = isinstance(exc, Transient)
        if not transient:
            log.error("handler_error", subject=delivery.subject, error=repr(exc), exc_info=True)
        if delivery.deliveries >= settings.max_deliver:
            log.error("message_gave_up", subject=delivery.subject, deliveries=delivery.deliveries, error=str(exc))
            await publisher.dead_letter(delivery, body, "gave_up", repr(exc))
            await msg.reject()
            metrics.of(service).inc("messages", outcome="term")
            return
        log.warning("message_retry", subject=delivery.subject, deliveries=delivery.deliveries, error=str(exc))
        await msg.nack(delay=retry.redelivery_delay(settings.retry_delay_s, delivery.deliveries))
        metrics.of(service).inc("messages", outcome="nak")
        return
    await msg.ack()
    metrics.of(service).inc("messages", outcome="ack")


def _ctx(exc: Exception) -> dict[str, Any]:
    """An error's context for the log line, minus the keys the line already has."""
    return {k: v for k, v in getattr(exc, "context", {}).items()
            if isinstance(v, str | int | float) and k not in ("subject", "reason", "error", "event")}
