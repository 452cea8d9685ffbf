"""The notifier's pure core: severities, notice identity, folding of persisting states, the delivery schedule."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from reverie_canary.services.notifier.core import (
    APPLIED_ACTIONS,
    DECISION_ACTIONS,
    PERSISTING,
    SEVERITY,
    FoldPolicy,
    FoldState,
    Schedule,
    fold,
    label,
    next_attempt,
    payload,
    snapshot_notice,
    wants,
    webhook_id,
)
from reverie_canary.shared.contract.commands import VERBS
from reverie_canary.shared.contract.events import (
    CommandApplied,
    CommandRefused,
    CycleVerdict,
    Decision,
    FloorBreach,
    ProviderVerdict,
    ResultRef,
    SnapshotVersion,
    make_decision,
)
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot

MODEL = "acme/chat-1.5"
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
CYCLE = timedelta(minutes=30)
SIX_H = FoldPolicy(remind_every_s=6 * 3600)


def cycle_id(n: int) -> str:
    return f"{MODEL}@{(T0 + n * CYCLE).isoformat()}"


def at(n: int) -> datetime:
    """Close of cycle ``n`` (10 minutes after its start)."""
    return T0 + n * CYCLE + timedelta(minutes=10)


def decision(action: str, n: int, provider: str = "p/fp8", *, kind: str | None = None, v: int = 1, **kw) -> Decision:
    return make_decision(v=v, at=kw.pop("when", at(n)), decision_id=f"dec|{MODEL}|{provider or '*'}|{action}|{n}",
                    model=MODEL, provider=provider, action=action, kind=kind, cycles=[cycle_id(n)], **kw)


def verdict(n: int, verdicts: dict[str, str], *, pins: set[str] = frozenset(), unproven=(), common=()) -> CycleVerdict:
    out = []
    for provider, v in sorted(verdicts.items()):
        reason = "pin_violated" if provider in pins else ""
        out.append(ProviderVerdict(provider=provider, verdict=v, results=[
            ResultRef(task_id=f"t{n}{provider}", cycle=cycle_id(n), kind="ttft", outcome="pass", reason=reason)]))
    return CycleVerdict(at=at(n), model=MODEL, cycle=cycle_id(n), cycle_no=n, verdicts=out, unproven=list(unproven),
                        common_mode=list(common))


def run(events, policy: FoldPolicy = SIX_H, state: FoldState | None = None):
    state = state or FoldState()
    notices = []
    for e in events:
        state, out = fold(state, e, policy)
        notices += out
    return state, notices


def test_every_decision_action_and_command_has_one_severity():
    """The severity table names every decision action the judge can publish and every command notice."""
    missing = [a for a in DECISION_ACTIONS if a not in SEVERITY]
    assert missing == []
    assert sorted(APPLIED_ACTIONS) == sorted(VERBS.values())
    assert all(action in SEVERITY for action in APPLIED_ACTIONS.values())
    assert set(SEVERITY.values()) <= {"info", "warning", "critical"}
    assert (SEVERITY["suspend"], SEVERITY["floor_held"], SEVERITY["would_suspend"]) == ("critical", "critical", "info")
    assert SEVERITY["canary_blind"] == SEVERITY["canary_sees"] == "critical"


def test_channel_minimum_severity():
    """A channel gets notices at or above its minimum, nothing below."""
    assert [wants("warning", s) for s in ("info", "warning", "critical")] == [False, True, True]
    assert [wants("critical", s) for s in ("info", "warning", "critical")] == [False, False, True]
    assert all(wants("info", s) for s in ("info", "warning", "critical"))


def test_a_decision_is_one_notice_keyed_by_its_id_whatever_the_schema_version():
    """A suspend is one critical notice whose id is the decision id; a v2 copy of it has the same id and content."""
    d1 = decision("suspend", 3, until=at(3) + timedelta(days=1), ladder_level=1, reason="failed_cycles")
    d2 = msgspec.structs.replace(d1, v=2)
    _, first = run([d1])
    _, second = run([d2])
    assert [(n.notice_id, n.severity, n.action, n.phase) for n in first] == [
        (d1.decision_id, "critical", "suspend", "notice")]
    assert second == first
    assert webhook_id("canary", first[0].notice_id) == webhook_id("canary", second[0].notice_id)


def test_webhook_id_is_stable_and_has_no_dot():
    """The webhook-id is msg_ + 32 hex digits of the namespace and notice id (the signature scheme forbids dots)."""
    wid = webhook_id("canary", f"dec|{MODEL}|p/fp8|suspend|3")
    assert wid.startswith("msg_") and len(wid) == 36 and "." not in wid
    assert wid == webhook_id("canary", f"dec|{MODEL}|p/fp8|suspend|3") != webhook_id(
        "canary", f"dec|{MODEL}|p/fp8|suspend|4")


def test_webhook_id_differs_between_deployments_for_the_same_notice():
    """prod and staging (two namespaces) send different webhook-ids for the same decision; one namespace, one id."""
    nid = f"dec|{MODEL}|p/fp8|suspend|3"
    assert webhook_id("prod", nid) != webhook_id("staging", nid)
    assert webhook_id("prod", nid) == webhook_id("prod", nid)
    assert webhook_id("a|b", "c") != webhook_id("a", "b|c")  # no join that two pairs share


def snap(version: int, at_: datetime, entries: list | None = None) -> IgnoreSnapshot:
    return IgnoreSnapshot(at=at_, model=MODEL, version=version, entries=entries or [])


def test_a_redeploys_ignore_list_version_1_is_a_new_notice():
    """Versions start at 1 again after a redeploy: that version 1 (a later at) is a new notice and webhook-id,
    while a redelivery of the same version (same at) keeps its id."""
    first, again = snap(1, at(1)), snap(1, at(1))
    redeployed = snap(1, at(40))
    a, b, c = (snapshot_notice(s) for s in (first, again, redeployed))
    assert a.notice_id == b.notice_id == f"snap|{MODEL}|1|2026-11-01T00:40:00.000000Z"
    assert c.notice_id != a.notice_id and webhook_id("canary", c.notice_id) != webhook_id("canary", a.notice_id)


def failing(n: int) -> list:
    """Cycle ``n`` of a provider that keeps failing while the floor holds: its verdict, then the judge's floor_held."""
    return [verdict(n, {"p/fp8": "failed", "q/fp8": "passed"}), decision("floor_held", n, reason="capacity_floor")]


def test_floor_held_for_twenty_cycles_is_one_start_reminders_every_six_hours_and_one_end():
    """20 failed cycles under the floor (30 min apart): one start, reminders at 6 h and 12 h... , one end."""
    events = [e for n in range(1, 21) for e in failing(n)] + [verdict(21, {"p/fp8": "passed", "q/fp8": "passed"})]
    state, notices = run(events, FoldPolicy(remind_every_s=2 * 3600))
    phases = [(n.phase, n.count) for n in notices]
    # cycles 1..20: start at 1; 2 h = 4 cycles: reminders at cycles 5, 9, 13, 17; end at 21
    assert phases == [("start", 1), ("reminder", 5), ("reminder", 9), ("reminder", 13), ("reminder", 17), ("end", 20)]
    assert {n.action for n in notices} == {"floor_held"}
    assert {n.severity for n in notices} == {"critical"}
    assert notices[0].notice_id == f"dec|{MODEL}|p/fp8|floor_held|1"
    assert [n.notice_id for n in notices[1:]] == [f"remind|dec|{MODEL}|p/fp8|floor_held|1|{k}" for k in (1, 2, 3, 4)] \
        + [f"end|dec|{MODEL}|p/fp8|floor_held|1"]
    assert notices[-1].since == at(1) and notices[-1].at == at(21) and "passed a cycle" in notices[-1].text
    assert [label(n) for n in notices] == ["floor_held"] + ["floor_held_reminder"] * 4 + ["floor_held_ended"]
    assert state.held == {}


def test_default_reminder_interval_is_six_hours():
    """At the default 6 h, 20 cycles of 30 min give one reminder (at cycle 13)."""
    _, notices = run([e for n in range(1, 21) for e in failing(n)])
    assert [(n.phase, n.count) for n in notices] == [("start", 1), ("reminder", 13)]


def test_frozen_cycles_keep_a_floor_held_and_a_suspension_ends_it():
    """Frozen verdicts keep floor_held alive; the suspend that follows is its own notice plus the floor_held end."""
    events = failing(1) + [verdict(2, {"p/fp8": "frozen", "q/fp8": "passed"})] + failing(3) + [
        verdict(4, {"p/fp8": "failed", "q/fp8": "passed"}), decision("suspend", 4, reason="failed_cycles",
                                                                      until=at(4) + timedelta(days=1))]
    state, notices = run(events)
    assert [(label(n), n.phase, n.count) for n in notices] == [
        ("floor_held", "start", 1), ("suspend", "notice", 1), ("floor_held_ended", "end", 4)]
    assert notices[2].reason.startswith("suspend") and state.held == {}


def test_a_redelivered_or_late_decision_changes_nothing():
    """The same floor_held twice in one cycle counts once; a late copy after the state ended starts nothing."""
    events = failing(1) + failing(2) + [decision("floor_held", 2, reason="capacity_floor", v=2)]
    state, notices = run(events)
    assert [(n.phase, n.count) for n in notices] == [("start", 1)]
    assert state.held[f"floor_held|{MODEL}|p/fp8|"].count == 2
    state, ended = run([verdict(3, {"p/fp8": "passed", "q/fp8": "passed"})], state=state)
    assert [n.phase for n in ended] == ["end"]
    late_state, late = run([decision("floor_held", 2, reason="capacity_floor", v=2)], state=state)
    assert late == [] and late_state is state
    stale_state, stale = run([verdict(2, {"p/fp8": "failed", "q/fp8": "passed"})], state=state)
    assert stale == [] and stale_state is state


def test_a_long_pause_gives_one_reminder_not_a_burst():
    """After 2 days without cycles (services stopped), the next cycle gives one reminder."""
    state, notices = run(failing(1))
    state, out = run(failing(100), state=state)
    assert [(n.phase, n.count) for n in out] == [("reminder", 2)]
    assert out[0].notice_id.endswith("|floor_held|1|8")  # 99 cycles = 49.5 h: the 8th six-hour mark, once


def test_pin_violated_starts_renews_and_ends_when_served_by_the_pinned_provider():
    """pin_violated: one start, renewed by verdicts naming it, ended by a verdict without it."""
    events = []
    for n in range(1, 4):
        events += [verdict(n, {"p/fp8": "frozen"}, pins={"p/fp8"}), decision("pin_violated", n, reason="pin_violated")]
    events.append(verdict(4, {"p/fp8": "passed"}))
    _, notices = run(events)
    assert [(label(n), n.count, n.severity) for n in notices] == [
        ("pin_violated", 1, "warning"), ("pin_violated_ended", 3, "warning")]


def test_unjudgeable_lasts_while_frozen_and_ends_when_judged():
    """unjudgeable: frozen verdicts renew it; a failed verdict ends it; a vanished provider ends it too."""
    events = [decision("unjudgeable", 6, reason="frozen_too_long")] + [
        verdict(n, {"p/fp8": "frozen", "q/fp8": "passed"}) for n in range(7, 10)] + [
        verdict(10, {"p/fp8": "failed", "q/fp8": "passed"})]
    _, notices = run(events)
    assert [(label(n), n.count) for n in notices] == [("unjudgeable", 1), ("unjudgeable_ended", 4)]
    assert "judged again: failed" in notices[-1].text
    _, blind = run([decision("unjudgeable", 6), verdict(7, {"p/fp8": "blind"}), verdict(8, {"p/fp8": "frozen"})])
    assert [(label(n), n.count) for n in blind] == [("unjudgeable", 1)]  # a blind cycle neither ends nor counts
    _, gone = run([decision("unjudgeable", 6), verdict(7, {"q/fp8": "passed"})])
    assert [label(n) for n in gone] == ["unjudgeable", "unjudgeable_ended"] and "no longer probed" in gone[-1].text


def test_control_passed_and_common_mode_fold_per_probe_kind():
    """Model-wide states are held per kind: refusal and ttft fold apart, each ends when its kind counts again."""
    events = []
    for n in (1, 2, 3):
        events.append(verdict(n, {"p/fp8": "frozen"}, unproven=["refusal"], common=["ttft"] if n < 3 else []))
        events.append(decision("control_passed", n, provider="", kind="refusal"))
        if n < 3:
            events.append(decision("common_mode", n, provider="", kind="ttft"))
    events.append(verdict(4, {"p/fp8": "passed"}))
    _, notices = run(events)
    assert [(label(n), n.kind, n.count) for n in notices] == [
        ("control_passed", "refusal", 1), ("common_mode", "ttft", 1), ("common_mode_ended", "ttft", 2),
        ("control_passed_ended", "refusal", 3)]


def test_canary_blind_is_told_once_and_canary_sees_is_its_end():
    """canary_blind: one critical start; the cycles while blind are counted; canary_sees ends it as its own notice."""
    blind = decision("canary_blind", 3, provider="", reason="http_401")
    events = [blind, verdict(4, {"p/fp8": "frozen"}), verdict(5, {"p/fp8": "frozen"}),
              decision("canary_blind", 5, provider="", reason="http_401"),
              decision("canary_sees", 6, provider="", reason="gateway_answers")]
    state, notices = run(events)
    assert [(label(n), n.phase, n.severity, n.count) for n in notices] == [
        ("canary_blind", "start", "critical", 1), ("canary_sees", "end", "critical", 3)]
    assert notices[1].notice_id == f"dec|{MODEL}|*|canary_sees|6" and notices[1].since == blind.at
    assert state.held == {}
    assert PERSISTING["canary_blind"].own_end


def answer(cls, command_id: str, command: str = "override-add", **kw):
    return cls(at=T0, answer_id=f"answer|{command_id}", command_id=command_id, command=command, service="router",
               actor="alice", model=MODEL, provider="p/fp8", **kw)


def test_operator_commands_are_told_by_their_answer_keyed_by_the_command_id():
    """Applied, refused and forced-past-the-floor answers: one notice each, keyed cmd|<command id>, naming the actor."""
    applied = answer(CommandApplied, "c-1", snapshots=[SnapshotVersion(model=MODEL, version=4, ignore=["p/fp8"])])
    refused = answer(CommandRefused, "c-2", code="unknown_provider", reason="the gateway lists no p/fp9",
                     force_applies=True)
    broken = answer(CommandApplied, "c-3", forced=True, warnings=["only 1 usable host would remain"],
                    floor_broken=[FloorBreach(model=MODEL, min_hosts=2, usable=["q/fp8"])])
    lift = answer(CommandApplied, "c-4", command="lift")
    _, notices = run([applied, refused, broken, lift, applied])
    assert [(n.notice_id, n.action, n.severity, n.actor) for n in notices] == [
        ("cmd|c-1", "override_added", "warning", "alice"), ("cmd|c-2", "command_refused", "warning", "alice"),
        ("cmd|c-3", "floor_broken_by_operator", "critical", "alice"), ("cmd|c-4", "suspension_lifted", "info", "alice"),
        ("cmd|c-1", "override_added", "warning", "alice")]
    assert "ignore list v4: p/fp8" in notices[0].text
    assert "(unknown_provider)" in notices[1].text and "--force would apply it" in notices[1].text
    assert "CAPACITY FLOOR BROKEN by an operator" in notices[2].text and "q/fp8" in notices[2].text


def test_a_mode_change_is_one_notice_and_a_no_op_is_none():
    """mode enforce for two models: their mode_changed decisions are not told, the answer is (warning); a no-op is silent."""
    made = [decision("mode_changed", 0, "", reason="operator", actor="alice", when=T0),
            make_decision(at=T0, decision_id="dec|other|*|mode_changed|c-5", model="other/model", action="mode_changed",
                     reason="operator", actor="alice")]
    applied = answer(CommandApplied, "c-5", command="mode", detail="now acme/chat-1.5: enforce; other/model: enforce")
    noop = answer(CommandApplied, "c-6", command="mode", changed=False,
                  detail="nothing changed, the mode already was: acme/chat-1.5: enforce")
    _, notices = run([*made, applied, noop])
    assert [(n.notice_id, n.action, n.severity) for n in notices] == [("cmd|c-5", "mode_set", "warning")]
    assert "now acme/chat-1.5: enforce; other/model: enforce" in notices[0].text


def test_webhook_payload_shape():
    """The signed body is Standard Webhooks' {type, timestamp, data} with the notice's fields."""
    _, (n,) = run([decision("suspend", 3, reason="failed_cycles", until=at(3) + timedelta(days=1))])
    body = payload(n, "prod")
    assert body["type"] == "canary.notice" and body["timestamp"] == "2026-11-01T01:40:00Z"
    assert body["data"]["id"] == n.notice_id and body["data"]["webhook_id"] == webhook_id("prod", n.notice_id)
    assert body["data"]["namespace"] == "prod"
    assert (body["data"]["severity"], body["data"]["action"], body["data"]["provider"]) == ("critical", "suspend",
                                                                                           "p/fp8")


SCHEDULE = Schedule(base_s=5.0, max_delay_s=600.0, give_up_s=86400.0)


@pytest.mark.parametrize(("failures", "ceiling"), [(1, 5.0), (2, 10.0), (3, 20.0), (7, 320.0), (8, 600.0),
                                                   (40, 600.0), (500, 600.0)])
def test_backoff_ceiling_doubles_up_to_the_max(failures, ceiling):
    """Full jitter: the delay spans [0, min(max, base * 2**(n-1))]."""
    now = 1000.0
    assert next_attempt(SCHEDULE, failures, 900.0, now, 0.0) == now
    assert next_attempt(SCHEDULE, failures, 900.0, now, 0.5) == pytest.approx(now + ceiling / 2)
    assert next_attempt(SCHEDULE, failures, 900.0, now, 0.999999) == pytest.approx(now + ceiling, abs=1e-3)


def test_the_schedule_gives_up_at_its_horizon():
    """The last attempt is at first + give_up_s; after it the notice is dead-lettered (None)."""
    first = 0.0
    assert next_attempt(SCHEDULE, 100, first, 86000.0, 0.99) == 86400.0
    assert next_attempt(SCHEDULE, 101, first, 86400.0, 0.5) is None
    assert next_attempt(SCHEDULE, 1, first, 90000.0, 0.0) is None


def test_a_day_of_full_jitter_makes_hundreds_of_attempts():
    """Over 24 h with a 10-minute cap the schedule tries a few hundred times, then stops."""
    import random

    rng = random.Random(7)
    now, attempts = 0.0, 0
    while True:
        attempts += 1
        due = next_attempt(SCHEDULE, attempts, 0.0, now, rng.random())
        if due is None:
            break
        assert due >= now
        now = due
    assert 200 < attempts < 400
    assert now == pytest.approx(86400.0)


def test_a_blind_cycle_keeps_every_persisting_state_as_it_was():
    """Unplanned (all blind) verdicts neither count nor end floor_held, pin_violated, control_passed, common_mode."""
    events = [decision("floor_held", 1), decision("pin_violated", 1, provider="q/fp8"),
              decision("control_passed", 1, provider="", kind="refusal"),
              decision("common_mode", 1, provider="", kind="ttft")]
    events += [verdict(n, {"p/fp8": "blind", "q/fp8": "blind"}) for n in (2, 3, 4)]
    state, notices = run(events)
    assert [label(n) for n in notices] == ["floor_held", "pin_violated", "control_passed", "common_mode"]
    assert sorted(h.count for h in state.held.values()) == [1, 1, 1, 1]


def test_a_suspension_held_while_blind_is_told_once_and_ends_with_the_suspension():
    """suspension_held each blind cycle: one warning start, counted, and the judge's end is its end notice."""
    events = [decision("canary_blind", 3, provider="", reason="gateway_auth"),
              decision("suspension_held", 3, reason="canary_blind", until=at(5)), verdict(3, {"p/fp8": "blind"}),
              decision("suspension_held", 4, reason="canary_blind", until=at(6)), verdict(4, {"p/fp8": "blind"}),
              decision("end", 5, reason="expired"), decision("canary_sees", 5, provider="", reason="judged_again"),
              verdict(5, {"p/fp8": "passed"})]
    state, notices = run(events)
    assert [(label(n), n.phase, n.severity) for n in notices] == [
        ("canary_blind", "start", "critical"), ("suspension_held", "start", "warning"),
        ("end", "end", "warning"), ("canary_sees", "end", "critical")]
    assert notices[2].count == 2 and state.held == {}


# -- discovery's sizing: a cycle that cannot fit is told before it runs -----------


def sized_event(n: int, fits: bool, *, v: int = 1):
    from reverie_canary.shared.contract.events import CycleSized

    start = T0 + n * CYCLE
    return CycleSized(v=v, at=start, cycle_no=n, deadline=start + timedelta(minutes=10), models=100, probes=12000,
                      probe_s={"ttft": 1.4, "language": 2.2}, basis="measured", work_s=20000.0, tail_s=2.2,
                      window_s=600.0, target_s=150.0, probers=2, ceiling=16, needed=136, per_prober=16, in_flight=32,
                      expected_wall_s=627.2 if not fits else 149.3, fits=fits)


def test_a_cycle_that_cannot_fit_is_told_once_at_its_start_reminded_and_ended_by_one_that_fits():
    state, notices = fold(FoldState(), sized_event(1, fits=True), SIX_H)
    assert notices == [] and state.held == {}  # a cycle that fits says nothing
    state, notices = fold(state, sized_event(2, fits=False), SIX_H)
    [start] = notices
    assert (start.action, start.phase, start.severity, start.model) == ("cycle_does_not_fit", "start", "warning", "*")
    assert start.at == T0 + 2 * CYCLE  # the cycle's start: before any of its probes ran
    assert "12000 probes" in start.text and "136 in flight" in start.text and "627.2 s" in start.text
    assert "start more probers" in start.text
    again, notices = fold(state, sized_event(2, fits=False, v=1), SIX_H)
    assert notices == [] and again == state  # a redelivery
    for n in range(3, 16):  # six hours after cycle 2's start: one reminder, at cycle 14
        state, notices = fold(state, sized_event(n, fits=False), SIX_H)
        assert [x.phase for x in notices] == (["reminder"] if n == 14 else []), n
    # a cycle verdict says nothing of it
    state2, notices = fold(state, verdict(13, {"p/fp8": "frozen"}), SIX_H)
    assert notices == [] and "cycle_does_not_fit|*|*|" in state2.held
    state, notices = fold(state, sized_event(16, fits=True), SIX_H)
    [end] = notices
    assert (end.action, end.phase, end.count) == ("cycle_does_not_fit", "end", 14)
    assert "cycle 16 fits" in end.text and state.held == {}
    assert SEVERITY["cycle_does_not_fit"] == "warning" and "cycle_does_not_fit" in PERSISTING


def held_snapshot(version: int, until_: datetime, *, layers=("suspension",), extra: str = "") -> IgnoreSnapshot:
    entries = [IgnoreEntry(provider="p/fp8", reasons=[IgnoreReason(layer=layer, reason=f"held while blind{extra}",
                                                                   until=until_) for layer in layers])]
    return snap(version, at(version), entries)


def test_ignore_list_changed_only_when_the_ignored_set_or_its_layers_change():
    """Blind cycles move a held suspension's end in every version: no notice; another provider or layer: a notice."""
    versions = [held_snapshot(1, at(3))]
    versions += [held_snapshot(v, at(v + 2), extra=f" ({v})") for v in range(2, 8)]  # only the end (and text) moves
    versions.append(held_snapshot(8, at(12), layers=("suspension", "override")))     # an operator override joins
    versions.append(held_snapshot(9, at(13), layers=("suspension", "override")))     # the end moves again
    versions.append(snap(10, at(10)))                                                  # the provider comes back
    state, notices = run(versions)
    assert [(n.action, n.title) for n in notices] == [
        ("ignore_list_changed", f"[{MODEL}] ignore list v1: p/fp8"),
        ("ignore_list_changed", f"[{MODEL}] ignore list v8: p/fp8"),
        ("ignore_list_changed", f"[{MODEL}] ignore list v10: (empty)")]
    assert state.ignored == {MODEL: []}
    assert fold(state, snap(11, at(11)), SIX_H) == (state, [])  # the same empty list again: nothing changed


def test_a_quantization_allow_list_that_changes_is_told():
    """The floor's allow-list appears, widens (the capacity floor) and goes: each is told, with the list."""
    floor = msgspec.structs.replace(snap(2, at(2)), quantizations=["fp8", "bf16"])
    wider = msgspec.structs.replace(snap(3, at(3)), quantizations=["fp4", "fp8", "bf16"])
    _, notices = run([snap(1, at(1)), floor, msgspec.structs.replace(floor, version=3, at=at(3)), wider,
                      snap(5, at(5))])
    assert [n.title for n in notices] == [
        f"[{MODEL}] ignore list v1: (empty)", f"[{MODEL}] ignore list v2: (empty); quantizations fp8, bf16",
        f"[{MODEL}] ignore list v3: (empty); quantizations fp4, fp8, bf16", f"[{MODEL}] ignore list v5: (empty)"]


def test_ignore_list_versions_are_told_per_model():
    """Each model's list is compared with that model's last told one."""
    other = IgnoreSnapshot(at=at(1), model="other/m", version=1, entries=[])
    _, notices = run([snap(1, at(1)), other, snap(2, at(2)), msgspec.structs.replace(other, version=2)])
    assert [(n.model, n.title.split(": ")[0]) for n in notices] == [(MODEL, f"[{MODEL}] ignore list v1"),
                                                                    ("other/m", "[other/m] ignore list v1")]


def test_a_webhook_type_names_the_phase_of_a_persisting_state_and_never_stutters():
    """type: canary.notice for a one-off notice, canary.notice.start|reminder|end for a persisting state's phases."""
    import msgspec

    _, (n,) = run([decision("suspend", 3, reason="failed_cycles", until=at(3) + timedelta(days=1))])
    types = {phase: payload(msgspec.structs.replace(n, phase=phase), "prod")["type"]
             for phase in ("notice", "start", "reminder", "end")}
    assert types == {"notice": "canary.notice", "start": "canary.notice.start", "reminder": "canary.notice.reminder",
                     "end": "canary.notice.end"}
