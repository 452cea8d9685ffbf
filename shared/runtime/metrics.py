"""Prometheus metrics (prometheus-client): one registry per service, served on the service's own port.

Every service serves, by default, on ``metrics_host`` (loopback; compose sets
``0.0.0.0``) and its own port (:data:`STANDARD_PORTS`, settings ``metrics_port`` /
``metrics_ports``):

* ``/metrics``: the service's series (:data:`FAMILIES`, plus ``process_*``);
* ``/healthz``: 200 while the process (its event loop) answers;
* ``/readyz``: 200 once the service runs and NATS (and Redis, for the services
  that use it) answer, else 503 with a one-line reason.

``canary up`` (every service in one process) serves each service on its own port
as well, so one scrape configuration fits both layouts; prober replicas of one
process share the prober's endpoint.  The series are declared once, in
:data:`FAMILIES` (the metrics reference, docs/reference/metrics.md, is generated from it and the dashboard test reads it): label
values are bounded (:class:`LabelBudget`): models and providers are fine, task
ids never appear, and a label that sees too many distinct values folds the rest
into ``_other`` and counts that in ``canary_metrics_labels_folded_total``
(Prometheus's instrumentation practices: unbounded label values break Prometheus).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reverie_canary.shared.contract.errors import ConfigError

disable_created_metrics()  # no *_created series: they double every counter for nothing an alert uses

#: Port of each service's endpoint when ``metrics_port`` is 0 (the default).
STANDARD_PORTS: dict[str, int] = {"discovery": 9471, "prober": 9472, "judge": 9473, "router": 9474,
                                  "notifier": 9475}
#: Time to first token buckets (s): probes wait up to 60 s (``request_timeout_s``), the bar is at 10 s.
TTFT_BUCKETS_S: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60)
#: Wall time of a whole probe (s): a language probe with its two confirmations may take 3 requests.
PROBE_BUCKETS_S: tuple[float, ...] = (0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180)
#: Longest label value kept (longer ones are cut: a model id is at most 256 characters on the wire).
MAX_LABEL_CHARS = 160
#: Distinct values one label may take per service before the rest fold into ``_other``.
LABEL_BUDGET: dict[str, int] = {"model": 200, "provider": 4000, "reason": 256, "durable": 32, "stream": 16,
                                "channel": 64, "action": 32, "verdict": 8, "outcome": 8, "kind": 16,
                                "layer": 8, "severity": 8, "type": 8, "dependency": 4, "label": 32, "streak": 4,
                                "version": 4, "result": 4}
OTHER = "_other"

Kind = Literal["counter", "gauge", "histogram", "state"]


@dataclass(frozen=True)
class Family:
    """One metric family: its name, type, help text, labels and the services that export it.

    ``kind="state"`` families are gauges computed at scrape time from a service's
    state (the judge's provider state, the router's snapshots) by its collector.
    ``name`` is the exposed name (counters end in ``_total``).
    """

    key: str
    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    services: tuple[str, ...] = ()  # empty: every service
    buckets: tuple[float, ...] = ()


ALL: tuple[str, ...] = ()
FAMILIES: tuple[Family, ...] = (
    # -- every service ----------------------------------------------------------------------------
    Family("info", "canary_service_info", "gauge", "1 for the running service, with its version",
           ("service", "version")),
    Family("ready", "canary_ready", "gauge",
           "1 when the service runs and its NATS (and Redis) answer, as /readyz says", ("service",)),
    Family("dependency_up", "canary_dependency_up", "gauge",
           "1 while the service's connections to the dependency work, 0 during an outage",
           ("service", "dependency")),
    Family("dependency_outages", "canary_dependency_outages_total", "counter",
           "Outages of a dependency seen by the service (each logged once, with its length)",
           ("service", "dependency")),
    Family("dependency_last_outage", "canary_dependency_last_outage_seconds", "gauge",
           "Length of the last finished outage of the dependency, seconds", ("service", "dependency")),
    Family("messages", "canary_messages_total", "counter",
           "Messages handled, by service and outcome (ack, term, nak)", ("service", "outcome")),
    Family("dead_letters", "canary_dead_letters_total", "counter",
           "Messages refused and dead-lettered, by service and reason", ("service", "reason")),
    Family("consumer_pending", "canary_consumer_pending", "gauge",
           "Messages of the durable consumer's stream not yet delivered (JetStream num_pending)",
           ("service", "stream", "durable")),
    Family("consumer_ack_pending", "canary_consumer_ack_pending", "gauge",
           "Messages delivered to the durable consumer and not yet acknowledged", ("service", "stream", "durable")),
    Family("consumer_redelivered", "canary_consumer_redelivered", "gauge",
           "Messages of the durable consumer delivered more than once and not yet acknowledged",
           ("service", "stream", "durable")),
    Family("labels_folded", "canary_metrics_labels_folded_total", "counter",
           "Label values folded into _other because the label had too many distinct values", ("service", "label")),
    # -- discovery --------------------------------------------------------------------------------
    Family("cycles_started", "canary_cycles_started_total", "counter",
           "Cycles planned and published (EndpointsDiscovered and its tasks)", ("model",), ("discovery",)),
    Family("cycles_unplanned", "canary_cycles_unplanned_total", "counter",
           "Cycles that could not be planned (CycleUnplanned), by cause (gateway_auth, gateway_unreachable ...)",
           ("model", "reason"), ("discovery",)),
    Family("cycle_started_at", "canary_cycle_last_started_timestamp_seconds", "gauge",
           "Start of the last cycle planned, Unix seconds (UTC)", ("model",), ("discovery",)),
    Family("endpoints_listed", "canary_endpoints_listed", "gauge",
           "Endpoints the gateway listed for the model in the last cycle planned", ("model",), ("discovery",)),
    Family("endpoints_dropped", "canary_listing_endpoints_dropped_total", "counter",
           "Entries of the endpoints listing discovery could not use (EndpointsDiscovered.dropped), by reason "
           "(no_tag, bad_tag, duplicate_tag, not_an_object)", ("model", "reason"), ("discovery",)),
    Family("endpoints_degraded", "canary_endpoints_gateway_degraded", "gauge",
           "Endpoints the gateway itself marks degraded (listed status below 0) in the last cycle planned",
           ("model",), ("discovery",)),
    Family("tasks_published", "canary_tasks_published_total", "counter",
           "ProbeTasks put on the work queue", ("model",), ("discovery",)),
    Family("live_periods", "canary_live_periods_total", "counter",
           "Chat backends' live-count periods discovery read, by outcome (counted; duplicate: a message id "
           "counted before; outside: ended outside the window; unwatched: a model it does not watch)",
           ("model", "outcome"), ("discovery",)),
    Family("confirmations_sent", "canary_confirmations_sent_total", "counter",
           "Confirmation probes sent outside the rotation because live counts singled a provider out, by kind",
           ("model", "kind"), ("discovery",)),
    Family("cycle_in_flight", "canary_cycle_probes_in_flight", "gauge",
           "Probes in flight the last cycle was sized to (all probers; CycleSized in_flight)", (), ("discovery",)),
    Family("cycle_expected_wall", "canary_cycle_expected_wall_seconds", "gauge",
           "Wall time the last cycle's sizing expects, seconds (CycleSized expected_wall_s)", (), ("discovery",)),
    Family("cycle_fits", "canary_cycle_fits", "gauge",
           "1 when the last cycle's sizing expects it to end within its probe window, 0 when it cannot fit",
           (), ("discovery",)),
    # -- prober -----------------------------------------------------------------------------------
    Family("probes", "canary_probes_total", "counter",
           "Probes finished, by model, provider, kind, outcome and reason code",
           ("model", "provider", "kind", "outcome", "reason"), ("prober",)),
    Family("probe_seconds", "canary_probe_seconds", "histogram",
           "Wall time of one probe (all its requests), seconds", ("kind",), ("prober",), PROBE_BUCKETS_S),
    Family("ttft", "canary_probe_ttft_seconds", "histogram",
           "Time to first token of probe replies that produced text, seconds (docs/concepts/probes.md, the latency contract)",
           ("model", "provider"), ("prober",), TTFT_BUCKETS_S),
    Family("probe_tokens", "canary_probe_tokens_total", "counter",
           "Tokens the probes used (the gateway's usage), by type prompt or completion",
           ("model", "provider", "type"), ("prober",)),
    Family("probe_cost", "canary_probe_cost_usd_total", "counter",
           "What the probes cost, USD (the gateway's usage.cost)", ("model", "provider"), ("prober",)),
    Family("prober_concurrency", "canary_prober_concurrency", "gauge",
           "Probes this prober runs at once now (its cycle's sizing, at most prober_concurrency)", (), ("prober",)),
    Family("tasks_expired", "canary_tasks_expired_total", "counter",
           "Tasks dropped unprobed because their cycle's deadline had passed", ("model",), ("prober",)),
    # -- judge ------------------------------------------------------------------------------------
    Family("decisions", "canary_decisions_total", "counter",
           "Judge decisions published, by model and action", ("model", "action"), ("judge",)),
    Family("verdicts", "canary_cycle_verdicts_total", "counter",
           "Provider verdicts of closed cycles, by model and verdict (passed, failed, frozen, blind)",
           ("model", "verdict"), ("judge",)),
    Family("provider_verdict", "canary_provider_verdict", "state",
           "1 for the provider's verdict in the last cycle that judged it (passed, failed, frozen, blind), 0 for the others",
           ("model", "provider", "verdict"), ("judge",)),
    Family("provider_suspended", "canary_provider_suspended", "state",
           "1 while the canary suspends the provider (enforce mode), else 0", ("model", "provider"), ("judge",)),
    Family("judge_lease_held", "canary_judge_lease_held", "gauge",
           "1 while this judge holds the store's lease and folds the log; 0 while it stands by (another judge "
           "holds it: /readyz says so too)", ("service",), ("judge",)),
    Family("provider_suspended_until", "canary_provider_suspended_until_timestamp_seconds", "state",
           "End of the provider's suspension, Unix seconds (UTC); only while suspended",
           ("model", "provider"), ("judge",)),
    Family("provider_observe_suspended", "canary_provider_observe_suspended", "state",
           "1 while observe mode holds a would-be suspension of the provider (routing untouched), else 0",
           ("model", "provider"), ("judge",)),
    Family("provider_floor_held", "canary_provider_floor_held", "state",
           "1 while the capacity floor keeps a provider that failed enough cycles to be suspended in traffic",
           ("model", "provider"), ("judge",)),
    Family("provider_streak", "canary_provider_streak", "state",
           "Consecutive cycles of the provider that failed, passed or were frozen",
           ("model", "provider", "streak"), ("judge",)),
    Family("provider_ladder_step", "canary_provider_ladder_step", "state",
           "The provider's step on the suspension ladder (0: none; 1, 2, 3: 1, 3, 7 days)",
           ("model", "provider"), ("judge",)),
    Family("provider_slow_vs_peers", "canary_provider_slow_vs_peers", "state",
           "1 while the provider's median time to first token over its last cycles is far above its peers' "
           "(median + k x MAD over the model's providers); shown, never a suspension by itself",
           ("model", "provider"), ("judge",)),
    Family("provider_ttft_median_ms", "canary_provider_ttft_median_ms", "state",
           "The provider's median time to first token (ms) over its last cycles' ttft probes, as the judge "
           "compares it with its peers'", ("model", "provider"), ("judge",)),
    Family("model_ttft_peer_bar_ms", "canary_model_ttft_peer_bar_ms", "state",
           "The first-token median (ms) above which a provider of the model is slow_vs_peers (median + k x MAD "
           "of its providers' medians); absent with too few providers measured", ("model",), ("judge",)),
    Family("canary_blind", "canary_blind", "state",
           "1 while the canary cannot see for the model (canary_blind announced, canary_sees not yet), else 0",
           ("model",), ("judge",)),
    Family("provider_blind", "canary_provider_blind", "state",
           "1 while the judge's latest word on the provider is canary-side (a blind cycle or an unplanned one)",
           ("model", "provider"), ("judge",)),
    Family("provider_suspension_held", "canary_provider_suspension_held", "state",
           "1 while the provider's suspension is held past its end because the canary was blind", ("model", "provider"),
           ("judge",)),
    Family("cycle_closed_at", "canary_cycle_last_closed_timestamp_seconds", "state",
           "Deadline of the last cycle the judge closed, Unix seconds (UTC)", ("model",), ("judge",)),
    Family("cycle_number", "canary_cycle_last_number", "state",
           "Number of the last cycle the judge closed", ("model",), ("judge",)),
    Family("cycle_interval", "canary_cycle_interval_seconds", "state",
           "The configured time between cycle starts, seconds (alerts compare cycle ages with it)",
           ("model",), ("judge",)),
    Family("mode_enforce", "canary_mode_enforce", "state",
           "1 when the probe kind runs in enforce mode for the model, 0 in observe mode", ("model", "kind"),
           ("judge",)),
    Family("observe_calls", "canary_observe_calls", "state",
           "Observe mode's would-be suspensions kept, by outcome (pending, right, wrong)",
           ("model", "outcome"), ("judge",)),
    # -- router -----------------------------------------------------------------------------------
    Family("ignore_size", "canary_ignore_list_size", "state",
           "Providers on the model's ignore list now, by layer (exclusion, override, suspension) and all",
           ("model", "layer"), ("router",)),
    Family("ignore_version", "canary_ignore_list_version", "state",
           "Version of the model's current IgnoreSnapshot", ("model",), ("router",)),
    Family("ignore_published_at", "canary_ignore_list_published_timestamp_seconds", "state",
           "Time of the model's current IgnoreSnapshot, Unix seconds (UTC)", ("model",), ("router",)),
    Family("snapshots_published", "canary_snapshots_published_total", "counter",
           "IgnoreSnapshots written and published", ("model",), ("router",)),
    # -- dashboard (computed from the log it reads, at each scrape of its /metrics) ----------------
    Family("control_result", "canary_control_result", "state",
           "1 for the result of the kind's positive control in the model's last closed cycle (failed: as it "
           "should; passed: the probe was too weak; not_probed), 0 for the other two",
           ("model", "kind", "result"), ("dashboard",)),
    Family("control_cycles_without_failure", "canary_control_cycles_without_failure", "state",
           "Closed cycles since the kind's positive control last failed (0: it failed in the last one)",
           ("model", "kind"), ("dashboard",)),
    Family("web_refused", "canary_web_requests_refused_total", "counter",
           "Requests to the dashboard or the quality feed refused for want of valid credentials (401)",
           (), ("dashboard",)),
    # -- notifier ---------------------------------------------------------------------------------
    Family("notices", "canary_notices_total", "counter",
           "Notice deliveries by channel, outcome (delivered; failed: an attempt failed and is retried on the "
           "channel's schedule; dead_lettered: given up, kept for canary notices resend) and severity",
           ("channel", "outcome", "severity"), ("notifier",)),
)
FAMILY: dict[str, Family] = {f.key: f for f in FAMILIES}


def families_of(service: str) -> list[Family]:
    """The families ``service`` exports."""
    return [f for f in FAMILIES if not f.services or service in f.services]


class LabelBudget:
    """Bounds the distinct values of each label (:data:`LABEL_BUDGET`); the rest become ``_other``."""

    def __init__(self, on_fold: Callable[[str], None]) -> None:
        self._seen: dict[str, set[str]] = {}
        self._on_fold = on_fold

    def value(self, label: str, value: Any) -> str:
        """``value`` as a label value: a string, cut to :data:`MAX_LABEL_CHARS`, or ``_other`` past the budget."""
        text = "" if value is None else str(value)[:MAX_LABEL_CHARS]
        seen = self._seen.setdefault(label, set())
        if text in seen:
            return text
        if len(seen) >= LABEL_BUDGET.get(label, 64):
            self._on_fold(label)
            return OTHER
        seen.add(text)
        return text


Sample = tuple[str, dict[str, Any], float]


class ServiceMetrics:
    """The registry and series of one service in this process (:func:`of`)."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.budget = LabelBudget(self._folded)
        self._series: dict[str, Any] = {}
        self.states: list[Family] = []
        for fam in families_of(service):
            if fam.kind == "state":
                self.states.append(fam)
                continue
            name = fam.name.removesuffix("_total") if fam.kind == "counter" else fam.name
            cls = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}[fam.kind]
            extra = {"buckets": fam.buckets} if fam.buckets else {}
            self._series[fam.key] = cls(name, fam.help, fam.labels, registry=self.registry, **extra)
        self._sources: list[Callable[[], Iterable[Sample]]] = []
        if self.states:
            self.registry.register(_StateCollector(self))
        self.set("info", 1, version=_version())

    def _folded(self, label: str) -> None:
        if label != "label":
            self._series["labels_folded"].labels(service=self.service, label=label).inc()

    def _child(self, key: str, labels: dict[str, Any]):
        fam = FAMILY[key]
        values = {name: self.service if name == "service" else self.budget.value(name, labels.get(name))
                  for name in fam.labels}
        series = self._series[key]
        return series.labels(**values) if fam.labels else series

    def inc(self, key: str, amount: float = 1.0, **labels: Any) -> None:
        """Add ``amount`` to counter ``key`` (:data:`FAMILIES`); ``service`` is filled in."""
        self._child(key, labels).inc(amount)

    def set(self, key: str, value: float, **labels: Any) -> None:
        """Set gauge ``key``."""
        self._child(key, labels).set(value)

    def observe(self, key: str, value: float, **labels: Any) -> None:
        """Record ``value`` in histogram ``key``."""
        self._child(key, labels).observe(value)

    def touch(self, key: str, **labels: Any) -> None:
        """Create the series ``key{labels}`` at 0, so that rates and alerts see it before its first event."""
        self._child(key, labels)

    def remove(self, key: str, **labels: Any) -> None:
        """Drop one labelled series (a durable that is gone)."""
        fam = FAMILY[key]
        values = [self.service if n == "service" else str(labels.get(n, ""))[:MAX_LABEL_CHARS] for n in fam.labels]
        with contextlib.suppress(KeyError):
            self._series[key].remove(*values)

    def add_source(self, source: Callable[[], Iterable[Sample]]) -> None:
        """Add a state source: called at each scrape, it yields ``(family key, labels, value)`` samples."""
        self._sources.append(source)

    def remove_source(self, source: Callable[[], Iterable[Sample]]) -> None:
        """Remove a state source added by :meth:`add_source` (its service stopped)."""
        with contextlib.suppress(ValueError):
            self._sources.remove(source)

    def sample_value(self, name: str, **labels: str) -> float | None:
        """The current value of sample ``name{labels}`` (tests, ``canary demo``)."""
        return self.registry.get_sample_value(name, labels)


class _StateCollector(Collector):
    """Builds the ``state`` families of a service from its sources at each scrape."""

    def __init__(self, metrics: ServiceMetrics) -> None:
        self.metrics = metrics

    def collect(self):
        families = {fam.key: GaugeMetricFamily(fam.name, fam.help, labels=list(fam.labels))
                    for fam in self.metrics.states}
        budget = self.metrics.budget
        for source in list(self.metrics._sources):
            for key, labels, value in source():
                family = FAMILY[key]
                families[key].add_metric([budget.value(n, labels.get(n)) for n in family.labels], float(value))
        yield from families.values()

    def describe(self):
        return []


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("reverie-canary")
    except PackageNotFoundError:  # not installed (a source checkout on sys.path)
        return "unknown"


_metrics: dict[str, ServiceMetrics] = {}


def of(service: str) -> ServiceMetrics:
    """The series of ``service`` in this process (created on first use, kept for the process)."""
    found = _metrics.get(service)
    if found is None:
        found = _metrics[service] = ServiceMetrics(service)
    return found


# -- the HTTP endpoint --------------------------------------------------------------------------


class Source(Protocol):
    """What a running service gives its endpoint: readiness problems and a pre-scrape refresh."""

    async def readiness(self) -> list[str]:
        """Why the service is not ready (empty: ready)."""

    async def refresh(self) -> None:
        """Bring scrape-time series (consumer pending) up to date; bounded in time."""


def resolve_port(settings, service: str) -> int | None:
    """The port of ``service``'s endpoint under ``settings``; ``None``: no endpoint, 0: any free port.

    ``metrics_ports[service]`` first, else ``metrics_port`` (0: :data:`STANDARD_PORTS`, -1: none).
    """
    if service in settings.metrics_ports:
        port = settings.metrics_ports[service]
    elif settings.metrics_port == 0:
        port = STANDARD_PORTS.get(service, 0)
    else:
        port = settings.metrics_port
    return None if port < 0 else port


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


@dataclass
class Endpoint:
    """``/metrics``, ``/healthz`` and ``/readyz`` of one service, served on the event loop (uvicorn)."""

    service: str
    host: str
    port: int
    sources: list[Source] = field(default_factory=list)
    #: What the endpoint says while no running service is attached (waiting for dependencies ...).
    status: str = "starting"
    users: int = 0
    _server: Any = None
    _socket: socket.socket | None = None

    @property
    def base_url(self) -> str:
        return f"http://{_url_host(self.host)}:{self.port}"

    @property
    def url(self) -> str:
        """The scrape URL (``http://host:port/metrics``)."""
        return f"{self.base_url}/metrics"

    async def start(self) -> None:
        """Bind and serve.

        Raises:
            ConfigError: the address cannot be bound (port in use, no such address),
                naming the settings that move it.
        """
        import uvicorn
        from starlette.applications import Starlette
        from starlette.responses import PlainTextResponse, Response
        from starlette.routing import Route

        metrics = of(self.service)
        metrics.set("ready", 0)  # until a running service says otherwise

        async def scrape(request) -> Response:
            for source in list(self.sources):
                await source.refresh()
            return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

        async def healthz(request) -> Response:
            return PlainTextResponse(f"ok: {self.service} is alive\n")

        async def readyz(request) -> Response:
            problems = await self.problems()
            metrics.set("ready", 0 if problems else 1)
            if problems:
                return PlainTextResponse(f"not ready: {'; '.join(problems)}\n", status_code=503)
            notes = [n for n in (getattr(source, "note", lambda: "")() for source in list(self.sources)) if n]
            return PlainTextResponse(f"ready: {self.service}" + (f" ({'; '.join(notes)})" if notes else "") + "\n")

        app = Starlette(routes=[Route("/metrics", scrape), Route("/healthz", healthz), Route("/readyz", readyz)])
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            sock = socket.create_server((self.host, self.port), family=family)
        except OSError as exc:
            raise ConfigError(
                f"the metrics endpoint of {self.service} cannot listen on {self.host}:{self.port} ({exc.strerror or exc}): "
                f"set CANARY_METRICS_PORTS={self.service}=N (0: any free port, -1: none) or CANARY_METRICS_HOST"
            ) from exc
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2, log_level=None)
        server = uvicorn.Server(config)
        try:
            # Server.serve() would take over SIGINT/SIGTERM and re-raise them at its end; the
            # service owns its signals, so the steps of serve() run here without that part
            config.load()
            server.lifespan = config.lifespan_class(config)
            await server.startup(sockets=[sock])
            await server.on_tick(0)  # the Date header; the accept loop needs no ticking
        except BaseException:
            sock.close()
            raise
        self._server, self._socket = server, sock

    async def problems(self) -> list[str]:
        """Every reason the service is not ready (empty: ready)."""
        if not self.sources:
            return [self.status]
        out: list[str] = []
        for source in list(self.sources):
            for problem in await source.readiness():
                if problem not in out:
                    out.append(problem)
        return out

    async def stop(self) -> None:
        """Stop serving (open connections are closed within 2 s)."""
        if self._server is not None:
            server, self._server = self._server, None
            await server.shutdown(sockets=[self._socket] if self._socket else None)


_endpoints: dict[str, Endpoint] = {}


async def acquire(settings, service: str) -> Endpoint | None:
    """The endpoint of ``service`` in this process, started on first use; ``None`` when it has none.

    Replicas of one service in one process (``--probers 2``) share it.  Each
    call needs a :func:`release`.

    Raises:
        ConfigError: the port cannot be bound.
    """
    port = resolve_port(settings, service)
    if port is None:
        return None
    endpoint = _endpoints.get(service)
    if endpoint is None:
        endpoint = Endpoint(service, settings.metrics_host.strip(), port)
        _endpoints[service] = endpoint
        try:
            await endpoint.start()
        except BaseException:
            _endpoints.pop(service, None)
            raise
    endpoint.users += 1
    return endpoint


async def release(service: str) -> None:
    """Give back an endpoint from :func:`acquire`; the last user stops it."""
    endpoint = _endpoints.get(service)
    if endpoint is None:
        return
    endpoint.users -= 1
    if endpoint.users <= 0:
        _endpoints.pop(service, None)
        await endpoint.stop()


def endpoint(service: str) -> Endpoint | None:
    """The running endpoint of ``service`` in this process, if any."""
    return _endpoints.get(service)


def urls() -> dict[str, str]:
    """``{service: scrape URL}`` of the endpoints running in this process."""
    return {name: ep.url for name, ep in sorted(_endpoints.items())}
