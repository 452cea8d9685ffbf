"""Subject encoding is reversible and safe; every wire message round-trips; decoding is strict."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.commands import AddOverride, LiftSuspension, RemoveOverride, SetMode
from reverie_canary.shared.contract.errors import Undecodable
from reverie_canary.shared.contract.events import (
    CheckResult,
    CycleClosed,
    CycleVerdict,
    Endpoint,
    EndpointsDiscovered,
    PlannedProbe,
    ProbeResult,
    ProbeTask,
    ProviderVerdict,
    ResultRef,
    RetestRequested,
    make_decision,
)
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot

AT = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]+$")


@pytest.mark.parametrize(
    ("slug", "token"),
    [
        ("deepinfra/fp8", "deepinfra_2Ffp8"),
        ("deepseek/deepseek-chat-v3.1", "deepseek_2Fdeepseek-chat-v3_2E1"),
        ("meta-llama/llama-3.3-70b-instruct:free", "meta-llama_2Fllama-3_2E3-70b-instruct_3Afree"),
        ("a_b", "a_5Fb"),
        ("*", "_2A"),
        ("ü", "_FC"),
        ("模型", "__6A21__578B"),
        ("🦀", "___01F980"),
    ],
)
def test_known_encodings(slug, token):
    """Slugs with / . : _ and non-ASCII map to the documented tokens and back."""
    assert subjects.encode_token(slug) == token
    assert subjects.decode_token(token) == slug


@given(st.text(min_size=1, max_size=60))
def test_encoding_is_reversible_and_subject_safe(slug):
    """Any non-empty string encodes to one [A-Za-z0-9_-] token that decodes back exactly."""
    token = subjects.encode_token(slug)
    assert TOKEN_RE.match(token)
    assert subjects.decode_token(token) == slug


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_encoding_is_injective(a, b):
    """Different slugs never share a token (so two providers never share a subject)."""
    if a != b:
        assert subjects.encode_token(a) != subjects.encode_token(b)


@pytest.mark.parametrize("bad", ["", "a.b", "_2", "_zz", "__12", "a b", "_2f"])
def test_decode_rejects_malformed_tokens(bad):
    """A token that no slug encodes to is refused with SubjectError."""
    with pytest.raises(subjects.SubjectError):
        subjects.decode_token(bad)


def test_empty_slug_is_refused():
    """An empty provider or model cannot become a subject token."""
    with pytest.raises(subjects.SubjectError):
        subjects.encode_token("")


def test_subjects_follow_the_design():
    """Subjects are canary.<kind>.<model>[.<provider>] with encoded tokens."""
    assert subjects.result("x/y:free", "a/b.c") == "canary.results.x_2Fy_3Afree.a_2Fb_2Ec"
    assert subjects.decision("x/y", None) == "canary.decisions.x_2Fy._2A"
    assert subjects.model_from_subject("canary.results.x_2Fy_3Afree.a_2Fb_2Ec") == "x/y:free"
    assert subjects.ops("override-add") == "canary.ops.override-add"


def _messages():
    ref = ResultRef(task_id="t1", cycle="c1", kind="ttft", outcome="fail", reason="ttft_exceeded")
    return [
        EndpointsDiscovered(at=AT, model="m/x", cycle="c1", cycle_no=7, deadline=AT + timedelta(minutes=10),
                            endpoints=[Endpoint(provider="a/fp8", provider_name="A", supported_parameters=["max_tokens"])],
                            planned=[PlannedProbe(task_id="t1", provider="a/fp8", kind="ttft", language="en")],
                            controls={"refusal": "ctl/x"}),
        ProbeTask(at=AT, task_id="t1", model="m/x", provider="a/fp8", kind="ttft", language="en", cycle="c1",
                  deadline=AT + timedelta(minutes=10)),
        ProbeResult(at=AT, task_id="t1", model="m/x", provider="a/fp8", kind="ttft", cycle="c1", outcome="fail",
                    reason="ttft_exceeded", checks=[CheckResult(check="latency.ttft", outcome="fail",
                                                                reason="ttft_exceeded", evidence={"ttft_ms": 11800.0})]),
        CycleClosed(at=AT, model="m/x", cycle="c1", cycle_no=7),
        CycleVerdict(at=AT, model="m/x", cycle="c1", cycle_no=7,
                     verdicts=[ProviderVerdict(provider="a/fp8", verdict="failed", reasons=["ttft:ttft_exceeded"],
                                               results=[ref])]),
        make_decision(at=AT, decision_id="d1", model="m/x", provider="a/fp8", action="suspend",
                 until=AT + timedelta(days=1), evidence=[ref]),
        RetestRequested(at=AT, model="m/x", provider="a/fp8", language="pt", for_cycle_no=8),
        IgnoreSnapshot(at=AT, model="m/x", version=3, entries=[
            IgnoreEntry(provider="a/fp8", reasons=[IgnoreReason(layer="suspension", reason="ttft", until=AT)])]),
        AddOverride(command_id="c1", actor="alice", at=AT, provider="a/fp8", reason="incident 42"),
        RemoveOverride(command_id="c2", actor="alice", at=AT, provider="a/fp8"),
        LiftSuspension(command_id="c3", actor="bob", at=AT, provider="a/fp8", model="m/x", reason="fixed"),
        SetMode(command_id="c4", actor="bob", at=AT, mode="enforce"),
    ]


@pytest.mark.parametrize("message", _messages(), ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message):
    """Encode then decode gives an equal Struct, with its type tag and UTC times."""
    data = codec.encode(message)
    assert b'"type":' in data and b'"v":1' in data
    assert codec.ANY.decode(data) == message


def test_decoding_is_strict_about_types():
    """A number sent as a string is refused, with the field named."""
    good = codec.encode(CycleClosed(at=AT, model="m", cycle="c", cycle_no=1))
    bad = good.replace(b'"cycle_no":1', b'"cycle_no":"1"')
    with pytest.raises(Undecodable, match="cycle_no"):
        codec.ENDPOINTS_OR_CLOSE.decode(bad)


def test_naive_timestamps_are_refused():
    """A time without a zone is not UTC-aware: refused."""
    good = codec.encode(CycleClosed(at=AT, model="m", cycle="c", cycle_no=1))
    bad = good.replace(b'Z"', b'"')
    with pytest.raises(Undecodable):
        codec.ENDPOINTS_OR_CLOSE.decode(bad)


def test_unknown_fields_are_accepted_for_forward_compatibility():
    """A newer writer's extra field does not break an older reader."""
    good = codec.encode(CycleClosed(at=AT, model="m", cycle="c", cycle_no=1))
    newer = good[:-1] + b',"added_later":{"x":1}}'
    assert codec.ENDPOINTS_OR_CLOSE.decode(newer).cycle_no == 1


@pytest.mark.parametrize("raw", [b"", b"not json", b"[]", b'{"type":"nope"}', b'{"type":"cycle_closed"}'])
def test_garbage_is_undecodable(raw):
    """Bytes that are not a message of the expected type raise Undecodable."""
    with pytest.raises(Undecodable):
        codec.ENDPOINTS_OR_CLOSE.decode(raw)


def test_override_without_reason_is_refused():
    """An override must say why: an empty reason does not decode."""
    raw = codec.encode(AddOverride(command_id="c1", actor="alice", at=AT, provider="a", reason="x"))
    with pytest.raises(Undecodable, match="reason"):
        codec.COMMAND.decode(raw.replace(b'"reason":"x"', b'"reason":""'))


@pytest.mark.parametrize("message", _messages(), ids=lambda m: type(m).__name__)
def test_the_exported_json_schema_accepts_every_message(message):
    """canary schema describes the wire: each encoded message validates against it."""
    import json

    import jsonschema

    from reverie_canary.canary.cli import wire_schema

    schema = wire_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert len(schema["oneOf"]) == len(codec.WIRE_TYPES)
    jsonschema.validate(json.loads(codec.encode(message)), schema)


def test_an_oversized_reason_is_refused_so_one_message_cannot_bloat_state():
    """A 900 kB reason code is not a reason code: the result does not decode (it is dead-lettered)."""
    result = ProbeResult(at=AT, task_id="t1", model="m/x", provider="a/fp8", kind="ttft", cycle="c1",
                         outcome="fail", reason="ttft_exceeded")
    huge = codec.encode(result).replace(b'"reason":"ttft_exceeded"', b'"reason":"' + b"x" * 900_000 + b'"')
    with pytest.raises(Undecodable, match="reason"):
        codec.PROBE_RESULT.decode(huge)


def test_a_mode_command_for_an_unknown_probe_kind_is_refused():
    """set_mode with kind 'nonsense' names no probe: refused instead of applied."""
    raw = codec.encode(SetMode(command_id="c1", actor="bob", at=AT, mode="observe", kind="echo"))
    with pytest.raises(Undecodable, match="kind"):
        codec.COMMAND.decode(raw.replace(b'"kind":"echo"', b'"kind":"nonsense"'))


@pytest.mark.parametrize("body", [b"[" * 50_000 + b"]" * 50_000,
                                  b'{"type":"probe_result","x":' + b"[" * 50_000 + b"]" * 50_000 + b"}"])
def test_deeply_nested_json_is_undecodable_not_a_crash(body):
    """50 000 nested arrays, at the top or in an unknown field: Undecodable, never RecursionError."""
    with pytest.raises(Undecodable):
        codec.PROBE_RESULT.decode(body)


def test_a_provider_with_whitespace_is_refused():
    """'bad provider' is no endpoint tag: an override naming it does not decode."""
    raw = codec.encode(AddOverride(command_id="c1", actor="alice", at=AT, provider="a/fp8", reason="x"))
    with pytest.raises(Undecodable, match="provider"):
        codec.COMMAND.decode(raw.replace(b'"provider":"a/fp8"', b'"provider":"bad provider"'))
