"""The dashboard's pages and the look-back (services/dashboard/pages.py), over the judge's own fold.

Events come from tests/judge_events.py and go through the judge (its verdicts and
decisions join the window as the log would hold them), so each cell and each
look-back answer is what an operator would read.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from reverie_canary.services.dashboard import pages
from reverie_canary.services.dashboard.core import LogWindow, model_status, provider_detail
from reverie_canary.services.dashboard.web import sparkline
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.shared.contract.commands import AddOverride
from reverie_canary.shared.contract.events import ProbeResult, ReplyEvidence, make_decision
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot
from tests.judge_events import CYCLE, MODEL, T0, WINDOW, cycle_events, healthy

FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8")
KINDS = ["ttft", "structured"]
ENFORCE = Policy(mode="enforce", models=(MODEL,))


def observe(events, policy: Policy = ENFORCE, window: LogWindow | None = None):
    """Fold ``events`` through the judge and the window (inputs, then the judge's effects), as the log holds them."""
    states: dict = {}
    window = window or LogWindow(cycle_memory=50, decision_memory=64)
    seq = 0
    for event in events:
        seq += 1
        window.add(event, seq)
        states, produced = fold([event], policy, states)
        for effect in produced:
            seq += 1
            window.add(effect, seq)
    return states.get(MODEL), window


def run(cycles: int, failing: dict[int, dict[str, tuple[str, str]]] | None = None, **kw):
    """``cycles`` cycles of FLEET; ``failing[n][provider] = (kind, reason)`` fails that kind in cycle n."""
    events = []
    for n in range(cycles):
        out = healthy(*FLEET)
        for provider, (kind, reason) in (failing or {}).get(n, {}).items():
            out[provider][kind] = ("fail", reason)
        events += cycle_events(n, out, **kw)
    return events


def status_of(events, state, window, now=None):
    now = now or max(e.at for e in events) + timedelta(seconds=1)
    return model_status(MODEL, now=now, policy=ENFORCE, kinds=KINDS, state=state, snapshot=None,
                        window=window.models.get(MODEL), cycle_interval_s=1800.0)


def snapshot(version: int, at: datetime, *ignored: tuple[str, str]) -> IgnoreSnapshot:
    return IgnoreSnapshot(at=at, model=MODEL, version=version, entries=[
        IgnoreEntry(provider=p, reasons=[IgnoreReason(layer=layer, reason=f"{layer} of {p}", actor="alice")])
        for p, layer in ignored])


# -- the matrix -----------------------------------------------------------------------------------------------


def test_each_cell_is_the_judges_verdict_with_its_letter_failing_kinds_and_reasons():
    """Row per provider, column per closed cycle; a failed cell names its kind and reason code, passes name none."""
    events = run(3, {1: {"b/fp8": ("structured", "schema_invalid")}, 2: {"b/fp8": ("ttft", "ttft_exceeded")}})
    state, window = observe(events)
    matrix = pages.model_matrix(status_of(events, state, window), window.models[MODEL])
    assert [c.cycle_no for c in matrix.columns] == [0, 1, 2]
    rows = {r.status.provider: r for r in matrix.rows}
    assert set(rows) == set(FLEET)
    b = rows["b/fp8"].cells
    assert [c.letter for c in b] == ["P", "F", "F"]
    assert (b[1].kinds, b[1].reasons) == (["structured"], ["schema_invalid"])
    assert b[2].label == "cycle #2: failed; failing kinds: ttft; reasons: ttft_exceeded"
    assert rows["b/fp8"].status.state == "suspended"  # the same row canary status shows
    assert [c.letter for c in rows["a/fp8"].cells] == ["P", "P", "P"] and rows["a/fp8"].cells[0].kinds == []


def test_a_missing_result_freezes_the_cell_and_an_absent_provider_is_not_probed():
    """Frozen reads Z with its reason; a provider without a verdict in a cycle reads N."""
    events = run(1, missing={("c/fp8", "ttft")})
    events += cycle_events(1, {p: healthy(p)[p] for p in FLEET if p != "d/fp8"})
    state, window = observe(events)
    rows = {r.status.provider: r for r in pages.model_matrix(status_of(events, state, window),
                                                            window.models[MODEL]).rows}
    assert rows["c/fp8"].cells[0].verdict == "frozen" and rows["c/fp8"].cells[0].letter == "Z"
    assert rows["c/fp8"].cells[0].reasons  # the judge's reason for freezing, never empty
    assert [c.verdict for c in rows["d/fp8"].cells] == ["passed", "not_probed"]


def test_a_cycle_closed_while_the_canary_was_blind_reads_blind_not_frozen():
    """Frozen in a cycle inside canary_blind .. canary_sees is B: the canary's fault, not the provider's."""
    events = run(2, missing={("a/fp8", "ttft")})
    state, window = observe(events)
    mw = window.models[MODEL]
    window.add(make_decision(at=T0 + CYCLE + timedelta(minutes=1), decision_id="blind-1", model=MODEL,
                        action="canary_blind", reason="key_revoked"), 10_000)  # type: ignore[arg-type]
    cells = [pages.cell(f, "a/fp8", pages._blind_spans(mw)) for f in sorted(mw.cycles.values(),
                                                                             key=lambda f: f.cycle_no)]
    assert [c.verdict for c in cells] == ["frozen", "blind"]


def test_the_matrix_keeps_the_last_n_cycles_and_the_ttft_median_of_each():
    """cycles=N: the N newest closed cycles, oldest first; each cell's ttft is the median of its probes (ms)."""
    events = []
    for n in range(5):
        for e in cycle_events(n, healthy(*FLEET)):
            if isinstance(e, ProbeResult):
                e = type(e)(**{**{f: getattr(e, f) for f in e.__struct_fields__},
                               "reply": ReplyEvidence(ttft_ms=100.0 * (n + 1) + (50 if e.kind == "ttft" else 0))})
            events.append(e)
    state, window = observe(events)
    matrix = pages.model_matrix(status_of(events, state, window), window.models[MODEL], cycles=3)
    assert [c.cycle_no for c in matrix.columns] == [2, 3, 4]
    assert [c.ttft_ms for c in matrix.rows[0].cells] == [325.0, 425.0, 525.0]


def test_the_sparkline_scales_to_the_box_and_skips_gaps():
    """Points span the width; the largest value is at the top; a cycle without text leaves no point."""
    points = sparkline([100.0, None, 200.0], width=10, height=10).split()
    assert points == ["0.0,5.0", "10.0,1.0"]
    assert sparkline([None, None]) == ""


# -- the provider page ----------------------------------------------------------------------------------------


def test_the_provider_page_shows_the_failed_probes_behind_its_suspension_and_who_overrode_it():
    """Two failed cycles suspend: both cycles' failures are behind the suspension; an override names its actor."""
    events = run(3, {1: {"b/fp8": ("ttft", "ttft_exceeded")}, 2: {"b/fp8": ("ttft", "ttft_exceeded")}})
    state, window = observe(events)
    window.add(AddOverride(command_id="c1", actor="alice", at=T0 + 3 * CYCLE, provider="b/fp8", model=MODEL,
                           reason="incident 4711"), 50_000)
    status = status_of(events, state, window, now=T0 + 3 * CYCLE + timedelta(minutes=1))
    detail = provider_detail(status, "b/fp8", state=state, window=window.models[MODEL], policy=ENFORCE)
    page = pages.provider_page(detail, window.models[MODEL], now=status.at)
    behind = {(f.cycle, f.kind, f.reason) for f in page.suspension_failures}
    assert behind == {(state.providers["b/fp8"].suspension.cycles[0], "ttft", "ttft_exceeded"),
                      (state.providers["b/fp8"].suspension.cycles[1], "ttft", "ttft_exceeded")}
    assert [d.action for d in page.ladder] == ["suspend"] and page.ladder[0].ladder_level == 1
    assert [(c.command, c.actor, c.reason) for c in page.commands] == [("override_add", "alice", "incident 4711")]
    assert page.timeline[0].what == "command" and [c.letter for c in page.cells] == ["P", "F", "F"]


# -- the look-back --------------------------------------------------------------------------------------------


def test_the_look_back_names_the_ignored_provider_with_the_snapshot_in_force_and_who_failed_since():
    """At a time inside a suspension: that provider ignored (v2), the rest eligible; later failures are listed."""
    events = run(6, {0: {"b/fp8": ("ttft", "ttft_exceeded")}, 1: {"b/fp8": ("ttft", "ttft_exceeded")},
                     4: {"c/fp8": ("language", "language_switch")}},)
    state, window = observe(events)
    mw = window.models[MODEL]
    window.add(snapshot(1, T0), 90_001)
    window.add(snapshot(2, T0 + CYCLE + WINDOW, ("b/fp8", "suspension")), 90_002)
    window.add(snapshot(3, T0 + 3 * CYCLE + WINDOW), 90_003)
    at = T0 + 2 * CYCLE + timedelta(minutes=5)
    view = pages.lookback(MODEL, at=at, window_s=45 * 60, now=T0 + 6 * CYCLE, window=mw)
    assert (view.snapshot_version, view.snapshot_at) == (2, T0 + CYCLE + WINDOW)
    assert view.ignored == ["b/fp8"] and view.eligible == ["a/fp8", "c/fp8", "d/fp8"]
    by = {p.provider: p for p in view.providers}
    assert by["b/fp8"].layers == ["suspension"] and by["b/fp8"].reasons[0].actor == "alice"
    assert [c.cycle_no for c in view.columns] == [1, 2, 3]  # opened in at +- 45 min (20 to 110 min)
    assert [f.cycle_no for f in by["c/fp8"].failed_since] == [4] and by["a/fp8"].failed_since == []
    assert view.served is None and by["a/fp8"].served is None and view.problems == []


def test_the_look_back_narrows_failed_since_to_the_kind_or_language_described():
    """--kind language keeps language failures only; another kind's failures are not the user's report."""
    events = run(4, {2: {"a/fp8": ("ttft", "ttft_exceeded"), "c/fp8": ("language", "language_switch")}})
    state, window = observe(events)
    window.add(snapshot(1, T0), 90_001)
    view = pages.lookback(MODEL, at=T0 + timedelta(minutes=40), window_s=1800, now=T0 + 4 * CYCLE,
                          window=window.models[MODEL], kind="language")
    by = {p.provider: p for p in view.providers}
    assert [f.cycle_no for f in by["c/fp8"].failed_since] == [2] and by["a/fp8"].failed_since == []
    assert by["c/fp8"].failed_since[0].reasons == ["language_switch (pt)"]
    spanish = pages.lookback(MODEL, at=T0 + timedelta(minutes=40), window_s=1800, now=T0 + 4 * CYCLE,
                             window=window.models[MODEL], language="es")
    assert all(p.failed_since == [] for p in spanish.providers)


def test_a_look_back_without_a_known_snapshot_says_the_routing_is_unknown():
    """No snapshot at or before the time: version 0 and a problem, never 'nothing was ignored'."""
    events = run(2)
    state, window = observe(events)
    view = pages.lookback(MODEL, at=T0 + timedelta(minutes=20), window_s=600, now=T0 + 2 * CYCLE,
                          window=window.models[MODEL])
    assert view.snapshot_version == 0 and any("routing is unknown" in p for p in view.problems)
    assert view.eligible == [] and view.ignored == [] and {p.routing for p in view.providers} == {"unknown"}


def test_incident_before_the_first_snapshot_prints_no_eligible_or_ignored_count(capsys):
    """canary incident without a known snapshot: 'ignore list unknown', never 'eligible 4 ... ignored 0'."""
    from reverie_canary.canary.cli_dashboard import print_lookback

    events = run(2)
    state, window = observe(events)
    print_lookback(pages.lookback(MODEL, at=T0 + timedelta(minutes=20), window_s=600, now=T0 + 2 * CYCLE,
                                  window=window.models[MODEL]))
    out = capsys.readouterr().out
    assert "ignore list unknown" in out and "eligible" not in out and "ignored 0" not in out, out


def test_failed_since_lists_the_first_few_then_counts_the_rest_and_names_the_newest(capsys):
    """A provider failing every cycle after the time: the first FAILED_SINCE_SHOWN cycles, the count, the newest."""
    from reverie_canary.canary.cli_dashboard import print_lookback

    n = pages.FAILED_SINCE_SHOWN + 4
    events = run(n + 1, {c: {"b/fp8": ("ttft", "ttft_exceeded")} for c in range(1, n + 1)})
    state, window = observe(events)
    window.add(snapshot(1, T0), 90_001)
    view = pages.lookback(MODEL, at=T0 + timedelta(minutes=20), window_s=600, now=T0 + (n + 1) * CYCLE,
                          window=window.models[MODEL])
    b = {p.provider: p for p in view.providers}["b/fp8"]
    assert [f.cycle_no for f in b.failed_since] == list(range(1, pages.FAILED_SINCE_SHOWN + 1))
    assert b.failed_since_count == n and b.failed_since_last is not None and b.failed_since_last.cycle_no == n
    print_lookback(view)
    out = capsys.readouterr().out
    assert f"… 3 more; latest #{n} ttft" in out and f"({n} failed cycles in all)" in out, out


@pytest.mark.parametrize("window_s", [30.0, 90.0, 45 * 60.0, 5400.0, 7200.0, 86400.0, 61.5, 2 * 86400.0])
def test_the_printed_incident_command_is_one_the_cli_accepts_for_the_same_look_back(window_s):
    """The look-back page's command, parsed by the CLI's own parser, asks for the same model, time and window."""
    import shlex

    from typer.main import get_command

    from reverie_canary.canary.cli import app

    events = run(2)
    state, window = observe(events)
    at = T0 + timedelta(minutes=20)
    view = pages.lookback(MODEL, at=at, window_s=window_s, now=T0 + 2 * CYCLE, window=window.models[MODEL],
                          kind="language", language="es")
    argv = shlex.split(pages.incident_command(view))
    assert argv[:2] == ["canary", "incident"]
    command = get_command(app).commands["incident"]
    params = command.make_context("incident", argv[2:]).params
    assert params["model"] == MODEL and (params["kind"], params["language"]) == ("language", "es")
    assert pages.parse_at(params["at"], T0 + 2 * CYCLE) == at
    assert pages.parse_window(params["window"]) == window_s


@pytest.mark.parametrize("text, seconds", [("45m", 2700.0), ("90s", 90.0), ("1.5h", 5400.0), ("2d", 172800.0),
                                           ("30", 1800.0)])
def test_windows_are_read_with_their_unit(text, seconds):
    """45m, 90s, 1.5h, 2d; a bare number is minutes."""
    assert pages.parse_window(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "0m", "30d", "-5m"])
def test_a_bad_window_is_refused_with_the_reason(text):
    with pytest.raises(ValueError):
        pages.parse_window(text)


def test_times_are_utc_and_a_clock_time_is_the_latest_one_not_after_now():
    """21:40 at 10:00 means yesterday's 21:40; ISO without a zone is UTC; the future is refused."""
    now = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    assert pages.parse_at("21:40", now) == datetime(2026, 11, 30, 21, 40, tzinfo=timezone.utc)
    assert pages.parse_at("09:15", now) == datetime(2026, 12, 1, 9, 15, tzinfo=timezone.utc)
    assert pages.parse_at("2026-12-01T08:00:00", now) == datetime(2026, 12, 1, 8, tzinfo=timezone.utc)
    assert pages.parse_at("2026-12-01T09:00:00+01:00", now) == datetime(2026, 12, 1, 8, tzinfo=timezone.utc)
    for bad in ("2026-12-02T08:00:00Z", "25:00", "yesterday"):
        with pytest.raises(ValueError):
            pages.parse_at(bad, now)


def test_the_look_back_shows_the_chat_backends_counts_under_each_endpoint_of_the_provider_named():
    """Counts by the gateway's provider name go to the endpoints of that name; none published: None, not 0."""
    from reverie_canary.client.served import ServedCounts
    from reverie_canary.shared.contract.events import Endpoint

    events = run(2)
    state, window = observe(events)
    mw = window.models[MODEL]
    mw.listing = [Endpoint(provider=p, provider_name="Alpha" if p.startswith("a") else p.upper()) for p in FLEET]
    window.add(snapshot(1, T0), 90_001)
    at = T0 + timedelta(minutes=40)
    assert pages.lookback(MODEL, at=at, window_s=600, now=T0 + 2 * CYCLE, window=mw).served is None
    window.add(ServedCounts(at=at + timedelta(minutes=1), since=at, model=MODEL, counts={"Alpha": 7, "b/fp8": 2}),
               90_002)
    window.add(ServedCounts(at=at + timedelta(hours=3), since=at + timedelta(hours=2), model=MODEL,
                            counts={"Alpha": 100}), 90_003)  # outside the window
    view = pages.lookback(MODEL, at=at, window_s=600, now=T0 + 2 * CYCLE, window=mw)
    assert view.served == {"Alpha": 7, "b/fp8": 2}
    assert {p.provider: p.served for p in view.providers} == {"a/fp8": 7, "b/fp8": 2, "c/fp8": 0, "d/fp8": 0}


@pytest.mark.parametrize("window_s", [30.0, 90.0])
def test_the_look_back_page_prints_that_command_for_a_window_under_a_minute(window_s):
    """The page's 'the same as canary incident ...' for 30 s and 90 s says --window 30s / 90s, never 0m or 1m."""
    import html
    import re

    from reverie_canary.services.dashboard.web import _templates

    events = run(2)
    state, window = observe(events)
    view = pages.lookback(MODEL, at=T0 + timedelta(minutes=20), window_s=window_s, now=T0 + 2 * CYCLE,
                          window=window.models[MODEL])
    class Request:  # what the base template asks of a request: the static files' URL
        def url_for(self, name, **params):
            return f"/{name}/{params.get('path', '')}"

    text = _templates().env.get_template("lookback.html").render(view=view, form={}, models=[MODEL], message=None,
                                                                    request=Request())
    [command] = re.findall(r'<code class="command">(.*?)</code>', text)
    assert html.unescape(command) == pages.incident_command(view)
    assert f"--window {window_s:g}s" in html.unescape(command)
