"""The chat backend's client hands the operators' quantization floor over with the ignore list.

docs/chat-backend.md: ``provider()`` carries the snapshot's ``quantizations`` allow-list as
``provider.quantizations`` (OpenRouter's provider routing documentation); no floor, no key.
"""

from __future__ import annotations

from datetime import datetime, timezone

from reverie_canary.client import IgnoreListClient
from reverie_canary.client.ignore_list import snapshot_bytes
from reverie_canary.client.wire import IgnoreEntry, IgnoreReason, IgnoreSnapshot, decode_snapshot

MODEL = "acme/chat-1"
AT = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
ALLOWED = ["fp6", "int8", "fp8", "mxfp8", "fp16", "bf16", "fp32"]


def client_with(version: int, quantizations: list[str]) -> IgnoreListClient:
    client = IgnoreListClient("nats://127.0.0.1:1", MODEL, now=lambda: AT)
    entry = IgnoreEntry(provider="bad/fp8", reasons=[IgnoreReason(layer="override", reason="incident")])
    assert client.apply(snapshot_bytes(IgnoreSnapshot(at=AT, model=MODEL, version=version, entries=[entry],
                                                      quantizations=quantizations)))
    return client


def test_provider_carries_the_allow_list_beside_the_ignore_list():
    """A floor in the snapshot: provider() sends quantizations and ignore together; quantizations() says it."""
    client = client_with(1, ALLOWED)
    assert client.quantizations() == ALLOWED
    assert client.provider({"sort": "price"}) == {"sort": "price", "ignore": ["bad/fp8"], "quantizations": ALLOWED}


def test_no_floor_sends_no_quantizations_key():
    """An empty allow-list filters nothing: the key is left out, the caller's own list kept as given."""
    client = client_with(1, [])
    assert client.quantizations() == []
    assert "quantizations" not in client.provider()
    assert client.provider({"quantizations": ["fp4"]})["quantizations"] == ["fp4"]


def test_the_callers_quantizations_are_narrowed_to_the_floor():
    """The caller asks for fp4 and fp8 under a floor without fp4: fp8 only; asking only fp4: the floor's list."""
    client = client_with(1, ALLOWED)
    assert client.provider({"quantizations": ["fp4", "fp8"]})["quantizations"] == ["fp8"]
    assert client.provider({"quantizations": ["fp4"]})["quantizations"] == ALLOWED


def test_a_newer_snapshot_without_a_floor_clears_it():
    """The floor cleared (version 2, no quantizations): provider() stops sending the list."""
    client = client_with(1, ALLOWED)
    assert client.apply(snapshot_bytes(IgnoreSnapshot(at=AT, model=MODEL, version=2)))
    assert "quantizations" not in client.provider()


def test_a_snapshot_from_before_floors_decodes_with_none():
    """An older router's snapshot has no quantizations field: read as no floor."""
    raw = b'{"type":"ignore_snapshot","v":1,"at":"2026-11-01T12:00:00Z","model":"acme/chat-1","version":3,"entries":[]}'
    assert decode_snapshot(raw).quantizations == []
