"""Decision variants: the bytes on the log decode and replay the same, and the reasons are the table's.

``tests/data/decisions/recorded_v1.jsonl`` holds every decision the judge scenarios gave
(folded in enforce and in observe mode), encoded by the one-struct ``Decision`` the log was
written with before the variants (``tests/legacy_decision.py`` keeps a copy of that type).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from reverie_canary.client.reasons import DECISION_EXTERNAL, DECISION_REASONS, REASONS
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.services.notifier.core import decision_notice
from reverie_canary.services.router.core import RouterPolicy, RouterState, suspension_key
from reverie_canary.services.router.core import decide as route
from reverie_canary.shared.contract import codec, inputs
from reverie_canary.shared.contract.errors import Undecodable
from reverie_canary.shared.contract.events import (
    BLIND_REASONS,
    DECISION_TYPES,
    DECISION_VARIANTS,
    UNPLANNED_CAUSES,
    CanaryBlind,
    Decision,
    DecisionAction,
    DecisionReason,
    HeldSuspension,
    ResultRef,
    Suspended,
    SuspensionEnded,
    TimedDecision,
    make_decision,
)
from reverie_canary.shared.contract.events import (
    DECISION_REASONS as PRODUCED,
)
from tests.legacy_decision import LegacyDecision

HERE = Path(__file__).resolve().parents[1]
RECORDED = HERE / "data" / "decisions" / "recorded_v1.jsonl"
SCENARIOS = HERE / "scenarios" / "judge"
AT = datetime(2026, 11, 1, 12, tzinfo=timezone.utc)
MODEL = "acme/chat-1"
LEGACY = msgspec.json.Decoder(LegacyDecision)
#: Every decoder a decision goes through: its own, the log's, any message's, and each fold's input.
DECODERS = {"DECISION": codec.DECISION, "LOG_EVENT": codec.LOG_EVENT, "ANY": codec.ANY,
            "router": inputs.decoder("router"), "notifier": inputs.decoder("notifier")}


def recorded() -> list[bytes]:
    return [line.encode() for line in RECORDED.read_text().splitlines() if line.strip()]


def same(new: Decision, old: LegacyDecision) -> None:
    """``new`` says field for field what ``old`` says (the fields its variant does not have were empty)."""
    assert type(new) is DECISION_TYPES[old.action] and new.action == old.action
    for name in old.__struct_fields__:
        if name in ("type", "action"):
            continue
        if name in new.__struct_fields__:
            assert getattr(new, name) == getattr(old, name), name
        else:
            blank = LegacyDecision(at=old.at, decision_id=old.decision_id, model=old.model, action=old.action)
            assert getattr(old, name) == getattr(blank, name), name


def legacy(action: str) -> LegacyDecision:
    """A decision of ``action`` as the one-struct type wrote it, every field its action uses set."""
    timed = issubclass(DECISION_TYPES[action], TimedDecision)
    held = [HeldSuspension(provider="a/fp8", until=AT, held_until=AT + timedelta(hours=1), decision_id="dec|x")]
    return LegacyDecision(
        at=AT, decision_id=f"dec|{MODEL}|a/fp8|{action}|7", model=MODEL, provider="a/fp8", action=action,  # type: ignore[arg-type]
        reason="failed_cycles", detail="two failed cycles", until=AT + timedelta(days=1) if timed else None,
        ladder_level=2, cycles=[f"{MODEL}@c1", f"{MODEL}@c2"], mode="observe", kind="ttft", actor="ops",
        evidence=[ResultRef(task_id="t1", cycle=f"{MODEL}@c1", kind="ttft", outcome="fail", reason="ttft_exceeded")],
        held=held if action == "canary_blind" else [], routing_follows=1)


def test_every_recorded_decision_decodes_as_its_variant_everywhere():
    """Each decision on the recorded log decodes through every decoder to the variant of its action, field for field."""
    lines = recorded()
    assert {json.loads(line)["action"] for line in lines} == set(get_args(DecisionAction))  # every action is there
    for line in lines:
        old = LEGACY.decode(line)
        decoded = {name: d.decode(line) for name, d in DECODERS.items()}
        for name, new in decoded.items():
            same(new, old)
            assert new == decoded["DECISION"], name


def test_what_the_variants_write_the_old_type_reads_back_the_same():
    """Recorded bytes -> variant -> bytes -> old type: the decision it was (an older reader keeps reading)."""
    for line in recorded():
        assert LEGACY.decode(codec.encode(codec.DECISION.decode(line))) == LEGACY.decode(line)


@pytest.mark.parametrize("action", get_args(DecisionAction))
def test_every_action_round_trips_between_the_old_type_and_its_variant(action):
    """Old bytes of every action decode as its variant; the variant's bytes decode as the old type, equal."""
    old = legacy(action)
    new = codec.DECISION.decode(codec.encode(old))
    same(new, old)
    assert LEGACY.decode(codec.encode(new)) == old
    assert codec.DECISION.decode(codec.encode(new)) == new
    body = json.loads(codec.encode(new))
    assert body["type"] == "decision" and body["action"] == action
    assert ("until" in body) == issubclass(type(new), TimedDecision)


def test_the_scenarios_replay_to_the_recorded_decisions():
    """Folding every scenario again gives the recorded decisions: re-encoded by the old type, the same bytes."""
    out: list[bytes] = []
    for path in sorted(SCENARIOS.glob("*.jsonl")):
        events = [codec.LOG_EVENT.decode(line) for line in path.read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
        models = tuple(sorted({e.model for e in events if getattr(e, "model", "*") != "*"}))
        for mode in ("enforce", "observe"):
            _, effects = fold(events, Policy(mode=mode, models=models))
            out += [codec.encode(e) for e in effects if isinstance(e, Decision)]
    # the old type's bytes of what the judge decides now: those the recorded log holds, byte for byte
    now = list(dict.fromkeys(codec.encode(LEGACY.decode(b)) for b in out))
    assert now == recorded()


def test_a_suspension_without_its_until_is_refused_and_an_end_with_one_drops_it():
    """The type says it: ``until`` null on a suspension is refused, naming the field; on an end it is not read."""
    for action in ("suspend", "would_suspend", "suspension_held"):
        body = json.loads(codec.encode(legacy(action)))
        body["until"] = None
        with pytest.raises(Undecodable, match=r"got `null` - at `\$.until`"):
            codec.LOG_EVENT.decode(json.dumps(body))
        del body["until"]
        with pytest.raises(Undecodable, match="missing required field `until`"):
            codec.DECISION.decode(json.dumps(body))
    body = json.loads(codec.encode(legacy("end")))
    body["until"] = AT.isoformat()
    ended = codec.DECISION.decode(json.dumps(body))
    assert type(ended) is SuspensionEnded and not hasattr(ended, "until")
    with pytest.raises(TypeError, match="until"):
        make_decision("end", at=AT, decision_id="d", model=MODEL, until=AT)
    with pytest.raises(ValueError, match="unknown decision action 'quarantine'"):
        make_decision("quarantine", at=AT, decision_id="d", model=MODEL)


def test_a_newer_judges_unknown_action_is_refused_with_its_reason_by_every_decoder():
    """An action this code does not know is Undecodable (dead-lettered with the reason), as an unknown type is."""
    body = json.loads(codec.encode(legacy("suspend")))
    body["action"] = "quarantine"
    for name, decoder in DECODERS.items():
        with pytest.raises(Undecodable) as refused:
            decoder.decode(json.dumps(body))
        text = str(refused.value)
        assert "Invalid value 'quarantine' - at `$.action`" in text, name
        assert "a decision action this service does not know" in text and "suspension_held" in text, name
    unknown_type = {**body, "type": "decision_v9"}
    with pytest.raises(Undecodable, match=r"Invalid value 'decision_v9' - at `\$.type`"):
        codec.LOG_EVENT.decode(json.dumps(unknown_type))


def test_a_newer_judges_unknown_reason_is_carried_and_acted_on():
    """A reason code this code does not know decodes as it is; the router suspends and the notifier tells it."""
    body = json.loads(codec.encode(legacy("suspend")))
    body.update(reason="a_reason_from_the_future", mode="enforce")
    decision = inputs.decoder("router").decode(json.dumps(body))
    assert isinstance(decision, Suspended) and decision.reason == "a_reason_from_the_future"
    policy = RouterPolicy(models=(MODEL,))
    state, _ = route(RouterState(), decision, AT, policy)
    assert state.suspensions[suspension_key(MODEL, "a/fp8")].until == AT + timedelta(days=1)
    notice = decision_notice(inputs.decoder("notifier").decode(json.dumps(body)))
    assert notice.reason == "a_reason_from_the_future" and notice.until == AT + timedelta(days=1)


def test_the_variants_are_the_actions_and_only_suspensions_have_an_until():
    """One variant per action, tagged by it; ``until`` required on the three suspension variants, absent elsewhere."""
    assert tuple(t.action for t in DECISION_VARIANTS) == get_args(DecisionAction)
    for t in DECISION_VARIANTS:
        assert t.__struct_config__.tag_field == "action" and t.__struct_config__.tag == t.action
        fields = {f.name: f for f in msgspec.structs.fields(t)}
        if issubclass(t, TimedDecision):
            assert t.action in ("suspend", "would_suspend", "suspension_held")
            assert fields["until"].required
        else:
            assert "until" not in fields
        assert ("held" in fields) == (t is CanaryBlind)


def test_every_reason_code_the_judge_gives_has_a_row_and_every_row_is_given():
    """The DecisionReason literal and the documented table hold the same codes, each row naming its variants."""
    assert set(get_args(DecisionReason)) == set(PRODUCED) == set(DECISION_REASONS)
    for code, row in DECISION_REASONS.items():
        assert row.meaning
        assert {t.action for t in DECISION_VARIANTS if code in t.reasons} == set(row.actions.split(" / ")), code
    assert set(DECISION_EXTERNAL) == {t.action for t in DECISION_VARIANTS if t.reasons == ("blind",)}


def test_the_scenarios_give_only_reasons_of_the_table_or_documented_causes():
    """Each decision the scenarios give has a reason its variant lists, or (canary_blind) a documented cause."""
    documented_causes = set(UNPLANNED_CAUSES) | set(BLIND_REASONS)
    page = __import__("reverie_canary.canary.reference", fromlist=["render_reasons"]).render_reasons()
    for cause in documented_causes:
        assert cause in REASONS or f"| `{cause}` |" in page and "(undocumented)" not in page, cause
    for line in recorded():
        d = codec.DECISION.decode(line)
        external: Any = documented_causes if isinstance(d, CanaryBlind) else set()
        assert d.reason in d.reasons or d.reason in external, (d.action, d.reason)
