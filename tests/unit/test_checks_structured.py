"""Structured output (docs/concepts/probes.md, the structured-output contract): raw JSON under response_format, schema via jsonschema."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.checks.structured import check_structured
from reverie_canary.client.reply import ProbeSpec, Reply
from reverie_canary.services.prober.prompts import WEATHER_SCHEMA

STRICT = ProbeSpec(kind="structured", language="en", schema=WEATHER_SCHEMA, response_format="json_schema")
JSON_MODE = ProbeSpec(kind="structured", language="en", schema=WEATHER_SCHEMA, response_format="json_object")
PROMPT_ONLY = ProbeSpec(kind="structured", language="en", schema=WEATHER_SCHEMA, response_format=None)
GOOD = '{"city": "Lisbon", "temp_c": 21, "summary": "clear sky"}'


@pytest.mark.parametrize("spec", [STRICT, JSON_MODE, PROMPT_ONLY])
def test_raw_valid_json_passes(spec):
    """Raw JSON that validates passes under every response_format."""
    assert check_structured(Reply(text=GOOD, finish_reason="stop"), spec).outcome == "pass"


@pytest.mark.parametrize("text", [
    f"```json\n{GOOD}\n```",        # FC-10
    f"```\n{GOOD}\n```",
    f"```JSON\n{GOOD}\n```\n",
])
def test_fence_under_response_format_fails(text):
    """Under response_format json_schema a Markdown fence fails as fenced (FC-10)."""
    result = check_structured(Reply(text=text, finish_reason="stop"), STRICT)
    assert (result.outcome, result.reason) == ("fail", "fenced")


@pytest.mark.parametrize("text", [f"```json\n{GOOD}\n```", f"```\n{GOOD}\n```", f"  ```json\n{GOOD}\n```  "])
def test_one_fence_tolerated_without_response_format(text):
    """Without response_format one enclosing fence is stripped, then validated (FP-02)."""
    assert check_structured(Reply(text=text, finish_reason="stop"), PROMPT_ONLY).outcome == "pass"


@pytest.mark.parametrize("spec", [STRICT, PROMPT_ONLY])
@pytest.mark.parametrize("text", [
    '{\n  "city": "Lisbon",\n  "temp_c": 21\n  "summary": "clear sky"\n}\nThe object above gives the current weather.',  # FC-07
    f"Here is the weather:\n{GOOD}",
    f"{GOOD}\nHope this helps!",
    f"Sure!\n```json\n{GOOD}\n```",
    "The weather in Lisbon is clear, 21 °C.",
    '{"city": "Lisbon", "temp_c": NaN, "summary": "clear sky"}',
    "",
])
def test_prose_or_malformed_json_fails(text, spec):
    """Prose around the JSON, malformed JSON or a non-JSON constant fails as not_json (FC-07)."""
    result = check_structured(Reply(text=text, finish_reason="stop"), spec)
    assert (result.outcome, result.reason) == ("fail", "not_json")
    assert "error" in result.evidence


@pytest.mark.parametrize("text, path, validator", [
    ('{"city": "Lisbon", "summary": "clear sky"}', "", "required"),                          # FC-08
    ('{"city": "Lisbon", "temp_c": "twenty-one", "summary": "clear sky"}', "/temp_c", "type"),  # FC-12
    ('{"city": "Lisbon", "temp_c": 21, "summary": "clear sky", "wind": 3}', "", "additionalProperties"),
    ('{"city": 7, "temp_c": 21, "summary": "clear sky"}', "/city", "type"),
    ('["Lisbon", 21, "clear sky"]', "", "type"),
])
def test_schema_violation_fails_with_path_and_message(text, path, validator):
    """A finished generation that does not match fails as schema_invalid with the validator's path and message."""
    result = check_structured(Reply(text=text, finish_reason="stop"), STRICT)
    assert (result.outcome, result.reason) == ("fail", "schema_invalid")
    assert result.evidence["path"] == path and result.evidence["validator"] == validator
    assert result.evidence["message"]


def test_nested_path_is_a_json_pointer():
    """The evidence path is a JSON pointer into the reply."""
    schema = {"type": "object", "properties": {"days": {"type": "array", "items": {"type": "number"}}}}
    spec = ProbeSpec(kind="structured", schema=schema, response_format="json_schema")
    result = check_structured(Reply(text='{"days": [1, 2, "x"]}', finish_reason="stop"), spec)
    assert result.evidence["path"] == "/days/2"


@pytest.mark.parametrize("text", [
    '{"city": "Lisbon", "temp_c": 21, "summary": "clear sky clear sky clear sky clear sky clear',   # runaway value
    GOOD,
])
def test_cut_by_length_fails(text):
    """A generation cut by length fails as truncated, even when the prefix happens to parse."""
    result = check_structured(Reply(text=text, finish_reason="length"), STRICT)
    assert (result.outcome, result.reason) == ("fail", "truncated")


def test_no_schema_only_parses():
    """Without a schema any JSON value passes."""
    spec = ProbeSpec(kind="structured", response_format="json_object")
    assert check_structured(Reply(text="[1, 2, 3]", finish_reason="stop"), spec).outcome == "pass"


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=0, max_size=30), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30))
def test_any_valid_object_passes(city, temp, summary):
    """Property: every object the schema allows passes, serialised any way json.dumps does."""
    text = json.dumps({"city": city, "temp_c": temp, "summary": summary}, ensure_ascii=False)
    assert check_structured(Reply(text=text, finish_reason="stop"), STRICT).outcome == "pass"


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}},
    {"type": "nonsense"},
])
def test_a_broken_schema_is_inconclusive_not_a_crash(schema):
    """A schema that is invalid or does not resolve proves nothing about the provider: bad_schema."""
    result = check_structured(Reply(text='{"a": 1}', finish_reason="stop"),
                              ProbeSpec(kind="structured", schema=schema, response_format="json_schema"))
    assert (result.outcome, result.reason) == ("inconclusive", "bad_schema")
