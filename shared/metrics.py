"""Prometheus metrics (prometheus-client), one registry per process.

Counters carry the service and a reason label; ``canary run`` exposes them on
``metrics_port`` when it is set (``CANARY_METRICS_PORT``).
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram, start_http_server

MESSAGES = Counter(
    "canary_messages_total",
    "Messages handled, by service and outcome (ack, term, nak)",
    ["service", "outcome"],
)
DEAD_LETTERS = Counter(
    "canary_dead_letters_total",
    "Messages refused and dead-lettered, by service and reason",
    ["service", "reason"],
)
PROBES = Counter(
    "canary_probes_total",
    "Probes run, by kind and outcome",
    ["kind", "outcome"],
)
PROBE_SECONDS = Histogram(
    "canary_probe_seconds",
    "Wall time of one probe (all its requests), seconds",
    ["kind"],
)
DECISIONS = Counter(
    "canary_decisions_total",
    "Judge decisions published, by action",
    ["action"],
)


NOTICES = Counter(
    "canary_notices_total",
    "Notice delivery attempts by channel and outcome (delivered, failed, dead_lettered)",
    ["channel", "outcome"],
)


def serve(port: int) -> None:
    """Expose ``/metrics`` on ``port`` (no-op for 0)."""
    if port:
        start_http_server(port)
