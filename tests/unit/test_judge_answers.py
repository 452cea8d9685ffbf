"""The judge's answers to lift and mode (services/judge/answers.py): one per command, from what the fold did."""

from __future__ import annotations

from reverie_canary.services.judge.answers import answer, unknown_model
from reverie_canary.services.judge.core import Policy, decide, fold
from reverie_canary.shared.contract.commands import LiftSuspension, SetMode
from reverie_canary.shared.contract.events import CommandApplied, CommandRefused
from tests.judge_events import MODEL, T0, cycle_events, healthy

ENFORCE = Policy(mode="enforce", models=(MODEL,))


def suspended_state():
    out = healthy("a/fp8", "b/fp8", "c/fp8", "d/fp8")
    out["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    states, _ = fold(cycle_events(0, out) + cycle_events(1, out), ENFORCE)
    return states[MODEL]


def lift(provider: str, cid: str = "l1") -> LiftSuspension:
    return LiftSuspension(command_id=cid, actor="alice", at=T0.replace(hour=5), provider=provider, model=MODEL,
                          reason="false alarm")


def test_a_lift_that_ends_a_suspension_is_applied_with_its_decision():
    """CommandApplied from the judge, at the command's time, carrying the end decision it made."""
    state = suspended_state()
    command = lift("a/fp8")
    _, effects = decide(state, command, ENFORCE)
    reply = answer(command, effects, new=True)
    assert isinstance(reply, CommandApplied)
    assert (reply.answer_id, reply.service, reply.command, reply.at) == ("answer|l1", "judge", "lift", command.at)
    [made] = reply.decisions
    assert (made.action, made.provider, made.model, made.detail) == ("end", "a/fp8", MODEL,
                                                                     "lifted by alice: false alarm")


def test_a_lift_of_a_provider_that_is_not_suspended_is_refused():
    """Nothing to lift: CommandRefused not_suspended, naming the provider and the model."""
    state = suspended_state()
    command = lift("b/fp8", cid="l2")
    _, effects = decide(state, command, ENFORCE)
    reply = answer(command, effects, new=True)
    assert isinstance(reply, CommandRefused)
    assert (reply.code, reply.reason) == ("not_suspended", f"b/fp8 is not suspended on {MODEL}")


def test_a_mode_switch_is_applied_with_its_mode_changed_decision_and_a_repeat_is_not_answered_again():
    """SetMode: applied with the decision; the same command folded again (not new) gets no answer."""
    state = suspended_state()
    command = SetMode(command_id="m1", actor="bob", at=T0.replace(hour=6), mode="observe", model=MODEL, kind="ttft")
    state, effects = decide(state, command, ENFORCE)
    reply = answer(command, effects, new=True)
    assert [d.action for d in reply.decisions] == ["mode_changed"]
    assert reply.decisions[0].detail == "probe kind ttft: enforce -> observe by bob"
    again, effects = decide(state, command, ENFORCE)
    assert again is state and answer(command, effects, new=False) is None


def test_a_command_for_a_model_not_watched_is_refused_by_name():
    """unknown_model lists what the judge watches."""
    command = SetMode(command_id="m2", actor="bob", at=T0, mode="enforce", model="nosuch/model")
    reply = unknown_model(command, [MODEL])
    assert (reply.code, reply.model, reply.reason) == (
        "unknown_model", "nosuch/model", f"nosuch/model is not a watched model (watched: {MODEL}); use * for every model")
