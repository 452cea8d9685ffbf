"""The OpenRouter HTTP API: client construction and the endpoints listing.

The same code talks to the real gateway (``OPENROUTER_BASE_URL`` default
``https://openrouter.ai/api/v1`` with ``OPENROUTER_API_KEY``) and to the
simulated one (:mod:`simulator`).  Request headers follow openrouter-api.md
section 9: ``Authorization: Bearer`` (only when a key is set; the key is never
logged), ``HTTP-Referer`` and ``X-OpenRouter-Title`` for attribution; no
caching or session headers, so that every probe reaches a provider.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx
import msgspec

from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import BLIND_STATUS, Endpoint, Pricing
from reverie_canary.shared.runtime.settings import Settings


def make_client(settings: Settings, *, timeout_s: float | None = None,
                connections: int | None = None, ssl_context: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for the gateway at ``settings.openrouter_base_url``.

    Args:
        settings: base URL, API key, attribution headers.
        timeout_s: read timeout (default ``settings.request_timeout_s``); connect 5 s.
        connections: requests in flight at once, and connections kept alive
            between them (``None``: 200 and 50, for the listing and ``canary probe``):
            the prober's clients are sized so that together they hold its most
            requests in flight (:class:`reverie_canary.services.prober.clients.ClientPool`),
            so a connection is opened once and reused, never closed for want of room
            (each new one is a TCP and TLS handshake against the real gateway).
        ssl_context: the TLS context to use (default: a new one, about 25 ms to load the CA bundle).
    """
    headers = {
        "HTTP-Referer": settings.http_referer,
        "X-OpenRouter-Title": settings.app_title,
        "User-Agent": "reverie-canary/0.1",
    }
    if settings.openrouter_api_key:
        headers["Authorization"] = f"Bearer {settings.openrouter_api_key}"
    read = timeout_s or settings.request_timeout_s
    return httpx.AsyncClient(
        base_url=settings.openrouter_base_url.rstrip("/") + "/",
        headers=headers,
        timeout=httpx.Timeout(connect=5.0, read=read, write=10.0, pool=10.0),
        limits=httpx.Limits(max_connections=connections or 200, max_keepalive_connections=connections or 50),
        verify=ssl_context if ssl_context is not None else True,
    )


class _PublicEndpoint(msgspec.Struct, kw_only=True):
    tag: str
    provider_name: str = ""
    model_id: str = ""
    supported_parameters: list[str] = []
    quantization: str | None = None
    context_length: int | None = None
    max_completion_tokens: int | None = None
    status: int | None = None
    pricing: dict[str, Any] | None = None


class _EndpointsData(msgspec.Struct, kw_only=True):
    id: str = ""
    endpoints: list[_PublicEndpoint] = []


class _EndpointsResponse(msgspec.Struct, kw_only=True):
    data: _EndpointsData


_endpoints_decoder = msgspec.json.Decoder(_EndpointsResponse)


class ListingFailed(ValueError):
    """The endpoints listing failed in a way a retry within the cycle will not mend.

    Attributes:
        cause: ``gateway_auth`` (401), ``gateway_credit`` (402),
            ``gateway_forbidden`` (403), ``listing_refused`` (another 4xx: an
            unknown model) or ``listing_unparseable`` (not the documented shape);
            see :data:`reverie_canary.shared.contract.events.UNPLANNED_CAUSES`.
        http_status: the listing's status.
    """

    def __init__(self, message: str, *, cause: str, http_status: int | None) -> None:
        super().__init__(message)
        self.cause = cause
        self.http_status = http_status


async def list_endpoints(client: httpx.AsyncClient, model: str) -> list[Endpoint]:
    """List a model's endpoints: ``GET /models/{author}/{slug}/endpoints`` (openrouter-api.md 1.1).

    Decoding is permissive about extra and missing optional fields (older
    responses have fewer), strict about the types of the fields used.

    Returns:
        One :class:`reverie_canary.shared.contract.events.Endpoint` per endpoint ``tag``, in listing order.

    Raises:
        Transient: network error, timeout, 5xx or 429; its ``context`` has
            ``cause`` (``gateway_unreachable`` when no connection could be
            opened, else ``gateway_error``) and ``http_status``.
        ListingFailed: (a ``ValueError``) 401, 402, 403 (the canary's own key),
            another 4xx (unknown model) or a body that is not the documented shape.
    """
    try:
        response = await client.get(f"models/{model}/endpoints")
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise Transient(f"listing endpoints of {model}: the gateway cannot be reached: {exc!r}", model=model,
                        cause="gateway_unreachable", http_status=None) from exc
    except httpx.HTTPError as exc:
        raise Transient(f"listing endpoints of {model} failed: {exc!r}", model=model, cause="gateway_error",
                        http_status=None) from exc
    status = response.status_code
    if status == 429 or status >= 500:
        raise Transient(f"listing endpoints of {model}: HTTP {status}", model=model, cause="gateway_error",
                        http_status=status)
    if status != 200:
        raise ListingFailed(f"listing endpoints of {model}: HTTP {status}: {_error_message(response)}",
                            cause=BLIND_STATUS.get(status, "listing_refused"), http_status=status)
    try:
        body = _endpoints_decoder.decode(response.content)
    except msgspec.DecodeError as exc:
        raise ListingFailed(f"listing endpoints of {model}: unexpected body: {exc}", cause="listing_unparseable",
                            http_status=status) from exc
    out = []
    for e in body.data.endpoints:
        endpoint = bounded_endpoint(e)
        if endpoint is not None:
            out.append(endpoint)
    return out


#: Bounds of what the listing hands on (the fields of :class:`Endpoint`, DESIGN.md "Bounds").
_TOKEN = 64
_PARAMETERS = 64


def bounded_endpoint(e: _PublicEndpoint) -> Endpoint | None:
    """One listed endpoint as an :class:`Endpoint` within its wire bounds, or ``None`` for an unusable tag.

    The gateway is not ours: a display name or model id longer than its bound
    is cut, a supported parameter that is not a short token is left out (at
    most 64 are kept), and an endpoint whose tag is not an identifier (empty,
    too long, with a space, a quote or a control character) is left out with a
    warning, since it could be neither pinned nor ignored safely.
    """
    from reverie_canary.shared.runtime.logging import get as get_logger

    endpoint = Endpoint(
        provider=e.tag,
        provider_name=e.provider_name[:128],
        model_id=e.model_id[:256],
        supported_parameters=[p for p in e.supported_parameters if 0 < len(p) <= _TOKEN][:_PARAMETERS],
        quantization=e.quantization[:_TOKEN] if e.quantization is not None else None,
        context_length=e.context_length,
        max_completion_tokens=e.max_completion_tokens,
        status=e.status,
        pricing=listed_pricing(e.pricing),
    )
    try:
        return msgspec.convert(msgspec.to_builtins(endpoint), Endpoint)
    except msgspec.ValidationError as exc:
        get_logger("openrouter").warning("endpoint_unusable", tag=e.tag[:80], error=str(exc))
        return None


_pricing_decoder = msgspec.json.Decoder(Pricing)


def listed_pricing(raw: dict[str, Any] | None) -> Pricing | None:
    """The ``pricing`` object of a listed endpoint as :class:`Pricing` (openrouter-api.md 1.1).

    Only ``prompt``, ``completion``, ``request`` and ``discount`` are kept (the
    other prices concern images, audio, web search and caches, which probes do
    not use).  A listing without prices, or with one that does not read as a
    decimal string, gives ``None``: the spend of that endpoint is then unpriced,
    never guessed, and the listing itself is still used.
    """
    if not isinstance(raw, dict):
        return None
    kept = {k: raw[k] for k in ("prompt", "completion", "request", "discount") if raw.get(k) is not None}
    try:
        return _pricing_decoder.decode(msgspec.json.encode(kept))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _error_message(response: httpx.Response) -> str:
    try:
        data: Any = response.json()
        return str(data.get("error", {}).get("message", ""))[:300]
    except ValueError:
        return response.text[:300]
