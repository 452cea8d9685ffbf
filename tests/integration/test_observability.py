"""The running services' /metrics, /healthz and /readyz: parsed, true to the demo, naming every series queried.

One demo pipeline (embedded NATS and Redis, the simulated gateway, all five
services on free metrics ports: the default demo the modules that only read one
share, ``tests/demo_run.py``) until the default fleet's slow and broken
providers are suspended; then every endpoint is scraped over HTTP and read
with prometheus-client's parser.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reverie_canary.canary.runtime import SERVICES
from tests.promql import alert_expressions, dashboard_expressions, metric_names

pytestmark = pytest.mark.integration

#: Added by Prometheus itself, not by a target.
PROMETHEUS_OWN = {"up"}
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "summary": ("_count", "_sum")}


def exported_names(families) -> set[str]:
    """Every series name a scrape offers: sample names, and for a family without samples its typed names."""
    names = set()
    for family in families:
        names.add(family.name)
        names |= {sample.name for sample in family.samples}
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ())}
    return names


def values(families, name: str) -> list[tuple[dict, float]]:
    return [(s.labels, s.value) for f in families for s in f.samples if s.name == name]


@pytest.fixture(scope="module")
def scraped(default_demo):
    """Demo cycles until suspensions are in force, then every service's three endpoints and the summary."""
    p = default_demo.p  # the default demo the reading modules share (tests/demo_run.py), run on its loop

    async def run():
        # until the slow and the broken provider are suspended (two failed cycles; the first may be late)
        for cycles in range(3, 7):
            assert await p.wait_cycles(cycles)
            await asyncio.sleep(0.5)  # the last decisions reach the router
            summary = await p.summary()
            if len(set(summary["ignore"]) - set(summary["excluded"])) >= 2:  # the control: excluded from the start
                break
        out = {}
        async with httpx.AsyncClient(timeout=10) as http:
            for service, url in p.metrics_urls.items():
                base = url.removesuffix("/metrics")
                out[service] = {"metrics": await http.get(url), "healthz": await http.get(f"{base}/healthz"),
                                "readyz": await http.get(f"{base}/readyz")}
            # the dashboard serves what the judge's state does not keep (the positive controls per cycle)
            login = p.dashboard_login
            dashboard = await http.get(f"{p.dashboard_url.rstrip('/')}/metrics", auth=(login.user, login.password))
            assert dashboard.status_code == 200
        return summary, out, dashboard

    return default_demo.call(run(), timeout_s=120)


def test_every_service_serves_metrics_health_and_readiness_that_parse(scraped):
    """Five services, each: /metrics in the text format the parser reads, /healthz and /readyz 200."""
    summary, out, _ = scraped
    assert set(out) == set(SERVICES) and set(summary["metrics"]) == set(SERVICES)
    for service, answers in out.items():
        assert answers["metrics"].status_code == 200
        assert answers["metrics"].headers["content-type"].startswith("text/plain; version=")
        families = list(text_string_to_metric_families(answers["metrics"].text))
        assert any(f.name == "canary_ready" and f.samples[0].value == 1 for f in families), service
        assert answers["healthz"].status_code == 200
        assert answers["readyz"].status_code == 200 and answers["readyz"].text == f"ready: {service}\n"


def test_the_series_say_what_the_demo_summary_says_for_every_provider(scraped):
    """Suspended, last verdict, ignore-list size and version, probes and TTFT agree with the summary."""
    summary, out, _ = scraped
    judge = list(text_string_to_metric_families(out["judge"]["metrics"].text))
    router = list(text_string_to_metric_families(out["router"]["metrics"].text))
    prober = list(text_string_to_metric_families(out["prober"]["metrics"].text))
    model = summary["model"]
    suspended = {labels["provider"] for labels, v in values(judge, "canary_provider_suspended")
                 if labels["model"] == model and v == 1}
    assert suspended == {p for p, info in summary["providers"].items() if info["state"] == "suspended"}
    assert suspended  # the default fleet's slow and broken providers
    last = {labels["provider"]: labels["verdict"] for labels, v in values(judge, "canary_provider_verdict")
            if labels["model"] == model and v == 1}
    assert last == {p: info["verdicts"][-1] for p, info in summary["providers"].items()}
    size = {labels["layer"]: v for labels, v in values(router, "canary_ignore_list_size") if labels["model"] == model}
    # the demo's reviewed exclusions keep the refusal control out of live traffic: layer 1 counts it
    assert size["all"] == len(summary["ignore"])
    assert size["suspension"] == len(summary["ignore"]) - len(summary["excluded"])
    assert size["exclusion"] == len(summary["excluded"]) == 1
    assert values(router, "canary_ignore_list_version") == [({"model": model}, summary["snapshot_version"])]
    probed = {labels["provider"] for labels, v in values(prober, "canary_probes_total")
              if labels["model"] == model and v > 0}
    assert set(summary["providers"]) <= probed
    ttft = {labels["provider"]: v for labels, v in values(prober, "canary_probe_ttft_seconds_count")
            if labels["model"] == model}
    assert all(ttft.get(p, 0) > 0 for p, info in summary["providers"].items() if info["state"] == "passing")
    pending = values(prober, "canary_consumer_pending")
    assert [(labels["service"], labels["stream"]) for labels, _ in pending] == [("prober", "CANARY_TASKS")]
    assert all(v >= 0 for _, v in pending)


def test_every_series_the_dashboard_and_the_alerts_query_is_exported(scraped):
    """Each metric name in every panel query and every alert expression is offered by a live /metrics."""
    _, out, dashboard = scraped
    exported = set(PROMETHEUS_OWN) | exported_names(text_string_to_metric_families(dashboard.text))
    for answers in out.values():
        exported |= exported_names(text_string_to_metric_families(answers["metrics"].text))
    queried = {**{f"alert {k}": v for k, v in alert_expressions().items()},
               **{f"panel {k}": v for k, v in dashboard_expressions().items()}}
    missing = {where: sorted(metric_names(expr) - exported) for where, expr in queried.items()
               if metric_names(expr) - exported}
    assert missing == {}
    assert len(queried) > 40
