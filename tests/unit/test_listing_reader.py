"""The endpoints listing is read one endpoint at a time: real shapes decode, a bad entry is dropped and named."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.events import DroppedEndpoint, Endpoint, EndpointsDiscovered, Pricing, degraded
from reverie_canary.shared.runtime.listing import ListingUnreadable, read_listing, slug_of
from reverie_canary.shared.runtime.openrouter import ListingFailed, fetch_listing
from tests.judge_events import T0

LISTINGS = Path(__file__).resolve().parents[1] / "data" / "listings"


def listing(name: str):
    return read_listing((LISTINGS / name).read_bytes())


def by_tag(name: str) -> dict[str, Endpoint]:
    return {e.provider: e for e in listing(name).endpoints}


def test_a_current_listing_reads_every_endpoint_with_its_gateway_status():
    """2026 shape: four endpoints, two of them marked degraded by the gateway (status -2), none dropped."""
    read = listing("current_fast_pair.json")
    assert [e.provider for e in read.endpoints] == ["fireworks", "alibaba", "fireworks/fast", "morph/fast"]
    assert read.dropped == [] and read.entries == 4
    eps = {e.provider: e for e in read.endpoints}
    assert {tag for tag, e in eps.items() if degraded(e)} == {"alibaba", "morph/fast"}
    assert eps["alibaba"].status == -2 and eps["fireworks"].status == 0
    assert eps["fireworks"].max_completion_tokens is None and eps["fireworks"].quantization == "unknown"
    assert eps["fireworks/fast"].provider_name == eps["fireworks"].provider_name == "Fireworks"
    assert eps["fireworks"].pricing == Pricing(prompt="0.000002", completion="0.00001", discount=0.0)
    assert all(e.tag_from == "" and e.unread == [] for e in read.endpoints)


def test_an_older_listing_without_tags_derives_them_and_says_so():
    """Before mid-2025 no endpoint carried a tag: the listing used to be refused whole; now each gets one."""
    eps = by_tag("untagged_2025.json")
    assert set(eps) == {"deepinfra/fp8", "deepinfra/bf16", "novita", "chutes"}
    # two endpoints of one provider: the quantization tells them apart, as the gateway's own tags do
    assert eps["deepinfra/fp8"].tag_from == eps["deepinfra/bf16"].tag_from == "provider_name+quantization"
    # one endpoint of its provider: the provider's slug, which routes to it
    assert eps["novita"].tag_from == eps["chutes"].tag_from == "provider_name"
    assert eps["deepinfra/bf16"].max_completion_tokens == 16384
    assert eps["chutes"].status == -1 and degraded(eps["chutes"])
    assert eps["novita"].supported_parameters[-1] == "structured_outputs"


def test_prices_written_as_json_numbers_are_kept():
    """A 2025 shape writes ``"request": 0``: the pricing is read (it used to be lost whole)."""
    (chutes,) = listing("numeric_prices.json").endpoints
    assert chutes.provider == "chutes" and chutes.quantization is None
    assert chutes.pricing == Pricing(prompt="0.00000018", completion="0.0000007", request="0", discount=0.0)


def test_one_bad_entry_is_dropped_and_named_and_the_others_are_kept():
    """Each fault that used to refuse the listing whole now costs only its own entry."""
    read = listing("one_bad_entry.json")
    eps = {e.provider: e for e in read.endpoints}
    assert list(eps) == ["deepinfra/fp8", "novita", "lambda/fp8", "parasail/fp8", "together"]
    assert read.entries == 9
    assert [(d.index, d.reason, d.name) for d in read.dropped] == [
        (2, "no_tag", "Unknown | acme/chat-1"),
        (5, "bad_tag", "Evil | acme/chat-1"),
        (6, "duplicate_tag", "DeepInfra | acme/chat-1 (again)"),
        (7, "not_an_object", ""),
    ]
    assert "no provider name" in read.dropped[0].detail
    assert eps["novita"].tag_from == "provider_name"  # a null tag, derived
    # a null provider name is kept: nothing to derive from it, the pin check says it cannot verify
    assert eps["lambda/fp8"].provider_name == "" and eps["lambda/fp8"].unread == ["provider_name"]
    # null parameters read as none declared; a string for a number and a word for a status read as absent
    parasail = eps["parasail/fp8"]
    assert parasail.unread == ["context_length", "status", "supported_parameters"]
    assert (parasail.supported_parameters, parasail.context_length, parasail.status) == ([], None, None)
    assert eps["deepinfra/fp8"].context_length == 131072  # the first of a repeated tag is the one kept


def test_a_listing_with_an_entry_of_every_fault_round_trips_on_the_wire():
    """The dropped entries and the derived and unread marks are wire facts an older reader skips."""
    read = listing("one_bad_entry.json")
    event = EndpointsDiscovered(at=T0, model="acme/chat-1", cycle="acme/chat-1@1", cycle_no=1, deadline=T0,
                                endpoints=read.endpoints, dropped=read.dropped)
    body = codec.encode(event)
    assert codec.ENDPOINTS_OR_CLOSE.decode(body) == event
    older = json.loads(body)
    older.pop("dropped")
    for e in older["endpoints"]:
        e.pop("tag_from", None)
        e.pop("unread", None)
    back = codec.ENDPOINTS_OR_CLOSE.decode(json.dumps(older).encode())
    assert back.dropped == [] and [e.provider for e in back.endpoints] == [e.provider for e in read.endpoints]


def test_an_untagged_endpoint_of_a_provider_with_a_tagged_one_is_suffixed_or_dropped():
    """``DeepInfra`` untagged beside ``deepinfra/fp8``: ``deepinfra/bf16``; a second fp8 one is a duplicate."""
    body = {"data": {"endpoints": [
        {"provider_name": "DeepInfra", "tag": "deepinfra/fp8", "quantization": "fp8"},
        {"provider_name": "DeepInfra", "quantization": "bf16"},
        {"provider_name": "DeepInfra", "quantization": "fp8"},
        {"provider_name": "Google AI Studio", "quantization": None},
    ]}}
    read = read_listing(json.dumps(body).encode())
    assert [(e.provider, e.tag_from) for e in read.endpoints] == [
        ("deepinfra/fp8", ""), ("deepinfra/bf16", "provider_name+quantization"), ("google-ai-studio", "provider_name")]
    assert [(d.index, d.reason) for d in read.dropped] == [(2, "duplicate_tag")]


@pytest.mark.parametrize("name, slug", [
    ("DeepInfra", "deepinfra"), ("Google AI Studio", "google-ai-studio"), ("Z.AI", "z-ai"),
    ("Amazon Bedrock", "amazon-bedrock"), ("Nex AGI", "nex-agi"), ("Crusoé", "crusoe"), ("???", ""),
])
def test_a_display_name_becomes_a_slug(name, slug):
    """Lower case, letters and digits, one dash for every other run; nothing left: no slug."""
    assert slug_of(name) == slug


def test_a_hostile_name_is_kept_printable_and_bounded():
    """A dropped entry's name reaches terminals: control characters are taken out, 128 characters at most."""
    body = {"data": {"endpoints": [{"name": "\x1b[31mred\x1b[0m" + "x" * 500, "tag": "a b"}]}}
    (dropped,) = read_listing(json.dumps(body).encode()).dropped
    assert dropped.reason == "bad_tag" and "\x1b" not in dropped.name and len(dropped.name) == 128
    assert DroppedEndpoint(**{f: getattr(dropped, f) for f in dropped.__struct_fields__}) == dropped


@pytest.mark.parametrize("body", [b"<html>maintenance</html>", b'{"data": []}', b'{"data": {"endpoints": {}}}',
                                  b'{"endpoints": []}'])
def test_a_body_that_is_not_the_envelope_is_still_refused_whole(body):
    """The envelope has one documented shape: without it there is nothing to read an endpoint from."""
    with pytest.raises(ListingUnreadable):
        read_listing(body)


def test_fetching_a_listing_with_bad_entries_plans_the_good_ones():
    """Over HTTP: the older untagged listing is not ``listing_unparseable`` any more."""
    raw = (LISTINGS / "untagged_2025.json").read_bytes()

    async def fetch():
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=raw))
        async with httpx.AsyncClient(base_url="http://gateway.test/api/v1/", transport=transport) as client:
            return await fetch_listing(client, "deepseek/deepseek-chat-v3-0324")

    read = asyncio.run(fetch())
    assert len(read.endpoints) == 4 and read.dropped == []

    async def broken():
        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=b"[]"))
        async with httpx.AsyncClient(base_url="http://gateway.test/api/v1/", transport=transport) as client:
            return await fetch_listing(client, "acme/chat-1")

    with pytest.raises(ListingFailed) as caught:
        asyncio.run(broken())
    assert caught.value.cause == "listing_unparseable"
