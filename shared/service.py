"""The thin shell of a service: FastStream app, broker, durable subscriptions, background loops.

Each service module builds one :class:`Shell`, registers its handlers with
:meth:`Shell.subscribe` (strict decoding, the ack mapping of
:func:`reverie_canary.shared.broker.handle`) and its timers with :meth:`Shell.background`,
and exposes ``create_app(settings) -> FastStream``.  ``canary run <service>``
runs one app; ``canary up`` and ``canary demo`` run all five in one process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import redis.asyncio as aioredis
from faststream import AckPolicy, FastStream
from faststream.nats import JStream, NatsMessage, PullSub
from nats.errors import Error as NatsError
from nats.js.errors import APIError

from reverie_canary.shared import streams
from reverie_canary.shared.aio import stop_task
from reverie_canary.shared.broker import Delivery, Publisher, handle, make_broker, nats_error_cb
from reverie_canary.shared.codec import Codec
from reverie_canary.shared.errors import Transient
from reverie_canary.shared.logging import get as get_logger
from reverie_canary.shared.settings import Settings
from reverie_canary.shared.streams import ConsumerSpec


async def nats_connect(settings: Settings, **kwargs: Any) -> nats.NATS:
    """A plain nats-py connection with the settings' credential (tools, audits, tests)."""
    kwargs.setdefault("error_cb", nats_error_cb)
    if settings.nats_user:
        kwargs.setdefault("user", settings.nats_user)
        kwargs.setdefault("password", settings.nats_password)
    kwargs.setdefault("connect_timeout", 5)
    kwargs.setdefault("max_reconnect_attempts", 3)
    return await nats.connect(settings.nats_url, **kwargs)


async def ensure_streams(settings: Settings, *, strict: bool = False) -> None:
    """Create or update the streams and KV bucket with a short-lived connection.

    A service whose credential may not manage streams (``shared/nats/server.conf``)
    logs that and goes on: ``canary init`` (or the demo) created them as admin.

    Raises:
        Transient: with ``strict``, when the server refuses (``canary init``).
    """
    log = get_logger("streams")
    nc = await nats_connect(settings)
    try:
        await streams.ensure(nc.jetstream(), settings)
    except (APIError, NatsError) as exc:
        if strict:
            raise Transient(f"streams not created or updated: {exc}") from exc
        log.warning("streams_not_ensured", error=str(exc))
    finally:
        await nc.close()


def redis_client(settings: Settings) -> aioredis.Redis:
    """An asyncio Redis client for ``settings.redis_url`` (bytes in, bytes out)."""
    return aioredis.from_url(settings.redis_url, socket_connect_timeout=5, health_check_interval=30)


async def _raw_body(msg: NatsMessage) -> bytes:
    """FastStream decoder that does not parse: :func:`reverie_canary.shared.broker.handle` decodes strictly.

    FastStream's default decoder runs ``json.loads`` on every body before the
    handler; a deeply nested document then raised RecursionError there, outside
    the handler's error mapping, and the message was retried instead of refused.
    """
    return msg.body


#: Longest wait for one background loop to stop at shutdown (seconds).
LOOP_STOP_S = 10.0


class Shell:
    """One service's FastStream app and the pieces every handler needs."""

    def __init__(self, name: str, settings: Settings) -> None:
        self.name = name
        self.settings = settings
        self.broker = make_broker(settings, name)
        self.publisher = Publisher(self.broker, name)
        self.log = get_logger(name)
        self.app = FastStream(self.broker, logger=None)
        self._loops: list[Callable[[], Awaitable[None]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.app.on_startup(self._on_startup)
        self.app.after_startup(self._after_startup)
        self.app.on_shutdown(self._stop_loops)
        self.app.after_shutdown(self._after_shutdown)
        self._startup: list[Callable[[], Awaitable[None]]] = []
        self._shutdown: list[Callable[[], Awaitable[None]]] = []

    def on_startup(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` before the broker connects (open clients here)."""
        self._startup.append(fn)

    def on_shutdown(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` once the broker stopped and in-flight handlers finished (close clients here)."""
        self._shutdown.append(fn)

    def subscribe(self, spec: ConsumerSpec, decoder: Codec, apply: Callable[[Any, Delivery], Awaitable[None]],
                  *, batch: int = 1, workers: int = 1) -> None:
        """Bind the durable pull consumer ``spec`` and handle each message with ``apply``.

        Args:
            batch: messages fetched at a time and handled together (FastStream's
                pull loop waits for the whole batch); 1 where order matters.
            workers: handle up to this many messages at once, fetching one at a
                time as workers free up, so one slow message does not hold up
                the others.  FastStream's queue in front of the workers holds at
                most ``workers`` messages, so a fetched message waits at most
                one handler's time; the consumer's ``ack_wait`` must cover that
                (the over-fetching of ag2ai/faststream#2563 came from an
                unbounded queue).
        """
        extra: dict[str, Any] = {"max_workers": workers} if workers > 1 else {}
        extra["decoder"] = _raw_body

        @self.broker.subscriber(
            spec.filter_subjects[0],
            stream=JStream(spec.stream, declare=False),
            durable=spec.durable,
            pull_sub=PullSub(batch_size=1 if workers > 1 else batch, timeout=1.0),
            config=spec.config(),
            ack_policy=AckPolicy.MANUAL,
            title=f"{self.name}:{spec.durable}",
            **extra,
        )
        async def _handler(msg: NatsMessage) -> None:
            await handle(msg, service=self.name, decoder=decoder, apply=apply,
                         publisher=self.publisher, settings=self.settings)

    def background(self, loop: Callable[[], Awaitable[None]]) -> None:
        """Run ``loop`` as a task once the broker is connected; cancel it on shutdown."""
        self._loops.append(loop)

    async def _on_startup(self) -> None:
        await ensure_streams(self.settings)
        for fn in self._startup:
            await fn()

    async def _after_startup(self) -> None:
        for loop in self._loops:
            self._tasks.append(asyncio.create_task(self._guard(loop), name=f"{self.name}-loop"))

    async def _guard(self, loop: Callable[[], Awaitable[None]]) -> None:
        """Run a background loop for the life of the service: restart it after a crash (1 s .. 30 s)."""
        delay = 1.0
        while True:
            try:
                await loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.error("background_loop_crashed", restart_in_s=delay, exc_info=True)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def _stop_loops(self) -> None:
        """Cancel the background loops and wait for each, at most ``LOOP_STOP_S`` (:func:`reverie_canary.shared.aio.stop_task`).

        A single ``cancel()`` is not enough: Python 3.11's ``asyncio.wait_for``
        swallows it when the awaited future finishes at the same moment, and a
        loop that lost its cancellation ran on while the shutdown waited for it
        forever (the router-restart hang).
        """
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            if not await stop_task(task, LOOP_STOP_S):
                self.log.error("background_loop_not_stopped", loop=task.get_name(), waited_s=LOOP_STOP_S)
        self._tasks.clear()

    async def _after_shutdown(self) -> None:
        for fn in self._shutdown:
            await fn()
