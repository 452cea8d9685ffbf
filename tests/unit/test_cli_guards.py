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
