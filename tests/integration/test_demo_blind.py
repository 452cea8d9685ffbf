"""The canary's own blindness end to end: simulated gateway, real NATS, Redis and the signed webhook receiver.

DESIGN.md, "The canary's own health"; issue 9, part 1 and its done-when: one
critical ``canary_blind`` notice in the cycle the gateway starts refusing the
canary, no provider's streak moved while blind, a suspension that comes due
held, one ``canary_sees`` once a cycle judges again; ``canary replay`` agrees.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from reverie_canary.canary.demo import CYCLE_S, pipeline
from reverie_canary.shared import ids
from reverie_canary.simulator.faults import parse_fault
from tests.integration.test_pipeline import BROKEN, SLOW, _replay

pytestmark = pytest.mark.integration

#: Suspensions of two demo cycles: the ones decided at cycle 2's close come due in cycle 4, while blind.
LADDER = [2 * CYCLE_S, 4 * CYCLE_S, 8 * CYCLE_S]


def streaks(record) -> dict[str, tuple[int, int, int]]:
    return {n: (ps.failed_streak, ps.passed_streak, ps.frozen_streak) for n, ps in record.state.providers.items()}


def demo_cycle(p, at) -> int:
    """The demo's cycle (1-based) that ``at`` falls in."""
    return ids.cycle_no(at.timestamp(), p.settings.cycle_interval_s) - min(p.observer.cycle_nos) + 1


async def refuse_probes_of_cycle_3(p) -> None:
    """The key is revoked once cycle 3 is planned (its probes get 401), and valid again before cycle 5 starts."""
    while not p.observer.cycle_nos or len(p.observer.planned) < 3:
        await asyncio.sleep(0.02)
    p.gateway.outage = 401
    first = min(p.observer.cycle_nos)
    at = (first + 4) * p.settings.cycle_interval_s - 0.1 * p.settings.cycle_interval_s
    await asyncio.sleep(max(0.0, at - time.time()))
    p.gateway.outage = None


async def blind_run(tmp_path, fault: str):
    """Five cycles, the fault in cycles 3 and 4: the records after cycles 2 and 4, the pipeline's summary."""
    faults = () if fault == "probes:401" else (parse_fault(fault),)
    async with pipeline(workdir=tmp_path, scenario="default", gateway_faults=faults, ladder_s=LADDER) as p:
        refuser = asyncio.create_task(refuse_probes_of_cycle_3(p)) if not faults else None
        assert await p.wait_cycles(2)
        before = await p.judge_record()
        assert await p.wait_cycles(4)
        during = await p.judge_record()
        assert await p.wait_cycles(5)
        await asyncio.sleep(1.0)  # the last decisions reach the router and the receiver
        if refuser is not None:
            await refuser
        summary = await p.summary()
        differences, _ = await _replay(p)
        decisions = [(d.action, d.provider, demo_cycle(p, d.at)) for d in p.observer.decisions]
        held_until = {d.provider: d.until for d in p.observer.decisions if d.action == "suspension_held"}
        verdict_3 = p.observer.verdicts
        return before, during, summary, differences, decisions, held_until, verdict_3


@pytest.mark.parametrize("fault, cause", [
    ("probes:401", "gateway_auth"),  # the key revoked after cycle 3's listing: its probes are blind, cycle 4 unplanned
    ("credit:3-4", "gateway_credit"),  # 402 to everything, cycles 3 and 4 unplanned
    ("down:3-4", "gateway_unreachable"),  # connections refused in cycles 3 and 4
])
async def test_blind_for_two_cycles_is_told_once_holds_the_due_suspensions_and_sees_again(tmp_path, fault, cause):
    """401, 402 or connections refused in cycles 3-4: one canary_blind (3), streaks kept, held, one canary_sees (5)."""
    before, during, summary, differences, decisions, held_until, _ = await blind_run(tmp_path, fault)

    assert summary["cycles"] == 5
    assert len(summary["canary"]["unplanned"]) == (1 if fault == "probes:401" else 2)
    critical = [(n["action"], n["cycle"]) for n in summary["notices"]
                if n["severity"] == "critical" and n["action"].startswith("canary_")]
    assert critical == [("canary_blind", 3), ("canary_sees", 5)], summary["notices"]
    [blind] = [d for d in decisions if d[0] == "canary_blind"]
    assert blind == ("canary_blind", "", 3)
    # no provider's streak moved in the blind cycles
    assert streaks(during) == streaks(before)
    assert all(set(info["verdicts"][2:4]) == {"blind"} for info in summary["providers"].values()), summary["providers"]
    # the suspensions decided in cycle 2 came due in cycle 4: held (told), not ended, until cycle 5 judged them
    # (broken fails every cycle; slow on a loaded machine may lose a cycle's probes, so it is checked if suspended)
    suspended = {n for n, ps in before.state.providers.items() if ps.suspension is not None and ps.suspension.enforced}
    assert BROKEN in suspended and suspended <= {SLOW, BROKEN}, suspended
    assert {p for a, p, c in decisions if a == "suspension_held"} == suspended, decisions
    assert not any(a == "end" and c < 5 for a, _, c in decisions), decisions
    assert {p for a, p, c in decisions if a == "end" and c == 5} == suspended, decisions
    held_notices = [(n["provider"], n["cycle"]) for n in summary["notices"] if n["action"] == "suspension_held"]
    assert sorted(held_notices) == sorted((p, 3) for p in suspended), summary["notices"]
    assert {during.state.providers[p].suspension.until for p in suspended} <= set(held_until.values())
    assert during.state.blind_since is not None and during.state.blind_cause == cause
    assert summary["canary"]["blind"] is False
    # the fold of the log is the judge's state: canary replay agrees
    assert differences == []


def test_done_when_auth_from_cycle_3_ends_blind_with_one_critical_notice(tmp_path):
    """`canary demo --gateway-fault auth:3 --cycles 5 --json`: one critical canary_blind, in cycle 3, nothing after."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "reverie_canary.canary", "demo", "--gateway-fault", "auth:3",
                           "--cycles", "5", "--json"], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["cycles"] == 5 and summary["gateway_faults"] == ["auth:3"]
    blind = [n for n in summary["notices"] if n["action"] == "canary_blind"]
    assert blind == [{"cycle": 3, "severity": "critical", "action": "canary_blind", "provider": None}]
    after = [n for n in summary["notices"] if n["cycle"] >= 3 and n["action"] in ("suspend", "end")]
    assert after == [] and summary["notices"][-1]["action"] == "canary_blind"
    assert [d["action"] for d in summary["decisions"]][-1] == "canary_blind"
    assert not any(d["action"] in ("end", "would_end") for d in summary["decisions"])
    assert summary["canary"] == {"blind": True, "cause": "gateway_auth", "since": summary["canary"]["since"],
                                 "unplanned": summary["canary"]["unplanned"]}
    assert len(summary["canary"]["unplanned"]) == 3
    assert "canary_blind" in done.stderr and "BLIND" in done.stderr
