"""Discovery's confirmation plan: the window of live counts, names to tags, the pinned tasks and their budget."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from reverie_canary.client.served import LiveCounts, LiveOutcomes
from reverie_canary.services.discovery.confirm import (
    MAX_PERIODS,
    Budget,
    LiveWindow,
    Tally,
    Thresholds,
    plan_confirmations,
    tags_for,
    tallies_of,
    variant_for,
)
from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract.events import Endpoint

MODEL = "acme/chat-1"
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
TOOLS = ["tools", "tool_choice"]
ENDPOINTS = [
    Endpoint(provider="deepinfra/fp8", provider_name="DeepInfra", supported_parameters=TOOLS),
    Endpoint(provider="deepinfra/fp4", provider_name="DeepInfra", supported_parameters=TOOLS),
    Endpoint(provider="novita/fp8", provider_name="Novita", supported_parameters=TOOLS),
    Endpoint(provider="together", provider_name="Together"),
    Endpoint(provider="fireworks", provider_name="Fireworks"),
]


def counts(at: datetime, **by_key: tuple[int, dict[str, int]]) -> LiveCounts:
    return LiveCounts(at=at, model=MODEL, since=at - timedelta(seconds=10),
                      providers={k: LiveOutcomes(replies=n, reasons=r) for k, (n, r) in by_key.items()})


def fleet(bad: str, reason: str, failures: int = 12) -> list[Tally]:
    keys = ["DeepInfra", "Novita", "Together", "Fireworks"]
    return [Tally(provider=k, served=100, failures={reason: failures} if k == bad else {}) for k in keys]


def plan(tallies: list[Tally], budget: Budget, max_per_provider: int = 2):
    return plan_confirmations(tallies, model=MODEL, endpoints=ENDPOINTS, budget=budget, limits=Thresholds(),
                              max_per_provider=max_per_provider, at=NOW, deadline=NOW + timedelta(minutes=10),
                              window_s=600.0, language="pt")


def test_a_display_name_stands_for_every_endpoint_it_covers_and_an_unknown_key_for_none():
    """'DeepInfra' covers both of its endpoints (case and spaces aside); a tag is itself; a stranger nothing."""
    assert tags_for("DeepInfra", ENDPOINTS) == ["deepinfra/fp4", "deepinfra/fp8"]
    assert tags_for(" deepinfra ", ENDPOINTS) == ["deepinfra/fp4", "deepinfra/fp8"]
    assert tags_for("novita/fp8", ENDPOINTS) == ["novita/fp8"]
    assert tags_for("Nobody", ENDPOINTS) == []


def test_the_window_counts_a_message_once_and_forgets_what_ended_before_it():
    """A redelivered id is not counted again; a period older than the window, or far ahead, is refused."""
    w = LiveWindow(600.0)
    c = counts(NOW, Novita=(30, {"leading_junk": 6}))
    assert w.add("live|a", c.at, tallies_of(c), NOW)
    assert not w.add("live|a", c.at, tallies_of(c), NOW)  # redelivery
    assert w.add("live|b", c.at, tallies_of(c), NOW)
    assert not w.add("live|old", NOW - timedelta(seconds=601), tallies_of(c), NOW)
    assert not w.add("live|ahead", NOW + timedelta(seconds=601), tallies_of(c), NOW)
    assert w.tallies(NOW) == [Tally(provider="Novita", served=60, failures={"leading_junk": 12})]
    assert w.tallies(NOW + timedelta(seconds=601)) == []
    assert len(w) == 0


def test_the_window_keeps_at_most_its_bound_of_periods():
    """A flood of periods keeps the newest ``max_periods`` and counts the ones dropped."""
    w = LiveWindow(600.0, max_periods=3)
    for i in range(5):
        w.add(f"m{i}", NOW, [Tally(provider="x", served=1)], NOW)
    assert len(w) == 3 and w.dropped == 2
    assert w.tallies(NOW) == [Tally(provider="x", served=3)]
    assert MAX_PERIODS >= 10_000


def test_a_standing_out_name_gets_one_pinned_task_per_endpoint_of_the_matching_kind():
    """Leading junk on DeepInfra: a ttft probe pinned to each DeepInfra endpoint, outside any cycle, with why."""
    budget = Budget(cycle_no=7)
    tasks = plan(fleet("DeepInfra", "leading_junk"), budget)
    assert [(t.provider, t.kind, t.task_id) for t in tasks] == [
        ("deepinfra/fp4", "ttft", "confirm|acme/chat-1|7|deepinfra/fp4|ttft|1"),
        ("deepinfra/fp8", "ttft", "confirm|acme/chat-1|7|deepinfra/fp8|ttft|1")]
    t = tasks[0]
    assert t.cycle == ids.confirm_cycle(MODEL, 7) and t.language == "pt" and not t.control
    assert t.same_name == ["deepinfra/fp8"] and t.provider_name == "DeepInfra"
    assert t.confirms is not None
    assert (t.confirms.reason, t.confirms.key, t.confirms.count, t.confirms.served, t.confirms.share,
            t.confirms.peers, t.confirms.window_s, t.confirms.number) == \
        ("leading_junk", "DeepInfra", 12, 100, 0.12, 4, 600.0, 1)
    assert budget.spent == {"deepinfra/fp4": 1, "deepinfra/fp8": 1}


def test_the_same_pair_is_not_asked_twice_in_a_cycle_and_the_budget_bounds_every_provider():
    """Asked once per (endpoint, kind) per cycle; other kinds until the budget; nothing past it; a new cycle anew."""
    budget = Budget(cycle_no=7)
    assert len(plan(fleet("Novita", "leading_junk"), budget)) == 1
    assert plan(fleet("Novita", "leading_junk"), budget) == []  # the same (novita/fp8, ttft): asked already
    [echo] = plan(fleet("Novita", "bytelevel_tokens"), budget)
    assert (echo.kind, echo.task_id) == ("echo", "confirm|acme/chat-1|7|novita/fp8|echo|2")
    assert plan(fleet("Novita", "refusal"), budget) == []  # two this cycle: the budget is spent
    assert len(plan(fleet("Novita", "refusal"), Budget(cycle_no=8))) == 1
    assert plan(fleet("Novita", "refusal"), Budget(cycle_no=9), max_per_provider=0) == []


def test_tool_reasons_get_the_variant_that_shows_them():
    """A stream that assembles differently: call_stream; an ignored result: second_turn; otherwise call."""
    [t] = plan(fleet("Novita", "tool_stream_assembly"), Budget(cycle_no=1))
    assert (t.kind, t.variant) == ("tools", "call_stream")
    assert variant_for("tool_result_ignored", "tools", TOOLS) == "second_turn"
    assert variant_for("tool_unexpected_call", "tools", TOOLS) == "no_tool"
    assert variant_for("tool_args_invalid_json", "tools", TOOLS) == "call"
    assert variant_for("tool_args_invalid_json", "tools", []) == ""  # not advertised: not_applicable, inconclusive
    assert variant_for("leading_junk", "ttft", TOOLS) == ""
