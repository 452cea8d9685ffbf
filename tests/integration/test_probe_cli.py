"""``canary probe``: its exit status says whether every probe passed (a script can rely on it)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app

pytestmark = pytest.mark.integration

ENV = {"CANARY_CONFIG": "", "CANARY_LOG_LEVEL": "WARNING"}


def probe(*args: str):
    return CliRunner().invoke(app, ["probe", "--simulate", "default", *args], env=ENV)


def test_a_failed_probe_exits_1_and_says_how_many_did_not_pass():
    """baseten/fp8 breaks structured output in the default fleet: outcome fail, exit status 1."""
    result = probe("--provider", "baseten/fp8", "--kind", "structured", "--repeat", "2", "--json")
    assert result.exit_code == 1, result.output
    outcomes = [json.loads(line)["outcome"] for line in result.stdout.splitlines() if line.startswith("{")]
    assert outcomes == ["fail", "fail"]
    assert "2 of 2 probe(s) did not pass" in result.stderr


def test_passing_probes_exit_0():
    """A healthy provider's echo probes pass: exit status 0."""
    result = probe("--provider", "deepinfra/fp8", "--kind", "echo", "--repeat", "2")
    assert result.exit_code == 0, result.output
    assert "deepinfra/fp8 / echo / en: 2x pass" in result.stdout


def test_the_tool_probe_sends_each_variant_a_cycle_plans_and_says_which():
    """--kind tools on an endpoint listing tools and tool_choice: four results, one per variant, in order."""
    result = probe("--provider", "deepinfra/fp8", "--kind", "tools", "--language", "ru", "--json")
    results = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(r["kind"], r["variant"], r["language"]) for r in results] == [
        ("tools", v, "ru") for v in ("call", "call_stream", "no_tool", "second_turn")]
    assert all(r["reply"]["http_status"] == 200 for r in results)  # each request reached the provider
    assert [r["reply"].get("streamed", False) for r in results] == [False, True, True, True]
    one = probe("--provider", "deepinfra/fp8", "--kind", "tools", "--variant", "no_tool", "--json")
    assert [json.loads(line)["variant"] for line in one.stdout.splitlines() if line.startswith("{")] == ["no_tool"]


def test_an_unknown_variant_is_refused_before_any_request():
    """--variant names one of the kind's variants; a kind without variants takes none: exit status 2."""
    for args in (("--kind", "tools", "--variant", "third_turn"), ("--kind", "echo", "--variant", "call")):
        result = probe("--provider", "deepinfra/fp8", *args)
        assert result.exit_code == 2 and "unknown variant" in result.stderr, result.output
