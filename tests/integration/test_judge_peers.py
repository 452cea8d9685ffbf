"""Facts across the providers of a model on a real NATS and Redis: the template verdict and the slow_vs_peers gauge."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reverie_canary.canary.demo import judge_record
from reverie_canary.canary.runtime import running
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.shared.contract.events import CycleVerdict, Decision
from reverie_canary.shared.runtime import metrics, streams
from reverie_canary.shared.runtime.eventlog import read_log
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG
from tests import waits
from tests.judge_events import MODEL, cycle_events, healthy, publish_events

pytestmark = pytest.mark.integration
FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8", "e/fp8")
#: e/fp8 answers in 4 s (under the 10 s bar), the others in 0.4-0.7 s; c/fp8 reads 412 prompt tokens, the others 380.
TTFT = {"a/fp8": 400.0, "b/fp8": 500.0, "c/fp8": 600.0, "d/fp8": 700.0, "e/fp8": 4000.0}
NUMBERS = {p: {"ttft": {"ttft_ms": ms, "prompt_tokens": 412 if p == "c/fp8" else 380, "completion_tokens": 40}}
           for p, ms in TTFT.items()}


async def test_the_template_fact_and_the_slow_vs_peers_gauge_appear_and_nothing_is_suspended_for_slowness(infra):
    """Three cycles through the judge service: c/fp8 fails template (would_suspend: observe), e/fp8 is slow_vs_peers only."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL], mode="enforce")
    await ensure_streams(settings)
    events = [e for n in range(3) for e in cycle_events(n, healthy(*FLEET), numbers=NUMBERS)]
    nc = await nats_connect(settings)
    js = nc.jetstream()
    durable = streams.judge_consumer(settings).durable
    try:
        async with running(settings, ["judge"]):
            await publish_events(js, events)
            await waits.until(lambda: waits.caught_up(js, LOG, durable), timeout_s=30,
                              what="the judge caught up with the log")
            record = await judge_record(settings, MODEL)
            async with httpx.AsyncClient(timeout=5) as http:
                scraped = (await http.get(metrics.endpoint("judge").url)).text
        logged = [e.event for e in await read_log(js, idle_s=0.5)]
    finally:
        await nc.close()
    expected, _ = fold(events, Policy.from_settings(settings))
    assert record.state == expected[MODEL]
    slow = {s.labels["provider"]: s.value for f in text_string_to_metric_families(scraped) for s in f.samples
            if s.name == "canary_provider_slow_vs_peers"}
    assert slow == {"a/fp8": 0.0, "b/fp8": 0.0, "c/fp8": 0.0, "d/fp8": 0.0, "e/fp8": 1.0}
    bar = [s.value for f in text_string_to_metric_families(scraped) for s in f.samples
           if s.name == "canary_model_ttft_peer_bar_ms"]
    assert bar == [1600.0]
    verdicts = [e for e in logged if isinstance(e, CycleVerdict)]
    assert [{v.provider: v.reasons for v in cv.verdicts if v.reasons} for cv in verdicts] == [
        {"c/fp8": ["template:prompt_tokens_differ (ttft/en: prompt_tokens 412, peers 380)"]}] * 3
    decisions = [(d.action, d.provider, d.mode) for d in logged if isinstance(d, Decision)]
    assert decisions == [("would_suspend", "c/fp8", "observe")]  # template observes; slowness never suspends
