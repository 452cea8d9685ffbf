"""The chat backend's served-by ring (client/served.py): provider, model and time only, bounded, counted."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from reverie_canary.client import ServedCounts, ServedRecorder, decode_counts
from reverie_canary.client.served import MAX_NAME, provider_of

T0 = datetime(2026, 12, 1, 21, 40, tzinfo=timezone.utc)
SECRET_TEXT = "Olá, meu nome é Ana e hoje eu queria falar sobre a minha mãe"


def response(provider: str | None, model: str = "deepseek/deepseek-chat-v3.1") -> dict:
    """A gateway reply as a chat backend parses it: the text and ids are there, beside the provider."""
    out = {"id": "gen-1", "model": model, "choices": [{"message": {"role": "assistant", "content": SECRET_TEXT}}],
           "usage": {"prompt_tokens": 12}, "user": "user-4711"}
    if provider is not None:
        out["provider"] = provider
    return out


def test_only_the_provider_model_and_time_are_kept_never_the_text():
    """The ring's entries and the published counts hold the provider, model and time; no text, user or id."""
    recorder = ServedRecorder("deepseek/deepseek-chat-v3.1", now=lambda: T0, source="chat-eu-1")
    assert recorder.record(response("DeepInfra")) == "DeepInfra"
    (entry,) = recorder.ring
    assert msgspec.to_builtins(entry) == ["2026-12-01T21:40:00Z", "deepseek/deepseek-chat-v3.1", "DeepInfra"]
    (counts,) = recorder.take_counts()
    wire = msgspec.json.encode(counts).decode()
    for private in (SECRET_TEXT, "user-4711", "gen-1", "prompt_tokens"):
        assert private not in wire
    assert decode_counts(wire) == counts and counts.counts == {"DeepInfra": 1} and counts.source == "chat-eu-1"


def test_the_ring_is_bounded_and_counts_a_window_per_provider():
    """The oldest entries go first; counts() sums a time window per provider for one model."""
    clock = [T0]
    recorder = ServedRecorder("m/a", capacity=3, now=lambda: clock[0])
    for i, provider in enumerate(["A", "B", "A", "A"]):
        clock[0] = T0 + timedelta(minutes=i)
        recorder.record({"provider": provider})
    assert len(recorder.ring) == 3 and [s.provider for s in recorder.ring] == ["B", "A", "A"]
    assert recorder.counts() == {"B": 1, "A": 2}
    assert recorder.counts(since=T0 + timedelta(minutes=2)) == {"A": 2}
    assert recorder.counts(model="m/other") == {}


def test_metadata_without_a_provider_is_counted_apart_and_long_names_are_cut():
    """No provider in the reply: nothing recorded, ``unrecorded`` says how often; a 500-character name is cut."""
    recorder = ServedRecorder("m/a", now=lambda: T0)
    assert recorder.record(response(None)) is None and recorder.record({"provider": 7}) is None
    assert recorder.unrecorded == 2 and not recorder.ring
    assert provider_of({"provider": "x" * 500})[0] == "x" * MAX_NAME
    assert provider_of(type("Chunk", (), {"provider": "Fireworks", "model": "m/b"})()) == ("Fireworks", "m/b")


def test_take_counts_is_one_message_per_model_since_the_last_one():
    """Counts are per model, and each period starts where the last one was taken."""
    clock = [T0]
    recorder = ServedRecorder("m/a", now=lambda: clock[0])
    recorder.record({"provider": "A"})
    recorder.record({"provider": "B", "model": "m/b"})
    clock[0] = T0 + timedelta(minutes=1)
    first = recorder.take_counts()
    assert [(c.model, c.counts, c.since, c.at) for c in first] == [
        ("m/a", {"A": 1}, T0, T0 + timedelta(minutes=1)), ("m/b", {"B": 1}, T0, T0 + timedelta(minutes=1))]
    assert recorder.take_counts() == []


def test_a_bad_capacity_is_refused():
    with pytest.raises(ValueError):
        ServedRecorder("m/a", capacity=0)


def test_counts_are_bounded_on_the_wire():
    """A ServedCounts with a negative count is refused at decoding."""
    bad = msgspec.json.encode(ServedCounts(at=T0, model="m/a", since=T0, counts={"A": 1})).replace(b'"A":1', b'"A":-1')
    with pytest.raises(msgspec.ValidationError):
        decode_counts(bad)
