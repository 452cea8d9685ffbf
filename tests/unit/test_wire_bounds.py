"""Strict wire (docs/concepts/messages.md, "Bounds"): a bound on every field, one schema version, every message under max_payload."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from reverie_canary.services.discovery.core import plan, split
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.services.router.core import parse_exclusions
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.bounds import MAX_PAYLOAD, MESSAGE_MAX_BYTES, fit
from reverie_canary.shared.contract.errors import ConfigError, Oversize, TooLarge, Undecodable, UnsupportedVersion
from reverie_canary.shared.contract.events import (
    MAX_ENDPOINTS_PER_MODEL,
    PROBE_KINDS,
    CheckResult,
    CycleClosed,
    CycleVerdict,
    Endpoint,
    EndpointsDiscovered,
    ProbeResult,
    ProbeTask,
    RetestRequested,
)
from reverie_canary.shared.runtime.settings import LANGUAGES
from tests.wire_samples import largest, unbounded

AT = datetime(2026, 11, 1, tzinfo=timezone.utc)
TYPES = {t.__name__: t for t in codec.WIRE_TYPES}


def test_the_bound_of_a_message_is_half_of_max_payload():
    """Every message stays at most 512 KiB: half of NATS's 1 MiB max_payload, room for headers and growth."""
    assert (MAX_PAYLOAD, MESSAGE_MAX_BYTES) == (1024 * 1024, 512 * 1024)


@pytest.mark.parametrize("name", sorted(TYPES))
def test_every_string_list_and_mapping_of_every_wire_type_has_a_maximum(name):
    """No field of any wire message, however deep, is without a maximum length (or a free-JSON bound)."""
    assert unbounded(TYPES[name]) == []


@pytest.mark.parametrize("name", sorted(set(TYPES) - {"EndpointsDiscovered"}))
def test_the_largest_message_of_every_type_is_published_under_the_bound(name):
    """Every field at its maximum in the character that encodes longest: what the publisher sends fits in 512 KiB.

    A message whose bounds allow more (a probe result with every evidence full, a
    verdict of 256 providers with every reference) is fitted by the publisher:
    free texts cut, a verdict's references counted instead; the facts stay.
    """
    biggest = largest(TYPES[name])
    raw = codec.encode(biggest)
    msgspec.json.decode(raw, type=TYPES[name])  # the bounds agree with each other (patterns, lengths)
    sent = fit(biggest)
    body = codec.encode(sent)
    assert len(body) <= MESSAGE_MAX_BYTES, (name, len(raw), len(body))
    assert type(codec.ANY.decode(body)) is TYPES[name]
    if len(raw) <= MESSAGE_MAX_BYTES:
        assert sent is biggest  # a message within the bound is sent as it is


def test_the_largest_listing_is_split_into_parts_that_each_fit():
    """256 endpoints with every field at its maximum and a full plan: parts under the bound, nothing lost."""
    biggest = largest(EndpointsDiscovered)
    assert len(codec.encode(biggest)) > 10 * MESSAGE_MAX_BYTES
    tags = [f"p{i:03d}/" + "z" * 251 for i in range(len(biggest.endpoints))]  # 256 characters, all distinct
    endpoints = [msgspec.structs.replace(e, provider=tag) for e, tag in zip(biggest.endpoints, tags, strict=True)]
    planned = [msgspec.structs.replace(p, provider=tags[i % len(tags)], task_id=f"{i:05d}" + p.task_id[5:])
               for i, p in enumerate(biggest.planned)]  # 64 probes an endpoint, every field at its maximum
    biggest = msgspec.structs.replace(biggest, endpoints=endpoints, planned=planned)
    parts = split(biggest)
    assert len(parts) > 10
    for part in parts:
        body = codec.encode(part)
        assert len(body) <= MESSAGE_MAX_BYTES
        assert codec.ENDPOINTS_OR_CLOSE.decode(body) == part
    assert [p.part for p in parts] == list(range(len(parts))) and {p.parts for p in parts} == {len(parts)}
    assert sorted(e.provider for p in parts for e in p.endpoints) == sorted(e.provider for e in biggest.endpoints)
    assert sum(len(p.planned) for p in parts) == len(biggest.planned)


def _wide_listing(n: int) -> list[Endpoint]:
    return [Endpoint(provider=f"provider-{i:04d}/fp8", provider_name=f"Provider {i}" + "x" * 100,
                     model_id="acme/chat-1", supported_parameters=["max_tokens", "response_format",
                                                                   "structured_outputs", "temperature", "tools",
                                                                   "tool_choice"] * 8)
            for i in range(n)]


def test_a_model_listed_with_more_endpoints_than_the_bound_watches_the_first_ones_and_says_how_many():
    """2,000 listed endpoints: 256 watched (controls first, then by tag), listed says 2,000."""
    listing = _wide_listing(2000)
    event, tasks = plan(model="acme/chat-1", cycle_no=7, start=AT, window_s=600, endpoints=listing,
                        kinds=PROBE_KINDS, languages=list(LANGUAGES),
                        controls={"refusal": "provider-1999/fp8"})
    assert event.listed == 2000 and len(event.endpoints) == MAX_ENDPOINTS_PER_MODEL
    tags = [e.provider for e in event.endpoints]
    assert "provider-1999/fp8" in tags and "provider-0254/fp8" in tags and "provider-0255/fp8" not in tags
    assert {t.provider for t in tasks} == set(tags)


def test_a_split_listing_folds_to_the_same_judge_state_as_one_message():
    """The judge folds the parts of a large cycle (with its results and close) into the state one message gives."""
    event, tasks = plan(model="acme/chat-1", cycle_no=7, start=AT, window_s=600, endpoints=_wide_listing(256),
                        kinds=PROBE_KINDS, languages=list(LANGUAGES), controls={})
    parts = split(event, budget=MESSAGE_MAX_BYTES // 8)
    assert len(parts) >= 4
    results = [ProbeResult(at=AT + timedelta(seconds=5), task_id=t.task_id, model=t.model, provider=t.provider,
                           kind=t.kind, language=t.language, cycle=t.cycle,
                           outcome="fail" if t.provider == "provider-0003/fp8" and t.kind == "ttft" else "pass",
                           reason="ttft_exceeded" if t.provider == "provider-0003/fp8" and t.kind == "ttft" else "")
               for t in tasks]
    close = CycleClosed(at=AT + timedelta(minutes=10), model="acme/chat-1", cycle=event.cycle, cycle_no=7)
    policy = Policy(mode="enforce")
    one, one_effects = fold([event, *results, close], policy)
    split_log = [*parts, *parts[:2], *results, close]  # a redelivered part changes nothing
    many, many_effects = fold(split_log, policy)
    assert many == one
    assert many_effects == one_effects
    (verdict,) = [e for e in many_effects if isinstance(e, CycleVerdict)]
    assert len(verdict.verdicts) == 256
    assert {v.provider for v in verdict.verdicts if v.verdict == "failed"} == {"provider-0003/fp8"}


@functools.cache
def sample(name: str):
    """A large valid message of type ``name`` (a split part for the listing), as a service publishes it."""
    if name == "EndpointsDiscovered":
        event, _ = plan(model="acme/chat-1", cycle_no=7, start=AT, window_s=600, endpoints=_wide_listing(256),
                        kinds=PROBE_KINDS, languages=list(LANGUAGES), controls={})
        return split(event)[-1]
    return fit(largest(TYPES[name]))


@pytest.mark.parametrize("version", [0, 2, 99, -1])
@pytest.mark.parametrize("name", sorted(TYPES))
def test_another_schema_version_is_refused_never_read_as_this_one(name, version):
    """v 0, 2, 99 of every wire type: UnsupportedVersion naming the version; v 1 and no v read."""
    sample_ = sample(name)
    data = msgspec.json.decode(codec.encode(sample_))
    data["v"] = version
    with pytest.raises(UnsupportedVersion, match=f"unsupported schema version {version} of '{data['type']}'"):
        codec.ANY.decode(msgspec.json.encode(data))
    data["v"] = 1
    assert codec.ANY.decode(msgspec.json.encode(data)).v == 1
    del data["v"]
    assert codec.ANY.decode(msgspec.json.encode(data)).v == 1


def test_a_version_of_the_wrong_type_is_a_plain_type_error():
    """v "1" is not a version: refused as undecodable (wrong type), not as another version."""
    raw = codec.encode(CycleClosed(at=AT, model="m/x", cycle="c", cycle_no=1)).replace(b'"v":1', b'"v":"1"')
    with pytest.raises(Undecodable, match=r"Expected `int`, got `str` - at `\$.v`") as info:
        codec.ENDPOINTS_OR_CLOSE.decode(raw)
    assert not isinstance(info.value, UnsupportedVersion)


def test_a_megabyte_string_in_a_task_and_in_a_retest_request_is_refused_naming_the_field():
    """1 MB string fields were accepted in a ProbeTask and a RetestRequested; now each is refused at decoding."""
    task = ProbeTask(at=AT, task_id="t1", model="m/x", provider="a/fp8", kind="echo", cycle="c", deadline=AT)
    huge = "x" * 1_000_000
    raw = msgspec.json.decode(codec.encode(task))
    for field in ("provider_name", "prompt_version", "language"):
        with pytest.raises(Undecodable, match=rf"\$\.{field}"):
            codec.PROBE_TASK.decode(msgspec.json.encode({**raw, field: huge[:500_000]}))
    retest = RetestRequested(at=AT, model="m/x", provider="a/fp8", language="pt", for_cycle_no=3)
    raw = msgspec.json.decode(codec.encode(retest))
    for field in ("reason", "source_task_id", "language"):
        with pytest.raises(Undecodable, match=rf"\$\.{field}"):
            codec.RETEST.decode(msgspec.json.encode({**raw, field: huge[:500_000]}))
    with pytest.raises(Oversize, match="max_payload"):
        codec.RETEST.decode(msgspec.json.encode({**raw, "reason": huge + huge}))


def test_evidence_beyond_its_bound_is_refused_at_decoding_naming_where():
    """Free-form evidence: a long string, deep nesting or too many values are refused with the path."""
    def result_with(evidence) -> bytes:
        check = CheckResult(check="x", outcome="pass", evidence=evidence)
        return codec.encode(ProbeResult(at=AT, task_id="t", model="m/x", provider="a/fp8", kind="ttft", cycle="c",
                                        outcome="pass", checks=[check, check]))
    assert codec.PROBE_RESULT.decode(result_with({"span": "y" * 400, "shares": {"pt": 0.9, "es": 0.1}}))
    for evidence, why in (({"span": "y" * 401}, "a string of 401"), ({"a": [[[[1]]]]}, "nested deeper"),
                          ({"a": list(range(33))}, "a container of 33"),
                          ({f"k{i}": "z" * 300 for i in range(5)}, "more than 1200 characters")):
        with pytest.raises(Undecodable, match=rf"{why}.*\$\.checks\[0\]\.evidence"):
            codec.PROBE_RESULT.decode(result_with(evidence))


def test_an_identifier_with_a_control_character_a_quote_or_a_space_is_refused():
    """Provider tags and ids are visible ASCII: a hostile tag cannot reach a subject, a key or a log line."""
    task = msgspec.json.decode(codec.encode(ProbeTask(at=AT, task_id="t1", model="m/x", provider="a/fp8",
                                                      kind="echo", cycle="c", deadline=AT)))
    for bad in ("a\x01b", 'a"b', "a b", "a\\b", "ü/fp8", ""):
        with pytest.raises(Undecodable, match=r"\$\.provider"):
            codec.PROBE_TASK.decode(msgspec.json.encode({**task, "provider": bad}))


def test_a_listing_entry_beyond_its_bounds_is_cut_or_left_out():
    """A 10 kB display name is cut to 128, an odd parameter dropped, a tag with a control character left out."""
    from reverie_canary.shared.runtime.listing import read_listing

    body = {"data": {"endpoints": [
        {"tag": "deepinfra/fp8", "provider_name": "D" * 10_000, "supported_parameters": ["max_tokens", "p" * 65, ""]},
        {"tag": "evil\x1b[31m/fp8"}, {"tag": "t" * 300}]}}
    read = read_listing(msgspec.json.encode(body))
    (ok,) = read.endpoints
    assert len(ok.provider_name) == 128 and ok.supported_parameters == ["max_tokens"]
    assert [(d.index, d.reason) for d in read.dropped] == [(1, "bad_tag"), (2, "bad_tag")]


def test_an_exclusions_file_with_an_identifier_the_wire_cannot_carry_is_refused_naming_the_line():
    """A provider with a non-ASCII character or a 5,000-character reason is refused at load, not on the wire."""
    entry = '[[exclusion]]\nprovider = "{p}"\nmodel = "*"\nreason = "{r}"\nreference = "T-1"\ndate = 2026-01-01\n'
    with pytest.raises(ConfigError, match=r"x.toml:1: provider 'ü/fp8' is not an identifier"):
        parse_exclusions(entry.format(p="ü/fp8", r="measured"), "x.toml")
    with pytest.raises(ConfigError, match="x.toml:1: reason has 5000 characters, at most 4000"):
        parse_exclusions(entry.format(p="a/fp8", r="r" * 5000), "x.toml")


def test_a_message_that_cannot_be_fitted_is_refused_with_its_size():
    """A verdict of 256 providers with 256-character tags and nothing left to shed is too large: TooLarge, not lost."""
    biggest = largest(CycleVerdict)
    lean = biggest.shed()
    assert lean is not None and lean.shed() is None
    with pytest.raises(TooLarge, match="above the bound of 1000 bytes"):
        fit(lean, budget=1000)
