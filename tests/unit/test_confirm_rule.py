"""The rule that turns live failure counts into pinned confirmation probes (discovery's confirm core)."""

from __future__ import annotations

from reverie_canary.client.checks.tools import TOOL_REASONS
from reverie_canary.services.discovery.confirm import (
    CONFIRMING_KIND,
    Suspect,
    Tally,
    Thresholds,
    suspects,
    take_budget,
)


def fleet(**failures: dict[str, int]) -> list[Tally]:
    """Five providers with 100 replies each; the named ones fail as given."""
    names = ["deepinfra/fp8", "novita/fp8", "together", "fireworks", "parasail/fp8"]
    return [Tally(provider=n, served=100, failures=failures.get(n.split("/")[0], {})) for n in names]


def test_one_provider_far_above_its_peers_is_singled_out_with_the_matching_kind():
    found = suspects(fleet(novita={"leading_junk": 12}, together={"leading_junk": 1}))
    assert [(s.provider, s.reason, s.kind, s.count) for s in found] == [("novita/fp8", "leading_junk", "ttft", 12)]
    [s] = found
    assert s.median == 0.0 and s.share == 0.12 and s.threshold == 0.06 and s.peers == 5


def test_a_failure_every_provider_shows_is_the_models_and_asks_for_nothing():
    everyone = {n: {"empty_output": 30 + i} for i, n in enumerate(["deepinfra", "novita", "together", "fireworks",
                                                                   "parasail"])}
    assert suspects(fleet(**everyone)) == []


def test_a_count_below_the_minimum_or_too_little_traffic_asks_for_nothing():
    assert suspects(fleet(novita={"leading_junk": 4})) == []  # 4 < min_failures 5
    few = [Tally(provider="a", served=100, failures={"refusal": 50}), Tally(provider="b", served=100),
           Tally(provider="c", served=19, failures={})]  # c has too little traffic: two peers only
    assert suspects(few) == []
    # two peers: the median sits midway between them, so neither stands out
    assert suspects(few, Thresholds(min_providers=2)) == []
    enough = [*few[:2], Tally(provider="c", served=20)]
    assert [s.provider for s in suspects(enough)] == ["a"]


def test_a_spread_fleet_raises_the_bar():
    """Peers at 10-20 % of one reason: a provider at 25 % is inside their spread, at 60 % it is not."""
    spread = [Tally(provider=f"p{i}", served=100, failures={"refusal": 10 + 3 * i}) for i in range(5)]
    assert suspects([*spread, Tally(provider="x", served=100, failures={"refusal": 25})]) == []
    [s] = suspects([*spread, Tally(provider="x", served=100, failures={"refusal": 60})])
    assert (s.provider, s.kind) == ("x", "refusal") and s.threshold > 0.25


def test_reasons_no_probe_reproduces_and_forged_counts_are_ignored():
    found = suspects(fleet(novita={"http_502": 40, "made_up_reason": 40, "refusal": -5}))
    assert found == []
    # a provider named twice adds up; counts above the replies served cap the share at 1
    twice = [*fleet(), Tally(provider="novita/fp8", served=10, failures={"tool_args_invalid_json": 900})]
    [s] = suspects(twice)
    assert (s.provider, s.served, s.count, s.share, s.kind) == ("novita/fp8", 110, 900, 1.0, "tools")


def test_every_tool_reason_is_confirmed_by_the_tool_probe():
    judged = set(TOOL_REASONS) - {"tool_capability_error", "tools_unsupported"}
    assert {r for r in judged if CONFIRMING_KIND.get(r) != "tools"} == set()


def test_the_budget_holds_per_provider_and_asks_each_kind_once():
    wanted = [Suspect(provider=p, reason=r, kind=CONFIRMING_KIND[r], count=9, served=100, share=0.09, median=0.0,
                      threshold=0.06, peers=5)
              for p in ("a", "b") for r in ("leading_junk", "ttft_exceeded", "refusal", "not_json")]
    chosen = take_budget(wanted, {"b": 1}, max_per_provider=2)
    # a: leading_junk (ttft), then ttft_exceeded is the same kind: skipped, refusal takes the second slot
    assert [(s.provider, s.reason) for s in chosen] == [("a", "leading_junk"), ("a", "refusal"),
                                                         ("b", "leading_junk")]
    assert take_budget(wanted, {}, max_per_provider=2, pending=[("a", "ttft"), ("a", "refusal"),
                                                                ("b", "ttft")]) == [
        wanted[3], wanted[6], wanted[7]]


def test_a_flood_of_forged_counts_costs_a_bounded_number_of_probes():
    """Every reason for every provider at once, many times over: at most the budget per provider."""
    flood = [Tally(provider=f"p{i}", served=1000, failures=dict.fromkeys(CONFIRMING_KIND, 999 if i else 0))
             for i in range(40)] * 3
    chosen = take_budget(suspects(flood), {}, max_per_provider=2)
    per: dict[str, int] = {}
    for s in chosen:
        per[s.provider] = per.get(s.provider, 0) + 1
    assert max(per.values(), default=0) <= 2
    assert len(chosen) <= 2 * 40
