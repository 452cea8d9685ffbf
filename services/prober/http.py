"""Send one pinned probe to the gateway and assemble the finished :class:`Reply`.

Streaming chat completions per openrouter-api.md section 3, read with
``httpx-sse`` (SSE comments such as ``: OPENROUTER PROCESSING`` are skipped by
the decoder and never start the clock).  The request is pinned to one endpoint
with fallbacks off (section 2: ``order`` + ``only`` + ``allow_fallbacks:
false``), turns off everything that could hide a provider's defect (no
caching header, no plugins such as response-healing, no session) and asks for
router metadata so the serving provider can be verified (section 9).

Classification happens later, in the pure checks; this module only records
what happened, with times in ms from the request start.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from reverie_canary.services.prober.prompts import ProbeRequest
from reverie_canary.services.prober.reply import Reply


def request_body(model: str, provider: str, probe: ProbeRequest, *, require_parameters: bool) -> dict[str, Any]:
    """The chat-completions body of a pinned probe.

    Args:
        model: model id (``deepseek/deepseek-chat-v3.1``).
        provider: endpoint tag to pin (``deepinfra/fp8``).
        probe: messages, budget and response format.
        require_parameters: ``True`` for capability probes, so an endpoint that
            does not declare a parameter refuses instead of silently dropping it.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": probe.messages,
        "max_tokens": probe.max_tokens,
        "stream": True,
        "provider": {
            "order": [provider],
            "only": [provider],
            "allow_fallbacks": False,
            "require_parameters": require_parameters,
        },
        "plugins": [],
    }
    if probe.response_format is not None:
        body["response_format"] = probe.response_format
    return body


async def send_probe(
    client: httpx.AsyncClient,
    body: dict[str, Any],
    *,
    ttft_deadline_s: float | None,
    total_timeout_s: float,
) -> Reply:
    """POST ``body`` as a streaming request and return what came back.

    Args:
        client: an AsyncClient whose base URL is the gateway (``.../api/v1/``).
        body: from :func:`request_body`.
        ttft_deadline_s: stop waiting when no content or reasoning arrived
            within this many seconds (the latency probe need not wait longer);
            ``None`` to wait up to ``total_timeout_s``.
        total_timeout_s: give up on the whole exchange after this many seconds.

    Returns:
        A :class:`Reply`; never raises for network or protocol trouble (it is
        recorded in ``transport_error``).
    """
    state = _StreamState(time.perf_counter())
    try:
        async with asyncio.timeout(total_timeout_s):
            async with aconnect_sse(client, "POST", "chat/completions", json=body,
                                    headers={"X-OpenRouter-Metadata": "enabled"}) as source:
                response = source.response
                state.status = response.status_code
                state.generation_id = response.headers.get("x-generation-id")
                state.cache_hit = response.headers.get("x-openrouter-cache-status", "").upper() == "HIT"
                if response.status_code != 200:
                    raw = await response.aread()
                    state.error = _error_body(raw)
                    return state.reply()
                ctype = response.headers.get("content-type", "")
                if "text/event-stream" not in ctype:
                    # A non-stream JSON answer to a stream request: read it as one.
                    raw = await response.aread()
                    state.read_json_body(raw)
                    return state.reply()
                await _consume(source, state, ttft_deadline_s)
    except TimeoutError:
        if state.status is None:
            state.transport_error = "headers_timeout"
        elif state.ttft_ms is None:
            state.timed_out = True  # 200 and nothing at all: a latency failure, not transport
        else:
            state.transport_error = "stream_timeout"  # it started, then stalled
    except httpx.ConnectError:
        state.transport_error = "connect_error"
    except httpx.ReadTimeout:
        state.transport_error = "headers_timeout" if state.status is None else "stream_timeout"
    except (httpx.RemoteProtocolError, httpx.ReadError):
        state.transport_error = "connection_lost" if state.status is None else "stream_cut"
    except httpx.HTTPError as exc:
        state.transport_error = f"http_error:{type(exc).__name__}"
    except SSEError:
        state.transport_error = "not_event_stream"
    return state.reply()


async def _consume(source: Any, state: _StreamState, ttft_deadline_s: float | None) -> None:
    iterator = source.aiter_sse().__aiter__()
    while True:
        if state.ttft_ms is None and ttft_deadline_s is not None:
            remaining = ttft_deadline_s - (time.perf_counter() - state.t0)
            if remaining <= 0:
                state.timed_out = True
                return
            try:
                sse = await asyncio.wait_for(iterator.__anext__(), timeout=remaining)
            except TimeoutError:
                state.timed_out = True
                return
            except StopAsyncIteration:
                break
        else:
            try:
                sse = await iterator.__anext__()
            except StopAsyncIteration:
                break
        if sse.data == "[DONE]":
            state.done = True
            break
        if not sse.data:
            continue
        try:
            chunk = json.loads(sse.data)
        except ValueError:
            state.transport_error = "body_parse"
            return
        state.read_chunk(chunk)
        if state.error is not None:
            return
    if not state.done and state.finish_reason is None and state.transport_error is None:
        state.transport_error = "stream_cut"


class _StreamState:
    """Accumulates one streamed (or plain) chat completion."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.status: int | None = None
        self.generation_id: str | None = None
        self.cache_hit = False
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.finish_reason: str | None = None
        self.native_finish_reason: str | None = None
        self.error: dict[str, Any] | None = None
        self.transport_error: str | None = None
        self.ttft_ms: float | None = None
        self.first_content_ms: float | None = None
        self.first_reasoning_ms: float | None = None
        self.served_by: str | None = None
        self.usage: dict[str, Any] = {}
        self.timed_out = False
        self.done = False

    def _ms(self) -> float:
        return (time.perf_counter() - self.t0) * 1000.0

    def read_chunk(self, chunk: dict[str, Any]) -> None:
        if not isinstance(chunk, dict):
            self.transport_error = "body_parse"
            return
        if chunk.get("provider"):
            self.served_by = str(chunk["provider"])
        if chunk.get("id") and not self.generation_id:
            self.generation_id = str(chunk["id"])
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("error"), dict):
            self.error = chunk["error"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            content = delta.get("content")
            reasoning = delta.get("reasoning")
            now = self._ms()
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                if self.first_reasoning_ms is None:
                    self.first_reasoning_ms = now
            if isinstance(content, str) and content:
                self.text.append(content)
                if self.first_content_ms is None:
                    self.first_content_ms = now
            if self.ttft_ms is None and ((isinstance(content, str) and content) or (isinstance(reasoning, str) and reasoning)):
                self.ttft_ms = now
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
            if choice.get("native_finish_reason"):
                self.native_finish_reason = str(choice["native_finish_reason"])
            if isinstance(choice.get("error"), dict):
                self.error = choice["error"]

    def read_json_body(self, raw: bytes) -> None:
        try:
            data = json.loads(raw)
        except ValueError:
            self.transport_error = "body_parse"
            self.text = [raw[:200].decode("utf-8", errors="replace")]
            return
        self.read_chunk(data)

    def reply(self) -> Reply:
        return Reply(
            text="".join(self.text),
            reasoning_text="".join(self.reasoning),
            finish_reason=self.finish_reason,
            native_finish_reason=self.native_finish_reason,
            http_status=self.status,
            error=self.error,
            transport_error=self.transport_error,
            ttft_ms=self.ttft_ms,
            first_content_ms=self.first_content_ms,
            first_reasoning_ms=self.first_reasoning_ms,
            total_ms=self._ms(),
            timed_out=self.timed_out,
            served_by=self.served_by,
            generation_id=self.generation_id,
            usage=self.usage,
            cache_hit=self.cache_hit,
        )


def _error_body(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        return {"message": raw[:300].decode("utf-8", errors="replace")}
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return data["error"]
    return {"message": str(data)[:300]}
