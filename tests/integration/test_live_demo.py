"""``canary demo --scenario full`` with its chat traffic: a defect users see gets live failures, a pinned probe confirms.

The demo's chat backend sends unpinned requests through the reply guard (:mod:`reverie_canary.canary.traffic`),
the positive controls kept out by the reviewed exclusions; the full fleet has providers whose every prose
reply is broken (a stray ``,`` before the text, byte-level tokens, tool-call markup in the text ...).
Their live failures stand out from the peers', discovery sends a pinned confirmation probe, the judge
says ``confirmed`` and the notifier's ``live_confirmed`` notice reaches the demo's webhook, listed in
the summary as ``canary demo --json`` prints it.  Bounded: it stops at the first such notice.
"""

from __future__ import annotations

import pytest

from reverie_canary.canary.demo import TRAFFIC_RPM, as_the_demo, pipeline
from reverie_canary.simulator.scenario import load_scenario
from tests import waits

pytestmark = pytest.mark.integration

#: The full fleet's hosts whose prose replies carry a defect the guard sees in every reply.
VISIBLE = {"brightwave/fp8", "bytecove/bf16", "toolspill/fp8", "oldport/fp8", "echoloop/fp8", "inkwell/fp8",
           "shortwick/fp8", "quietharbor/bf16"}


async def test_the_full_demo_lists_a_live_confirmed_notice_for_a_provider_users_see_broken(tmp_path):
    """Within a few cycles: live_confirmed for a visibly broken host; the controls excluded; traffic figures."""
    controls = set(load_scenario("full").controls.values())
    async with pipeline(workdir=tmp_path, scenario="full", **as_the_demo()) as p:
        await waits.until(lambda: any(n.action == "live_confirmed" for n in p.observer.notices), timeout_s=240,
                          what="a live_confirmed notice", interval_s=0.5)
        summary = await p.summary()
    confirmed = [n for n in summary["notices"] if n["action"] == "live_confirmed"]
    assert confirmed and {n["provider"] for n in confirmed} <= VISIBLE, confirmed
    assert {n["severity"] for n in confirmed} == {"warning"}
    # the reviewed exclusions keep every control of the fleet out of live traffic (layer 1), none suspended
    assert set(summary["excluded"]) == controls and controls <= set(summary["ignore"])
    traffic = summary["traffic"]
    assert traffic["rpm"] == TRAFFIC_RPM and traffic["replies"] > 0 and traffic["live_published"] >= 1
    assert traffic["retried"] > 0  # failing replies of the broken hosts were sent again elsewhere
    # live counts suspend no one: every suspension is the judge's two failed cycles
    assert {d["reason"] for d in summary["decisions"] if d["action"] == "suspend"} <= {"failed_cycles"}
