"""The simulated gateway's tool calls on the real wire, read by the canary's own reader and judged by its checks.

The full fleet on a real socket: the tool probe's requests (``prompts.build("tools", …)``, every
variant, every language) sent the prober's way (pinned, ``require_parameters``), the replies read
by the one chunk reader and judged by the tool checks.  A healthy host passes every variant; each
tool-broken provider fails the variants its fault shows in, with its reason, and passes the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from reverie_canary.client.checks import evaluate
from reverie_canary.client.reply import TOOL_VARIANTS
from reverie_canary.services.prober import prompts
from reverie_canary.services.prober.http import request_body, send_probe
from reverie_canary.shared.runtime.openrouter import make_client
from reverie_canary.shared.runtime.settings import LANGUAGES, Settings
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.gateway import create_app
from reverie_canary.simulator.scenario import TOOL_KINDS, load_scenario
from reverie_canary.simulator.server import serve

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"
#: Hosts whose tool calls are right (the healthy fleet, a reasoning model, and the tool-call host).
HEALTHY = ("toolsmith/fp8", "deepinfra/fp8", "fireworks", "deepthink/fp8")
#: Tool-broken provider -> (the variants its fault shows in, the reasons accepted there).
BROKEN: dict[str, tuple[set[str], set[str]]] = {
    "tagleak/fp8": ({"call", "call_stream"}, {"tool_markup_in_content"}),
    "halfjson/fp8": ({"call", "call_stream"}, {"tool_args_invalid_json"}),
    "looseschema/fp8": ({"call", "call_stream"}, {"tool_args_schema_mismatch"}),
    "noparse/bf16": (set(TOOL_VARIANTS), {"tool_capability_error"}),
    "shardstream/fp8": ({"call_stream"}, {"tool_stream_assembly"}),
    "eagerhand/fp8": ({"no_tool", "second_turn"}, {"tool_unexpected_call"}),
    "hollowtool/fp8": (set(TOOL_VARIANTS), {"tool_empty_reply"}),
}


class Fleet:
    """The full fleet served on a free port, a keyed client as the prober's, and the ``/_sim`` hooks."""

    def __init__(self, url: str, client: httpx.AsyncClient) -> None:
        self.url = url
        self.client = client

    async def set_faults(self, tag: str, faults: list[dict[str, Any]]) -> None:
        r = await self.client.put(self.url.removesuffix("/api/v1") + "/_sim/faults", params={"provider": tag},
                                  json={"faults": faults})
        assert r.status_code == 200, r.text

    async def probe(self, tag: str, language: str, variant: str, *, require_parameters: bool = True):
        """One tool probe as the prober sends it; returns (reply, evaluation)."""
        probe = prompts.build("tools", language, variant=variant)
        body = request_body(MODEL, tag, probe, require_parameters=require_parameters)
        body |= {"tools": probe.tools, "stream": probe.stream}
        reply = await send_probe(self.client, body, ttft_deadline_s=None, total_timeout_s=8.0)
        return reply, evaluate(reply, probe.spec)

    async def post(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return await self.client.post("chat/completions", json=body, **kwargs)


@contextlib.asynccontextmanager
async def full_fleet() -> AsyncIterator[Fleet]:
    async with serve(create_app(load_scenario("full"))) as url:
        settings = Settings.load(env={}, openrouter_base_url=url, openrouter_api_key=SIMULATED_KEY,
                                 request_timeout_s=8.0)
        async with make_client(settings) as client:
            yield Fleet(url, client)


def tool_body(language: str, variant: str, tag: str, **extra: Any) -> dict[str, Any]:
    probe = prompts.build("tools", language, variant=variant)
    return {"model": MODEL, "messages": probe.messages, "max_tokens": 320, "tools": probe.tools,
            "stream": False, "provider": {"order": [tag], "only": [tag], "allow_fallbacks": False}, **extra}


async def test_healthy_hosts_pass_every_variant_and_each_tool_fault_fails_where_it_shows():
    """17 languages x 4 variants: healthy tool hosts pass everything; each tool-broken provider fails the
    variants its fault shows in, with its reason, and passes the others (a fault one variant shows is caught)."""
    gate = asyncio.Semaphore(32)
    async with full_fleet() as fleet:
        async def one(tag: str, language: str, variant: str):
            async with gate:
                reply, ev = await fleet.probe(tag, language, variant)
            return tag, language, variant, reply, ev

        results = await asyncio.gather(*(one(tag, lang, variant) for tag in (*HEALTHY, *BROKEN)
                                         for lang in LANGUAGES for variant in TOOL_VARIANTS))
    for tag, language, variant, reply, ev in results:
        where = (tag, language, variant, ev.reason, reply.text[:80], [c.arguments for c in reply.calls])
        if tag in HEALTHY:
            assert ev.outcome == "pass", where
            if variant in ("call", "call_stream"):
                assert reply.finish_reason == "tool_calls" and len(reply.calls) == 1, where
            else:
                assert reply.text and not reply.calls, where
            if variant == "second_turn":
                assert prompts.TOOL_RESULT_VALUE in reply.text, where
            continue
        variants, reasons = BROKEN[tag]
        if variant in variants:
            assert ev.outcome == "fail" and ev.reason in reasons, where
        else:
            assert ev.outcome == "pass", where


async def test_tool_calls_on_the_wire_streamed_and_not():
    """Unstreamed: message.tool_calls [{id, type function, function {name, arguments: a JSON string}}], content
    null, finish tool_calls.  Streamed: the first delta carries index, id, type and name, the rest index and
    argument fragments only; the fragments join into the unstreamed arguments."""
    async with full_fleet() as fleet:
        r = await fleet.post(tool_body("pt", "call", "toolsmith/fp8"))
        assert r.status_code == 200
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "tool_calls" and choice["native_finish_reason"] == "tool_calls"
        message = choice["message"]
        assert message["content"] is None and message["role"] == "assistant"
        [call] = message["tool_calls"]
        assert set(call) == {"id", "type", "function"} and call["type"] == "function"
        assert call["id"].startswith("call_") and len(call["id"]) == 29
        assert call["function"]["name"] == "convert_currency"
        assert isinstance(call["function"]["arguments"], str)
        assert json.loads(call["function"]["arguments"]) == {"amount": 250, "from": "EUR", "to": "BRL"}
        assert r.json()["usage"]["completion_tokens"] > 0

        events = []
        async with fleet.client.stream("POST", "chat/completions",
                                       json=tool_body("pt", "call_stream", "toolsmith/fp8", stream=True)) as s:
            async for line in s.aiter_lines():
                if line.startswith("data: "):
                    events.append(line[6:])
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    deltas = [d for c in chunks for ch in c["choices"] for d in ch["delta"].get("tool_calls") or ()]
    first, rest = deltas[0], deltas[1:]
    assert first["index"] == 0 and first["type"] == "function" and first["id"].startswith("call_")
    assert first["function"] == {"name": "convert_currency", "arguments": ""}
    assert rest and all(set(d) == {"index", "function"} and set(d["function"]) == {"arguments"} for d in rest)
    assert json.loads("".join(d["function"]["arguments"] for d in rest)) == {"amount": 250, "from": "EUR",
                                                                              "to": "BRL"}
    finishes = [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]]
    assert finishes == ["tool_calls"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


async def test_tool_choice_is_followed_and_bad_tool_requests_are_refused():
    """tool_choice none: text; a named function: that call; required: a call even where no tool fits.  A bad
    tool_choice, a named tool not offered, required without tools, a bad tool name: 400 (the Chat Completions tool schema)."""
    async with full_fleet() as fleet:
        r = await fleet.post(tool_body("en", "call", "toolsmith/fp8", tool_choice="none"))
        message = r.json()["choices"][0]["message"]
        assert message["content"] and "tool_calls" not in message
        assert r.json()["choices"][0]["finish_reason"] == "stop"
        named = {"type": "function", "function": {"name": "get_weather"}}
        r = await fleet.post(tool_body("en", "no_tool", "toolsmith/fp8", tool_choice=named))
        [call] = r.json()["choices"][0]["message"]["tool_calls"]
        assert call["function"]["name"] == "get_weather" and "city" in json.loads(call["function"]["arguments"])
        r = await fleet.post(tool_body("en", "no_tool", "toolsmith/fp8", tool_choice="required"))
        assert r.json()["choices"][0]["message"]["tool_calls"]
        r = await fleet.post(tool_body("ja", "call", "toolsmith/fp8", tool_choice="auto"))
        assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"

        bad = [tool_body("en", "call", "toolsmith/fp8", tool_choice="sometimes"),
               tool_body("en", "call", "toolsmith/fp8", tool_choice={"type": "function", "function": {"name": "x"}}),
               {**tool_body("en", "call", "toolsmith/fp8", tool_choice="required"), "tools": None}]
        broken_tool = tool_body("en", "call", "toolsmith/fp8")
        broken_tool["tools"] = [{"type": "function", "function": {"name": "get weather!"}}]
        bad.append(broken_tool)
        for body in bad:
            r = await fleet.post(body)
            assert r.status_code == 400 and r.json()["error"]["code"] == 400, (body.get("tool_choice"), r.text)


async def test_an_endpoint_without_tools_is_refused_by_the_gateway_and_judged_not_applicable():
    """Pinned to an endpoint that does not list tools: with require_parameters the gateway filters it out (404
    constraint_filtered); without, it answers "No endpoints found that support tool use" (404), which the tool
    probe reads as not_applicable / tools_unsupported."""
    async with full_fleet() as fleet:
        r = await fleet.post({**tool_body("en", "call", "plaintext/fp16"),
                              "provider": {"only": ["plaintext/fp16"], "require_parameters": True}})
        assert r.status_code == 404 and r.json()["error"]["availability"]["code"] == "constraint_filtered"
        r = await fleet.post(tool_body("en", "call", "plaintext/fp16"))
        assert r.status_code == 404
        assert r.json()["error"]["message"].startswith("No endpoints found that support tool use")
        _, ev = await fleet.probe("plaintext/fp16", "en", "call", require_parameters=False)
        assert (ev.outcome, ev.reason) == ("not_applicable", "tools_unsupported"), ev


async def test_tool_faults_leave_requests_without_tools_alone():
    """A tool_* fault acts only when tools are offered: every tool-broken provider echoes the echo probe."""
    async with full_fleet() as fleet:
        probe = prompts.build("echo", "en")
        for tag in BROKEN:
            body = {"model": MODEL, "messages": probe.messages, "max_tokens": 64,
                    "provider": {"order": [tag], "only": [tag], "allow_fallbacks": False}}
            r = await fleet.post(body)
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == prompts.ECHO_TEXT, tag


#: Every mode of every tool fault kind -> (variants it shows in, the reasons accepted there).
MODES: list[tuple[dict[str, Any], set[str], set[str]]] = [
    *[({"kind": "tool_markup", "mode": m}, {"call", "call_stream"}, {"tool_markup_in_content"})
      for m in ("qwen3_xml", "hermes", "kimi", "mistral", "deepseek")],
    *[({"kind": "tool_args", "mode": m}, {"call", "call_stream"}, {"tool_args_invalid_json"})
      for m in ("truncated", "double_encoded", "single_quotes")],
    *[({"kind": "tool_schema", "mode": m}, {"call", "call_stream"}, {"tool_args_schema_mismatch"})
      for m in ("wrong_type", "missing_required")],
    ({"kind": "tool_no_parser", "status": 422}, set(TOOL_VARIANTS), {"tool_capability_error"}),
    ({"kind": "tool_stream", "mode": "interleaved"}, {"call_stream"}, {"tool_stream_assembly"}),
    ({"kind": "tool_stream", "mode": "id_changed"}, {"call_stream"}, {"tool_stream_assembly"}),
    ({"kind": "tool_stream", "mode": "lost"}, {"call_stream"}, {"tool_args_invalid_json"}),
    ({"kind": "tool_eager"}, {"no_tool", "second_turn"}, {"tool_unexpected_call"}),
    ({"kind": "tool_empty"}, set(TOOL_VARIANTS), {"tool_empty_reply"}),
]


def test_every_tool_fault_kind_has_modes_here():
    """The table below covers every tool fault kind of the scenario schema."""
    assert {m[0]["kind"] for m in MODES} == set(TOOL_KINDS)


@pytest.mark.parametrize(("fault", "variants", "reasons"), MODES, ids=lambda v: v.get("mode", v["kind"])
                         if isinstance(v, dict) else None)
async def test_each_tool_fault_mode_is_caught_in_the_variants_it_shows_in(fault, variants, reasons):
    """Set on the healthy tool host at run time, each mode fails the variants it shows in with its reason, in
    languages of several scripts (and every tool of the set), and passes the others."""
    async with full_fleet() as fleet:
        await fleet.set_faults("toolsmith/fp8", [fault])
        cases = [(language, variant) for language in ("en", "es", "pt", "ru", "ar", "zh", "vi")
                 for variant in TOOL_VARIANTS]
        results = await asyncio.gather(*(fleet.probe("toolsmith/fp8", lang, variant) for lang, variant in cases))
    for (language, variant), (reply, ev) in zip(cases, results, strict=True):
        where = (language, variant, ev.reason, reply.text[:80], [c.arguments for c in reply.calls])
        if variant in variants:
            assert ev.outcome == "fail" and ev.reason in reasons, where
        else:
            assert ev.outcome == "pass", where
