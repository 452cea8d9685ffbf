"""The canary's own blindness end to end: simulated gateway, real NATS, Redis and the signed webhook receiver.

docs/concepts/health.md: one
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

from reverie_canary.canary.demo import demo_cycle_s, pipeline
from reverie_canary.shared.contract import ids
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator.faults import parse_fault
from tests.integration.test_pipeline import BROKEN, SLOW, _replay

pytestmark = pytest.mark.integration

#: The default demo's cycle (its fleet of 10 endpoints, one a positive control).
CYCLE_S = demo_cycle_s(10, 1, Settings.load(env={}))
#: Suspensions of two demo cycles, every step: broken (failing every cycle) is suspended at cycles 2, 6 and 10, and
#: each suspension comes due in a blind window below.
LADDER = [2 * CYCLE_S, 2 * CYCLE_S, 2 * CYCLE_S]
#: The blind windows (demo cycles, two each), their cause, and the cycle that sees again: the key revoked after
#: cycle 3's listing (its probes get 401, cycle 4's listing too), no credit (402 to everything), the gateway gone.
WINDOWS = ((3, "gateway_auth"), (7, "gateway_credit"), (11, "gateway_unreachable"))
FAULTS = ("credit:7-8", "down:11-12")
CYCLES = 13


def streaks(record) -> dict[str, tuple[int, int, int]]:
    return {n: (ps.failed_streak, ps.passed_streak, ps.frozen_streak) for n, ps in record.state.providers.items()}


def demo_cycle(p, at) -> int:
    """The demo's cycle (1-based) that ``at`` falls in."""
    return ids.cycle_no(at.timestamp(), p.settings.cycle_interval_s) - min(p.observer.cycle_nos) + 1


async def revoke_the_key_after_cycle_3s_listing(p) -> None:
    """Cycle 3: the listing works, every probe gets 401; cycle 4: 401 to everything; cycle 5: served again.

    Each switch happens a tenth of an interval before the cycle starts (after the previous deadline).
    """
    first = await p.observer.first_cycle_no()
    interval = p.settings.cycle_interval_s
    for n, (status, scope) in ((3, (401, "chat")), (4, (401, "all")), (5, (None, "all"))):
        await asyncio.sleep(max(0.0, (first + n - 1) * interval - 0.1 * interval - time.time()))
        p.gateway.outage, p.gateway.outage_scope = status, scope


async def test_blind_windows_are_told_once_keep_every_streak_hold_the_due_suspensions_and_see_again(tmp_path):
    """401 (probes, then listing), 402 and the gateway down, two cycles each: per window one canary_blind in its
    first cycle, no streak moved, the suspension due in it held until the cycle after, then one canary_sees."""
    async with pipeline(workdir=tmp_path, scenario="default", ladder_s=LADDER,
                        gateway_faults=tuple(parse_fault(f) for f in FAULTS)) as p:
        revoker = asyncio.create_task(revoke_the_key_after_cycle_3s_listing(p))
        records = {}
        for n in sorted({w - 1 for w, _ in WINDOWS} | {w + 1 for w, _ in WINDOWS} | {CYCLES}):
            assert await p.wait_cycles(n)
            records[n] = await p.judge_record()
        await asyncio.sleep(1.0)  # the last decisions reach the router and the receiver
        await revoker
        summary = await p.summary()
        differences, _ = await _replay(p)
        decisions = [(d.action, d.provider, d.reason, demo_cycle(p, d.at)) for d in p.observer.decisions]
        unplanned = sorted(n - min(p.observer.cycle_nos) + 1 for n in p.observer.unplanned)

    assert summary["cycles"] == CYCLES
    # cycle 3 was planned (its probes were blind); 4, 7, 8, 11 and 12 could not be
    assert unplanned == [4, 7, 8, 11, 12]
    told = [(n["action"], n["cycle"]) for n in summary["notices"]
            if n["severity"] == "critical" and n["action"].startswith("canary_")]
    assert told == [x for w, _ in WINDOWS for x in (("canary_blind", w), ("canary_sees", w + 2))], summary["notices"]
    assert [(r, c) for a, _, r, c in decisions if a == "canary_blind"] == [(cause, w) for w, cause in WINDOWS]
    assert [c for a, _, _, c in decisions if a == "canary_sees"] == [w + 2 for w, _ in WINDOWS]
    for w, cause in WINDOWS:
        # no provider's streak moved in the two blind cycles; every verdict in them was blind
        assert streaks(records[w + 1]) == streaks(records[w - 1]), (w, cause)
        assert all(set(info["verdicts"][w - 1:w + 1]) == {"blind"} for info in summary["providers"].values()), w
        # broken's suspension came due in the window: held there, ended in the cycle that judged it again
        # (slow, on a loaded machine, may lose a cycle's probes: checked when it was suspended too)
        suspended = {n for n, ps in records[w - 1].state.providers.items()
                     if ps.suspension is not None and ps.suspension.enforced}
        assert BROKEN in suspended and suspended <= {SLOW, BROKEN}, (w, suspended)
        held = {p for a, p, _, c in decisions if a == "suspension_held" and c in (w, w + 1)}
        assert held == suspended, (w, decisions)
        assert {p for a, p, r, c in decisions if a == "end" and c in (w, w + 1)} == set(), (w, decisions)
        assert {p for a, p, r, c in decisions if a == "end" and c == w + 2} == suspended, (w, decisions)
        assert sorted(n["provider"] for n in summary["notices"]
                      if n["action"] == "suspension_held" and n["cycle"] == w) == sorted(suspended), w
        blind_state = records[w + 1].state
        assert blind_state.blind_since is not None and blind_state.blind_cause == cause
        assert all(blind_state.providers[n].suspension.due is not None for n in suspended)
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
