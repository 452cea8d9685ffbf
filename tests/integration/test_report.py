"""``canary report`` folds the log (like ``canary replay``): a Redis flush does not reset observe mode's record."""

from __future__ import annotations

import asyncio
import json
import time

import msgspec
import pytest
import redis.asyncio as aioredis
from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.canary.demo import judge_record
from reverie_canary.canary.runtime import running
from reverie_canary.shared.contract.events import EndpointsDiscovered
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from tests.judge_events import MODEL, cycle_events, healthy, publish_events

pytestmark = pytest.mark.integration
FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8")
#: The quantization each endpoint's listing declares (d declares none).
QUANT = {"a/fp8": "fp8", "b/fp8": "fp8", "c/fp8": "bf16", "d/fp8": None}


def with_quantizations(events: list) -> list:
    """The events with each listed endpoint's quantization set from QUANT."""
    return [msgspec.structs.replace(e, endpoints=[msgspec.structs.replace(x, quantization=QUANT[x.provider])
                                                  for x in e.endpoints])
            if isinstance(e, EndpointsDiscovered) else e for e in events]


def report(infra, *args: str):
    env = {"NATS_URL": infra.nats_url, "REDIS_URL": infra.redis_url, "CANARY_NAMESPACE": infra.namespace,
           "CANARY_MODELS": MODEL, "CANARY_CONFIG": "", "CANARY_MODE": "observe"}
    return CliRunner().invoke(app, ["report", *args], env=env)


async def test_report_folds_the_log_and_says_when_its_source_is_gone(infra):
    """Three failed cycles in observe mode: one right call, from the log, before and after FLUSHALL; no log: exit 1.

    The cycle verdicts are grouped by the quantization each endpoint declared, undeclared apart."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL], mode="observe", cycle_interval_s=3600, probe_window_s=600)
    await ensure_streams(settings)
    out = healthy(*FLEET)
    out["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    nc = await nats_connect(settings)
    async with running(settings, ["judge"]):
        for n in range(3):
            await publish_events(nc.jetstream(), with_quantizations(cycle_events(n, out)))
        deadline = time.monotonic() + 15
        while not [c for c in (await judge_record(settings, MODEL)).state.shadow_calls if c.outcome == "right"]:
            assert time.monotonic() < deadline, "the judge did not score its would-be suspension within 15 s"
            await asyncio.sleep(0.1)
        before = await asyncio.to_thread(report, infra, "--json")
    await nc.close()
    client = aioredis.from_url(infra.redis_url)
    await client.flushall()
    await client.aclose()
    after = await asyncio.to_thread(report, infra, "--json")
    text = await asyncio.to_thread(report, infra)
    gone = await asyncio.to_thread(report, infra, "--model", "other/model")

    assert before.exit_code == 0 and after.exit_code == 0, (before.output, after.output)
    first, second = json.loads(before.stdout)["reports"][0], json.loads(after.stdout)["reports"][0]
    assert (first["right"], first["wrong"], first["pending"]) == (1, 0, 0)
    assert [c["provider"] for c in first["calls"]] == ["a/fp8"] and first["calls"][0]["mode"] == "observe"
    assert first["redis_calls"] == 1 and first["redis_agrees"] is True and first["source"] == "log"
    # after the flush: the same record, from the log, and Redis' loss is said
    assert second["calls"] == first["calls"] and second["right"] == 1
    assert second["redis_calls"] is None and second["redis_agrees"] is None
    assert text.exit_code == 0
    assert f"{MODEL} (mode: observe): 1 would-be suspension(s): 1 right" in text.stdout
    assert "Redis holds no state of this model" in text.stdout
    assert first["by_quantization"] == second["by_quantization"] == [
        {"quantization": "bf16", "providers": ["c/fp8"], "passed": 3, "failed": 0, "frozen": 0, "blind": 0,
         "failed_share": 0.0},
        {"quantization": "fp8", "providers": ["a/fp8", "b/fp8"], "passed": 3, "failed": 3, "frozen": 0, "blind": 0,
         "failed_share": 0.5},
        {"quantization": "undeclared", "providers": ["d/fp8"], "passed": 3, "failed": 0, "frozen": 0, "blind": 0,
         "failed_share": 0.0}]
    assert ("  cycle verdicts by quantization (as each endpoint's listing declared it):\n"
            "    bf16 (1 provider): 3 passed, 0 failed (0.0% of judged cycles)\n"
            "    fp8 (2 providers): 3 passed, 3 failed (50.0% of judged cycles)\n"
            "    undeclared (1 provider): 3 passed, 0 failed (0.0% of judged cycles)\n") in text.stdout
    # a model the log knows nothing of: not "0 would-be suspensions", but an error naming the lost source
    assert gone.exit_code == 1
    assert "the log holds no events of other/model" in gone.stderr
    assert "0 would-be" not in gone.stdout
