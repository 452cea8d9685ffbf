"""The simulated OpenRouter gateway: a Starlette app speaking OpenRouter's HTTP API.

Same wire as the real gateway (OpenRouter's API documentation), so the
same client code runs against both:

- ``GET  /api/v1/models``, ``GET /api/v1/models/{author}/{slug}/endpoints``,
  ``GET /api/v1/providers`` (§1)
- ``POST /api/v1/chat/completions``: routing (§2), SSE streaming with
  ``: OPENROUTER PROCESSING`` keep-alives, usage chunk and ``[DONE]`` (§3),
  finish reasons (§4), structured outputs (§5), errors (§6),
  ``X-OpenRouter-Metadata: enabled`` (§9)
- ``GET  /api/v1/generation?id=`` (§7)

A hostile gateway (scenario ``HOSTILE_KINDS``) plays on the same
wire: keep-alives forever, tokens forever, headers then silence, an HTML page
with 200, bytes that are not UTF-8 split across writes, a stream without
``[DONE]``, a 20 MB reply (as SSE deltas or as one JSON body).

Test hooks, not OpenRouter (prefixed ``/_sim``):

- ``PUT /_sim/faults?provider=<tag>[&model=<id>]`` with ``{"faults": [...]}``
  replaces an endpoint's faults; ``GET /_sim/faults`` shows them all.
- ``GET /_sim/stats``: ``{"attempts": {tag: n}, "served": {tag: n},
  "failed": {tag: n}, "requests": n}``.
- ``PUT /_sim/outage`` with ``{"status": 401}`` (or 402, 403; ``null`` ends it):
  every OpenRouter request gets that answer, as the real gateway answers a
  revoked key or an account without credit (``canary demo --gateway-fault``;
  a refused connection is :mod:`reverie_canary.simulator.faults`' front);
  ``"scope": "chat"`` answers only chat completions so (the listing still
  works: a key revoked between a cycle's listing and its probes).

Every random choice is seeded: routing from (seed, model, request number),
replies and faults from (seed, model, endpoint tag, that endpoint's request
number).  What the provider does is decided by :mod:`reverie_canary.simulator.model`; this
module only routes, keeps time and writes the wire.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import secrets
import string
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.simulator.model import (
    Instructions,
    Plan,
    bypass_target,
    count_tokens,
    plan_attempt,
    read_request,
    split_pieces,
)
from reverie_canary.simulator.routing import OUTAGE_WINDOW_S, NoRoute, request_parameters, route
from reverie_canary.simulator.scenario import (
    BadUtf8,
    Endpoint,
    Flaky,
    Html200,
    HugeReply,
    KeepaliveForever,
    Model,
    NoDone,
    Scenario,
    SilentAfterHeaders,
    Slow,
    TokensForever,
    check_faults,
    decode_faults,
)
from reverie_canary.simulator.text import TextSource
from reverie_canary.simulator.tools import stream_deltas
from reverie_canary.simulator.wire import (
    Architecture,
    ChatMessage,
    ChatRequest,
    Choice,
    Chunk,
    Completion,
    Delta,
    ErrorObject,
    FunctionCall,
    Generation,
    ModelEndpoints,
    Percentiles,
    ProviderResponse,
    PublicEndpoint,
    StreamChoice,
    ToolCall,
    ToolChoiceSupport,
    Usage,
    encode,
    error_body,
)

KEEPALIVE = b": OPENROUTER PROCESSING\n\n"
DONE = b"data: [DONE]\n\n"
_ALNUM = string.ascii_letters + string.digits


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(encode(obj), status_code=status, media_type="application/json", headers=headers)


def _error(status: int, message: str, headers: dict[str, str] | None = None, **kwargs: Any) -> Response:
    return _json(error_body(status, message, **kwargs), status=status, headers=headers)


#: What the gateway says to a key it will not serve (OpenRouter's error documentation), by status.
OUTAGE_ANSWERS: dict[int, tuple[str, str]] = {
    401: ("User not found.", "authentication"),
    402: ("Insufficient credits. Add more using https://openrouter.ai/settings/credits", "payment_required"),
    403: ("This API key has been disabled.", "forbidden"),
}


def outage_response(status: int) -> Response:
    """The answer of a gateway that refuses the canary's key (:data:`OUTAGE_ANSWERS`)."""
    message, kind = OUTAGE_ANSWERS.get(status, ("Unavailable", "outage"))
    return _error(status, message, metadata={"error_type": kind})


def _sse(obj: Any) -> bytes:
    return b"data: " + encode(obj) + b"\n\n"


def _endpoint_id(model_id: str, tag: str) -> str:
    return "ep_" + hashlib.sha1(f"{model_id}|{tag}".encode()).hexdigest()[:16]


class _Attempt(Struct, kw_only=True):
    """One try of one endpoint, for ``provider_responses`` and ``openrouter_metadata``."""

    routed: Endpoint
    served: Endpoint
    status: int | None
    latency_s: float
    plan: Plan | None = None


class _Exchange(Struct, kw_only=True):
    """Everything needed to write one successful response."""

    gen_id: str
    created: int
    model: Model
    request: ChatRequest
    instructions: Instructions
    served: Endpoint
    plan: Plan
    attempts: list[_Attempt]
    candidates: list[Endpoint]
    started: float
    attempt_started: float
    metadata: bool
    referer: str | None
    user_agent: str | None


#: ``/generation`` records the gateway keeps, the latest ones (a 2,000-endpoint fleet's cycle at nine
#: probes an endpoint is about 18,000).  Before, every record was kept for the life of the process:
#: about 2 kB a request (tracemalloc), most of what ``canary demo`` (the gateway in its process) grew by a cycle.
GENERATIONS_KEPT = 20_000


class Gateway:
    """State of one simulated gateway: faults (changeable at run time), counters, generations.

    Args:
        scenario: the fleet.
        text: sentence source.
        keepalive_s: interval of keep-alive comments while a provider thinks.
        generations_kept: the latest ``/generation`` records kept; an older id is 404,
            as a record the real gateway no longer has.
    """

    def __init__(self, scenario: Scenario, text: TextSource, keepalive_s: float,
                 generations_kept: int = GENERATIONS_KEPT) -> None:
        self.scenario = scenario
        self.generations_kept = max(1, generations_kept)
        self.text = text
        self.keepalive_s = keepalive_s
        self.faults: dict[tuple[str, str], list[Any]] = {
            (m.id, e.tag): list(e.faults) for m in scenario.models for e in m.endpoints
        }
        self._counts: Counter[tuple[str, str]] = Counter()
        self._routes: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.requests = 0
        #: (model, tag) -> loop time of the endpoint's last failed attempt (default routing tries it last).
        self.last_failure: dict[tuple[str, str], float] = {}
        self.generations: dict[str, tuple[float, Generation]] = {}
        #: The answer every OpenRouter request gets while set (401, 402, 403: the canary's key); ``None``: serve.
        self.outage: int | None = None
        #: Which requests the outage answers: ``all``, or ``chat`` (chat completions only).
        self.outage_scope: str = "all"

    # --- randomness --------------------------------------------------------

    def endpoint_rng(self, model_id: str, tag: str) -> random.Random:
        """Generator for the next request of one endpoint: seeded by (seed, model, tag, count)."""
        n = self._counts[(model_id, tag)]
        self._counts[(model_id, tag)] += 1
        return random.Random(f"{self.scenario.seed}|{model_id}|{tag}|{n}")

    def route_rng(self, model_id: str) -> random.Random:
        """Generator for the next routing decision of a model."""
        n = self._routes[model_id]
        self._routes[model_id] += 1
        return random.Random(f"{self.scenario.seed}|route|{model_id}|{n}")

    # --- listings (OpenRouter's endpoints listing API) -----------------------------------

    def public_endpoint(self, model: Model, e: Endpoint, *, authenticated: bool) -> PublicEndpoint:
        """The §1.1 ``PublicEndpoint`` of ``e``; latency/throughput are null without a key.

        Latency percentiles (ms) follow the endpoint's time to first token (a
        ``slow`` fault included); uptime (percent) follows a ``flaky`` rate.
        """
        faults = self.faults[(model.id, e.tag)]
        slow = next((f for f in faults if isinstance(f, Slow)), None)
        flaky = next((f for f in faults if isinstance(f, Flaky)), None)
        ttft_ms = 1000.0 * (slow.ttft_s if slow is not None else e.ttft_s)
        interval = e.chunk_interval_s if e.chunk_interval_s is not None else self.scenario.chunk_interval_s
        tps = round(3.0 / max(interval, 0.005), 1)
        uptime = round(100.0 * (1.0 - flaky.rate), 1) if flaky is not None else 100.0
        return PublicEndpoint(
            name=f"{e.provider_name} | {model.id}",
            model_id=model.id,
            model_name=model.name,
            provider_name=e.provider_name,
            tag=e.tag,
            context_length=e.context_length,
            max_completion_tokens=e.max_completion_tokens,
            max_prompt_tokens=e.max_prompt_tokens,
            quantization=e.quantization,
            pricing={"prompt": e.pricing.prompt, "completion": e.pricing.completion, "discount": 0},
            supported_parameters=list(e.supported_parameters),
            status=0,
            uptime_last_5m=uptime,
            uptime_last_30m=uptime,
            uptime_last_1d=uptime,
            latency_last_30m=Percentiles(p50=round(ttft_ms), p75=round(ttft_ms * 1.3), p90=round(ttft_ms * 1.8),
                                         p99=round(ttft_ms * 3.0)) if authenticated else None,
            throughput_last_30m=Percentiles(p50=tps, p75=round(tps * 0.85, 1), p90=round(tps * 0.7, 1),
                                            p99=round(tps * 0.4, 1)) if authenticated else None,
            supports_implicit_caching=e.supports_implicit_caching,
            supports_tool_choice=ToolChoiceSupport(**dict.fromkeys(
                ("auto", "none", "required", "function"), "tool_choice" in e.supported_parameters)),
        )

    async def list_endpoints(self, request: Request) -> Response:
        """``GET /api/v1/models/{author}/{slug}/endpoints`` → ``{"data": {..., endpoints: [...]}}`` (§1.1)."""
        model_id = f"{request.path_params['author']}/{request.path_params['slug']}"
        model = self.scenario.model(model_id)
        if model is None:
            return _error(404, "Resource not found", metadata={"error_type": "not_found"})
        authed = bool(_bearer(request))
        data = ModelEndpoints(
            id=model.id, name=model.name, created=model.created, description=model.description,
            architecture=Architecture(tokenizer=model.tokenizer, instruct_type=model.instruct_type),
            endpoints=[self.public_endpoint(model, e, authenticated=authed) for e in model.endpoints],
        )
        return _json({"data": data})

    async def list_models(self, request: Request) -> Response:
        """``GET /api/v1/models`` → ``{"data": [Model...], "total_count", "links"}`` (§1.2)."""
        data = []
        for m in self.scenario.models:
            top = m.endpoints[0]
            data.append({
                "id": m.id, "canonical_slug": m.id, "hugging_face_id": "", "name": m.name,
                "created": m.created, "description": m.description,
                "context_length": max(e.context_length for e in m.endpoints),
                "architecture": Architecture(tokenizer=m.tokenizer, instruct_type=m.instruct_type),
                "pricing": {"prompt": top.pricing.prompt, "completion": top.pricing.completion,
                            "request": "0", "image": "0"},
                "top_provider": {"context_length": top.context_length,
                                 "max_completion_tokens": top.max_completion_tokens, "is_moderated": False},
                "per_request_limits": None,
                "supported_parameters": sorted({p for e in m.endpoints for p in e.supported_parameters}),
                "default_parameters": {},
                "supported_voices": None,
                "expiration_date": None,
                "links": {"details": f"/api/v1/models/{m.id}/endpoints"},
            })
        return _json({"data": data, "total_count": len(data), "links": {"next": None}})

    async def list_providers(self, request: Request) -> Response:
        """``GET /api/v1/providers`` → ``{"data": [{name, slug, ...}]}`` (§1.3)."""
        seen: dict[str, dict[str, Any]] = {}
        for m in self.scenario.models:
            for e in m.endpoints:
                seen.setdefault(e.provider_name, {
                    "name": e.provider_name, "slug": e.slug,
                    "privacy_policy_url": f"https://{e.slug}.example/privacy",
                    "terms_of_service_url": f"https://{e.slug}.example/terms",
                    "status_page_url": None, "headquarters": None, "datacenters": None,
                })
        return _json({"data": list(seen.values())})

    # --- chat completions (§2-§6) ------------------------------------------

    async def chat(self, request: Request) -> Response:
        """``POST /api/v1/chat/completions``: route, try endpoints, stream or answer.

        Errors are OpenRouter error envelopes whose HTTP status equals
        ``error.code``: 400 bad body or unknown model (``model_not_found``),
        401 missing key (``require_key``), 404 nothing routable
        (``constraint_filtered`` / ``no_endpoints``), the upstream status when
        every endpoint tried failed before streaming (408 after a hang).
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        self.requests += 1
        if self.scenario.require_key and not _bearer(request):
            return _error(401, "No auth credentials found", metadata={"error_type": "authentication"})
        body = await request.body()
        try:
            raw = msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            return _error(400, f"Invalid JSON in request body: {exc}", metadata={"error_type": "invalid_request"})
        if not isinstance(raw, dict):
            return _error(400, "Request body must be a JSON object", metadata={"error_type": "invalid_request"})
        try:
            chat = msgspec.convert(raw, ChatRequest)
        except msgspec.ValidationError as exc:
            return _error(400, f"Invalid request body: {exc}", metadata={"error_type": "invalid_request"})
        if not chat.messages:
            return _error(400, "Invalid request body: messages must not be empty",
                          metadata={"error_type": "invalid_request"})
        if (problem := tools_problem(chat)) is not None:
            return _error(400, f"Invalid request body: {problem}", metadata={"error_type": "invalid_request"})
        metadata_on = (request.headers.get("x-openrouter-metadata", "").lower() == "enabled"
                       or request.headers.get("x-openrouter-experimental-metadata", "").lower() == "enabled")
        model = self.scenario.model(chat.model)
        if model is None:
            return _error(400, f"{chat.model} is not a valid model ID", error_type="invalid_request",
                          availability={"code": "model_not_found", "retryable": False,
                                        "requested_models": [chat.model],
                                        "docs_url": "https://openrouter.ai/docs/errors#model_not_found"})
        instructions = read_request(chat)
        needed = request_parameters(raw)
        try:
            now = loop.time()
            outage = {tag for (mid, tag), at in self.last_failure.items()
                      if mid == model.id and now - at < OUTAGE_WINDOW_S}
            candidates = route(model.endpoints, chat.provider, needed, self.route_rng(model.id), outage)
        except NoRoute as nr:
            field = {"require_parameters": "require_parameters", "quantization": "quantizations"}.get(
                nr.excluded_by[0], "only")
            extra = {"openrouter_metadata": self._metadata(model, [], [], None, _strategy(chat))} if metadata_on else {}
            return _error(404, nr.message,
                          error_type="not_found",
                          availability={"code": nr.code, "retryable": False, "requested_models": [model.id],
                                        "affected_providers": nr.affected, "excluded_by": nr.excluded_by,
                                        "constraint": {"field": f"provider.{field}", "detail": nr.detail},
                                        "docs_url": f"https://openrouter.ai/docs/errors#{nr.code}"},
                          **extra)

        attempts: list[_Attempt] = []
        for routed in candidates:
            attempt_started = loop.time()
            self.attempts[routed.tag] += 1
            rng = self.endpoint_rng(model.id, routed.tag)
            served = routed
            target = bypass_target(self.faults[(model.id, routed.tag)], instructions, rng)
            if target is not None:
                served = next(e for e in model.endpoints if e.tag == target)
                rng = self.endpoint_rng(model.id, served.tag)
            plan = plan_attempt(instructions, served, self.faults[(model.id, served.tag)], rng, self.text,
                                chunk_interval_s=self.scenario.chunk_interval_s)
            failure = plan.failure
            if failure is not None and failure.kind in ("status", "hang"):
                if failure.kind == "hang" and not await _hang(request, failure.hang_s):
                    return _error(499, "Client closed the request")
                attempts.append(_Attempt(routed=routed, served=served, status=failure.status,
                                         latency_s=loop.time() - attempt_started, plan=plan))
                self.failed[served.tag] += 1
                self.last_failure[(model.id, served.tag)] = loop.time()
                continue
            self.served[served.tag] += 1
            attempts.append(_Attempt(routed=routed, served=served, status=200,
                                     latency_s=0.0, plan=plan))
            ex = _Exchange(
                gen_id=f"gen-{int(time.time())}-{''.join(secrets.choice(_ALNUM) for _ in range(20))}",
                created=int(time.time()), model=model, request=chat, instructions=instructions,
                served=served, plan=plan, attempts=attempts, candidates=candidates, started=started,
                attempt_started=attempt_started, metadata=metadata_on,
                referer=request.headers.get("http-referer"), user_agent=request.headers.get("user-agent"),
            )
            headers = {"X-Generation-Id": ex.gen_id}
            if plan.hostile is not None:
                hostile = self._hostile(ex, headers, stream=chat.stream)
                if hostile is not None:
                    return hostile
            if chat.stream:
                headers |= {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
                return StreamingResponse(self._stream(ex), media_type="text/event-stream", headers=headers)
            return await self._complete(ex, headers)
        return self._upstream_error(model, attempts, candidates, metadata_on, _strategy(chat))

    def _upstream_error(self, model: Model, attempts: list[_Attempt], candidates: list[Endpoint],
                        metadata_on: bool, strategy: str) -> Response:
        """The error of the last failed attempt (§6), with ``previous_errors`` when there were several."""
        last = attempts[-1]
        status = last.status or 502
        provider = last.served.provider_name
        assert last.plan is not None and last.plan.failure is not None
        failure = last.plan.failure
        headers: dict[str, str] = {}
        availability = None
        if status == 408:
            message, meta = "Request timed out", {"error_type": "timeout", "provider_name": provider}
        elif status == 429:
            message = f"{model.id} is temporarily rate-limited upstream. Please retry shortly."
            meta = {"error_type": "rate_limit_exceeded", "provider_name": provider, "provider_code": "429",
                    "raw": '{"error":{"message":"Too many requests"}}',
                    "retry_after_seconds": failure.retry_after_s}
        elif status == 500:
            message, meta = "Internal Server Error", {"error_type": "server"}
        elif status == 503:
            message = "Provider returned error"
            meta = {"error_type": "provider_unavailable", "provider_name": provider, "provider_code": "503",
                    "raw": '{"error":{"message":"Service temporarily unavailable"}}'}
            availability = {"code": "temporarily_unavailable", "retryable": True,
                            "requested_models": [model.id], "affected_providers": [last.served.slug],
                            "retry_after": failure.retry_after_s,
                            "docs_url": "https://openrouter.ai/docs/errors#temporarily_unavailable"}
        elif status in (400, 422):
            # the provider refused the request itself (a stack without a tool parser): passed through
            message = "Provider returned error"
            meta = {"error_type": "invalid_request" if status == 400 else "unprocessable", "provider_name": provider,
                    "provider_code": str(status),
                    "raw": encode({"object": "error", "message": failure.raw or "Bad Request",
                                   "type": "BadRequestError", "param": None, "code": status}).decode()}
        else:
            message = "Provider returned error"
            meta = {"error_type": "provider_unavailable", "provider_name": provider, "provider_code": str(status),
                    "raw": '{"error":{"message":"upstream connect error or disconnect/reset before headers"}}'}
        if failure.retry_after_s is not None:
            headers["Retry-After"] = str(failure.retry_after_s)
        if len(attempts) > 1:
            meta["previous_errors"] = [{"provider": a.served.provider_name, "code": a.status, "status": a.status}
                                       for a in attempts[:-1]]
        extra = {}
        if metadata_on and status != 500:
            extra["openrouter_metadata"] = self._metadata(model, candidates, attempts, None, strategy)
        return _error(status, message, headers=headers, metadata=meta, availability=availability, **extra)

    def _metadata(self, model: Model, candidates: list[Endpoint], attempts: list[_Attempt],
                  served: Endpoint | None, strategy: str = "load_balanced") -> dict[str, Any]:
        """``openrouter_metadata`` (§9): ``attempt`` = number of provider attempts (0 = none)."""
        names = {e.provider_name for e in candidates}
        return {
            "requested": model.id,
            "strategy": strategy,
            "region": "global",
            "summary": (f"served by {served.provider_name} on attempt {len(attempts)}" if served is not None
                        else f"failed after {len(attempts)} attempt(s)"),
            "attempt": len(attempts),
            "is_byok": False,
            "endpoints": {
                "total": len(model.endpoints),
                "available": [{"provider": e.provider_name, "model": model.id,
                               "selected": served is not None and e.provider_name == served.provider_name}
                              for e in model.endpoints if e.provider_name in names],
            },
            "attempts": [{"provider": a.served.provider_name, "model": model.id, "status": a.status}
                         for a in attempts],
            "pipeline": [],
        }

    def _usage(self, ex: _Exchange, completion_tokens: int, reasoning_tokens: int) -> Usage:
        prompt = ex.instructions.prompt_tokens
        p_cost = Decimal(ex.served.pricing.prompt) * prompt
        c_cost = Decimal(ex.served.pricing.completion) * completion_tokens
        return Usage(
            prompt_tokens=prompt, completion_tokens=completion_tokens, total_tokens=prompt + completion_tokens,
            cost=float(p_cost + c_cost),
            completion_tokens_details={"reasoning_tokens": reasoning_tokens},
            cost_details={"upstream_inference_cost": None, "upstream_inference_prompt_cost": float(p_cost),
                          "upstream_inference_completions_cost": float(c_cost)},
        )

    def _record(self, ex: _Exchange, *, streamed: bool, cancelled: bool, finish: str | None, native: str | None,
                first_token: float | None, completion_tokens: int, reasoning_tokens: int) -> None:
        """Store the ``/generation`` record (§7), visible after ``generation_delay_s``."""
        now = asyncio.get_running_loop().time()
        usage = self._usage(ex, completion_tokens, reasoning_tokens)
        responses = []
        for a in ex.attempts:
            latency = a.latency_s if a.status != 200 else now - ex.attempt_started
            responses.append(ProviderResponse(
                provider_name=a.served.provider_name, status=a.status, latency=round(latency * 1000.0, 1),
                id=f"chatcmpl-{hashlib.sha1((ex.gen_id + a.served.tag).encode()).hexdigest()[:24]}",
                endpoint_id=_endpoint_id(ex.model.id, a.served.tag), model_permaslug=ex.model.id))
        while len(self.generations) >= self.generations_kept:  # the oldest first: a dict keeps insertion order
            del self.generations[next(iter(self.generations))]
        self.generations[ex.gen_id] = (now + self.scenario.generation_delay_s, Generation(
            id=ex.gen_id, upstream_id=responses[-1].id, request_id=f"req-{ex.created}-{ex.gen_id[-8:]}",
            created_at=datetime.fromtimestamp(ex.created, timezone.utc).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            model=ex.model.id, provider_name=ex.served.provider_name, streamed=streamed, cancelled=cancelled,
            finish_reason=finish, native_finish_reason=native,
            latency=round((now - ex.started) * 1000.0, 1),
            generation_time=round((now - first_token) * 1000.0, 1) if first_token is not None else 0.0,
            tokens_prompt=usage.prompt_tokens, tokens_completion=completion_tokens,
            native_tokens_prompt=usage.prompt_tokens, native_tokens_completion=completion_tokens,
            native_tokens_reasoning=reasoning_tokens, total_cost=usage.cost, usage=usage.cost,
            http_referer=ex.referer, user_agent=ex.user_agent, provider_responses=responses,
        ))

    async def _stream(self, ex: _Exchange) -> AsyncIterator[bytes]:
        """The SSE body (§3), written in pieces that split characters when the plan says ``bad_utf8``."""
        hostile = ex.plan.hostile
        if not isinstance(hostile, BadUtf8):
            async for data in self._events(ex):
                yield data
            return
        step = hostile.piece_bytes
        async for data in self._events(ex):
            if hostile.mode == "invalid" and b'"content":"' in data:
                data = data.replace(_BAD_MARK, b"\xff", 1).replace(_BAD_MARK, b"\xc3")
            for i in range(0, len(data), step):
                yield data[i:i + step]
                await asyncio.sleep(0)

    async def _events(self, ex: _Exchange) -> AsyncIterator[bytes]:
        """The SSE events (§3): keep-alives, reasoning, content, usage chunk, ``[DONE]``."""
        loop = asyncio.get_running_loop()
        plan = ex.plan
        no_done = plan.hostile if isinstance(plan.hostile, NoDone) else None
        base = ex.attempt_started
        served = ex.served.provider_name

        def chunk(delta: Delta, finish: str | None = None, native: str | None = None, **extra: Any) -> bytes:
            return _sse(Chunk(id=ex.gen_id, created=ex.created, model=ex.model.id, provider=served,
                              choices=[StreamChoice(delta=delta, finish_reason=finish, native_finish_reason=native)],
                              **extra))

        first_at = base + (plan.reasoning_at_s if plan.reasoning and plan.reasoning_at_s is not None
                           else plan.content_at_s)
        first_token: float | None = None
        finished = False
        sent: list[str] = []
        reasoning_tokens = 0
        try:
            yield KEEPALIVE
            while (remaining := first_at - loop.time()) > 0:
                await asyncio.sleep(min(self.keepalive_s, remaining))
                if first_at - loop.time() > 0.002:
                    yield KEEPALIVE
            if plan.reasoning and plan.reasoning_at_s is not None:
                pieces = split_pieces(plan.reasoning)
                step = max(0.0, plan.content_at_s - plan.reasoning_at_s) / max(1, len(pieces))
                for i, piece in enumerate(pieces):
                    await _sleep_until(base + plan.reasoning_at_s + i * step)
                    if first_token is None:
                        first_token = loop.time()
                    yield chunk(Delta(content="", reasoning=piece))
                reasoning_tokens = plan.reasoning_tokens
            await _sleep_until(base + plan.content_at_s)
            content = plan.content
            if isinstance(plan.hostile, BadUtf8) and plan.hostile.mode == "invalid":
                content = _mark_bad_bytes(content)
            pieces = split_pieces(content)
            midstream = plan.failure is not None and plan.failure.kind == "midstream"
            if midstream:
                pieces = pieces[: max(1, len(pieces) // 2)]
            for i, piece in enumerate(pieces):
                if i:
                    await asyncio.sleep(plan.chunk_interval_s)
                if first_token is None:
                    first_token = loop.time()
                sent.append(piece)
                last = (i == len(pieces) - 1 and not midstream and not (no_done and no_done.mode == "cut")
                        and not plan.tool_calls)
                yield chunk(Delta(content=piece), plan.finish_reason if last else None,
                            plan.native_finish_reason if last else None)
            if plan.tool_calls and not midstream:
                # tool calls after any text: per call a first delta (index, id, type, name), then the
                # argument fragments, as OpenAI streams function calls; a tool_stream fault damages them
                calls = list(plan.tool_calls)
                for deltas in stream_deltas(calls, plan.tool_stream, random.Random(calls[0].id)):
                    await asyncio.sleep(plan.chunk_interval_s)
                    if first_token is None:
                        first_token = loop.time()
                    yield chunk(Delta(content=None, tool_calls=deltas))
                if not (no_done is not None and no_done.mode == "cut"):
                    await asyncio.sleep(plan.chunk_interval_s)
                    yield chunk(Delta(content=None), plan.finish_reason, plan.native_finish_reason)
            if no_done is not None and no_done.mode == "cut":
                return  # no finish reason, no usage, no [DONE]: the connection closes
            if midstream:
                await asyncio.sleep(plan.chunk_interval_s)
                yield _sse(Chunk(
                    id=ex.gen_id, created=ex.created, model=ex.model.id, provider=served,
                    error=ErrorObject(code=502, message="Provider disconnected unexpectedly",
                                      metadata={"error_type": "provider_unavailable",
                                                "provider_code": "upstream_disconnect"}),
                    choices=[StreamChoice(delta=Delta(content=""), finish_reason="error",
                                          native_finish_reason="error")]))
                finished = True
                self._record(ex, streamed=True, cancelled=False, finish="error", native="error",
                             first_token=first_token, completion_tokens=_tokens(sent),
                             reasoning_tokens=reasoning_tokens)
                return
            if not pieces and not plan.tool_calls:
                if first_token is None:
                    first_token = loop.time()
                yield chunk(Delta(content=""), plan.finish_reason, plan.native_finish_reason)
            extra: dict[str, Any] = {}
            if ex.metadata:
                extra["openrouter_metadata"] = self._metadata(ex.model, ex.candidates, ex.attempts, ex.served,
                                                              _strategy(ex.request))
            yield _sse(Chunk(id=ex.gen_id, created=ex.created, model=ex.model.id, provider=served, choices=[],
                             usage=self._usage(ex, plan.completion_tokens, plan.reasoning_tokens), **extra))
            if no_done is not None:
                if no_done.mode == "hold":
                    await asyncio.Event().wait()  # held open and silent until the client leaves
                return
            yield DONE
            finished = True
            self._record(ex, streamed=True, cancelled=False, finish=plan.finish_reason,
                         native=plan.native_finish_reason, first_token=first_token,
                         completion_tokens=plan.completion_tokens, reasoning_tokens=plan.reasoning_tokens)
        finally:
            if not finished:
                self._record(ex, streamed=True, cancelled=True, finish=None, native=None, first_token=first_token,
                             completion_tokens=_tokens(sent), reasoning_tokens=reasoning_tokens)

    def _hostile(self, ex: _Exchange, headers: dict[str, str], *, stream: bool) -> Response | None:
        """The response of a hostile-gateway fault (scenario.HOSTILE_KINDS), or ``None`` to answer normally."""
        fault = ex.plan.hostile
        sse = {**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        if isinstance(fault, KeepaliveForever):
            return StreamingResponse(self._keepalives_forever(), media_type="text/event-stream", headers=sse)
        if isinstance(fault, SilentAfterHeaders):
            return StreamingResponse(_silence(), media_type="text/event-stream", headers=sse)
        if isinstance(fault, Html200):
            return Response(_html_page(fault.size_kb), status_code=200, media_type="text/html", headers=headers)
        if isinstance(fault, TokensForever):
            if not stream:
                return None
            return StreamingResponse(self._tokens_forever(ex, fault), media_type="text/event-stream", headers=sse)
        if isinstance(fault, HugeReply):
            if fault.body or not stream:
                return StreamingResponse(self._huge_body(ex, fault), media_type="application/json", headers=headers)
            return StreamingResponse(self._huge_stream(ex, fault), media_type="text/event-stream", headers=sse)
        return None  # bad_utf8, no_done: the normal stream plays them

    async def _keepalives_forever(self) -> AsyncIterator[bytes]:
        while True:
            yield KEEPALIVE
            await asyncio.sleep(self.keepalive_s)

    def _prose(self, ex: _Exchange, size: int) -> str:
        """``size`` characters of the requested language's sentences (a block of about 16 kB, repeated)."""
        rng = random.Random(f"{self.scenario.seed}|prose|{ex.instructions.language}")
        out: list[str] = []
        total = 0
        while total < min(size, 16 * 1024):
            for sentence in self.text.sentences(ex.instructions.language, rng, 4):
                out.append(sentence + " ")
                total += len(sentence) + 1
        block = "".join(out)
        return (block * (size // len(block) + 1))[:size]

    def _delta(self, ex: _Exchange, content: str, finish: str | None = None) -> bytes:
        return _sse(Chunk(id=ex.gen_id, created=ex.created, model=ex.model.id, provider=ex.served.provider_name,
                          choices=[StreamChoice(delta=Delta(content=content), finish_reason=finish,
                                                native_finish_reason=finish)]))

    async def _tokens_forever(self, ex: _Exchange, fault: TokensForever) -> AsyncIterator[bytes]:
        yield KEEPALIVE
        await _sleep_until(ex.attempt_started + ex.plan.content_at_s)
        block = self._prose(ex, max(fault.chunk_chars * 8, 4096))
        i = 0
        while True:
            start = (i * fault.chunk_chars) % len(block)
            yield self._delta(ex, (block + block)[start:start + fault.chunk_chars])
            i += 1
            await asyncio.sleep(fault.interval_s)

    async def _huge_stream(self, ex: _Exchange, fault: HugeReply) -> AsyncIterator[bytes]:
        yield KEEPALIVE
        await _sleep_until(ex.attempt_started + ex.plan.content_at_s)
        piece = self._delta(ex, self._prose(ex, fault.piece_kb * 1024))
        for _ in range(max(1, int(fault.megabytes * 1024 * 1024) // (fault.piece_kb * 1024))):
            yield piece
            await asyncio.sleep(0)
        yield self._delta(ex, "", finish="stop")
        yield _sse(Chunk(id=ex.gen_id, created=ex.created, model=ex.model.id, provider=ex.served.provider_name,
                         choices=[], usage=self._usage(ex, ex.plan.completion_tokens, 0)))
        yield DONE

    async def _huge_body(self, ex: _Exchange, fault: HugeReply) -> AsyncIterator[bytes]:
        await _sleep_until(ex.attempt_started + ex.plan.content_at_s)
        head = (b'{"id":' + encode(ex.gen_id) + b',"object":"chat.completion","created":' + str(ex.created).encode()
                + b',"model":' + encode(ex.model.id) + b',"provider":' + encode(ex.served.provider_name)
                + b',"choices":[{"index":0,"message":{"role":"assistant","content":"')
        yield head
        piece = encode(self._prose(ex, fault.piece_kb * 1024))[1:-1]
        for _ in range(max(1, int(fault.megabytes * 1024 * 1024) // len(piece))):
            yield piece
            await asyncio.sleep(0)
        yield (b'"},"finish_reason":"stop","native_finish_reason":"stop"}],"usage":'
               + encode(self._usage(ex, ex.plan.completion_tokens, 0)) + b"}")

    async def _complete(self, ex: _Exchange, headers: dict[str, str]) -> Response:
        """A non-streamed ``chat.completion`` (§3-§6); a mid-generation failure is a 200 with a choice error."""
        loop = asyncio.get_running_loop()
        plan = ex.plan
        pieces = split_pieces(plan.content)
        midstream = plan.failure is not None and plan.failure.kind == "midstream"
        if midstream:
            pieces = pieces[: max(1, len(pieces) // 2)]
        first = ex.attempt_started + (plan.reasoning_at_s if plan.reasoning and plan.reasoning_at_s is not None
                                      else plan.content_at_s)
        await _sleep_until(ex.attempt_started + plan.content_at_s + plan.chunk_interval_s * max(0, len(pieces) - 1))
        content = "".join(pieces)
        metadata = (self._metadata(ex.model, ex.candidates, ex.attempts, ex.served, _strategy(ex.request))
                    if ex.metadata else msgspec.UNSET)
        if midstream:
            tokens = _tokens(pieces)
            choice = Choice(message=ChatMessage(content=content), finish_reason="error",
                            native_finish_reason="error",
                            error=ErrorObject(code=502, message="Provider disconnected unexpectedly",
                                              metadata={"error_type": "provider_unavailable"}))
            self._record(ex, streamed=False, cancelled=False, finish="error", native="error",
                         first_token=min(first, loop.time()), completion_tokens=tokens, reasoning_tokens=0)
            return _json(Completion(id=ex.gen_id, created=ex.created, model=ex.model.id,
                                    provider=ex.served.provider_name, choices=[choice],
                                    usage=self._usage(ex, tokens, 0), openrouter_metadata=metadata), headers=headers)
        calls = [ToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments)) for c in plan.tool_calls]
        message = ChatMessage(content=content or (None if calls else ""), reasoning=plan.reasoning or None,
                              tool_calls=calls or msgspec.UNSET)
        choice = Choice(message=message, finish_reason=plan.finish_reason,
                        native_finish_reason=plan.native_finish_reason)
        self._record(ex, streamed=False, cancelled=False, finish=plan.finish_reason, native=plan.native_finish_reason,
                     first_token=min(first, loop.time()), completion_tokens=plan.completion_tokens,
                     reasoning_tokens=plan.reasoning_tokens)
        return _json(Completion(id=ex.gen_id, created=ex.created, model=ex.model.id,
                                provider=ex.served.provider_name, choices=[choice],
                                usage=self._usage(ex, plan.completion_tokens, plan.reasoning_tokens),
                                openrouter_metadata=metadata), headers=headers)

    # --- generation stats (§7) ---------------------------------------------

    async def generation(self, request: Request) -> Response:
        """``GET /api/v1/generation?id=gen-...`` → ``{"data": Generation}``; 404 until known."""
        if self.scenario.require_key and not _bearer(request):
            return _error(401, "No auth credentials found", metadata={"error_type": "authentication"})
        gen_id = request.query_params.get("id")
        if not gen_id:
            return _error(400, "Missing required query parameter: id", metadata={"error_type": "invalid_request"})
        entry = self.generations.get(gen_id)
        if entry is None or entry[0] > asyncio.get_running_loop().time():
            return _error(404, f"Generation {gen_id} not found", metadata={"error_type": "not_found"})
        return _json({"data": entry[1]})

    # --- test hooks -----------------------------------------------------------

    async def put_outage(self, request: Request) -> Response:
        """``PUT /_sim/outage`` ``{"status": 401 | 402 | 403 | null, "scope": "all" | "chat"}``: refuse so, or serve."""
        try:
            body = msgspec.json.decode(await request.body())
            status, scope = body.get("status"), body.get("scope", "all")
        except (msgspec.DecodeError, AttributeError):
            return _error(400, "body must be {\"status\": 401 | 402 | 403 | null, \"scope\": \"all\" | \"chat\"}")
        if status is not None and status not in OUTAGE_ANSWERS:
            return _error(400, f"outage status must be one of {sorted(OUTAGE_ANSWERS)} or null")
        if scope not in ("all", "chat"):
            return _error(400, "outage scope must be all or chat")
        self.outage, self.outage_scope = status, scope
        return _json({"status": self.outage, "scope": self.outage_scope})

    async def put_faults(self, request: Request) -> Response:
        """``PUT /_sim/faults?provider=<tag>[&model=<id>]`` with ``{"faults": [...]}``: replace faults.

        Returns ``{"provider": tag, "models": [...], "faults": [...]}``; 400 on an
        invalid fault list (the message names the field), 404 on an unknown tag.
        """
        tag = request.query_params.get("provider")
        model_id = request.query_params.get("model")
        if not tag:
            return _error(400, "Missing query parameter: provider")
        keys = [k for k in self.faults if k[1] == tag and (model_id is None or k[0] == model_id)]
        if not keys:
            return _error(404, f"Unknown endpoint tag {tag!r}")
        try:
            raw = msgspec.json.decode(await request.body())
            if not isinstance(raw, dict) or not isinstance(raw.get("faults"), list):
                raise ConfigError('body must be {"faults": [...]}')
            faults = decode_faults(raw["faults"])
            for key in keys:
                model = self.scenario.model(key[0])
                assert model is not None
                check_faults(faults, [e.tag for e in model.endpoints], own_tag=tag, where="faults")
        except (msgspec.DecodeError, ConfigError, ValueError) as exc:
            return _error(400, str(exc), metadata={"error_type": "invalid_request"})
        for key in keys:
            self.faults[key] = list(faults)
        return _json({"provider": tag, "models": [k[0] for k in keys], "faults": faults})

    async def get_faults(self, request: Request) -> Response:
        """``GET /_sim/faults`` → ``{"<model>": {"<tag>": [faults]}}``."""
        out: dict[str, dict[str, list[Any]]] = {}
        for (model_id, tag), faults in self.faults.items():
            out.setdefault(model_id, {})[tag] = faults
        return _json(out)

    async def stats(self, request: Request) -> Response:
        """``GET /_sim/stats`` → attempts, served and failed counts per endpoint tag."""
        return _json({"requests": self.requests, "attempts": dict(self.attempts), "served": dict(self.served),
                      "failed": dict(self.failed)})


_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def tools_problem(chat: ChatRequest) -> str | None:
    """What is wrong with a request's ``tools`` / ``tool_choice`` (the Chat Completions tool schema), or ``None``.

    Refused (400): a tool whose ``type`` is not ``function`` or whose name is not 1-64 of
    ``a-z A-Z 0-9 _ -``; two tools of one name; a ``tool_choice`` other than ``none``, ``auto``,
    ``required`` or ``{"type": "function", "function": {"name": …}}``; ``required`` or a named
    tool without ``tools``; a named tool the request does not offer.
    """
    names = []
    for i, tool in enumerate(chat.tools or ()):
        if tool.type != "function":
            return f"tools[{i}].type must be 'function'"
        if not _TOOL_NAME.match(tool.function.name):
            return f"tools[{i}].function.name must be 1-64 characters of a-z, A-Z, 0-9, _ and -"
        names.append(tool.function.name)
    if len(set(names)) != len(names):
        return "tools must have distinct function names"
    choice = chat.tool_choice
    if choice is None:
        return None
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            return "tool_choice must be 'none', 'auto', 'required' or a function"
        if choice == "required" and not names:
            return "tool_choice 'required' needs tools"
        return None
    fn = choice.get("function")
    name = fn.get("name") if isinstance(fn, dict) else None
    if choice.get("type") != "function" or not isinstance(name, str):
        return "tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": …}}"
    if name not in names:
        return f"tool_choice names {name!r}, which is not among the request's tools"
    return None


def _strategy(chat: ChatRequest) -> str:
    return "ordered" if chat.provider is not None and chat.provider.order else "load_balanced"


def _bearer(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    scheme, _, key = auth.partition(" ")
    return key.strip() if scheme.lower() == "bearer" else ""


def _tokens(pieces: list[str]) -> int:
    return count_tokens("".join(pieces))


async def _sleep_until(deadline: float) -> None:
    delay = deadline - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


#: A private-use character the ``bad_utf8`` fault writes into content; on the wire its
#: UTF-8 bytes are replaced by bytes that are not UTF-8.
_BAD_CHAR = "\ue000"
_BAD_MARK = _BAD_CHAR.encode("utf-8")


def _mark_bad_bytes(content: str) -> str:
    """Put a bad-byte marker after the first word and in the middle of ``content``."""
    if not content:
        return content
    first = content.find(" ")
    first = first if first > 0 else len(content) // 2
    middle = max(first + 1, len(content) // 2)
    return content[:first] + _BAD_CHAR + content[first:middle] + _BAD_CHAR + content[middle:]


async def _silence() -> AsyncIterator[bytes]:
    """A body that never sends a byte (the client's disconnect or the server's shutdown ends it)."""
    await asyncio.Event().wait()
    yield b""


def _html_page(size_kb: int) -> bytes:
    """An HTML challenge page of about ``size_kb`` KiB, as a CDN in front of an API sends one."""
    head = (b"<!DOCTYPE html><html lang=\"en-US\"><head><title>Just a moment...</title>"
            b"<meta http-equiv=\"refresh\" content=\"390\"></head><body><div class=\"main-wrapper\">"
            b"<h1>Checking if the site connection is secure</h1>")
    filler = b"<p>This process is automatic. Your browser will redirect to your requested content shortly.</p>"
    body = head + filler * max(1, (size_kb * 1024 - len(head)) // len(filler))
    return body + b"</div></body></html>"


async def _hang(request: Request, hang_s: float) -> bool:
    """Hold the request without response headers for ``hang_s``; ``False`` if the client left."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + hang_s
    while (remaining := deadline - loop.time()) > 0:
        await asyncio.sleep(min(0.1, remaining))
        if await request.is_disconnected():
            return False
    return True


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))


def create_app(
    scenario: Scenario,
    *,
    sentences_dir: str | Path | None = None,
    keepalive_s: float | None = None,
    generations_kept: int = GENERATIONS_KEPT,
) -> Starlette:
    """Build the simulated OpenRouter gateway as an ASGI app.

    Args:
        scenario: the fleet (:func:`reverie_canary.simulator.scenario.load_scenario`).
        sentences_dir: optional directory of ``<lang>.txt`` real sentences for
            healthy replies (read by path, never copied).
        keepalive_s: interval of ``: OPENROUTER PROCESSING`` comments in
            seconds; default the scenario's ``keepalive_s`` (0.2 s).
        generations_kept: the latest ``/generation`` records kept (:data:`GENERATIONS_KEPT`).

    Returns:
        A Starlette app; its :class:`Gateway` is ``app.state.gateway``.  Routes
        live under ``/api/v1`` (OpenRouter) and ``/_sim`` (test hooks).
    """
    gateway = Gateway(scenario, TextSource(sentences_dir),
                      keepalive_s if keepalive_s is not None else scenario.keepalive_s, generations_kept)

    def guarded(handler, *, chat: bool = False):
        async def answer(request: Request) -> Response:
            if gateway.outage is not None and (chat or gateway.outage_scope == "all"):
                return outage_response(gateway.outage)
            return await handler(request)
        return answer

    routes = [
        Route("/api/v1/models", guarded(gateway.list_models), methods=["GET"]),
        Route("/api/v1/models/{author}/{slug}/endpoints", guarded(gateway.list_endpoints), methods=["GET"]),
        Route("/api/v1/providers", guarded(gateway.list_providers), methods=["GET"]),
        Route("/api/v1/chat/completions", guarded(gateway.chat, chat=True), methods=["POST"]),
        Route("/api/v1/generation", guarded(gateway.generation), methods=["GET"]),
        Route("/_sim/outage", gateway.put_outage, methods=["PUT"]),
        Route("/_sim/faults", gateway.put_faults, methods=["PUT"]),
        Route("/_sim/faults", gateway.get_faults, methods=["GET"]),
        Route("/_sim/stats", gateway.stats, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.gateway = gateway
    return app
