"""Quantization in the operators' views: ``canary status``, the dashboard's model fragment, ``canary incident``.

docs/concepts/routing.md, "The quantization floor": each endpoint's listed quantization is shown;
while a floor's allow-list is in force, the hosts it leaves out are marked (those that declare no
quantization as ``undeclared``) and named in the header; the look-back tells left out from
eligible and ignored.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import msgspec
from rich.console import Console

from reverie_canary.canary import cli  # noqa: F401  (first: cli.py then puts every command in its help group)
from reverie_canary.canary.cli_dashboard import print_lookback
from reverie_canary.canary.cli_status import render
from reverie_canary.services.dashboard import pages
from reverie_canary.services.dashboard.core import LogWindow, fleet_status, model_status
from reverie_canary.services.dashboard.web import _templates
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.shared.contract import quantization
from reverie_canary.shared.contract.events import EndpointsDiscovered
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot
from tests.judge_events import CYCLE, MODEL, T0, cycle_events, healthy

QUANT = {"a/fp8": "fp8", "b/bf16": "bf16", "c/fp4": "fp4", "e": None}
KINDS = ["ttft", "structured"]
ENFORCE = Policy(mode="enforce", models=(MODEL,))
ALLOW = quantization.allowed(["fp4"])


def events(cycles: int = 2) -> list:
    out = []
    for n in range(cycles):
        for event in cycle_events(n, healthy(*QUANT)):
            if isinstance(event, EndpointsDiscovered):
                event = msgspec.structs.replace(event, endpoints=[
                    msgspec.structs.replace(e, quantization=QUANT[e.provider]) for e in event.endpoints])
            out.append(event)
    return out


def observe(evs):
    states: dict = {}
    window = LogWindow(cycle_memory=50)
    seq = 0
    for event in evs:
        seq += 1
        window.add(event, seq)
        states, produced = fold([event], ENFORCE, states)
        for effect in produced:
            seq += 1
            window.add(effect, seq)
    return states.get(MODEL), window


def floor_snapshot(version: int = 2, quantizations: list[str] = ALLOW) -> IgnoreSnapshot:
    return IgnoreSnapshot(at=T0 + timedelta(minutes=5), model=MODEL, version=version, quantizations=quantizations)


def status(snapshot: IgnoreSnapshot):
    evs = events()
    state, window = observe(evs)
    return model_status(MODEL, now=T0 + 2 * CYCLE, policy=ENFORCE, kinds=KINDS, state=state, snapshot=snapshot,
                        window=window.models[MODEL], cycle_interval_s=1800.0), window


def test_status_shows_each_quantization_and_marks_what_the_allow_list_leaves_out():
    """The rows carry the listed quantization; c/fp4 and the undeclared e are left out, a and b are not."""
    view, _ = status(floor_snapshot())
    rows = {p.provider: (p.quantization, p.quant_left_out) for p in view.providers}
    assert rows == {"a/fp8": ("fp8", False), "b/bf16": ("bf16", False), "c/fp4": ("fp4", True), "e": (None, True)}
    assert view.ignore_list.quantizations == ALLOW
    assert msgspec.json.decode(msgspec.json.encode(view))["providers"][3]["quant_left_out"] is True


def test_without_a_floor_nothing_is_left_out():
    """No allow-list: the quantizations are shown, nobody is marked."""
    view, _ = status(floor_snapshot(quantizations=[]))
    assert not any(p.quant_left_out for p in view.providers)
    assert {p.provider: p.quantization for p in view.providers}["c/fp4"] == "fp4"


def test_the_status_text_has_a_quant_column_and_names_the_hosts_left_out():
    """The header line names the allow-list and every host left out, counting those that declare nothing."""
    view, _ = status(floor_snapshot())
    out = StringIO()
    render(Console(file=out, width=260), fleet_status([view], now=view.at, window=None), KINDS)
    text = out.getvalue()
    assert (f"quantization floor: quantizations {', '.join(ALLOW)} allowed; left out 2: c/fp4 (fp4), e "
            "(undeclared) (1 declare no quantization: an allow-list drops them)") in text
    rows = {cells[0]: cells[1:3] for line in text.splitlines()
            if (cells := [c.strip() for c in line.split("│")])[0] in QUANT}
    assert rows == {"a/fp8": ["fp8", "active"], "b/bf16": ["bf16", "active"], "c/fp4": ["fp4 left out", "active"],
                    "e": ["undeclared left out", "active"]}


def test_the_dashboard_fragment_shows_the_floor_and_each_quantization():
    """The model fragment: a quantization-floor line in the header and a quantization tag per provider row."""
    view, window = status(floor_snapshot())
    matrix = pages.model_matrix(view, window.models[MODEL], 4)
    html = _templates().env.get_template("_model.html").render(m=matrix, version="t")
    assert (f'<dd class="quant-floor">quantizations {", ".join(ALLOW)} allowed; left out 2: c/fp4 (fp4), '
            "e (undeclared)</dd>") in html
    assert '>c/fp4</a> <span class="quant left-out" title="quantization the gateway lists; the quantization ' \
           "floor" in html and "allow-list leaves it out\">fp4, left out</span></th>" in html
    assert '>e</a> <span class="quant left-out"' in html and ">undeclared, left out</span>" in html
    assert '<span class="quant" title="quantization the gateway lists">fp8</span>' in html


def test_the_look_back_tells_left_out_from_eligible_and_prints_the_floor(capsys):
    """canary incident at a time under the floor: c/fp4 and e left out (not eligible), with their quantization."""
    _, window = observe(events())
    window.add(floor_snapshot(version=1), 90_001)
    view = pages.lookback(MODEL, at=T0 + timedelta(minutes=40), window_s=1800, now=T0 + 2 * CYCLE,
                          window=window.models[MODEL])
    assert view.quantizations == ALLOW
    assert (view.eligible, view.left_out, view.ignored) == (["a/fp8", "b/bf16"], ["c/fp4", "e"], [])
    assert {p.provider: (p.routing, p.quantization) for p in view.providers}["e"] == ("left_out", None)
    print_lookback(view)
    text = capsys.readouterr().out
    assert f"quantization floor: quantizations {', '.join(ALLOW)} allowed; left out 2: c/fp4 (fp4), e (undeclared)" \
        in text
    row = next(line for line in text.splitlines() if line.strip().startswith("c/fp4"))
    assert "fp4" in row and "left out" in row and "not in the quantizations allow-list" in row


def test_the_look_back_page_marks_left_out_rows_with_their_quantization():
    """The dashboard's look-back: the floor's line, and a left-out row saying why."""
    _, window = observe(events())
    window.add(floor_snapshot(version=1), 90_001)
    view = pages.lookback(MODEL, at=T0 + timedelta(minutes=40), window_s=1800, now=T0 + 2 * CYCLE,
                          window=window.models[MODEL])
    html = _templates().env.get_template("lookback.html").render(view=view, form={}, models=[MODEL],
                                                                        url_for=lambda *a, **k: "/static")
    assert '<span id="left-out">c/fp4, e</span>' in html
    assert '<tr data-provider="e" data-routing="left_out">' in html
    assert "declares no quantization: not in the quantizations allow-list" in html
