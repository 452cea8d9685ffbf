"""Guard rails of the operator's command line that need no server: unwatched models, bounds, control characters."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app

ENV = {"CANARY_MODELS": "acme/chat-1", "NATS_URL": "nats://127.0.0.1:9", "REDIS_URL": "redis://127.0.0.1:9/0",
       "CANARY_CONFIG": ""}


@pytest.mark.parametrize("args", [
    ["status", "--model", "nosuch/m"],
    ["status", "--model", "nosuch/m", "--json"],
    ["explain", "a/fp8", "--model", "nosuch/m"],
    ["incident", "--model", "nosuch/m", "--at", "21:40"],
])
def test_a_read_command_for_an_unwatched_model_exits_2_naming_the_watched_ones(args):
    """status, explain and incident refuse a model the settings do not watch (one check), before any server."""
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 2, result.output
    assert "error: 'nosuch/m' is not a watched model (CANARY_MODELS: acme/chat-1)" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("args, says", [
    (["override", "add", "a/fp8", "--reason", "x" * 2001], "--reason is too long: at most 2000 characters, 2001 given"),
    (["lift", "a/fp8", "--reason", "y" * 2500], "--reason is too long: at most 2000 characters, 2500 given"),
    (["override", "add", "a/fp8", "--reason", "r", "--reference", "z" * 300],
     "--reference is too long: at most 256 characters, 300 given"),
    (["override", "add", "a/fp8", "--reason", "r", "--for", "99999999999d"], "--for: duration too long"),
    (["override", "add", "a/fp8", "--reason", "r", "--for", "9" * 400 + "s"], "--for: duration too long"),
    (["override", "add", "a/fp8", "--reason", "r", "--for", "100000d"],
     "--for: duration too long: '100000d' (at most 365 d)"),
    (["override", "add", "a/fp8", "--reason", "r", "--for", "366d"], "(at most 365 d)"),
    (["override", "add", "a/fp8", "--reason", "r", "--expires", "9999-12-31T23:59:59Z"],
     "is more than 365 d ahead, the longest an override lasts"),
])
def test_an_over_long_value_is_refused_saying_it_is_too_long_and_the_bound(args, says):
    """Too long a reason, reference or override: exit 2, the bound named, no traceback, nothing published."""
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert "must say why" not in result.stderr and "OverflowError" not in result.output


def test_an_override_of_up_to_a_year_is_not_refused_by_its_length():
    """365 days is the longest override accepted: it gets as far as the bus (absent here: exit 1, not 2)."""
    from datetime import timedelta

    from reverie_canary.canary.cli_ops import MAX_OVERRIDE, parse_duration

    assert MAX_OVERRIDE == timedelta(days=365) and parse_duration("365d", MAX_OVERRIDE) == MAX_OVERRIDE
    result = CliRunner().invoke(app, ["override", "add", "a/fp8", "--reason", "r", "--for", "365d",
                                      "--timeout", "0.1"], env=ENV)
    assert result.exit_code == 1 and "cannot connect to NATS" in result.stderr, result.output
