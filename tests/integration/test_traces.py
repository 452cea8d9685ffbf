"""One probe is one trace, from discovery's task to the router's snapshot (shared/runtime/tracing.py).

The whole pipeline runs on real NATS and Redis with an in-memory span exporter; the trace
context travels in the NATS headers of the task, the result and the decision.
"""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from reverie_canary.canary.demo import pipeline  # noqa: E402
from reverie_canary.shared.runtime import tracing  # noqa: E402
from tests.waits import until  # noqa: E402

pytestmark = pytest.mark.integration

BROKEN = "baseten/fp8"


@pytest.fixture
def spans():
    """Spans of this test, recorded in memory (the process's tracer provider restored after)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield exporter
    finally:
        tracing.use_provider(None)
        provider.shutdown()


def _suspend_snapshot_span(exporter):
    """The router's snapshot span holding the broken provider's suspension, and that decision's router span.

    The snapshot is the child of the router span of the decision that made the version, and linked
    to the router spans of the earlier routing decisions of the same close (one version per close:
    ``Decision.routing_follows``); the broken provider's decision may be either.
    """
    finished = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}

    def suspends_broken(span_id):
        handled = by_id.get(span_id)
        return handled is not None and handled.name == "router Decision" \
            and handled.attributes.get("canary.provider") == BROKEN \
            and handled.attributes.get("canary.action") == "suspend"

    for s in finished:
        if s.name != "router snapshot":
            continue
        for ctx in [*([s.parent] if s.parent is not None else []), *(link.context for link in s.links)]:
            if suspends_broken(ctx.span_id):
                return s, by_id[ctx.span_id]
    return None


async def test_one_probe_is_one_trace_from_discovery_to_the_routers_snapshot(tmp_path, spans):
    """task -> probe -> result -> decision -> router: one trace id, each span the child of the one before;
    the router's snapshot holding the suspension is that router span's child or, when a later decision
    of the same close made the version, linked to it."""
    async with pipeline(workdir=tmp_path, scenario="default") as p:
        snapshot_span, router_span = await until(
            lambda: _suspend_snapshot_span(spans), timeout_s=90,
            what="the router's snapshot span of the broken provider's suspension")
        decisions = [d for d in p.observer.decisions if d.provider == BROKEN and d.action == "suspend"]
    by_id = {s.context.span_id: s for s in spans.get_finished_spans()}
    chain = [router_span]
    while chain[-1].parent is not None:
        chain.append(by_id[chain[-1].parent.span_id])
    assert [s.name for s in chain] == ["router Decision", "judge decision", "judge ProbeResult",
                                       "prober ProbeTask", "discovery task"]
    assert len({s.context.trace_id for s in chain}) == 1
    router, decision, result, probe, task = chain
    # the snapshot: in this trace, or in the trace of the close's last decision and linked to this one
    assert snapshot_span.parent is not None  # the close's last decision arrived: it made the version
    made_it = by_id[snapshot_span.parent.span_id]
    assert made_it.name == "router Decision"
    assert made_it.attributes["canary.model"] == router.attributes["canary.model"]
    if made_it is not router:
        assert router.context.span_id in {link.context.span_id for link in snapshot_span.links}
        assert made_it.end_time >= router.end_time
    # the same probe all along, and one the decision rests on
    task_id = task.attributes["canary.task_id"]
    assert probe.attributes["canary.task_id"] == result.attributes["canary.task_id"] == task_id
    assert task.attributes["canary.provider"] == BROKEN
    assert router.attributes["canary.decision_id"] == decision.attributes["canary.decision_id"]
    assert len(decisions) == 1 and decisions[0].decision_id == decision.attributes["canary.decision_id"]
    assert task_id in {ref.task_id for ref in decisions[0].evidence}
    # a decision rests on several results: the others are links, each to its own probe's trace
    assert len(decision.links) == decision.attributes["canary.evidence"] - 1 >= 1
    assert all(link.context.trace_id != decision.context.trace_id for link in decision.links)
    assert snapshot_span.attributes["canary.version"] >= 2


def test_canary_traces_otlp_exports_the_spans_to_the_configured_endpoint(monkeypatch):
    """CANARY_TRACES=otlp: spans reach OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as OTLP protobuf, named after the service."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[tuple[str, str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers.get("Content-Type", ""), body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{server.server_port}/v1/traces")
    tracing.use_provider(None)
    try:
        tracing.configure("otlp", "judge")
        provider = tracing._state["provider"]
        assert provider is not None
        with tracing.span("judge ProbeResult", root=True, attributes={"canary.task_id": "t1"}):
            pass
        assert provider.force_flush(10_000)
    finally:
        if tracing._state["provider"] is not None:
            tracing._state["provider"].shutdown()
        tracing.use_provider(None)
        server.shutdown()
        thread.join(timeout=5)
    assert [(path, kind) for path, kind, _ in received] == [("/v1/traces", "application/x-protobuf")]
    request = ExportTraceServiceRequest.FromString(received[0][2])
    [resource_spans] = request.resource_spans
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
    names = [s.name for scope in resource_spans.scope_spans for s in scope.spans]
    assert service == "canary-judge" and names == ["judge ProbeResult"]
