"""Official SDKs against the simulated gateway: it must be as strict as the real one where a real client notices.

The ``openai`` SDK (the client most chat backends use against OpenRouter) reads the
simulator's tool-call replies, streamed and not, with strict response validation, and gets
401 without a key.  The ``openrouter`` SDK (generated from OpenRouter's current API
document) reads the models and endpoints listings: it refuses a listing without
``native_tools``, ``service_tier``, ``supports_tool_choice``, ``supports_diarization`` or the
models' ``supported_voices``.  Both are test extras.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import pytest

from reverie_canary.services.prober import prompts
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.gateway import create_app
from reverie_canary.simulator.scenario import load_scenario
from reverie_canary.simulator.server import serve

openai = pytest.importorskip("openai")
openrouter = pytest.importorskip("openrouter")

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"
PIN = {"provider": {"order": ["toolsmith/fp8"], "only": ["toolsmith/fp8"], "allow_fallbacks": False,
                    "require_parameters": True}}


@contextlib.asynccontextmanager
async def gateway() -> AsyncIterator[str]:
    async with serve(create_app(load_scenario("full"))) as url:
        yield url


def _client(url: str, key: str | None):
    # without a key the SDK refuses to build a client or to send, unless told to omit the Authorization header
    return openai.AsyncOpenAI(api_key=key, base_url=url, max_retries=0, timeout=10.0,
                              _strict_response_validation=True, _enforce_credentials=key is not None)


async def test_the_openai_sdk_reads_tool_calls_streamed_and_not():
    """The SDK's own types hold the call the prompt fixes, unstreamed (message.tool_calls) and streamed (its
    delta accumulation gives the same arguments); the second turn's text states the tool's result."""
    probe = prompts.build("tools", "fr", variant="call")
    tool, arguments, _ = prompts.TOOL_CALLS["fr"]
    async with gateway() as url:
        client = _client(url, SIMULATED_KEY)
        done = await client.chat.completions.create(model=MODEL, messages=probe.messages, tools=probe.tools,
                                                    max_tokens=320, extra_body=PIN)
        choice = done.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        [call] = choice.message.tool_calls
        assert call.type == "function" and call.function.name == tool
        assert json.loads(call.function.arguments) == arguments

        stream = await client.chat.completions.create(model=MODEL, messages=probe.messages, tools=probe.tools,
                                                      max_tokens=320, stream=True, extra_body=PIN)
        parts: dict[int, dict[str, str]] = {}
        finish = None
        async for chunk in stream:
            for c in chunk.choices:
                for d in c.delta.tool_calls or ():
                    got = parts.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                    got["id"] += d.id or ""
                    got["name"] += (d.function.name or "") if d.function else ""
                    got["arguments"] += (d.function.arguments or "") if d.function else ""
                finish = c.finish_reason or finish
        assert finish == "tool_calls" and list(parts) == [0]
        assert parts[0]["name"] == tool and parts[0]["id"].startswith("call_")  # once each: nothing resent
        assert json.loads(parts[0]["arguments"]) == arguments

        turn = prompts.build("tools", "de", variant="second_turn")
        done = await client.chat.completions.create(model=MODEL, messages=turn.messages, tools=turn.tools,
                                                    max_tokens=320, extra_body=PIN)
        assert done.choices[0].finish_reason == "stop" and not done.choices[0].message.tool_calls
        assert prompts.TOOL_RESULT_VALUE in done.choices[0].message.content


async def test_the_openai_sdk_gets_401_without_a_key():
    """A request without a key is refused as the real gateway refuses it: the SDK raises AuthenticationError."""
    probe = prompts.build("tools", "en", variant="no_tool")
    async with gateway() as url:
        client = _client(url, None)
        with pytest.raises(openai.AuthenticationError) as refused:
            await client.chat.completions.create(model=MODEL, messages=probe.messages, tools=probe.tools,
                                                 extra_body=PIN, extra_headers={"Authorization": openai.omit})
        assert refused.value.status_code == 401


async def test_the_openrouter_sdk_reads_the_listings():
    """The SDK generated from OpenRouter's API document validates the models and endpoints listings: every
    field it requires is there (it refused the listing before the simulator carried them)."""
    async with gateway() as url:
        with openrouter.OpenRouter(api_key=SIMULATED_KEY, server_url=url) as client:
            endpoints = await client.endpoints.list_async(author="deepseek", slug="deepseek-chat-v3.1")
            models = await client.models.list_async()
    listed = {e.tag: e for e in endpoints.data.endpoints}
    assert len(listed) == len(load_scenario("full").models[0].endpoints)
    toolsmith = listed["toolsmith/fp8"]
    assert toolsmith.supports_tool_choice.auto and toolsmith.supports_tool_choice.required
    assert toolsmith.native_tools == {} and toolsmith.service_tier is None and toolsmith.supports_diarization is False
    assert not listed["plaintext/fp16"].supports_tool_choice.auto
    [model] = models.result.data
    assert model.id == MODEL and model.supported_voices is None
