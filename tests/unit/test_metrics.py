"""The series table, label bounds, ports, and the judge's and prober's series from real state and results."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reverie_canary.canary.runtime import SERVICES, metrics_ports_of
from reverie_canary.services.judge import gauges
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.services.judge.service import JUDGE_INPUT
from reverie_canary.services.prober.service import record
from reverie_canary.shared.contract.events import ProbeAttempt, ProbeResult, ReplyEvidence
from reverie_canary.shared.runtime import metrics
from reverie_canary.shared.runtime.settings import Settings
from tests.conftest import STANDARD_METRICS_PORTS
from tests.judge_events import MODEL, T0, cycle_events, healthy

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios" / "judge"


def test_the_table_names_each_series_once_with_bounded_labels():
    """Unique names, counters end in _total, every label has a budget, state families only where state lives."""
    names = [f.name for f in metrics.FAMILIES]
    assert len(names) == len(set(names))
    for fam in metrics.FAMILIES:
        assert fam.name.startswith("canary_")
        assert fam.name.endswith("_total") == (fam.kind == "counter"), fam.name
        assert set(fam.labels) - {"service"} <= set(metrics.LABEL_BUDGET), fam.name
        assert "task_id" not in fam.labels and "cycle" not in fam.labels
        if fam.kind == "state":
            assert set(fam.services) <= {"judge", "router", "dashboard"}, fam.name
    assert metrics.FAMILY["ttft"].buckets[-1] == 60


@pytest.mark.parametrize("service", SERVICES)
def test_each_services_registry_renders_text_that_prometheus_parses(service):
    """A fresh registry of every service renders exposition text the parser reads, with its own families only."""
    series = metrics.ServiceMetrics(service)
    text = generate_latest(series.registry).decode()
    families = {f.name for f in text_string_to_metric_families(text)}
    own = {f.name.removesuffix("_total") for f in metrics.families_of(service)}
    assert own <= families
    others = {f.name.removesuffix("_total") for f in metrics.FAMILIES} - own
    assert not others & families
    assert "process_resident_memory_bytes" in families


def test_a_label_with_too_many_values_folds_the_rest_into_other_and_says_so():
    """Past its budget a label's new values become _other and the fold is counted; known values keep working."""
    series = metrics.ServiceMetrics("prober")
    budget = metrics.LABEL_BUDGET["reason"]
    for i in range(budget + 3):
        series.inc("probes", model="m", provider="p", kind="ttft", outcome="fail", reason=f"r{i}")
    series.inc("probes", model="m", provider="p", kind="ttft", outcome="fail", reason="r0")
    assert series.sample_value("canary_probes_total", model="m", provider="p", kind="ttft", outcome="fail",
                               reason="_other") == 3
    assert series.sample_value("canary_probes_total", model="m", provider="p", kind="ttft", outcome="fail",
                               reason="r0") == 2
    assert series.sample_value("canary_metrics_labels_folded_total", service="prober", label="reason") == 3


def test_ports_standard_explicit_per_service_and_off():
    """0: the standard port; a port for one service; per-service entries win; -1 turns an endpoint off."""
    assert STANDARD_METRICS_PORTS == {"discovery": 9471, "prober": 9472, "judge": 9473, "router": 9474, "notifier": 9475}
    assert metrics.resolve_port(Settings.load(env={}), "judge") == metrics.STANDARD_PORTS["judge"]
    s = Settings.load(env={}, metrics_port=9100, metrics_ports={"prober": 0, "notifier": -1})
    assert metrics.resolve_port(s, "judge") == 9100
    assert metrics.resolve_port(s, "prober") == 0 and metrics.resolve_port(s, "notifier") is None
    assert metrics.resolve_port(Settings.load(env={}, metrics_port=-1), "judge") is None
    up = metrics_ports_of(s, list(SERVICES))  # canary up: one port each, from the one given
    assert up.metrics_ports == {"discovery": 9100, "prober": 0, "judge": 9102, "router": 9103, "notifier": -1}
    assert metrics_ports_of(s, ["judge"]) is s


def test_bad_metrics_settings_are_refused_naming_the_field():
    with pytest.raises(Exception, match="metrics_ports: unknown service 'jduge'"):
        Settings.load(env={"CANARY_METRICS_PORTS": "jduge=9000"})
    with pytest.raises(Exception, match="metrics_port must be a TCP port"):
        Settings.load(env={"CANARY_METRICS_PORT": "70000"})
    assert Settings.load(env={"CANARY_METRICS_PORTS": "judge=9000,prober=0"}).metrics_ports == {"judge": 9000,
                                                                                                "prober": 0}


def by_key(samples) -> dict:
    return {(key, tuple(sorted(labels.items()))): value for key, labels, value in samples}


def test_judge_series_show_a_held_floor_and_a_suspension_as_the_state_has_them():
    """capacity_floor_holds: a/fp8 failed twice but the floor keeps it; then a plain suspension elsewhere."""
    events = [JUDGE_INPUT.decode(line) for line in (SCENARIOS / "capacity_floor_holds.jsonl").read_bytes().splitlines()
              if line.strip()]
    policy = Policy(mode="observe", models=(MODEL,))
    states, decisions = fold(events, policy)
    assert [d.action for d in decisions if getattr(d, "action", "") == "floor_held"]
    got = by_key(gauges.samples(states, policy, cycle_interval_s=1800))
    p = (("model", MODEL), ("provider", "a/fp8"))
    assert got[("provider_floor_held", p)] == 1 and got[("provider_suspended", p)] == 0
    assert got[("provider_streak", (*p, ("streak", "failed")))] >= 2
    assert got[("provider_verdict", (("model", MODEL), ("provider", "a/fp8"), ("verdict", "failed")))] == 1
    assert got[("cycle_interval", (("model", MODEL),))] == 1800
    assert got[("mode_enforce", (("kind", "ttft"), ("model", MODEL)))] == 1  # the scenario's SetMode enforce

    fleet = ("a/fp8", "b/fp8", "c/fp8", "d/fp8", "e/fp8")
    out = healthy(*fleet)
    out["b/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    live = [*cycle_events(0, out), *cycle_events(1, out)]
    states, decisions = fold(live, Policy(mode="enforce", models=(MODEL,)))
    assert [d.action for d in decisions if getattr(d, "provider", "") == "b/fp8"] == ["suspend"]
    got = by_key(gauges.samples(states, Policy(mode="enforce"), cycle_interval_s=1800))
    b = (("model", MODEL), ("provider", "b/fp8"))
    assert got[("provider_suspended", b)] == 1 and got[("provider_floor_held", b)] == 0
    assert got[("provider_ladder_step", b)] == 1
    until = states[MODEL].providers["b/fp8"].suspension.until
    assert got[("provider_suspended_until", b)] == until.timestamp()
    assert got[("cycle_closed_at", (("model", MODEL),))] == live[-1].at.timestamp()  # cycle 1's deadline
    assert ("provider_suspended_until", (("model", MODEL), ("provider", "a/fp8"))) not in got


def test_a_probe_result_counts_its_outcome_ttft_of_every_try_and_its_spend():
    """A language probe with two confirmations: one probe counted, three TTFTs, tokens and USD of the three."""
    m = metrics.of("prober")
    labels = {"model": "m/unit", "provider": "p/fp8"}
    names = {"probes": ("canary_probes_total", {**labels, "kind": "language", "outcome": "fail",
                                                "reason": "language_switch"}),
             "ttft": ("canary_probe_ttft_seconds_count", labels),
             "slow": ("canary_probe_ttft_seconds_bucket", {**labels, "le": "10.0"}),
             "prompt": ("canary_probe_tokens_total", {**labels, "type": "prompt"}),
             "completion": ("canary_probe_tokens_total", {**labels, "type": "completion"}),
             "usd": ("canary_probe_cost_usd_total", labels)}

    def values() -> dict[str, float]:
        return {k: m.sample_value(name, **lab) or 0.0 for k, (name, lab) in names.items()}

    def reply(ttft_ms):
        return ReplyEvidence(ttft_ms=ttft_ms, usage={"prompt_tokens": 100, "completion_tokens": 40, "cost": 0.0002})

    result = ProbeResult(at=T0, task_id="t1", model="m/unit", provider="p/fp8", kind="language", cycle="c",
                         outcome="fail", reason="language_switch", reply=reply(400.0),
                         attempts=[ProbeAttempt(outcome="fail", reply=reply(t)) for t in (400.0, 900.0, 12000.0)])
    before = values()
    record(result, 3.2)
    delta = {k: v - before[k] for k, v in values().items()}
    assert delta == pytest.approx({"probes": 1, "ttft": 3, "slow": 2, "prompt": 300, "completion": 120,
                                   "usd": 0.0006})


def rated_counters() -> set[str]:
    """Every counter (or histogram) family that an alert or a dashboard panel takes increase() or rate() of."""
    import re

    from tests.promql import alert_expressions, dashboard_expressions

    names = set()
    for expr in [*alert_expressions().values(), *dashboard_expressions().values()]:
        names |= set(re.findall(r"\b(?:increase|rate|irate)\(\s*([a-z_:]+)", expr))
    return names


def test_every_rated_counter_has_its_known_label_sets_created_at_start():
    """increase() misses a series' first event unless it existed before at 0: every family an alert or the dashboard
    rates is created at start for each label set a service knows then (provider-labelled ones come with events)."""
    from reverie_canary.shared.runtime.service import known_series

    settings = Settings.load(env={}, models=["acme/chat-1", "acme/chat-2"])
    created = {(service, key) for service in SERVICES for key, _ in known_series(service, settings)}
    created |= {("notifier", "notices")} | {(s, "dependency_outages") for s in SERVICES}  # notifier, shared/runtime/health.py
    by_name = {f.name.removesuffix("_total"): f for f in metrics.FAMILIES if f.kind in ("counter", "histogram")}
    rated = {by_name[n.removesuffix("_total").removesuffix("_bucket")] for n in rated_counters()
             if n.removesuffix("_total").removesuffix("_bucket") in by_name}
    assert {"canary_dead_letters_total", "canary_tasks_expired_total"} <= {f.name for f in rated}
    for family in rated:
        if "provider" in family.labels:
            continue  # the providers are known from the first listing on, with the events themselves
        for service in family.services or SERVICES:
            assert (service, family.key) in created, (service, family.name)
    for service in SERVICES:
        models = {labels["model"] for key, labels in known_series(service, settings) if "model" in labels}
        assert models in (set(), set(settings.models)), service


def test_every_dead_letter_reason_the_shell_gives_is_created_at_start():
    """The reasons of the one settle table are one list, and it is what start creates."""
    from reverie_canary.shared.runtime import service, settle

    assert {reason for _, reason in settle.REFUSALS} <= set(settle.DEAD_LETTER_REASONS)
    assert {"rejected", "too_large", "gave_up", "undecodable"} <= set(settle.DEAD_LETTER_REASONS)
    for name in SERVICES:
        assert {labels["reason"] for key, labels in service.known_series(name, Settings.load(env={}))
                if key == "dead_letters"} == set(settle.DEAD_LETTER_REASONS)
