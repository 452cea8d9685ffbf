"""The judge's answers to lift and mode (services/judge/core.py): one per command, read back from the states it made."""

from __future__ import annotations

from reverie_canary.services.judge.core import (
    Folder,
    Policy,
    answer,
    command_targets,
    decide,
    fold,
    fold_command,
    mode_of,
    unknown_model,
)
from reverie_canary.shared.contract.commands import LiftSuspension, SetMode
from reverie_canary.shared.contract.events import CommandApplied, CommandRefused, Decision
from tests.judge_events import MODEL, T0, cycle_events, healthy

ENFORCE = Policy(mode="enforce", models=(MODEL,))
OTHER = "acme/chat-2"


def suspended_state():
    out = healthy("a/fp8", "b/fp8", "c/fp8", "d/fp8")
    out["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    states, _ = fold(cycle_events(0, out) + cycle_events(1, out), ENFORCE)
    return states[MODEL]


def lift(provider: str, cid: str = "l1") -> LiftSuspension:
    return LiftSuspension(command_id=cid, actor="alice", at=T0.replace(hour=5), provider=provider, model=MODEL,
                          reason="false alarm")


def mode(cid: str, new: str, kind: str | None = None, model: str = MODEL) -> SetMode:
    return SetMode(command_id=cid, actor="bob", at=T0.replace(hour=6), mode=new, model=model, kind=kind)


def folded(command, policy: Policy = ENFORCE, states=None):
    """Fold ``command`` as the judge does (targets, fold, answer); returns (folder, effects, answer)."""
    folder = Folder(policy, states or {})
    targets, refusal = command_targets(command, policy.models, folder.states)
    if refusal is not None:
        return folder, [], refusal
    made, reply = fold_command(folder, command, targets, targets)
    return folder, [e for t in targets for e in made[t]], reply


def test_a_lift_that_ends_a_suspension_is_applied_with_its_decision():
    """CommandApplied from the judge, at the command's time, carrying the end decision it made."""
    command = lift("a/fp8")
    _, _, reply = folded(command, states={MODEL: suspended_state()})
    assert isinstance(reply, CommandApplied)
    assert (reply.answer_id, reply.service, reply.command, reply.at) == ("answer|l1", "judge", "lift", command.at)
    [made] = reply.decisions
    assert (made.action, made.provider, made.model, made.detail) == ("end", "a/fp8", MODEL,
                                                                     "lifted by alice: false alarm")


def test_a_lift_of_a_provider_that_is_not_suspended_is_refused():
    """Nothing to lift: CommandRefused not_suspended, naming the provider and the model."""
    _, _, reply = folded(lift("b/fp8", cid="l2"), states={MODEL: suspended_state()})
    assert isinstance(reply, CommandRefused)
    assert (reply.code, reply.reason) == ("not_suspended", f"b/fp8 is not suspended on {MODEL}")


def test_a_mode_switch_is_applied_with_its_mode_changed_decision_and_a_repeat_is_not_answered_again():
    """SetMode: applied with the decision; the same command folded again (not new) gets no answer."""
    state = suspended_state()
    command = mode("m1", "observe", kind="ttft")
    state, effects = decide(state, command, ENFORCE)
    reply = answer(command, {MODEL: state}, effects, ENFORCE, new=True)
    assert [d.action for d in reply.decisions] == ["mode_changed"]
    assert reply.decisions[0].detail == "probe kind ttft: enforce -> observe by bob"
    assert reply.detail == (f"now {MODEL}: probe kind ttft observe; 1 suspension(s) in force stay until they end "
                            "or are lifted (canary lift), observe mode changes what the next closes do: a/fp8 until "
                            "2026-11-02T00:40:00Z") and reply.changed
    again, effects = decide(state, command, ENFORCE)
    assert again is state and answer(command, {MODEL: again}, effects, ENFORCE, new=False) is None


def test_a_model_wide_observe_says_the_suspensions_in_force_stay_and_keeps_them():
    """observe for all kinds: a/fp8's suspension is not lifted (the mode decides what a close does, not what is in
    force) and the answer says so, naming it and its end; the router gets no decision for it."""
    state = suspended_state()
    command = mode("m9", "observe")
    state, effects = decide(state, command, ENFORCE)
    reply = answer(command, {MODEL: state}, effects, ENFORCE, new=True)
    assert [d.action for d in effects if isinstance(d, Decision)] == ["mode_changed"]
    assert state.providers["a/fp8"].suspension.enforced and mode_of(state, ENFORCE) == "observe"
    assert reply.detail.endswith("; 1 suspension(s) in force stay until they end or are lifted (canary lift), "
                                 "observe mode changes what the next closes do: a/fp8 until 2026-11-02T00:40:00Z")
    assert reply.detail.startswith(f"now {MODEL}: observe") and reply.changed


def test_enforce_and_an_observe_with_nothing_in_force_name_no_suspension():
    """The note comes only with observe and a suspension in force."""
    _, _, plain = folded(mode("m10", "observe"))
    assert "suspension" not in plain.detail
    state, effects = decide(suspended_state(), mode("m11", "enforce", kind="template"), ENFORCE)
    assert "suspension" not in answer(mode("m11", "enforce", kind="template"), {MODEL: state}, effects, ENFORCE,
                                      new=True).detail


def test_a_command_for_a_model_not_watched_is_refused_by_name():
    """unknown_model lists what the judge watches."""
    command = mode("m2", "enforce", model="nosuch/model")
    reply = unknown_model(command, [MODEL])
    assert (reply.code, reply.model, reply.reason) == (
        "unknown_model", "nosuch/model", f"nosuch/model is not a watched model (watched: {MODEL}); use * for every model")
    assert folded(command)[2] == reply


def test_a_model_wide_enforce_clears_an_earlier_per_kind_observe():
    """mode observe, mode observe --kind ttft, mode enforce: ttft is enforced too, and the answer says so."""
    policy = Policy(mode="observe", models=(MODEL,))
    folder = Folder(policy)
    for command in (mode("a", "observe"), mode("b", "observe", kind="ttft"), mode("c", "enforce")):
        targets, _ = command_targets(command, policy.models, folder.states)
        made, reply = fold_command(folder, command, targets, targets)
    state = folder.state(MODEL)
    assert mode_of(state, policy, "ttft") == "enforce" and state.kind_modes == {}
    [decision] = [e for e in made[MODEL] if isinstance(e, Decision)]
    held = ("template stays observe: a new probe kind keeps observe until an operator switches it "
            "(canary mode enforce --kind template); tools stays observe: a new probe kind keeps observe until an "
            "operator switches it (canary mode enforce --kind tools)")
    assert decision.detail == ("all probe kinds: observe -> enforce but observe on template, tools by bob; "
                               f"per-kind modes cleared: ttft was observe; {held}")
    assert reply.detail == f"now {MODEL}: enforce but observe on template, tools ({held})"
    # a provider failing ttft twice is suspended: enforcement is on for ttft
    out = healthy("a/fp8", "b/fp8", "c/fp8", "d/fp8")
    out["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    for event in cycle_events(0, out) + cycle_events(1, out):
        effects = folder.apply(MODEL, event)
    assert [d.action for d in effects if isinstance(d, Decision)] == ["suspend"]


def test_per_kind_modes_a_model_wide_mode_clears_are_named():
    """enforce --kind ttft on an observed model, then mode enforce: the answer names what it cleared only if it differs."""
    policy = Policy(mode="observe", models=(MODEL,))
    folder = Folder(policy)
    made = {}
    for command in (mode("a", "observe", kind="echo"), mode("b", "enforce", kind="ttft")):
        made, _ = fold_command(folder, command, [MODEL], [MODEL])
    made, reply = fold_command(folder, mode("c", "observe"), [MODEL], [MODEL])
    [decision] = made[MODEL]
    assert decision.detail == ("all probe kinds: observe but enforce on ttft -> observe by bob; "
                               "per-kind modes cleared: ttft was enforce")


def test_a_no_op_mode_command_changes_nothing_and_says_so():
    """enforce on an enforced model: no decision, an answer with changed false that says what the mode is."""
    folder, effects, reply = folded(mode("m3", "enforce", kind="ttft"))
    assert effects == [] and isinstance(reply, CommandApplied)
    assert not reply.changed and reply.decisions == []
    assert reply.detail == f"nothing changed, the mode already was: {MODEL}: probe kind ttft enforce"


def test_a_new_kind_stays_in_observe_on_an_enforced_model_until_an_operator_switches_it():
    """tools observes on an enforce model; mode enforce --kind tools switches it; later model-wide modes carry it."""
    policy = Policy(mode="enforce", models=(MODEL,))
    folder = Folder(policy)
    assert mode_of(folder.state(MODEL), policy, "tools") == "observe"
    _, _, reply = folded(mode("x", "enforce"), policy)
    assert not reply.changed and "tools stays observe" in reply.detail
    fold_command(folder, mode("t", "enforce", kind="tools"), [MODEL], [MODEL])
    assert mode_of(folder.state(MODEL), policy, "tools") == "enforce"
    fold_command(folder, mode("o", "observe"), [MODEL], [MODEL])
    assert mode_of(folder.state(MODEL), policy, "tools") == "observe"
    made, reply = fold_command(folder, mode("e", "enforce"), [MODEL], [MODEL])
    assert mode_of(folder.state(MODEL), policy, "tools") == "enforce"
    # template, the other new kind, still observes: it was never switched
    assert reply.detail == (f"now {MODEL}: enforce but observe on template (template stays observe: a new probe kind "
                            "keeps observe until an operator switches it (canary mode enforce --kind template))")


def test_a_command_for_every_model_is_answered_once_from_each_models_state():
    """mode enforce for *: one answer naming each watched model, one mode_changed decision each."""
    policy = Policy(mode="observe", models=(MODEL, OTHER), new_kind_modes={})
    _, effects, reply = folded(mode("all", "enforce", model="*"), policy)
    assert sorted(d.model for d in reply.decisions) == [MODEL, OTHER]
    assert reply.detail == f"now {MODEL}: enforce; {OTHER}: enforce"
    assert len([e for e in effects if isinstance(e, Decision)]) == 2


def test_a_redelivered_command_gets_no_second_answer():
    """Folded into every model already (no model pending): no effects, no answer."""
    policy = Policy(mode="observe", models=(MODEL,))
    folder = Folder(policy)
    fold_command(folder, mode("r", "enforce"), [MODEL], [MODEL])
    made, reply = fold_command(folder, mode("r", "enforce"), [MODEL], [])
    assert made == {} and reply is None
    made, reply = fold_command(folder, mode("r", "enforce"), [MODEL], [MODEL])  # same id, not pending-filtered
    assert made == {MODEL: []} and reply is None
