"""The thin shell of a service: FastStream app, one NATS connection, its consumers and background loops.

Each service module builds one :class:`Shell`, declares its durable consumers with
:meth:`Shell.consume` (the one way a message comes in:
:class:`reverie_canary.shared.runtime.consumer.Consumer`, settled by the one table of
:mod:`reverie_canary.shared.runtime.settle`), its timers with :meth:`Shell.background`,
and exposes ``create_app(settings) -> FastStream``.  ``canary run <service>`` runs one
app; ``canary up`` and ``canary demo`` run all five in one process.

A service keeps one NATS connection, its broker's (:attr:`Shell.connection`): its consumers
pull on it, its publisher publishes on it, its log reads and KV bucket use it.  At start one
short-lived connection checks the credential, the permissions, the streams and the durable
consumers (:func:`reverie_canary.shared.runtime.preflight.at_start`: it provokes permission
refusals on purpose and reads them from its own error callback).

The shell also serves the service's ``/metrics``, ``/healthz`` and ``/readyz``
(:mod:`reverie_canary.shared.runtime.metrics`) from before the broker connects until it
stopped, and watches its NATS and Redis connections (:mod:`reverie_canary.shared.runtime.health`):
an outage is logged once when it starts and once, with its length, when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import redis.asyncio as aioredis
from faststream import FastStream
from faststream.exceptions import IncorrectState
from nats.errors import Error as NatsError
from nats.js.errors import APIError
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import AuthenticationError as RedisAuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError as RedisNoPermissionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from reverie_canary.shared.contract.codec import Codec
from reverie_canary.shared.contract.errors import ConfigError, Transient
from reverie_canary.shared.runtime import metrics, preflight, retry, streams, tracing
from reverie_canary.shared.runtime.aio import stop_task
from reverie_canary.shared.runtime.broker import Publisher, make_broker, nats_error_cb
from reverie_canary.shared.runtime.consumer import Apply, Consumer, Fold
from reverie_canary.shared.runtime.health import REDIS_WATCH_DOWN_S, REDIS_WATCH_S, Link
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.logging import masked_url
from reverie_canary.shared.runtime.retry import NATS_FAULTS, REDIS_FAULTS
from reverie_canary.shared.runtime.settings import Settings, nats_servers
from reverie_canary.shared.runtime.settle import DEAD_LETTER_REASONS, MESSAGE_OUTCOMES
from reverie_canary.shared.runtime.streams import ConsumerSpec
from reverie_canary.shared.runtime.tls import nats_tls, redis_tls


async def nats_connect(settings: Settings, **kwargs: Any) -> nats.NATS:
    """A plain nats-py connection with the settings' credential and TLS (tools, audits, tests)."""
    kwargs.setdefault("error_cb", nats_error_cb)
    tls = nats_tls(settings)
    if tls is not None:
        kwargs.setdefault("tls", tls)
    if settings.nats_user:
        kwargs.setdefault("user", settings.nats_user)
        kwargs.setdefault("password", settings.nats_password)
    kwargs.setdefault("connect_timeout", 5)
    kwargs.setdefault("max_reconnect_attempts", 3)
    return await nats.connect(nats_servers(settings.nats_url), **kwargs)


async def nats_connect_once(settings: Settings) -> nats.NATS:
    """One connection attempt for a command-line tool or a read model: no reconnect, errors kept quiet.

    Raises:
        ConnectionError: NATS could not be reached or refused the credential; the message names
            the URL and the user (never the password).
    """

    async def quiet(_exc: Exception) -> None:
        return None

    try:
        return await nats_connect(settings, allow_reconnect=False, error_cb=quiet)
    except NATS_FAULTS as exc:  # NoServersError, OSError, authorization
        raise ConnectionError(f"cannot connect to NATS at {settings.nats_url} as "
                              f"{settings.nats_user or '(no user)'}: {exc!r}") from exc


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


#: Seconds a pooled Redis connection may sit idle before redis-py checks it with a PING.
REDIS_HEALTH_CHECK_S = 5
#: Seconds a Redis command may wait for its reply (none of ours blocks on the server).
REDIS_COMMAND_TIMEOUT_S = 10.0


def redis_client(settings: Settings) -> aioredis.Redis:
    """An asyncio Redis client for ``settings.redis_url`` (bytes in, bytes out) that survives a Redis restart.

    ``rediss://`` URLs get TLS with the settings' CA and client certificate
    (:func:`reverie_canary.shared.runtime.tls.redis_tls`).

    A pooled connection idle for :data:`REDIS_HEALTH_CHECK_S` is checked with a
    PING before use, and a command that meets a dead connection (Redis restarted
    since) is sent again on a new one, 3 times at most with jittered backoff
    (50 ms .. 0.5 s): the first command after a restart does not fail (a field
    report: the notifier's first use of an old connection failed once).
    During an outage a command fails after about 1 s.
    """
    return aioredis.from_url(
        settings.redis_url,
        **_redis_password(settings),
        **_REDIS_CONNECT,
        **redis_tls(settings),
        socket_connect_timeout=5,
        socket_timeout=REDIS_COMMAND_TIMEOUT_S,
        health_check_interval=REDIS_HEALTH_CHECK_S,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries=3),
        retry_on_error=[RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError],
    )


def redis_watch_client(settings: Settings) -> aioredis.Redis:
    """A Redis client that says at once when Redis does not answer: no retries, 1 s timeouts.

    The service shell pings with it (:data:`reverie_canary.shared.runtime.health.REDIS_WATCH_S`):
    the services' own clients (:func:`redis_client`) ride through a short outage
    by retrying, which would hide it from the log and from ``/readyz``.
    """
    return aioredis.from_url(settings.redis_url, **_redis_password(settings), **_REDIS_CONNECT, **redis_tls(settings),
                             socket_connect_timeout=1,
                             socket_timeout=1,
                             retry=Retry(NoBackoff(), 0))


def _redis_password(settings: Settings) -> dict[str, str]:
    """``REDIS_PASSWORD`` (or ``..._FILE``) for a URL that names only the user; redis-py lets the URL's own win."""
    return {"password": settings.redis_password} if settings.redis_password else {}


#: Options of every Redis connection: no ``CLIENT SETINFO`` on connect (redis-py's default), which
#: the per-service users of ``shared/redis/users.acl`` may not run (Redis 7.0 does not know it at all)
#: and which would fill the server's ACL LOG with denials.
#: (redis-py 7.1+ calls it ``driver_info``, older ones ``lib_name`` / ``lib_version``.)
_REDIS_CONNECT: dict[str, Any] = (
    {"driver_info": None} if "driver_info" in inspect.signature(aioredis.connection.AbstractConnection.__init__).parameters
    else {"lib_name": None, "lib_version": None})


def redis_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` says that Redis refused this credential, rather than that it is unreachable."""
    return isinstance(exc, (RedisAuthenticationError, RedisNoPermissionError))


def _user_of(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).username or "(none)"


def redis_refused(settings: Settings, service: str, exc: BaseException) -> ConfigError:
    """The one-line error of a service whose Redis credential is refused (no password in it)."""
    reason = (str(exc).splitlines() or [type(exc).__name__])[0]
    return ConfigError(f"{service}: Redis at {masked_url(settings.redis_url)} refused user {_user_of(settings.redis_url)}"
                       f" ({reason}): set REDIS_URL to redis://<user>:<password>@host (shared/redis/users.acl)")


async def check_redis_credential(settings: Settings, service: str) -> None:
    """Refuse to start when Redis refuses ``settings.redis_url``'s credential (one PING, 1 s).

    An unreachable Redis is not refused here: the service starts, its watch logs the
    outage and its stores retry (docs/concepts/health.md).

    Raises:
        ConfigError: a wrong password, an unknown or disabled user, no user where the
            server has no default user, or a user that may not PING.
    """
    client = redis_watch_client(settings)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        if redis_refusal(exc):
            raise redis_refused(settings, service, exc) from None
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()


#: Longest wait for one background loop to stop at shutdown (seconds).
LOOP_STOP_S = 10.0
def known_series(service: str, settings: Settings) -> list[tuple[str, dict[str, str]]]:
    """Every label set, known at start, of ``service``'s counters that alerts or the dashboard rate.

    A counter series that appears only with its first event has no earlier
    sample, so ``increase()`` and ``rate()`` see no rise and an alert on it
    (``CanaryMessagesDeadLettered``, ``CanaryTasksExpiredUnprobed``) does not
    fire for that event; the :class:`Shell` creates these at 0 when it is built.
    Label sets that are known only later (providers) come with their events;
    the notifier creates its channels' series itself (services/notifier/service.py).

    Returns:
        ``(family key, labels)`` pairs (``service`` is filled in by the series).
    """
    from typing import get_args

    from reverie_canary.shared.contract.events import UNPLANNED_CAUSES, CycleVerdictKind, DecisionAction

    out: list[tuple[str, dict[str, str]]] = [("messages", {"outcome": o}) for o in MESSAGE_OUTCOMES]
    out += [("dead_letters", {"reason": r}) for r in DEAD_LETTER_REASONS]
    for model in settings.models:
        if service == "discovery":
            out += [("cycles_started", {"model": model}), ("tasks_published", {"model": model})]
            out += [("cycles_unplanned", {"model": model, "reason": cause}) for cause in UNPLANNED_CAUSES]
        elif service == "prober":
            out.append(("tasks_expired", {"model": model}))
        elif service == "judge":
            out += [("decisions", {"model": model, "action": a}) for a in get_args(DecisionAction)]
            out += [("verdicts", {"model": model, "verdict": v}) for v in get_args(CycleVerdictKind)]
        elif service == "router":
            out.append(("snapshots_published", {"model": model}))
    if service == "prober":
        out += [("probe_seconds", {"kind": kind}) for kind in settings.kinds]
    return out


class Shell:
    """One service's FastStream app and the pieces every handler needs.

    Args:
        name: the service (``judge`` ...): its NATS connection name, logger and series.
        settings: the settings.
        uses_redis: the service keeps state in Redis, so ``/readyz`` needs Redis too.
    """

    def __init__(self, name: str, settings: Settings, *, uses_redis: bool = True) -> None:
        self.name = name
        self.settings = settings
        self.metrics = metrics.of(name)
        for key, labels in known_series(name, settings):  # before the endpoint serves: increase() sees event one
            self.metrics.touch(key, **labels)
        self.nats_link = Link(name, "nats", masked_url(settings.nats_url), self.metrics)
        self.redis_link = Link(name, "redis", masked_url(settings.redis_url), self.metrics) if uses_redis else None
        self.broker = make_broker(settings, name,
                                  callbacks=self.nats_link.nats_callbacks(lambda: self.broker.connection, "broker"))
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
        self._specs: list[ConsumerSpec] = []
        self._consumers: list[Consumer] = []
        self._endpoint: metrics.Endpoint | None = None
        self._health_redis: aioredis.Redis | None = None
        self._watch: asyncio.Task[None] | None = None
        self._state = "starting"
        #: What ``/readyz`` adds to a ready service's line (its role now, e.g. a judge standing by); "" for nothing.
        self.note: Callable[[], str] = lambda: ""

    @property
    def connection(self) -> nats.NATS:
        """The service's one NATS connection (the broker's; connected from start to stop)."""
        return self.broker.connection

    def on_startup(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` before the broker connects (open clients here)."""
        self._startup.append(fn)

    def on_shutdown(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run ``fn`` once the broker stopped and in-flight handlers finished (close clients here)."""
        self._shutdown.append(fn)

    def consume(self, spec: ConsumerSpec, decoder: Codec, apply: Apply | None = None, *, fold: Fold | None = None,
                workers: int | Callable[[], int] = 1, batch: int = 1,
                gate: Callable[[], Awaitable[bool]] | None = None,
                generation: Callable[[], int] = lambda: 0) -> Consumer:
        """Read the durable ``spec`` once the broker is connected (:class:`Consumer` says how).

        Args:
            apply: handle one message, up to ``workers`` at once (``1``: in log order).
            fold: apply ``batch`` messages at a time in stream order, while ``gate()`` allows.
        """
        consumer = Consumer(self.name, lambda: self.connection, spec, decoder, publisher=self.publisher,
                            series=self.metrics, log=self.log, max_deliver=self.settings.max_deliver,
                            retry_delay_s=self.settings.retry_delay_s, apply=apply, fold=fold, workers=workers,
                            batch=batch, gate=gate, generation=generation)
        self._specs.append(spec)
        self._consumers.append(consumer)
        self.metrics.touch("consumer_pending", stream=spec.stream, durable=spec.durable)
        self._loops.append(consumer.run)
        return consumer

    def background(self, loop: Callable[[], Awaitable[None]]) -> None:
        """Run ``loop`` as a task once the broker is connected; cancel it on shutdown."""
        self._loops.append(loop)

    # -- readiness and scrape-time series (metrics.Source) -------------------------------

    async def readiness(self) -> list[str]:
        """Why this service is not ready: starting or stopping, NATS or Redis not answering (empty: ready).

        NATS must answer a PING and Redis a PING within 1 s each.
        """
        problems: list[str] = []
        if self._state != "running":
            problems.append(self._state)
        problem = self.nats_link.problem()
        if problem is None and self._state == "running":
            try:
                await asyncio.wait_for(self.broker.connection.flush(timeout=1), timeout=1.5)
            except NATS_FAULTS as exc:  # nats-py timeouts, connection closed or reconnecting
                problem = f"nats {self.nats_link.target} does not answer ({type(exc).__name__})"
        if problem:
            problems.append(problem)
        if self.redis_link is not None:
            await self._ping_redis()
            if self.redis_link.problem():
                problems.append(self.redis_link.problem())  # type: ignore[arg-type]
        self.metrics.set("ready", 0 if problems else 1)
        return problems

    async def refresh(self) -> None:
        """Read each durable consumer's pending counts from JetStream (1 s each at most)."""
        if self._state != "running" or not self.nats_link.up:
            return
        try:
            js = self.broker.connection.jetstream()
        except IncorrectState:  # the broker before it connected
            return
        for spec in self._specs:
            labels = {"stream": spec.stream, "durable": spec.durable}
            try:
                info = await asyncio.wait_for(js.consumer_info(spec.stream, spec.durable), timeout=1.0)
            except NATS_FAULTS:  # not reachable now: no value rather than a stale one
                for key in ("consumer_pending", "consumer_ack_pending", "consumer_redelivered"):
                    self.metrics.remove(key, **labels)
                continue
            self.metrics.set("consumer_pending", info.num_pending or 0, **labels)
            self.metrics.set("consumer_ack_pending", info.num_ack_pending or 0, **labels)
            self.metrics.set("consumer_redelivered", info.num_redelivered or 0, **labels)

    async def _ping_redis(self) -> None:
        assert self.redis_link is not None
        if self._health_redis is None:
            return
        try:
            await asyncio.wait_for(self._health_redis.ping(), timeout=2.0)
        except REDIS_FAULTS as exc:
            # the outage began after the last answer, at most one watch interval ago
            self.redis_link.lost("ping", f"{type(exc).__name__}: {exc}", since=self.redis_link.last_ok)
            return
        self.redis_link.restored("ping")
        self.redis_link.connected()

    async def _watch_redis(self) -> None:
        """Ping Redis for the life of the service, so that an outage is logged when it happens."""
        while True:
            await self._ping_redis()
            self.metrics.set("ready", 1 if self._state == "running" and self.nats_link.up
                             and (self.redis_link is None or self.redis_link.up) else 0)
            await asyncio.sleep(REDIS_WATCH_S if self.redis_link is None or self.redis_link.up
                                else REDIS_WATCH_DOWN_S)

    # -- lifecycle ------------------------------------------------------------------------

    async def _on_startup(self) -> None:
        self.metrics.set("ready", 0)
        tracing.configure(self.settings.traces, self.name)
        self._endpoint = await metrics.acquire(self.settings, self.name)
        if self._endpoint is not None:
            self._endpoint.sources.append(self)
            if self._endpoint.users == 1:
                self.log.info("metrics_serving", url=self._endpoint.url, healthz=f"{self._endpoint.base_url}/healthz",
                              readyz=f"{self._endpoint.base_url}/readyz")
        if self.redis_link is not None:
            await check_redis_credential(self.settings, self.name)
        # a credential or setting that cannot do this service's job refuses here, before any message is taken
        await preflight.at_start(self.settings, self.name, self._specs, self.log)
        await self.broker.connect()  # the service's one connection: its startup functions read and write on it
        if self.redis_link is not None:
            self._health_redis = redis_watch_client(self.settings)
            self._watch = asyncio.create_task(self._watch_redis(), name=f"{self.name}-redis-watch")
        for fn in self._startup:
            await fn()

    async def _after_startup(self) -> None:
        self.nats_link.connected()
        for consumer in self._consumers:  # every durable exists before the service says it runs
            await consumer.bind()
        self._state = "running"
        self.metrics.set("ready", 1 if self.nats_link.up and (self.redis_link is None or self.redis_link.up) else 0)
        for loop in self._loops:
            self._tasks.append(asyncio.create_task(self._guard(loop), name=f"{self.name}-loop"))

    async def _guard(self, loop: Callable[[], Awaitable[None]]) -> None:
        """Run a background loop for the life of the service: restart it after a crash (:data:`retry.LOOP`)."""
        crashes = 0
        while True:
            try:
                await loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                crashes += 1
                delay = retry.LOOP.delay(crashes)
                self.log.error("background_loop_crashed", restart_in_s=round(delay, 2), exc_info=True)
            await asyncio.sleep(delay)

    async def _stop_loops(self) -> None:
        """Cancel the background loops and wait for each, at most ``LOOP_STOP_S`` (:func:`reverie_canary.shared.runtime.aio.stop_task`).

        A single ``cancel()`` is not enough: Python 3.11's ``asyncio.wait_for``
        swallows it when the awaited future finishes at the same moment, and a
        loop that lost its cancellation ran on while the shutdown waited for it
        forever (the router-restart hang).
        """
        self._state = "stopping"
        self.metrics.set("ready", 0)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            if not await stop_task(task, LOOP_STOP_S):
                self.log.error("background_loop_not_stopped", loop=task.get_name(), waited_s=LOOP_STOP_S)
        self._tasks.clear()

    async def _after_shutdown(self) -> None:
        try:
            for fn in self._shutdown:
                await fn()
        finally:
            if self._watch is not None:
                self._watch.cancel()
                if not await stop_task(self._watch, LOOP_STOP_S):
                    self.log.error("background_loop_not_stopped", loop=self._watch.get_name(), waited_s=LOOP_STOP_S)
                self._watch = None
            if self._health_redis is not None:
                with contextlib.suppress(Exception):
                    await self._health_redis.aclose()
                self._health_redis = None
            if self._endpoint is not None:
                with contextlib.suppress(ValueError):
                    self._endpoint.sources.remove(self)
                self._endpoint = None
                await metrics.release(self.name)
