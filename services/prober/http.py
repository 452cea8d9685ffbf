"""Send one pinned probe to the gateway and read the reply, bounded in time and size.

Streaming chat completions per OpenRouter's streaming documentation, read line by line
from the response bytes by :class:`reverie_canary.client.chunks.ChunkReader`
(the one reader of this wire; SSE comments such as ``: OPENROUTER PROCESSING``
are counted and never start the clock).  The request is pinned to one
endpoint with fallbacks off (section 2: ``order`` + ``only`` +
``allow_fallbacks: false``), turns off everything that could hide a
provider's defect (no caching header, no plugins such as response-healing, no
session) and asks for router metadata so the serving provider can be verified
(section 9).

Bounds (:class:`ReadLimits`; a hostile gateway cannot make a probe's work unbounded): text plus reasoning kept up to
``reply_max_bytes``; bytes read per response up to ``response_max_bytes``
(stream or body); one SSE line up to ``sse_line_max_bytes``; an error body up
to ``error_body_max_bytes``.  Hitting a cap stops the read at once (the
connection is closed) and says so in ``Reply.cut``; the outcome follows from
the checks (``reply_too_large``) or is a transport error
(``response_too_large``, ``line_too_long``).  Time: the whole exchange within
``total_timeout_s`` (the caller passes the lesser of the request timeout and
the task's deadline); no visible token within ``ttft_deadline_s``: stop
waiting (``timed_out``); after a finish reason, at most ``finish_grace_s``
more for the usage chunk and ``[DONE]``.  A body larger than
``offload_bytes`` is decoded in a worker thread, so that other probes on the
event loop keep honest times.

**The clock**: every time of a :class:`Reply`
(``ttft_ms``, ``first_content_ms``, ``first_reasoning_ms``, ``total_ms``) is
in ms from the moment the request's last byte was written to the socket
(httpcore's ``http11.send_request_body.complete`` trace event), not from
when the probe began: what came before (building the request, waiting for a
pooled connection, a TCP or TLS connect, other probes' work on the event loop
when many start at once) is the canary's own time, never the provider's.
The first-token wait (``ttft_deadline_s``) also counts from then.  When the
request never got that far (a connect error, a transport without httpcore)
the clock starts at the call.  Each chunk is timed when its bytes come off
the connection, before they are parsed.

**Connections are kept**: after ``data: [DONE]`` the little
that is left of the body (the chunked encoding's last chunk) is read, at most
:data:`DRAIN_BYTES` within :data:`DRAIN_S`, so that httpcore returns the
connection to the pool instead of closing it: without it every probe paid a
new connection (a TLS handshake against the real gateway), and a cycle's
probes, all started at once, queued on them.

Classification happens later, in the pure checks; this module only records
what happened.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Sequence
from typing import Any

import httpx
import msgspec
from msgspec import Struct

from reverie_canary.client.chunks import ChunkReader, LineSplitter, error_body
from reverie_canary.client.reply import Reply
from reverie_canary.services.prober.prompts import ProbeRequest

KIB = 1024
MIB = 1024 * 1024
#: After ``[DONE]``: bytes and seconds spent at most reading the body's end, so the connection is kept.
DRAIN_BYTES = 16 * KIB
DRAIN_S = 0.25
#: The trace event after which the provider has the whole request (httpcore, HTTP/1.1 and HTTP/2).
_SENT_EVENTS = frozenset({"http11.send_request_body.complete", "http2.send_request_body.complete"})
_encode_body = msgspec.json.Encoder().encode
#: Each client's chat-completions URL, made once per base URL (``(base_url, url)``).
_CHAT_URLS: weakref.WeakKeyDictionary[httpx.AsyncClient, tuple[httpx.URL, httpx.URL]] = weakref.WeakKeyDictionary()


def chat_url(client: httpx.AsyncClient) -> httpx.URL:
    """``chat/completions`` under ``client``'s base URL, as an absolute URL made once per client.

    httpx parses and merges a relative URL on every request (about 35 µs of the
    ~70 µs a probe's request takes to build); an absolute ``httpx.URL`` is taken as it is.
    """
    base = client.base_url
    known = _CHAT_URLS.get(client)
    if known is not None and known[0] is base:
        return known[1]
    url = client.build_request("POST", "chat/completions").url
    _CHAT_URLS[client] = (base, url)
    return url


class ReadLimits(Struct, frozen=True, kw_only=True):
    """Caps on one reply; bytes unless the name says otherwise.

    Attributes:
        reply_max_bytes: text plus reasoning kept (UTF-8).  256 KiB is more
            than 800 bytes per token of the default 320-token budget: no
            tokenizer has tokens that long, so a reply past it ignored its
            budget (``Settings`` checks the ratio).
        response_max_bytes: bytes read from the network per response, stream
            or body (a 320-token stream is about 100 kB of SSE).
        sse_line_max_bytes: bytes of one SSE line (one chunk).
        error_body_max_bytes: bytes read of a non-200 body.
        finish_grace_s: seconds to wait after a finish reason for the usage
            chunk and ``[DONE]`` (they follow at once on the real gateway).
        offload_bytes: a body larger than this is decoded in a worker thread.
    """

    reply_max_bytes: int = 256 * KIB
    response_max_bytes: int = 8 * MIB
    sse_line_max_bytes: int = 1 * MIB
    error_body_max_bytes: int = 64 * KIB
    finish_grace_s: float = 1.0
    offload_bytes: int = 256 * KIB

    @classmethod
    def from_settings(cls, settings: Any) -> ReadLimits:
        """The limits of ``settings`` (``reply_max_bytes``, ``response_max_bytes``, ``sse_line_max_bytes``)."""
        return cls(reply_max_bytes=settings.reply_max_bytes, response_max_bytes=settings.response_max_bytes,
                   sse_line_max_bytes=settings.sse_line_max_bytes)


DEFAULT_LIMITS = ReadLimits()


def budget_parameter(supported_parameters: Sequence[str], *, require_parameters: bool) -> str | None:
    """The request field that carries a probe's output budget: the one the endpoint advertises.

    ``max_tokens`` when the endpoint lists it, or lists no parameters at all
    (an old listing: the gateway's own default); ``max_completion_tokens``
    when it lists that and not ``max_tokens`` (OpenAI's reasoning models, for
    one).  When it lists neither, ``max_tokens`` is sent unless
    ``require_parameters`` is on: then the gateway would refuse every request
    for a parameter the endpoint does not list (OpenRouter's provider routing documentation),
    so no budget is sent (``None``) and the prober's read caps bound the reply.
    """
    declared = set(supported_parameters)
    if not declared or "max_tokens" in declared:
        return "max_tokens"
    if "max_completion_tokens" in declared:
        return "max_completion_tokens"
    return None if require_parameters else "max_tokens"


def request_body(model: str, provider: str, probe: ProbeRequest, *, require_parameters: bool,
                 supported_parameters: Sequence[str] = ()) -> dict[str, Any]:
    """The chat-completions body of a pinned probe.

    Args:
        model: model id (``deepseek/deepseek-chat-v3.1``).
        provider: endpoint tag to pin (``deepinfra/fp8``).
        probe: messages, budget, response format, and for the tool probe ``tools``,
            ``tool_choice`` and ``stream`` (``false`` for its unstreamed call; every
            other probe streams).
        require_parameters: ``True`` for capability probes, so an endpoint that
            does not declare a parameter refuses instead of silently dropping it.
        supported_parameters: the endpoint's listed ``supported_parameters``:
            the budget goes in the field it advertises (:func:`budget_parameter`).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": probe.messages,
    }
    budget = budget_parameter(supported_parameters, require_parameters=require_parameters)
    if budget is not None:
        body[budget] = probe.max_tokens
    body |= {
        "stream": probe.stream,
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
    if probe.tools is not None:
        body["tools"] = probe.tools
    if probe.tool_choice is not None:
        body["tool_choice"] = probe.tool_choice
    return body


async def send_probe(
    client: httpx.AsyncClient,
    body: dict[str, Any],
    *,
    ttft_deadline_s: float | None,
    total_timeout_s: float,
    limits: ReadLimits = DEFAULT_LIMITS,
) -> Reply:
    """POST ``body`` (streamed or not, as it says) and return what came back.

    Args:
        client: an AsyncClient whose base URL is the gateway (``.../api/v1/``).
        body: from :func:`request_body`.
        ttft_deadline_s: stop waiting when no visible content or reasoning
            arrived within this many seconds of the request (the latency probe
            need not wait longer); ``None`` to wait up to ``total_timeout_s``.
        total_timeout_s: give up on the whole exchange after this many seconds.
        limits: the caps of :class:`ReadLimits`.

    Returns:
        A :class:`Reply`; never raises for network or protocol trouble (it is
        recorded in ``transport_error``; a cap in ``cut``).

    A kept-alive connection the server closed while it sat idle in the pool (the
    classic race of a client's keep-alive expiry against the server's: uvicorn
    closes after 5 s idle, httpx keeps 5 s) fails before any response byte, almost
    always with the request never read: that case, on a reused connection (no new
    connection in httpcore's trace), is sent again once on a new one, within the same
    time budget; at worst a provider that read it and died silently is asked twice.
    Any other lost connection is the reply's (``connection_lost``).
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + max(0.0, total_timeout_s)
    reply, reused = await _send_once(client, body, ttft_deadline_s=ttft_deadline_s, total_timeout_s=total_timeout_s,
                                     limits=limits)
    left = end - loop.time()
    if reply.transport_error == "connection_lost" and reused and reply.http_status is None and left > 0.5:
        reply, _ = await _send_once(client, body, ttft_deadline_s=ttft_deadline_s, total_timeout_s=left,
                                    limits=limits)
    return reply


async def _send_once(client: httpx.AsyncClient, body: dict[str, Any], *, ttft_deadline_s: float | None,
                     total_timeout_s: float, limits: ReadLimits) -> tuple[Reply, bool]:
    """One exchange of :func:`send_probe`: the reply, and whether it went over a reused connection."""
    t0 = time.perf_counter()
    reader = ChunkReader(reply_max_bytes=limits.reply_max_bytes)
    state = _Exchange(t0)
    loop = asyncio.get_running_loop()
    end = loop.time() + max(0.0, total_timeout_s)
    first_end = min(end, loop.time() + ttft_deadline_s) if ttft_deadline_s is not None else end
    try:
        async with asyncio.timeout_at(first_end) as timer:

            async def sent(event: str, info: dict[str, Any]) -> None:
                if event.startswith("connection.connect_tcp.") or event.startswith("connection.connect_unix_socket."):
                    state.connected = True  # a new connection: not one the pool kept
                # the provider has the whole request: the clock starts here, and the first-token wait with it
                if event in _SENT_EVENTS and state.sent is None:
                    state.sent = time.perf_counter()
                    if ttft_deadline_s is not None and state.status is None:
                        timer.reschedule(min(end, loop.time() + ttft_deadline_s))

            # the body encoded by msgspec (the bytes httpx's json= makes: compact, UTF-8), the URL made once
            request = client.build_request("POST", chat_url(client), content=_encode_body(body),
                                           headers={"X-OpenRouter-Metadata": "enabled",
                                                    "Content-Type": "application/json"},
                                           extensions={"trace": sent})
            response = await client.send(request, stream=True)
            try:
                await _read(response, reader, state, timer, end, limits)
            finally:
                await response.aclose()
    except TimeoutError:
        if state.grace or reader.done:
            pass  # finished: only the usage chunk, [DONE] or the body's end did not come in time
        elif state.status is None:
            state.transport_error = "headers_timeout"
        elif reader.ttft_ms is None:
            state.timed_out = True  # 200 and nothing visible: a latency failure, not transport
        else:
            state.transport_error = "stream_timeout"  # it started, then stalled
    except httpx.ConnectError:
        state.transport_error = "connect_error"
    except httpx.ConnectTimeout:
        state.transport_error = "connect_timeout"
    except httpx.ReadTimeout:
        state.transport_error = "headers_timeout" if state.status is None else "stream_timeout"
    except (httpx.RemoteProtocolError, httpx.ReadError):
        state.transport_error = "connection_lost" if state.status is None else "stream_cut"
    except httpx.HTTPError as exc:
        state.transport_error = f"http_error:{type(exc).__name__}"
    return reader.reply(
        http_status=state.status,
        transport_error=state.transport_error or reader.transport_error,
        error=reader.error if reader.error is not None else state.error,
        total_ms=state.ms(),
        timed_out=state.timed_out,
        generation_id=reader.generation_id or state.generation_id,
        cache_hit=state.cache_hit,
        wire_bytes=state.wire_bytes,
        cut=state.cut or reader.cut,
        content_type=state.content_type,
    ), not state.connected


class _Exchange:
    """What the HTTP layer learns beside the chunks: status, headers, caps, how it ended, and the clock.

    ``started`` is ``time.perf_counter()`` at the call, ``sent`` when the request's
    last byte was written (``None`` until then); times are ms from ``sent``, or
    from ``started`` when the request never got that far.
    """

    __slots__ = ("started", "sent", "status", "generation_id", "cache_hit", "content_type", "error",
                 "transport_error", "timed_out", "grace", "wire_bytes", "cut", "connected")

    def __init__(self, started: float) -> None:
        self.started = started
        self.sent: float | None = None
        self.status: int | None = None
        self.generation_id: str | None = None
        self.cache_hit = False
        self.content_type: str | None = None
        self.error: dict[str, Any] | None = None
        self.transport_error: str | None = None
        self.timed_out = False
        self.grace = False
        self.wire_bytes = 0
        self.cut: str | None = None
        self.connected = False  # this exchange opened its own connection (else the pool's kept one)

    def ms(self) -> float:
        """Milliseconds on the reply's clock now (from ``sent``, else from ``started``)."""
        return (time.perf_counter() - (self.sent if self.sent is not None else self.started)) * 1000.0


async def _read(response: httpx.Response, reader: ChunkReader, state: _Exchange, timer: asyncio.Timeout,
                end: float, limits: ReadLimits) -> None:
    state.status = response.status_code
    headers = response.headers
    state.generation_id = headers.get("x-generation-id")
    state.cache_hit = headers.get("x-openrouter-cache-status", "").upper() == "HIT"
    state.content_type = (headers.get("content-type") or "")[:128] or None
    if response.status_code != 200:
        raw = await _read_body(response, state, limits.error_body_max_bytes, cap_name=None)
        state.error = error_body(raw)
        return
    if "text/event-stream" not in (state.content_type or ""):
        # a non-stream answer to a stream request (a JSON body, or an HTML page): read it as one body;
        # it has no first token to wait for, so only the whole exchange's deadline applies
        timer.reschedule(end)
        raw = await _read_body(response, state, limits.response_max_bytes, cap_name="response_max_bytes")
        at = state.ms()
        if state.cut is not None:
            state.transport_error = "response_too_large"
        elif len(raw) > limits.offload_bytes:
            await asyncio.to_thread(reader.body, raw, at)
        else:
            reader.body(raw, at)
        if reader.transport_error == "body_parse":
            reader.text = [raw[:300].decode("utf-8", errors="replace")]  # evidence: what came instead
        return
    await _read_stream(response, reader, state, timer, end, limits)


async def _read_body(response: httpx.Response, state: _Exchange, cap: int, *, cap_name: str | None) -> bytes:
    """Read a body up to ``cap`` bytes; past it, stop and note ``cap_name`` in ``state.cut``.

    Returns:
        The body, or its first ``cap`` bytes when ``cap_name`` is ``None`` (an error body
        kept as evidence).  A body cut at ``cap_name`` is returned empty: its caller cannot
        parse it, and joining its parts would hold a second copy of ``cap`` bytes (8 MiB by
        default) per probe in flight, as every probe a hostile gateway answers with a
        20 MB body would.
    """
    parts: list[bytes] = []
    size = 0
    async for data in response.aiter_bytes():
        size += len(data)
        state.wire_bytes += len(data)
        if size > cap:
            if cap_name is not None:
                state.cut = cap_name
                return b""
            parts.append(data[: len(data) - (size - cap)])
            break
        parts.append(data)
    return b"".join(parts)


async def _read_stream(response: httpx.Response, reader: ChunkReader, state: _Exchange, timer: asyncio.Timeout,
                       end: float, limits: ReadLimits) -> None:
    """Feed the SSE body to ``reader`` line by line until it ends, stops or hits a cap.

    Each read is timed as it comes off the connection (before it is split or
    parsed); after ``[DONE]`` the body's end is read (:func:`_drain`).
    """
    splitter = LineSplitter(limits.sse_line_max_bytes)
    wire_max = limits.response_max_bytes
    started = False  # the first visible token came: only the total deadline applies now
    stream = response.aiter_bytes()
    async for data in stream:
        now = state.ms()
        state.wire_bytes += len(data)
        if state.wire_bytes > wire_max:
            state.cut, state.transport_error = "response_max_bytes", "response_too_large"
            return
        for line in splitter.feed(data):
            if not reader.line(line, now):
                if reader.done:
                    await _drain(stream, state)
                return
        if splitter.too_long:
            state.cut, state.transport_error = "sse_line_max_bytes", "line_too_long"
            return
        if state.grace:
            continue
        if reader.finish_reason is not None:
            state.grace = True
            timer.reschedule(min(end, asyncio.get_running_loop().time() + limits.finish_grace_s))
        elif not started and reader.ttft_ms is not None:
            started = True
            timer.reschedule(end)
    last = splitter.end()
    if last and not reader.line(last, state.ms()):
        return
    if not reader.done and reader.finish_reason is None and reader.transport_error is None \
            and reader.error is None and reader.cut is None:
        state.transport_error = "stream_cut"


async def _drain(stream: Any, state: _Exchange) -> None:
    """Read what follows ``[DONE]`` (the chunked body's end), at most ``DRAIN_BYTES`` within ``DRAIN_S``.

    Reaching the body's end lets httpcore keep the connection for the next
    probe; bytes past ``[DONE]`` are counted in ``wire_bytes`` and ignored.
    A body that goes on, or stalls, is left: the connection is then closed.
    """
    left = DRAIN_BYTES
    try:
        async with asyncio.timeout(DRAIN_S):
            async for data in stream:
                state.wire_bytes += len(data)
                left -= len(data)
                if left < 0:
                    return
    except (TimeoutError, httpx.HTTPError):
        return
