"""``canary init`` stops at the first refusal no retry heals and names it; it retries only what can heal."""

from __future__ import annotations

import asyncio
import time

import nats
import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.canary.embedded import free_port
from reverie_canary.shared.runtime.streams import LOG, TASKS

pytestmark = pytest.mark.integration

#: Longer than any run below may take: a command that waited it out would fail the bound of its test.
WAIT_S = 60


def init(env: dict[str, str], *args: str):
    """``canary init`` in-process with ``env``, and how long it took (s)."""
    started = time.monotonic()
    result = CliRunner().invoke(app, ["init", "--wait", str(WAIT_S), *args],
                                env={"CANARY_CONFIG": "", "NATS_USER": "", "NATS_PASSWORD": "", **env})
    return result, time.monotonic() - started


def streams_of(secured) -> list[str]:
    """The streams the server holds, read as admin (the tests here are synchronous: the CLI runs its own loop)."""

    async def read() -> list[str]:
        nc = await nats.connect(secured.nats_url, user="admin", password=secured.passwords["admin"])
        try:
            return sorted(info.config.name for info in await nc.jetstream().streams_info())
        finally:
            await nc.close()

    return asyncio.run(read())


def test_a_wrong_password_stops_at_once_naming_the_authorization_violation(secured):
    """Wrong password, then none: exit 2 within seconds (not the 60 s wait), one line naming the refusal."""
    for env in ({"NATS_USER": "admin", "NATS_PASSWORD": "not-the-password"}, {}):
        result, took = init({"NATS_URL": secured.nats_url, **env})
        assert result.exit_code == 2, result.output
        assert took < 10, took
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: canary init: NATS refused the credential: "
                                                       "Authorization Violation"), lines
        assert "did not answer" not in result.stderr and "not-the-password" not in result.stderr
    assert streams_of(secured) == []


def test_a_user_without_stream_permission_is_told_which_subject_it_may_not_use(secured):
    """The judge's credential may not create streams: exit 2 at once naming $JS.API.STREAM.CREATE.CANARY_LOG."""
    result, took = init({"NATS_URL": secured.nats_url, "NATS_USER": "judge",
                         "NATS_PASSWORD": secured.passwords["judge"]})
    assert result.exit_code == 2, result.output
    assert took < 10, took
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert ("NATS user 'judge' may not publish to $JS.API.STREAM.CREATE.CANARY_LOG (a permissions violation)"
            in lines[0]), lines
    assert "timeout" not in lines[0].lower()
    assert streams_of(secured) == []

    done, _ = init({"NATS_URL": secured.nats_url, "NATS_USER": "admin", "NATS_PASSWORD": secured.passwords["admin"]})
    assert done.exit_code == 0 and done.stdout.strip() == "streams and KV bucket are in place", done.output
    assert {LOG, TASKS} <= set(streams_of(secured))


def test_refused_connections_are_retried_until_the_wait_runs_out():
    """Nothing listens on the port: retried (it may heal) for --wait 2 s, then exit 1 naming the last problem."""
    url = f"nats://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = CliRunner().invoke(app, ["init", "--wait", "2"], env={"CANARY_CONFIG": "", "NATS_URL": url,
                                                                   "NATS_USER": "", "NATS_PASSWORD": ""})
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert took >= 1.5, took  # it kept trying: a refused connection is not a permanent refusal
    assert result.stderr.startswith(f"error: NATS at {url} did not answer within 2 s (last: NoServersError")
