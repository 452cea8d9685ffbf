"""The operators' read model (services/dashboard/core.py): every state derived from what the services stored.

The judge's state and its verdicts and decisions come from the judge's own fold
over event builders (tests/judge_events.py), the snapshots are written as the
router writes them, so that each expectation is what an operator would read.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import msgspec
import pytest

from reverie_canary.services.dashboard.core import (
    FleetStatus,
    LogWindow,
    fleet_status,
    model_status,
    modes_text,
    spend_entry,
)
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.shared.contract.commands import SetMode
from reverie_canary.shared.contract.events import (
    Endpoint,
    EndpointsDiscovered,
    Pricing,
    ProbeAttempt,
    ProbeResult,
    ReplyEvidence,
)
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot
from tests.judge_events import CYCLE, MODEL, T0, WINDOW, cycle_events, healthy

FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8")
KINDS = ["ttft", "structured"]
ENFORCE = Policy(mode="enforce", models=(MODEL,))


def failing(provider: str, fleet=FLEET, reason: str = "ttft_exceeded") -> dict:
    out = healthy(*fleet)
    out[provider]["ttft"] = ("fail", reason)
    return out


def observe(events, policy: Policy = ENFORCE):
    """Fold ``events`` through the judge and the window, as the log would hold them (inputs, then effects)."""
    states: dict = {}
    window = LogWindow()
    seq = 0
    for event in events:
        seq += 1
        window.add(event, seq)
        states, produced = fold([event], policy, states)
        for effect in produced:
            seq += 1
            window.add(effect, seq)
    return states.get(MODEL), window


def view(events, *, policy: Policy = ENFORCE, snapshot: IgnoreSnapshot | None = None, now=None, kinds=KINDS,
         controls=None):
    state, window = observe(events, policy)
    last = max(e.at for e in events)
    return model_status(MODEL, now=now or last + timedelta(seconds=1), policy=policy, kinds=kinds, state=state,
                        snapshot=snapshot, window=window.models.get(MODEL), cycle_interval_s=1800.0,
                        controls=controls)


def by_name(status):
    return {p.provider: p for p in status.providers}


def snapshot_of(*entries: tuple[str, str, object], version: int = 1) -> IgnoreSnapshot:
    """A snapshot whose entries are (provider, layer, until) triples."""
    grouped: dict[str, list[IgnoreReason]] = {}
    for provider, layer, until in entries:
        grouped.setdefault(provider, []).append(IgnoreReason(layer=layer, reason=f"{layer} reason", until=until))
    return IgnoreSnapshot(at=T0, model=MODEL, version=version,
                          entries=[IgnoreEntry(provider=p, reasons=rs) for p, rs in sorted(grouped.items())])


# -- the state table -----------------------------------------------------------------------------------------


def test_two_failed_cycles_read_as_suspended_with_the_judges_streaks_ladder_and_end():
    """After the judge's suspend and the router's snapshot: suspended until the decision's until, ignored, step 1."""
    events = cycle_events(0, failing("a/fp8")) + cycle_events(1, failing("a/fp8"))
    state, _ = observe(events)
    until = state.providers["a/fp8"].suspension.until
    status = view(events, snapshot=snapshot_of(("a/fp8", "suspension", until)))
    a, b = by_name(status)["a/fp8"], by_name(status)["b/fp8"]
    assert (a.state, a.until, a.ignored, a.layers, a.ladder_step) == ("suspended", until, True, ["suspension"], 1)
    assert a.suspension.enforced and a.suspension.step == 1
    assert a.last_decision.action == "suspend" and a.last_decision.mode == "enforce"
    assert (b.state, b.passed_streak, b.failed_streak, b.ignored) == ("active", 2, 0, False)
    assert status.ignore_list.layers["suspension"] == ["a/fp8"] and status.ignore_list.ignored == ["a/fp8"]


def test_a_suspension_the_router_has_not_applied_yet_is_said_to_be_so():
    """The judge holds an enforced suspension but the snapshot does not list it: suspended, not ignored, and why."""
    events = cycle_events(0, failing("a/fp8")) + cycle_events(1, failing("a/fp8"))
    a = by_name(view(events, snapshot=snapshot_of(version=1)))["a/fp8"]
    assert (a.state, a.ignored) == ("suspended", False)
    assert "not in the ignore list yet" in a.state_detail


def test_an_exclusion_wins_over_an_override_and_a_suspension_and_names_every_layer():
    """Layers stack: the state names the strongest, ``layers`` lists all of them in layer order."""
    events = cycle_events(0, healthy(*FLEET))
    later = T0 + timedelta(days=2)
    snap = snapshot_of(("a/fp8", "suspension", later), ("a/fp8", "override", later), ("a/fp8", "exclusion", None),
                       ("b/fp8", "override", later))
    status = view(events, snapshot=snap)
    a, b = by_name(status)["a/fp8"], by_name(status)["b/fp8"]
    assert (a.state, a.until, a.layers) == ("excluded", None, ["exclusion", "override", "suspension"])
    assert (b.state, b.until, b.layers) == ("overridden", later, ["override"])
    assert status.ignore_list.layers == {"exclusion": ["a/fp8"], "override": ["a/fp8", "b/fp8"],
                                         "suspension": ["a/fp8"]}


def test_an_expired_layer_is_not_a_state_any_more():
    """An override past its until ignores nothing at ``now``: the provider is active again."""
    events = cycle_events(0, healthy(*FLEET))
    snap = snapshot_of(("a/fp8", "override", T0 + timedelta(minutes=5)))
    a = by_name(view(events, snapshot=snap, now=T0 + timedelta(hours=1)))["a/fp8"]
    assert (a.state, a.ignored, a.layers) == ("active", False, [])


def test_the_capacity_floor_reads_as_floor_held_only_in_the_cycle_it_held():
    """Two hosts, floor 2: the judge's floor_held decision makes the state; a later passed cycle clears it."""
    fleet = ("a/fp8", "b/fp8")
    held = cycle_events(0, failing("a/fp8", fleet)) + cycle_events(1, failing("a/fp8", fleet))
    a = by_name(view(held))["a/fp8"]
    assert a.state == "floor_held" and "floor 2" in a.state_detail
    assert a.failed_streak == 2 and a.last_decision.action == "floor_held"
    recovered = held + cycle_events(2, healthy(*fleet))
    assert by_name(view(recovered))["a/fp8"].state == "active"


def test_observe_mode_reads_as_would_suspend_with_its_own_ladder():
    """In observe mode the shadow suspension is shown as would_suspend until its end; routing's ladder stays 0."""
    events = cycle_events(0, failing("a/fp8")) + cycle_events(1, failing("a/fp8"))
    observe_policy = Policy(mode="observe", models=(MODEL,))
    a = by_name(view(events, policy=observe_policy))["a/fp8"]
    assert a.state == "would_suspend" and a.until is not None and not a.ignored
    assert (a.ladder_step, a.shadow_step) == (0, 1)
    assert a.last_decision.action == "would_suspend" and a.last_decision.mode == "observe"


def test_a_provider_the_gateway_stopped_listing_reads_as_not_listed():
    """Listed in cycle 0, gone in cycle 1: not_listed, with the judge's history kept."""
    events = cycle_events(0, healthy(*FLEET)) + cycle_events(1, healthy("a/fp8", "b/fp8", "c/fp8"))
    d = by_name(view(events))["d/fp8"]
    assert (d.state, d.listed, d.last_verdict, d.last_cycle_no) == ("not_listed", False, "passed", 0)


def test_positive_controls_are_not_rows_but_say_whether_they_proved_the_probe():
    """A control that failed proves its kind; one that passed does not; neither is a provider row."""
    failed = cycle_events(0, healthy(*FLEET), controls={"ctl/strict": {"ttft": "fail"}})
    status = view(failed, controls={"ttft": "ctl/strict"})
    assert "ctl/strict" not in by_name(status)
    assert [(c.kind, c.provider, c.outcome, c.proves) for c in status.controls] == [
        ("ttft", "ctl/strict", "fail", True)]
    passed = cycle_events(0, healthy(*FLEET), controls={"ctl/strict": {"ttft": "pass"}})
    status = view(passed, controls={"ttft": "ctl/strict"})
    assert status.controls[0].proves is False and status.unproven == ["ttft"]


# -- the last cycle, time to first token, modes, health ---------------------------------------------------------


def test_the_last_cycle_shows_each_kinds_worst_outcome_with_its_reasons():
    """Per kind: the worst result names the cell; reason codes of the results that did not pass; missing ones too."""
    outcomes = healthy(*FLEET, kinds=("ttft", "structured", "language"))
    outcomes["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    outcomes["a/fp8"]["language"] = ("fail", "language_switch")
    outcomes["b/fp8"]["structured"] = ("transport_error", "http_503")
    events = cycle_events(0, outcomes, missing={("c/fp8", "ttft")})
    rows = by_name(view(events, kinds=["ttft", "structured", "language"]))
    cells = {p: {r.kind: (r.outcome, r.reasons) for r in row.results} for p, row in rows.items()}
    assert cells["a/fp8"] == {"ttft": ("fail", ["ttft_exceeded"]), "structured": ("pass", []),
                              "language": ("fail", ["language_switch (pt)"])}
    assert cells["b/fp8"]["structured"] == ("transport_error", ["http_503"])
    assert cells["c/fp8"]["ttft"] == ("missing", [])
    assert rows["c/fp8"].last_verdict == "frozen" and rows["c/fp8"].last_reasons == ["missing:1"]


def with_ttft(events, ms_by_provider: dict[str, float | None]):
    out = []
    for e in events:
        if isinstance(e, ProbeResult) and e.provider in ms_by_provider:
            e = msgspec.structs.replace(e, reply=ReplyEvidence(ttft_ms=ms_by_provider[e.provider]))
        out.append(e)
    return out


def test_time_to_first_token_is_the_median_of_the_last_six_cycles():
    """Eight cycles of 100..800 ms: the median of the last six (300..800) is 550 ms; no-text replies are counted apart."""
    events = []
    for n in range(8):
        events += with_ttft(cycle_events(n, healthy(*FLEET)), {"a/fp8": 100.0 * (n + 1), "b/fp8": None})
    rows = by_name(view(events))
    assert (rows["a/fp8"].ttft_ms, rows["a/fp8"].ttft_samples) == (550.0, 12)  # two probes a cycle
    assert (rows["b/fp8"].ttft_ms, rows["b/fp8"].ttft_missing) == (None, 12)


def test_modes_per_kind_come_from_the_judge_and_the_header_names_them_when_they_differ():
    """An operator put refusal in observe: modes per kind; the one-line form lists both modes."""
    command = SetMode(command_id="m1", actor="alice", at=T0 - timedelta(minutes=1), mode="observe", model=MODEL,
                      kind="refusal")
    status = view([command, *cycle_events(0, healthy(*FLEET))], kinds=["ttft", "refusal", "structured"])
    # template, a fact kind, has a mode too: observe until an operator switches it
    assert status.modes == {"ttft": "enforce", "refusal": "observe", "structured": "enforce", "template": "observe"}
    assert status.mode is None
    assert modes_text(status.modes) == "modes: enforce for ttft, structured; observe for refusal, template"
    assert modes_text({"ttft": "enforce", "echo": "enforce"}) == "mode: enforce"


def test_health_is_stale_when_no_cycle_closed_for_two_intervals():
    """Last close at T0+10 min: 40 min later the canary sees; 70 min later it is stale."""
    events = cycle_events(0, healthy(*FLEET))
    closed = T0 + WINDOW
    assert view(events, now=closed + timedelta(minutes=40)).health.state == "sees"
    stale = view(events, now=closed + timedelta(minutes=70))
    assert stale.health.state == "stale" and stale.last_cycle_age_s == 4200.0
    assert stale.last_cycle_closed == closed and stale.last_cycle_no == 0


def test_a_model_with_nothing_stored_says_what_is_missing():
    """No judge state, no snapshot, no log: the view says so instead of showing an empty healthy fleet."""
    status = model_status(MODEL, now=T0, policy=ENFORCE, kinds=KINDS, state=None, snapshot=None, window=None,
                          cycle_interval_s=1800.0)
    assert status.providers == [] and status.health.state == "unknown"
    assert any("no judge state" in p for p in status.problems)
    assert any("no ignore-list snapshot" in p for p in status.problems)


# -- spend ---------------------------------------------------------------------------------------------------------

PRICE = Pricing(prompt="0.0000002", completion="0.0000008")


def priced(events, pricing: dict[str, Pricing | None], usage: dict[str, int]):
    """The cycle's listing with prices, and every result with the same token usage."""
    out = []
    for e in events:
        if isinstance(e, EndpointsDiscovered):
            e = msgspec.structs.replace(e, endpoints=[Endpoint(provider=x.provider, provider_name=x.provider_name,
                                                               pricing=pricing.get(x.provider))
                                                      for x in e.endpoints])
        elif isinstance(e, ProbeResult):
            e = msgspec.structs.replace(e, reply=ReplyEvidence(usage=usage))
        out.append(e)
    return out


def test_spend_is_tokens_at_the_listed_prices_and_unpriced_tokens_are_never_guessed():
    """10+20 tokens per probe at 2e-7/8e-7 USD a token = 1.8e-5 USD; a provider without a price adds tokens only."""
    events = priced(cycle_events(0, healthy("a/fp8", "b/fp8")), {"a/fp8": PRICE},
                    {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30})
    status = view(events)
    rows = by_name(status)
    assert rows["a/fp8"].spend.usd == pytest.approx(2 * 1.8e-5)
    assert (rows["a/fp8"].spend.probes, rows["a/fp8"].spend.tokens, rows["a/fp8"].spend.requests) == (2, 60, 2)
    assert (rows["b/fp8"].spend.usd, rows["b/fp8"].spend.unpriced_tokens) == (0.0, 60)
    total = status.spend.total
    assert (total.probes, total.tokens, total.unpriced_tokens) == (4, 120, 60)
    assert total.usd == pytest.approx(3.6e-5)


def test_spend_counts_every_try_of_a_probe_the_request_price_and_the_discount():
    """A language probe confirmed twice sent three requests; each pays the request price; the discount applies."""
    pricing = Pricing(prompt="0.000001", completion="0.000002", request="0.0001", discount=0.5)
    reply = ReplyEvidence(usage={"prompt_tokens": 100, "completion_tokens": 50})
    result = ProbeResult(at=T0, task_id="t1", model=MODEL, provider="a/fp8", kind="language", cycle="c",
                         outcome="fail", reason="language_switch", reply=reply,
                         attempts=[ProbeAttempt(outcome="fail", reply=reply) for _ in range(3)])
    entry = spend_entry(result, pricing)
    assert (entry.requests, entry.prompt_tokens, entry.completion_tokens) == (3, 300, 150)
    assert entry.usd == (Decimal("0.000001") * 300 + Decimal("0.000002") * 150 + Decimal("0.0001") * 3) / 2
    variable = Pricing(prompt="-1", completion="-1")
    assert spend_entry(result, variable).usd is None  # OpenRouter's "variable price": not a number to multiply


def test_spend_per_day_covers_the_last_24_hours_and_says_when_it_is_projected():
    """Probes 30 h ago fall out; a log that began 6 h ago projects its spend to a day, and says so."""
    old = priced(cycle_events(0, healthy("a/fp8")), {"a/fp8": PRICE}, {"prompt_tokens": 1000})
    recent = priced(cycle_events(60, healthy("a/fp8")), {"a/fp8": PRICE}, {"prompt_tokens": 1000})
    now = T0 + 60 * CYCLE + timedelta(hours=6)  # cycle 0 is 36 h before now
    status = view(old + recent, now=now)
    assert status.spend.total.probes == 2 and status.spend.total.prompt_tokens == 2000
    assert not status.spend.projected and status.spend.usd_per_day == pytest.approx(4e-4)
    fresh = view(recent, now=now)
    assert fresh.spend.projected and fresh.spend.covered_s == pytest.approx(6 * 3600)
    assert fresh.spend.usd_per_day == pytest.approx(4e-4 * 4)


# -- the window's own properties ----------------------------------------------------------------------------------------


def test_the_window_folds_each_event_once_and_a_redelivered_result_is_not_spent_twice():
    """The same log read twice (by sequence) and a result repeated under a new sequence change nothing."""
    events = priced(cycle_events(0, healthy(*FLEET)), dict.fromkeys(FLEET, PRICE), {"prompt_tokens": 10})
    state, window = observe(events)
    before = msgspec.to_builtins(window)
    for seq, event in enumerate(events, 1):  # the same sequences again: ignored
        window.add(event, seq)
    result = next(e for e in events if isinstance(e, ProbeResult))
    window.add(result, window.last_seq + 1)  # a redelivery past JetStream's dedupe window
    after = msgspec.to_builtins(window)
    assert after["models"][MODEL]["spend"] == before["models"][MODEL]["spend"]
    assert after["models"][MODEL]["cycles"] == before["models"][MODEL]["cycles"]


def test_the_json_form_decodes_back_to_the_same_view():
    """What --json prints is the typed view: decoding it gives the same Structs (times in UTC)."""
    events = cycle_events(0, failing("a/fp8")) + cycle_events(1, failing("a/fp8"))
    status = view(events)
    fleet = fleet_status([status], now=status.at, window=None)
    assert msgspec.json.decode(msgspec.json.encode(fleet), type=FleetStatus) == fleet


def test_recent_cycles_say_what_was_planned_received_and_judged_per_provider():
    """Each kept cycle: planned probes, results, the verdict of each provider; the oldest beyond the memory go."""
    events = []
    for n in range(10):
        out = healthy(*FLEET)
        if n == 9:
            out["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
        events += cycle_events(n, out, missing={("b/fp8", "structured")} if n == 9 else frozenset())
    cycles = view(events).cycles
    assert [c.cycle_no for c in cycles] == list(range(2, 10))  # CYCLE_MEMORY = 8
    last = cycles[-1]
    assert (last.planned, last.results) == (8, 7)
    assert last.verdicts == {"a/fp8": "failed", "b/fp8": "frozen", "c/fp8": "passed", "d/fp8": "passed"}
    assert last.closed_at == T0 + 9 * CYCLE + WINDOW


def test_a_listing_in_parts_is_merged_into_one_plan_and_one_listing():
    """A large model's EndpointsDiscovered in two parts: the cycle's plan and prices hold both halves."""
    events = priced(cycle_events(0, healthy(*FLEET)), dict.fromkeys(FLEET, PRICE), {"prompt_tokens": 10})
    whole = next(e for e in events if isinstance(e, EndpointsDiscovered))
    halves = [msgspec.structs.replace(whole, endpoints=[e for e in whole.endpoints if e.provider in half],
                                      planned=[p for p in whole.planned if p.provider in half], part=i, parts=2)
              for i, half in enumerate((FLEET[:2], FLEET[2:]))]
    split = [*halves, halves[0], *[e for e in events if e is not whole]]  # a part redelivered
    one, parts = view(events), view(split)
    assert [c.planned for c in parts.cycles] == [c.planned for c in one.cycles] == [8]
    assert parts.spend.total == one.spend.total and parts.spend.total.unpriced_tokens == 0
    assert [p.provider for p in parts.providers] == list(FLEET)


def test_status_says_blind_with_the_cause_and_sees_again_from_the_judges_own_decisions():
    """An unplanned cycle and a blind close: health blind (cause gateway_auth), providers blind; judged again: sees."""
    from reverie_canary.shared.contract import ids
    from reverie_canary.shared.contract.events import CycleUnplanned

    start = T0 + 2 * CYCLE
    unplanned = CycleUnplanned(at=start + timedelta(seconds=5), model=MODEL, cycle=ids.cycle_id(MODEL, start),
                               cycle_no=2, deadline=start + WINDOW, cause="gateway_auth", http_status=401)
    blind = {p: dict.fromkeys(KINDS, ("blind", "gateway_auth")) for p in FLEET}
    events = cycle_events(0, healthy(*FLEET)) + cycle_events(1, healthy(*FLEET)) + [unplanned] + cycle_events(3, blind)
    status = view(events)
    assert (status.health.state, status.health.cause) == ("blind", "gateway_auth")
    assert {p.provider: p.state for p in status.providers} == dict.fromkeys(FLEET, "blind")
    assert {p.passed_streak for p in status.providers} == {2}  # blind cycles move no streak
    seen = view(events + cycle_events(4, healthy(*FLEET)))
    assert seen.health.state == "sees" and {p.state for p in seen.providers} == {"active"}


def test_the_latest_cycle_sizing_is_in_the_fleet_view_and_one_that_does_not_fit_says_so():
    """CycleSized: ``canary status`` shows the latest cycle's sizing; red when it cannot fit."""
    from io import StringIO

    from rich.console import Console

    from reverie_canary.canary.cli_status import render
    from reverie_canary.services.dashboard.core import fleet_status
    from reverie_canary.shared.contract.events import CycleSized

    def sized(n: int, fits: bool) -> CycleSized:
        return CycleSized(at=T0 + n * CYCLE, cycle_no=n, deadline=T0 + n * CYCLE + timedelta(seconds=9), models=1,
                          probes=55, basis="measured", probers=2, per_prober=3, in_flight=6, ceiling=3, needed=20,
                          window_s=9.0, expected_wall_s=4.4 if fits else 12.5, fits=fits)

    window = LogWindow()
    window.add(sized(2, False), seq=5)
    window.add(sized(1, True), seq=6)  # an older cycle's, read later: the latest stays
    status = fleet_status([], now=T0, window=window)
    assert status.sizing is not None and status.sizing.cycle_no == 2 and status.sizing.fits is False
    assert msgspec.json.decode(msgspec.json.encode(status))["sizing"]["in_flight"] == 6
    out = StringIO()
    render(Console(file=out, width=220), status, [])
    text = out.getvalue()
    assert "probe window: cycle 2 sized on measured times: 55 probes of 1 model(s), 2 prober(s) x 3 = 6 in flight" in text
    assert "about 12.5 s of the 9 s window: DOES NOT FIT (needs 20 in flight, ceiling 3 a prober)" in text
    window.add(sized(3, True), seq=7)
    out = StringIO()
    render(Console(file=out, width=220), fleet_status([], now=T0, window=window), [])
    assert "cycle 3 sized" in out.getvalue() and "DOES NOT FIT" not in out.getvalue()
    assert not out.getvalue().startswith("cycle")  # not the first line, and never read as a log line


VARIANTS = ("tools:call", "tools:call_stream", "tools:no_tool", "tools:second_turn")


def test_the_tool_probes_cell_is_its_worst_variant_and_each_reason_names_its_variant():
    """Four tool results per provider fold into one tools cell; a failing variant is named beside its reason."""
    outcomes = {p: {"ttft": "pass", **dict.fromkeys(VARIANTS, "pass")} for p in FLEET}
    outcomes["a/fp8"]["tools:call_stream"] = ("fail", "tool_stream_assembly")
    outcomes["a/fp8"]["tools:second_turn"] = ("fail", "tool_result_ignored")
    status = view(cycle_events(0, outcomes), kinds=["ttft", "tools"])
    cells = {p: {r.kind: (r.outcome, r.reasons, r.probes, r.mode) for r in row.results}
             for p, row in by_name(status).items()}
    assert cells["a/fp8"]["tools"] == ("fail", ["tool_result_ignored (second_turn)",
                                                "tool_stream_assembly (call_stream)"], 4, "observe")
    assert cells["b/fp8"]["tools"] == ("pass", [], 4, "observe")
    assert status.modes["tools"] == "observe" and status.modes["ttft"] == "enforce"


def test_a_tool_control_that_fails_one_variant_proves_the_probe():
    """The control's row says failed (it proves the kind) when one of its four results failed, as the judge counts."""
    from reverie_canary.services.dashboard.feed import control_rows

    caught = {"ctl/tools": {**dict.fromkeys(VARIANTS, "pass"), "tools:call_stream": ("fail", "tool_stream_assembly")}}
    events = cycle_events(0, healthy(*FLEET), controls=caught)
    status = view(events, controls={"tools": "ctl/tools"})
    assert [(c.kind, c.outcome, c.proves) for c in status.controls] == [("tools", "fail", True)]
    assert status.unproven == []
    _, window = observe(events, ENFORCE)
    [row] = control_rows(window.models.get(MODEL), {"tools": "ctl/tools"})
    assert (row.last, row.cycles_without_failure) == ("failed", 0)


def test_spend_is_projected_per_real_day_where_time_runs_faster():
    """The demo's time runs x367: 6 h of its log stand for 2,202 real hours, so the day projected is a real one."""
    from reverie_canary.canary.cli_status import spend_text
    from reverie_canary.services.dashboard.core import spend_view

    recent = priced(cycle_events(60, healthy("a/fp8")), {"a/fp8": PRICE}, {"prompt_tokens": 1000})
    now = T0 + 60 * CYCLE + timedelta(hours=6)
    state, window = observe(recent, ENFORCE)
    entries = window.models[MODEL].spend
    real = spend_view(entries, now, covered_from=now - timedelta(hours=6))
    demo = spend_view(entries, now, covered_from=now - timedelta(hours=6), time_scale=367.0)
    assert real.usd_per_day == pytest.approx(4e-4 * 4) and demo.usd_per_day == pytest.approx(4e-4 * 4 / 367, rel=1e-3)
    text = spend_text(demo)
    assert "time runs x367" in text and "a real day projected" in text, text
    assert "real" not in spend_text(real)
