"""The shipped alert rules and dashboard: promtool accepts them, the alerts' unit tests pass, every query is valid."""

from __future__ import annotations

import subprocess

import yaml

from reverie_canary.shared.runtime import metrics
from tests.promql import (
    ALERT_TESTS,
    ALERTS,
    alert_expressions,
    dashboard,
    dashboard_expressions,
    dashboard_panels,
    for_promtool,
    metric_names,
    promtool,
)

#: Series Prometheus itself adds (``up``) or prometheus-client's process collector exports.
NOT_OURS = {"up", "process_resident_memory_bytes", "process_cpu_seconds_total"}


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_promtool_checks_the_alert_rules():
    """`promtool check rules` parses the YAML and every PromQL expression of alerts.yml."""
    done = run("check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_expressions())} rules found" in done.stdout


def test_the_main_alerts_fire_when_they_should_and_only_then():
    """`promtool test rules`: no cycle closed, blind, floor held, dead-lettered notices, readiness, backlog, a positive
    control that stopped failing, and the first expired task or dead letter after a start (series created at 0 fire;
    a series born at 2 would not)."""
    done = run("test", "rules", ALERT_TESTS.name, cwd=ALERT_TESTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    tested = {t["alertname"] for test in yaml.safe_load(ALERT_TESTS.read_text())["tests"]
              for t in test["alert_rule_test"]}
    assert {"CanaryNoCycleClosed", "CanaryBlind", "CanaryFloorHeld", "CanaryNoticesDeadLettered",
            "CanaryServiceNotReady", "CanaryDependencyUnreachable", "CanaryConsumerBacklogGrowing",
            "CanaryTasksExpiredUnprobed", "CanaryMessagesDeadLettered", "CanaryPositiveControlNotFailing"} <= tested


def test_a_broken_rule_is_refused_by_promtool(tmp_path):
    """The check can fail: a rule with a PromQL syntax error exits 1 (so the checks above mean something)."""
    bad = tmp_path / "bad.yml"
    bad.write_text("groups:\n  - name: x\n    rules:\n      - alert: Broken\n        expr: sum by (model (canary_blind)\n")
    assert run("check", "rules", str(bad)).returncode == 1


def test_every_dashboard_query_is_valid_promql(tmp_path):
    """Each panel's expression, Grafana variables replaced, passes promtool as a recording rule."""
    exprs = dashboard_expressions()
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": for_promtool(expr)} for i, expr in enumerate(exprs.values())]}]}
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump(rules))
    done = run("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_is_well_formed_grafana_json():
    """A stable uid, a datasource variable every query uses, unique ids, panels inside 24 columns."""
    dash = dashboard()
    assert 8 <= len(dash["uid"]) <= 40 and dash["title"] and isinstance(dash["schemaVersion"], int)
    assert "id" not in dash or dash["id"] is None
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = dashboard_panels()
    assert len({p["id"] for p in panels}) == len(panels) and len(panels) >= 20
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["refId"] and target["expr"].strip(), panel["title"]


def test_every_name_queried_is_a_declared_series():
    """Alerts and dashboard name only series of the table in shared/runtime/metrics.py (the live scrape test checks more)."""
    declared = set(NOT_OURS)
    for fam in metrics.FAMILIES:
        declared.add(fam.name)
        if fam.kind == "histogram":
            declared |= {f"{fam.name}_bucket", f"{fam.name}_sum", f"{fam.name}_count"}
    queried = {name: where for where, expr in {**alert_expressions(), **dashboard_expressions()}.items()
               for name in metric_names(expr)}
    assert {name: where for name, where in queried.items() if name not in declared} == {}


def test_metric_names_reads_promql_as_prometheus_does():
    """The name extractor the checks rely on: functions, label matchers, modifiers and numbers are not names."""
    assert metric_names('histogram_quantile(0.95, sum by (provider, le) (rate(a_bucket{model=~"$model"}[5m])))') == {
        "a_bucket"}
    assert metric_names("(time() - b_ts) > 2 * c_interval") == {"b_ts", "c_interval"}
    assert metric_names('x * on (job, instance) group_left (service) y offset 5m') == {"x", "y"}
    assert metric_names('min_over_time(p[15m]) > 0 and deriv(p[15m]) > 1e3') == {"p"}


def test_promtool_accepts_the_prometheus_configuration_and_its_rule_file(tmp_path):
    """monitoring/prometheus/prometheus.yml (compose's monitoring profile) is a valid configuration, its files
    present as compose mounts them (the dashboard job's token is a secret under /run/secrets: here, a copy)."""
    import shutil

    config = yaml.safe_load((ALERTS.parent / "prometheus.yml").read_text())
    (dashboard,) = [job for job in config["scrape_configs"] if job["job_name"] == "canary-dashboard"]
    secret = dashboard["authorization"]["credentials_file"]
    assert secret == "/run/secrets/dashboard_metrics_token"  # compose.yaml's secret, mounted in the prometheus container
    token = tmp_path / "dashboard_metrics_token"
    token.write_text("x" * 43 + "\n")
    folder = tmp_path / "prometheus"
    shutil.copytree(ALERTS.parent, folder)
    text = (folder / "prometheus.yml").read_text()
    (folder / "prometheus.yml").write_text(text.replace(secret, str(token)))
    done = run("check", "config", str(folder / "prometheus.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    token.unlink()
    assert run("check", "config", str(folder / "prometheus.yml")).returncode == 1  # the file is checked too


def test_the_alert_reference_lists_every_shipped_alert_with_its_severity():
    """docs/reference/alerts.md's table: one row per rule of alerts.yml (CanaryBlind, CanaryPositiveControlNotFailing
    ...), the rule's own severity, and no row for an alert that does not exist."""
    import re
    from pathlib import Path

    rules = {rule["alert"]: rule["labels"]["severity"] for group in yaml.safe_load(ALERTS.read_text())["groups"]
             for rule in group["rules"] if "alert" in rule}
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "alerts.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| \[(Canary\w+)\]\(#\w+\) \| (\w+) \|", page, flags=re.MULTILINE))
    assert table == rules


def test_no_panel_shows_no_data_on_a_fresh_healthy_system():
    """A counter's increase or rate falls back to 0 (``or on() vector(0)``: a counter no event has touched yet has no
    series), and a table whose rows are filtered (``== 1``, ``> 0``) names its empty state (``noValue``): on a fresh,
    healthy system nothing is suspended, failed or dead-lettered, and "No data" would read as a broken scrape."""
    import re

    counter = re.compile(r"\b(increase|rate)\(\s*canary_\w+_total\b")
    filtered = re.compile(r"(==\s*1|>\s*0)\s*$")
    silent = []
    for panel in dashboard_panels():
        exprs = [t["expr"] for t in panel.get("targets", [])]
        if not exprs:
            continue
        no_value = panel.get("fieldConfig", {}).get("defaults", {}).get("noValue")
        if any(filtered.search(e) for e in exprs) and not no_value:
            silent.append(f"{panel['title']}: filtered rows and no noValue")
        for e in exprs:
            if counter.search(e) and not filtered.search(e) and not e.rstrip().endswith("or on() vector(0)"):
                silent.append(f"{panel['title']}: {e}")
    assert silent == []
