"""A hostile gateway on the real wire: every kind gets its defined outcome, in bounded time and size.

The simulated gateway's hostile kinds (``simulator/scenarios/hostile.toml``,
``scenario.HOSTILE_KINDS``) against the real prober path (pinned request, the
chunk reader, the caps, the checks) on a real socket.  Compressed time: the bar
is 0.5 s, the request timeout 1.2 s, the task's deadline 3 s away.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from reverie_canary.services.prober.service import Prober
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.events import ProbeTask
from reverie_canary.shared.runtime.openrouter import make_client
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.gateway import create_app
from reverie_canary.simulator.scenario import HOSTILE_KINDS, load_scenario
from reverie_canary.simulator.server import serve

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"
#: Every result is far below NATS's 1 MiB max_payload, whatever the reply's size.
RESULT_MAX_BYTES = 16 * 1024


@pytest.fixture
async def gateway():
    scenario = load_scenario("hostile")
    async with serve(create_app(scenario)) as url:
        settings = Settings.load(env={}, openrouter_base_url=url, openrouter_api_key=SIMULATED_KEY, ttft_threshold_s=0.5, request_timeout_s=1.2,
                                 max_tokens=128)
        async with make_client(settings) as client:
            names = {e.tag: e.provider_name for e in scenario.models[0].endpoints}
            yield url, Prober(settings, client), names


async def probe(gateway, tag: str, kind: str, *, deadline_s: float = 3.0):
    url, prober, names = gateway
    now = datetime.now(timezone.utc)
    task = ProbeTask(at=now, task_id=f"{tag}|{kind}", model=MODEL, provider=tag, provider_name=names[tag], kind=kind,
                     language="en", cycle="c", deadline=now + timedelta(seconds=deadline_s),
                     supported_parameters=["max_tokens", "response_format", "structured_outputs"])
    t0 = time.perf_counter()
    result = await prober.probe(task)
    elapsed = time.perf_counter() - t0
    assert elapsed < deadline_s, (tag, kind, elapsed)
    assert result.at <= task.deadline
    assert len(codec.encode(result)) <= RESULT_MAX_BYTES
    assert codec.PROBE_RESULT.decode(codec.encode(result)) == result  # the judge's strict decoder takes it
    return result, elapsed


async def set_faults(gateway, tag: str, faults: list[dict]) -> None:
    url, _, _ = gateway
    async with httpx.AsyncClient() as c:
        r = await c.put(url.removesuffix("/api/v1") + "/_sim/faults", params={"provider": tag},
                        content=json.dumps({"faults": faults}))
        assert r.status_code == 200, r.text


def deciding(result):
    return next(c for c in result.checks if c.reason == result.reason)


def test_the_hostile_scenario_has_every_hostile_kind_beside_eight_healthy_hosts():
    """Eight healthy endpoints, and at least one endpoint per hostile kind (eight in all)."""
    [model] = load_scenario("hostile").models
    kinds = {type(f).__struct_config__.tag for e in model.endpoints for f in e.faults}
    assert kinds == set(HOSTILE_KINDS)
    assert sum(not e.faults for e in model.endpoints) == 8 and sum(bool(e.faults) for e in model.endpoints) == 8


@pytest.mark.parametrize("tag, keepalives", [("drip/fp8", True), ("mute/fp8", False)])
async def test_an_open_stream_with_nothing_in_it_is_a_censored_latency_fail_at_the_deadline(gateway, tag, keepalives):
    """Keep-alives forever / headers then silence: ttft probe stops at 1.05 x the bar, others at the timeout."""
    result, elapsed = await probe(gateway, tag, "ttft")
    assert (result.outcome, result.reason) == ("fail", "ttft_exceeded")
    evidence = deciding(result).evidence
    assert evidence["censored"] is True and 500.0 <= evidence["total_ms"] < 900.0
    assert (evidence["keepalives"] >= 2) is keepalives
    result, elapsed = await probe(gateway, tag, "refusal")
    assert (result.outcome, result.reason) == ("fail", "ttft_exceeded")
    assert 1.15 <= elapsed < 2.0


async def test_tokens_forever_stop_at_the_reply_cap(gateway):
    """Content without end: the read stops at reply_max_bytes; fail, the evidence says how much came."""
    result, elapsed = await probe(gateway, "firehose/fp8", "refusal")
    # the simulator repeats one block of prose: a passage sent again and again is what the reply holds
    assert result.outcome == "fail" and result.reason in {"reply_too_large", "repetition", "duplicated_text"}
    size = next(c for c in result.checks if c.check == "bounds.reply_size")
    assert size.outcome == "fail" and size.evidence["output_bytes"] > 256 * 1024
    assert result.reply.output_chars <= 256 * 1024


async def test_an_html_page_with_200_is_a_transport_error_with_its_content_type(gateway):
    """A CDN challenge page where the completion should be: transport_error / body_parse, never judged."""
    result, _ = await probe(gateway, "edgewall/fp8", "ttft")
    assert (result.outcome, result.reason) == ("transport_error", "body_parse")
    assert result.checks[0].evidence["content_type"].startswith("text/html")
    assert result.checks[0].evidence["first_bytes"].startswith("<!DOCTYPE html>")


async def test_bytes_that_are_not_utf8_fail_and_split_characters_read_whole(gateway):
    """Invalid UTF-8 written in 7-byte pieces: encoding_broken; valid text split the same way: pass."""
    result, _ = await probe(gateway, "mangle/fp8", "echo")
    assert (result.outcome, result.reason) == ("fail", "encoding_broken")
    await set_faults(gateway, "mangle/fp8", [{"kind": "bad_utf8", "mode": "split", "piece_bytes": 3}])
    try:
        for kind in ("echo", "structured"):
            result, _ = await probe(gateway, "mangle/fp8", kind)
            assert (result.outcome, result.reason) == ("pass", ""), (kind, result)
    finally:
        await set_faults(gateway, "mangle/fp8", [{"kind": "bad_utf8", "mode": "invalid"}])


@pytest.mark.parametrize("mode, outcome, reason", [("hold", "pass", ""), ("close", "pass", ""),
                                                   ("cut", "transport_error", "stream_cut")])
async def test_a_stream_without_done(gateway, mode, outcome, reason):
    """No [DONE]: finished (held open or closed) is judged by its content, after the grace; cut is cut."""
    await set_faults(gateway, "openend/fp8", [{"kind": "no_done", "mode": mode}])
    try:
        result, elapsed = await probe(gateway, "openend/fp8", "echo")
    finally:
        await set_faults(gateway, "openend/fp8", [{"kind": "no_done", "mode": "hold"}])
    assert (result.outcome, result.reason) == (outcome, reason), result
    assert elapsed < 2.0  # the 1 s grace (capped by the 1.2 s timeout) or the close, never the 3 s deadline


async def test_a_20_mb_reply_is_read_up_to_a_cap_and_makes_a_small_result(gateway):
    """20 MB of SSE deltas: reply_too_large; 20 MB as one body: response_too_large; a 2 MB line: line_too_long."""
    result, _ = await probe(gateway, "flood/fp8", "language")
    # the simulator repeats one block of prose: a passage sent again and again is what the reply holds
    assert result.outcome == "fail" and result.reason in {"reply_too_large", "repetition", "duplicated_text"}
    assert {c.reason for c in result.checks if c.outcome == "not_applicable"} == {"reply_cut"}
    for kind in ("refusal", "ttft"):  # the latency probe too: a body has no first token to time out on
        result, _ = await probe(gateway, "dump/fp8", kind)
        assert (result.outcome, result.reason) == ("transport_error", "response_too_large"), kind
        assert result.checks[0].evidence["wire_bytes"] > 8 * 1024 * 1024
    await set_faults(gateway, "flood/fp8", [{"kind": "huge_reply", "megabytes": 4.0, "piece_kb": 2048}])
    try:
        result, _ = await probe(gateway, "flood/fp8", "refusal")
    finally:
        await set_faults(gateway, "flood/fp8", [{"kind": "huge_reply", "megabytes": 20.0}])
    assert (result.outcome, result.reason) == ("transport_error", "line_too_long")


async def test_a_probe_ends_by_its_tasks_deadline_when_that_comes_first(gateway):
    """Keep-alives forever on a refusal probe whose task is due in 0.9 s: it ends before, and proves nothing."""
    result, elapsed = await probe(gateway, "drip/fp8", "refusal", deadline_s=0.9)
    assert elapsed < 0.9 and (result.outcome, result.reason) == ("inconclusive", "timed_out")
