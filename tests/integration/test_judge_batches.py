"""The judge reads in batches and still folds every message once, in log order.

A batch in flight is no longer ordered by the server: a message that a stopped process
held, or one nak'ed, comes back after later ones.  These tests make that happen on a real
NATS and a real Redis and check the judge's record against the pure fold of the log.
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from reverie_canary.canary.demo import judge_record
from reverie_canary.canary.runtime import running
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.services.judge.service import create_app
from reverie_canary.shared.contract import inputs, subjects
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import Decision
from reverie_canary.shared.runtime import streams
from reverie_canary.shared.runtime.eventlog import read_log
from reverie_canary.shared.runtime.service import Shell, ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, ConsumerSpec
from tests import waits
from tests.judge_events import MODEL, cycle_events, healthy, publish_events

pytestmark = pytest.mark.integration
FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8")


def settings_for(infra) -> Settings:
    return Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                         models=[MODEL], mode="enforce")


def failing(n: int) -> list:
    table = healthy(*FLEET)
    table["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    return cycle_events(n, table)


async def caught_up(js) -> None:
    durable = streams.judge_consumer(Settings.load(env={})).durable
    await waits.until(lambda: waits.caught_up(js, LOG, durable), timeout_s=20, what="the judge caught up with the log")


async def last_input(js) -> int:
    """The stream sequence of the last message the judge reads (its own verdicts and decisions are in between)."""
    return (await read_log(js, prefixes=inputs.prefixes("judge"), idle_s=0.5))[-1].seq


async def suspensions(js) -> list[str]:
    return [e.event.decision_id for e in await read_log(js, idle_s=0.5)
            if isinstance(e.event, Decision) and e.event.action == "suspend"]


async def test_messages_a_stopped_judge_held_come_back_before_anything_after_them_is_applied(infra):
    """A dead judge holds the cycle's listing and first results; the new one takes the rest but applies nothing before them."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    spec = streams.judge_consumer(settings)
    events = failing(0) + failing(1)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    try:
        await js.add_consumer(LOG, spec.config())
        await publish_events(js, events)
        dead = await js.pull_subscribe_bind(spec.durable, stream=LOG)
        held = await dead.fetch(3, timeout=5)  # the listing of cycle 0 and two results, never acknowledged
        assert [m.metadata.sequence.stream for m in held] == [1, 2, 3]
        with capture_logs() as logs:
            async with running(settings, ["judge"]):
                async def took_the_rest() -> bool:
                    return (await js.consumer_info(LOG, spec.durable)).num_ack_pending == len(events)

                await waits.until(took_the_rest, timeout_s=15, what="the judge to take every other message")
                assert (await judge_record(settings, MODEL)).position == 0  # it waits for the three it does not have
                for msg in held:  # the dead judge's messages come back (as after its ack_wait)
                    await msg.nak()
                await caught_up(js)
                record = await judge_record(settings, MODEL)
        assert any(e["event"] == "waiting_for_order" for e in logs)
        expected, _ = fold(events, Policy.from_settings(settings))
        assert record.state == expected[MODEL] and record.position == len(events)
        assert await suspensions(js) == [f"dec|{MODEL}|a/fp8|suspend|1"]
    finally:
        await nc.close()


async def readyz_and_lease_held():
    """The judge's /readyz answer and its ``canary_judge_lease_held`` sample (this process's judge endpoint)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    from reverie_canary.shared.runtime import metrics

    ep = metrics.endpoint("judge")
    async with httpx.AsyncClient(timeout=5) as http:
        ready = await http.get(f"{ep.base_url}/readyz")
        scraped = (await http.get(ep.url)).text
    held = [s.value for f in text_string_to_metric_families(scraped) for s in f.samples
            if s.name == "canary_judge_lease_held"]
    return ready, held[0] if held else None


async def test_a_second_judge_waits_for_the_lease_and_takes_over_when_the_first_stops(infra):
    """Two judges on one store: one folds, the other takes no message; stopping the first hands over, nothing twice."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    first = create_app(settings)
    stopped = False
    try:
        await first.start()
        await publish_events(js, failing(0))
        await caught_up(js)
        with capture_logs() as logs:
            async with running(settings, ["judge"]):
                await waits.until(lambda: any(e["event"] == "judge_standby" for e in logs), timeout_s=10,
                                  what="the second judge to stand by")
                # alive and ready to take over, and saying that it stands by (not a 503: it is not broken)
                standby_ready, standby_held = await readyz_and_lease_held()
                await publish_events(js, failing(1))
                await caught_up(js)
                await first.stop()
                stopped = True
                await publish_events(js, failing(2) + failing(3))
                await caught_up(js)
                record = await judge_record(settings, MODEL)
                leader_ready, leader_held = await readyz_and_lease_held()
        events = failing(0) + failing(1) + failing(2) + failing(3)
        expected, _ = fold(events, Policy.from_settings(settings))
        assert record.state == expected[MODEL] and record.position == await last_input(js)
        assert [e for e in logs if e["event"] == "judge_lease_taken"]  # the second took it when the first let go
        assert standby_ready.status_code == 200 and standby_ready.text.startswith("ready: judge (standby: "), \
            standby_ready.text
        assert standby_held == 0.0
        assert (leader_ready.status_code, leader_ready.text, leader_held) == (200, "ready: judge\n", 1.0)
        assert await suspensions(js) == [f"dec|{MODEL}|a/fp8|suspend|1"]  # the ladder's second step is cycle 3's
    finally:
        if not stopped:
            await first.stop()
        await nc.close()


async def test_a_failing_batch_is_applied_again_in_order_and_one_message_that_keeps_failing_is_dead_lettered(infra):
    """A batch failing twice is folded again from its first message; a poison message is given up alone."""
    settings = settings_for(infra).replace(retry_delay_s=0.05, max_deliver=3)
    await ensure_streams(settings)
    events = failing(0)
    poison = events[4].task_id
    spec = ConsumerSpec(stream=LOG, durable="ordered-test", filter_subjects=inputs.filters("judge"),
                        max_ack_pending=8, ack_wait_s=30.0, max_deliver=settings.max_deliver)
    applied: list[int] = []
    failures = {"left": 2}

    async def apply(items):
        seqs = [d.stream_seq for _, d in items]
        if failures["left"] and 6 in seqs:
            failures["left"] -= 1
            raise Transient("the store is away for a moment")
        if any(getattr(e, "task_id", None) == poison for e, _ in items):
            raise Transient("this one always fails")
        assert not applied or seqs[0] > applied[-1]  # never behind what was applied
        applied.extend(seqs)
        return []

    async def gate() -> bool:
        return True

    shell = Shell("judge", settings)
    from reverie_canary.services.judge.service import JUDGE_INPUT

    shell.consume(spec, JUDGE_INPUT, fold=apply, batch=spec.max_ack_pending, gate=gate)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    try:
        await publish_events(js, events)
        with capture_logs() as logs:
            await shell.app.start()
            try:
                await waits.until(lambda: waits.caught_up(js, LOG, spec.durable), timeout_s=20,
                                  what="the ordered consumer to be done")
            finally:
                await shell.app.stop()
        assert applied == [n for n in range(1, len(events) + 1) if n != 5]  # everything once, in order, but the poison
        gave_up = [e for e in logs if e["event"] == "message_gave_up"]
        assert [e["stream_seq"] for e in gave_up] == [5]
        retries = [e for e in logs if e["event"] == "message_retry"]
        assert len(retries) == 2 + (settings.max_deliver - 1)
        dead = await js.get_last_msg(streams.DEADLETTER, subjects.deadletter("judge"))
        assert poison.encode() in dead.data and b"gave_up" in dead.data
    finally:
        await nc.close()
