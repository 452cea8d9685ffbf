"""The reply guard beside the official OpenAI SDK: a stream the SDK reads, judged from its chunks and its errors."""

from __future__ import annotations

import asyncio
import json

import pytest

from reverie_canary.client import IgnoreListClient, ReplyGuard

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"


def sse(*chunks: dict) -> bytes:
    lines = [b": OPENROUTER PROCESSING\n\n"] + [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks]
    return b"".join(lines) + b"data: [DONE]\n\n"


def chunk(content: str | None = None, finish: str | None = None, error: dict | None = None) -> dict:
    body: dict = {"id": "gen-1", "object": "chat.completion.chunk", "created": 1756000000, "model": MODEL,
                  "provider": "DeepInfra",
                  "choices": [{"index": 0, "delta": {"role": "assistant", "content": content or ""},
                               "finish_reason": finish}]}
    if error is not None:
        body["error"] = error
    return body


async def serve_once(payload: bytes) -> tuple[asyncio.Server, str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next((line.split(b":", 1)[1] for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), b"0"))
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
                         + f"content-length: {len(payload)}\r\n\r\n".encode() + payload)
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/api/v1"


async def judged_by_sdk(payload: bytes):
    import openai

    server, url = await serve_once(payload)
    guard = ReplyGuard(IgnoreListClient("nats://127.0.0.1:1", MODEL))
    attempt = guard.attempt({"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Hi"}]})
    stream = attempt.stream()
    sdk = openai.AsyncOpenAI(base_url=url, api_key="test", max_retries=0)
    try:
        try:
            async for c in await sdk.chat.completions.create(**attempt.body):
                if (verdict := stream.chunk(c)) is not None:
                    break
            else:
                verdict = stream.finish()
        except openai.APIError as exc:  # the SDK raises for a chunk with an error object: the guard reads it
            verdict = stream.raised(exc)
    finally:
        await sdk.close()
        server.close()
        await server.wait_closed()
    return verdict


def judged_by_lines(payload: bytes):
    guard = ReplyGuard(IgnoreListClient("nats://127.0.0.1:1", MODEL))
    stream = guard.attempt({"model": MODEL, "stream": True, "messages": []}).stream()
    return stream.feed(payload) or stream.finish()


async def test_a_mid_stream_provider_error_the_sdk_raises_is_the_guards_in_band_error_as_on_the_wire():
    """OpenRouter's mid-stream failure (an error object, finish_reason error): the SDK raises before the
    chunk reaches the backend; stream.raised gives what the raw lines give. Found by a fresh tester."""
    payload = sse(chunk("Once upon"), chunk(finish="error", error={"code": 502, "message": "Provider disconnected"}))
    by_sdk = await judged_by_sdk(payload)
    by_lines = judged_by_lines(payload)
    assert (by_sdk.outcome, by_sdk.reason, by_sdk.early) == (by_lines.outcome, by_lines.reason, by_lines.early)
    assert (by_sdk.outcome, by_sdk.reason) == ("error", "in_band_error")


async def test_the_sdks_chunks_of_a_broken_and_a_healthy_reply_get_the_verdicts_of_the_lines():
    """Junk before the first character fails early; a clean reply passes: the same through the SDK."""
    for payload in (sse(chunk(": *The lantern"), chunk(" glowed."), chunk(finish="stop")),
                    sse(chunk("The lantern glowed over the bay."), chunk(finish="stop"))):
        by_sdk, by_lines = await judged_by_sdk(payload), judged_by_lines(payload)
        assert (by_sdk.outcome, by_sdk.reason, by_sdk.early) == (by_lines.outcome, by_lines.reason, by_lines.early)
