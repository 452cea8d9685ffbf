"""A reply that finished without text is judged by what it is; the reason names the cause.

The latency check censors time to first token only when the client stopped
waiting on an open stream with nothing visible; every other empty reply is
judged by the checks made for it.  When several checks fail, the precedence
table of ``checks.evaluate`` picks the reason; no check turns what another
calls inconclusive into a counted failure.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client import checks
from reverie_canary.client.checks import FAIL_PRECEDENCE, evaluate, fail_rank, fold
from reverie_canary.client.reply import Reply
from reverie_canary.services.prober.prompts import ECHO_TEXT, SENTINEL, build
from reverie_canary.services.prober.recorded import check_lines
from reverie_canary.shared.contract.events import CheckResult

KINDS = ("ttft", "refusal", "structured", "language", "echo")


def _latency(result) -> CheckResult | None:
    return next((c for c in result.checks if c.check == "latency.ttft"), None)


#: (name, reply, outcome, reason) -- every reply finished 0.3 s after the request, without text
FINISHED_WITHOUT_TEXT = [
    ("tool_calls_only", Reply(text="", finish_reason="tool_calls", native_finish_reason="tool_calls",
                              http_status=200, total_ms=320.0, served_by="DeepInfra"),
     "fail", "unexpected_tool_calls"),
    ("content_filter", Reply(text="", finish_reason="content_filter", http_status=200, total_ms=310.0,
                             usage={"completion_tokens": 0}),
     "fail", "content_filter"),
    ("length_no_reasoning", Reply(text="", finish_reason="length", http_status=200, total_ms=300.0),
     "inconclusive", "budget_exhausted"),
    ("length_with_reasoning", Reply(text="", reasoning_text="The user wants a short scene. Let me think.",
                                    finish_reason="length", http_status=200, first_reasoning_ms=150.0,
                                    ttft_ms=150.0, total_ms=300.0),
     "inconclusive", "reasoning_budget"),
    ("stop", Reply(text="", finish_reason="stop", http_status=200, total_ms=290.0), "fail", "empty_output"),
    ("whitespace_stop", Reply(text="  \n ", finish_reason="stop", http_status=200, total_ms=290.0),
     "fail", "empty_output"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name, reply, outcome, reason", FINISHED_WITHOUT_TEXT,
                         ids=[row[0] for row in FINISHED_WITHOUT_TEXT])
def test_a_reply_that_finished_without_text_is_judged_by_what_it_is(kind, name, reply, outcome, reason):
    """Tool calls, a filter, a spent budget or plain emptiness: its own reason, never ttft_exceeded."""
    result = evaluate(reply, build(kind, "en").spec)
    assert (result.outcome, result.reason) == (outcome, reason), result
    latency = _latency(result)
    if kind == "ttft" and not reply.reasoning_text:
        assert latency is not None and (latency.outcome, latency.reason) == ("not_applicable", "no_text")
        assert "censored" not in latency.evidence and latency.evidence["total_ms"] == reply.total_ms
    assert all(c.reason != "ttft_exceeded" for c in result.checks)


def test_each_finished_reply_carries_its_evidence():
    """The deciding check says what it saw: finish reasons, reasoning size."""
    spec = build("ttft", "en").spec
    by_name = {name: evaluate(reply, spec) for name, reply, _, _ in FINISHED_WITHOUT_TEXT}
    deciding = {name: next(c for c in r.checks if c.reason == r.reason) for name, r in by_name.items()}
    assert deciding["tool_calls_only"].evidence == {"finish_reason": "tool_calls"}
    assert deciding["content_filter"].evidence == {"finish_reason": "content_filter", "native_finish_reason": None}
    assert deciding["length_no_reasoning"].evidence == {"finish_reason": "length", "reasoning_chars": 0,
                                                        "reasoning_tokens": 0}
    assert deciding["length_with_reasoning"].evidence["reasoning_chars"] == 43
    assert deciding["stop"].check == "refusal.empty"


@pytest.mark.parametrize("kind", KINDS)
def test_an_open_stream_with_keepalives_only_until_the_deadline_is_a_censored_latency_fail(kind):
    """Nothing visible before the client gave up at the bar: fail / ttft_exceeded, censored (FC-25)."""
    reply = Reply(text="", http_status=200, timed_out=True, total_ms=10_500.0, keepalives=52)
    result = evaluate(reply, build(kind, "en").spec)
    assert (result.outcome, result.reason) == ("fail", "ttft_exceeded")
    latency = _latency(result)
    assert latency.evidence == {"ttft_ms": None, "threshold_ms": 10_000.0, "keepalives": 52, "total_ms": 10_500.0,
                                "censored": True}


@pytest.mark.parametrize("kind", KINDS)
def test_a_wait_cut_short_before_the_bar_proves_nothing(kind):
    """The task's deadline ended the wait at 3 s, before the 10 s bar: inconclusive / timed_out, not a fail."""
    reply = Reply(text="", http_status=200, timed_out=True, total_ms=3_000.0, keepalives=14)
    result = evaluate(reply, build(kind, "en").spec)
    assert (result.outcome, result.reason) == ("inconclusive", "timed_out")


def _case(cid: str, text: str, finish: str | None, meta: dict, kind: str = "latency") -> str:
    return json.dumps({"id": cid, "kind": kind, "request_language": "en", "schema": None, "output_text": text,
                       "finish_reason": finish, "meta": meta})


@pytest.mark.parametrize("line, outcome, reason", [
    # the recorded reply of the issue: tool calls only, finished 0.3 s after the request
    (_case("I16-tools", "", "tool_calls", {"http_status": 200, "events": [
        {"t_s": 0.1, "line": ": OPENROUTER PROCESSING"},
        {"t_s": 0.3, "line": 'data: {"choices":[{"delta":{"role":"assistant","content":null,"tool_calls":'
                             '[{"index":0,"id":"call_1","type":"function","function":{"name":"lamp_status",'
                             '"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}'},
        {"t_s": 0.32, "line": "data: [DONE]"}]}), "fail", "unexpected_tool_calls"),
    (_case("I16-filter", "", "content_filter", {"http_status": 200, "ttft_s": None}), "fail", "content_filter"),
    (_case("I16-length", "", "length", {"http_status": 200}), "inconclusive", "budget_exhausted"),
    (_case("I16-length-reasoning", "", "length", {"http_status": 200, "reasoning_text": "Thinking it over.",
                                                  "first_reasoning_delta_s": 0.2}), "inconclusive", "reasoning_budget"),
    (_case("I16-stop", "", "stop", {"http_status": 200}), "fail", "empty_output"),
    (_case("I16-keepalives", "", None, {"http_status": 200, "client_timeout_s": 10.5, "events": [
        {"t_s": 0.2 * i, "line": ": OPENROUTER PROCESSING"} for i in range(1, 53)]}), "fail", "ttft_exceeded"),
])
def test_recorded_replies_of_each_case(line, outcome, reason):
    """The same cases as recorded lines, through canary check's reader."""
    [verdict] = list(check_lines([line]))
    assert (verdict["outcome"], verdict["reason"]) == (outcome, reason), verdict


# -- precedence ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, reply, reason", [
    # FC-11: the tool-call parser gave up, raw tokens in the text: the leak names it, not the finish reason
    ("echo", Reply(text="Setting up.<|tool_calls_section_begin|><|tool_call_begin|>x", finish_reason="tool_calls"),
     "tool_markup_in_content"),
    # markup beside template tokens: the call the parser missed names the defect
    ("echo", Reply(text="<|channel|>commentary to=functions.lamp <|constrain|>json<|message|>{}<|call|>",
                   finish_reason="stop"), "tool_markup_in_content"),
    # a filter stop explains a reply cut before its closing marker
    ("refusal", Reply(text="Mira lifts the lamp and the smugglers", finish_reason="content_filter"),
     "content_filter"),
    # a refusal explains the missing marker
    ("refusal", Reply(text="I'm sorry, but I can't continue this story.", finish_reason="stop"), "refusal"),
    # junk before the JSON explains why it does not parse
    ("structured", Reply(text=',{"city": "Lisbon", "temp_c": 21, "summary": "clear sky"}', finish_reason="stop"),
     "leading_junk"),
    # a runaway explains the cut
    ("refusal", Reply(text="The sea is calm. " * 40, finish_reason="stop"), "repetition"),
    # words injected into an echo of broken bytes: the bytes first
    ("echo", Reply(text=ECHO_TEXT.replace(" ", "\u0120"), finish_reason="stop"), "bytelevel_tokens"),
    # measured late and empty: the latency probe's own contract first
    ("ttft", Reply(text="", finish_reason="stop", ttft_ms=12_000.0, first_reasoning_ms=12_000.0,
                   reasoning_text="hm"), "ttft_exceeded"),
])
def test_the_reason_names_the_cause(kind, reply, reason):
    """When two checks fail, the precedence table picks the cause, not the consequence."""
    result = evaluate(reply, build(kind, "en").spec)
    assert result.outcome == "fail" and result.reason == reason, result
    assert len([c for c in result.checks if c.outcome == "fail"]) >= 2


def test_precedence_rows_hold_known_reasons_once():
    """Every reason of the table is a documented reason code and appears in one row only."""
    listed = [r for row in FAIL_PRECEDENCE for r in row]
    assert len(listed) == len(set(listed))
    for reason in listed:
        assert f"``{reason}``" in checks.__doc__, reason
    assert fail_rank("schema_invalid") == fail_rank("a_new_family_reason") < fail_rank("truncated")
    assert fail_rank("ttft_exceeded") < fail_rank("content_filter") < fail_rank("empty_output")


def test_fold_picks_by_rank_then_by_running_order():
    """Rank decides between failing checks; equals keep running order; inconclusive keeps running order."""
    c = lambda outcome, reason: CheckResult(check="c", outcome=outcome, reason=reason)  # noqa: E731
    assert fold([c("fail", "truncated"), c("fail", "refusal")]).reason == "refusal"
    assert fold([c("fail", "not_json"), c("fail", "schema_invalid")]).reason == "not_json"
    assert fold([c("inconclusive", "too_short"), c("inconclusive", "ambiguous")]).reason == "too_short"
    assert fold([c("not_applicable", "no_text"), c("pass", "")]).outcome == "pass"


GOOD_TEXT = {
    "ttft": "*Mira lifts the lamp.* The storm is close now, and the gulls have gone quiet over the harbour.",
    "refusal": "Mira swings the lamp at the leader and the knife clatters down the stairs. " + SENTINEL,
    "structured": '{"city": "Lisbon", "temp_c": 21, "summary": "clear sky"}',
    "language": "The lighthouse stands alone on the black rocks, its white tower still wet from the rain. "
                "Below it the sea is grey and restless, and the first gulls are circling over the harbour.",
    "echo": ECHO_TEXT,
}


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(KINDS), cut=st.floats(min_value=0.0, max_value=0.95),
       reasoning=st.sampled_from(["text", "tokens"]))
def test_a_reply_cut_because_reasoning_spent_the_budget_never_fails(kind, cut, reasoning):
    """Property (FP-07, FP-08): a good reply cut at length after reasoning is never a counted failure."""
    text = GOOD_TEXT[kind][: int(len(GOOD_TEXT[kind]) * cut)]
    reply = Reply(text=text, finish_reason="length", http_status=200, ttft_ms=400.0, first_reasoning_ms=400.0,
                  reasoning_text="Let me plan the scene first." if reasoning == "text" else "",
                  usage={"completion_tokens_details": {"reasoning_tokens": 300}} if reasoning == "tokens" else {})
    result = evaluate(reply, build(kind, "en").spec)
    assert result.outcome != "fail", result
