"""The OpenRouter HTTP API: client construction and the endpoints listing.

The same code talks to the real gateway (``OPENROUTER_BASE_URL`` default
``https://openrouter.ai/api/v1`` with ``OPENROUTER_API_KEY``) and to the
simulated one (:mod:`simulator`).  Request headers follow OpenRouter's API documentation
section 9: ``Authorization: Bearer`` (only when a key is set; the key is never
logged), ``HTTP-Referer`` and ``X-OpenRouter-Title`` for attribution; no
caching or session headers, so that every probe reaches a provider.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx

from reverie_canary.shared.contract.errors import CanaryError, Transient
from reverie_canary.shared.contract.events import BLIND_STATUS, Endpoint
from reverie_canary.shared.runtime.listing import Listing, ListingUnreadable, read_listing
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


class ListingFailed(CanaryError, ValueError):
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


async def fetch_listing(client: httpx.AsyncClient, model: str) -> Listing:
    """List a model's endpoints: ``GET /models/{author}/{slug}/endpoints`` (OpenRouter's endpoints listing API).

    Each endpoint is read on its own (:func:`reverie_canary.shared.runtime.listing.read_listing`):
    one the canary cannot use is dropped and named, the others are kept, so
    that one bad entry never blinds the model; a missing tag is derived and
    says so.

    Returns:
        The :class:`~reverie_canary.shared.runtime.listing.Listing`: the usable
        endpoints in listing order, and the entries dropped with their reasons.

    Raises:
        Transient: network error, timeout, 5xx or 429; its ``context`` has
            ``cause`` (``gateway_unreachable`` when no connection could be
            opened, else ``gateway_error``) and ``http_status``.
        ListingFailed: (a ``ValueError``) 401, 402, 403 (the canary's own key),
            another 4xx (unknown model) or a body that is not the documented
            envelope ``{"data": {"endpoints": [...]}}``.
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
        return read_listing(response.content)
    except ListingUnreadable as exc:
        raise ListingFailed(f"listing endpoints of {model}: unexpected body: {exc}", cause="listing_unparseable",
                            http_status=status) from exc


async def list_endpoints(client: httpx.AsyncClient, model: str) -> list[Endpoint]:
    """The usable endpoints of :func:`fetch_listing` (the entries it drops are logged, ``listing_dropped``)."""
    listing = await fetch_listing(client, model)
    if listing.dropped:
        from reverie_canary.shared.runtime.logging import get as get_logger

        get_logger("openrouter").warning("listing_dropped", model=model, dropped=len(listing.dropped),
                                         reasons=sorted({d.reason for d in listing.dropped}))
    return listing.endpoints


def _error_message(response: httpx.Response) -> str:
    try:
        data: Any = response.json()
        return str(data.get("error", {}).get("message", ""))[:300]
    except ValueError:
        return response.text[:300]
