"""Live counts and the last confirmation probe beside the verdicts: the read model, status, dashboard, feed, incident.

The chat backends' :class:`~reverie_canary.client.served.LiveCounts` and the judge's
:class:`~reverie_canary.shared.contract.events.LiveConfirmation` are folded from the log into the
read model; ``canary status``, the dashboard (the model fragment, the provider page, the quality
feed) and ``canary incident`` show the same numbers: replies, failing share, top reasons,
``ignore_not_applied``, and the last confirmation's outcome.
"""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import msgspec
from rich.console import Console

from reverie_canary.canary import cli  # noqa: F401  (first: cli.py then puts every command in its help group)
from reverie_canary.canary.cli_dashboard import lookback_live_lines, print_lookback
from reverie_canary.canary.cli_status import live_lines, render
from reverie_canary.client.served import LiveCounts, LiveOutcomes
from reverie_canary.services.dashboard import feed as feeds
from reverie_canary.services.dashboard import pages
from reverie_canary.services.dashboard.core import (
    LIVE_WINDOW_S,
    LogWindow,
    confirmation_text,
    fleet_status,
    live_text,
    model_status,
    provider_detail,
    to_json,
)
from reverie_canary.services.dashboard.web import _templates
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.shared.contract.events import LiveConfirmation, LiveEvidence
from tests.judge_events import CYCLE, MODEL, T0, cycle_events, healthy
from tests.unit.test_dashboard_feed import validator_for

FLEET = ("a/fp8", "b/fp8", "c/fp8")
KINDS = ["ttft", "structured"]
ENFORCE = Policy(mode="enforce", models=(MODEL,))
#: the end of the last live period: inside the second cycle
LIVE_AT = T0 + CYCLE + timedelta(minutes=5)
NOW = LIVE_AT + timedelta(minutes=3)


def period(at, providers: dict[str, LiveOutcomes], source: str = "chat-1") -> LiveCounts:
    return LiveCounts(at=at, model=MODEL, since=at - timedelta(seconds=60), source=source, providers=providers)


def live_events() -> list:
    """Two cycles, all passing; two backends' periods; one confirmation of b (confirmed after a not reproduced)."""
    events = [e for n in range(2) for e in cycle_events(n, healthy(*FLEET))]
    events.append(period(LIVE_AT - timedelta(minutes=2), {
        # b by its display name (cycle_events lists provider_name = tag.title()): counted for b/fp8
        "B/Fp8": LiveOutcomes(replies=20, reasons={"leading_junk": 6, "repetition": 1}, retried=6),
        "a/fp8": LiveOutcomes(replies=30),
    }))
    events.append(period(LIVE_AT, {
        "b/fp8": LiveOutcomes(replies=20, reasons={"leading_junk": 4, "control_tokens": 2, "empty_output": 1,
                                                   "word_salad": 1}, retried=4, ignore_not_applied=3),
        "a/fp8": LiveOutcomes(replies=30, reasons={"repetition": 1}),
    }, source="chat-2"))
    # an old period: outside the LIVE_WINDOW_S before the newest one, not summed
    events.append(period(LIVE_AT - timedelta(seconds=LIVE_WINDOW_S + 60), {"c/fp8": LiveOutcomes(replies=9)}))
    for n, (outcome, probe) in enumerate((("not_reproduced", "pass"), ("confirmed", "fail"))):
        events.append(LiveConfirmation(
            at=LIVE_AT + timedelta(minutes=1 + n), model=MODEL, provider="b/fp8",
            task_id=f"confirm|{MODEL}|1|b/fp8|ttft|{n + 1}", kind="ttft", cycle=f"confirm|{MODEL}|1",
            outcome=outcome, probe_outcome=probe, probe_reason="leading_junk" if probe == "fail" else "",
            live=LiveEvidence(reason="leading_junk", key="b/fp8", count=10, served=40, share=0.25, median=0.0,
                              threshold=0.06, peers=3, window_s=600.0, number=n + 1)))
    return events


def observe(events):
    states: dict = {}
    window = LogWindow(cycle_memory=50)
    seq = 0
    for event in events:
        seq += 1
        window.add(event, seq)
        states, produced = fold([event], ENFORCE, states)
        for effect in produced:
            seq += 1
            window.add(effect, seq)
    return states.get(MODEL), window


def status(events=None, now=NOW):
    state, window = observe(events or live_events())
    view = model_status(MODEL, now=now, policy=ENFORCE, kinds=KINDS, state=state, snapshot=None,
                        window=window.models[MODEL], cycle_interval_s=1800.0)
    return view, window


def test_each_provider_row_sums_its_live_counts_by_tag_and_display_name_with_the_top_reasons():
    """b: 40 replies (20 under its name, 20 under its tag), 15 failing, the three most frequent reasons."""
    view, _ = status()
    rows = {p.provider: p for p in view.providers}
    b = rows["b/fp8"].live
    assert b is not None
    assert (b.replies, b.failing, b.failing_share, b.retried, b.ignore_not_applied) == (40, 15, 0.375, 10, 3)
    assert b.reasons == {"leading_junk": 10, "control_tokens": 2, "empty_output": 1}  # top 3, then by name
    assert (b.since, b.until) == (LIVE_AT - timedelta(seconds=LIVE_WINDOW_S), LIVE_AT)
    a = rows["a/fp8"].live
    assert a is not None and (a.replies, a.failing, a.failing_share, a.reasons) == (60, 1, 0.0167, {"repetition": 1})
    assert rows["c/fp8"].live is None  # its only period ended before the window
    # the verdicts are the judge's: live counts change none of them
    assert {p.provider: p.last_verdict for p in view.providers} == dict.fromkeys(FLEET, "passed")


def test_the_last_confirmation_per_provider_is_the_newest_answer_whatever_the_order_read():
    """b's confirmations: the later (confirmed) wins, also when the log gives the older one last."""
    view, _ = status()
    c = {p.provider: p.confirmation for p in view.providers}
    assert c["a/fp8"] is None and c["b/fp8"] is not None
    assert (c["b/fp8"].outcome, c["b/fp8"].kind, c["b/fp8"].probe_outcome, c["b/fp8"].probe_reason,
            c["b/fp8"].count, c["b/fp8"].served) == ("confirmed", "ttft", "fail", "leading_junk", 10, 40)
    events = live_events()
    events[-2], events[-1] = events[-1], events[-2]
    again, _ = status(events)
    assert {p.provider: p.confirmation for p in again.providers}["b/fp8"] == c["b/fp8"]


def test_live_counts_older_than_the_window_before_now_are_not_shown_and_the_view_keeps_its_bytes():
    """Within the window the view is the same whatever the read's time (the feed's ETag holds); past it, none."""
    early, _ = status(now=LIVE_AT + timedelta(seconds=5))
    late, _ = status(now=LIVE_AT + timedelta(seconds=LIVE_WINDOW_S - 5))
    assert [p.live for p in early.providers] == [p.live for p in late.providers]
    stale, _ = status(now=LIVE_AT + timedelta(seconds=LIVE_WINDOW_S + 5))
    assert all(p.live is None for p in stale.providers)
    assert {p.provider: p.confirmation is not None for p in stale.providers}["b/fp8"]


def test_the_texts_say_replies_failing_share_reasons_retried_ignore_not_applied_and_the_confirmation():
    """One wording for every reader."""
    view, _ = status()
    b = {p.provider: p for p in view.providers}["b/fp8"]
    assert live_text(b.live) == ("40 replies, 37.5% failing (leading_junk 10, control_tokens 2, empty_output 1), "
                                 "10 retried, ignore not applied 3")
    assert confirmation_text(b.confirmation) == ("confirmed at 2026-11-01T00:37:00Z: live leading_junk 10 of 40, "
                                                 "pinned ttft probe fail leading_junk")
    assert live_text(None) == "no live counts" and confirmation_text(None) == "no confirmation probe"


def test_canary_status_prints_the_live_counts_and_the_confirmation_under_the_table():
    """One line per provider with live counts or a confirmation; a dropped ignore list is said in words."""
    view, _ = status()
    lines = [t.plain for t in live_lines(view)]
    assert lines[0].startswith("live counts (the chat backends' reply guards, 10 min to 2026-11-01T00:35:00Z; "
                               "they never suspend anyone)")
    assert lines[1:] == [
        "  a/fp8  60 replies, 1.7% failing (repetition 1), 0 retried, ignore not applied 0; no confirmation probe",
        "  b/fp8  40 replies, 37.5% failing (leading_junk 10, control_tokens 2, empty_output 1), 10 retried, "
        "ignore not applied 3  (the ignore list was dropped on the way to the gateway); confirmed at "
        "2026-11-01T00:37:00Z: live leading_junk 10 of 40, pinned ttft probe fail leading_junk"]
    out = StringIO()
    render(Console(file=out, width=400), fleet_status([view], now=view.at, window=None), KINDS)
    assert lines[2] in out.getvalue()
    quiet, _ = status([e for n in range(2) for e in cycle_events(n, healthy(*FLEET))])
    assert live_lines(quiet) == []


def test_the_dashboard_fragment_and_the_provider_page_show_them():
    """The model fragment: a live-counts table (b's row with its numbers); the provider page: two lines."""
    view, window = status()
    matrix = pages.model_matrix(view, window.models[MODEL], 4)
    html = _templates().env.get_template("_model.html").render(m=matrix, version="t")
    assert '<tr data-provider="b/fp8" data-live-replies="40" data-confirmation="confirmed">' in html
    row = html.split('data-live-replies="40"')[1].split("</tr>")[0]
    assert '<td class="num">40</td>' in row and '<td class="num">37.5%</td>' in row
    assert "<td>leading_junk 10, control_tokens 2, empty_output 1</td>" in row
    assert '<td class="num alarm">3</td>' in row and 'class="confirmation cf-confirmed">confirmed at' in row
    state, _ = observe(live_events())
    detail = provider_detail(view, "b/fp8", state=state, window=window.models[MODEL], policy=ENFORCE)
    page_view = pages.provider_page(detail, window.models[MODEL], now=NOW)
    page = _templates().env.get_template("provider.html").render(p=page_view, url_for=lambda *a, **k: "/static")
    assert f'<dd id="live">{live_text(detail.status.live)} (2026-11-01T00:25:00Z to 2026-11-01T00:35:00Z' in page
    assert f'<dd id="confirmation">{confirmation_text(detail.status.confirmation)}</dd>' in page


def test_the_quality_feed_carries_live_and_confirmation_and_validates_against_the_document():
    """FeedProvider.live / .confirmation are the status's; the committed OpenAPI document accepts them."""
    view, window = status()
    model = feeds.feed_model(view, window.models[MODEL], kinds=KINDS, controls={})
    rows = {p.provider: p for p in model.providers}
    assert rows["b/fp8"].live == {p.provider: p for p in view.providers}["b/fp8"].live
    assert rows["b/fp8"].confirmation is not None and rows["b/fp8"].confirmation.outcome == "confirmed"
    assert rows["c/fp8"].live is None and rows["c/fp8"].confirmation is None
    body = json.loads(to_json(feeds.Feed(models=[model])))
    validator_for("Feed").validate(body)
    b = next(p for p in body["models"][0]["providers"] if p["provider"] == "b/fp8")
    assert (b["live"]["replies"], b["live"]["failing_share"], b["live"]["ignore_not_applied"]) == (40, 0.375, 3)
    assert b["confirmation"]["outcome"] == "confirmed"


def test_canary_incident_shows_the_live_counts_of_its_window_and_the_last_confirmation(capsys):
    """The look-back's window decides which periods count (here both of the last ten minutes and the old one)."""
    _, window = observe(live_events())
    view = pages.lookback(MODEL, at=LIVE_AT, window_s=1800, now=NOW, window=window.models[MODEL])
    rows = {p.provider: p for p in view.providers}
    assert rows["b/fp8"].live is not None and rows["b/fp8"].live.replies == 40
    assert rows["c/fp8"].live is not None and rows["c/fp8"].live.replies == 9  # inside this look-back's window
    assert rows["b/fp8"].confirmation is not None and rows["b/fp8"].confirmation.outcome == "confirmed"
    lines = lookback_live_lines(view)
    assert lines[0].startswith("live counts in the window")
    assert "  c/fp8  9 replies, 0.0% failing, 0 retried, ignore not applied 0; no confirmation probe" in lines
    print_lookback(view)
    text = capsys.readouterr().out
    assert "b/fp8  40 replies, 37.5% failing" in text and "confirmed at 2026-11-01T00:37:00Z" in text
    html = _templates().env.get_template("lookback.html").render(view=view, form={}, models=[MODEL],
                                                                        url_for=lambda *a, **k: "/static")
    assert '<table class="list live" id="live-counts"' in html
    assert 'class="confirmation cf-confirmed">confirmed at 2026-11-01T00:37:00Z' in html


def test_a_window_keeps_a_bounded_number_of_periods_and_ignores_a_repeated_confirmation():
    """LIVE_MEMORY periods at most per model; the same confirmation twice is one."""
    from reverie_canary.services.dashboard import core

    window = LogWindow()
    for n in range(core.LIVE_MEMORY + 5):
        window.add(period(T0 + timedelta(seconds=n), {"a/fp8": LiveOutcomes(replies=1)}), n + 1)
    mw = window.models[MODEL]
    assert len(mw.live) == core.LIVE_MEMORY and mw.live[0].at == T0 + timedelta(seconds=5)
    fact = live_events()[-1]
    window.add(fact, 10**6)
    window.add(msgspec.structs.replace(fact), 10**6 + 1)
    assert list(mw.confirmations) == ["b/fp8"]
