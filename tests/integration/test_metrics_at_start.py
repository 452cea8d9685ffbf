"""Right after start, every service's /metrics has each label set it knows at 0 (alerts see the first event)."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reverie_canary.canary.runtime import SERVICES, running
from reverie_canary.services.notifier.core import SEVERITIES
from reverie_canary.shared.runtime import metrics
from reverie_canary.shared.runtime.service import ensure_streams, known_series
from reverie_canary.shared.runtime.settings import Settings
from tests.notifier_receiver import new_secret

pytestmark = pytest.mark.integration

MODELS = ["acme/chat-1", "acme/chat-2"]


#: Series a start itself may count: the router publishes each model's first ignore-list version and the
#: judge reads them (acknowledged messages).
STARTS_WITH = [("messages", {"outcome": "ack"}), *(("snapshots_published", {"model": m}) for m in MODELS)]


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def exposed_name(key: str) -> str:
    family = metrics.FAMILY[key]
    return family.name + "_count" if family.kind == "histogram" else family.name


async def test_every_service_exposes_its_known_series_at_zero_right_after_start(infra, monkeypatch):
    """All five services started (no cycle yet: an hour apart): each known label set is a sample at 0."""
    monkeypatch.setattr(metrics, "_metrics", {})  # this process's own series only, none from earlier tests
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=MODELS, cycle_interval_s=3600.0, probe_window_s=600.0,
                             openrouter_base_url="http://127.0.0.1:9/api/v1",
                             notify_urls={"hook": "http://127.0.0.1:9/hook"}, notify_secrets={"hook": new_secret()})
    await ensure_streams(settings)
    async with running(settings, SERVICES), httpx.AsyncClient(timeout=10) as http:
        scraped = {name: samples((await http.get(url)).text) for name, url in metrics.urls().items()}
    assert set(scraped) == set(SERVICES)
    for service in SERVICES:
        expected = known_series(service, settings)
        if service == "notifier":
            expected += [("notices", {"channel": "hook", "outcome": o, "severity": s}) for s in SEVERITIES
                         for o in ("delivered", "failed", "dead_lettered")]
        assert len(expected) >= 9, service
        for key, labels in expected:
            sample = (exposed_name(key), frozenset({**labels, "service": service}.items())
                      if "service" in metrics.FAMILY[key].labels else frozenset(labels.items()))
            value = scraped[service].get(sample)
            if (key, labels) in STARTS_WITH:  # the start itself counts these (the router's first versions, read)
                assert value is not None and value >= 0, (service, sample, value)
            else:
                assert value == 0, (service, sample, value)
    # the two the issue names, for every model and every dead-letter reason
    for model in MODELS:
        assert scraped["prober"][("canary_tasks_expired_total", frozenset({"model": model}.items()))] == 0
    for service in SERVICES:
        assert scraped[service][("canary_dead_letters_total",
                                 frozenset({"service": service, "reason": "undecodable"}.items()))] == 0
