"""The router's pure fold: every rule of services/router/core.py, its answers and its guard rails.

docs/concepts/routing.md and docs/concepts/messages.md ("Operator commands are answered by
events"): the guard rails, and nothing expired is kept, not even by a rebuild.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.services.router.core import (
    LAPSED_SUSPENSION_S,
    Exclusion,
    ExclusionsRead,
    KvSeen,
    Published,
    RouterPolicy,
    SnapshotMade,
    Tick,
    active_suspensions,
    decide,
    diff_layers,
    entries_digest,
    initial,
    merge,
    override_key,
    refold,
    snapshot_entries,
    suspension_key,
)
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.commands import AddOverride, ReloadExclusions, RemoveOverride
from reverie_canary.shared.contract.errors import Undecodable
from reverie_canary.shared.contract.events import (
    DECISION_TYPES,
    CommandApplied,
    CommandRefused,
    Decision,
    Endpoint,
    EndpointsDiscovered,
    FloorBreach,
    PlannedProbe,
    SnapshotVersion,
    TimedDecision,
    make_decision,
)

MODEL = "acme/chat-1"
OTHER = "acme/chat-2"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
POLICY = RouterPolicy(models=(MODEL, OTHER), min_hosts=2)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def add(provider: str, *, model: str = MODEL, cid: str = "c1", minute: float = 0, until: datetime | None = None,
        force: bool = False) -> AddOverride:
    return AddOverride(command_id=cid, actor="alice", at=at(minute), provider=provider, model=model,
                       reason="incident 42", expires_at=until, force=force)


def remove(provider: str, *, model: str = MODEL, cid: str = "r1", minute: float = 0) -> RemoveOverride:
    return RemoveOverride(command_id=cid, actor="alice", at=at(minute), provider=provider, model=model)


def suspend(provider: str, *, minute: float = 0, days: float = 1, did: str = "d1") -> Decision:
    return make_decision(at=at(minute), decision_id=did, model=MODEL, provider=provider, action="suspend",
                    until=at(minute) + timedelta(days=days), reason="failed_cycles", detail="ttft in 2 cycles")


def end(provider: str, *, minute: float = 0, did: str = "e1") -> Decision:
    return make_decision(at=at(minute), decision_id=did, model=MODEL, provider=provider, action="end", reason="lifted")


def listed(*providers: str, model: str = MODEL, control: str = "", minute: float = 0) -> EndpointsDiscovered:
    """Discovery listed these endpoints (display name: the base slug title-cased)."""
    endpoints = [Endpoint(provider=p, provider_name=p.split("/")[0].title()) for p in providers]
    planned = [PlannedProbe(task_id="ctl", provider=control, kind="refusal", control=True)] if control else []
    if control:
        endpoints.append(Endpoint(provider=control, provider_name="Control"))
    return EndpointsDiscovered(at=at(minute), model=model, cycle=f"{model}@c", cycle_no=1, deadline=at(minute + 10),
                               endpoints=endpoints, planned=planned)


def run(events, policy: RouterPolicy = POLICY, state=None, *, start: float = 0):
    """Apply events one after another, each at its minute (``start`` + index / 100); the state and all effects."""
    state = state or initial()
    effects = []
    for i, event in enumerate(events):
        state, produced = decide(state, event, at(start + i / 100), policy)
        effects += produced
    return state, effects


def answers(effects) -> list:
    return [e for e in effects if isinstance(e, CommandApplied | CommandRefused)]


def made(effects) -> list:
    return [e.snapshot for e in effects if isinstance(e, SnapshotMade)]


def snapshots(effects, model: str = MODEL) -> list:
    return [e.snapshot for e in effects if isinstance(e, SnapshotMade) and e.snapshot.model == model]


# -- the layers and their snapshots ------------------------------------------------------------


def test_a_suspend_decision_enters_the_suspension_layer_and_an_end_removes_it():
    """suspend: the provider is in the next version with its until and decision id; end: the version after drops it."""
    state, effects = run([Tick(), suspend("bad/fp8"), end("bad/fp8", minute=1)])
    first, second, third = snapshots(effects)
    assert (first.version, first.entries) == (1, [])
    assert second.version == 2 and second.ignore == ["bad/fp8"]
    (reason,) = second.entries[0].reasons
    assert (reason.layer, reason.until, reason.reference, reason.reason) == (
        "suspension", at(0) + timedelta(days=1), "d1", "ttft in 2 cycles")
    assert third.version == 3 and third.entries == []
    assert active_suspensions(state, at(1)) == {} and state.suspensions == {}  # ended, not lapsed: gone


def test_a_closes_routing_decisions_make_one_version_after_the_last():
    """Three suspensions of one close (routing_follows 2, 1, 0): one new version holding all three."""
    import msgspec

    close = [msgspec.structs.replace(suspend(p, did=f"d{i}"), routing_follows=2 - i)
             for i, p in enumerate(("a/fp8", "b/fp8", "c/fp8"))]
    state, effects = run([Tick(), *close])
    first, second = snapshots(effects)
    assert (first.version, second.version, second.ignore) == (1, 2, ["a/fp8", "b/fp8", "c/fp8"])
    # the close's last decision never came (dead-lettered): the timer publishes what the others changed
    state, effects = run([Tick(), *close[:2], Tick()])
    assert [(s.version, s.ignore) for s in snapshots(effects)] == [(1, []), (2, ["a/fp8", "b/fp8"])]


def held(provider: str, *, minute: float, until: datetime, mode: str = "enforce", did: str = "h1") -> Decision:
    return make_decision(at=at(minute), decision_id=did, model=MODEL, provider=provider, action="suspension_held",
                    until=until, reason="canary_blind", mode=mode, detail="came due while blind")


def test_a_held_suspension_stays_on_the_ignore_list_past_its_first_until():
    """suspension_held moves the until (the snapshot says the new one); one that lapsed here first comes back."""
    state, effects = run([Tick(), suspend("bad/fp8", days=1 / 48, did="d1")])  # until minute 30
    state, effects = decide(state, held("bad/fp8", minute=20, until=at(80)), at(20), POLICY)
    [snap] = snapshots(effects)
    assert snap.ignore == ["bad/fp8"] and snap.entries[0].reasons[0].until == at(80)
    assert snap.entries[0].reasons[0].reference == "d1"  # still the suspension it was
    state, effects = decide(state, Tick(), at(31), POLICY)
    assert snapshots(effects) == [] and suspension_key(MODEL, "bad/fp8") in state.suspensions
    # a hold that reaches the router after its own expiry put the provider back: out of traffic again,
    # the suspension as it was (d1's), exactly as a replay that applies the hold at its own time has it
    lapsed, effects = decide(state, Tick(), at(81), POLICY)
    assert active_suspensions(lapsed, at(81)) == {} and snapshots(effects)[-1].ignore == []
    again, effects = decide(lapsed, held("bad/fp8", minute=80.5, until=at(140), did="h2"), at(82), POLICY)
    [snap] = snapshots(effects)
    assert snap.ignore == ["bad/fp8"] and snap.entries[0].reasons[0].reference == "d1"
    assert snap.entries[0].reasons[0].until == at(140)
    # observe mode's hold of a shadow suspension never touches routing
    shadow, effects = decide(lapsed, held("bad/fp8", minute=82, until=at(140), mode="observe"), at(82), POLICY)
    assert shadow is lapsed and effects == []


def test_observe_mode_decisions_never_touch_routing():
    """would_suspend, floor_held and the other actions change neither the state nor the snapshot."""
    state, _ = run([Tick()])
    for action in ("would_suspend", "would_end", "floor_held", "unjudgeable", "mode_changed", "canary_blind",
                   "canary_sees"):
        until = {"until": at(100)} if issubclass(DECISION_TYPES[action], TimedDecision) else {}
        d = make_decision(at=at(1), decision_id=f"x-{action}", model=MODEL, provider="a/fp8", action=action,
                          **until)
        after, effects = decide(state, d, at(1), POLICY)
        assert after is state and effects == []


def test_a_suspend_without_until_is_invalid_and_changes_nothing():
    """A suspend decision must say until when: refused (the shell dead-letters it), state as it was.

    The type says it now: a suspension without ``until`` cannot be built, and its bytes are
    refused at decoding (``Undecodable``: the shell dead-letters it), so the fold never sees it.
    """
    broken = codec.encode(make_decision(at=at(1), decision_id="d9", model=MODEL, provider="a/fp8",
                                        action="end")).replace(b'"action":"end"', b'"action":"suspend"')
    with pytest.raises(Undecodable, match=r"Object missing required field `until`"):
        codec.DECISION.decode(broken)
    with pytest.raises(TypeError, match="until"):
        make_decision(at=at(1), decision_id="d9", model=MODEL, provider="a/fp8", action="suspend")


def test_an_end_older_than_the_suspension_it_would_end_does_not_end_it():
    """An end stamped before a suspension started belongs to an earlier one: the suspension stays."""
    state, _ = run([suspend("bad/fp8", minute=10, did="d2")])
    after, effects = decide(state, end("bad/fp8", minute=5), at(11), POLICY)
    assert suspension_key(MODEL, "bad/fp8") in after.suspensions and snapshots(effects) == []


def test_expired_entries_leave_the_state_and_the_timer_publishes_the_new_list():
    """A tick past an override's and a suspension's until drops both from the state and publishes once."""
    state, effects = run([Tick(), add("lambda/fp8", until=at(30)), suspend("bad/fp8", days=1 / 48)])
    assert snapshots(effects)[-1].ignore == ["bad/fp8", "lambda/fp8"]
    state, effects = decide(state, Tick(), at(31), POLICY)
    assert state.overrides == {} and active_suspensions(state, at(31)) == {}
    [snap] = snapshots(effects)
    assert snap.entries == [] and snap.version == 4 and snap.at == at(31)
    # the lapsed suspension stays (out of every merge) for LAPSED_SUSPENSION_S, then leaves the state
    assert list(state.suspensions) == [suspension_key(MODEL, "bad/fp8")]
    later, effects = decide(state, Tick(), at(30) + timedelta(seconds=LAPSED_SUSPENSION_S + 1), POLICY)
    assert later.suspensions == {} and snapshots(effects) == []
    again, effects = decide(state, Tick(), at(32), POLICY)
    assert again is state and effects == []


def test_versions_go_up_by_one_per_change_per_model_and_a_star_override_changes_every_model():
    """An override for * makes one new version of each model; the answer lists both."""
    state, effects = run([Tick(), add("lambda/fp8", model="*")])
    assert [s.version for s in snapshots(effects)] == [1, 2]
    assert [s.version for s in snapshots(effects, OTHER)] == [1, 2]
    [answer] = answers(effects)
    assert answer.snapshots == [SnapshotVersion(model=MODEL, version=2, ignore=["lambda/fp8"], ignored=1),
                                SnapshotVersion(model=OTHER, version=2, ignore=["lambda/fp8"], ignored=1)]


# -- answers -----------------------------------------------------------------------------------------


def test_an_applied_override_is_answered_with_the_version_it_made():
    """CommandApplied: answer id answer|<command id>, service router, the verb, and the snapshot version made."""
    state, _ = run([Tick()])
    _, effects = decide(state, add("lambda/fp8", cid="c7"), at(1), POLICY)
    [answer] = answers(effects)
    assert isinstance(answer, CommandApplied)
    assert (answer.answer_id, answer.command_id, answer.service, answer.command, answer.actor) == (
        "answer|c7", "c7", "router", "override-add", "alice")
    assert answer.snapshots == [SnapshotVersion(model=MODEL, version=2, ignore=["lambda/fp8"], ignored=1)]
    assert answer.at == at(1) and not answer.forced and answer.floor_broken == []


def test_removing_an_override_that_is_not_there_is_refused_with_the_reason():
    """RemoveOverride of nothing: CommandRefused no_such_override, in the operator's words; nothing published."""
    state, _ = run([Tick()])
    after, effects = decide(state, remove("lambda/fp8", model="*"), at(1), POLICY)
    [answer] = answers(effects)
    assert isinstance(answer, CommandRefused)
    assert (answer.code, answer.reason) == ("no_such_override", "no override of lambda/fp8 for * to remove")
    assert snapshots(effects) == [] and after.published == state.published


def test_an_override_of_a_model_not_watched_or_expiring_before_it_starts_is_refused():
    """not_watched names the watched models; an expiry before the command's time is refused as expired."""
    _, effects = run([add("a/fp8", model="nosuch/model")])
    [answer] = answers(effects)
    assert answer.code == "not_watched"
    assert answer.reason == (f"override of a/fp8 for nosuch/model: not a watched model ({MODEL}, {OTHER}); "
                             "use * for every model")
    _, effects = run([add("a/fp8", minute=5, until=at(4))])
    assert [(a.code, a.reason) for a in answers(effects)] == [
        ("expired", "override of a/fp8 by alice expires before it starts")]


def test_a_command_seen_before_is_not_applied_or_answered_again():
    """The same command id twice: the second changes nothing and has no answer (the first is on the log)."""
    state, _ = run([Tick(), add("lambda/fp8", cid="c1"), remove("lambda/fp8", cid="r1")])
    after, effects = decide(state, add("lambda/fp8", cid="c1"), at(5), POLICY)
    assert after is state and effects == []


def test_removing_an_override_is_applied_even_when_it_restores_hosts_below_the_floor():
    """Removing an override only gives hosts back: no guard rail stands in its way."""
    state, effects = run([listed("a/fp8", "b/fp8"), add("a/fp8", force=True), remove("a/fp8")])
    assert [type(a).__name__ for a in answers(effects)] == ["CommandApplied", "CommandApplied"]
    assert state.overrides == {}


# -- guard rails ------------------------------------------------------------------------


def test_an_override_for_a_provider_the_gateway_does_not_list_is_refused_unless_forced():
    """nosuch/fp8 is not listed for the model: refused (force would apply); forced: applied with the warning."""
    state, _ = run([Tick(), listed("a/fp8", "b/fp8", "c/fp8")])
    after, effects = decide(state, add("nosuch/fp8"), at(1), POLICY)
    [answer] = answers(effects)
    assert isinstance(answer, CommandRefused) and answer.code == "unknown_provider" and answer.force_applies
    assert answer.reason == (f"nosuch/fp8 is not listed by the gateway for {MODEL} (it lists a/fp8, b/fp8, c/fp8); "
                             "check the name; add --force to apply it anyway")
    assert after.overrides == {} and snapshots(effects) == []

    after, effects = decide(state, add("nosuch/fp8", force=True, cid="c2"), at(1), POLICY)
    [answer] = answers(effects)
    assert isinstance(answer, CommandApplied) and answer.forced
    assert answer.warnings == [f"forced past a guard rail: nosuch/fp8 is not listed by the gateway for {MODEL} "
                               "(it lists a/fp8, b/fp8, c/fp8); check the name"]
    assert override_key("nosuch/fp8", MODEL) in after.overrides


def test_a_base_slug_or_display_name_of_a_listed_endpoint_is_a_known_provider():
    """lambda covers lambda/fp8 and 'Lambda' is its display name: both are accepted without --force."""
    state, _ = run([Tick(), listed("lambda/fp8", "b/fp8", "c/fp8", "d/fp8")])
    for cid, provider in (("c1", "lambda"), ("c2", "Lambda"), ("c3", "LAMBDA/FP8")):
        _, effects = decide(state, add(provider, cid=cid), at(1), POLICY)
        [answer] = answers(effects)
        assert isinstance(answer, CommandApplied) and not answer.forced, (provider, answer)


def test_a_star_override_is_unknown_only_when_no_listed_model_has_the_provider():
    """For *, a provider listed for one model is known; one listed for none is refused."""
    state, _ = run([listed("a/fp8", "b/fp8", "c/fp8"), listed("x/fp8", "y/fp8", "z/fp8", model=OTHER)])
    _, effects = decide(state, add("x/fp8", model="*", cid="c1"), at(1), POLICY)
    assert isinstance(answers(effects)[0], CommandApplied)
    _, effects = decide(state, add("q/fp8", model="*", cid="c2"), at(1), POLICY)
    assert answers(effects)[0].code == "unknown_provider"


def test_an_override_that_would_leave_fewer_than_min_hosts_is_refused_unless_forced_and_then_says_so():
    """Three hosts, floor 2: the first override is fine, the second refused; forced, the answer names the breach."""
    state, effects = run([Tick(), listed("a/fp8", "b/fp8", "c/fp8", control="ctl/strict"), add("a/fp8", cid="c1")])
    assert isinstance(answers(effects)[0], CommandApplied)
    after, effects = decide(state, add("b/fp8", cid="c2"), at(1), POLICY)
    [answer] = answers(effects)
    assert answer.code == "capacity_floor" and answer.force_applies
    assert answer.reason == (f"overriding b/fp8 would leave 1 usable host(s) for {MODEL} (c/fp8), below the "
                             "capacity floor of 2; add --force to apply it anyway")
    assert after.overrides == state.overrides

    after, effects = decide(state, add("b/fp8", cid="c3", force=True), at(1), POLICY)
    [answer] = answers(effects)
    assert answer.forced and answer.floor_broken == [FloorBreach(model=MODEL, min_hosts=2, usable=["c/fp8"])]
    assert snapshots(effects)[0].ignore == ["a/fp8", "b/fp8"]


def test_the_floor_counts_suspensions_and_never_counts_the_positive_control():
    """A suspended host is not usable; the control is listed but is no production host."""
    state, _ = run([listed("a/fp8", "b/fp8", "c/fp8", control="ctl/strict"), suspend("a/fp8")])
    _, effects = decide(state, add("b/fp8"), at(1), POLICY)
    assert answers(effects)[0].code == "capacity_floor"
    _, effects = decide(state, add("ctl/strict", cid="c2"), at(1), POLICY)
    assert isinstance(answers(effects)[0], CommandApplied)  # listed (known), and removes no usable host


def test_the_floor_counts_a_host_the_canary_reports_unjudgeable():
    """No verdict is no evidence: a host frozen too long (``unjudgeable``) is still routed to, so it counts.

    The floor subtracts what routing removes (exclusions, overrides, suspensions); the router hears
    ``unjudgeable`` once and never that the host is judged again, so leaving it out would hold for good.
    """
    frozen = make_decision(at=at(0), decision_id="u1", model=MODEL, provider="c/fp8", action="unjudgeable",
                           reason="frozen_too_long", detail="frozen 6 cycles in a row (ttft:http_503)")
    state, _ = run([listed("a/fp8", "b/fp8", "c/fp8"), frozen])
    _, effects = decide(state, add("a/fp8"), at(1), POLICY)
    assert isinstance(answers(effects)[0], CommandApplied) and snapshots(effects)[0].ignore == ["a/fp8"]


def test_a_model_whose_endpoints_are_not_known_yet_is_not_checked_and_the_answer_says_so():
    """Before the first discovery the router cannot check: applied, with a warning naming the model."""
    _, effects = run([add("whatever/fp8")])
    [answer] = answers(effects)
    assert isinstance(answer, CommandApplied) and not answer.forced
    assert answer.warnings == [f"no endpoint listing known yet for {MODEL} (discovery has not run): "
                               "whatever/fp8 was not checked against it"]


def test_an_unwatched_models_endpoints_do_not_grow_the_state():
    """EndpointsDiscovered of a model the router does not watch is skipped."""
    state, _ = run([listed("a/fp8", model="elsewhere/m")])
    assert state.endpoints == {}


def test_an_older_listing_does_not_replace_a_newer_one():
    """Endpoints redelivered late (an older cycle) leave the newest listing in force."""
    state, _ = run([listed("a/fp8", "b/fp8", minute=30), listed("old/fp8", minute=0)])
    assert [h.tag for h in state.endpoints[MODEL].hosts] == ["a/fp8", "b/fp8"]


# -- the reviewed exclusions -------------------------------------------------------------------------


def exclusion(provider: str, model: str = "*") -> Exclusion:
    return Exclusion(provider=provider, model=model, reason="measured defect", reference="T-1", since=at(-600))


def read(*providers: str, digest: str = "", command: ReloadExclusions | None = None) -> ExclusionsRead:
    return ExclusionsRead(path="ex.toml", exclusions=[exclusion(p) for p in providers],
                          digest=digest or "|".join(providers), trigger="command" if command else "file_changed",
                          command=command)


def reload(cid: str = "x1", force: bool = False) -> ReloadExclusions:
    return ReloadExclusions(command_id=cid, actor="alice", at=at(0), force=force)


def test_an_invalid_exclusions_file_keeps_the_old_ones_and_a_reload_of_it_is_refused():
    """A file read by the poller: a warning note; the same file for ReloadExclusions: refused invalid_exclusions."""
    state, _ = run([Tick(), read("a/fp8")])
    bad = ExclusionsRead(path="ex.toml", error="ex.toml:8: exclusion is missing ['reason']")
    after, effects = decide(state, bad, at(1), POLICY)
    assert after is state
    [note] = effects
    assert (note.event, note.fields["kept"], note.fields["error"]) == (
        "exclusions_refused", 1, "ex.toml:8: exclusion is missing ['reason']")
    bad_reload = ExclusionsRead(path="ex.toml", error=bad.error, trigger="command", command=reload())
    after, effects = decide(state, bad_reload, at(1), POLICY)
    [answer] = answers(effects)
    assert answer.reason == "exclusions not reloaded, the old ones stay: ex.toml:8: exclusion is missing ['reason']"
    assert after.exclusions == state.exclusions and answer.command == "exclusions-reload"


def test_exclusions_that_break_the_floor_are_refused_unless_a_reload_is_forced():
    """Excluding two of three hosts: the poller keeps the old file (note), a reload is refused, --force applies it."""
    state, _ = run([Tick(), listed("a/fp8", "b/fp8", "c/fp8")])
    after, effects = decide(state, read("a/fp8", "b/fp8"), at(1), POLICY)
    assert after.exclusions == [] and "below the capacity floor of 2" in effects[0].fields["error"]
    after, effects = decide(state, read("a/fp8", "b/fp8", command=reload("x1")), at(1), POLICY)
    assert answers(effects)[0].code == "capacity_floor"
    after, effects = decide(state, read("a/fp8", "b/fp8", command=reload("x2", force=True)), at(1), POLICY)
    [answer] = answers(effects)
    assert answer.forced and answer.floor_broken == [FloorBreach(model=MODEL, min_hosts=2, usable=["c/fp8"])]
    assert [e.provider for e in after.exclusions] == ["a/fp8", "b/fp8"]


def test_a_reload_of_the_file_in_force_is_applied_and_changes_no_snapshot():
    """The same digest again: CommandApplied with no version made and the current ones as unchanged."""
    state, _ = run([Tick(), read("a/fp8", digest="d1")])
    _, effects = decide(state, read("a/fp8", digest="d1", command=reload()), at(1), POLICY)
    [answer] = answers(effects)
    assert answer.snapshots == [] and answer.unchanged == [
        SnapshotVersion(model=MODEL, version=2), SnapshotVersion(model=OTHER, version=2)]


# -- versions never go back ----------------------------------------------------------------------


def test_the_kv_buckets_versions_win_when_ahead_and_a_lost_write_is_published_above_both():
    """KvSeen ahead: the next change follows the bucket's version; behind: the merge is published again, higher."""
    state, _ = run([Tick(), add("a/fp8")])  # published v2 with a/fp8
    merged = snapshot_entries(state, MODEL, at(1))
    ahead, effects = decide(state, KvSeen(versions={MODEL: Published(version=9, digest=entries_digest(merged)),
                                                    OTHER: Published(version=1, digest=entries_digest([]))}),
                            at(1), POLICY)
    assert snapshots(effects) == [] and ahead.published[MODEL].version == 9
    _, effects = decide(ahead, add("b/fp8", cid="c2"), at(2), POLICY)
    assert [s.version for s in snapshots(effects)] == [10]

    behind, effects = decide(state, KvSeen(versions={MODEL: Published(version=1, digest="x")}), at(1), POLICY)
    assert [(s.model, s.version) for e in effects if isinstance(e, SnapshotMade) for s in [e.snapshot]] == [
        (MODEL, 3), (OTHER, 2)]


def test_a_new_store_draws_an_epoch_and_a_sequence_keeps_the_one_it_started_in():
    """A state without an epoch takes KvSeen's; a model's versions keep their sequence's epoch ("" before epochs)."""
    fresh, effects = decide(initial(), KvSeen(new_epoch="20261101T120000Z-aaaaaaaaaaaa"), at(0), POLICY)
    assert fresh.epoch == "20261101T120000Z-aaaaaaaaaaaa"
    assert [(s.model, s.version, s.epoch) for s in made(effects)] == [
        (MODEL, 1, "20261101T120000Z-aaaaaaaaaaaa"), (OTHER, 1, "20261101T120000Z-aaaaaaaaaaaa")]
    again, _ = decide(fresh, KvSeen(new_epoch="20261101T130000Z-bbbbbbbbbbbb"), at(1), POLICY)
    assert again.epoch == fresh.epoch  # a restart with the state kept: the same store

    # a store from before epochs: the bucket holds v7 without one, the state is lost (Redis and log new)
    old = Published(version=7, digest="x", epoch="")
    kept, effects = decide(initial(), KvSeen(versions={MODEL: old}, new_epoch="20261101T140000Z-cccccccccccc"),
                           at(2), POLICY)
    assert [(s.model, s.version, s.epoch) for s in made(effects)] == [
        (MODEL, 8, ""), (OTHER, 1, "20261101T140000Z-cccccccccccc")]


def test_the_snapshot_carries_each_tags_display_name_from_the_listing():
    """A reply names DeepInfra; the snapshot says which tags that name covers (controls are never routed: left out)."""
    listing = EndpointsDiscovered(
        at=at(0), model=MODEL, cycle=f"{MODEL}@c", cycle_no=1, deadline=at(10),
        endpoints=[Endpoint(provider="deepinfra/fp8", provider_name="DeepInfra"),
                   Endpoint(provider="deepinfra/fp4", provider_name="DeepInfra"),
                   Endpoint(provider="lambda/fp8", provider_name="Lambda"),
                   Endpoint(provider="ctl/fp8", provider_name="Control")],
        planned=[PlannedProbe(task_id="ctl", provider="ctl/fp8", kind="refusal", control=True)])
    state, effects = decide(initial(), listing, at(0), POLICY)
    (snapshot,) = snapshots(effects)
    assert snapshot.names == {"deepinfra/fp4": "DeepInfra", "deepinfra/fp8": "DeepInfra", "lambda/fp8": "Lambda"}
    assert snapshot.tags_named("deepinfra") == ["deepinfra/fp4", "deepinfra/fp8"]
    assert snapshot.tags_named("Nobody") == []
    _, effects = decide(state, msgspec.structs.replace(listing, at=at(30), cycle=f"{MODEL}@d"), at(30), POLICY)
    assert snapshots(effects) == []  # the same names: no new version


def test_removing_an_override_without_its_model_says_which_model_has_one():
    """`override remove P` (every model) when P is overridden for model M: refused, with the command that works."""
    state, _ = run([listed("a/fp8", "b/fp8", "lambda/fp8"), add("lambda/fp8", model=MODEL)])
    _, effects = decide(state, remove("lambda/fp8", model="*"), at(1), POLICY)
    (answer,) = [e for e in effects if isinstance(e, CommandRefused)]
    assert answer.reason == (f"no override of lambda/fp8 for * to remove; it has one for {MODEL}: "
                             f"`canary override remove lambda/fp8 --model {MODEL}`")


# -- folding the log again ----------------------------------------------------------------------


def test_a_refold_follows_the_logged_answers_and_drops_what_has_expired_since():
    """Refused live stays refused, forced live stays applied (guard rails today play no part); expired: gone."""
    refused_live = add("nosuch/fp8", cid="c1", minute=1)
    forced_live = add("b/fp8", cid="c2", minute=2, force=True)
    short = add("c/fp8", cid="c3", minute=3, until=at(20))
    log = [listed("a/fp8", "b/fp8", "c/fp8"), refused_live,
           CommandRefused(at=at(1), answer_id="answer|c1", command_id="c1", command="override-add", service="router",
                          actor="alice", code="unknown_provider", reason="..."),
           forced_live,
           CommandApplied(at=at(2), answer_id="answer|c2", command_id="c2", command="override-add", service="router",
                          actor="alice", forced=True),
           short, suspend("a/fp8", minute=4)]
    state = refold(log, POLICY, at(60))
    assert sorted(state.overrides) == [override_key("b/fp8", MODEL)]
    assert sorted(state.suspensions) == [suspension_key(MODEL, "a/fp8")]
    assert set(state.commands) == {"c1", "c2", "c3"}


def test_diff_layers_names_each_override_or_suspension_that_differs():
    """The live state without an override the log holds: one line naming it; equal states: none."""
    state, _ = run([add("a/fp8", cid="c1"), suspend("b/fp8")])
    assert diff_layers(state, state, at(1)) == []
    lost = decide(state, remove("a/fp8"), at(1), POLICY)[0]
    [line] = diff_layers(state, lost, at(1))
    assert line.startswith(f"override a/fp8 on {MODEL}: replay={{") and line.endswith("live=none")


# -- properties -----------------------------------------------------------------------------------------

PROVIDERS = ["a/fp8", "b/fp8", "c/fp8", "d"]
step = st.one_of(
    st.builds(lambda p, m, u, f: ("add", p, m, u, f), st.sampled_from(PROVIDERS), st.sampled_from([MODEL, "*"]),
              st.one_of(st.none(), st.integers(1, 120)), st.booleans()),
    st.builds(lambda p, m: ("remove", p, m), st.sampled_from(PROVIDERS), st.sampled_from([MODEL, "*"])),
    st.builds(lambda p, d: ("suspend", p, d), st.sampled_from(PROVIDERS), st.integers(1, 120)),
    st.builds(lambda p: ("end", p), st.sampled_from(PROVIDERS)),
    st.builds(lambda p, d: ("held", p, d), st.sampled_from(PROVIDERS), st.integers(1, 120)),
    st.just(("tick",)),
    st.just(("listed",)),
)


def build(i: int, s: tuple, minute: float):
    match s:
        case ("add", p, m, u, f):
            return add(p, model=m, cid=f"a{i}", minute=minute, until=None if u is None else at(minute + u), force=f)
        case ("remove", p, m):
            return remove(p, model=m, cid=f"r{i}", minute=minute)
        case ("suspend", p, d):
            return make_decision(at=at(minute), decision_id=f"d{i}", model=MODEL, provider=p, action="suspend",
                            until=at(minute + d), reason="failed_cycles")
        case ("end", p):
            return end(p, minute=minute, did=f"e{i}")
        case ("held", p, d):
            return held(p, minute=minute, until=at(minute + d), did=f"h{i}")
        case ("listed",):
            return listed("a/fp8", "b/fp8", "c/fp8", "d/x", minute=minute)
    return Tick()


@settings(max_examples=150, deadline=None)
@given(st.lists(step, max_size=25), st.lists(st.integers(0, 40), min_size=25, max_size=25))
def test_every_step_keeps_the_routers_invariants(steps, gaps):
    """Whatever the inputs: versions go up by one, every snapshot is the merge at its time, nothing expired is
    in force, every new command gets exactly one answer, and the same inputs give the same result."""
    state, minute = initial(), 0.0
    versions: dict[str, int] = {}
    trace = []
    for i, s in enumerate(steps):
        minute += gaps[i]
        event = build(i, s, minute)
        now = at(minute)
        state, effects = decide(state, event, now, POLICY)
        trace.append(effects)
        for e in effects:
            if isinstance(e, SnapshotMade):
                snap = e.snapshot
                assert snap.version == versions.get(snap.model, 0) + 1
                versions[snap.model] = snap.version
                assert snap.entries == merge(snap.model, state.exclusions, list(state.overrides.values()),
                                             list(state.suspensions.values()), now)
        assert all(o.until is None or o.until > now for o in state.overrides.values())
        assert all(x.until > now - timedelta(seconds=LAPSED_SUSPENSION_S) for x in state.suspensions.values())
        if isinstance(event, AddOverride | RemoveOverride):
            assert len(answers(effects)) == 1
    again, minute = initial(), 0.0
    for i, s in enumerate(steps):
        minute += gaps[i]
        again, effects = decide(again, build(i, s, minute), at(minute), POLICY)
        assert effects == trace[i]
    assert again == state


decision_step = st.one_of(
    st.builds(lambda p, d: ("suspend", p, d), st.sampled_from(PROVIDERS), st.integers(1, 120)),
    st.builds(lambda p: ("end", p), st.sampled_from(PROVIDERS)),
    st.builds(lambda p, d: ("held", p, d), st.sampled_from(PROVIDERS), st.integers(1, 120)),
    st.just(("tick",)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(decision_step, max_size=25), st.lists(st.integers(0, 40), min_size=25, max_size=25),
       st.lists(st.integers(0, 90), min_size=25, max_size=25))
def test_when_a_decision_arrives_never_changes_what_it_does(steps, gaps, lags):
    """The judge's decisions applied live, each some minutes after its own time, give the layers a replay gives.

    A replay (``refold``) applies each decision at its own ``at``; the live router at its clock, late by
    the bus, a restart, a backlog.  The soak found the two apart: a hold of a suspension that had lapsed
    here first was put back as a new suspension (the hold's reason, start and id), where the replay
    extended the old one.  Whatever the order of ticks and lags, the layers in force agree.
    """
    from reverie_canary.services.router.core import layers

    state, minute, clock_now = initial(), 0.0, at(0)
    events = []
    for i, s in enumerate(steps):
        minute += gaps[i]
        event = build(i, s, minute)
        clock_now = max(clock_now, at(minute + lags[i]))  # the router's clock never goes back
        if not isinstance(event, Tick):
            events.append(event)
        state, _ = decide(state, event, clock_now, POLICY)
    final = clock_now + timedelta(minutes=1)
    state, _ = decide(state, Tick(), final, POLICY)
    assert layers(refold(events, POLICY, final), final) == layers(state, final)


def test_an_override_without_an_expiry_ends_365_days_after_its_command():
    """No expires_at: the override's until is the command's at + 365 days (the README's bound), and it then leaves."""
    state, effects = run([Tick(), add("lambda/fp8", minute=1)])
    [entry] = snapshots(effects)[-1].entries
    assert [r.until for r in entry.reasons] == [at(1) + timedelta(days=365)]
    state, effects = decide(state, Tick(), at(1) + timedelta(days=365, seconds=1), POLICY)
    assert state.overrides == {} and snapshots(effects)[-1].ignore == []


def test_a_lean_listing_keeps_only_the_control_probes_and_folds_to_the_same_state():
    """lean() drops a listing's task list but its control probes; refold of lean events equals refold of full ones.

    The soak found it (benchmarks/soak.py): a router rebuild held every listing of the log with its
    task list at once, so its memory grew with the log (a month at 2,000 endpoints is gigabytes).
    """
    from reverie_canary.services.router.core import lean, refold

    full = listed("a/fp8", "b/fp8", "c/fp8", control="ctl/strict")
    full = msgspec.structs.replace(full, planned=[
        *full.planned, *(PlannedProbe(task_id=f"t{i}", provider="a/fp8", kind="ttft") for i in range(50))])
    small = lean(full)
    assert [p.task_id for p in small.planned] == ["ctl"]
    assert msgspec.structs.replace(small, planned=full.planned) == full
    assert lean(suspend("a/fp8")) == suspend("a/fp8")
    events = [full, suspend("a/fp8", minute=1), listed("a/fp8", "b/fp8", "c/fp8", minute=31)]
    now = at(60)
    assert refold([lean(e) for e in events], POLICY, now) == refold(events, POLICY, now)


def test_a_streamed_refold_holds_the_state_not_the_log():
    """Refolder.feed event by event gives refold's state, and its memory does not grow with the log's length.

    The soak found it: a router rebuilt after an empty Redis held every (lean) input of the log at
    once, so each rebuild's router was larger the longer the log (+20 MB per 100 cycles of a
    21-endpoint fleet).  Ten times the listings must not cost ten times the memory.
    """
    import gc
    import tracemalloc

    from reverie_canary.services.router.core import Refolder, RouterState, answers_of

    hosts = [f"h{i}/fp8" for i in range(20)]
    template = listed(*hosts)

    def log(cycles: int):
        """The log's router inputs, made one at a time as a scan reads them."""
        for c in range(cycles):
            yield msgspec.structs.replace(template, at=at(c * 30), cycle=f"{MODEL}@c{c}", cycle_no=c + 1)
            if c % 7 == 3:
                yield suspend(hosts[c % 20], did=f"d{c}", minute=c * 30 + 1)

    def peak(fold) -> tuple[RouterState, int]:
        gc.collect()
        tracemalloc.start()
        try:
            state = fold()
            return state, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def streamed(cycles: int) -> RouterState:  # as the rebuild does: answers first, then each event folded
        folder = Refolder(POLICY, answers_of(log(cycles)))
        for event in log(cycles):
            folder.feed(event)
        return folder.result(at(cycles * 30 + 60))

    def streamed_peak(cycles: int) -> tuple[RouterState, int]:
        return peak(lambda: streamed(cycles))

    small_state, small = streamed_peak(200)
    large_state, large = streamed_peak(2000)
    assert large < 1.5 * small, (small, large)  # ten times the log
    assert large_state == refold(log(2000), POLICY, at(2000 * 30 + 60))
    assert small_state == refold(log(200), POLICY, at(200 * 30 + 60))
    # the fold that holds the log (refold's list, the rebuild before) grows with it: the measure can tell
    _, held_small = peak(lambda: refold(log(200), POLICY, at(200 * 30 + 60)))
    _, held_large = peak(lambda: refold(log(2000), POLICY, at(2000 * 30 + 60)))
    assert held_large > 5 * held_small, (held_small, held_large)
