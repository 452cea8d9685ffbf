"""Check at start that a NATS credential can do a service's job, and tell a permanent refusal from a hiccup.

A service that starts with the wrong credential used to run anyway: the prober
of ``NATS_USER=judge canary up`` took tasks from the shared queue, could not
publish their results, and the cycle lost them.  And
``canary init`` retried a permanent ``Authorization Violation`` until its wait
ran out.  This module holds what both need:

- :func:`refusal`: whether an error is a refusal that no retry heals (a wrong
  or missing password, a permission the credential lacks) and its one-line name;
- :class:`Violations`: a nats-py ``error_cb`` that records the server's
  permission violations, which nats-py only reports there (the request itself
  just times out);
- :func:`needs` and :func:`check_permissions`: every subject a service publishes
  to and the JetStream API its consumers use, probed at start with messages
  that change nothing (below), so that a missing permission is named before the
  service takes a single message;
- :func:`reconcile_consumers`: a live durable consumer whose configuration
  differs from :mod:`reverie_canary.shared.runtime.streams` is updated (the change is
  logged) or, when the server cannot change it, the service refuses to start
  and says why.

How a permission is probed without side effects: a plain publish (no reply
subject) to the very subject, with the header ``Nats-Expected-Stream`` set to a
stream that does not exist.  The server checks the publish permission first
(a violation comes back as ``-ERR`` and is recorded); a permitted message that a
stream would store is dropped by JetStream (error 10060, expected stream does
not match), one that no stream stores goes nowhere.  JetStream API subjects are
probed the same way without a reply subject: the server does not act on a
request it cannot answer (an acknowledgement names stream sequence 0, which no
message has).  The probes end with a flush (PING/PONG): the server answers in
order, so every violation has arrived when the flush returns.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import nats
from nats.js.api import ConsumerConfig
from nats.js.errors import APIError, NotFoundError

from reverie_canary.shared.contract import subjects
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime import streams
from reverie_canary.shared.runtime.retry import NATS_FAULTS
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import ConsumerSpec

#: The header value that no stream has: JetStream drops a probe instead of storing it.
PROBE_STREAM = "canary-permission-probe"
#: Seconds the probes of one service may take (one connection, one flush).
PROBE_S = 5.0
#: How nats-py words the server's permission errors (``nats.protocol.parser.PERMISSIONS_ERR``).
_PERMISSIONS = "permissions violation"
#: Server errors that mean the credential itself is refused: a wrong or missing password, an unknown user.
_AUTH = ("authorization violation", "authentication", "user authentication expired", "account authentication")


class PermissionMissing(ConfigError):
    """The service's NATS credential lacks a permission the service needs; the message names each one."""


class NatsRefused(ConfigError):
    """NATS refused the credential itself (wrong or missing password, unknown user)."""


#: TLS alerts (OpenSSL's reason texts) by which a server refuses this client's certificate (RFC 8446 §6.2).
_TLS_REFUSED = ("alert bad certificate", "alert certificate required", "alert unknown ca",
                "alert certificate unknown", "alert access denied")


def refusal(exc: BaseException) -> str | None:
    """The permanent refusal ``exc`` stands for, in one line, or ``None`` when a retry may heal it.

    Permanent: NATS's ``Authorization Violation`` (wrong or missing user or
    password), authentication errors, a server certificate that does not
    verify, and the server's TLS alerts refusing this client's certificate
    (:data:`_TLS_REFUSED`).  Everything else (connection refused, timeouts, no
    servers, a connection closed during the handshake) may heal.

    Args:
        exc: an error raised by ``nats.connect`` or a request, or passed to an ``error_cb``.
    """
    if isinstance(exc, nats.errors.AuthorizationError):
        return "NATS refused the credential: Authorization Violation (wrong or missing user or password)"
    if isinstance(exc, ssl.SSLCertVerificationError):  # the server's certificate: no retry makes it valid
        return (f"NATS's TLS certificate does not verify: {exc.verify_message or exc} (the CA file, "
                "CANARY_NATS_CA_FILE, and the host name in NATS_URL)")
    if isinstance(exc, ssl.SSLError) and any(alert in str(exc).lower() for alert in _TLS_REFUSED):
        return (f"NATS refused this client's TLS certificate: {exc.reason or exc} (CANARY_NATS_CERT_FILE and "
                "CANARY_NATS_KEY_FILE, signed by a CA the server trusts)")
    text = str(exc).lower()
    if any(marker in text for marker in _AUTH):
        detail = str(exc).removeprefix("nats: ").strip("'\" ")
        return f"NATS refused the credential: {detail} (wrong or missing user or password)"
    return None


class Violations:
    """Records permission violations and passes every other error on; :meth:`record` is the nats-py ``error_cb``.

    Args:
        passthrough: the callback other errors go to (default: none).

    Attributes:
        seen: the violations in the order the server sent them, as nats-py words
            them (``permissions violation for publish to "..."``, lower case).
        errors: every other error passed to the callback.
    """

    def __init__(self, passthrough: Callable[[Exception], Awaitable[None]] | None = None) -> None:
        self.seen: list[str] = []
        self.errors: list[Exception] = []
        self.arrived = asyncio.Event()
        self._passthrough = passthrough

    async def record(self, exc: Exception) -> None:
        """The ``error_cb`` (nats-py wants a coroutine function)."""
        text = str(exc)
        if _PERMISSIONS in text.lower():
            self.seen.append(text.removeprefix("nats: "))
            self.arrived.set()
            return
        self.errors.append(exc)
        if self._passthrough is not None:
            await self._passthrough(exc)

    def denied(self, action: str, subject: str) -> bool:
        """Whether the server refused ``action`` (``publish`` / ``subscription``) on ``subject`` (any case)."""
        wanted = f'{_PERMISSIONS} for {action} to "{subject}"'.lower()
        return any(wanted in seen.lower() for seen in self.seen)

    def first_denied(self, candidates: Iterable[str] = ()) -> str | None:
        """The first subject the server refused, else ``None``.

        nats-py lower-cases the server's error text; the subject is given back
        as spelled in ``candidates`` when one of them matches (stream names are
        upper case), else as nats-py has it.
        """
        spelled = {c.lower(): c for c in candidates}
        for seen in self.seen:
            subject = seen.split('"')[1] if seen.count('"') >= 2 else seen
            return spelled.get(subject.lower(), subject)
        return None


@dataclass(frozen=True)
class Need:
    """One permission a service needs: ``publish`` or ``subscribe`` on ``grant``, and why.

    ``subject`` is the concrete subject probed (one that ``grant`` covers);
    ``grant`` the permission as ``shared/nats/server.conf`` writes it.
    """

    action: str
    subject: str
    why: str
    grant: str = ""

    def __post_init__(self) -> None:
        if not self.grant:
            object.__setattr__(self, "grant", self.subject)


#: A provider tag that no gateway lists (subject samples only: nothing is ever published for it).
_PROBE_PROVIDER = "canary/permission-probe"


def needs(service: str, settings: Settings, consumers: Iterable[ConsumerSpec] = ()) -> list[Need]:
    """Every permission ``service`` needs to do its job, on concrete subjects of its first model.

    The subjects are the ones the service's code publishes to (its
    ``subjects.*`` builders), the dead-letter subject every service may need,
    the inbox its requests are answered on, and for each durable consumer the
    JetStream API it pulls and acknowledges with.  ``shared/nats/server.conf``
    grants exactly these to the service's own user.

    Args:
        service: one of :data:`reverie_canary.shared.runtime.settings.SERVICE_NAMES`.
        settings: the service's settings (its first model names the samples).
        consumers: the service's durable consumers.
    """
    model = settings.models[0]
    answers = f"{subjects.PREFIX}.answers.{service}.>"
    publish: dict[str, list[tuple[str, str, str]]] = {
        "discovery": [(subjects.discovery(model), subjects.ALL_DISCOVERY,
                       "the endpoints it discovers and the cycles it closes"),
                      (subjects.task(model, _PROBE_PROVIDER), subjects.ALL_TASKS, "the probe tasks of each cycle")],
        "prober": [(subjects.result(model, _PROBE_PROVIDER), subjects.ALL_RESULTS,
                    "the results of the probes it takes")],
        "judge": [(subjects.verdicts(model), subjects.ALL_VERDICTS, "each cycle's verdicts"),
                  (subjects.decision(model, _PROBE_PROVIDER), subjects.ALL_DECISIONS, "its decisions"),
                  (subjects.decision(model, None), subjects.ALL_DECISIONS, "its model-wide decisions"),
                  (subjects.retest(model), subjects.ALL_RETEST, "its retest requests"),
                  (subjects.confirmation(model, _PROBE_PROVIDER), subjects.ALL_CONFIRMATIONS,
                   "what confirmation probes said about live failures"),
                  (subjects.answer("judge", "permission-probe"), answers, "its answers to operator commands")],
        "router": [(subjects.routing(model), subjects.ALL_ROUTING, "each new ignore list"),
                   (f"$KV.{subjects.ROUTING_BUCKET}.{subjects.kv_key(model)}", f"$KV.{subjects.ROUTING_BUCKET}.>",
                    "the ignore list in the KV bucket"),
                   (subjects.answer("router", "permission-probe"), answers, "its answers to operator commands")],
        "notifier": [(subjects.notice_dead("permission-probe"), subjects.ALL_NOTICES_DEAD,
                      "notices that exhausted their delivery schedule"),
                     (subjects.NOTICES_RESENT, subjects.NOTICES_RESENT, "its answers to resend requests")],
    }
    if service not in publish:
        raise ValueError(f"unknown service {service!r}")
    out = [Need("publish", subject, why, grant) for subject, grant, why in publish[service]]
    out.append(Need("publish", subjects.deadletter(service), "the messages it refuses, with the reason"))
    for spec in consumers:
        durable = f"{spec.stream}.{spec.durable}"
        out.append(Need("publish", f"$JS.API.STREAM.INFO.{spec.stream}", f"reading stream {spec.stream}",
                        "$JS.API.STREAM.INFO.>"))
        out.append(Need("publish", f"$JS.API.CONSUMER.INFO.{durable}", f"binding its durable {spec.durable}",
                        "$JS.API.CONSUMER.>"))
        out.append(Need("publish", f"$JS.API.CONSUMER.MSG.NEXT.{durable}", f"pulling from {spec.durable}",
                        "$JS.API.CONSUMER.>"))
        out.append(Need("publish", f"$JS.ACK.{durable}.1.0.0.0.0", f"acknowledging what {spec.durable} delivers",
                        "$JS.ACK.>"))
    out.append(Need("subscribe", "_INBOX.canary-permission-probe", "the answers to its requests (JetStream acks)",
                    "_INBOX.>"))
    return out


async def probe(nc: nats.NATS, violations: Violations, wanted: Iterable[Need]) -> list[Need]:
    """Probe every need on ``nc`` (whose ``error_cb`` is ``violations.record``); return the ones the server refused.

    Raises:
        TimeoutError: the server did not answer the final flush within :data:`PROBE_S`.
    """
    wanted = list(wanted)
    subs = []
    for need in wanted:
        if need.action == "publish":
            body = b"+WPI" if need.subject.startswith("$JS.ACK.") else b""
            await nc.publish(need.subject, body, headers={"Nats-Expected-Stream": PROBE_STREAM})
        else:
            subs.append(await nc.subscribe(need.subject))
    await nc.flush(timeout=PROBE_S)
    for sub in subs:
        await sub.unsubscribe()
    await nc.flush(timeout=PROBE_S)
    return [n for n in wanted if violations.denied("publish" if n.action == "publish" else "subscription", n.subject)]


def missing_text(service: str, user: str, missing: list[Need]) -> str:
    """The one line that names every missing permission of ``service`` and what to do."""
    unique = {(n.action, n.grant): n for n in reversed(missing)}  # one line per permission, the first reason
    missing = [unique[key] for key in dict.fromkeys((n.action, n.grant) for n in missing)]
    listed = "; ".join(f"{n.action} {n.grant} ({n.why})" for n in missing)
    who = f"NATS user {user!r}" if user else "the NATS connection (no user)"
    return (f"{service}: {who} lacks {len(missing)} permission(s) the {service} needs: {listed}; run the {service} "
            f"as its own user (NATS_USER={service}) or grant them in the server's authorization "
            "(shared/nats/server.conf)")


async def check_permissions(settings: Settings, service: str, consumers: Iterable[ConsumerSpec] = ()) -> None:
    """Refuse to start ``service`` when its credential lacks a permission it needs (:func:`needs`).

    Opens one short-lived connection with the service's credential and probes
    every need (the module's docstring says why nothing changes).

    Raises:
        NatsRefused: the credential itself is refused.
        PermissionMissing: naming every missing permission, before the service takes any message.
    """
    violations = Violations()
    nc = await _connect(settings, service, violations)
    try:
        missing = await probe(nc, violations, needs(service, settings, consumers))
    finally:
        await nc.close()
    if missing:
        raise PermissionMissing(missing_text(service, settings.nats_user, missing))


async def _connect(settings: Settings, service: str, violations: Violations) -> nats.NATS:
    """One short-lived connection with the service's credential whose ``error_cb`` records refusals.

    Raises:
        NatsRefused: the credential itself is refused.
    """
    from reverie_canary.shared.runtime.service import nats_connect

    try:
        return await nats_connect(settings, error_cb=violations.record, allow_reconnect=False,
                                  max_reconnect_attempts=1, connect_timeout=PROBE_S)
    except NATS_FAULTS as exc:  # a refusal is named, any other fault raised as is
        why = refusal(exc) or next((r for e in violations.errors if (r := refusal(e))), None)
        if why:
            raise NatsRefused(f"{service}: {why}") from exc
        raise


#: Fields of a durable consumer the code states and the server can change on a live durable (nats-server 2.10+).
EDITABLE = ("filter_subjects", "ack_wait", "max_deliver", "max_ack_pending")
#: Fields the code states that the server never changes on a live durable.
FIXED = ("ack_policy",)


def _value(config: ConsumerConfig, name: str) -> Any:
    if name == "filter_subjects":
        return sorted(config.filter_subjects or ([config.filter_subject] if config.filter_subject else []))
    value = getattr(config, name)
    if name == "ack_policy" and value is not None:
        return str(getattr(value, "value", value))
    if name == "ack_wait" and value is not None:
        return round(float(value), 3)
    return value


def consumer_changes(live: ConsumerConfig, wanted: ConsumerConfig) -> dict[str, tuple[Any, Any]]:
    """Field -> ``(live, wanted)`` for every stated field that differs (empty: the durable is as the code says).

    The start position (``deliver_policy``, ``opt_start_seq``) is left out: it
    only matters when a durable is created, and a durable that moved over from
    an earlier one (the router's and notifier's) starts where that one stopped.
    """
    out = {}
    for name in (*EDITABLE, *FIXED):
        a, b = _value(live, name), _value(wanted, name)
        if a != b:
            out[name] = (a, b)
    return out


async def reconcile_consumers(js: Any, specs: Iterable[ConsumerSpec], log: Any) -> list[str]:
    """Bring every live durable of ``specs`` to the code's configuration; a missing one is left to be created.

    Each change is logged (``consumer_reconciled``, with the fields before and
    after); the durables' positions are kept (an update, not a new durable): the
    live configuration is sent back with the code's :data:`EDITABLE` fields, so a
    durable created at an older one's position (``deliver_policy`` by start
    sequence, the router's and notifier's migrations) keeps it.

    Returns:
        The durables that were changed.

    Raises:
        ConfigError: a durable differs in a field the server cannot change
            (``ack_policy``), or the server refused the update: naming the
            durable, the fields and what to do (bump its ``-vN`` in
            ``shared/runtime/streams.py``, or delete the durable as admin).
    """
    changed = []
    for spec in specs:
        try:
            info = await js.consumer_info(spec.stream, spec.durable)
        except NotFoundError:
            continue  # created, as the code states it, when the service subscribes
        wanted = spec.config()
        changes = consumer_changes(info.config, wanted)
        if not changes:
            continue
        shown = ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changes.items())
        fixed = [k for k in changes if k in FIXED]
        if fixed:
            raise ConfigError(f"durable consumer {spec.durable} on {spec.stream} differs from the code in "
                              f"{', '.join(fixed)}, which the server cannot change on a live durable ({shown}): "
                              f"give it a new -vN in shared/runtime/streams.py, or delete it as admin")
        # the live configuration with the code's stated fields: a durable that took over an older one's
        # position (deliver by start sequence) keeps it; the server refuses a changed deliver policy
        update = {name: getattr(wanted, name) for name in EDITABLE}
        update["filter_subject"] = None
        try:
            await js.add_consumer(spec.stream, info.config.evolve(**update))
        except APIError as exc:
            raise ConfigError(f"durable consumer {spec.durable} on {spec.stream} differs from the code ({shown}) "
                              f"and the server refused the update: {exc.description or exc}") from exc
        log.warning("consumer_reconciled", stream=spec.stream, durable=spec.durable,
                    changes={k: {"was": a, "now": b} for k, (a, b) in changes.items()})
        changed.append(spec.durable)
    return changed


async def with_deadline(awaitable: Awaitable[Any], seconds: float, what: str) -> Any:
    """Await ``awaitable`` for at most ``seconds``.

    Raises:
        TimeoutError: naming ``what``.
    """
    try:
        return await asyncio.wait_for(awaitable, timeout=seconds)
    except TimeoutError as exc:
        raise TimeoutError(f"{what} did not finish within {seconds:g} s") from exc


#: Services that talk to the OpenRouter gateway (the others never send it a request).
GATEWAY_SERVICES = ("discovery", "prober")
#: Hosts of the real gateway: without a key every request there is refused (401).
REAL_GATEWAY_HOSTS = ("openrouter.ai",)


def settings_problem(settings: Settings, service: str) -> str | None:
    """Why ``service`` must not start with these settings, beyond their own validation (``None``: it may).

    A gateway service (:data:`GATEWAY_SERVICES`) pointed at the real gateway
    without ``OPENROUTER_API_KEY`` would get 401 for every request: the canary
    blind from its first cycle.
    """
    from urllib.parse import urlsplit

    if service not in GATEWAY_SERVICES or settings.openrouter_api_key:
        return None
    host = (urlsplit(settings.openrouter_base_url).hostname or "").lower()
    if any(host == real or host.endswith("." + real) for real in REAL_GATEWAY_HOSTS):
        return (f"{service}: OPENROUTER_API_KEY is not set while OPENROUTER_BASE_URL is the real gateway "
                f"({settings.openrouter_base_url}): every request would be refused (401); set the key, or point "
                "OPENROUTER_BASE_URL at the simulator (`canary simulator`)")
    return None


async def at_start(settings: Settings, service: str, consumers: list[ConsumerSpec], log: Any) -> None:
    """Everything a service checks before it takes a message; one line and a refusal when it cannot do its job.

    In order, on one short-lived connection (it provokes refusals on purpose and reads them
    from its own error callback, so the service's own connection never sees them): the
    settings (:func:`settings_problem`), the credential and every permission the service
    needs (:func:`probe`), the streams (created or updated where the credential may:
    :func:`reverie_canary.shared.runtime.streams.ensure_best_effort`), then its live durable
    consumers (:func:`reconcile_consumers`).

    Raises:
        ConfigError: a setting; :class:`NatsRefused` or :class:`PermissionMissing`, naming what.
    """
    problem = settings_problem(settings, service)
    if problem:
        raise ConfigError(problem)
    violations = Violations()
    nc = await _connect(settings, service, violations)
    try:
        missing = await probe(nc, violations, needs(service, settings, consumers))
        if missing:
            raise PermissionMissing(missing_text(service, settings.nats_user, missing))
        await streams.ensure_best_effort(nc.jetstream(), settings, log)
        violations.seen.clear()  # a stream this credential may not update is not a consumer's refusal
        if not consumers:
            return
        try:
            await reconcile_consumers(nc.jetstream(timeout=PROBE_S), consumers, log)
        except (TimeoutError, nats.errors.TimeoutError) as exc:
            denied = violations.first_denied()
            if denied:
                raise PermissionMissing(f"{service}: NATS user {settings.nats_user!r} may not publish to {denied} "
                                        "(a permissions violation), needed to bring its durable consumer to the "
                                        "code's configuration") from exc
            raise
    finally:
        await nc.close()
