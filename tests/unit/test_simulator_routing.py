"""The simulated gateway's default routing follows OpenRouter's documented price weighting.

OpenRouter's provider-selection guide ("Price-Based Load Balancing"): among the stable
providers, each is picked with a weight of the inverse square of its price; providers with a
recent outage come last; requests with tools go first to providers that support them.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from reverie_canary.simulator.routing import NO_TOOL_ENDPOINT, NoRoute, price_weight, route, weighted_order
from reverie_canary.simulator.scenario import Endpoint, Pricing, load_scenario
from reverie_canary.simulator.wire import ProviderPreferences


def _endpoint(tag: str, prompt: str, completion: str, **kwargs) -> Endpoint:
    return Endpoint(tag=tag, provider_name=tag.title(), pricing=Pricing(prompt=prompt, completion=completion),
                    **kwargs)


def test_the_first_pick_follows_the_inverse_square_of_the_price():
    """The documented example: providers at $1, $2, $3 per million tokens are first 36:9:4 of the time."""
    fleet = [_endpoint("a", "0.0000005", "0.0000005"), _endpoint("b", "0.000001", "0.000001"),
             _endpoint("c", "0.0000015", "0.0000015")]
    assert price_weight(fleet[0]) / price_weight(fleet[2]) == pytest.approx(9.0)
    rng = random.Random(7)
    firsts = Counter(weighted_order(fleet, rng)[0].tag for _ in range(20000))
    expected = {"a": 36 / 49, "b": 9 / 49, "c": 4 / 49}
    for tag, share in expected.items():
        assert firsts[tag] / 20000 == pytest.approx(share, abs=0.01), (tag, firsts)


def test_unpinned_requests_on_the_demo_fleet_match_the_price_weighting():
    """Each endpoint of the demo fleet is tried first in its 1/price² share: the dearest two (Together,
    Fireworks) about 3 % each, where a uniform shuffle gave them 10 % (20-24 of 200 requests); the refusal
    control, at the default price, about 11 % (which is why the demo keeps it out of live traffic with a
    reviewed exclusion, not by its price)."""
    [model] = load_scenario("default").models
    weights = {e.tag: price_weight(e) for e in model.endpoints}
    total = sum(weights.values())
    assert weights["together"] / total == pytest.approx(0.031, abs=0.002)
    assert weights["fireworks"] / total == pytest.approx(0.033, abs=0.002)
    assert weights["control-filter/strict"] / total == pytest.approx(0.106, abs=0.002)
    rng = random.Random(20260820)
    served = Counter(route(model.endpoints, None, set(), rng)[0].tag for _ in range(20000))
    for tag, weight in weights.items():
        assert served[tag] / 20000 == pytest.approx(weight / total, abs=0.01), (tag, served)
    rng = random.Random(22)
    first200 = Counter(route(model.endpoints, None, set(), rng)[0].tag for _ in range(200))
    assert first200["together"] + first200["fireworks"] <= 24, first200  # a uniform shuffle expects 40


def test_recent_outages_go_last_and_tool_requests_prefer_tool_endpoints():
    """An endpoint that failed in the last 30 s is tried after the stable ones; with tools, endpoints that list
    tools come first; when none left lists tools the gateway says so (its 404 "No endpoints found that support tool use")."""
    plain = _endpoint("plain", "0.0000001", "0.0000001", supported_parameters=["max_tokens", "temperature"])
    fleet = [_endpoint("a", "0.0000005", "0.0000005"), _endpoint("b", "0.0000005", "0.0000005"), plain]
    for seed in range(50):
        order = route(fleet, None, set(), random.Random(seed), outage={"a"})
        assert order[-1].tag == "a"
        order = route(fleet, None, {"tools"}, random.Random(seed))
        assert order[-1].tag == "plain"
    pinned = ProviderPreferences(order=["plain"], only=["plain"], allow_fallbacks=False)
    with pytest.raises(NoRoute) as no:
        route(fleet, pinned, {"tools", "max_tokens"}, random.Random(1))
    assert no.value.message == NO_TOOL_ENDPOINT and no.value.code == "no_endpoints"
    required = ProviderPreferences(order=["plain"], only=["plain"], allow_fallbacks=False, require_parameters=True)
    with pytest.raises(NoRoute) as no:
        route(fleet, required, {"tools"}, random.Random(1))
    assert no.value.code == "constraint_filtered" and no.value.excluded_by == ["require_parameters"]


def test_the_demo_exclusions_keep_every_positive_control_out_of_live_traffic():
    """config/demo-exclusions.toml is a valid reviewed-exclusions file naming every control of the packaged
    fleets: unpinned traffic never reaches a host that fails on purpose."""
    from pathlib import Path

    from reverie_canary.services.router.core import parse_exclusions

    path = Path(__file__).resolve().parents[2] / "config" / "demo-exclusions.toml"
    excluded = {(e.provider, e.model) for e in parse_exclusions(path.read_text(), str(path))}
    for name in ("default", "full"):
        scenario = load_scenario(name)
        model = scenario.models[0]
        assert {(tag, model.id) for tag in scenario.controls.values()} <= excluded, name
        ignore = ProviderPreferences(ignore=[p for p, _ in excluded])
        rng = random.Random(3)
        served = Counter(route(model.endpoints, ignore, set(), rng)[0].tag for _ in range(200))
        assert not set(served) & set(scenario.controls.values()), served
