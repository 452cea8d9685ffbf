"""Publisher.publish_many: pipelined, every acknowledgement checked, a repeated call stores nothing twice."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import ProbeTask
from reverie_canary.shared.runtime.broker import Outgoing, Publisher, make_broker
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import TASKS

pytestmark = pytest.mark.integration
MODEL = "m/one"


def tasks(n: int) -> list[Outgoing]:
    now = datetime.now(timezone.utc)
    out = []
    for k in range(n):
        task = ProbeTask(at=now, task_id=f"task-{k}", cycle="c-1", model=MODEL, provider=f"p{k % 7}/fp8",
                         kind="ttft", language="en", deadline=now + timedelta(minutes=10))
        out.append(Outgoing(task, subjects.task(MODEL, task.provider), task.task_id))
    return out


async def test_many_tasks_are_stored_once_each_in_order_and_a_repeat_is_all_duplicates(infra):
    """500 tasks: all stored, read back in the order sent; the same call again stores none."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL])
    await ensure_streams(settings)
    broker = make_broker(settings, "discovery")
    await broker.connect()
    try:
        publisher = Publisher(broker, "discovery")
        outgoing = tasks(500)
        assert await publisher.publish_many(outgoing, stream=TASKS) == [True] * 500
        assert await publisher.publish_many(outgoing, stream=TASKS) == [False] * 500
        js = broker.connection.jetstream()
        info = await js.stream_info(TASKS)
        assert info.state.messages == 500
        first = await js.get_msg(TASKS, info.state.first_seq)
        last = await js.get_msg(TASKS, info.state.last_seq)
        assert codec.PROBE_TASK.decode(first.data).task_id == "task-0"
        assert codec.PROBE_TASK.decode(last.data).task_id == "task-499"
        assert first.headers["Nats-Msg-Id"] == "task-0"
        assert await publisher.publish_many([], stream=TASKS) == []
    finally:
        await broker.stop()


async def test_a_publish_no_stream_takes_raises_transient(infra):
    """Tasks on a subject no stream holds: no acknowledgement comes, the call says which failed."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL])
    await ensure_streams(settings)
    broker = make_broker(settings, "discovery")
    await broker.connect()
    try:
        stray = [Outgoing(m.event, "nowhere." + m.subject, m.msg_id) for m in tasks(3)]
        with pytest.raises(Transient, match="publish to nowhere.canary.tasks"):
            await Publisher(broker, "discovery").publish_many(stray, stream=TASKS)
    finally:
        await broker.stop()
