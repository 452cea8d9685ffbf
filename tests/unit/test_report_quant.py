"""``canary report``'s verdicts by quantization (services/judge/explain.py QuantTally), over the judge's own fold."""

from __future__ import annotations

import msgspec

from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.services.judge.explain import QuantTally, quant_lines
from reverie_canary.shared.contract.events import CycleVerdict, EndpointsDiscovered
from tests.judge_events import MODEL, cycle_events, healthy

POLICY = Policy(mode="observe", models=(MODEL,))


def quantized(events: list, quant: dict[str, str | None]) -> list:
    return [msgspec.structs.replace(e, endpoints=[msgspec.structs.replace(x, quantization=quant[x.provider])
                                                  for x in e.endpoints])
            if isinstance(e, EndpointsDiscovered) else e for e in events]


def tally_of(events: list) -> QuantTally:
    tally, states = QuantTally(), {}
    for event in events:
        if isinstance(event, EndpointsDiscovered):
            tally.see(event)
        states, produced = fold([event], POLICY, states)
        for effect in produced:
            if isinstance(effect, CycleVerdict):
                tally.count(effect)
    return tally


def test_each_verdict_counts_under_the_quantization_its_listing_declared_then():
    """An endpoint re-listed at another quantization counts under each in turn; 'unknown' is undeclared."""
    out = healthy("a/x", "b/y")
    out["a/x"]["ttft"] = ("fail", "ttft_exceeded")
    events = [*quantized(cycle_events(0, out), {"a/x": "FP4", "b/y": "unknown"}),
              *quantized(cycle_events(1, out), {"a/x": "fp8", "b/y": None})]
    groups = {g.quantization: g for g in tally_of(events).groups(MODEL)}
    assert list(groups) == ["fp8", "fp4", "undeclared"]  # most bits first, undeclared last
    assert (groups["fp4"].failed, groups["fp8"].failed, groups["fp8"].failed_share) == (1, 1, 1.0)
    assert (groups["undeclared"].passed, groups["undeclared"].providers) == (2, ["b/y"])
    assert quant_lines(tally_of(events).groups(MODEL))[0] == "    fp8 (1 provider): 0 passed, 1 failed (100.0% of judged cycles)"


def test_a_model_without_verdicts_has_no_groups():
    """Nothing closed: no group, and the report prints no section."""
    assert QuantTally().groups(MODEL) == []
