"""The quantization floor in the router's pure fold: the allow-list, the capacity floor over it, the answers.

docs/concepts/routing.md, "The quantization floor": the floor becomes the snapshot's
``quantizations`` (OpenRouter's ``provider.quantizations``, an allow-list); an endpoint that
declares no quantization is dropped by it and named; the capacity floor wins, denied
quantizations coming back most bits first, or no allow-list at all.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from reverie_canary.services.router.core import (
    Host,
    RouterPolicy,
    SnapshotMade,
    Tick,
    decide,
    diff_layers,
    initial,
    quant_plan,
    refold,
)
from reverie_canary.shared.contract import quantization as quant
from reverie_canary.shared.contract.commands import SetQuantizationFloor
from reverie_canary.shared.contract.events import (
    CommandApplied,
    CommandRefused,
    Decision,
    Endpoint,
    EndpointsDiscovered,
    make_decision,
)

MODEL = "acme/chat-1"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
POLICY = RouterPolicy(models=(MODEL,), min_hosts=2)
FLEET = {"a/fp8": "fp8", "b/bf16": "bf16", "c/fp4": "fp4", "d/int4": "int4", "e": None, "f/mx": "mxfp4"}


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def floor(*deny: str, cid: str = "q1", minute: float = 0, model: str = MODEL) -> SetQuantizationFloor:
    return SetQuantizationFloor(command_id=cid, actor="alice", at=at(minute), model=model, deny=list(deny),
                                reason="fp4 hosts drift in Portuguese")


def listed(fleet: dict[str, str | None], minute: float = 0) -> EndpointsDiscovered:
    endpoints = [Endpoint(provider=tag, provider_name=tag.split("/")[0].title(), quantization=q)
                 for tag, q in fleet.items()]
    return EndpointsDiscovered(at=at(minute), model=MODEL, cycle=f"{MODEL}@c", cycle_no=1, deadline=at(minute + 10),
                               endpoints=endpoints)


def suspend(provider: str, minute: float = 0, did: str = "d1") -> Decision:
    return make_decision(at=at(minute), decision_id=did, model=MODEL, provider=provider, action="suspend",
                    until=at(minute) + timedelta(days=1), reason="failed_cycles", detail="ttft in 2 cycles")


def run(events, policy: RouterPolicy = POLICY, state=None):
    state = state or initial()
    effects = []
    for i, event in enumerate(events):
        state, produced = decide(state, event, at(i / 100), policy)
        effects += produced
    return state, effects


def last_snapshot(effects):
    return [e.snapshot for e in effects if isinstance(e, SnapshotMade)][-1]


def answer(effects):
    (reply,) = [e for e in effects if isinstance(e, CommandApplied | CommandRefused)]
    return reply


def hosts(fleet: dict[str, str | None]) -> list[Host]:
    return [Host(tag=t, quantization=q) for t, q in fleet.items()]


# -- the pure plan --------------------------------------------------------------------------------


@pytest.mark.parametrize(("deny", "allow"), [
    (["fp4", "int4"], ["fp6", "int8", "fp8", "mxfp8", "fp16", "bf16", "fp32"]),
    (["fp8"], ["int4", "fp4", "mxfp4", "nvfp4", "fp6", "int8", "fp16", "bf16", "fp32"]),
    (quant.below("fp8"), ["int8", "fp8", "mxfp8", "fp16", "bf16", "fp32"]),
])
def test_a_floor_allows_every_quantization_it_does_not_deny_families_included(deny, allow):
    """Denying fp4 denies mxfp4 and nvfp4 too (the gateway's fp4 admits them); --min fp8 denies fewer bits."""
    assert quant.allowed(deny) == allow
    assert quant.deny_problem(deny) is None


@pytest.mark.parametrize(("deny", "words"), [
    (["mxfp8"], "deny fp8 to drop both"),
    (["fp5"], "unknown quantization(s) fp5"),
    (["unknown"], "every floor drops it"),
    (list(quant.QUANTIZATIONS), "no endpoint would be left"),
])
def test_a_floor_no_allow_list_can_say_is_named(deny, words):
    """A member alone, a value outside the enum, or a floor denying everything: the problem in words."""
    assert words in quant.deny_problem(deny)


def test_the_plan_keeps_the_allowed_hosts_and_names_the_ones_left_out_undeclared_apart():
    """Enough allowed hosts: the list stands; fp4, int4, mxfp4 and the undeclared host are left out and named."""
    plan = quant_plan(["fp4", "int4"], hosts(FLEET), list(FLEET), min_hosts=2)
    assert plan.allow == quant.allowed(["fp4", "int4"])
    assert plan.kept == ["a/fp8", "b/bf16"]
    assert plan.left_out == ["c/fp4 (fp4)", "d/int4 (int4)", "e (undeclared)", "f/mx (mxfp4)"]
    assert plan.undeclared == ["e"]
    assert (plan.relaxed, plan.dropped, plan.need) == ([], False, 2)


def test_the_capacity_floor_brings_denied_quantizations_back_most_bits_first():
    """One allowed host left: fp4 (with its family) comes back before int4, and only as far as needed."""
    fleet = {"a/fp8": "fp8", "c/fp4": "fp4", "d/int4": "int4"}
    plan = quant_plan(["fp4", "int4"], hosts(fleet), list(fleet), min_hosts=2)
    assert plan.relaxed == ["fp4", "mxfp4", "nvfp4"]
    assert "int4" not in plan.allow and "fp4" in plan.allow
    assert plan.kept == ["a/fp8", "c/fp4"] and plan.left_out == ["d/int4 (int4)"]


def test_a_member_comes_back_alone_when_only_it_is_needed():
    """An mxfp4 host: mxfp4 comes back, fp4 (which would admit nvfp4 too) stays denied."""
    fleet = {"a/fp8": "fp8", "f/mx": "mxfp4", "c/fp4": "fp4"}
    plan = quant_plan(["fp4"], hosts(fleet), ["a/fp8", "f/mx"], min_hosts=2)
    assert plan.relaxed == ["mxfp4"] and "fp4" not in plan.allow
    assert plan.kept == ["a/fp8", "f/mx"]


def test_when_undeclared_hosts_are_needed_no_allow_list_is_published():
    """Only one declared host allowed and the other needed host declares nothing: no list, every host kept."""
    fleet = {"a/fp8": "fp8", "e": None}
    plan = quant_plan(["fp4"], hosts(fleet), list(fleet), min_hosts=2)
    assert (plan.allow, plan.dropped, plan.kept, plan.left_out) == ([], True, ["a/fp8", "e"], [])


def test_fewer_usable_hosts_than_the_floor_asks_keeps_every_one_of_them():
    """Two usable hosts under a floor of 3: the plan needs both, not three."""
    fleet = {"a/fp8": "fp8", "c/fp4": "fp4"}
    plan = quant_plan(["fp4"], hosts(fleet), list(fleet), min_hosts=3)
    assert plan.need == 2 and plan.kept == ["a/fp8", "c/fp4"] and plan.relaxed == ["fp4", "mxfp4", "nvfp4"]


def test_unknown_endpoints_hold_the_list_back():
    """No listing known: no allow-list (the capacity floor cannot be checked)."""
    plan = quant_plan(["fp4"], [], None, min_hosts=2)
    assert plan.held and plan.allow == []


def test_admits_reads_the_families_and_drops_the_undeclared():
    """fp8 admits mxfp8; an allow-list admits no undeclared endpoint; no list admits every one."""
    assert quant.admits(["fp8"], "MXFP8") and not quant.admits(["fp8"], None)
    assert not quant.admits(["fp8"], "unknown") and quant.admits([], None)


# -- the fold -------------------------------------------------------------------------------------


def test_a_floor_publishes_the_allow_list_and_its_answer_counts_the_undeclared():
    """The command makes a new version whose quantizations are the allow-list; the answer names who is left out."""
    state, effects = run([listed(FLEET), floor("fp4", "int4")])
    snap = last_snapshot(effects)
    assert snap.quantizations == quant.allowed(["fp4", "int4"]) and snap.entries == []
    reply = answer(effects)
    assert isinstance(reply, CommandApplied) and reply.command == "quant-floor"
    assert reply.snapshots[0].quantizations == snap.quantizations
    assert reply.detail.startswith("denies int4, fp4; acme/chat-1: quantizations fp6, int8")
    assert "2 usable host(s) kept (a/fp8, b/bf16)" in reply.detail
    assert any("leaves out 4 usable host(s)" in w and "e (undeclared)" in w for w in reply.warnings)
    assert any(w.startswith("1 of them declare no quantization (e)") for w in reply.warnings)
    assert state.floors[MODEL].deny == ["int4", "fp4"]


def test_a_suspension_that_would_break_the_capacity_floor_brings_a_quantization_back():
    """The floor keeps a/fp8 and b/bf16; a/fp8 is suspended: mxfp4 (4 bits, the last of its bits in the table)
    comes back alone in the next version, logged; fp4 and int4 stay denied."""
    state, effects = run([listed(FLEET), floor("fp4", "int4"), suspend("a/fp8")])
    snap = last_snapshot(effects)
    assert snap.ignore == ["a/fp8"]
    assert snap.quantizations == ["mxfp4", "fp6", "int8", "fp8", "mxfp8", "fp16", "bf16", "fp32"]
    notes = [e for e in effects if getattr(e, "event", "") == "quantization_floor_relaxed"]
    assert notes[-1].fields["warnings"][0] == ("capacity floor: mxfp4 allowed back on acme/chat-1 to keep 2 usable "
                                               "host(s)")


def test_a_new_listing_re_evaluates_the_floor():
    """The floor's kept hosts leave the listing: the next listing alone makes a new, relaxed version."""
    state, effects = run([listed(FLEET), floor("fp4", "int4")])
    before = state.published[MODEL].version
    state, effects = decide(state, listed({"a/fp8": "fp8", "c/fp4": "fp4", "d/int4": "int4"}, minute=30), at(30),
                            POLICY)
    snap = last_snapshot(effects)
    assert snap.version == before + 1 and snap.quantizations == quant.allowed(["int4"])


def test_a_floor_before_any_listing_publishes_no_allow_list_until_one_comes():
    """Endpoints unknown: the answer says the list waits; the first listing publishes it."""
    state, effects = run([Tick(), floor("fp4")])
    assert last_snapshot(effects).quantizations == []  # the Tick's first version; the floor changed nothing yet
    assert "no allow-list yet" in answer(effects).detail
    state, effects = decide(state, listed(FLEET), at(1), POLICY)
    assert last_snapshot(effects).quantizations == quant.allowed(["fp4"])


def test_clearing_the_floor_removes_the_allow_list_and_clearing_none_is_refused():
    """deny empty: the next version has no quantizations; a second clear is refused with no_such_floor."""
    state, effects = run([listed(FLEET), floor("fp4", "int4"), floor(cid="q2")])
    assert last_snapshot(effects).quantizations == [] and MODEL not in state.floors
    assert "no quantization floor" in [e for e in effects if isinstance(e, CommandApplied)][-1].detail
    _, effects = decide(state, floor(cid="q3"), at(1), POLICY)
    assert answer(effects).code == "no_such_floor"


@pytest.mark.parametrize(("command", "code", "words"), [
    (floor("mxfp8"), "invalid_floor", "deny fp8 to drop both"),
    (floor("fp5"), "invalid_floor", "unknown quantization(s) fp5"),
    (floor("fp4", model="typo/model"), "not_watched", "not a watched model"),
])
def test_a_floor_that_cannot_be_applied_is_refused_with_a_reason(command, code, words):
    """Refused, not dead-lettered: the code and the operator's words; the state keeps no floor."""
    state, effects = run([listed(FLEET), command])
    reply = answer(effects)
    assert isinstance(reply, CommandRefused) and reply.code == code and words in reply.reason
    assert state.floors == {}


def test_the_same_floor_twice_is_answered_once():
    """A redelivered command changes nothing and gets no second answer."""
    state, effects = run([listed(FLEET), floor("fp4")])
    again, more = decide(state, floor("fp4"), at(2), POLICY)
    assert more == [] and again is state


def test_a_rebuild_from_the_log_keeps_the_floor_and_follows_its_answer():
    """refold: the floor applied live is applied again (a replay agrees); one refused live stays refused."""
    events = [listed(FLEET), floor("fp4", "int4"), floor("mxfp8", cid="bad")]
    live, effects = run(events)
    answers = [e for e in effects if isinstance(e, CommandApplied | CommandRefused)]
    rebuilt = refold([*events, *answers], POLICY, at(5))
    assert rebuilt.floors == live.floors
    assert diff_layers(rebuilt, live, at(5)) == []
    (line,) = diff_layers(initial(), live, at(5))
    assert line.startswith(f"floor quantization {MODEL}: replay=none live={{'model'") and "'deny': ['int4', 'fp4']" in line


def test_an_answer_says_what_the_capacity_floor_took_back_first():
    """Deny fp8 where fp8 hosts are needed: the answer's first words say it is in force only in part."""
    _, effects = run([listed(FLEET), floor("fp8", "bf16", "fp4", "int4")])
    reply = answer(effects)
    assert isinstance(reply, CommandApplied)
    snap = last_snapshot(effects)
    back = [q for q in ("fp8", "mxfp8", "bf16", "fp4", "mxfp4", "nvfp4", "int4") if q in snap.quantizations]
    assert back, snap.quantizations  # the fleet cannot keep two hosts without one of them
    assert reply.detail.startswith("asked to deny int4, fp4, fp8, bf16: in force with bf16, fp8, mxfp8 allowed back")
    assert "allowed back by the capacity floor" in reply.detail and all(q in reply.detail for q in back)
