"""Run service apps in this process: one (``canary run X``) or all five (``canary up``, the demo)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import structlog
from faststream import FastStream
from nats.js.errors import NotFoundError

from reverie_canary.canary import loops
from reverie_canary.shared.contract.errors import CanaryError
from reverie_canary.shared.runtime import metrics, retry, streams
from reverie_canary.shared.runtime.aio import stop_task, wait_event
from reverie_canary.shared.runtime.auth import redis_url_for, redis_url_without_credential
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.logging import masked_url
from reverie_canary.shared.runtime.retry import NATS_FAULTS, REDIS_FAULTS
from reverie_canary.shared.runtime.settings import SERVICE_NAMES, Settings

SERVICES = SERVICE_NAMES
#: Longest start of one service (connect, streams, Redis, first fetch), seconds.
START_S = 60.0
#: Longest stop of one service (in-flight handlers get the broker's 10 s, loops 10 s each), seconds.
STOP_S = 30.0


class ServiceStuck(CanaryError, RuntimeError):
    """A service did not start within :data:`START_S`."""


def factory(name: str) -> Callable[[Settings], FastStream]:
    """The ``create_app`` of service ``name``.

    Raises:
        ValueError: unknown service name.
    """
    if name == "discovery":
        from reverie_canary.services.discovery.service import create_app
    elif name == "prober":
        from reverie_canary.services.prober.service import create_app
    elif name == "judge":
        from reverie_canary.services.judge.service import create_app
    elif name == "router":
        from reverie_canary.services.router.service import create_app
    elif name == "notifier":
        from reverie_canary.services.notifier.service import create_app
    else:
        raise ValueError(f"unknown service {name!r}; services: {', '.join(SERVICES)}")
    return create_app


@contextlib.asynccontextmanager
async def running(settings: Settings, names: tuple[str, ...] | list[str] = SERVICES,
                  *, probers: int = 1, passwords: dict[str, str] | None = None,
                  redis_passwords: dict[str, str] | None = None) -> AsyncIterator[list[FastStream]]:
    """Start the named services (each its own broker connection) and stop them on exit.

    Args:
        settings: shared settings.
        names: services to start; discovery starts last (:func:`start_order`).
        probers: how many prober replicas (one shared durable).
        passwords: user -> password; each service then connects as its own
            NATS user (``shared/nats/server.conf``).
        redis_passwords: Redis user -> password; each service then connects to
            ``settings.redis_url`` as its own Redis user (``shared/redis/users.acl``),
            the prober with no credential (it keeps no state).

    Raises:
        ServiceStuck: when a service does not start within :data:`START_S`.
            A service that does not stop within :data:`STOP_S` is logged
            (``service_not_stopped``) and left behind, so that the others stop.
    """
    apps: list[tuple[str, FastStream]] = []
    settings = metrics_ports_of(settings, names)
    try:
        for name in start_order(names):
            own = settings.replace(nats_user=name, nats_password=passwords[name]) if passwords else settings
            if redis_passwords:
                own = own.replace(redis_url=redis_url_for(settings.redis_url, name, redis_passwords[name])
                                  if name in redis_passwords else redis_url_without_credential(settings.redis_url))
            replicas = probers if name == "prober" else 1
            for i in range(replicas):
                if replicas > 1:  # each replica signs its results with an id of its own (ProbeResult.prober)
                    base = settings.prober_id or f"{socket.gethostname()}-{os.getpid()}"
                    own = own.replace(prober_id=f"{base}-p{i + 1}")
                # tasks the app starts (its subscribers, nats-py's reader) carry the service's
                # name into every log line they cause, a library's lines too
                with structlog.contextvars.bound_contextvars(service=name):
                    app = factory(name)(own)
                    try:
                        async with asyncio.timeout(START_S):
                            await app.start()
                    except BaseException as exc:
                        with contextlib.suppress(Exception):
                            async with asyncio.timeout(STOP_S):
                                # what did start (a connection, a loop, a metrics port) must not outlive us
                                await app.stop()
                        if isinstance(exc, TimeoutError):
                            raise ServiceStuck(f"the {name} service did not start within {START_S:g} s (NATS at "
                                               f"{masked_url(settings.nats_url)} and Redis reachable?)") from None
                        raise
                apps.append((name, app))
        yield [app for _, app in apps]
    finally:
        for name, app in reversed(apps):
            try:
                async with asyncio.timeout(STOP_S):
                    await app.stop()
            except TimeoutError:
                get_logger("runtime").error("service_not_stopped", service=name, waited_s=STOP_S)
            except Exception:
                get_logger("runtime").warning("service_stop_failed", service=name, exc_info=True)


def start_order(names: tuple[str, ...] | list[str]) -> list[str]:
    """``names`` with discovery last: the cycle clock starts once its probers, judge and router run.

    Discovery joins the current cycle the moment it starts (``next_cycle``): started first, it plans a
    cycle while the probers are still starting, and with short cycles (the demo's 4 s) that cycle
    closes with every result missing.  The others only consume durable streams, so their order
    among themselves does not matter.
    """
    return [n for n in names if n != "discovery"] + [n for n in names if n == "discovery"]


def metrics_ports_of(settings: Settings, names: tuple[str, ...] | list[str]) -> Settings:
    """``settings`` with one metrics port per service when ``metrics_port`` names one port for several.

    ``CANARY_METRICS_PORT=P`` with ``canary up``: discovery on P, prober P+1,
    judge P+2, router P+3, notifier P+4 (:data:`SERVICES` order), unless
    ``metrics_ports`` names a service's port itself.
    """
    distinct = list(dict.fromkeys(names))
    if settings.metrics_port <= 0 or len(distinct) < 2:
        return settings
    ports = {name: settings.metrics_port + SERVICES.index(name) for name in distinct if name in SERVICES}
    return settings.replace(metrics_ports={**ports, **settings.metrics_ports})


async def _ignore(exc: Exception) -> None:
    return None


async def wait_for_dependencies(settings: Settings, stop: asyncio.Event, *, redis_needed: bool,
                                streams_needed: bool = True, names: tuple[str, ...] | list[str] = (),
                                waiting_endpoints: list[metrics.Endpoint] | tuple = ()) -> bool:
    """Wait until NATS (and Redis, and the streams, when needed) are there; ``False`` if stopped first.

    Services start in any order in a deployment (compose starts containers
    together): a service waits for its bus instead of dying, and says so, in
    its log and on the ``/readyz`` of ``waiting_endpoints`` (503 with the problems).
    A Redis that refuses the credential is not waited for (``names``: the services, for the message),
    nor a credential NATS refuses: either is said at once.

    Raises:
        ConfigError: Redis refused the credential of ``settings.redis_url``.
        reverie_canary.shared.runtime.preflight.NatsRefused: NATS refused the credential (Authorization Violation).
    """
    from reverie_canary.shared.runtime.logging import get as get_logger
    from reverie_canary.shared.runtime.preflight import NatsRefused, refusal
    from reverie_canary.shared.runtime.service import nats_connect, redis_client, redis_refusal, redis_refused

    log = get_logger("runtime")
    attempt, said = 0, 0.0
    while not stop.is_set():
        problems = []
        try:
            # one attempt (nats-py reads 0 as "forever"), errors kept quiet: this loop reports
            nc = await asyncio.wait_for(
                nats_connect(settings, max_reconnect_attempts=1, allow_reconnect=False, connect_timeout=2,
                             error_cb=_ignore), timeout=5)
            try:
                if streams_needed:
                    for name in (streams.LOG, streams.TASKS, streams.DEADLETTER):
                        try:
                            await nc.jetstream().stream_info(name)
                        except NotFoundError:
                            problems.append(f"stream {name} does not exist: run `canary init` (admin credential)")
                            break
            finally:
                await nc.close()
        except NATS_FAULTS as exc:  # unreachable or timing out: keep waiting, say why; a refused credential: stop
            why = refusal(exc)
            if why:
                raise NatsRefused(f"{why} (NATS user {settings.nats_user or '(none)'} at "
                                  f"{masked_url(settings.nats_url)})") from None
            problems.append(f"NATS at {masked_url(settings.nats_url)}: {type(exc).__name__}: {exc}")
        if redis_needed:
            client = redis_client(settings)
            try:
                await client.ping()
            except REDIS_FAULTS as exc:
                if redis_refusal(exc):  # a wrong credential does not heal by waiting: refuse to start
                    raise redis_refused(settings, "+".join(dict.fromkeys(names)) or "canary", exc) from None
                problems.append(f"Redis at {masked_url(settings.redis_url)}: {type(exc).__name__}")
            finally:
                await client.aclose()
        for endpoint in waiting_endpoints:
            endpoint.status = ("waiting for " + "; ".join(problems)) if problems else "starting"
        if not problems:
            return True
        if time.monotonic() - said > 10:
            log.warning("waiting_for_dependencies", problems=problems)
            said = time.monotonic()
        attempt += 1
        await wait_event(stop, retry.DEPENDENCY.delay(attempt))
    return False


async def serve_forever(settings: Settings, names: tuple[str, ...] | list[str], *, probers: int = 1) -> None:
    """Wait for NATS and Redis, then run services until SIGINT, SIGTERM or SIGHUP.

    Each service's ``/healthz`` and ``/readyz`` answer from the start: while the
    dependencies are missing ``/readyz`` says 503 and which ones.  Once the
    services run it logs one start line (``started``: services, NATS user,
    models, mode, next cycle at) and then one line per closed cycle
    (``cycle_closed``, :func:`announce_cycles`).

    Raises:
        ConfigError: a metrics port cannot be bound; a setting or the credential
            cannot do a service's job (:mod:`reverie_canary.shared.runtime.preflight`), said in one line.
    """
    from reverie_canary.shared.contract.errors import ConfigError
    from reverie_canary.shared.runtime.preflight import settings_problem

    for name in dict.fromkeys(names):  # said at once, before any wait for NATS or Redis
        problem = settings_problem(settings, name)
        if problem:
            raise ConfigError(problem)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal closed
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    settings = metrics_ports_of(settings, names)
    held: list[str] = []
    try:
        endpoints = []
        for name in dict.fromkeys(names):
            endpoint = await metrics.acquire(settings, name)
            held.append(name)
            if endpoint is not None:
                endpoints.append(endpoint)
        if not await wait_for_dependencies(settings, stop, redis_needed=set(names) != {"prober"}, names=names,
                                           waiting_endpoints=endpoints):
            return
        async with running(settings, names, probers=probers):
            await announce_start(settings, list(dict.fromkeys(names)), probers)
            lines = asyncio.create_task(announce_cycles(settings), name="cycle-lines")
            try:
                await stop.wait()
            finally:
                lines.cancel()
                await stop_task(lines, 5.0)
    finally:
        for name in held:
            await metrics.release(name)


class NatsUnanswered(CanaryError, RuntimeError):
    """NATS did not answer (refused connections, timeouts) within ``canary init``'s wait; the last problem is named."""


#: Seconds one ``canary init`` attempt may take (connect, every stream and the KV bucket).
INIT_ATTEMPT_S = 15.0


async def initialise(settings: Settings, wait_s: float) -> None:
    """Create or update the streams and the KV bucket (``canary init``); retry only what can heal.

    Connection refused, no servers and timeouts are retried (0.5 s doubling to
    5 s) until ``wait_s`` seconds have passed.  A refusal no retry heals ends at
    once, at its first sight: the credential refused (``Authorization
    Violation``), a permission the credential lacks (the server's permissions
    violation arrives long before the request would time out), or the server
    refusing a stream configuration.

    Raises:
        reverie_canary.shared.runtime.preflight.NatsRefused: the credential is refused.
        reverie_canary.shared.runtime.preflight.PermissionMissing: naming the JetStream API subject refused.
        ConfigError: the server refused a stream or bucket configuration (its reason).
        NatsUnanswered: nothing healed within ``wait_s``.
    """
    import nats
    from nats.js.errors import APIError

    from reverie_canary.shared.contract.errors import ConfigError
    from reverie_canary.shared.runtime.preflight import NatsRefused, PermissionMissing, Violations, refusal
    from reverie_canary.shared.runtime.service import nats_connect

    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    attempt, last = 0, "no answer"
    candidates = [f"$JS.API.{verb}.{name}" for name in (*(c.name for c in streams.stream_configs(settings)),
                                                         f"KV_{streams.ROUTING_BUCKET}")
                  for verb in ("STREAM.CREATE", "STREAM.UPDATE", "STREAM.INFO")]
    user = repr(settings.nats_user) if settings.nats_user else "(none)"
    while True:
        violations = Violations()
        try:
            left = max(0.5, min(5.0, deadline - loop.time()))
            nc = await asyncio.wait_for(
                nats_connect(settings, error_cb=violations.record, allow_reconnect=False, max_reconnect_attempts=1,
                             reconnect_time_wait=0.1, connect_timeout=min(2.0, left)), timeout=left)
        except NATS_FAULTS as exc:
            why = refusal(exc) or next((r for e in violations.errors if (r := refusal(e))), None)
            if why:
                raise NatsRefused(f"canary init: {why} (NATS user {user} at {masked_url(settings.nats_url)})") from None
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            try:
                work = asyncio.ensure_future(streams.ensure(nc.jetstream(timeout=5), settings))
                refused = asyncio.ensure_future(violations.arrived.wait())
                try:
                    await asyncio.wait({work, refused}, timeout=INIT_ATTEMPT_S, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    refused.cancel()
                if violations.seen:
                    work.cancel()
                    with contextlib.suppress(BaseException):
                        await work
                    denied = violations.first_denied(candidates)
                    raise PermissionMissing(
                        f"canary init: NATS user {user} may not publish to {denied} (a permissions violation): only "
                        "the admin user may create or update streams (shared/nats/server.conf); run `canary init` "
                        "with NATS_USER=admin") from None
                if not work.done():
                    work.cancel()
                    with contextlib.suppress(BaseException):
                        await work
                    last = f"the streams were not in place within {INIT_ATTEMPT_S:g} s"
                else:
                    try:
                        work.result()
                        return
                    except APIError as exc:  # the server's answer to a configuration: no retry changes it
                        raise ConfigError(f"canary init: NATS refused a stream configuration: "
                                          f"{exc.description or exc} (err_code {exc.err_code})") from None
                    except (nats.errors.TimeoutError, TimeoutError, nats.errors.Error) as exc:
                        last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            finally:
                await nc.close()
        attempt += 1
        remaining = deadline - loop.time()
        if remaining <= 0.05:
            raise NatsUnanswered(f"NATS at {masked_url(settings.nats_url)} did not answer within {wait_s:g} s "
                                 f"(last: {last})")
        await asyncio.sleep(min(retry.DEPENDENCY.delay(attempt), remaining))


#: Seconds the start line may wait for the judge's modes in Redis before it says the settings' modes.
START_LINE_REDIS_S = 2.0


def next_cycle_at(settings: Settings, now_epoch: float | None = None):
    """When discovery (running now) starts its next cycle, UTC (:func:`reverie_canary.services.discovery.service.next_cycle`)."""
    from reverie_canary.services.discovery.core import cycle_start
    from reverie_canary.services.discovery.service import next_cycle

    now = time.time() if now_epoch is None else now_epoch
    return cycle_start(next_cycle(now, settings.cycle_interval_s, settings.probe_window_s, last=-1),
                       settings.cycle_interval_s)


async def modes_now(settings: Settings) -> tuple[dict[str, str], str]:
    """Per model, the mode text of what the judge runs now (``mode: enforce`` / ``modes: ...``), and its source.

    The judge's state in Redis holds the operators' ``canary mode`` commands; when
    Redis does not answer within :data:`START_LINE_REDIS_S` (or holds no state of a
    model yet) the settings' modes are said, and the source says so.
    """
    from reverie_canary.services.judge.core import Policy, initial
    from reverie_canary.services.judge.explain import modes_of, modes_text
    from reverie_canary.services.judge.store import RedisJudgeStore
    from reverie_canary.shared.runtime.service import redis_client

    policy = Policy.from_settings(settings)
    states = {m: initial(m) for m in settings.models}
    source = "the judge's state"
    client = redis_client(settings)
    try:
        async with asyncio.timeout(START_LINE_REDIS_S):
            store = RedisJudgeStore(client, settings.namespace)
            known = set(await store.models())
            for model in settings.models:
                if model in known:
                    states[model] = (await store.load(model)).state
                else:
                    source = "the settings (no judge state yet)"
    except (*REDIS_FAULTS, CanaryError):  # Redis not there or slow, a state not read: the settings' modes
        source = "the settings (the judge's state not read)"
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()
    return {m: modes_text(modes_of(states[m], policy, settings.kinds)) for m in settings.models}, source


async def announce_start(settings: Settings, names: list[str], probers: int = 1) -> None:
    """Log the start line of ``canary up`` / ``canary run``: services, NATS user, models, mode, next cycle (UTC),
    and the event loop they run on (``event_loop``: ``uvloop`` or ``asyncio``; canary/loops.py).

    With discovery among the services it also says the language coverage bound (``language_coverage``).
    """
    from reverie_canary.shared.contract.timefmt import utc_text

    modes, source = await modes_now(settings)
    texts = set(modes.values())
    shown = next(iter(texts)) if len(texts) == 1 else "; ".join(f"{m} {t}" for m, t in modes.items())
    services = [f"prober x{probers}" if n == "prober" and probers > 1 else n for n in names]
    extra = {}
    if "discovery" in names and "language" in settings.kinds:  # the bound discovery keeps
        from reverie_canary.services.discovery.core import coverage

        cov = coverage(len(settings.languages), settings.language_coverage_cycles, settings.languages_per_cycle,
                       weighted=any(w > 0 for w in settings.language_weights.values()))
        extra["language_coverage"] = (f"every language of every provider at least once every {cov.bound_cycles} "
                                      f"cycles, {cov.per_cycle} a cycle")
    get_logger("runtime").info(
        "started", services=", ".join(services), nats_user=settings.nats_user or "(none)",
        models=", ".join(settings.models), mode=shown.removeprefix("mode: "), mode_source=source,
        next_cycle_at=utc_text(next_cycle_at(settings)), cycle_interval_s=settings.cycle_interval_s,
        event_loop=loops.running_name(), **extra)


def cycle_line(verdict: Any, settings: Settings) -> dict[str, Any]:
    """The fields of the line said when a cycle closed: counts per verdict, the kinds it could not judge, the next cycle."""
    from collections import Counter

    from reverie_canary.shared.contract.timefmt import utc_text

    counts = Counter(v.verdict for v in verdict.verdicts)
    failed = sorted(v.provider for v in verdict.verdicts if v.verdict == "failed")
    fields: dict[str, Any] = {"model": verdict.model, "cycle_no": verdict.cycle_no, "providers": len(verdict.verdicts),
                              **{k: counts[k] for k in sorted(counts)}}
    if failed:
        fields["failed_providers"] = ", ".join(failed[:10]) + (f" (+{len(failed) - 10})" if len(failed) > 10 else "")
    if verdict.unproven:
        fields["unproven"] = ", ".join(verdict.unproven)
    if verdict.common_mode:
        fields["common_mode"] = ", ".join(verdict.common_mode)
    fields["next_cycle_at"] = utc_text(next_cycle_at(settings, verdict.at.timestamp()))
    return fields


async def announce_cycles(settings: Settings) -> None:
    """Log one line per closed cycle (each CycleVerdict the log stores from now on) until cancelled.

    Reads ``canary.verdicts.>`` from the log with an ordered ephemeral consumer
    (what every service user may create); when it cannot (a credential without
    the consumer API), it says so once and the services run on without the lines.
    """
    from nats.js.api import DeliverPolicy

    from reverie_canary.shared.contract import codec, subjects
    from reverie_canary.shared.contract.errors import Undecodable
    from reverie_canary.shared.runtime.preflight import Violations
    from reverie_canary.shared.runtime.service import nats_connect

    log = get_logger("runtime")
    violations = Violations()

    async def said(msg) -> None:
        try:
            verdict = codec.VERDICT.decode(msg.data)
        except Undecodable:
            return  # the judge's own consumer dead-letters it; a log line here would say nothing new
        log.info("cycle_closed", **cycle_line(verdict, settings))

    nc = await nats_connect(settings, error_cb=violations.record, max_reconnect_attempts=-1)
    try:
        try:
            await nc.jetstream(timeout=5).subscribe(subjects.ALL_VERDICTS, stream=streams.LOG, cb=said,
                                                    ordered_consumer=True, deliver_policy=DeliverPolicy.NEW)
        except NATS_FAULTS as exc:
            log.warning("cycle_lines_unavailable", error=f"{type(exc).__name__}: {exc}",
                        refused=violations.first_denied(), note="the services run on; the lines are not said")
            return
        await asyncio.Event().wait()
    finally:
        await nc.close()
