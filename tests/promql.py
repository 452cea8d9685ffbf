"""What the shipped alert rules and the Grafana dashboard query: their PromQL expressions and the metric names in them."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ALERTS = ROOT / "monitoring" / "prometheus" / "alerts.yml"
ALERT_TESTS = ROOT / "monitoring" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "monitoring" / "grafana" / "dashboards" / "canary.json"

#: PromQL words that are not metric names (operators, modifiers, constants).
KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
                      "unless", "inf", "nan", "atan2"})
#: Grafana's variables, replaced by a value that parses, to check the expressions with promtool.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$model": ".*"}


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (``rate(x_total{a="b"}[5m]) / y`` -> ``{x_total, y}``).

    Strings, label matchers, ranges and the label lists of ``by``/``on``/``group_left``
    are removed first; an identifier followed by ``(`` is a function or aggregation.
    """
    s = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    s = re.sub(r"'(?:\\.|[^'\\])*'", "''", s)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*(\([^)]*\))?", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*", s):
        if m.group() in KEYWORDS or s[m.end():].lstrip().startswith("("):
            continue
        names.add(m.group())
    return names


def alert_expressions() -> dict[str, str]:
    """``{alert name: expr}`` of every rule in the shipped rule file."""
    doc = yaml.safe_load(ALERTS.read_text())
    return {rule.get("alert") or rule["record"]: str(rule["expr"]) for group in doc["groups"] for rule in group["rules"]}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_panels() -> list[dict]:
    """Every panel of the dashboard that queries (rows and panels nested in collapsed rows included)."""
    out = []
    for panel in dashboard()["panels"]:
        out.extend(panel.get("panels", []))
        if panel.get("type") != "row":
            out.append(panel)
    return out


def dashboard_expressions() -> dict[str, str]:
    """``{"panel title / refId": expr}`` of every query of the dashboard (and of its variables)."""
    out = {f"{p['title']} / {t['refId']}": t["expr"] for p in dashboard_panels() for t in p.get("targets", [])}
    for var in dashboard()["templating"]["list"]:
        query = var.get("query")
        if isinstance(query, dict):
            inner = re.fullmatch(r"label_values\((\w+),\s*\w+\)", query["query"])
            if inner:
                out[f"variable {var['name']}"] = inner.group(1)
    return out


def for_promtool(expr: str) -> str:
    """``expr`` with Grafana's variables replaced by values PromQL parses."""
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def promtool() -> str:
    """Path of ``promtool`` (Debian: the ``prometheus`` package; ``.ci/run`` installs it).

    Skips the test when it is missing, unless ``CANARY_REQUIRE_PROMTOOL=1`` (CI), then fails.
    """
    found = shutil.which("promtool")
    if found:
        return found
    message = "promtool not found: apt-get install prometheus (Debian/Ubuntu ship promtool in it)"
    if os.environ.get("CANARY_REQUIRE_PROMTOOL") == "1":
        pytest.fail(message)
    pytest.skip(message)
