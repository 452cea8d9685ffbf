"""Listed prices of an endpoint (OpenRouter's endpoints listing API ``pricing``) as discovery keeps them."""

from __future__ import annotations

import pytest

from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.events import Endpoint, EndpointsDiscovered, Pricing
from reverie_canary.shared.runtime.listing import listed_pricing
from tests.judge_events import T0


def test_the_reference_listing_prices_are_kept_as_exact_decimal_strings():
    """prompt, completion and discount of the documented example are kept; cache prices are dropped."""
    pricing = listed_pricing({"prompt": "0.0000002", "completion": "0.0000008", "input_cache_read": "0.00000004",
                              "discount": 0})
    assert pricing == Pricing(prompt="0.0000002", completion="0.0000008", request="0", discount=0.0)


@pytest.mark.parametrize("raw", [
    None, "free", {}, {"prompt": "0.0000002"}, {"prompt": "cheap", "completion": "0.000001"},
    {"prompt": True, "completion": "0.000001"}, {"prompt": "0.0000002", "completion": "0.000001", "discount": 2},
    {"prompt": "0.0000002", "completion": "0.000001", "request": "per call"},
])
def test_a_missing_or_unreadable_price_is_none_never_a_guess(raw):
    """No price, a non-decimal (a word, a boolean), or a discount above 1: no pricing at all."""
    assert listed_pricing(raw) is None


def test_a_price_written_as_a_json_number_is_read_as_its_decimal_text():
    """Real listings write some prices as numbers (``"request": 0``): read exactly, not dropped."""
    pricing = listed_pricing({"prompt": "0.0000002", "completion": 8e-7, "request": 0, "image": 0, "discount": 0})
    assert pricing == Pricing(prompt="0.0000002", completion="8e-07", request="0", discount=0.0)


def test_an_endpoint_with_and_without_pricing_round_trips_on_the_wire():
    """EndpointsDiscovered carries the pricing; an older event without it decodes with None."""
    priced = Endpoint(provider="a/fp8", pricing=Pricing(prompt="0.0000002", completion="0.0000008",
                                                         request="0.001", discount=0.1))
    event = EndpointsDiscovered(at=T0, model="m/x", cycle="m/x@1", cycle_no=1, deadline=T0,
                                endpoints=[priced, Endpoint(provider="b/fp8")])
    back = codec.ENDPOINTS_OR_CLOSE.decode(codec.encode(event))
    assert back.endpoints[0].pricing == priced.pricing
    assert back.endpoints[1].pricing is None
