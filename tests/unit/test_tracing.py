"""shared/runtime/tracing.py: off by default, bounded, and the context goes into and out of NATS headers."""

from __future__ import annotations

import pytest

from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime import tracing
from reverie_canary.shared.runtime.settings import Settings

sdk = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402


@pytest.fixture
def exporter():
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield exporter
    finally:
        tracing.use_provider(None)


def test_off_by_default_nothing_is_recorded_and_no_header_written():
    """With no provider configured a span records nothing and a published message gets no traceparent."""
    assert Settings.load(env={}).traces == "off"
    tracing.configure("off")
    with tracing.span("x"):
        assert tracing.inject({}) == {}


def test_a_span_made_from_received_headers_is_the_child_of_the_sender(exporter):
    """inject() in the sender's span, span(headers=...) in the receiver: same trace, parent = sender."""
    with tracing.span("sender", root=True) as sender:
        headers = tracing.inject({"Nats-Msg-Id": "x"})
    assert headers["traceparent"].split("-")[2] == format(sender.get_span_context().span_id, "016x")
    with tracing.span("receiver", headers=headers, attributes={"canary.task_id": "t1", "none": None}):
        pass
    receiver = next(s for s in exporter.get_finished_spans() if s.name == "receiver")
    assert receiver.parent.span_id == sender.get_span_context().span_id
    assert receiver.context.trace_id == sender.get_span_context().trace_id
    assert dict(receiver.attributes) == {"canary.task_id": "t1"}


def test_kept_contexts_are_bounded_oldest_first(exporter):
    """Contexts keeps at most its capacity, dropping the oldest; nothing is kept outside a span."""
    kept = tracing.Contexts(capacity=2)
    kept.remember("outside")
    assert len(kept) == 0
    for key in ("a", "b", "c"):
        with tracing.span(key, root=True):
            kept.remember(key)
    assert len(kept) == 2 and kept.get("a") is None and kept.get("c") is not None


def test_an_unknown_exporter_is_refused():
    """CANARY_TRACES is off or otlp."""
    with pytest.raises(ConfigError, match="traces must be off or otlp"):
        Settings.load(env={"CANARY_TRACES": "jaeger"})
