"""``canary incident``'s bad input: a clear message and exit status 2, before any server is asked."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app

ENV = {"CANARY_MODELS": "acme/chat-1", "NATS_URL": "nats://127.0.0.1:9", "REDIS_URL": "redis://127.0.0.1:9/0"}


@pytest.mark.parametrize("args, message", [
    (["--model", "acme/chat-1", "--at", "soon"], "not a time"),
    (["--model", "acme/chat-1", "--at", "21:40", "--window", "forever"], "not a duration"),
    (["--model", "acme/chat-1", "--at", "2999-01-01T00:00:00Z"], "in the future"),
    (["--model", "other/model", "--at", "21:40"], "not a watched model"),
])
def test_bad_input_is_refused_with_the_reason_and_exit_2(args, message):
    result = CliRunner().invoke(app, ["incident", *args], env=ENV)
    assert result.exit_code == 2, result.output
    assert message in result.output

