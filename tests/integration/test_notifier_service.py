"""The notifier against real NATS, Redis and local HTTP receivers: signing, outages, dead letters, folding.

Time is compressed through the settings: retries start at 50 ms and back off
to 0.4 s (5 s and 10 min scaled by about 1/100 and 1/1500), and reminders
come every 2 h of the events' own time (the judge's cycles are 30 min apart in
their ``at``, whatever the wall clock does).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from datetime import timedelta

import msgspec
import nats
import pytest
from structlog.testing import capture_logs

from reverie_canary.canary.runtime import running
from reverie_canary.services.notifier.core import webhook_id
from reverie_canary.services.notifier.service import create_app
from reverie_canary.services.notifier.store import RedisDeliveryBook
from reverie_canary.shared.contract import codec, ids, subjects
from reverie_canary.shared.contract.events import CycleVerdict, Decision, make_decision
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot
from reverie_canary.shared.runtime.service import ensure_streams, redis_client
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, NOTICES, notifier_consumer
from tests import waits
from tests.judge_events import T0, cycle_events, healthy, publish_events
from tests.notifier_receiver import Receiver, new_secret, receiving
from tests.operator_cli import run_canary

pytestmark = pytest.mark.integration
MODEL = "acme/chat-1"


def notifier_settings(infra, *, urls: dict[str, str], secrets: dict[str, str] | None = None, user: str = "",
                      **changes) -> Settings:
    password = infra.passwords[user] if user else ""  # type: ignore[attr-defined]
    base = dict(nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace, models=[MODEL],
                notify_urls=urls, notify_secrets=secrets or {}, notify_retry_base_s=0.05, notify_retry_max_s=0.4,
                notify_give_up_s=60.0, notify_timeout_s=2.0, notify_poll_s=0.1, retry_delay_s=0.2,
                nats_user=user, nats_password=password, openrouter_base_url="http://127.0.0.1:9/api/v1")
    base.update(changes)
    return Settings.load(env={}, **base)


@contextlib.asynccontextmanager
async def notifier(settings: Settings, admin: Settings | None = None):
    """A running notifier app (streams created first, as ``canary init`` would)."""
    await ensure_streams(admin or settings)
    app = create_app(settings)
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


@contextlib.asynccontextmanager
async def bus(infra, user: str = ""):
    kwargs = {"user": user, "password": infra.passwords[user]} if user else {}  # type: ignore[attr-defined]
    nc = await nats.connect(infra.nats_url, **kwargs)
    try:
        yield nc.jetstream()
    finally:
        await nc.close()


def decision(n: int, provider: str = "a/fp8", action: str = "suspend", **kw) -> Decision:
    at = kw.pop("at", T0 + timedelta(minutes=30 * n + 10))
    return make_decision(at=at, decision_id=ids.decision_id(MODEL, provider, action, str(n)), model=MODEL,
                    provider=provider, action=action, reason=kw.pop("reason", "failed_cycles"),
                    **({"until": at + timedelta(days=1)} if action == "suspend" else {}), ladder_level=1,
                    cycles=[f"{MODEL}@c{n}"], **kw)


async def publish(js, event, msg_id: str | None = None) -> None:
    if isinstance(event, Decision):
        subject, default = subjects.decision(event.model, event.provider or None), event.decision_id
    else:
        assert isinstance(event, CycleVerdict)
        subject, default = subjects.verdicts(event.model), ids.verdict_id(event.model, event.cycle_no)
    await js.publish(subject, codec.encode(event), stream=LOG, headers={"Nats-Msg-Id": msg_id or default})


async def empty_redis(settings: Settings) -> None:
    """Redis lost and back empty (FLUSHALL): the notifier's book is gone, the log and the durable are not."""
    client = redis_client(settings)
    try:
        await client.flushall()
    finally:
        await client.aclose()


async def wait_for(probe, timeout_s: float, what: str) -> None:
    """Poll ``probe()`` (async) until true; fail naming ``what`` after ``timeout_s`` (:func:`tests.waits.until`)."""
    await waits.until(probe, timeout_s=timeout_s, what=what, interval_s=0.05)


async def test_a_webhook_receiver_verifies_the_signature_and_the_content(infra):
    """A suspend reaches the receiver signed per Standard Webhooks; a wrong key or a changed body fails to verify."""
    secret = new_secret()
    async with receiving(secret) as hook:
        settings = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret})
        async with notifier(settings), bus(infra) as js:
            d = decision(3, detail="2 failed cycles in a row (ttft:ttft_exceeded)")
            await publish(js, d)
            assert await hook.wait_for(1, 10), "no notice reached the receiver"
    (got,) = hook.received
    assert got.verified
    assert got.webhook_id == webhook_id(infra.namespace, d.decision_id) and got.headers["content-type"] == "application/json"
    assert abs(int(got.headers["webhook-timestamp"]) - time.time()) < 60
    assert got.headers["webhook-signature"].startswith("v1,")
    data = got.data["data"]
    assert got.data["type"] == "canary.notice" and got.data["timestamp"] == "2026-11-01T01:40:00Z"
    assert (data["id"], data["severity"], data["action"], data["model"], data["provider"]) == (
        d.decision_id, "critical", "suspend", MODEL, "a/fp8")
    assert data["until"] == "2026-11-02T01:40:00Z" and "ttft_exceeded" in data["text"]
    other = Receiver(new_secret())
    assert not other.verify(got.headers, got.body)
    assert not hook.verify(got.headers, got.body.replace(b"suspend", b"susPend"))


async def book_entries(settings: Settings, status: str):
    client = redis_client(settings)
    try:
        return await RedisDeliveryBook(client, settings.namespace).entries(status, "hook")  # type: ignore[arg-type]
    finally:
        await client.aclose()


async def test_a_receiver_down_for_minutes_gets_each_notice_exactly_once_across_a_notifier_restart(infra):
    """Receiver refusing connections, notifier restarted mid-outage: once back, each notice arrives once."""
    secret = new_secret()
    hook = Receiver(secret)  # not started: connection refused
    settings = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret})
    sent = [decision(n, provider=f"p{n}/fp8") for n in range(5)]
    async with notifier(settings), bus(infra) as js:
        for d in sent:
            await publish(js, d)

        async def retried(least: int):
            pending = await book_entries(settings, "pending")
            return len(pending) == 5 and all(e.attempts >= least for e in pending)
        await wait_for(lambda: retried(3), 15, "three failed attempts of every notice")
    before = {e.notice_id: e for e in await book_entries(settings, "pending")}
    assert all(e.last_error.startswith("ConnectError") for e in before.values())
    async with notifier(settings), bus(infra) as js:
        async def resumed():
            pending = await book_entries(settings, "pending")
            return len(pending) == 5 and all(e.attempts > before[e.notice_id].attempts for e in pending)
        await wait_for(resumed, 15, "the restarted notifier to go on with the stored schedule")
        assert all(e.first_at == before[e.notice_id].first_at for e in await book_entries(settings, "pending"))
        await hook.start()
        try:
            assert await hook.wait_for(5, 15), f"only {len(hook.received)} of 5 notices after the receiver came back"
            marker = decision(9, provider="z/fp8")
            await publish(js, marker)
            assert await hook.wait_for(6, 10)
        finally:
            await hook.stop()
    assert sorted(hook.ids()) == sorted(webhook_id(infra.namespace, d.decision_id) for d in [*sent, marker])
    assert all(r.verified for r in hook.received)
    assert await book_entries(settings, "pending") == []


async def canary(infra, *args: str, user: str = "operator") -> tuple[int, str, str]:
    """Run ``canary ARGS`` as ``user`` on this module's model (:func:`tests.operator_cli.run_canary`)."""
    return await run_canary(infra, *args, model=MODEL, user=user)


async def test_a_receiver_that_never_recovers_leaves_a_dead_letter_that_resend_delivers(secured):
    """With each service on its own credential: dead letter on canary.notices.dead.hook, listed, resent once."""
    secret = new_secret()
    async with receiving(secret, status=503) as hook:
        settings = notifier_settings(secured, urls={"hook": hook.url}, secrets={"hook": secret}, user="notifier",
                                     notify_give_up_s=1.0)
        admin = settings.replace(nats_user="admin", nats_password=secured.passwords["admin"])
        async with notifier(settings, admin), bus(secured, "admin") as js:
            d = decision(4)
            await publish(js, d)
            sub = await js.subscribe(subjects.ALL_NOTICES_DEAD, stream=NOTICES, ordered_consumer=True)
            msg = await sub.next_msg(timeout=15)
            letter = codec.NOTICE_DEAD.decode(msg.data)
            assert msg.subject == subjects.notice_dead("hook")
            assert (letter.notice.notice_id, letter.channel, letter.generation) == (d.decision_id, "hook", 0)
            assert letter.error == "HTTP 503 Service Unavailable" and letter.attempts >= 2
            assert hook.refused == letter.attempts

            code, out, err = await canary(secured, "notices", "list", "--json")
            assert code == 0, err
            listed = json.loads(out)
            (row,) = listed["dead"]
            assert (row["ref"], row["channel"], row["action"], row["severity"], row["error"]) == (
                webhook_id(secured.namespace, d.decision_id), "hook", "suspend", "critical", "HTTP 503 Service Unavailable")
            assert listed["pending"] == [] and listed["recent"] == []
            assert hook.url not in out and secret not in out

            code, out, err = await canary(secured, "notices", "resend", "--all", "--channel", "nosuch")
            assert code == 2, (code, out, err)  # a typo is refused by the notifier, naming the channels it knows
            assert "unknown channel 'nosuch': the notifier knows hook" in err and "queued again" not in out
            (dead,) = await book_entries(settings, "dead")
            assert dead.notice_id == d.decision_id and dead.generation == 0  # nothing was touched

            hook.status = 200
            code, out, err = await canary(secured, "notices", "resend", row["ref"])
            assert code == 0, err
            assert f"queued again: {d.decision_id} on hook" in out
            assert await hook.wait_for(1, 10), "the resent notice did not arrive"
            (got,) = hook.received
            assert got.verified and got.webhook_id == row["ref"]

            again, as_judge = await asyncio.gather(canary(secured, "notices", "resend", d.decision_id),
                                                   canary(secured, "notices", "resend", "--all", user="judge"))
            assert again[0] == 1 and "already delivered" in again[1]
            assert as_judge[0] == 1 and "only the operator credential" in as_judge[2]
            assert await book_entries(settings, "dead") == []
            (recent,) = await book_entries(settings, "delivered")
            assert (webhook_id(secured.namespace, recent.notice_id), recent.generation) == (row["ref"], 1)
    assert len(hook.received) == 1


async def test_apprise_delivers_to_a_real_local_json_endpoint(infra):
    """An apprise json:// channel POSTs apprise's JSON (title, message, type) to a local receiver."""
    async with receiving() as hook:
        url = hook.url.replace("http://", "json://")
        settings = notifier_settings(infra, urls={"apprise": url})
        async with notifier(settings), bus(infra) as js:
            await publish(js, decision(5, detail="2 failed cycles in a row"))
            assert await hook.wait_for(1, 15), "apprise delivered nothing"
    (got,) = hook.received
    assert got.data["type"] == "failure" and got.data["title"] == "[CRITICAL] suspend a/fp8"
    assert got.data["message"].startswith(f"[{MODEL}] a/fp8: suspend until 2026-11-02T02:40:00Z")


async def test_floor_held_over_twenty_cycles_is_one_notice_reminders_and_one_end(infra):
    """The real judge holds the floor for one provider over 20 cycles: 1 start, reminders every 2 h, 1 end."""
    secret = new_secret()
    async with receiving(secret) as hook:
        settings = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret}, mode="enforce",
                                     min_hosts=3, notify_remind_s=2 * 3600.0)
        await ensure_streams(settings)
        fleet = ("a/fp8", "b/fp8", "c/fp8")
        async with running(settings, ["judge", "notifier"]), bus(infra) as js:
            for n in range(21):
                outcomes = healthy(*fleet)
                if n < 20:
                    outcomes["a/fp8"]["ttft"] = ("fail", "ttft_exceeded")
                await publish_events(js, cycle_events(n, outcomes))
            assert await hook.wait_for(6, 30), [r.data["data"]["phase"] for r in hook.received]
            await publish(js, decision(99, provider="z/fp8"))  # a marker: everything before it has been folded
            assert await hook.wait_for(7, 10)
    got = [r.data["data"] for r in hook.received if r.data["data"]["action"] == "floor_held"]
    assert [(g["phase"], g["count"]) for g in got] == [
        ("start", 1), ("reminder", 5), ("reminder", 9), ("reminder", 13), ("reminder", 17), ("end", 19)]
    assert got[0]["id"] == ids.decision_id(MODEL, "a/fp8", "floor_held", "1")
    assert {g["severity"] for g in got} == {"critical"} and {g["provider"] for g in got} == {"a/fp8"}
    assert "passed a cycle" in got[-1]["text"] and got[-1]["since"] == got[0]["at"]
    assert len(hook.received) == 7 and len(set(hook.ids())) == 7


async def test_a_decision_redelivered_with_another_schema_version_is_announced_once(infra):
    """The same decision id as v1, then as v2 under another message id: one notice on the channel."""
    secret = new_secret()
    async with receiving(secret) as hook:
        settings = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret})
        async with notifier(settings), bus(infra) as js:
            d = decision(6)
            await publish(js, d)
            await publish(js, msgspec.structs.replace(d, v=2, detail="the same call, a newer judge"),
                          msg_id=f"{d.decision_id}|v2")
            marker = decision(7, provider="z/fp8")
            await publish(js, marker)
            assert await hook.wait_for(2, 10)
    assert sorted(hook.ids()) == sorted([webhook_id(infra.namespace, d.decision_id),
                                         webhook_id(infra.namespace, marker.decision_id)])


async def test_two_deployments_and_a_redeploy_never_share_a_webhook_id(infra, tmp_path):
    """prod and staging (own NATS, Redis, namespace) announce the same decision; staging is then redeployed (its
    router starts again at ignore-list v1): a receiver deduping on webhook-id, as docs/operating/notices.md shows, keeps all four."""
    from tests.conftest import servers

    secret = new_secret()
    async with receiving(secret) as hook:
        def kept(n: int):  # what a receiver deduping on webhook-id keeps (a delivery repeated at a stop is one)
            unique = {r.webhook_id: r.data["data"] for r in hook.received if r.verified}
            return len(unique) >= n and unique

        prod = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret}, namespace="prod")
        d = decision(3)
        async with notifier(prod), bus(infra) as js:
            await publish(js, d)
            await waits.until(lambda: kept(1), timeout_s=10, what="prod's notice")
        with servers(tmp_path / "staging") as (nats_url, redis_url):
            staging = prod.replace(nats_url=nats_url, redis_url=redis_url, namespace="staging")
            first = IgnoreSnapshot(at=T0 + timedelta(hours=1), model=MODEL, version=1)
            redeployed = IgnoreSnapshot(at=T0 + timedelta(days=3), model=MODEL, version=1,
                                        entries=[IgnoreEntry(provider="a/fp8", reasons=[
                                            IgnoreReason(layer="override", reason="by hand")])])
            nc = await nats.connect(nats_url)
            try:
                js = nc.jetstream()
                async with notifier(staging):
                    await js.publish(subjects.decision(MODEL, d.provider), codec.encode(d), stream=LOG,
                                     headers={"Nats-Msg-Id": d.decision_id})
                    await js.publish(subjects.routing(MODEL), codec.encode(first), stream=LOG,
                                     headers={"Nats-Msg-Id": ids.snapshot_id(MODEL, 1)})
                    await waits.until(lambda: kept(3), timeout_s=10, what="staging's two notices")
                async with notifier(staging):  # the redeployed staging: same namespace and book, versions from 1
                    await js.publish(subjects.routing(MODEL), codec.encode(redeployed), stream=LOG,
                                     headers={"Nats-Msg-Id": f"{ids.snapshot_id(MODEL, 1)}|redeploy"})
                    unique = await waits.until(lambda: kept(4), timeout_s=10, what="the redeploy's ignore list v1")
            finally:
                await nc.close()
    got = sorted((n["namespace"], n["action"], n["title"]) for n in unique.values())
    assert got == [("prod", "suspend", f"[{MODEL}] a/fp8: suspend until 2026-11-02T01:40:00Z (ladder step 1)"),
                   ("staging", "ignore_list_changed", f"[{MODEL}] ignore list v1: (empty)"),
                   ("staging", "ignore_list_changed", f"[{MODEL}] ignore list v1: a/fp8"),
                   ("staging", "suspend", f"[{MODEL}] a/fp8: suspend until 2026-11-02T01:40:00Z (ladder step 1)")]
    assert webhook_id("prod", d.decision_id) in unique and webhook_id("staging", d.decision_id) in unique


async def test_blind_cycles_that_only_move_a_held_suspensions_end_send_no_ignore_list_notice(infra):
    """Six versions that only move a held suspension's end (one per blind cycle), across a notifier restart: one
    ignore_list_changed; an override joining, then the list emptying: one each."""
    secret = new_secret()

    def version(v: int, layers=("suspension",)) -> IgnoreSnapshot:
        at = T0 + timedelta(minutes=30 * v)
        return IgnoreSnapshot(at=at, model=MODEL, version=v, entries=[IgnoreEntry(provider="a/fp8", reasons=[
            IgnoreReason(layer=layer, reason="held while blind", until=at + timedelta(hours=1)) for layer in layers])])

    async def put(js, s: IgnoreSnapshot) -> None:
        await js.publish(subjects.routing(MODEL), codec.encode(s), stream=LOG,
                         headers={"Nats-Msg-Id": ids.snapshot_id(MODEL, s.version)})

    async with receiving(secret) as hook:
        settings = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret})
        async with notifier(settings), bus(infra) as js:
            for v in range(1, 4):
                await put(js, version(v))
            assert await hook.wait_for(1, 10)
        async with notifier(settings), bus(infra) as js:  # the last told list is in the book: a restart keeps it
            for v in range(4, 7):
                await put(js, version(v))
            await put(js, version(7, ("suspension", "override")))
            await put(js, IgnoreSnapshot(at=T0 + timedelta(hours=4), model=MODEL, version=8))
            marker = decision(9, provider="z/fp8")
            await publish(js, marker)
            assert await hook.wait_for(4, 10), [r.data["data"]["title"] for r in hook.received]
            await asyncio.sleep(0.3)  # anything wrongly queued before the marker would be sent by now
    kept = {r.webhook_id: r.data["data"] for r in hook.received}  # a delivery repeated at a stop is one notice
    titles = [n["title"] for n in kept.values() if n["action"] == "ignore_list_changed"]
    assert titles == [f"[{MODEL}] ignore list v1: a/fp8", f"[{MODEL}] ignore list v7: a/fp8",
                      f"[{MODEL}] ignore list v8: (empty)"]
    assert len(kept) == 4


async def test_a_hanging_channel_does_not_delay_a_healthy_one(infra):
    """One receiver holds every request unanswered; the other gets all ten notices meanwhile."""
    secret = new_secret()
    async with receiving(secret) as slow, receiving(secret) as ok:
        slow.hold = asyncio.Event()
        settings = notifier_settings(infra, urls={"slow": slow.url, "ok": ok.url},
                                     secrets={"slow": secret, "ok": secret}, notify_timeout_s=30.0)
        async with notifier(settings) as app, bus(infra) as js:
            for n in range(10):
                await publish(js, decision(n, provider=f"p{n}/fp8"))
            assert await ok.wait_for(10, 15), f"the healthy channel got {len(ok.received)} of 10"
            assert slow.received == []  # every request to the slow channel is still unanswered
            counts = app.notifier.notifier.counts  # type: ignore[attr-defined]

            async def recorded():
                return counts["ok"]["delivered"] == 10
            await wait_for(recorded, 5, "the healthy channel's ten deliveries to be recorded")
            assert counts["slow"]["delivered"] == 0 and counts["slow"]["failed"] == 0
            slow.hold.set()
            assert await slow.wait_for(10, 15)
    assert sorted(slow.ids()) == sorted(ok.ids())


async def test_operator_commands_are_told_from_the_routers_answers(infra):
    """Refused (unknown provider), applied, and forced past the capacity floor: told as such, once each."""
    from reverie_canary.shared.contract.commands import VERBS, AddOverride

    secret = new_secret()
    async with receiving(secret) as hook:
        settings = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret}, min_hosts=2,
                                     notify_severity={"hook": "warning"})
        await ensure_streams(settings)
        async with running(settings, ["router", "notifier"]), bus(infra) as js:
            await publish_events(js, cycle_events(0, healthy("a/fp8", "b/fp8", "c/fp8")))
            commands = [
                AddOverride(command_id="cmd-typo", actor="alice", at=T0, provider="nosuch/fp8", model=MODEL,
                            reason="INC-1"),
                AddOverride(command_id="cmd-a", actor="alice", at=T0, provider="a/fp8", model=MODEL, reason="INC-1"),
                AddOverride(command_id="cmd-b", actor="bob", at=T0, provider="b/fp8", model=MODEL, reason="INC-2",
                            force=True),
            ]
            for c in commands:
                await js.publish(subjects.ops(VERBS[AddOverride]), codec.encode(c), stream=LOG,
                                 headers={"Nats-Msg-Id": c.command_id})
            assert await hook.wait_for(3, 20), [r.data["data"]["action"] for r in hook.received]
    got = {r.data["data"]["id"]: r.data["data"] for r in hook.received}
    assert [(got[k]["action"], got[k]["severity"], got[k]["actor"]) for k in ("cmd|cmd-typo", "cmd|cmd-a",
                                                                             "cmd|cmd-b")] == [
        ("command_refused", "warning", "alice"), ("override_added", "warning", "alice"),
        ("floor_broken_by_operator", "critical", "bob")]
    assert "CAPACITY FLOOR BROKEN by an operator" in got["cmd|cmd-b"]["text"]
    assert len(hook.received) == 3  # the ignore-list versions are info: below this channel's minimum


async def test_a_book_lost_with_redis_is_rebuilt_from_the_log_so_a_held_state_is_not_told_again(infra):
    """Redis flushed while a floor is held: the next renewal is no new start; the suspend that ends it ends it.

    The soak found it (benchmarks/soak.py): after an empty Redis the notifier folded on from an
    empty state, so every state it held was told again as new and its reminders and its end never came.
    """
    secret = new_secret()
    async with receiving(secret) as hook:
        settings = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret})
        held, renewed, suspended = (decision(1, action="floor_held"), decision(2, action="floor_held"),
                                    decision(3, action="suspend"))
        async with notifier(settings), bus(infra) as js:
            await publish(js, held)
            assert await hook.wait_for(1, 10), "no start notice of the held floor"
            await empty_redis(settings)
            await publish(js, renewed)
            await publish(js, suspended)
            assert await hook.wait_for(3, 15), [r.data["data"]["id"] for r in hook.received]
            await asyncio.sleep(0.5)  # a second start of the floor would come with them
    told = [(r.data["data"]["id"], r.data["data"]["phase"]) for r in hook.received]
    assert sorted(told) == sorted([(held.decision_id, "start"), (suspended.decision_id, "notice"),
                                   (f"end|{held.decision_id}", "end")]), told


async def acked_by_notifier(js, settings: Settings, count: int) -> bool:
    """Whether the notifier's durable acknowledged ``count`` messages (its ack floor's consumer sequence)."""
    info = await js.consumer_info(LOG, notifier_consumer(settings).durable)
    return info.ack_floor is not None and info.ack_floor.consumer_seq >= count


async def test_a_new_deployment_whose_log_others_wrote_first_starts_empty_without_a_rebuilt_book_warning(infra):
    """A first start after other services' messages: no ``book_rebuilt_from_log``, and the first decision is told.

    A fresh ``canary demo`` warned at start: the new durable's first message sits past the
    log's first (the judge and router publish before the notifier is up), which the
    lost-book check read as a lost book.  The durable had acknowledged nothing: a new book;
    and a first message that changes nothing still makes the book, so that the next one,
    the durable having acknowledged it, is not taken for a lost book either.
    """
    secret = new_secret()
    async with receiving(secret) as hook:
        settings = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret})
        await ensure_streams(settings)
        async with bus(infra) as js:  # what other services published before the notifier's first start
            await publish(js, decision(1, provider="b/fp8", action="floor_held"))
            await publish(js, decision(2, provider="b/fp8", action="floor_held"))
        with capture_logs() as logs:
            async with notifier(settings), bus(infra) as js:
                # its first message changes nothing (a mode change: its command's answer tells it)
                await publish(js, decision(2, provider="", action="mode_changed", reason="operator"))
                await wait_for(lambda: acked_by_notifier(js, settings, 1), 10, "the notifier acknowledged it")
                held = decision(3, action="floor_held")
                await publish(js, held)
                assert await hook.wait_for(1, 10), "no notice of the first decision the notifier saw"
                await asyncio.sleep(0.3)  # a warning would come with the fold
    rebuilt = [e for e in logs if e["event"] == "book_rebuilt_from_log"]
    assert rebuilt == []
    assert [(r.data["data"]["id"], r.data["data"]["phase"]) for r in hook.received] == [(held.decision_id, "start")]


async def test_a_book_lost_with_redis_between_two_starts_is_rebuilt_with_a_warning(infra):
    """Redis emptied while the notifier was stopped, its durable having acknowledged: a warning, and no start again.

    The durable's acknowledged messages are the evidence that a book existed; the state
    folded before (a held floor) is rebuilt from the log, so its renewal is no new start.
    """
    secret = new_secret()
    async with receiving(secret) as hook:
        settings = notifier_settings(infra, urls={"hook": hook.url}, secrets={"hook": secret})
        held, renewed = decision(1, action="floor_held"), decision(2, action="floor_held")
        async with notifier(settings), bus(infra) as js:
            await publish(js, held)
            assert await hook.wait_for(1, 10), "no start notice of the held floor"
        await empty_redis(settings)
        with capture_logs() as logs:
            async with notifier(settings), bus(infra) as js:
                await publish(js, renewed)
                await waits.until(lambda: any(e["event"] == "book_rebuilt_from_log" for e in logs), timeout_s=10,
                                  what="the notifier to rebuild its lost book", interval_s=0.05)
                await asyncio.sleep(0.5)  # a second start of the floor would come now
    (rebuilt,) = [e for e in logs if e["event"] == "book_rebuilt_from_log"]
    assert rebuilt["held"] == 1 and rebuilt["position"] == 1
    assert [(r.data["data"]["id"], r.data["data"]["phase"]) for r in hook.received] == [(held.decision_id, "start")]
