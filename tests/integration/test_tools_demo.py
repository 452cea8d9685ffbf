"""``canary demo --scenario full`` with the tool probe: each tool-broken provider is flagged, toolsmith never.

The tool probe is a new kind: it runs in observe mode (``new_kind_default_modes``) although the demo
switches the model to enforce, so a provider whose only fault is in its tool calls is announced
``would_suspend`` within the demo's default cycles and stays in traffic; the healthy tool host of the
fleet, ``toolsmith``, never fails a tool probe and is never flagged.
"""

from __future__ import annotations

import pytest

from reverie_canary.canary.demo import DEFAULT_CYCLES, pipeline
from reverie_canary.shared.contract.events import CycleVerdict, Decision, ProbeResult
from reverie_canary.shared.runtime.eventlog import read_log
from reverie_canary.shared.runtime.service import nats_connect
from reverie_canary.simulator.scenario import load_scenario
from tests.integration.test_prober_fleet import tool_broken, toolsmiths

pytestmark = pytest.mark.integration


async def test_the_full_demo_flags_each_tool_broken_provider_in_observe_and_never_toolsmith(tmp_path):
    """Within the default cycles: would_suspend on tool evidence for each tool fault; toolsmith passes every variant."""
    scenario = load_scenario("full")
    broken, smith = tool_broken(scenario), toolsmiths(scenario)
    assert broken and smith, (broken, smith)
    def flagged_on_tools(log: list) -> set[str]:
        return {d.provider for d in log if isinstance(d, Decision) and d.provider in broken
                and d.action in ("would_suspend", "suspend") and any(r.kind == "tools" for r in d.evidence)}

    async with pipeline(workdir=tmp_path, scenario="full") as p:
        # within the default cycles: read after each from the second on, and stop once every one is flagged
        for n in range(2, DEFAULT_CYCLES + 1):
            assert await p.wait_cycles(n)
            nc = await nats_connect(p.settings)
            try:
                log = [e.event for e in await read_log(nc.jetstream())]
            finally:
                await nc.close()
            if flagged_on_tools(log) == set(broken):
                break

    decisions = [e for e in log if isinstance(e, Decision)]
    for tag in broken:
        flagged = [d for d in decisions if d.provider == tag and d.action in ("would_suspend", "suspend")
                   and any(r.kind == "tools" for r in d.evidence)]
        assert flagged, (tag, [(d.action, d.reason) for d in decisions if d.provider == tag])
        # the tool probe observes: a provider flagged on tool evidence alone stays in traffic
        tools_only = [d for d in flagged if {r.kind for r in d.evidence} == {"tools"}]
        assert all(d.action == "would_suspend" and d.mode == "observe" for d in tools_only), tools_only

    tool_results = [e for e in log if isinstance(e, ProbeResult) and e.kind == "tools" and e.provider in smith]
    assert {r.variant for r in tool_results} == {"call", "call_stream", "no_tool", "second_turn"}
    assert {r.outcome for r in tool_results} <= {"pass"}, [(r.variant, r.outcome, r.reason) for r in tool_results
                                                          if r.outcome != "pass"][:4]
    assert not [d for d in decisions if d.provider in smith and d.action in ("would_suspend", "suspend")]
    verdicts = [pv for e in log if isinstance(e, CycleVerdict) for pv in e.verdicts if pv.provider in smith]
    assert verdicts and "failed" not in {pv.verdict for pv in verdicts}
