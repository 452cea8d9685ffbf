"""The one chat-completion reader: the same bytes give the same reply, live or recorded.

Live replies go through ``http.send_probe`` (here on ``httpx.MockTransport``,
one scripted response each, with the network's chunking chosen by the test);
recorded ones through ``recorded.parse_case``.  Both use ``chunks.ChunkReader``.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.bounds import clamp
from reverie_canary.client.checks import evaluate
from reverie_canary.client.chunks import ChunkReader, LineSplitter
from reverie_canary.client.reply import ProbeSpec
from reverie_canary.services.prober.http import ReadLimits, send_probe
from reverie_canary.services.prober.prompts import build
from reverie_canary.services.prober.recorded import parse_case


def chunk(content: str | None = None, *, reasoning: str | None = None, reasoning_content: str | None = None,
          finish: str | None = None, **extra) -> str:
    delta: dict = {"role": "assistant"}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning"] = reasoning
    if reasoning_content is not None:
        delta["reasoning_content"] = reasoning_content
    body = {"id": "gen-1", "object": "chat.completion.chunk", "created": 1, "model": "m/x", "provider": "DeepInfra",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "native_finish_reason": finish}]}
    body.update(extra)
    return "data: " + json.dumps(body, ensure_ascii=False)


def usage(reasoning_tokens: int = 0) -> str:
    return "data: " + json.dumps({"id": "gen-1", "provider": "DeepInfra", "choices": [],
                                  "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14,
                                            "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}}})


KEEPALIVE = ": OPENROUTER PROCESSING"
DONE = "data: [DONE]"


def recorded(events: list[tuple[float, str]], text: str, finish: str | None = "stop", kind: str = "latency"):
    case = {"id": "R", "kind": kind, "request_language": "en", "schema": None, "output_text": text,
            "finish_reason": finish, "meta": {"http_status": 200,
                                              "events": [{"t_s": t, "line": line} for t, line in events]}}
    return parse_case(case)


def live(events: list[tuple[float, str]], *, limits: ReadLimits | None = None, ttft_deadline_s: float | None = None,
         total_timeout_s: float = 5.0, split: int | None = None, content_type: str = "text/event-stream",
         status: int = 200):
    """Serve ``events`` (seconds after the request, SSE line) and read them with send_probe."""

    async def stream():
        loop = asyncio.get_running_loop()
        start = loop.time()
        for t, line in events:
            delay = start + t - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            data = (line + "\n\n").encode("utf-8", "surrogatepass") if isinstance(line, str) else line
            if split:
                for i in range(0, len(data), split):
                    yield data[i:i + split]
            else:
                yield data

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": content_type, "x-generation-id": "gen-1"},
                              content=stream())

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="http://gw/api/v1/") as client:
            return await send_probe(client, {"model": "m/x", "messages": []}, ttft_deadline_s=ttft_deadline_s,
                                    total_timeout_s=total_timeout_s, limits=limits or ReadLimits())

    return asyncio.run(go())


# -- one time-to-first-token rule ------------------------------------------------------------------------

WHITESPACE_FIRST = [(0.0, KEEPALIVE), (0.02, chunk(" ")), (0.03, chunk("\n")), (0.25, chunk("Paris.")),
                    (0.26, chunk("", finish="stop")), (0.27, usage()), (0.28, DONE)]


def test_a_whitespace_first_delta_does_not_start_the_clock_live_or_recorded():
    """The provider's first delta is a space: both readers time the first visible character."""
    live_reply = live(WHITESPACE_FIRST)
    case = recorded(WHITESPACE_FIRST, " \nParis.")
    assert 240.0 <= live_reply.ttft_ms < 400.0, live_reply
    assert case.reply.ttft_ms == 250.0 == case.reply.first_content_ms
    assert live_reply.text == " \nParis." and live_reply.keepalives == case.reply.keepalives == 1
    spec = ProbeSpec(kind="ttft", ttft_threshold_ms=200.0)
    assert evaluate(live_reply, spec).reason == evaluate(case.reply, spec).reason == "ttft_exceeded"


def test_reasoning_content_starts_the_clock_for_both():
    """DeepSeek's ``reasoning_content`` counts like ``reasoning``, live and recorded (FP-09)."""
    events = [(0.0, KEEPALIVE), (0.05, chunk(reasoning_content="Let me think.")), (0.2, chunk("Use a map.")),
              (0.21, chunk("", finish="stop")), (0.22, DONE)]
    live_reply, case = live(events), recorded(events, "Use a map.")
    assert live_reply.reasoning_text == "Let me think." and 40.0 <= live_reply.first_reasoning_ms < 190.0
    assert live_reply.ttft_ms == live_reply.first_reasoning_ms < live_reply.first_content_ms
    assert (case.reply.first_reasoning_ms, case.reply.first_content_ms, case.reply.ttft_ms) == (50.0, 200.0, 50.0)


def test_the_live_reader_keeps_everything_the_wire_says():
    """Served-by, generation id, finish reasons, usage, keep-alives, [DONE]; nothing judged yet."""
    reply = live([(0.0, KEEPALIVE), (0.0, KEEPALIVE), (0.01, chunk("Hi", reasoning="r")),
                  (0.02, chunk(" there", finish="stop")), (0.03, usage(reasoning_tokens=1)), (0.04, DONE)])
    assert (reply.text, reply.reasoning_text, reply.finish_reason, reply.native_finish_reason) == \
        ("Hi there", "r", "stop", "stop")
    assert (reply.served_by, reply.generation_id, reply.http_status, reply.keepalives) == ("DeepInfra", "gen-1", 200, 2)
    assert reply.usage["completion_tokens_details"] == {"reasoning_tokens": 1}
    assert reply.done and reply.cut is None and reply.transport_error is None and reply.output_bytes == 9
    assert reply.content_type == "text/event-stream" and reply.wire_bytes > 500


@settings(max_examples=40, deadline=None)
@given(split=st.integers(min_value=1, max_value=64), crlf=st.booleans())
def test_any_network_chunking_gives_the_same_reply(split, crlf):
    """Property: lines split anywhere (inside a multi-byte character too, CRLF or LF) read the same."""
    lines = [KEEPALIVE, chunk("Olá, "), chunk("mundo — ça va? 日本語"), chunk("", finish="stop"), DONE]
    data = ("\r\n\r\n" if crlf else "\n\n").join(lines).encode() + b"\n\n"
    whole, pieces = ChunkReader(), ChunkReader()
    for line in LineSplitter(1 << 20).feed(data):
        whole.line(line, 1.0)
    splitter = LineSplitter(1 << 20)
    for i in range(0, len(data), split):
        for line in splitter.feed(data[i:i + split]):
            pieces.line(line, 1.0)
    assert pieces.reply() == whole.reply()
    assert whole.reply().text == "Olá, mundo — ça va? 日本語" and whole.done


# -- what the wire gets wrong --------------------------------------------------------------------------


def test_tool_calls_are_counted_and_named():
    """delta.tool_calls: calls by index, their names; a finished tool-calls-only reply fails as such."""
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lamp_status", "arguments": ""}}
    more = {"index": 0, "function": {"arguments": "{}"}}
    events = [(0.0, chunk(None, tool_calls=None)),
              (0.01, "data: " + json.dumps({"choices": [{"delta": {"tool_calls": [call]}}]})),
              (0.02, "data: " + json.dumps({"choices": [{"delta": {"tool_calls": [more]}, "finish_reason": "tool_calls"}]})),
              (0.03, DONE)]
    reply = live(events)
    assert (reply.tool_calls, reply.tool_names, reply.finish_reason, reply.text) == (1, ("lamp_status",), "tool_calls", "")
    result = evaluate(reply, build("ttft", "en").spec)
    assert (result.outcome, result.reason) == ("fail", "unexpected_tool_calls")
    check = next(c for c in result.checks if c.reason == "unexpected_tool_calls")
    assert check.evidence == {"finish_reason": "tool_calls", "tool_calls": 1, "tools": ["lamp_status"]}


def test_wrong_types_are_read_leniently_and_never_guessed():
    """Valid JSON of the wrong shape: fields of the wrong type are dropped, the rest is kept."""
    reader = ChunkReader()
    assert reader.line(b'data: {"provider": 7, "choices": [{"delta": {"content": 5}}, {"delta": {"content": "ok"}}]}', 1.0)
    assert reader.line(b'data: {"choices": null}', 2.0)
    reply = reader.reply()
    assert (reply.text, reply.served_by, reply.transport_error) == ("ok", None, None)


def test_a_data_line_that_is_not_json_is_body_parse_live_and_read_leniently_when_recorded():
    """Live: transport_error body_parse; a hand-written case ({delta.content:'Paris.'}) is read leniently."""
    reply = live([(0.0, "data: {delta.content:'Paris.'}"), (0.01, DONE)])
    assert reply.transport_error == "body_parse"
    case = recorded([(2.0, "data: {delta.content:'Paris.'}")], "Paris.", kind="transport")
    assert case.reply.ttft_ms == 2000.0


def test_invalid_utf8_is_replaced_counted_and_fails_the_reply():
    """Bytes that are not UTF-8 (split across reads) become U+FFFD; the checks fail it as broken encoding."""
    line = b'data: {"choices":[{"delta":{"content":"caf\xc3 cr\xe8me \xff"}}]}'
    reply = live([(0.0, line + b"\n\n"), (0.01, chunk("", finish="stop")), (0.02, DONE)], split=7)
    assert reply.invalid_utf8 == 1 and reply.text == "caf\ufffd cr\ufffdme \ufffd"
    result = evaluate(reply, build("echo", "fr").spec)
    assert (result.outcome, result.reason) == ("fail", "encoding_broken")


def test_a_body_answer_to_a_stream_request_is_read_as_one_completion():
    """application/json instead of SSE: one chat.completion body; a page of HTML is body_parse with evidence."""
    body = json.dumps({"id": "gen-9", "provider": "Novita", "choices": [
        {"message": {"role": "assistant", "content": "Paris."}, "finish_reason": "stop"}], "usage": {}})
    reply = live([(0.0, body.encode())], content_type="application/json")
    assert (reply.text, reply.finish_reason, reply.served_by, reply.done) == ("Paris.", "stop", "Novita", True)
    html = b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>checking</body></html>"
    reply = live([(0.0, html)], content_type="text/html; charset=UTF-8")
    result = evaluate(reply, build("ttft", "en").spec)
    assert (result.outcome, result.reason) == ("transport_error", "body_parse")
    assert result.checks[0].evidence == {"http_status": 200, "content_type": "text/html; charset=UTF-8",
                                         "first_bytes": html.decode()[:120]}


def test_an_error_body_is_read_up_to_its_cap():
    """A 503 with a huge body: the error object is kept, bounded; the status decides."""
    body = json.dumps({"error": {"code": 503, "message": "x" * 100_000, "metadata": {"error_type": "provider_unavailable"}}})
    reply = live([(0.0, body.encode())], status=503, content_type="application/json")
    assert reply.http_status == 503 and reply.wire_bytes <= 64 * 1024 + 65536
    result = evaluate(reply, build("ttft", "en").spec)
    assert (result.outcome, result.reason) == ("transport_error", "http_503")


# -- caps ----------------------------------------------------------------------------------------------

SMALL = ReadLimits(reply_max_bytes=4096, response_max_bytes=64 * 1024, sse_line_max_bytes=8192)


def test_text_past_the_cap_is_cut_and_fails_as_too_large():
    """Tokens forever: the read stops at reply_max_bytes (at a character boundary), fail / reply_too_large."""
    pieces = [(0.0, chunk("Mira lifts the lamp. ")), *[(0.001 * i, chunk("Öl und Wasser " * 10)) for i in range(1, 400)]]
    reply = live(pieces, limits=SMALL)
    assert reply.cut == "reply_max_bytes" and len(reply.text.encode()) <= 4096
    assert 4096 < reply.output_bytes < 4096 + 200 and reply.transport_error is None and not reply.done
    result = evaluate(reply, build("refusal", "de").spec)
    assert (result.outcome, result.reason) in {("fail", "reply_too_large"), ("fail", "repetition")}
    size = next(c for c in result.checks if c.check == "bounds.reply_size")
    assert size.outcome == "fail" and size.evidence["output_bytes"] == reply.output_bytes


def test_bytes_on_the_wire_past_the_cap_are_a_transport_error():
    """Chunks with almost no text and huge padding: response_too_large, the read stopped at the cap."""
    pad = {"padding": "p" * 4000}
    reply = live([(0.001 * i, chunk("a", **pad)) for i in range(100)], limits=SMALL)
    assert (reply.transport_error, reply.cut) == ("response_too_large", "response_max_bytes")
    assert 64 * 1024 < reply.wire_bytes < 64 * 1024 + 8192


def test_an_overlong_line_is_a_transport_error():
    """One SSE line past sse_line_max_bytes (a 20 MB chunk): line_too_long, nothing of it is kept."""
    reply = live([(0.0, chunk("x" * 20_000))], limits=SMALL, split=1000)
    assert (reply.transport_error, reply.cut, reply.text) == ("line_too_long", "sse_line_max_bytes", "")


def test_a_body_past_the_cap_is_dropped_not_copied():
    """A 20 MB JSON body to a stream request: response_too_large, and the read makes no copy of what it read.

    Each probe such a body answers holds what it read until the cap (8 MiB by default);
    joining the parts into one more copy, only to drop it, doubled that per probe in flight
    (the hostile fleet's prober peaked 9 MB higher with it: tests/integration/test_hostile_fleet.py).
    The pieces exist before the count starts: what is counted is what the read allocates.
    """
    cap = 4 * 1024 * 1024
    events = [(0.0, b'{"id":"gen-1","choices":[{"message":{"content":"'),
              *[(0.0, bytes(bytearray(65536))) for _ in range(20 * 16)]]
    tracemalloc.start()
    try:
        reply = live(events, content_type="application/json", limits=ReadLimits(response_max_bytes=cap))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (reply.transport_error, reply.cut, reply.text) == ("response_too_large", "response_max_bytes", "")
    assert cap < reply.wire_bytes <= cap + 2 * 65536
    assert peak < cap / 2, peak  # a joined copy alone would be the cap


# -- time --------------------------------------------------------------------------------------------


def test_keepalives_only_stop_at_the_ttft_deadline():
    """Keep-alives forever: the client stops at the deadline, timed_out, the comments counted."""
    reply = live([(0.02 * i, KEEPALIVE) for i in range(200)], ttft_deadline_s=0.3)
    assert reply.timed_out and reply.transport_error is None and reply.ttft_ms is None
    assert 280.0 <= reply.total_ms < 1000.0 and reply.keepalives >= 10


def test_headers_then_silence_stop_at_the_total_timeout():
    """Headers and nothing else: timed_out at total_timeout_s (a latency verdict, not transport)."""
    reply = live([(30.0, DONE)], total_timeout_s=0.3)
    assert reply.timed_out and reply.http_status == 200 and reply.keepalives == 0 and 280.0 <= reply.total_ms < 1000


def test_a_finished_stream_without_done_ends_after_the_grace():
    """Finish reason and usage, then the stream is held open: read as finished after finish_grace_s."""
    limits = ReadLimits(finish_grace_s=0.1)
    reply = live([(0.0, chunk("Paris.", finish="stop")), (0.01, usage()), (30.0, DONE)], limits=limits,
                 total_timeout_s=10.0)
    assert (reply.text, reply.finish_reason, reply.done, reply.timed_out, reply.transport_error) == \
        ("Paris.", "stop", False, False, None)
    assert reply.total_ms < 1000.0
    assert evaluate(reply, ProbeSpec(kind="ttft", language="en")).outcome == "pass"


def test_a_stream_that_started_then_stalled_is_a_stream_timeout():
    """Text, then nothing until the total timeout: transport_error stream_timeout (content cannot be judged)."""
    reply = live([(0.0, chunk("The lamp")), (30.0, DONE)], total_timeout_s=0.3)
    assert reply.transport_error == "stream_timeout" and reply.text == "The lamp"


def test_a_stream_that_ends_without_finish_or_done_is_cut():
    """Text, then the connection closes: stream_cut."""
    reply = live([(0.0, chunk("The lamp"))])
    assert reply.transport_error == "stream_cut"


@pytest.mark.parametrize("line", [b"event: message", b"id: 7", b"retry: 100", b"data:", b"data:   "])
def test_other_sse_fields_are_ignored(line):
    """event:, id:, retry: and empty data lines change nothing."""
    reader = ChunkReader()
    assert reader.line(line, 1.0) is True
    assert reader.reply() == ChunkReader().reply()


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=600),
                    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(st.text(max_size=80), inner,
                                                                                   max_size=40), max_leaves=80)


@settings(max_examples=40, deadline=None)
@given(value=st.dictionaries(st.text(max_size=100), JSON, max_size=50))
def test_whatever_a_gateway_sends_the_kept_evidence_passes_the_wire_bound(value):
    """Property: clamp() of any JSON object passes shared.bounds.check_free_json (the judge accepts it)."""
    from reverie_canary.shared.contract.bounds import check_free_json

    check_free_json(clamp(value))


def test_an_error_body_of_any_size_makes_a_result_the_judge_accepts():
    """A 503 whose error object is huge and deep: the result decodes with the strict wire decoder."""
    from reverie_canary.services.prober.core import evidence_of
    from reverie_canary.shared.contract import codec
    from reverie_canary.shared.contract.events import ProbeResult

    nested: dict = {"leaf": "x" * 5000}
    for i in range(10):
        nested = {f"k{i}": nested, f"s{i}": "y" * 3000, "list": list(range(500))}
    body = json.dumps({"error": {"code": 503, "message": "m" * 50_000, "metadata": nested,
                                 **{f"extra{i}": "z" * 1000 for i in range(60)}}})
    reply = live([(0.0, body.encode())], status=503, content_type="application/json")
    result = evaluate(reply, build("ttft", "en").spec)
    from datetime import datetime, timezone
    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    wire = ProbeResult(at=now, task_id="t", model="m/x", provider="p/x", kind="ttft", cycle="c", outcome=result.outcome,
                       reason=result.reason, checks=result.checks, reply=evidence_of(reply))
    assert codec.PROBE_RESULT.decode(codec.encode(wire)) == wire and len(codec.encode(wire)) < 4096


def test_a_body_answer_is_not_cut_by_the_first_token_deadline():
    """A JSON body that takes longer than the latency probe's wait: read whole (a body has no first token)."""
    body = json.dumps({"choices": [{"message": {"content": "Paris."}, "finish_reason": "stop"}]}).encode()
    reply = live([(0.0, body[:10]), (0.4, body[10:])], content_type="application/json", ttft_deadline_s=0.2)
    assert (reply.text, reply.timed_out, reply.transport_error, reply.done) == ("Paris.", False, None, True)
