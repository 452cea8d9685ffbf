"""The prober service on real NATS: shared durable across replicas, dedupe of redelivered results, expiry."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from datetime import timedelta

import pytest

from reverie_canary.canary.runtime import running
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.events import ProbeTask
from reverie_canary.shared.runtime import clock, streams
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, TASKS
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.gateway import create_app
from reverie_canary.simulator.scenario import load_scenario
from reverie_canary.simulator.server import serve
from tests import waits

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"
HEALTHY = ("deepinfra/fp8", "novita/fp8", "together", "fireworks")
NAMES = {"deepinfra/fp8": "DeepInfra", "novita/fp8": "Novita", "together": "Together", "fireworks": "Fireworks",
         "lambda/fp8": "Lambda"}


def task(i: int, provider: str, *, deadline_s: float = 600, kind: str = "echo") -> ProbeTask:
    now = clock.now()
    return ProbeTask(at=now, task_id=f"t{i}|{provider}", model=MODEL, provider=provider,
                     provider_name=NAMES[provider],
                     kind=kind, language="en", cycle="c", deadline=now + timedelta(seconds=deadline_s),
                     supported_parameters=["max_tokens", "structured_outputs", "response_format"])


async def queue_empty(js) -> bool:
    """The task work queue holds nothing (acknowledged tasks are removed)."""
    return (await js.stream_info(TASKS)).state.messages == 0


@contextlib.asynccontextmanager
async def bench(infra, expect: int, **overrides):
    """A simulated gateway, streams, and a collector of ``expect`` results; yields (settings, publish, results, done)."""
    async with serve(create_app(load_scenario("default"))) as url:
        settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, models=[MODEL],
                                 openrouter_base_url=url, openrouter_api_key=SIMULATED_KEY, **overrides)
        await ensure_streams(settings)
        nc = await nats_connect(settings)
        js = nc.jetstream()
        results: list = []
        done = asyncio.Event()

        async def on_result(msg):
            results.append(codec.PROBE_RESULT.decode(msg.data))
            if len(results) >= expect:
                done.set()

        async def publish(t: ProbeTask, msg_id: str | None = None) -> None:
            await js.publish(subjects.task(MODEL, t.provider), codec.encode(t), stream=TASKS,
                             headers={"Nats-Msg-Id": msg_id or t.task_id})

        await nc.subscribe(subjects.ALL_RESULTS, cb=on_result)
        try:
            yield settings, js, publish, results, done
        finally:
            await nc.close()


async def test_two_probers_share_one_durable_and_every_task_is_probed_once(infra):
    """40 tasks, two prober replicas: each task gives exactly one result and both replicas work."""
    async with bench(infra, 40, prober_concurrency=4) as (settings, js, publish, results, done):
        async with running(settings, ["prober"], probers=2):
            for i in range(40):
                await publish(task(i, HEALTHY[i % len(HEALTHY)]))
            await waits.within(done.wait(), timeout_s=30, what="40 results")
            await waits.until(lambda: queue_empty(js), timeout_s=10, what="every task acknowledged")
            await waits.holds(lambda: len(results) == 40, for_s=0.5, what="40 results, none twice")
        info = await js.stream_info(TASKS)
    assert sorted(r.task_id for r in results) == sorted(task(i, HEALTHY[i % 4]).task_id for i in range(40))
    assert {r.outcome for r in results} == {"pass"}
    by_prober = Counter(r.prober for r in results)
    assert len(by_prober) == 2 and min(by_prober.values()) >= 5, by_prober
    assert info.state.messages == 0  # work queue: acked tasks are gone


async def test_a_redelivered_tasks_second_result_is_dropped_by_jetstream(infra):
    """The same task probed twice (a redelivery) stores one result: Nats-Msg-Id is the task id."""
    t = task(1, "deepinfra/fp8")
    async with bench(infra, 2) as (settings, js, publish, results, done):
        async with running(settings, ["prober"]):
            # two deliveries of one task, as after a prober died before acking
            for attempt in ("a", "b"):
                await publish(t, f"{t.task_id}|{attempt}")
            await waits.within(done.wait(), timeout_s=20, what="two results of the task delivered twice")
        stored = await js.stream_info(LOG, subjects_filter=subjects.ALL_RESULTS)
    assert [r.task_id for r in results] == [t.task_id, t.task_id]  # probed twice, published twice
    assert stored.state.messages == 1  # stored once


async def test_a_task_past_its_deadline_is_dropped_unprobed(infra):
    """A task whose cycle deadline passed is acked without a request: its result could not count."""
    expired = task(1, "deepinfra/fp8", deadline_s=-1)
    fresh = task(2, "novita/fp8")
    async with bench(infra, 1) as (settings, js, publish, results, done):
        async with running(settings, ["prober"]):
            for t in (expired, fresh):
                await publish(t)
            await waits.within(done.wait(), timeout_s=20, what="the fresh task's result")
            await waits.until(lambda: queue_empty(js), timeout_s=10, what="both tasks acknowledged")
            await waits.holds(lambda: len(results) == 1, for_s=0.5, what="no result for the expired task")
        left = (await js.stream_info(TASKS)).state.messages
    assert [r.task_id for r in results] == [fresh.task_id]
    assert left == 0


async def test_a_probe_longer_than_ack_wait_is_kept_alive_and_never_redelivered(infra):
    """ack_wait 1 s, probes of 2 s and more, two probers: in-progress signals keep each task with its prober."""
    tasks = [task(i, "lambda/fp8", kind="ttft") for i in range(6)]  # first token after 2.0 s
    async with bench(infra, len(tasks), prober_concurrency=2, task_ack_wait_s=1.0, ttft_threshold_s=5.0,
                     request_timeout_s=10.0) as (settings, js, publish, results, done):
        async with running(settings, ["prober"], probers=2):
            for t in tasks:
                await publish(t)
            await waits.within(done.wait(), timeout_s=40, what="six results of 2 s probes")
            await waits.until(lambda: queue_empty(js), timeout_s=10, what="every task acknowledged")
            spec = streams.prober_consumer(settings)
            info = await js.consumer_info(spec.stream, spec.durable)
            await waits.holds(lambda: len(results) == len(tasks), for_s=1.5, what="one result per task")
    assert info.config.ack_wait == 1.0
    assert info.num_redelivered == 0  # each task was delivered once, though it took twice ack_wait
    assert sorted(r.task_id for r in results) == sorted(t.task_id for t in tasks)
    assert min(r.reply.ttft_ms for r in results) >= 2000.0  # the probes really outlasted ack_wait

