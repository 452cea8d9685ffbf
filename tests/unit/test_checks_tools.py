"""Tool-call checks (docs/concepts/probes.md, the tool-call contract): every check and its traps, the reader's assembly, the evidence round trip."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.checks import CHECKS_VERSION, FAIL_PRECEDENCE, TOOL_TRIGGER_REASONS, evaluate, fail_rank
from reverie_canary.client.checks.tools import (
    TOOL_REASONS,
    check_tool_arguments,
    check_tool_assembly,
    check_tool_empty,
    check_tool_markup,
    check_tool_names,
    check_tool_result,
    check_tool_schema,
    check_tool_trigger,
    check_tool_values,
    find_tool_markup,
    parse_arguments,
    result_value_in,
    same_value,
)
from reverie_canary.client.checks.transport import check_transport
from reverie_canary.client.chunks import ChunkReader
from reverie_canary.client.reply import (
    MAX_TOOL_CALLS,
    MAX_TOOL_FAULTS,
    TOOL_ARGUMENTS_MAX_BYTES,
    ProbeSpec,
    Reply,
    ToolCall,
)
from reverie_canary.services.prober.core import evidence_of
from reverie_canary.services.prober.evidence import cases_of
from reverie_canary.services.prober.prompts import (
    LANGUAGE_NAMES,
    NO_TOOL,
    SECOND_TURN,
    TOOL_CALL_ID,
    TOOL_CALLS,
    TOOL_RESULT_VALUE,
    TOOLS,
    build,
)
from reverie_canary.services.prober.recorded import check_lines
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.events import MAX_CHECKS, ProbeAttempt, ProbeResult
from tests.tool_cases import FAILING, PASSING, args_of, sse, streamed, text, whole

CALL = build("tools", "en", variant="call").spec
STREAM = build("tools", "en", variant="call_stream").spec
NO_TOOL_SPEC = build("tools", "en", variant="no_tool").spec
SECOND = build("tools", "en", variant="second_turn").spec
PLAIN = ProbeSpec(kind="refusal", language="en")


def call(name: str | None, arguments: str, index: int = 0, call_id: str | None = "call_1") -> ToolCall:
    return ToolCall(index=index, id=call_id, name=name, arguments=arguments,
                    arguments_bytes=len(arguments.encode()), fragments=1)


def replied(*calls: ToolCall, text: str = "", finish: str = "tool_calls", **kw) -> Reply:
    return Reply(text=text, http_status=200, finish_reason=finish, calls=calls, tool_calls=len(calls), **kw)


# -- the synthetic case set ------------------------------------------------------------------------


@pytest.mark.parametrize("case", PASSING, ids=[c.id for c in PASSING])
def test_a_correct_reply_passes(case):
    """Right calls in every language, streamed or not; right text where no tool fits; the result used."""
    result = evaluate(case.reply, case.probe_spec())
    assert (result.outcome, result.reason) == ("pass", ""), [c for c in result.checks if c.outcome != "pass"]


@pytest.mark.parametrize("case", FAILING, ids=[c.id for c in FAILING])
def test_a_fault_fails_with_its_reason(case):
    """Each fault fails, and the reason names it (the check that must catch it, by precedence)."""
    result = evaluate(case.reply, case.probe_spec())
    assert (result.outcome, result.reason) == ("fail", case.reason), [c for c in result.checks if c.outcome == "fail"]


def test_the_case_set_covers_every_reason_in_several_languages():
    """Several dozen faults and correct replies, every tool reason, the faults in at least eight languages."""
    assert len(PASSING) >= 60 and len(FAILING) >= 60
    assert {c.reason for c in FAILING} >= set(TOOL_REASONS)
    assert len({c.language for c in FAILING}) >= 8 and len({c.language for c in PASSING}) == len(LANGUAGE_NAMES)


# -- trigger agreement -----------------------------------------------------------------------------


def test_text_instead_of_a_required_call_is_not_called_whatever_the_finish_reason():
    """No call arrived: tool_not_called, also when finish_reason claims tool_calls (TC-06)."""
    for finish in ("stop", "tool_calls", None):
        result = check_tool_trigger(Reply(text="It is sunny in Lisbon.", finish_reason=finish), CALL)
        assert (result.outcome, result.reason) == ("fail", "tool_not_called")


def test_a_valid_call_with_finish_stop_is_a_call():
    """The call that arrived counts, not the finish reason (TC-19)."""
    reply = replied(call("create_event", args_of("en")), finish="stop")
    assert evaluate(reply, CALL).outcome == "pass"


def test_a_call_only_in_the_reasoning_is_not_a_call():
    """A call written inside the reasoning never reached the client: no call (and not markup: it is not shown)."""
    reply = Reply(text="Done.", http_status=200, finish_reason="stop",
                  reasoning_text='<tool_call>{"name": "create_event", "arguments": {}}</tool_call>')
    result = evaluate(reply, CALL)
    assert (result.outcome, result.reason) == ("fail", "tool_not_called")
    assert check_tool_markup(reply, CALL).outcome == "pass"


def test_reasoning_that_spent_the_budget_is_inconclusive():
    """finish length after reasoning, no call: the budget, not the provider (FP-07's rule)."""
    reply = Reply(http_status=200, finish_reason="length", reasoning_text="Let me think about the calendar " * 40)
    assert check_tool_trigger(reply, CALL).outcome == "inconclusive"
    assert evaluate(reply, CALL).outcome == "inconclusive"


def test_a_call_where_none_fits_and_on_the_second_turn_is_unexpected():
    """no_tool and second_turn want text: any call is tool_unexpected_call (TC-08)."""
    reply = replied(call("get_weather", '{"city": "Lisbon"}'))
    for spec in (NO_TOOL_SPEC, SECOND):
        assert check_tool_trigger(reply, spec).reason == "tool_unexpected_call"


def test_another_offered_tool_is_the_wrong_tool_and_an_unknown_one_is_left_to_the_name_check():
    """A known other tool: tool_wrong_tool; an unknown name: the name check's finding only."""
    assert check_tool_trigger(replied(call("get_weather", '{"city": "x"}')), CALL).reason == "tool_wrong_tool"
    unknown = replied(call("create_events", args_of("en")))
    assert check_tool_trigger(unknown, CALL).outcome == "not_applicable"
    assert evaluate(unknown, CALL).reason == "tool_unknown_name"


def test_parallel_calls_pass_where_allowed_and_fail_where_not():
    """Two calls of the expected tool: fine by default (parallel_tool_calls not sent); too many when false."""
    reply = replied(call("create_event", args_of("en")), call("create_event", args_of("en"), 1, "call_2"))
    assert check_tool_trigger(reply, CALL).outcome == "pass"
    single = msgspec.structs.replace(CALL, parallel_calls=False)
    assert check_tool_trigger(reply, single).reason == "tool_too_many_calls"


def test_the_trigger_reasons_are_the_two_that_get_confirmed():
    """Declining and calling where none fits are confirmed by two more tries; nothing else is."""
    assert {"tool_not_called", "tool_unexpected_call"} == TOOL_TRIGGER_REASONS


# -- empty -----------------------------------------------------------------------------------------


def test_no_text_and_no_call_on_a_clean_stop_is_an_empty_reply():
    """Empty on stop (TC-07), reasoning or not; empty content beside a call is normal (TC-18)."""
    for reply in (Reply(http_status=200, finish_reason="stop"),
                  Reply(http_status=200, finish_reason="stop", reasoning_text="I should call get_weather."),
                  Reply(http_status=200, finish_reason="tool_calls", text="  \n")):
        assert check_tool_empty(reply, CALL).reason == "tool_empty_reply"
    assert check_tool_empty(replied(call("create_event", args_of("en"))), CALL).outcome == "pass"
    assert check_tool_empty(Reply(http_status=200, finish_reason="length"), CALL).outcome == "not_applicable"


# -- names -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["get_weather<|channel|>commentary", "get_weatherget_weather", "Get_Weather",
                                  "functions.get_weather", "get_weather ", "get-weather", ""])
def test_a_name_not_exactly_offered_is_unknown(name):
    """Exact match against the offered names, nothing stripped (TC-09)."""
    assert check_tool_names(replied(call(name, '{"city": "x"}')), CALL).reason == "tool_unknown_name"


# -- arguments JSON --------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, shape", [
    ('{"city": "Lisbon"}', "object"),
    ('  {"city": "上海"}\n', "object"),
    ("", "empty"),
    ("   ", "empty"),
    ('"{\\"city\\": \\"Lisbon\\"}"', "double_encoded"),
    ('"Lisbon"', "not_object"),
    ("[1, 2]", "not_object"),
    ("null", "not_object"),
    ('{"title": "Quarterly', "truncated"),
    ('{"city": "Lisbon"', "truncated"),
    ('{"city": ', "truncated"),
    ("{}{\"city\": \"Boston\"}", "concatenated"),
    ('json\n{"city":"San Francisco"}', "leading_text"),
    ('{"city": "Lisbon"} thanks', "trailing_text"),
    ('{"amount": NaN}', "invalid"),
    ('{"amount": Infinity}', "invalid"),
    ("{'city': 'Lisbon'}", "invalid"),
    ('{"city": "Lisbon",}', "invalid"),
])
def test_arguments_are_parsed_as_strictly_as_json_parse(raw, shape):
    """JSON.parse's bar: nothing repaired, nothing unwrapped; the shape says what the string is."""
    assert parse_arguments(raw).shape == shape


def test_arguments_sent_as_an_object_are_not_a_json_string():
    """``function.arguments`` must be a JSON-encoded string; an object breaks a client that decodes it."""
    reader = ChunkReader()
    reader.body(json.dumps({"choices": [{"message": {"tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Lisbon"}}}]},
        "finish_reason": "tool_calls"}]}).encode(), 1.0)
    reply = reader.reply(http_status=200)
    assert reply.calls[0].arguments == '{"city":"Lisbon"}' and "arguments_not_string@0" in reply.tool_faults
    result = check_tool_arguments(reply, CALL)
    assert (result.reason, result.evidence["shape"]) == ("tool_args_invalid_json", "not_a_string")


def test_arguments_past_the_cap_are_too_large_never_judged_as_json():
    """A call whose arguments the reader cut is reply_too_large, not invalid JSON (nothing judged on a fragment)."""
    big = '{"title": "' + "x" * (TOOL_ARGUMENTS_MAX_BYTES + 100) + '"}'
    reply = streamed("create_event", big, pieces=500)
    [kept] = reply.calls
    assert kept.arguments_cut and kept.arguments_bytes == len(big) and len(kept.arguments) == TOOL_ARGUMENTS_MAX_BYTES
    assert evaluate(reply, STREAM).reason == "reply_too_large"


# -- schema ----------------------------------------------------------------------------------------


def test_draft_7_semantics_integer_one_point_zero_and_booleans():
    """1.0 is an integer (draft 6+, OpenRouter's draft 7); true is not; the path names the field."""
    ok = replied(call("create_event", args_of("en", duration_minutes=45.0)))
    assert check_tool_schema(ok, CALL).outcome == "pass"
    bad = check_tool_schema(replied(call("create_event", args_of("en", duration_minutes=True))), CALL)
    assert (bad.reason, bad.evidence["path"], bad.evidence["keyword"]) == (
        "tool_args_schema_mismatch", "$.duration_minutes", "type")


def test_the_schema_path_of_a_nested_field_and_of_a_lost_required_one():
    """A bad nested date says $.start.date; a lost required field says where it was required."""
    nested = check_tool_schema(replied(call("create_event", args_of("en", start={"date": "14/03/2026"}))), CALL)
    assert (nested.evidence["path"], nested.evidence["keyword"]) == ("$.start.date", "pattern")
    lost = check_tool_schema(replied(call("create_event", '{"title": "Quarterly review"}')), CALL)
    assert (lost.evidence["path"], lost.evidence["keyword"]) == ("$", "required")
    assert "'start' is a required property" in lost.evidence["message"]


def test_values_are_validated_as_sent_never_coerced():
    """"250" for a number fails (TC-13); the value check then also differs, the schema names the cause."""
    reply = replied(call("convert_currency", '{"amount": "250", "from": "EUR", "to": "BRL"}'))
    spec = build("tools", "pt", variant="call").spec
    assert check_tool_schema(reply, spec).evidence["path"] == "$.amount"
    assert evaluate(reply, spec).reason == "tool_args_schema_mismatch"


def test_a_schema_that_does_not_compile_counts_as_valid_as_at_openrouter():
    """An invalid schema is not the provider's fault: not_applicable / schema_unusable."""
    spec = msgspec.structs.replace(CALL, tools=[{"type": "function", "function": {
        "name": "create_event", "parameters": {"type": "object", "properties": {"title": {"type": 7}}}}}])
    result = check_tool_schema(replied(call("create_event", '{"title": 1}')), spec)
    assert (result.outcome, result.reason) == ("not_applicable", "schema_unusable")


def test_the_checks_import_without_jsonschema_and_say_so_when_they_need_it():
    """jsonschema is the client's schema extra: imported lazily; without it the schema checks are not_applicable."""
    program = (
        "import sys; sys.modules['jsonschema'] = None\n"
        "from reverie_canary.client.checks import evaluate\n"
        "from reverie_canary.client.checks.tools import check_tool_schema\n"
        "from reverie_canary.client.reply import Reply, ToolCall\n"
        "from reverie_canary.services.prober.prompts import build\n"
        "spec = build('tools', 'es', variant='call').spec\n"
        "c = ToolCall(index=0, id='c', name='get_weather', arguments='{\"city\": \"Sevilla\"}', arguments_bytes=19)\n"
        "r = check_tool_schema(Reply(calls=(c,), tool_calls=1, http_status=200, finish_reason='tool_calls'), spec)\n"
        "print(r.outcome, r.reason)\n"
        "from reverie_canary.client.checks.structured import check_structured\n"
        "from reverie_canary.client.reply import ProbeSpec\n"
        "s = check_structured(Reply(text='{}', finish_reason='stop'), ProbeSpec(kind='structured', schema={}))\n"
        "print(s.outcome, s.reason)\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["not_applicable", "validator_missing"] * 2, out.stderr


# -- fixed values -----------------------------------------------------------------------------------


@pytest.mark.parametrize("expected, got, same", [
    (250, 250.0, True),
    (250, "250", False),
    (1, True, False),
    ("上海", "\u4e0a\u6d77", True),
    ("Đà Nẵng", "Đa\u0300 Na\u0306\u0303ng", True),                # NFD from another stack
    ("Quarterly review", "Quarterly Review", True),
    ("Quarterly review", " Quarterly  review ", True),
    ("Quarterly review", "Quarterly rev", False),
    ("München", "MÃ¼nchen", False),
    ("Обзор квартала", "Obzor kvartala", False),
    ("اجتماع الفريق", "اجتماع الفريق", True),
    ({"date": "2026-03-14"}, {"date": "2026-03-14", "time": "09:30"}, True),
    ({"date": "2026-03-14", "time": "09:30"}, {"date": "2026-03-14"}, False),
    (["Ana", "Bruno"], ["Bruno", "Ana"], True),
    (["Ana", "Bruno"], ["Ana"], False),
    (["Ana", "Ana"], ["Ana", "Bruno"], False),
])
def test_values_compare_as_values(expected, got, same):
    """Numbers numerically, strings after NFC and case folding, objects as subsets, lists as multisets."""
    assert same_value(expected, got) is same


def test_a_value_that_differs_names_its_path():
    """The first fixed value that differs, with its path, both values."""
    result = check_tool_values(replied(call("create_event", args_of("en", start={"date": "2026-03-15",
                                                                                  "time": "09:30"}))), CALL)
    assert result.reason == "tool_args_wrong_value"
    assert (result.evidence["path"], result.evidence["expected"], result.evidence["got"]) == (
        "$.start.date", "2026-03-14", "2026-03-15")


def test_one_parallel_call_with_the_values_is_enough():
    """Parallel calls of the expected tool: one carrying every fixed value passes."""
    reply = replied(call("create_event", '{"title": "x", "start": {"date": "2026-01-01"}}'),
                    call("create_event", args_of("en"), 1, "call_2"))
    assert check_tool_values(reply, CALL).outcome == "pass"


# -- assembly -------------------------------------------------------------------------------------------


def test_the_reader_assembles_by_index_takes_names_once_and_keeps_arguments_raw():
    """Interleaved calls by index, arguments appended as received, ids and names taken once."""
    reply = sse([{"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "get_weather",
                                                                                          "arguments": '{"ci'}}]},
                 {"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "get_weather",
                                                                                          "arguments": "{"}}]},
                 {"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Lisbon"}'}}]},
                 {"tool_calls": [{"index": 1, "function": {"arguments": '"city":"Porto"}'}}]}])
    assert [(c.index, c.id, c.name, c.arguments, c.fragments) for c in reply.calls] == [
        (0, "a", "get_weather", '{"city": "Lisbon"}', 2), (1, "b", "get_weather", '{"city":"Porto"}', 2)]
    assert reply.tool_faults == () and reply.streamed and reply.tool_calls == 2


@given(st.sampled_from(sorted(LANGUAGE_NAMES)), st.lists(st.integers(min_value=1, max_value=40), max_size=30),
       st.booleans())
@settings(max_examples=300, deadline=None)
def test_any_fragmentation_assembles_the_call_the_body_gives(language, cuts, ascii_only):
    """However a provider splits the arguments (even inside a multi-byte character's escape), the streamed call is
    the unstreamed one, and both get the same verdict."""
    tool, arguments = TOOL_CALLS[language][:2]
    raw = json.dumps(arguments, ensure_ascii=ascii_only)
    pieces, at = [], 0
    for size in cuts:
        if at >= len(raw):
            break
        pieces.append(raw[at:at + size])
        at += size
    pieces.append(raw[at:])
    deltas = [{"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": tool, "arguments": ""}}]}]
    deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": piece}}]} for piece in pieces if piece]
    stream_reply, body_reply = sse(deltas), whole([(tool, raw)])
    assert [(c.index, c.id, c.name, c.arguments) for c in stream_reply.calls] == \
        [(c.index, c.id, c.name, c.arguments) for c in body_reply.calls] == [(0, "call_1", tool, raw)]
    assert stream_reply.tool_faults == body_reply.tool_faults == ()
    streamed_verdict = evaluate(stream_reply, build("tools", language, variant="call_stream").spec)
    body_verdict = evaluate(body_reply, build("tools", language, variant="call").spec)
    assert (streamed_verdict.outcome, body_verdict.outcome) == ("pass", "pass")


@pytest.mark.parametrize("deltas, fact", [
    ([{"index": 0, "id": "a", "function": {"name": "get_weather", "arguments": "{}"}},
      {"index": 0, "id": "b", "function": {"name": "get_weather", "arguments": "{}"}}], "id_changed@0"),
    ([{"index": 0, "id": "a", "function": {"name": "get_weather", "arguments": "{}"}},
      {"index": 1, "id": "a", "function": {"name": "get_weather", "arguments": "{}"}}], "id_duplicate@1"),
    ([{"index": 0, "function": {"name": "get_weather", "arguments": "{}"}}], "id_missing@0"),
    ([{"index": 0, "id": "", "function": {"name": "get_weather", "arguments": "{}"}}], "id_missing@0"),
    ([{"index": 0, "id": "a", "function": {"arguments": "{}"}}], "name_missing@0"),
    ([{"index": 0, "id": "a", "function": {"name": "get_", "arguments": ""}},
      {"index": 0, "function": {"name": "weather", "arguments": "{}"}}], "name_changed@0"),
    ([{"index": 0, "id": "a", "function": {"name": "get_weather", "arguments": ""}},
      {"index": 0, "id": "a", "function": {"name": "get_weather", "arguments": "{}"}}], "name_resent@0"),
    ([{"id": "a", "function": {"name": "get_weather", "arguments": "{}"}}], "index_missing@0"),
    ([{"index": 0, "id": "a", "type": "tool", "function": {"name": "get_weather", "arguments": "{}"}}],
     "type_invalid@0"),
])
def test_the_reader_records_what_went_wrong(deltas, fact):
    """Each assembly fault becomes a fact, never a repair."""
    assert fact in sse([{"tool_calls": [d]} for d in deltas]).tool_faults


def test_fragments_after_the_finish_are_a_fact():
    """A tool-call delta after the finish reason: after_finish (the call was declared done)."""
    reply = sse([{"tool_calls": [{"index": 0, "id": "a", "function": {"name": "get_weather", "arguments": "{"}}]}],
                after=[{"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}])
    assert "after_finish@0" in reply.tool_faults
    assert check_tool_assembly(reply, STREAM).reason == "tool_stream_assembly"


def test_resent_ids_and_names_are_tolerated_and_kept_as_notes():
    """Fireworks repeats id and name on every chunk: taken once, noted, not failed."""
    reply = sse([{"tool_calls": [{"index": 0, "id": "a", "type": "function",
                                  "function": {"name": "create_event", "arguments": part}}]}
                 for part in (args_of("en")[:30], args_of("en")[30:])])
    result = check_tool_assembly(reply, STREAM)
    assert result.outcome == "pass" and set(result.evidence["notes"]) == {"id_resent@0", "name_resent@0"}
    assert evaluate(reply, STREAM).outcome == "pass"


def test_the_same_faults_in_a_body_are_a_malformed_call():
    """No id in an unstreamed body is not a stream's fault: tool_call_malformed."""
    assert check_tool_assembly(whole([("create_event", args_of("en"))], ids=[None]), CALL).reason == \
        "tool_call_malformed"


def test_a_hostile_stream_cannot_grow_the_reader():
    """Endless indexes, endless fragments, huge ids and names: bounded calls, arguments, facts, counters."""
    reader = ChunkReader()
    for i in range(5000):
        delta = {"index": i % 3000, "id": "x" * 10_000 + str(i), "type": "t" + str(i),
                 "function": {"name": "n" * 10_000 + str(i), "arguments": "y" * 1000}}
        reader.line(b"data: " + json.dumps({"choices": [{"delta": {"tool_calls": [delta]}}]}).encode(), 1.0)
    reply = reader.reply()
    assert len(reply.calls) == MAX_TOOL_CALLS and len(reply.tool_faults) <= MAX_TOOL_FAULTS
    assert all(len(c.arguments) <= TOOL_ARGUMENTS_MAX_BYTES and len(c.id) <= 128 and len(c.name) <= 128
               for c in reply.calls)
    assert reply.tool_calls == 1024 and sum(len(p) for c in reader.calls.values() for p in c.parts) <= \
        MAX_TOOL_CALLS * TOOL_ARGUMENTS_MAX_BYTES
    assert len(evaluate(reply, STREAM).checks) <= MAX_CHECKS - 1


def test_tool_calls_and_tool_names_keep_their_meaning():
    """The old fields stay: tool_calls counts distinct calls, tool_names their names (check reads them)."""
    reply = streamed("lamp_status", "{}")
    assert (reply.tool_calls, reply.tool_names) == (1, ("lamp_status",))
    assert evaluate(reply, PLAIN).reason == "unexpected_tool_calls"


# -- the second turn ---------------------------------------------------------------------------------


@pytest.mark.parametrize("words, found", [
    ("It is 31 °C in Lisbon.", True),
    ("Il fait 31,0 °C.", True),
    ("درجة الحرارة ٣١ درجة.", True),
    ("気温は３１度です。", True),
    ("It is 131 degrees.", False),
    ("It is 3.31 on the scale.", False),
    ("It is 31.5 degrees.", False),
    ("Lovely weather.", False),
])
def test_the_result_value_is_found_as_a_number(words, found):
    """Digits of any script, not inside a longer number, a fraction of zeros allowed."""
    assert result_value_in(words, TOOL_RESULT_VALUE) is found


def test_a_second_turn_without_the_value_ignored_the_result():
    """Text without the result's value: tool_result_ignored; no text: left to the trigger and empty checks."""
    assert check_tool_result(Reply(text="It is sunny in Lisbon."), SECOND).reason == "tool_result_ignored"
    assert check_tool_result(Reply(text=""), SECOND).outcome == "not_applicable"
    assert check_tool_result(Reply(text="Anything."), CALL).outcome == "pass"


# -- markup: a family, on any reply --------------------------------------------------------------------


@pytest.mark.parametrize("leaked, kind", [
    ("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "tag"),
    ("<function=lamp>\n<parameter=level>3</parameter>\n</function>", "tag"),
    ("<minimax:tool_call><invoke name=\"lamp\"></invoke></minimax:tool_call>", "tag"),
    ("<invoke name=\"lamp\"><parameter name=\"level\">3</parameter></invoke>", "tag"),
    ("[TOOL_CALLS][{\"name\": \"lamp\", \"arguments\": {}}]", "token"),
    ("<|tool_calls_section_begin|><|tool_call_begin|>functions.lamp:0", "token"),
    ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>lamp", "token"),
    ("<∣tool_call_begin∣>lamp", "token"),
    ("<| tool_call_begin |>lamp", "token"),
    ("< | tool_call_begin | >lamp", None),                                 # spaces outside the bars: prose
    ("<|python_tag|>lamp.call(level=3)", "token"),
    ("commentary to=functions.lamp json{\"level\": 3}", "recipient"),
    ("Ok. to=functions.lamp {\"level\": 3}", "recipient"),
    ("functions.lamp:0{\"level\": 3}", "recipient"),
    ("{\"name\": \"lamp_on\", \"arguments\": {\"level\": 3}}", "json"),
    ("{'name': 'lamp_on', 'parameters': {'level': 3}}", "json"),
    ("{\"arguments\": {\"level\": 3}, \"name\": \"lamp_on\"}", "json"),
    ("{\"tool_calls\": [{\"id\": \"x\"}]}", "json"),
    ("{\"type\": \"function\", \"function\": {\"name\": \"lamp\"}}", "json"),
    ("[lamp_on(level=3), bell(times=2)]", "pythonic"),
    ("```tool_code\nprint(lamp_on(level=3))\n```", "fence"),
])
def test_tool_call_markup_is_found_as_a_family(leaked, kind):
    """Tokens with any bar, tags, recipients, JSON calls, pythonic lists and tool_code fences; kind in the evidence."""
    found = find_tool_markup(leaked)
    assert (found[0] if found else None) == kind, found


@pytest.mark.parametrize("prose", [
    "Here is the JSON:\n```json\n{\"name\": \"lamp_on\", \"arguments\": {\"level\": 3}}\n```",
    "The model writes `<tool_call>` and the server parses it.",
    "She said {\"name\": \"Mira\"} was written on the crate.",
    "Functions are useful: see functions.py:12 for the helper.",
    "If x < y and y > z, the <b>lamp</b> is lit.",
    "Mira counts: [1] the lamp, [2] the bell.",
    "The get_weather tool is for the weather; lighthouses use Fresnel lenses.",
    "Call me at (555) 123-4567; the function room opens at 9.",
    "Use <parameter> and <function> as placeholders in the template.",
    "{\"city\": \"Lisbon\", \"temp_c\": 21, \"summary\": \"clear sky\"}",
])
def test_prose_code_and_asked_for_json_are_not_markup(prose):
    """Code spans, fenced JSON the user asked for, JSON that is not a call, brackets and file names pass."""
    assert find_tool_markup(prose, names=("get_weather", "lamp_on")) is None


def test_an_offered_tool_as_a_call_in_prose_is_markup_unless_the_call_was_made():
    """get_weather(city=...) in the text of a probe that offered it: the call left as text; beside a real call: narration."""
    leaked = Reply(text='I will run get_weather(city="Lisbon") for you.', http_status=200, finish_reason="stop")
    assert check_tool_markup(leaked, CALL).reason == "tool_markup_in_content"
    assert check_tool_markup(leaked, PLAIN).outcome == "pass"  # no tools offered: no names to know it by
    beside = msgspec.structs.replace(leaked, calls=(call("create_event", args_of("en")),), tool_calls=1)
    assert check_tool_markup(beside, CALL).outcome == "pass"


def test_markup_is_an_any_reply_check_and_names_the_cause():
    """A roleplay probe whose reply ends in a leaked call fails as tool markup, before control tokens."""
    reply = Reply(text="*Mira lifts the lamp.*<|tool_calls_section_begin|><|tool_call_begin|>functions.lamp:0"
                       "<|im_end|>", http_status=200, finish_reason="tool_calls", ttft_ms=300.0)
    result = evaluate(reply, build("ttft", "en").spec)
    assert result.reason == "tool_markup_in_content"
    assert {c.reason for c in result.checks if c.outcome == "fail"} >= {"tool_markup_in_content", "control_tokens"}


# -- transport for the tool probe --------------------------------------------------------------------


def test_a_refused_valid_tool_request_fails_the_capability():
    """400/422 to the tool request of an endpoint that lists tools: a quality fail, not transport (TC-17)."""
    for status in (400, 422):
        result = check_transport(Reply(http_status=status, error={"message": "function calling not support"}), CALL)
        assert (result.outcome, result.reason) == ("fail", "tool_capability_error")
    assert check_transport(Reply(http_status=400, error={"message": "bad"}), PLAIN).outcome == "transport_error"


def test_the_gateways_no_tool_endpoint_answer_is_not_applicable():
    """OpenRouter's own 404 for no tool-capable endpoint: not_applicable; another 404 stays transport."""
    error = {"message": "No endpoints found that support tool use. To learn more about provider routing, visit: x",
             "code": 404}
    result = evaluate(Reply(http_status=404, error=error), CALL)
    assert (result.outcome, result.reason) == ("not_applicable", "tools_unsupported")
    choice = {"error": {"message": "No endpoints found that support the provided 'tool_choice' value.", "code": 404}}
    assert check_transport(Reply(http_status=404, error=choice), CALL).reason == "tools_unsupported"
    assert check_transport(Reply(http_status=404, error={"message": "Not found"}), CALL).reason == "http_404"
    assert check_transport(Reply(http_status=429, error={"message": "slow down"}), CALL).outcome == "transport_error"


def test_a_stream_cut_during_a_call_is_a_transport_error_not_bad_json():
    """Calls, no finish reason, no [DONE]: the exchange broke (TC-16's kind), the fragment is not judged."""
    reply = streamed("create_event", args_of("en")[:20], finish=None, done=False)
    assert evaluate(reply, STREAM).reason == "stream_cut"
    whole_reply = streamed("create_event", args_of("en"), finish=None, done=True)
    assert evaluate(whole_reply, STREAM).outcome == "pass"


# -- precedence, counts ---------------------------------------------------------------------------------


def test_every_tool_reason_has_its_row():
    """Each tool reason is placed in FAIL_PRECEDENCE: assembly before names, names before JSON, schema before values."""
    listed = {reason for row in FAIL_PRECEDENCE for reason in row}
    assert set(TOOL_REASONS) <= listed
    order = ["tool_markup_in_content", "tool_stream_assembly", "tool_not_called", "tool_unknown_name",
             "tool_args_invalid_json", "tool_args_schema_mismatch", "tool_args_wrong_value"]
    assert [fail_rank(r) for r in order] == sorted(fail_rank(r) for r in order)
    assert len({fail_rank(r) for r in order}) == len(order)


def test_a_tool_reply_has_room_for_the_latency_and_pin_checks():
    """The tool probe's checks plus the latency check stay under the wire's bound, the pin check's place kept."""
    slow = Reply(http_status=200, text="", finish_reason="tool_calls", timed_out=True,
                 calls=(call("create_event", args_of("en")),), tool_calls=1)
    for spec in (CALL, STREAM, NO_TOOL_SPEC, SECOND):
        assert len(evaluate(slow, spec).checks) <= MAX_CHECKS - 1


# -- prompts ------------------------------------------------------------------------------------------------


def test_every_language_has_a_call_a_no_tool_question_and_a_second_turn():
    """The tool prompts cover the rotation; every tool is asked for; fixed values validate against their schema."""
    assert set(TOOL_CALLS) == set(NO_TOOL) == set(SECOND_TURN) == set(LANGUAGE_NAMES)
    assert {tool for tool, _, _ in TOOL_CALLS.values()} == {t["function"]["name"] for t in TOOLS}
    for lang in LANGUAGE_NAMES:
        tool, arguments, prompt = TOOL_CALLS[lang]
        reply = replied(call(tool, json.dumps(arguments, ensure_ascii=False)))
        spec = build("tools", lang, variant="call").spec
        assert evaluate(reply, spec).outcome == "pass", lang
        assert spec.prompt == prompt and spec.language == lang


def test_the_request_sends_tools_and_auto_and_never_strict():
    """The body parts: tools on every turn, tool_choice auto, no strict flag, stream only where the variant streams."""
    for variant in ("call", "call_stream", "no_tool", "second_turn"):
        request = build("tools", "de", variant=variant)
        assert request.tools == TOOLS and request.stream is (variant != "call") and request.tool_choice == "auto"
        assert "strict" not in json.dumps(request.tools)
        assert request.spec.variant == variant and request.spec.tools == TOOLS
    history = build("tools", "ja", variant="second_turn").messages
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool"]
    assert history[2]["content"] is None and history[2]["tool_calls"][0]["id"] == TOOL_CALL_ID == history[3][
        "tool_call_id"]
    assert json.loads(history[3]["content"])["temperature"] == int(TOOL_RESULT_VALUE)
    assert TOOL_RESULT_VALUE not in history[1]["content"]


# -- evidence round trip --------------------------------------------------------------------------------------


def _result(reply: Reply, variant: str, language: str = "ru") -> ProbeResult:
    spec = build("tools", language, variant=variant).spec
    evaluation = evaluate(reply, spec)
    result = ProbeResult(at=datetime(2026, 12, 1, tzinfo=timezone.utc), task_id=f"t-{variant}", model="m/x",
                         provider="lab/fp8", kind="tools", language=language, cycle="c", outcome=evaluation.outcome,
                         reason=evaluation.reason, checks=evaluation.checks, reply=evidence_of(reply),
                         prompt_version="p1", max_tokens=320, ttft_threshold_ms=10_000.0,
                         checks_version=CHECKS_VERSION, variant=variant)
    return codec.ANY.decode(codec.encode(result))  # as the log keeps it


@pytest.mark.parametrize("variant, reply", [
    ("call_stream", streamed("create_event", args_of("ru"))),
    ("call_stream", sse([{"tool_calls": [{"index": 0, "id": "a", "type": "function",
                                          "function": {"name": "create_event", "arguments": args_of("ru")}}]},
                         {"tool_calls": [{"index": 0, "id": "b", "type": "function",
                                          "function": {"name": "create_event", "arguments": args_of("ru")}}]}])),
    ("call", whole([("create_event", args_of("ru", duration_minutes="60"))])),
    ("call", whole([("create_event", "")], ids=[None])),
    ("call_stream", streamed("create_event", '{"title": "' + "я" * 3000 + '"}', pieces=900)),
    ("no_tool", text("Александрийский маяк был одним из семи чудес света.")),
    ("no_tool", streamed("get_weather", '{"city": "Казань"}')),
    ("second_turn", text("Сейчас в Казани 31 °C.")),
    ("second_turn", text("В Казани солнечно.")),
])
def test_canary_evidence_then_canary_check_gives_the_same_verdicts(variant, reply):
    """Tool-call evidence written as a case is judged again to the same outcome, reason and check verdicts."""
    result = _result(reply, variant)
    [case] = cases_of(result)
    assert case["kind"] == "tools" and case["expected_tool"] == build("tools", "ru", variant=variant).spec.expected_tool
    [verdict] = list(check_lines([json.dumps(case, ensure_ascii=False)]))
    assert (verdict["outcome"], verdict["reason"]) == (result.outcome, result.reason)
    assert [(c["check"], c["outcome"], c["reason"]) for c in verdict["checks"]] == [
        (c.check, c.outcome, c.reason) for c in result.checks]


def test_each_attempt_is_rebuilt_with_its_own_variant():
    """A probe whose attempts are different variants writes each with its own request."""
    first, second = _result(text("Сейчас в Казани 31 °C."), "second_turn"), _result(text("Маяк."), "no_tool")
    attempts = [ProbeAttempt(outcome=r.outcome, reason=r.reason, checks=r.checks, reply=r.reply, variant=r.variant)
                for r in (first, second)]
    both = msgspec.structs.replace(first, attempts=attempts)
    cases = cases_of(both)
    assert [c["meta"]["variant"] for c in cases] == ["second_turn", "no_tool"]
    assert [v["outcome"] for v in check_lines([json.dumps(c, ensure_ascii=False) for c in cases])] == ["pass", "pass"]
