"""Malformed messages on every subscribed subject are dead-lettered with a reason; services keep going."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import nats
import pytest

from reverie_canary.canary.runtime import running
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.events import DeadLetter
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import DEADLETTER, TASKS
from tests import waits
from tests.judge_events import MODEL, cycle_events, healthy, publish_events

pytestmark = pytest.mark.integration

#: One subject per (service, consumer filter) and the service that must refuse it.
GARBAGE = [
    ("prober", subjects.task(MODEL, "a/fp8"), TASKS),
    ("judge", subjects.result(MODEL, "a/fp8"), None),
    ("judge", subjects.discovery(MODEL), None),
    ("judge", subjects.routing(MODEL), None),
    ("router", subjects.decision(MODEL, "a/fp8"), None),
    ("discovery", subjects.retest(MODEL), None),
    ("notifier", subjects.verdicts(MODEL), None),
]


def settings_for(infra) -> Settings:
    return Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                         models=[MODEL], mode="enforce", cycle_interval_s=3600, probe_window_s=600,
                         openrouter_base_url="http://127.0.0.1:9/api/v1", retry_delay_s=0.2)


async def test_garbage_on_every_subject_is_dead_lettered_and_services_keep_working(infra):
    """Bytes that are not a message go to canary.deadletter.<service> with reason undecodable."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats.connect(infra.nats_url)
    js = nc.jetstream()
    letters: dict[str, list[DeadLetter]] = defaultdict(list)

    async def on_letter(msg):
        letter = codec.DEAD_LETTER.decode(msg.data)
        letters[letter.service].append(letter)

    await nc.subscribe(subjects.ALL_DEADLETTER, cb=on_letter)
    async with running(settings, ["discovery", "prober", "judge", "router", "notifier"]):
        for i, (_, subject, stream) in enumerate(GARBAGE):
            await js.publish(subject, b'{"type": "probe_result", "task_id": 7}', headers={"Nats-Msg-Id": f"bad{i}"},
                             stream=stream)
        await js.publish(subjects.ops("lift"), b"\xff\xfe not json", headers={"Nats-Msg-Id": "bad-ops"})
        # then a valid cycle: the judge must still fold it and decide
        fleet = ("a/fp8", "b/fp8", "c/fp8", "d/fp8")
        decided = asyncio.Event()

        async def on_decision(msg):
            if codec.DECISION.decode(msg.data).action == "suspend":
                decided.set()

        await nc.subscribe(subjects.ALL_DECISIONS, cb=on_decision)
        out = healthy(*fleet)
        out["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
        for n in range(2):
            await publish_events(js, cycle_events(n, out))
        await waits.within(decided.wait(), timeout_s=15, what="the suspend decision after the garbage")
        await waits.until(lambda: all(letters.get(service) for service, _, _ in GARBAGE)
                          and len(letters["router"]) >= 2 and letters.get("notifier"),
                          timeout_s=10, what="a dead letter from every service for its garbage")
    await nc.close()

    for service, subject, _ in GARBAGE:
        assert any(dl.subject == subject and dl.reason == "undecodable" for dl in letters[service]), (service, subject)
    # the ops garbage is refused by each of its consumers: judge and router (the notifier reads
    # commands' answers, not the commands); the decision garbage by both of its own: router and notifier
    assert {dl.service for ls in letters.values() for dl in ls if dl.subject == subjects.ops("lift")} == {
        "judge", "router"}
    assert {dl.service for ls in letters.values() for dl in ls if dl.subject == subjects.decision(MODEL, "a/fp8")} \
        == {"router", "notifier"}
    judge_letter = next(dl for dl in letters["judge"] if dl.subject == subjects.result(MODEL, "a/fp8"))
    assert "task_id" in judge_letter.error and judge_letter.payload.startswith('{"type": "probe_result"')


async def test_dead_letters_are_kept_in_their_own_stream(infra):
    """A refused message is stored in CANARY_DEADLETTER (kept for inspection), not lost."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats.connect(infra.nats_url)
    js = nc.jetstream()
    async with running(settings, ["judge"]):
        await js.publish(subjects.result(MODEL, "x/y"), b"[]", headers={"Nats-Msg-Id": "bad"})

        async def stored_letters() -> int:
            return (await js.stream_info(DEADLETTER)).state.messages

        await waits.until(stored_letters, timeout_s=5, what="a dead letter stored in CANARY_DEADLETTER")
    msg = await js.get_last_msg(DEADLETTER, subjects.deadletter("judge"))
    letter = codec.DEAD_LETTER.decode(msg.data)
    assert (letter.reason, letter.payload, letter.deliveries) == ("undecodable", "[]", 1)
    await nc.close()


async def test_deeply_nested_json_is_dead_lettered_at_once(infra):
    """50 000 nested arrays on a results subject: refused on the first delivery, the judge moves on."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats.connect(infra.nats_url)
    js = nc.jetstream()
    letters: list[DeadLetter] = []

    async def on_letter(msg):
        letters.append(codec.DEAD_LETTER.decode(msg.data))

    await nc.subscribe(subjects.ALL_DEADLETTER, cb=on_letter)
    async with running(settings, ["judge"]):
        await js.publish(subjects.result(MODEL, "a/fp8"), b"[" * 50_000 + b"]" * 50_000,
                         headers={"Nats-Msg-Id": "deep"})
        await waits.until(lambda: letters, timeout_s=5, what="the dead letter of the nested JSON")
    await nc.close()
    [letter] = letters
    assert (letter.service, letter.reason, letter.deliveries) == ("judge", "undecodable", 1)


async def test_an_operator_command_with_a_control_character_is_dead_lettered_by_router_and_judge(infra):
    """An override whose reason holds ESC and a mode whose actor ends in a newline: refused on the wire, nothing applied."""
    import uuid
    from datetime import datetime, timezone

    from reverie_canary.shared.contract.commands import AddOverride, SetMode
    from reverie_canary.shared.runtime.streams import LOG

    settings = settings_for(infra)
    await ensure_streams(settings)
    nc = await nats.connect(infra.nats_url)
    js = nc.jetstream()
    letters: list[DeadLetter] = []

    async def on_letter(msg):
        letters.append(codec.DEAD_LETTER.decode(msg.data))

    await nc.subscribe(subjects.ALL_DEADLETTER, cb=on_letter)
    now = datetime.now(timezone.utc)
    override = AddOverride(command_id=str(uuid.uuid4()), actor="alice", at=now, provider="a/fp8", model=MODEL,
                           reason="PLACEHOLDER")
    mode = SetMode(command_id=str(uuid.uuid4()), actor="PLACEHOLDER", at=now, mode="observe")
    bad_override = codec.encode(override).replace(b"PLACEHOLDER", rb"esc \u001b]0;PWNED\u0007 \u001b[2J")
    bad_mode = codec.encode(mode).replace(b"PLACEHOLDER", rb"alice\n")
    async with running(settings, ["judge", "router"]):
        await js.publish(subjects.ops("override-add"), bad_override, headers={"Nats-Msg-Id": override.command_id})
        await js.publish(subjects.ops("mode"), bad_mode, headers={"Nats-Msg-Id": mode.command_id})
        await waits.until(lambda: len(letters) >= 4, timeout_s=10, what="both commands dead-lettered by both services")
        answers = []
        for command in (override, mode):
            for owner in ("router", "judge"):
                try:
                    answers.append(await js.get_last_msg(LOG, subjects.answer(owner, command.command_id)))
                except Exception:
                    pass
    await nc.close()
    assert sorted((dl.service, dl.subject) for dl in letters) == sorted(
        (s, subjects.ops(v)) for s in ("judge", "router") for v in ("override-add", "mode"))
    assert all(dl.reason == "undecodable" for dl in letters)
    assert {dl.error.rpartition("at ")[2] for dl in letters} == {"`$.reason`", "`$.actor`"}, [dl.error for dl in letters]
    assert answers == []  # neither applied nor answered: a refused message, as other bad input
