"""The simulated OpenRouter gateway on a real socket: wire shapes, routing, streaming, faults.

Every test talks HTTP to ``reverie_canary.simulator.server.serve`` with ``httpx`` (and
``httpx-sse``), using the probe prompts of ``reverie_canary.services.prober.prompts``, so that
what passes here is what a client of the real gateway would see.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import ftfy
import httpx
import jsonschema
import pytest
from httpx_sse import aconnect_sse

from reverie_canary.services.prober.prompts import ECHO_TEXT, SENTINEL, WEATHER_SCHEMA, build
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.gateway import create_app
from reverie_canary.simulator.scenario import FAULT_KINDS, decode_scenario, load_scenario
from reverie_canary.simulator.server import serve
from reverie_canary.simulator.text import BUILTIN, LANGUAGES, is_clean
from tests import waits

MODEL = "deepseek/deepseek-chat-v3.1"
#: Every client of the simulated gateway sends a key: it refuses chat completions without one.
AUTH = {"Authorization": f"Bearer {SIMULATED_KEY}"}
ROOT = Path(__file__).resolve().parents[2]

#: A fast fleet for tests: small ttfts, 2 ms between chunks, 50 ms keep-alives.
FLEET = """
seed = 11
keepalive_s = 0.05
chunk_interval_s = 0.002

[[models]]
id = "deepseek/deepseek-chat-v3.1"
name = "DeepSeek: DeepSeek V3.1"

[[models.endpoints]]
tag = "alpha/fp8"
provider_name = "Alpha"
quantization = "fp8"
ttft_s = 0.01

[[models.endpoints]]
tag = "beta/fp8"
provider_name = "Beta"
quantization = "fp8"
ttft_s = 0.01

[[models.endpoints]]
tag = "beta/turbo"
provider_name = "Beta Turbo"
quantization = "fp4"
ttft_s = 0.01

[[models.endpoints]]
tag = "lab/fp8"
provider_name = "Lab"
quantization = "fp8"
ttft_s = 0.01
note = "faults set per test through PUT /_sim/faults"

[[models.endpoints]]
tag = "slowpoke/fp8"
provider_name = "Slowpoke"
quantization = "fp8"
faults = [{ kind = "slow", ttft_s = 0.6 }]

[[models.endpoints]]
tag = "thinker/fp8"
provider_name = "Thinker"
quantization = "fp8"
faults = [{ kind = "slow", reasoning_s = 0.2, ttft_s = 0.5 }]

[[models.endpoints]]
tag = "flaky/fp8"
provider_name = "Flaky"
quantization = "fp8"
ttft_s = 0.01
faults = [{ kind = "flaky", rate = 1.0 }]

[[models.endpoints]]
tag = "plain/fp16"
provider_name = "Plain"
quantization = "fp16"
ttft_s = 0.01
supported_parameters = ["max_tokens", "temperature", "stop", "seed"]

[[models]]
id = "acme/tiny:free"
name = "Acme: Tiny (free)"

[[models.endpoints]]
tag = "acme"
provider_name = "Acme"
ttft_s = 0.01
"""


class Sim:
    """A running gateway: an httpx client on ``/api/v1`` plus the ``/_sim`` hooks."""

    def __init__(self, client: httpx.AsyncClient, base_url: str) -> None:
        self.client = client
        self.base_url = base_url
        self.root = base_url.removesuffix("/api/v1")

    async def set_faults(self, tag: str, faults: list[dict[str, Any]]) -> None:
        r = await self.client.put(f"{self.root}/_sim/faults", params={"provider": tag}, json={"faults": faults})
        assert r.status_code == 200, r.text

    async def stats(self) -> dict[str, Any]:
        return (await self.client.get(f"{self.root}/_sim/stats")).json()


@contextlib.asynccontextmanager
async def running(toml: str = FLEET, **app_kwargs: Any) -> AsyncIterator[Sim]:
    """Serve a fleet on a free port for the duration of the block."""
    app = create_app(decode_scenario(toml, source="test fleet"), **app_kwargs)
    async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=10.0, headers=AUTH) as client:
        yield Sim(client, url)


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    async with running() as s:
        yield s


def probe_body(kind: str, language: str = "en", *, tag: str | None = None, fallbacks: bool = False,
               require_parameters: bool = False, stream: bool = False, **extra: Any) -> dict[str, Any]:
    """A chat body for one probe, pinned to ``tag`` the way the canary pins (OpenRouter's provider routing documentation)."""
    probe = build(kind, language)
    body: dict[str, Any] = {"model": MODEL, "messages": probe.messages, "max_tokens": probe.max_tokens,
                            "stream": stream}
    if probe.response_format is not None:
        body["response_format"] = probe.response_format
    if tag is not None:
        body["provider"] = {"order": [tag], "only": [tag], "allow_fallbacks": fallbacks,
                            "require_parameters": require_parameters}
    body.update(extra)
    return body


async def ask(sim: Sim, kind: str, language: str = "en", *, tag: str | None = "lab/fp8",
              headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
    return await sim.client.post("/chat/completions", json=probe_body(kind, language, tag=tag, **kwargs),
                                 headers=headers)


def content(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


async def raw_stream(sim: Sim, body: dict[str, Any], headers: dict[str, str] | None = None,
                     ) -> tuple[httpx.Response, list[tuple[float, str]]]:
    """POST a streaming body; return the response and its non-empty lines with seconds since the request."""
    lines: list[tuple[float, str]] = []
    start = time.monotonic()
    async with sim.client.stream("POST", "/chat/completions", json=body, headers=headers) as r:
        async for line in r.aiter_lines():
            if line:
                lines.append((time.monotonic() - start, line))
    return r, lines


def events(lines: list[tuple[float, str]]) -> list[tuple[float, Any]]:
    """The ``data:`` payloads of a stream, JSON-decoded (``[DONE]`` kept as the string)."""
    out = []
    for t, line in lines:
        if line.startswith("data: "):
            payload = line[len("data: "):]
            out.append((t, payload if payload == "[DONE]" else json.loads(payload)))
    return out


def sentences_of(body: str, language: str, *others: str) -> list[tuple[str, str]] | None:
    """Split ``body`` into built-in sentences; ``[(language, sentence)]`` or ``None`` if it is not made of them."""
    pools = [(lang, s) for lang in (language, *others) for s in BUILTIN[lang].sentences]
    out = []
    rest = body.strip()
    while rest:
        match = next(((lang, s) for lang, s in pools if rest.startswith(s)), None)
        if match is None:
            return None
        out.append(match)
        rest = rest[len(match[1]):].lstrip()
    return out


def prose_body(text: str, language: str) -> str:
    """Strip an opening ``*action*`` and a closing sentinel."""
    text = text.removesuffix(SENTINEL).rstrip()
    action = f"*{BUILTIN[language].action}*"
    return text.removeprefix(action).strip()


def shared_dir() -> Path:
    return Path(os.environ.get("CANARY_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared")


# --- listings (OpenRouter's endpoints listing API) -----------------------------------------


PUBLIC_ENDPOINT_FIELDS = {
    "name", "model_id", "model_name", "provider_name", "tag", "context_length", "max_completion_tokens",
    "max_prompt_tokens", "quantization", "pricing", "supported_parameters", "status", "uptime_last_5m",
    "uptime_last_30m", "uptime_last_1d", "latency_last_30m", "throughput_last_30m", "supports_implicit_caching",
    # required by OpenRouter's current API document (its generated SDK refuses a listing without them)
    "native_tools", "service_tier", "supports_tool_choice", "supports_diarization",
}


async def test_endpoints_listing_has_every_public_endpoint_field(sim: Sim) -> None:
    """GET /models/{author}/{slug}/endpoints returns the §1.1 envelope with every PublicEndpoint field."""
    r = await sim.client.get(f"/models/{MODEL}/endpoints", headers={"Authorization": "Bearer sk-or-test"})
    assert r.status_code == 200
    data = r.json()["data"]
    assert {"id", "name", "created", "description", "architecture", "endpoints"} <= set(data)
    assert data["id"] == MODEL
    eps = {e["tag"]: e for e in data["endpoints"]}
    assert list(eps)[:3] == ["alpha/fp8", "beta/fp8", "beta/turbo"]
    for e in eps.values():
        assert set(e) == PUBLIC_ENDPOINT_FIELDS
        assert e["status"] == 0
        assert e["model_id"] == MODEL
    alpha = eps["alpha/fp8"]
    assert alpha["name"] == "Alpha | deepseek/deepseek-chat-v3.1"
    assert alpha["provider_name"] == "Alpha" and alpha["quantization"] == "fp8"
    assert {"response_format", "structured_outputs", "max_tokens", "temperature", "stop", "seed"} <= set(
        alpha["supported_parameters"])
    assert set(alpha["pricing"]) >= {"prompt", "completion"}
    assert eps["slowpoke/fp8"]["latency_last_30m"]["p50"] == 600
    assert eps["flaky/fp8"]["uptime_last_30m"] == 0.0
    assert "response_format" not in eps["plain/fp16"]["supported_parameters"]
    async with httpx.AsyncClient(base_url=sim.base_url, timeout=10.0) as keyless:
        anonymous = (await keyless.get(f"/models/{MODEL}/endpoints")).json()["data"]["endpoints"][0]
    assert anonymous["latency_last_30m"] is None and anonymous["throughput_last_30m"] is None


async def test_endpoints_listing_of_unknown_model_is_404_error_json(sim: Sim) -> None:
    """An unknown model's endpoints listing is 404 with an OpenRouter error body."""
    r = await sim.client.get("/models/nobody/nothing/endpoints")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == 404
    assert r.json()["error"]["message"]


async def test_model_id_with_colon_is_listed_and_routable(sim: Sim) -> None:
    """A model id with a ':variant' suffix works in the endpoints path and in chat requests."""
    r = await sim.client.get("/models/acme/tiny:free/endpoints")
    assert r.status_code == 200
    assert [e["tag"] for e in r.json()["data"]["endpoints"]] == ["acme"]
    body = probe_body("echo") | {"model": "acme/tiny:free"}
    r = await sim.client.post("/chat/completions", json=body)
    assert r.json()["provider"] == "Acme" and r.json()["model"] == "acme/tiny:free"


async def test_models_and_providers_listings_name_the_fleet(sim: Sim) -> None:
    """GET /models and GET /providers list the scenario's models and provider display names with slugs."""
    models = (await sim.client.get("/models")).json()
    assert [m["id"] for m in models["data"]] == [MODEL, "acme/tiny:free"]
    assert models["data"][0]["links"]["details"] == f"/api/v1/models/{MODEL}/endpoints"
    assert "structured_outputs" in models["data"][0]["supported_parameters"]
    providers = {p["name"]: p["slug"] for p in (await sim.client.get("/providers")).json()["data"]}
    assert providers["Alpha"] == "alpha" and providers["Beta Turbo"] == "beta" and providers["Acme"] == "acme"


# --- routing (OpenRouter's provider routing documentation) -------------------------------------------


async def test_pin_with_order_and_no_fallback_serves_exactly_that_provider(sim: Sim) -> None:
    """order+only+allow_fallbacks:false serves exactly the pinned endpoint and names it, on every chunk."""
    for tag, name in [("alpha/fp8", "Alpha"), ("beta/fp8", "Beta"), ("beta/turbo", "Beta Turbo"), ("lab/fp8", "Lab")]:
        for _ in range(3):
            r = await ask(sim, "echo", tag=tag)
            assert r.json()["provider"] == name
            assert r.headers["x-generation-id"].startswith("gen-")
            assert r.json()["id"] == r.headers["x-generation-id"]
    stats = await sim.stats()
    assert stats["served"] == {"alpha/fp8": 3, "beta/fp8": 3, "beta/turbo": 3, "lab/fp8": 3}


async def test_only_matches_tag_base_slug_and_display_name(sim: Sim) -> None:
    """provider.only entries match a tag, a base slug (all its variants) or a display name, case-insensitively."""
    async def served(only: list[str], n: int = 12) -> set[str]:
        names = set()
        for _ in range(n):
            body = probe_body("echo") | {"provider": {"only": only}}
            names.add((await sim.client.post("/chat/completions", json=body)).json()["provider"])
        return names

    assert await served(["beta"]) == {"Beta", "Beta Turbo"}
    assert await served(["BETA/TURBO"]) == {"Beta Turbo"}
    assert await served(["alpha"]) == {"Alpha"}
    assert await served(["Slowpoke"], n=1) == {"Slowpoke"}


async def test_unpinned_requests_are_load_balanced_deterministically(sim: Sim) -> None:
    """Without order the seeded router spreads requests over the pool; ignore removes endpoints."""
    body = probe_body("echo") | {"provider": {"ignore": ["slowpoke/fp8", "thinker/fp8", "flaky", "plain"]}}
    names = [(await sim.client.post("/chat/completions", json=body)).json()["provider"] for _ in range(16)]
    assert set(names) <= {"Alpha", "Beta", "Beta Turbo", "Lab"}
    assert len(set(names)) >= 3
    async with running() as again:
        names2 = [(await again.client.post("/chat/completions", json=body)).json()["provider"] for _ in range(16)]
    assert names2 == names


async def test_fallback_allowed_moves_past_a_failing_pinned_endpoint(sim: Sim) -> None:
    """With allow_fallbacks true a 5xx from the ordered endpoint is retried on another, which is named."""
    body = probe_body("echo") | {"provider": {"order": ["flaky/fp8", "beta/fp8"], "allow_fallbacks": True}}
    r = await sim.client.post("/chat/completions", json=body, headers={"X-OpenRouter-Metadata": "enabled"})
    assert r.status_code == 200
    assert r.json()["provider"] == "Beta"
    meta = r.json()["openrouter_metadata"]
    assert meta["attempt"] == 2
    assert [a["provider"] for a in meta["attempts"]] == ["Flaky", "Beta"]
    assert meta["attempts"][0]["status"] in (500, 502, 503) and meta["attempts"][1]["status"] == 200
    gen = await sim.client.get("/generation", params={"id": r.json()["id"]})
    assert [p["provider_name"] for p in gen.json()["data"]["provider_responses"]] == ["Flaky", "Beta"]


async def test_order_without_fallbacks_tries_only_the_listed_endpoints(sim: Sim) -> None:
    """order + allow_fallbacks:false (no only) never leaves the listed endpoints: the upstream error comes back."""
    body = probe_body("echo") | {"provider": {"order": ["flaky/fp8"], "allow_fallbacks": False}}
    for _ in range(5):
        r = await sim.client.post("/chat/completions", json=body)
        assert r.status_code in (500, 502, 503)
    body = probe_body("echo") | {"provider": {"order": ["flaky/fp8", "alpha/fp8"], "allow_fallbacks": False}}
    r = await sim.client.post("/chat/completions", json=body)
    assert r.json()["provider"] == "Alpha"
    stats = await sim.stats()
    assert set(stats["attempts"]) == {"flaky/fp8", "alpha/fp8"}


async def test_flaky_rate_one_without_fallback_gives_only_5xx_error_json(sim: Sim) -> None:
    """A pinned flaky endpoint with rate 1.0 answers only 500/502/503, each an error body with code == status."""
    statuses = collections.Counter()
    for _ in range(20):
        r = await ask(sim, "echo", tag="flaky/fp8")
        statuses[r.status_code] += 1
        assert r.json()["error"]["code"] == r.status_code
        assert r.json()["error"]["message"]
    assert set(statuses) <= {500, 502, 503}
    assert len(statuses) >= 2
    stats = await sim.stats()
    assert stats["failed"]["flaky/fp8"] == 20 and "flaky/fp8" not in stats["served"]


async def test_flaky_429_carries_retry_after(sim: Sim) -> None:
    """A flaky 429 is an error body with code 429 and a Retry-After header in seconds."""
    await sim.set_faults("lab/fp8", [{"kind": "flaky", "rate": 1.0, "statuses": [429], "retry_after_s": 3}])
    r = await ask(sim, "echo")
    assert r.status_code == 429 and r.json()["error"]["code"] == 429
    assert r.headers["retry-after"] == "3"
    assert r.json()["error"]["metadata"]["error_type"] == "rate_limit_exceeded"


async def test_flaky_timeout_hangs_without_headers_then_falls_back(sim: Sim) -> None:
    """A timeout failure sends no headers for hang_s; a pinned client times out, a fallback request moves on."""
    await sim.set_faults("lab/fp8", [{"kind": "flaky", "rate": 1.0, "timeout_share": 1.0, "hang_s": 0.5}])
    start = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        await sim.client.post("/chat/completions", json=probe_body("echo", tag="lab/fp8"), timeout=0.25)
    assert time.monotonic() - start < 0.45
    body = probe_body("echo") | {"provider": {"order": ["lab/fp8", "alpha/fp8"], "allow_fallbacks": True}}
    start = time.monotonic()
    r = await sim.client.post("/chat/completions", json=body)
    assert r.json()["provider"] == "Alpha"
    assert time.monotonic() - start >= 0.5
    r = await ask(sim, "echo")
    assert r.status_code == 408 and r.json()["error"]["code"] == 408


async def test_require_parameters_filters_to_404_constraint_filtered(sim: Sim) -> None:
    """require_parameters with json_schema on an endpoint lacking structured_outputs is 404 constraint_filtered."""
    r = await ask(sim, "structured", tag="plain/fp16", require_parameters=True)
    assert r.status_code == 404
    error = r.json()["error"]
    assert error["code"] == 404
    assert error["message"] == "No endpoints found that can handle the requested parameters."
    assert error["availability"]["code"] == "constraint_filtered"
    assert error["availability"]["excluded_by"] == ["require_parameters"]
    assert (await sim.stats())["attempts"] == {}
    r = await ask(sim, "structured", tag="alpha/fp8", require_parameters=True)
    assert r.status_code == 200


async def test_pin_matching_nothing_is_404_no_endpoints(sim: Sim) -> None:
    """A pin to a tag the model does not have is 404 with availability no_endpoints."""
    r = await ask(sim, "echo", tag="nowhere/fp8")
    assert r.status_code == 404
    assert r.json()["error"]["availability"]["code"] == "no_endpoints"
    assert r.json()["error"]["availability"]["excluded_by"] == ["allowed_providers"]


async def test_unsupported_response_format_is_dropped_and_the_model_writes_fenced_json(sim: Sim) -> None:
    """Without require_parameters an endpoint lacking response_format answers JSON in a Markdown fence."""
    text = content(await ask(sim, "structured", tag="plain/fp16"))
    assert text.startswith("```json\n") and text.endswith("\n```")
    jsonschema.validate(json.loads(text.removeprefix("```json\n").removesuffix("\n```")), WEATHER_SCHEMA)


async def test_bad_requests_are_400_error_json(sim: Sim) -> None:
    """Invalid JSON, a wrongly typed body and an unknown model are 400 with error.code 400."""
    r = await sim.client.post("/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == 400
    r = await sim.client.post("/chat/completions", json={"model": MODEL, "messages": "hello"})
    assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
    r = await sim.client.post("/chat/completions", json=probe_body("echo") | {"model": "nobody/nothing"})
    assert r.status_code == 400
    assert r.json()["error"]["availability"]["code"] == "model_not_found"
    r = await sim.client.get("/chat/completions")
    assert r.status_code == 405 and r.json()["error"]["code"] == 405


async def test_require_key_rejects_requests_without_bearer_key(sim: Sim) -> None:
    """As the real gateway: a chat request or a /generation look-up without a Bearer key is 401 (require_key is
    on unless a scenario turns it off); the listings answer without one; any key is served."""
    async with httpx.AsyncClient(base_url=sim.base_url, timeout=10.0) as anonymous:
        r = await anonymous.post("/chat/completions", json=probe_body("echo", tag="alpha/fp8"))
        assert r.status_code == 401 and r.json()["error"]["code"] == 401
        assert r.json()["error"]["metadata"]["error_type"] == "authentication"
        assert (await anonymous.get("/generation", params={"id": "gen-1"})).status_code == 401
        assert (await anonymous.get(f"/models/{MODEL}/endpoints")).status_code == 200
        assert (await anonymous.get("/models")).status_code == 200
    r = await ask(sim, "echo", tag="alpha/fp8", headers={"Authorization": "Bearer sk-or-v1-test"})
    assert r.status_code == 200
    async with running(FLEET.replace("seed = 11", "seed = 11\nrequire_key = false")) as s, \
            httpx.AsyncClient(base_url=s.base_url, timeout=10.0) as anonymous:
        r = await anonymous.post("/chat/completions", json=probe_body("echo", tag="alpha/fp8"))
        assert r.status_code == 200


# --- streaming (OpenRouter's streaming documentation) -------------------------------------------


async def test_stream_sends_keepalives_until_first_content_then_usage_and_done(sim: Sim) -> None:
    """A slow stream sends ': OPENROUTER PROCESSING' until content at ~ttft_s, then chunks, usage, [DONE]."""
    r, lines = await raw_stream(sim, probe_body("ttft", "de", tag="slowpoke/fp8", stream=True))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    evs = events(lines)
    first_content_t = next(t for t, e in evs if e != "[DONE]" and e["choices"] and e["choices"][0]["delta"]["content"])
    keepalives = [t for t, line in lines if line == ": OPENROUTER PROCESSING"]
    assert len(keepalives) >= 5
    assert all(t < first_content_t for t in keepalives)
    assert 0.55 <= first_content_t <= 0.9
    assert evs[-1][1] == "[DONE]"
    chunks = [e for _, e in evs[:-1]]
    assert all(c["provider"] == "Slowpoke" and c["model"] == MODEL for c in chunks)
    assert all(c["id"] == r.headers["x-generation-id"] for c in chunks)
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    assert usage["cost"] > 0 and usage["completion_tokens_details"]["reasoning_tokens"] == 0
    content_chunks = chunks[:-1]
    assert [c["choices"][0]["finish_reason"] for c in content_chunks[:-1]] == [None] * (len(content_chunks) - 1)
    assert content_chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert content_chunks[-1]["choices"][0]["native_finish_reason"] == "stop"
    text = "".join(c["choices"][0]["delta"]["content"] for c in content_chunks)
    assert text.startswith(f"*{BUILTIN['de'].action}*")
    assert len(content_chunks) >= 5


async def test_reasoning_stream_sends_reasoning_before_content(sim: Sim) -> None:
    """A reasoning provider streams delta.reasoning from ~reasoning_s and content from ~ttft_s (httpx-sse)."""
    body = probe_body("language", "fr", tag="thinker/fp8", stream=True)
    reasoning_t = content_t = None
    reasoning, text, usage = "", "", None
    start = time.monotonic()
    async with aconnect_sse(sim.client, "POST", "/chat/completions", json=body) as source:
        async for sse in source.aiter_sse():
            if sse.data == "[DONE]":
                break
            chunk = json.loads(sse.data)
            assert chunk["provider"] == "Thinker"
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk["choices"]:
                if choice["delta"].get("reasoning"):
                    reasoning_t = reasoning_t or time.monotonic() - start
                    reasoning += choice["delta"]["reasoning"]
                if choice["delta"].get("content"):
                    content_t = content_t or time.monotonic() - start
                    text += choice["delta"]["content"]
    assert reasoning_t is not None and content_t is not None
    assert 0.15 <= reasoning_t <= 0.4 and 0.45 <= content_t <= 0.8
    assert "French" in reasoning
    assert sentences_of(text, "fr")
    assert usage is not None and usage["completion_tokens_details"]["reasoning_tokens"] > 0


async def test_midstream_failure_is_one_error_event_then_the_end(sim: Sim) -> None:
    """A mid-stream failure sends content, then one event with top-level error and finish_reason error, no [DONE]."""
    await sim.set_faults("lab/fp8", [{"kind": "flaky", "rate": 1.0, "midstream_share": 1.0}])
    r, lines = await raw_stream(sim, probe_body("language", "en", tag="lab/fp8", stream=True))
    assert r.status_code == 200
    evs = [e for _, e in events(lines)]
    assert "[DONE]" not in evs
    last = evs[-1]
    assert last["error"]["code"] == 502 and last["error"]["message"]
    assert last["error"]["metadata"]["error_type"] == "provider_unavailable"
    assert last["choices"][0]["finish_reason"] == "error"
    assert last["provider"] == "Lab"
    assert any(e["choices"] and e["choices"][0]["delta"]["content"] for e in evs[:-1])
    assert all("usage" not in e for e in evs)


# --- non-stream (OpenRouter's streaming documentation) -----------------------------------------


async def test_non_stream_response_shape(sim: Sim) -> None:
    """A non-streamed answer is a chat.completion with message content, finish reasons, usage and provider."""
    r = await ask(sim, "refusal", "it", tag="beta/fp8", headers={"X-OpenRouter-Metadata": "enabled"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    d = r.json()
    assert d["object"] == "chat.completion" and d["model"] == MODEL and d["provider"] == "Beta"
    assert d["id"] == r.headers["x-generation-id"] and re.fullmatch(r"gen-\d+-[A-Za-z0-9]+", d["id"])
    choice = d["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] == "stop" and choice["native_finish_reason"] == "stop"
    assert choice["message"]["content"].endswith(f" {SENTINEL}")
    assert set(d["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens", "cost",
                               "completion_tokens_details"}
    meta = d["openrouter_metadata"]
    assert meta["attempt"] == 1 and meta["attempts"] == [{"provider": "Beta", "model": MODEL, "status": 200}]


async def test_non_stream_midstream_failure_is_200_with_choice_error(sim: Sim) -> None:
    """A non-streamed generation that breaks is 200 with finish_reason error, a choice error and partial content."""
    await sim.set_faults("lab/fp8", [{"kind": "flaky", "rate": 1.0, "midstream_share": 1.0}])
    r = await ask(sim, "language", "en")
    assert r.status_code == 200
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "error"
    assert choice["error"]["code"] == 502
    assert choice["message"]["content"]


async def test_max_tokens_cuts_the_reply_with_finish_reason_length(sim: Sim) -> None:
    """A small max_tokens cuts the reply and reports finish_reason length."""
    r = await ask(sim, "language", "en", max_tokens=5)
    assert r.json()["choices"][0]["finish_reason"] == "length"
    assert len(content(r).split()) <= 5
    assert r.json()["usage"]["completion_tokens"] == 5


# --- generation stats (OpenRouter's generation-stats API) -------------------------------------


async def test_generation_lookup_reports_the_served_provider(sim: Sim) -> None:
    """GET /generation?id= returns the §7 record of a finished generation; unknown ids are 404."""
    r, lines = await raw_stream(sim, probe_body("echo", tag="alpha/fp8", stream=True),
                                headers={"X-OpenRouter-Metadata": "enabled"})
    gen_id = r.headers["x-generation-id"]
    final = events(lines)[-2][1]
    assert final["choices"] == [] and final["openrouter_metadata"]["attempt"] == 1
    assert final["openrouter_metadata"]["attempts"] == [{"provider": "Alpha", "model": MODEL, "status": 200}]
    g = await sim.client.get("/generation", params={"id": gen_id})
    assert g.status_code == 200
    data = g.json()["data"]
    assert data["id"] == gen_id and data["model"] == MODEL and data["provider_name"] == "Alpha"
    assert data["streamed"] is True and data["cancelled"] is False
    assert data["finish_reason"] == "stop" and data["native_finish_reason"] == "stop"
    assert data["latency"] > 0 and data["tokens_completion"] > 0
    [resp] = data["provider_responses"]
    assert resp["provider_name"] == "Alpha" and resp["status"] == 200 and resp["endpoint_id"].startswith("ep_")
    missing = await sim.client.get("/generation", params={"id": "gen-0-nope"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == 404


async def test_generation_record_appears_after_the_scenario_delay() -> None:
    """With generation_delay_s the record is 404 at first and found after the delay, as on the real gateway."""
    async with running(FLEET.replace("seed = 11", "seed = 11\ngeneration_delay_s = 0.3")) as s:
        r = await ask(s, "echo", tag="alpha/fp8")
        gen_id = r.headers["x-generation-id"]
        assert (await s.client.get("/generation", params={"id": gen_id})).status_code == 404
        await asyncio.sleep(0.35)
        assert (await s.client.get("/generation", params={"id": gen_id})).status_code == 200


async def test_the_gateway_keeps_only_the_latest_generation_records() -> None:
    """Five requests with three records kept: the two oldest ids are 404, the three latest found.

    The soak found it (benchmarks/soak.py): every record was kept for the life of the gateway,
    about 2 kB a request, and ``canary demo`` (the gateway in its process) grew by it every cycle.
    """
    async with running(generations_kept=3) as s:
        ids = [(await ask(s, "echo", tag="alpha/fp8")).headers["x-generation-id"] for _ in range(5)]
        found = [(await s.client.get("/generation", params={"id": i})).status_code for i in ids]
    assert found == [404, 404, 200, 200, 200]


# --- test hooks and determinism -----------------------------------------------------


async def test_put_sim_faults_changes_behaviour_at_run_time(sim: Sim) -> None:
    """PUT /_sim/faults makes a provider fail, then recover; /_sim/stats counts the attempts per tag."""
    assert (await ask(sim, "echo")).status_code == 200
    await sim.set_faults("lab/fp8", [{"kind": "flaky", "rate": 1.0, "statuses": [503]}])
    assert (await ask(sim, "echo")).status_code == 503
    await sim.set_faults("lab/fp8", [])
    assert content(await ask(sim, "echo")) == ECHO_TEXT
    stats = await sim.stats()
    assert stats["attempts"]["lab/fp8"] == 3 and stats["failed"]["lab/fp8"] == 1 and stats["served"]["lab/fp8"] == 2
    bad = await sim.client.put(f"{sim.root}/_sim/faults", params={"provider": "lab/fp8"},
                               json={"faults": [{"kind": "slow", "ttft_s": "soon"}]})
    assert bad.status_code == 400 and "ttft_s" in bad.json()["error"]["message"]
    unknown = await sim.client.put(f"{sim.root}/_sim/faults", params={"provider": "nope"}, json={"faults": []})
    assert unknown.status_code == 404


async def test_same_seed_gives_the_same_replies() -> None:
    """Two gateways with the same scenario answer the same request sequence identically; another seed differs."""
    async def replies(toml: str) -> list[str]:
        async with running(toml) as s:
            out = []
            for kind, lang in [("language", "en"), ("ttft", "pt"), ("refusal", "ko"), ("structured", "en"),
                               ("language", "ru"), ("language", "en")]:
                out.append(content(await ask(s, kind, lang, tag="alpha/fp8")))
            return out

    first = await replies(FLEET)
    assert await replies(FLEET) == first
    assert await replies(FLEET.replace("seed = 11", "seed = 12")) != first


# --- what a healthy model answers -----------------------------------------------------


async def test_healthy_replies_follow_the_probe_instructions(sim: Sim) -> None:
    """A healthy endpoint opens with *action* on request, ends with [[END]], echoes exactly, writes valid JSON."""
    for lang in LANGUAGES:
        ttft = content(await ask(sim, "ttft", lang, tag="alpha/fp8"))
        assert ttft.startswith(f"*{BUILTIN[lang].action}*"), (lang, ttft)
        assert sentences_of(prose_body(ttft, lang), lang), (lang, ttft)
        refusal = content(await ask(sim, "refusal", lang, tag="alpha/fp8"))
        assert refusal.endswith(f" {SENTINEL}")
        assert 2 <= len(sentences_of(prose_body(refusal, lang), lang) or []) <= 4, (lang, refusal)
        language = content(await ask(sim, "language", lang, tag="alpha/fp8"))
        assert 3 <= len(sentences_of(language, lang) or []) <= 4, (lang, language)
    assert content(await ask(sim, "echo", tag="alpha/fp8")) == ECHO_TEXT
    for _ in range(5):
        jsonschema.validate(json.loads(content(await ask(sim, "structured", tag="alpha/fp8"))), WEATHER_SCHEMA)


async def test_structured_output_follows_any_schema(sim: Sim) -> None:
    """json_schema requests get a valid instance of the schema sent: nested objects, arrays, enums, integers."""
    schema = {
        "type": "object",
        "properties": {
            "keeper": {"type": "string"},
            "year": {"type": "integer", "minimum": 1900, "maximum": 2000},
            "lit": {"type": "boolean"},
            "mood": {"enum": ["calm", "worried"]},
            "ships": {"type": "array", "minItems": 2, "items": {
                "type": "object", "properties": {"name": {"type": "string"}, "tons": {"type": "number"}},
                "required": ["name", "tons"], "additionalProperties": False}},
        },
        "required": ["keeper", "year", "lit", "mood", "ships"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "log", "strict": True, "schema": schema}}
    for _ in range(5):
        text = content(await ask(sim, "language", "en", response_format=fmt))
        jsonschema.validate(json.loads(text), schema)
    text = content(await ask(sim, "language", "en", response_format={"type": "json_object"}))
    assert isinstance(json.loads(text), dict)
    body = {"model": MODEL, "response_format": {"type": "json_object"}, "messages": [
        {"role": "system", "content": f"Answer with JSON matching this schema: {json.dumps(schema)}"},
        {"role": "user", "content": "Write the lighthouse log entry."}]}
    text = content(await sim.client.post("/chat/completions", json=body))
    jsonschema.validate(json.loads(text), schema)


async def test_sentences_dir_mode_draws_clean_lines_from_the_shared_data() -> None:
    """With sentences_dir a Portuguese request is answered with 2-4 consecutive clean lines of pt.txt."""
    sentences = shared_dir() / "data" / "lang" / "sentences"
    if not (sentences / "pt.txt").is_file():
        pytest.skip(f"shared language data not found at {sentences} (set CANARY_SHARED_DIR)")
    lines = [line.strip() for line in (sentences / "pt.txt").read_text(encoding="utf-8").splitlines()]
    clean = [line for line in lines if line and is_clean(line)]
    assert len(clean) < len([line for line in lines if line])  # the file has lines a healthy provider never sends
    async with running(sentences_dir=sentences) as s:
        for _ in range(6):
            text = content(await ask(s, "language", "pt", tag="alpha/fp8"))
            start = next(i for i, line in enumerate(clean) if text.startswith(line))
            for n in (2, 3, 4):
                if " ".join(clean[start:start + n]) == text:
                    break
            else:
                pytest.fail(f"not 2-4 consecutive clean pt lines: {text!r}")
        english = content(await ask(s, "echo", tag="alpha/fp8"))
        assert english == ECHO_TEXT


# --- fault profiles ---------------------------------------------------------------


async def test_broken_structured_modes_break_only_structured_replies(sim: Sim) -> None:
    """Each broken_structured mode produces its defect under response_format and leaves prose untouched."""
    expectations = {
        "missing_field": lambda t, f: f == "stop" and len(json.loads(t)) == 2,
        "wrong_type": lambda t, f: f == "stop" and isinstance(json.loads(t)["temp_c"], str),
        "fenced": lambda t, f: f == "stop" and t.startswith("```json\n{") and t.endswith("}\n```"),
        "prose": lambda t, f: f == "stop" and "{" in t and not t.startswith("{"),
        "truncated": lambda t, f: f == "length" and t.startswith("{") and not t.endswith("}"),
    }
    for mode, ok in expectations.items():
        await sim.set_faults("lab/fp8", [{"kind": "broken_structured", "mode": mode}])
        r = await ask(sim, "structured", require_parameters=True)
        text, finish = content(r), r.json()["choices"][0]["finish_reason"]
        assert ok(text, finish), (mode, text, finish)
        if mode in ("missing_field", "wrong_type"):
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(json.loads(text), WEATHER_SCHEMA)
        else:
            with pytest.raises(ValueError):
                json.loads(text)
        assert sentences_of(content(await ask(sim, "language", "en")), "en")


async def test_leading_junk_prefixes_every_reply(sim: Sim) -> None:
    """leading_junk puts its junk before the expected first character."""
    await sim.set_faults("lab/fp8", [{"kind": "leading_junk", "junk": "assistant\n\n"}])
    text = content(await ask(sim, "ttft", "en"))
    assert text.startswith("assistant\n\n*Mira")


async def test_language_drift_switch_applies_only_to_its_languages(sim: Sim) -> None:
    """language_drift switch es->pt answers Spanish requests in Portuguese and leaves English alone."""
    await sim.set_faults("lab/fp8", [{"kind": "language_drift", "mode": "switch", "languages": ["es"], "to": "pt"}])
    for _ in range(3):
        assert sentences_of(content(await ask(sim, "language", "es")), "pt")
        assert sentences_of(content(await ask(sim, "language", "en")), "en")
    ttft = content(await ask(sim, "ttft", "es"))
    assert ttft.startswith(f"*{BUILTIN['pt'].action}*")


async def test_language_drift_mix_alternates_languages(sim: Sim) -> None:
    """language_drift mix alternates sentences of the requested language and the other one."""
    await sim.set_faults("lab/fp8", [{"kind": "language_drift", "mode": "mix", "to": "es"}])
    parts = sentences_of(content(await ask(sim, "language", "pt")), "pt", "es")
    assert parts is not None and len(parts) >= 4
    assert [lang for lang, _ in parts] == ["pt", "es"] * (len(parts) // 2)


async def test_filter_modes(sim: Sim) -> None:
    """filter refusal/content_filter/empty give a refusal in the request language, content_filter, or empty text."""
    await sim.set_faults("lab/fp8", [{"kind": "filter", "mode": "refusal", "when": {"json": False}}])
    assert content(await ask(sim, "refusal", "tr")) == BUILTIN["tr"].refusal
    jsonschema.validate(json.loads(content(await ask(sim, "structured"))), WEATHER_SCHEMA)
    await sim.set_faults("lab/fp8", [{"kind": "filter", "mode": "content_filter"}])
    r = await ask(sim, "refusal", "en")
    assert content(r) == "" and r.json()["choices"][0]["finish_reason"] == "content_filter"
    await sim.set_faults("lab/fp8", [{"kind": "filter", "mode": "empty"}])
    r = await ask(sim, "refusal", "en")
    assert content(r) == "" and r.json()["choices"][0]["finish_reason"] == "stop"


async def test_filter_can_be_narrowed_to_prompt_contents(sim: Sim) -> None:
    """A filter with when.prompt_contains refuses only requests mentioning those words."""
    await sim.set_faults("lab/fp8", [{"kind": "filter", "when": {"prompt_contains": ["KNIFE"]}}])
    assert content(await ask(sim, "refusal", "en")) == BUILTIN["en"].refusal
    assert sentences_of(content(await ask(sim, "language", "en")), "en")


async def test_truncate_cuts_mid_word_without_sentinel(sim: Sim) -> None:
    """truncate stops in the middle of a word with finish_reason stop and no closing marker."""
    await sim.set_faults("lab/fp8", [{"kind": "truncate"}])
    words = {w for s in BUILTIN["en"].sentences for w in re.findall(r"[A-Za-z’']+", s)}
    for _ in range(3):
        r = await ask(sim, "refusal", "en")
        text = content(r)
        assert r.json()["choices"][0]["finish_reason"] == "stop"
        assert SENTINEL not in text and text[-1].isalpha()
        assert re.findall(r"[A-Za-z’']+", text)[-1] not in words


async def test_encoding_faults(sim: Sim) -> None:
    """bytelevel leaves U+0120/U+010A for spaces/newlines; mojibake is UTF-8 read as cp1252."""
    await sim.set_faults("lab/fp8", [{"kind": "bytelevel"}])
    text = content(await ask(sim, "ttft", "en"))
    assert " " not in text and "\n" not in text and "\u0120" in text and "\u010a\u010a" in text
    await sim.set_faults("lab/fp8", [{"kind": "mojibake"}])
    text = content(await ask(sim, "language", "pt"))
    assert "Ã" in text and ftfy.fix_encoding(text) != text
    assert sentences_of(ftfy.fix_encoding(text), "pt")


async def test_control_tokens_repetition_inject_and_native_error(sim: Sim) -> None:
    """control_tokens, repetition, inject and native_error each produce their defect."""
    await sim.set_faults("lab/fp8", [{"kind": "control_tokens"}])
    assert "<|tool_calls_section_begin|><|tool_call_begin|>" in content(await ask(sim, "language", "en"))
    await sim.set_faults("lab/fp8", [{"kind": "repetition", "times": 35}])
    text = content(await ask(sim, "language", "en"))
    words = text.split()
    grams = collections.Counter(" ".join(words[i:i + 4]) for i in range(len(words) - 3))
    assert grams.most_common(1)[0][1] >= 30
    await sim.set_faults("lab/fp8", [{"kind": "inject"}])
    echo = content(await ask(sim, "echo"))
    assert echo != ECHO_TEXT and " REDACTED " in echo and echo.replace(" REDACTED", "", 1) == ECHO_TEXT
    await sim.set_faults("lab/fp8", [{"kind": "native_error"}])
    r = await ask(sim, "language", "en")
    assert content(r) == ""
    assert r.json()["choices"][0]["finish_reason"] == "stop"
    assert r.json()["choices"][0]["native_finish_reason"] == "network_error"


async def test_pin_bypass_serves_and_names_another_provider(sim: Sim) -> None:
    """pin_bypass: a request pinned to the endpoint is served and named by the serve_as endpoint's provider."""
    await sim.set_faults("lab/fp8", [{"kind": "pin_bypass", "serve_as": "beta/fp8"}])
    r = await ask(sim, "echo", headers={"X-OpenRouter-Metadata": "enabled"})
    assert r.json()["provider"] == "Beta"
    assert r.json()["openrouter_metadata"]["attempts"][0]["provider"] == "Beta"
    stats = await sim.stats()
    assert stats["attempts"] == {"lab/fp8": 1} and stats["served"] == {"beta/fp8": 1}
    bad = await sim.client.put(f"{sim.root}/_sim/faults", params={"provider": "lab/fp8"},
                               json={"faults": [{"kind": "pin_bypass", "serve_as": "ghost/fp8"}]})
    assert bad.status_code == 400 and "serve_as" in bad.json()["error"]["message"]


async def test_fault_rate_and_language_filter(sim: Sim) -> None:
    """A fault with rate 0 never acts; when.languages limits a fault to the listed request languages."""
    await sim.set_faults("lab/fp8", [{"kind": "leading_junk", "rate": 0.0}])
    assert content(await ask(sim, "ttft", "en")).startswith("*")
    await sim.set_faults("lab/fp8", [{"kind": "leading_junk", "when": {"languages": ["ja"]}}])
    assert content(await ask(sim, "ttft", "en")).startswith("*")
    assert content(await ask(sim, "ttft", "ja")).startswith(",*")


# --- scenario files and the command line -------------------------------------------


def test_packaged_scenarios_load_and_cover_every_fault(tmp_path: Path) -> None:
    """default and full load; full has an endpoint for every fault kind and the control-* hosts."""
    default = load_scenario("default")
    assert load_scenario(None) == default
    [model] = default.models
    assert model.id == MODEL and len(model.endpoints) >= 9
    faults = {e.tag: [type(f).__struct_config__.tag for f in e.faults] for e in model.endpoints}
    assert faults["lambda/fp8"] == ["slow"] and faults["baseten/fp8"] == ["broken_structured"]
    assert faults["atlas-cloud/fp8"] == ["flaky"] and sum(not f for f in faults.values()) >= 6
    assert default.controls == {"refusal": "control-filter/strict"}
    assert faults["control-filter/strict"] == ["filter"]
    [full] = load_scenario("full").models
    kinds = {type(f).__struct_config__.tag for e in full.endpoints for f in e.faults}
    assert kinds == set(FAULT_KINDS)
    assert {e.tag for e in model.endpoints} < {e.tag for e in full.endpoints}
    assert all(load_scenario(name).require_key for name in ("default", "full", "hostile"))
    controls = [e.tag for e in full.endpoints if e.tag.startswith("control-")]
    assert sorted(load_scenario("full").controls.values()) == sorted(controls) and len(controls) == 5
    for e in full.endpoints:
        for f in e.faults:
            assert getattr(f, "ttft_s", 0.0) < 2.5
    path = tmp_path / "mine.toml"
    path.write_text(FLEET)
    assert load_scenario(str(path)).seed == 11


def test_bad_scenario_errors_name_the_field(tmp_path: Path) -> None:
    """A bad scenario file raises ConfigError naming the file and the failing field."""
    bad = tmp_path / "bad.toml"
    bad.write_text(FLEET.replace('faults = [{ kind = "slow", ttft_s = 0.6 }]',
                                 'faults = [{ kind = "slow", ttft_s = "slow" }]'))
    with pytest.raises(ConfigError, match=r"bad\.toml.*ttft_s"):
        load_scenario(str(bad))
    bad.write_text(FLEET.replace('kind = "flaky", rate = 1.0', 'kind = "flakey", rate = 1.0'))
    with pytest.raises(ConfigError, match=r"faults\[0\]\.kind"):
        load_scenario(str(bad))
    with pytest.raises(ConfigError, match="no such file"):
        load_scenario("no-such-scenario")
    bad.write_text(FLEET.replace("\n[[models]]", '\n[controls]\nrefusal = "ghost/strict"\n\n[[models]]', 1))
    with pytest.raises(ConfigError, match=r"controls\.refusal"):
        load_scenario(str(bad))


def _first_line(proc: subprocess.Popen, timeout_s: float) -> str:
    """The first line the process prints on stdout, waiting at most ``timeout_s``."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            raise waits.WaitTimeout(f"waited {timeout_s:g} s for the simulator's first line")
    return proc.stdout.readline()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what sh does for a job started with &


def _pid_namespaces() -> bool:
    """True when ``unshare --pid`` works here (root or user namespaces): the simulator can be PID 1."""
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


#: How the simulator is started, and the signal that must stop it.
STARTS = {
    "sigint": ([], None, signal.SIGINT),
    "sigterm": ([], None, signal.SIGTERM),
    "sighup": ([], None, signal.SIGHUP),
    "sigint_in_the_background": ([], _ignore_sigint, signal.SIGINT),
    "sigterm_as_pid_1": (["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"], None, signal.SIGTERM),
}


@pytest.mark.parametrize("start", list(STARTS))
def test_command_line_serves_until_a_stop_signal_however_it_was_started(start: str) -> None:
    """python -m reverie_canary.simulator serves a packaged scenario and exits 0 on SIGINT, SIGTERM and SIGHUP,
    also with SIGINT ignored (a background job of a shell) and as PID 1 (compose), where no default action applies."""
    prefix, preexec, sig = STARTS[start]
    if prefix and not _pid_namespaces():
        pytest.skip("unshare --pid is not permitted here: cannot run the simulator as PID 1")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([*prefix, sys.executable, "-m", "reverie_canary.simulator", "--scenario", "default",
                             "--port", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=preexec)
    try:
        line = _first_line(proc, 30)
        url = re.search(r"(http://\S+/api/v1)", line)
        assert url, line
        r = httpx.get(f"{url.group(1)}/models/{MODEL}/endpoints", timeout=5)
        assert len(r.json()["data"]["endpoints"]) == len(load_scenario("default").models[0].endpoints)
        target = proc.pid
        if prefix:  # signal the simulator itself, PID 1 of its namespace, not unshare
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            assert len(children) == 1, children
            target = int(children[0])
            nspid = next(line for line in Path(f"/proc/{target}/status").read_text().splitlines()
                         if line.startswith("NSpid:"))
            assert nspid.split()[-1] == "1", nspid  # PID 1 inside its namespace
        os.kill(target, sig)
        try:
            status = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise waits.WaitTimeout(f"waited 10 s for the simulator to exit after {sig.name} ({start})") from None
        assert status == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_healthy_reply_of_real_sentences_fits_the_budget(language):
    """Real lines can be long (a Chinese line counts a token a character); a healthy provider still answers
    inside max_tokens, so its reply never ends on 'length' (which made a healthy host frozen in the demo)."""
    import random

    from reverie_canary.simulator.model import Instructions, compose, count_tokens
    from reverie_canary.simulator.text import TextSource
    from tests.conftest import shared_path

    text = TextSource(shared_path("data", "lang", "sentences"))
    for seed in range(400):
        for sentinel in (None, "[[END]]"):
            instructions = Instructions(language=language, sentinel=sentinel, max_tokens=320)
            body, kind = compose(instructions, random.Random(seed), text)
            assert kind == "prose" and count_tokens(body) <= 320, (seed, body[:120])
