"""A consumer of one message at a time (the router's pull): in log order, given back at a stop."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from reverie_canary.services.router.service import ROUTER_INPUT
from reverie_canary.shared.contract import codec, inputs, subjects
from reverie_canary.shared.contract.events import make_decision
from reverie_canary.shared.runtime.service import Shell, ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, ConsumerSpec
from tests import waits

pytestmark = pytest.mark.integration
MODEL = "m/one"


def spec_for(settings: Settings) -> ConsumerSpec:
    return ConsumerSpec(stream=LOG, durable="in-order-test", filter_subjects=inputs.filters("router"),
                        max_ack_pending=1, ack_wait_s=30.0, max_deliver=settings.max_deliver)


async def publish_decisions(js, n: int) -> None:
    now = datetime.now(timezone.utc)
    for k in range(n):
        d = make_decision(at=now, decision_id=f"d-{k}", model=MODEL, provider=f"p{k}/fp8", action="end", reason="test")
        await js.publish(subjects.decision(MODEL, d.provider), codec.encode(d), headers={"Nats-Msg-Id": d.decision_id})


async def test_inputs_are_applied_one_at_a_time_in_log_order_and_acknowledged(infra):
    """Five decisions reach apply in stream order, never two at once, and the consumer is left caught up."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL])
    await ensure_streams(settings)
    spec = spec_for(settings)
    applied: list[tuple[int, str]] = []
    busy = {"now": 0, "most": 0}

    async def apply(event, delivery) -> None:
        busy["now"] += 1
        busy["most"] = max(busy["most"], busy["now"])
        await asyncio.sleep(0.01)
        applied.append((delivery.stream_seq, event.decision_id))
        busy["now"] -= 1

    shell = Shell("router", settings)
    shell.consume(spec, ROUTER_INPUT, apply)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    try:
        await publish_decisions(js, 5)
        await shell.app.start()
        try:
            await waits.until(lambda: waits.caught_up(js, LOG, spec.durable), timeout_s=20,
                              what="the in-order consumer to be done")
        finally:
            await shell.app.stop()
        assert applied == [(k + 1, f"d-{k}") for k in range(5)]
        assert busy["most"] == 1
        info = await js.consumer_info(LOG, spec.durable)
        assert info.num_ack_pending == 0 and info.num_pending == 0 and info.num_redelivered == 0
    finally:
        await nc.close()


async def test_a_message_in_hand_at_a_stop_is_given_back_at_once(infra):
    """Stopped while apply runs: the message is nak'ed, so the next reader gets it now, not after ack_wait (30 s)."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL])
    await ensure_streams(settings)
    spec = spec_for(settings)
    entered = asyncio.Event()

    async def apply(event, delivery) -> None:
        entered.set()
        await asyncio.Event().wait()  # never finishes on its own

    shell = Shell("router", settings)
    shell.consume(spec, ROUTER_INPUT, apply)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    try:
        await publish_decisions(js, 1)
        await shell.app.start()
        try:
            await asyncio.wait_for(entered.wait(), 20)
        finally:
            await shell.app.stop()
        sub = await js.pull_subscribe_bind(spec.durable, stream=LOG)
        [msg] = await sub.fetch(1, timeout=5)  # well within ack_wait: it was given back
        assert msg.metadata.sequence.stream == 1 and msg.metadata.num_delivered == 2
        await msg.ack()
    finally:
        await nc.close()
