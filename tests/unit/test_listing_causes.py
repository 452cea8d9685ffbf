"""The endpoints listing says why a cycle cannot be planned (docs/concepts/health.md)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import UNPLANNED_CAUSES
from reverie_canary.shared.runtime.openrouter import ListingFailed, list_endpoints

MODEL = "acme/chat-1"


def _listing(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url="http://gateway.test/api/v1/", transport=httpx.MockTransport(handler))


async def _list(handler):
    async with _listing(handler) as client:
        return await list_endpoints(client, MODEL)


@pytest.mark.parametrize("status, cause", [(401, "gateway_auth"), (402, "gateway_credit"),
                                           (403, "gateway_forbidden"), (404, "listing_refused")])
def test_a_refused_listing_names_its_cause(status, cause):
    """401, 402 and 403 are the canary's key; another 4xx is a refused listing; none is retried."""
    def handler(request):
        return httpx.Response(status, json={"error": {"code": status, "message": "no"}})

    with pytest.raises(ListingFailed) as caught:
        asyncio.run(_list(handler))
    assert (caught.value.cause, caught.value.http_status) == (cause, status)
    assert caught.value.cause in UNPLANNED_CAUSES


def test_an_unparseable_listing_is_listing_unparseable():
    """A 200 whose body is not the documented shape cannot be planned from."""
    with pytest.raises(ListingFailed) as caught:
        asyncio.run(_list(lambda request: httpx.Response(200, text="<html>maintenance</html>")))
    assert (caught.value.cause, caught.value.http_status) == ("listing_unparseable", 200)


def test_an_unreachable_gateway_and_a_failing_one_are_transient_with_their_cause():
    """No connection: gateway_unreachable; 503: gateway_error with the status (both retried until the deadline)."""
    def refused(request):
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(Transient) as caught:
        asyncio.run(_list(refused))
    assert caught.value.context == {"model": MODEL, "cause": "gateway_unreachable", "http_status": None}
    with pytest.raises(Transient) as caught:
        asyncio.run(_list(lambda request: httpx.Response(503, json={"error": {"code": 503, "message": "busy"}})))
    assert caught.value.context == {"model": MODEL, "cause": "gateway_error", "http_status": 503}
