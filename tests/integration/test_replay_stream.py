"""``canary replay`` against the live log folds it as a stream: the timeline, the state check and the backtest."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.shared.service import ensure_streams, nats_connect
from reverie_canary.shared.settings import Settings
from tests.judge_events import MODEL, cycle_events, healthy, publish_events

pytestmark = pytest.mark.integration


def replay_cli(infra, *extra: str):
    env = {"NATS_URL": infra.nats_url, "REDIS_URL": infra.redis_url, "CANARY_NAMESPACE": infra.namespace,
           "CANARY_MODE": "enforce", "CANARY_MODELS": MODEL, "CANARY_CONFIG": ""}
    return CliRunner().invoke(app, ["replay", *extra], env=env)


async def test_the_live_replay_backtests_another_configuration_over_the_streamed_log(infra, tmp_path):
    """Two failed cycles: the current configuration suspends, the other (three cycles to suspend) does not."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace)
    await ensure_streams(settings)
    table = healthy("a/fp8", "b/fp8", "c/fp8", "d/fp8")
    table["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    nc = await nats_connect(settings)
    try:
        await publish_events(nc.jetstream(), cycle_events(0, table) + cycle_events(1, table))
    finally:
        await nc.close()
    other = tmp_path / "alt.toml"
    other.write_text('failed_cycles_to_suspend = 3\nmode = "enforce"\n')
    result = await asyncio.to_thread(replay_cli, infra, "--config", str(other))
    out = result.output
    assert result.exit_code == 1, out  # no judge ran: its state is not in Redis
    assert out.startswith("20 events folded from the log:"), out
    assert "suspend        [enforce] acme/chat-1  a/fp8" in out
    assert "1 decision(s) only with the current configuration, 0 only with the other one" in out
    assert "  - " in out and "failed_cycles_to_suspend" in out
    assert f"live state of {MODEL}: NONE in Redis" in out
