"""``canary replay`` against the live log folds it as a stream: the timeline, the state check and the backtest."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
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


async def test_replay_folds_no_command_the_judge_refused_for_a_model_it_does_not_watch(infra):
    """A mode for typo/model and an override for nosuch/model, then a mode for every model: replay lists only the judge's decision."""
    import uuid
    from datetime import datetime, timedelta, timezone

    from reverie_canary.canary.demo import judge_record
    from reverie_canary.canary.runtime import running
    from reverie_canary.shared.contract import codec, subjects
    from reverie_canary.shared.contract.commands import VERBS, AddOverride, SetMode
    from reverie_canary.shared.contract.events import CommandApplied, CommandRefused
    from reverie_canary.shared.runtime.streams import LOG
    from tests import waits

    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL], mode="enforce", cycle_interval_s=3600, probe_window_s=600)
    await ensure_streams(settings)
    at = datetime.now(timezone.utc)

    def command(cls, n: int, **fields):
        return cls(command_id=str(uuid.uuid4()), actor="alice", at=at + timedelta(seconds=n), **fields)

    typo = command(SetMode, 1, mode="enforce", model="typo/model")
    nosuch = command(AddOverride, 2, provider="a/fp8", model="nosuch/model", reason="typo")
    every = command(SetMode, 3, mode="observe", kind="echo")
    nc = await nats_connect(settings)
    js = nc.jetstream()
    answers: dict[str, object] = {}

    async def answered(cmd) -> bool:
        try:
            msg = await js.get_last_msg(LOG, subjects.answer("judge", cmd.command_id))
        except Exception:
            return False
        answers[cmd.command_id] = codec.ANSWER.decode(msg.data)
        return True

    try:
        async with running(settings, ["judge", "router"]):
            await publish_events(js, cycle_events(0, healthy("a/fp8", "b/fp8", "c/fp8")))
            for cmd in (typo, nosuch, every):
                await js.publish(subjects.ops(VERBS[type(cmd)]), codec.encode(cmd),
                                 headers={"Nats-Msg-Id": cmd.command_id})
            await waits.until(lambda: answered(every), timeout_s=15, what="the judge's answer to the mode for *")
            assert await answered(typo)
            refused = await waits.until(lambda: _router_answer(js, nosuch.command_id), timeout_s=15,
                                        what="the router's answer to the override for nosuch/model")
            record = await judge_record(settings, MODEL)
    finally:
        await nc.close()
    assert isinstance(answers[typo.command_id], CommandRefused) and answers[typo.command_id].code == "unknown_model"
    assert isinstance(refused, CommandRefused), refused
    applied = answers[every.command_id]
    assert isinstance(applied, CommandApplied) and [d.model for d in applied.decisions] == [MODEL]
    assert record.state.kind_modes == {"echo": "observe"}

    result = await asyncio.to_thread(replay_cli, infra)
    out = result.output
    assert result.exit_code == 0, out
    timeline = [line for line in out.splitlines() if line.startswith("#")]
    assert len(timeline) == 1 and "mode_changed" in timeline[0] and "[observe]" in timeline[0], out
    assert f" {MODEL} " in timeline[0] and "(echo)" in timeline[0]
    assert "typo/model" not in out and "nosuch/model" not in out
    assert f"live state of {MODEL} (position #" in out and "agrees with the log" in out


async def _router_answer(js, command_id: str):
    """The router's answer to ``command_id`` on the log (``None``: none yet)."""
    from reverie_canary.shared.contract import codec, subjects
    from reverie_canary.shared.runtime.streams import LOG

    try:
        msg = await js.get_last_msg(LOG, subjects.answer("router", command_id))
    except Exception:
        return None
    return codec.ANSWER.decode(msg.data)


async def test_a_log_judged_under_another_rule_is_reported_as_such_not_as_a_corrupt_state(infra):
    """The judge suspended at two failed cycles; a replay whose rule needs three lists the decision that differs, exit 0."""
    from reverie_canary.canary.demo import judge_record
    from reverie_canary.canary.runtime import running
    from tests import waits

    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL], mode="enforce", cycle_interval_s=3600, probe_window_s=600)
    await ensure_streams(settings)
    table = healthy("a/fp8", "b/fp8", "c/fp8", "d/fp8")
    table["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    nc = await nats_connect(settings)
    try:
        async with running(settings, ["judge", "router"]):
            from datetime import datetime, timedelta, timezone

            start = datetime.now(timezone.utc) - timedelta(hours=2)  # the suspension is still in force for the router
            await publish_events(nc.jetstream(), [e for n in range(2) for e in cycle_events(
                n, table, start=start + timedelta(minutes=30 * n))])

            async def suspended() -> bool:
                record = await judge_record(settings, MODEL)
                ps = record.state.providers.get("a/fp8")
                routed = await _router_has(settings, "a/fp8")
                return ps is not None and ps.suspension is not None and record.position >= 20 and routed

            await waits.until(suspended, timeout_s=15, what="the judge's suspension of a/fp8")
    finally:
        await nc.close()
    same = await asyncio.to_thread(replay_cli, infra)
    assert same.exit_code == 0 and "agrees with the log" in same.output and "differ:" not in same.output, same.output
    env = {"NATS_URL": infra.nats_url, "REDIS_URL": infra.redis_url, "CANARY_NAMESPACE": infra.namespace,
           "CANARY_MODE": "enforce", "CANARY_MODELS": MODEL, "CANARY_CONFIG": "",
           "CANARY_FAILED_CYCLES_TO_SUSPEND": "3"}
    result = await asyncio.to_thread(CliRunner().invoke, app, ["replay"], env=env)
    out = result.output
    assert result.exit_code == 0, out
    assert "1 decision(s) on the log and 0 of this refold differ: the log was judged under another rule" in out
    [line] = [x for x in out.splitlines() if x.startswith("  log:    ")]
    assert "suspend" in line and "a/fp8" in line
    assert "as the decisions above that differ explain (judged under another rule): not a corrupt state" in out
    assert "DIFFERS" not in out


async def _router_has(settings, provider: str) -> bool:
    """Whether the router's stored state holds a suspension of ``provider``."""
    from reverie_canary.services.router.store import RedisRouterStore
    from reverie_canary.shared.runtime.service import redis_client

    client = redis_client(settings)
    try:
        record = await RedisRouterStore(client, settings.namespace).load()
    finally:
        await client.aclose()
    return any(s.provider == provider for s in record.state.suspensions.values())
