"""Traces across the pipeline with OpenTelemetry: optional (the ``[otel]`` extra), off by default.

One probe is one trace. The W3C trace context (``traceparent``) travels in the NATS headers
of every message a service publishes (:class:`reverie_canary.shared.runtime.broker.Publisher`), and
every message a service handles (:class:`reverie_canary.shared.runtime.consumer.Consumer`) is a span whose
parent is the context its headers carry:

    discovery task              (root: one per ProbeTask; task id, model, provider, kind)
    └─ prober ProbeTask         (the probe; its ProbeResult carries this span)
       └─ judge ProbeResult
          └─ judge decision     (a decision's parent is the span of the first result of its
             │                   evidence, linked to the others': a decision rests on several)
             └─ router Decision
                └─ router snapshot (the IgnoreSnapshot it made: version, model; one version holds
                                    all the routing decisions of one close: it is the child of
                                    the last one's span, linked to the others')

``CANARY_TRACES=otlp`` exports the spans with OTLP over HTTP (the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and headers variables;
``pip install 'reverie-canary[otel]'``); ``off`` (the default) configures nothing. Without
the ``opentelemetry-api`` package every function here does nothing; with it but no provider
configured (here or by ``opentelemetry-instrument``) spans are not recorded and no header is
written. Tracing never fails a message: a broken exporter loses spans, not work.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

try:
    from opentelemetry import context as _context
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace

    AVAILABLE = True
except ImportError:  # the [otel] extra is not installed: every function is a no-op
    AVAILABLE = False

from reverie_canary.shared.contract.errors import ConfigError

TRACER_NAME = "reverie_canary"
#: Values of ``CANARY_TRACES``.
EXPORTERS = ("off", "otlp")

_state: dict[str, Any] = {"provider": None, "global": False}


def configure(exporter: str, service: str = "canary") -> None:
    """Set up this process's tracer provider for ``exporter`` once (``off``: nothing of its own).

    Either way a global provider already set (``opentelemetry-instrument``, the application)
    is noticed here and used.

    Args:
        exporter: ``off`` or ``otlp`` (OTLP over HTTP, configured by the ``OTEL_EXPORTER_OTLP_*``
            environment variables).
        service: the ``service.name`` of the resource (``canary-<service>``; one process running
            several services, as ``canary up`` does, names the first).

    Raises:
        ConfigError: ``otlp`` without the ``[otel]`` extra installed.
    """
    if AVAILABLE:  # a provider set by opentelemetry-instrument or the application is used as it is
        _state["global"] = not isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider)
    if exporter == "off" or _state["provider"] is not None:
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ConfigError("CANARY_TRACES=otlp needs the [otel] extra: pip install 'reverie-canary[otel]'") from None
    provider = TracerProvider(resource=Resource.create({"service.name": f"canary-{service}"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    use_provider(provider)


def use_provider(provider: Any | None) -> None:
    """Record spans with ``provider`` (an SDK ``TracerProvider``; tests pass one with an in-memory exporter).

    ``None`` goes back to the global provider (what ``opentelemetry-instrument`` or the
    application configured; by default one that records nothing).
    """
    _state["provider"] = provider


def _on() -> bool:
    """Whether spans can be recorded: a provider here, or a global one (``opentelemetry-instrument``, the app).

    Without either every span would be a no-op anyway; skipping them saves their cost on
    every message (``benchmarks/tracing_bench.py``). The global provider is looked at when a
    service starts (:func:`configure`): reading it costs more than a span does.
    """
    return _state["provider"] is not None or _state["global"]


def enabled() -> bool:
    """Whether spans are recorded at all (a handler of many messages at once can skip building them)."""
    return _on()


def _tracer() -> Any:
    provider = _state["provider"]
    return provider.get_tracer(TRACER_NAME) if provider is not None else _trace.get_tracer(TRACER_NAME)


def inject(headers: dict[str, str]) -> dict[str, str]:
    """Add the current span's trace context to ``headers`` (``traceparent``); returns ``headers``."""
    if _on():
        _propagate.inject(headers)
    return headers


def extract(headers: Mapping[str, Any] | None) -> Any:
    """The trace context carried by a message's ``headers`` (``None`` without OpenTelemetry)."""
    if not AVAILABLE:
        return None
    return _propagate.extract({str(k): str(v) for k, v in (headers or {}).items()})


def current() -> Any:
    """The current context (to be a later span's parent); ``None`` without OpenTelemetry."""
    return _context.get_current() if AVAILABLE else None


@contextlib.contextmanager
def span(name: str, *, headers: Mapping[str, Any] | None = None, parent: Any = None, root: bool = False,
         links: list[Any] | tuple[Any, ...] = (), attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """Run the block in a new current span (yields it; ``None`` without OpenTelemetry).

    Args:
        name: the span's name (``prober ProbeTask``).
        headers: a received message's headers: the span's parent is the context they carry.
        parent: a context from :func:`current` (wins over ``headers``).
        root: start a new trace (discovery's task).
        links: contexts the span is linked to (other results of a decision).
        attributes: span attributes; ``None`` values are left out.
    """
    if not _on():
        yield None
        return
    if root:
        ctx = _context.Context()
    elif parent is not None:
        ctx = parent
    elif headers is not None:
        ctx = extract(headers)
    else:
        ctx = None
    span_links = []
    for linked in links:
        linked_span = _trace.get_current_span(linked)
        if linked_span.get_span_context().is_valid:
            span_links.append(_trace.Link(linked_span.get_span_context()))
    attrs = {k: v for k, v in (attributes or {}).items() if v is not None}
    with _tracer().start_as_current_span(name, context=ctx, links=span_links, attributes=attrs) as current_span:
        yield current_span


class Contexts:
    """A bounded map from a key (a task id) to the context of the span that handled it, oldest dropped first.

    The judge keeps each result's context here until a decision that rests on it is published;
    it is memory only: after a restart a decision starts from the span that emitted it.
    """

    def __init__(self, capacity: int = 20_000) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, Any] = OrderedDict()

    def remember(self, key: str) -> None:
        """Keep the current context under ``key`` (nothing when no span is recording)."""
        if not AVAILABLE or not _trace.get_current_span().get_span_context().is_valid:
            return
        self._items[key] = current()
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def get(self, key: str) -> Any:
        """The context kept under ``key``, or ``None``."""
        return self._items.get(key)

    def __len__(self) -> int:
        return len(self._items)
