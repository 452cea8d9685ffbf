"""The reply guard: verdicts on recorded replies, early decisions on a stream, the one retry, the circuit, the counts.

The replies are the field cases' recorded text (the team's field cases: replies users
reported from real providers) sent as OpenRouter sends a stream (one ``data:`` line per
chunk, in the envelope of OpenRouter's streaming documentation), and the stream and the
mid-stream failure that documentation shows, byte for byte.  Nothing here touches a bus: the
guard works with the bus down.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import msgspec
import pytest

from reverie_canary.client import GuardPolicy, IgnoreListClient, ReplyGuard, snapshot_bytes
from reverie_canary.client.guard import base_slug
from reverie_canary.client.served import MAX_REASONS, LiveCounts, LiveRecorder, decode_live
from reverie_canary.client.wire import MAX_ENDPOINTS_PER_MODEL, IgnoreEntry, IgnoreReason, IgnoreSnapshot

SHARED = Path(os.environ.get("CANARY_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared")
MODEL = "deepseek/deepseek-chat-v3.1"
AT = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
NAMES = {"deepinfra/fp8": "DeepInfra", "deepinfra/fp4": "DeepInfra", "lambda/fp8": "Lambda",
         "baseten/fp8": "BaseTen"}
BODY = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Tell me about the lighthouse."}],
        "provider": {"sort": "latency", "ignore": ["mine/x"]}}


class Clock:
    """A monotonic clock the test moves (seconds)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def client_with(ignored: tuple[str, ...] = ("lambda/fp8",), names: dict[str, str] | None = None) -> IgnoreListClient:
    """A client whose bus is unreachable (never started) holding one snapshot: the guard reads only memory."""
    client = IgnoreListClient("nats://127.0.0.1:1", MODEL, now=lambda: AT)
    entries = [IgnoreEntry(provider=p, reasons=[IgnoreReason(layer="suspension", reason="failed cycles")])
               for p in ignored]
    assert client.apply(snapshot_bytes(IgnoreSnapshot(at=AT, model=MODEL, version=3, entries=entries, epoch="e1",
                                                      names=NAMES if names is None else names)))
    return client


def chunk(content: str | None = None, *, provider: str = "DeepInfra", finish: str | None = None,
          native: str | None = None, error: dict | None = None) -> bytes:
    """One ``data:`` line in OpenRouter's envelope (its streaming documentation's chunk)."""
    delta = {"role": "assistant", "content": content} if content is not None else {}
    body = {"id": "gen-1756000000-AbCdEf", "object": "chat.completion.chunk", "created": 1756000000, "model": MODEL,
            "provider": provider,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "native_finish_reason": native,
                         "logprobs": None}]}
    if error is not None:
        body["error"] = error
    return b"data: " + json.dumps(body, ensure_ascii=False).encode()


def stream_of(text: str, finish: str | None = "stop", *, provider: str = "DeepInfra", piece: int = 4,
              native: str | None = None) -> list[bytes]:
    """``text`` as a provider streams it: a keep-alive, chunks of ``piece`` characters, the finish, ``[DONE]``."""
    lines = [b": OPENROUTER PROCESSING"]
    lines += [chunk(text[i:i + piece], provider=provider) for i in range(0, len(text), piece)]
    lines += [chunk("", provider=provider, finish=finish, native=native), b"data: [DONE]"]
    return lines


def run(guard: ReplyGuard, lines: list[bytes], body: dict | None = None, step_s: float = 0.05):
    """Feed the lines one every ``step_s`` seconds of the guard's clock; (verdict, lines read, attempt)."""
    attempt = guard.attempt(body or BODY)
    stream = attempt.stream()
    for i, line in enumerate(lines, 1):
        guard.clock.t += step_s
        verdict = stream.line(line)
        if verdict is not None:
            return verdict, i, attempt
    return stream.finish(), len(lines), attempt


def field_cases() -> dict[str, dict]:
    path = SHARED / "cases" / "field.jsonl"
    if not path.exists():
        pytest.skip(f"no field cases at {path} (set CANARY_SHARED_DIR)")
    return {c["id"]: c for c in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if c}


# -- recorded replies ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case_id, outcome, reason, early", [
    ("FC-01", "fail", "bytelevel_tokens", False),        # Parasail: Ġ for spaces
    ("FC-02", "fail", "content_filter", True),           # a filter stop on an ordinary request
    ("FC-04", "fail", "empty_output", False),            # 200, stop, nothing
    ("FC-11", "fail", "tool_markup_in_content", False),  # a tool call leaked into the text
    ("FC-14", "fail", "leading_junk", True),             # "assistant\n\n*The lantern ..."
    ("FC-22", "fail", "encoding_broken", False),         # soluÃ§Ã£o
    ("FC-28", "error", "native_finish_reason_error", False),
    ("FP-06", "pass", "", False),                        # —¿Vienes conmigo?
    ("FP-09", "pass", "", False),
    ("FP-11", "pass", "", False),                        # "ok ok ok ok ok" asked for
])
def test_the_guard_on_the_field_cases_streamed(case_id, outcome, reason, early):
    """Each recorded reply, streamed in OpenRouter's envelope: the verdict the any-reply checks give."""
    case = field_cases()[case_id]
    guard = ReplyGuard(client_with(), clock=Clock())
    verdict, _, _ = run(guard, stream_of(case["output_text"], case["finish_reason"],
                                         native=(case.get("meta") or {}).get("native_finish_reason")))
    assert (verdict.outcome, verdict.reason, verdict.early, verdict.provider) == (outcome, reason, early, "DeepInfra")


def run_parsed(guard: ReplyGuard, lines: list[bytes], as_sdk: bool, step_s: float = 0.05):
    """The same stream as :func:`run`, handed over as chunks a backend already parsed: the JSON of each
    ``data:`` line as a dict, or as the OpenAI SDK's ``ChatCompletionChunk``; keep-alives are not chunks."""
    attempt = guard.attempt(BODY)
    stream = attempt.stream()
    for i, line in enumerate(lines, 1):
        guard.clock.t += step_s
        if not line.startswith(b"data: {"):
            continue
        obj = json.loads(line[6:])
        if as_sdk:
            from openai.types.chat import ChatCompletionChunk

            obj = ChatCompletionChunk.model_validate(obj)
        verdict = stream.chunk(obj)
        if verdict is not None:
            return verdict, i, attempt
    return stream.finish(), len(lines), attempt


@pytest.mark.parametrize("as_sdk", [False, True], ids=["dict", "openai-sdk"])
@pytest.mark.parametrize("case_id", ["FC-01", "FC-02", "FC-04", "FC-11", "FC-14", "FC-22", "FC-28", "FP-06", "FP-11"])
def test_parsed_chunks_give_the_verdict_of_the_sse_lines_at_the_same_chunk(case_id, as_sdk):
    """A backend that parsed the stream itself hands the guard its chunks: the same verdict, decided as early."""
    case = field_cases()[case_id]
    lines = stream_of(case["output_text"], case["finish_reason"],
                      native=(case.get("meta") or {}).get("native_finish_reason"))
    by_line, read, _ = run(ReplyGuard(client_with(), clock=Clock()), lines)
    by_chunk, read_parsed, _ = run_parsed(ReplyGuard(client_with(), clock=Clock()), lines, as_sdk)
    assert (by_chunk.outcome, by_chunk.reason, by_chunk.early, by_chunk.provider) == (
        by_line.outcome, by_line.reason, by_line.early, by_line.provider)
    assert read_parsed == read


def test_a_parsed_chunk_that_is_not_a_chunk_is_a_parse_failure():
    """A list where a chunk should be: the stream ends early as ``body_parse``, never an exception."""
    guard = ReplyGuard(client_with(), clock=Clock())
    stream = guard.attempt(BODY).stream()
    verdict = stream.chunk(["not", "a", "chunk"])
    assert verdict is not None and verdict.early and "body_parse" in verdict.reason


def test_leading_junk_is_decided_at_the_chunk_that_shows_it():
    """FC-14's role word: the verdict comes at the chunk that completes "assistant\\n", not at the end."""
    text = field_cases()["FC-14"]["output_text"]
    guard = ReplyGuard(client_with(), clock=Clock())
    verdict, read, _ = run(guard, stream_of(text, piece=5))
    assert (verdict.reason, verdict.early) == ("leading_junk", True)
    assert read == 3  # the keep-alive, "assis", "tant\n": the rest of the reply was never needed
    assert len(stream_of(text, piece=5)) > 10


def test_a_stray_first_mark_is_decided_at_the_first_chunk_and_an_ellipsis_waits():
    """", *Mira" fails at its first chunk; "." waits for the next character ("..." opens a reply)."""
    guard = ReplyGuard(client_with(), clock=Clock())
    verdict, read, _ = run(guard, stream_of(", *Mira lifts the lamp.*", piece=1))
    assert (verdict.reason, read) == ("leading_junk", 2)
    verdict, _, _ = run(guard, stream_of("...and then the lamp went dark.", piece=1))
    assert verdict.outcome == "pass"


#: OpenRouter's streaming documentation's stream (a keep-alive, two chunks, usage, ``[DONE]``) and its
#: mid-stream failure (an ``error`` object and a terminating ``finish_reason: error`` after tokens).
DOCUMENTED_STREAM = [
    b": OPENROUTER PROCESSING",
    b'data: {"id":"gen-1756000000-AbCdEf","object":"chat.completion.chunk","created":1756000000,"model":"deepseek/'
    b'deepseek-chat-v3.1","provider":"DeepInfra","choices":[{"index":0,"delta":{"role":"assistant","content":"O"},'
    b'"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}',
    b'data: {"id":"gen-1756000000-AbCdEf","object":"chat.completion.chunk","created":1756000000,"model":"deepseek/'
    b'deepseek-chat-v3.1","provider":"DeepInfra","choices":[{"index":0,"delta":{"role":"assistant","content":"K"},'
    b'"finish_reason":"stop","native_finish_reason":"stop","logprobs":null}]}',
    b'data: {"id":"gen-1756000000-AbCdEf","object":"chat.completion.chunk","created":1756000000,"model":"deepseek/'
    b'deepseek-chat-v3.1","provider":"DeepInfra","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,'
    b'"total_tokens":14,"cost":0.0000040,"is_byok":false,"prompt_tokens_details":{"cached_tokens":0},'
    b'"completion_tokens_details":{"reasoning_tokens":0},"cost_details":{"upstream_inference_cost":null,'
    b'"upstream_inference_prompt_cost":0.0000024,"upstream_inference_completions_cost":0.0000016}}}',
    b"data: [DONE]",
]
DOCUMENTED_FAILURE = [
    b'data: {"id":"gen-1756000000-AbCdEf","object":"chat.completion.chunk","created":1756000000,"model":"deepseek/'
    b'deepseek-chat-v3.1","provider":"DeepInfra","error":{"code":502,"message":"Provider disconnected unexpectedly",'
    b'"metadata":{"error_type":"provider_unavailable","provider_code":"upstream_disconnect"}},"choices":[{"index":0,'
    b'"delta":{"content":""},"finish_reason":"error","native_finish_reason":"error"}]}',
]


def test_the_documented_stream_passes_and_its_mid_stream_failure_is_retried():
    """OpenRouter's documented stream passes; its mid-stream 502 is an early provider fault, retried once."""
    happy, failure = DOCUMENTED_STREAM, DOCUMENTED_FAILURE
    guard = ReplyGuard(client_with(), clock=Clock())
    verdict, _, attempt = run(guard, happy)
    assert (verdict.outcome, verdict.provider) == ("pass", "DeepInfra") and attempt.retry(verdict) is None
    verdict, read, attempt = run(guard, failure)
    assert (verdict.outcome, verdict.reason, verdict.early, verdict.provider_fault) == (
        "error", "in_band_error", True, True)
    retry = attempt.retry(verdict)
    assert retry is not None and retry.number == 2
    assert retry.body["provider"] == {"sort": "latency",
                                      "ignore": ["deepinfra/fp4", "deepinfra/fp8", "lambda/fp8", "mine/x"]}
    assert BODY["provider"] == {"sort": "latency", "ignore": ["mine/x"]}  # the caller's body is not changed


def test_no_visible_token_by_the_deadline_is_an_early_ttft_failure():
    """Keep-alives and whitespace for 10 s: ttft_exceeded at the line past the deadline; wait_s counts down."""
    clock = Clock()
    guard = ReplyGuard(client_with(), clock=clock, policy=GuardPolicy(first_token_s=10.0))
    stream = guard.attempt(BODY).stream()
    clock.t += 4.0
    assert stream.line(b": OPENROUTER PROCESSING") is None and stream.wait_s() == pytest.approx(6.0)
    clock.t += 3.0
    assert stream.line(chunk(" ")) is None  # whitespace does not start the clock
    clock.t += 3.5
    verdict = stream.line(b": OPENROUTER PROCESSING")
    assert (verdict.outcome, verdict.reason, verdict.early, verdict.provider) == (
        "fail", "ttft_exceeded", True, "DeepInfra")
    assert stream.finish() is verdict  # decided once, counted once
    assert guard.live.take().providers["DeepInfra"].reasons == {"ttft_exceeded": 1}


def test_the_backend_aborts_at_the_deadline_without_any_line():
    """Nothing at all arrives: the backend's read timeout (wait_s) ends, timeout() gives the verdict to retry on."""
    clock = Clock()
    guard = ReplyGuard(client_with(), clock=clock)
    attempt = guard.attempt(BODY)
    stream = attempt.stream()
    clock.t += stream.wait_s()
    verdict = stream.timeout()
    assert (verdict.reason, verdict.provider) == ("ttft_exceeded", None)
    assert attempt.retry(verdict) is None and attempt.held == "no_provider"  # nobody to ignore: the gateway's turn


def test_an_unstreamed_reply_is_judged_from_its_body():
    """A chat.completion body (message, provider): the same checks, the same verdict."""
    guard = ReplyGuard(client_with(), clock=Clock())
    body = {"id": "gen-1", "provider": "Lambda", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Mira lifts the lamp.<|im_end|>"},
         "finish_reason": "stop"}]}
    attempt = guard.attempt({**BODY, "stream": False})
    verdict = attempt.check_body(json.dumps(body).encode())
    assert (verdict.outcome, verdict.reason, verdict.provider) == ("fail", "control_tokens", "Lambda")
    retry = attempt.retry()
    assert retry.body["provider"]["ignore"] == ["lambda/fp8", "mine/x"]
    assert attempt.check_body({"error": {"code": 401, "message": "No auth"}}, http_status=401).outcome == "error"
    assert attempt.retry() is None and attempt.held == "not_the_provider"  # the key's fault, not a provider's


# -- one retry, the budget, the circuit ---------------------------------------------------------------------


def test_at_most_one_retry_per_request():
    """The retry's own failure is not retried again."""
    guard = ReplyGuard(client_with(), clock=Clock())
    verdict, _, attempt = run(guard, stream_of(": broken start"))
    second = attempt.retry(verdict)
    verdict2, _, _ = run(guard, stream_of(": broken again", provider="BaseTen"), body=second.body)
    assert second.retry(verdict2) is None and second.held == "retried_once"


def test_a_pinned_request_is_not_retried_elsewhere():
    """provider.only names the failing provider's endpoints only: a retry could go nowhere else."""
    guard = ReplyGuard(client_with(), clock=Clock())
    body = {**BODY, "provider": {"only": ["deepinfra/fp8"]}}
    verdict, _, attempt = run(guard, stream_of(": junk"), body=body)
    assert attempt.retry(verdict) is None and attempt.held == "pinned"


def test_an_order_without_fallbacks_pins_as_only_does_and_with_fallbacks_does_not():
    """order [deepinfra] + allow_fallbacks false allows no other provider: held as pinned, not sent anywhere.

    Found by a fresh tester: the retry emptied the order and kept allow_fallbacks false, a request the
    caller never allowed.  With fallbacks allowed (the default) the order is a preference: retried.
    """
    guard = ReplyGuard(client_with(), clock=Clock())
    body = {**BODY, "provider": {"order": ["deepinfra"], "allow_fallbacks": False}}
    verdict, _, attempt = run(guard, stream_of(": junk"), body=body)
    assert attempt.retry(verdict) is None and attempt.held == "pinned"
    body = {**BODY, "provider": {"order": ["deepinfra", "lambda/fp8"]}}
    verdict, _, attempt = run(guard, stream_of(": junk"), body=body)
    retry = attempt.retry(verdict)
    assert retry is not None and retry.body["provider"]["order"] == ["lambda/fp8"]


def test_without_a_snapshot_the_retry_ignores_the_served_name_and_its_base_slug():
    """No snapshot (a new backend, the bus down from the start): no tag is known, so the display name and the
    base slug made from it go into ignore (a base slug covers every endpoint of the provider)."""
    client = IgnoreListClient("nats://127.0.0.1:1", MODEL)
    guard = ReplyGuard(client, clock=Clock())
    verdict, _, attempt = run(guard, stream_of(": junk"))
    assert attempt.retry(verdict).body["provider"]["ignore"] == ["DeepInfra", "deepinfra", "mine/x"]


def test_without_a_snapshot_a_two_word_name_is_ignored_by_its_slug_and_taken_out_of_a_pin():
    """Amazon Bedrock with no snapshot: ignore gets amazon-bedrock too, and only/order lose its endpoints."""
    guard = ReplyGuard(model=MODEL, clock=Clock())
    body = {**BODY, "provider": {"only": ["amazon-bedrock/us-east-1", "together"],
                                 "order": ["amazon-bedrock", "together"]}}
    verdict, _, attempt = run(guard, stream_of(": junk", provider="Amazon Bedrock"), body=body)
    retry = attempt.retry(verdict)
    assert retry.body["provider"] == {"ignore": ["Amazon Bedrock", "amazon-bedrock"], "only": ["together"],
                                      "order": ["together"]}


def test_without_a_snapshot_a_reply_of_a_provider_its_base_slug_ignores_counts_as_not_applied():
    """The request ignored amazon-bedrock (no tag known) and Amazon Bedrock served it all the same: not applied."""
    guard = ReplyGuard(model=MODEL, clock=Clock())
    body = {**BODY, "provider": {"ignore": ["amazon-bedrock"]}}
    run(guard, stream_of("The keeper waited.", provider="Amazon Bedrock"), body=body)
    run(guard, stream_of("The keeper waited.", provider="Lambda"), body=body)
    counts = guard.live.take()
    assert {k: o.ignore_not_applied for k, o in counts.providers.items()} == {"Amazon Bedrock": 1, "Lambda": 0}


@pytest.mark.parametrize("name, slug", [("DeepInfra", "deepinfra"), ("Amazon Bedrock", "amazon-bedrock"),
                                        ("inference.net", "inference-net"), ("Google Vertex", "google-vertex"),
                                        ("  ", "")])
def test_the_base_slug_of_a_display_name(name, slug):
    """Lower case, each run of other characters one dash, none at the ends."""
    assert base_slug(name) == slug


def test_the_retry_budget_bounds_retries_to_a_share_of_requests():
    """A bucket of 2 that earns 0.1 a request: 2 retries at once, then one per ten requests."""
    guard = ReplyGuard(client_with(), clock=Clock(), policy=GuardPolicy(budget_burst=2, budget_ratio=0.1))
    held = []
    for _ in range(12):
        verdict, _, attempt = run(guard, stream_of(": junk"))
        attempt.retry(verdict)
        held.append(attempt.held)
    assert held[:2] == [None, None] and held[2:9] == ["budget"] * 7
    assert held.count(None) == 3  # the tenth request's 0.1 made the third token


def test_the_circuit_opens_when_one_failure_comes_from_several_providers_at_once():
    """Six leading_junk failures from three providers in the window: retries stop for that reason only."""
    clock = Clock()
    guard = ReplyGuard(client_with(), clock=clock, policy=GuardPolicy(budget_burst=100))
    held = []
    for i in range(8):
        verdict, _, attempt = run(guard, stream_of(": junk", provider=["A", "B", "C"][i % 3]))
        attempt.retry(verdict)
        held.append(attempt.held)
    assert held[:5] == [None] * 5 and held[5:] == ["circuit_open"] * 3
    verdict, _, attempt = run(guard, stream_of("The lamp.<|im_end|>", provider="A"))
    assert attempt.retry(verdict) is not None  # another reason: still one provider's
    clock.t += 300  # the window passed
    verdict, _, attempt = run(guard, stream_of(": junk", provider="A"))
    assert attempt.retry(verdict) is not None
    counts = guard.live.take()
    assert counts.held == {"circuit_open": 3}


def test_many_failures_of_one_provider_keep_the_circuit_closed():
    """Ten failures, all DeepInfra's: a provider's defect, every one retried elsewhere."""
    guard = ReplyGuard(client_with(), clock=Clock(), policy=GuardPolicy(budget_burst=100))
    for _ in range(10):
        verdict, _, attempt = run(guard, stream_of(": junk"))
        assert attempt.retry(verdict) is not None


def test_one_broken_provider_with_a_few_stray_failures_elsewhere_keeps_its_users_retries():
    """17 of 19 leading_junk failures are DeepInfra's, one Novita's, one Together's: still a provider's defect.

    Found by a fresh tester: the circuit counted only the failures and the distinct providers, so
    a heavily broken host plus two stray failures elsewhere stopped every retry of the model (the
    broken host's replies then reached its users) for two minutes.
    """
    guard = ReplyGuard(client_with(), clock=Clock(), policy=GuardPolicy(budget_burst=100))
    held = []
    for provider in ["DeepInfra"] * 8 + ["Novita"] + ["DeepInfra"] * 3 + ["Together"] + ["DeepInfra"] * 6:
        verdict, _, attempt = run(guard, stream_of(": junk", provider=provider))
        attempt.retry(verdict)
        held.append(attempt.held)
    assert held == [None] * 19


# -- the live counts ------------------------------------------------------------------------------------------


def test_counts_are_keyed_by_what_the_reply_can_tell_and_carry_no_text():
    """DeepInfra covers two tags: counted under its name; Lambda one: under lambda/fp8; nothing of the text."""
    guard = ReplyGuard(client_with(ignored=("lambda/fp8",)), clock=Clock())
    run(guard, stream_of("The lamp went dark over the bay."))
    verdict, _, attempt = run(guard, stream_of(": secret user text", provider="DeepInfra"))
    attempt.retry(verdict)
    run(guard, stream_of("The keeper waited.", provider="Lambda"))  # served although the request ignores it
    counts = guard.live.take()
    raw = msgspec.json.encode(counts)
    assert b"secret" not in raw and b"keeper" not in raw and b"lighthouse" not in raw
    assert {k: (o.replies, o.reasons, o.retried, o.ignore_not_applied) for k, o in counts.providers.items()} == {
        "DeepInfra": (2, {"leading_junk": 1}, 1, 0), "lambda/fp8": (1, {}, 0, 1)}
    assert decode_live(raw) == counts


def test_the_counts_are_bounded_in_keys_and_reasons():
    """300 providers: 256 keys and the rest counted as overflow; 20 reasons: 15 and "other"."""
    live = LiveRecorder(MODEL, now=lambda: AT)
    for i in range(300):
        live.record(f"p{i:03d}", "leading_junk")
    for i in range(20):
        live.record("p000", f"reason_{i:02d}")
    counts = live.take()
    assert len(counts.providers) == MAX_ENDPOINTS_PER_MODEL and counts.overflow == 300 - MAX_ENDPOINTS_PER_MODEL
    assert len(counts.providers["p000"].reasons) == MAX_REASONS and counts.providers["p000"].reasons["other"] == 6
    assert counts.replies == 320
    assert live.take() is None  # a new period, nothing counted


def test_the_client_with_the_bus_down_drops_its_live_counts_and_says_so():
    """Never connected: a publication drops the period (counted), the guard goes on judging."""
    import asyncio

    client = client_with()
    guard = ReplyGuard(client, clock=Clock())
    run(guard, stream_of("The lamp went dark."))
    asyncio.run(client._publish_live_once())
    assert (client.live_dropped, client.live.dropped_periods, client.live.dropped_replies) == (1, 1, 1)
    run(guard, stream_of(": junk"))
    assert client.live.take().dropped_replies == 1


def test_live_counts_are_a_wire_type_of_the_contract():
    """LiveCounts is tagged, versioned and decodes strictly: a string count is refused."""
    counts = LiveCounts(at=AT, model=MODEL, since=AT, providers={})
    raw = msgspec.json.encode(counts)
    assert json.loads(raw)["type"] == "live_counts"
    bad = raw.replace(b'"overflow":0', b'"overflow":"0"')
    with pytest.raises(msgspec.ValidationError):
        decode_live(bad)
