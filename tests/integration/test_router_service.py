"""The router's shell on real NATS and Redis: a crash between saving and answering is repaired by redelivery."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import nats
import pytest
import redis.asyncio as aioredis

from reverie_canary.services.router.exclusions import ExclusionsFile
from reverie_canary.services.router.service import Router, SnapshotSink
from reverie_canary.services.router.store import RedisRouterStore
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.commands import AddOverride, RemoveOverride
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import CommandApplied, make_decision
from reverie_canary.shared.runtime import tracing
from reverie_canary.shared.runtime.broker import Delivery, Publisher, make_broker
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, ROUTING_BUCKET

pytestmark = pytest.mark.integration
MODEL = "acme/chat-1"


class CrashBeforeAnswering(Publisher):
    """A publisher that fails the next answer it is given, as a router killed after its save would."""

    armed = False

    async def publish(self, event, subject, msg_id, stream):
        if self.armed and subject.startswith("canary.answers."):
            self.armed = False
            raise Transient("killed between the save and the answer")
        return await super().publish(event, subject, msg_id, stream)


async def answers_on_log(nc, command_id: str) -> list:
    sub = await nc.jetstream().subscribe(subjects.answers_to(command_id), stream=LOG, ordered_consumer=True)
    out = []
    while True:
        try:
            out.append(codec.ANSWER.decode((await sub.next_msg(timeout=1.0)).data))
        except nats.errors.TimeoutError:
            break
    await sub.unsubscribe()
    return out


async def test_an_override_removed_before_a_crash_is_answered_applied_on_redelivery(infra):
    """A router killed after removing an override, before answering, must not answer 'refused' later.

    The removal, its position and its answer were saved in one step; the redelivered command (a new router)
    finds its position and publishes the saved answer: one CommandApplied on the log, same id."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL])
    await ensure_streams(settings)
    broker = make_broker(settings, "router")
    await broker.connect()
    kv = await broker.key_value(ROUTING_BUCKET, declare=False)
    nc = await nats.connect(infra.nats_url)
    client = aioredis.from_url(infra.redis_url)
    publisher = CrashBeforeAnswering(broker, "router")

    def router() -> Router:
        return Router(settings, RedisRouterStore(client, settings.namespace), SnapshotSink(kv, publisher), publisher,
                      ExclusionsFile(""), js=nc.jetstream())

    now = datetime.now(timezone.utc)
    add = AddOverride(command_id="c-add", actor="alice", at=now, provider="lambda/fp8", model=MODEL, reason="r")
    remove = RemoveOverride(command_id="c-remove", actor="alice", at=now, provider="lambda/fp8", model=MODEL)
    try:
        first = router()
        await first.start()
        await first.apply(add, Delivery(subject=subjects.ops("override-add"), stream_seq=1, deliveries=1, headers={}))
        publisher.armed = True
        with pytest.raises(Transient):
            await first.apply(remove, Delivery(subject=subjects.ops("override-remove"), stream_seq=2, deliveries=1,
                                               headers={}))
        saved = await RedisRouterStore(client, settings.namespace).load()
        assert saved.position == 2 and saved.state.overrides == {}
        assert [type(e).__name__ for e in saved.outbox] == ["SnapshotMade", "CommandApplied"]
        assert await answers_on_log(nc, "c-remove") == []  # the 'crash': nothing answered yet

        second = router()  # a new process: it carries out the saved outbox, then the command is redelivered
        await second.start()
        await second.apply(remove, Delivery(subject=subjects.ops("override-remove"), stream_seq=2, deliveries=2,
                                            headers={}))
        [answer] = await answers_on_log(nc, "c-remove")
        assert isinstance(answer, CommandApplied) and answer.answer_id == "answer|c-remove"
        assert [(v.model, v.ignore) for v in answer.snapshots] == [(MODEL, [])]
        entry = await kv.get(subjects.kv_key(MODEL))
        assert codec.SNAPSHOT.decode(entry.value).version == answer.snapshots[0].version
    finally:
        await client.aclose()
        await nc.close()
        await broker.stop()


async def test_one_version_of_a_close_is_linked_to_the_trace_of_each_of_its_decisions(infra):
    """Two suspensions of one close (routing_follows 1, 0) make one version; its snapshot span is the child
    of the last decision's span and linked to the first's, so neither decision's trace stops at the router.

    The fault it guards: the first decision's trace ended at the router, and a trace of its probe
    never reached the snapshot that put its suspension into routing."""
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL])
    await ensure_streams(settings)
    broker = make_broker(settings, "router")
    await broker.connect()
    kv = await broker.key_value(ROUTING_BUCKET, declare=False)
    nc = await nats.connect(infra.nats_url)
    client = aioredis.from_url(infra.redis_url)
    publisher = Publisher(broker, "router")
    now = datetime.now(timezone.utc)
    close = [make_decision(at=now, decision_id=f"d-{p}", model=MODEL, provider=p, action="suspend",
                      until=now + timedelta(hours=1), reason="failed_cycles", routing_follows=follows)
             for p, follows in (("baseten/fp8", 1), ("lambda/fp8", 0))]
    tracing.use_provider(provider)
    try:
        router = Router(settings, RedisRouterStore(client, settings.namespace), SnapshotSink(kv, publisher),
                        publisher, ExclusionsFile(""), js=nc.jetstream())
        await router.start()
        exporter.clear()  # the start's own versions
        handled = []
        for seq, decision in enumerate(close, start=1):
            with tracing.span("router Decision", root=True, attributes={"canary.provider": decision.provider}) as s:
                await router.apply(decision, Delivery(subject=subjects.decision(MODEL, decision.provider), stream_seq=seq,
                                                      deliveries=1, headers={}))
            handled.append(s)
        [snapshot] = [s for s in exporter.get_finished_spans() if s.name == "router snapshot"]
        first, last = handled
        assert snapshot.parent.span_id == last.get_span_context().span_id
        assert [link.context.span_id for link in snapshot.links] == [first.get_span_context().span_id]
        assert snapshot.context.trace_id == last.get_span_context().trace_id != first.get_span_context().trace_id
        entry = codec.SNAPSHOT.decode((await kv.get(subjects.kv_key(MODEL))).value)
        assert snapshot.attributes["canary.version"] == entry.version
        assert sorted(e.provider for e in entry.entries) == ["baseten/fp8", "lambda/fp8"]
        assert router.held_traces == {}  # linked once: the next version links nothing of this close
    finally:
        tracing.use_provider(None)
        provider.shutdown()
        await client.aclose()
        await nc.close()
        await broker.stop()
