"""What the trace context costs a handled message: ``python benchmarks/tracing_bench.py``.

Times, per message, what shared/runtime/broker.py adds around a handler and a publish (one span
from received headers, the trace context injected into the published headers) in three
states: OpenTelemetry off (the default: no provider, nothing recorded), on with spans
recorded in memory, and the baseline (the headers dict alone). Printed as microseconds and
as ratios to the baseline measured in the same run (the machine is shared).
"""

from __future__ import annotations

import argparse
import time

from reverie_canary.shared.runtime import tracing


def _per_message_us(n: int, traced: bool) -> float:
    received = {"Nats-Msg-Id": "t1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    start = time.perf_counter()
    for i in range(n):
        if traced:
            with tracing.span("prober ProbeTask", headers=received, attributes={"canary.task_id": "t1"}):
                tracing.inject({"Nats-Msg-Id": f"r{i}", "content-type": "application/json"})
        else:
            _ = {"Nats-Msg-Id": f"r{i}", "content-type": "application/json"}
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    args = parser.parse_args()
    if not tracing.AVAILABLE:
        print("tracing_bench: opentelemetry is not installed (pip install 'reverie-canary[otel]'); nothing to measure")
        return
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    base = _per_message_us(args.messages, traced=False)
    off = _per_message_us(args.messages, traced=True)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        on = _per_message_us(args.messages, traced=True)
    finally:
        tracing.use_provider(None)
    print(f"tracing per handled message ({args.messages} messages): baseline {base:.2f} us, "
          f"off {off:.2f} us (x{off / base:.1f}), on, in memory {on:.2f} us (x{on / base:.1f}); "
          f"spans recorded: {len(exporter.get_finished_spans())}")


if __name__ == "__main__":
    main()
