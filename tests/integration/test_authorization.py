"""Authorization is enforced by NATS itself (shared/nats/server.conf): who may publish what."""

from __future__ import annotations

from datetime import datetime, timezone

import nats
import pytest
from nats.errors import NoServersError

from reverie_canary.canary.runtime import running
from reverie_canary.client import IgnoreListClient
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.commands import AddOverride
from reverie_canary.shared.contract.events import Decision, make_decision
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG
from tests import waits

pytestmark = pytest.mark.integration

MODEL = "acme/chat-1"


def settings_for(infra, user: str = "admin") -> Settings:
    return Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                         models=[MODEL], mode="enforce", cycle_interval_s=3600, probe_window_s=600,
                         nats_user=user, nats_password=infra.passwords[user], retry_delay_s=0.2,
                         openrouter_base_url="http://127.0.0.1:9/api/v1")


async def connect(infra, user: str, **kw):
    return await nats.connect(infra.nats_url, user=user, password=infra.passwords[user], **kw)


def override(provider: str, command_id: str, reason: str = "incident 4711") -> AddOverride:
    return AddOverride(command_id=command_id, actor="alice", at=datetime.now(timezone.utc), provider=provider,
                       model=MODEL, reason=reason)


def suspend(provider: str) -> Decision:
    now = datetime.now(timezone.utc)
    return make_decision(at=now, decision_id=f"forged-{provider}", model=MODEL, provider=provider, action="suspend",
                    until=now.replace(year=now.year + 1), reason="forged")


async def stored_on(js, subject: str) -> int:
    info = await js.stream_info(LOG, subjects_filter=subject)
    return sum((info.state.subjects or {}).values()) if info.state.subjects else 0


async def first_revision(kv, timeout_s: float = 10.0) -> int:
    """The revision of the model's snapshot once the router has written one."""

    async def revision() -> int | None:
        try:
            return (await kv.get(subjects.kv_key(MODEL))).revision
        except nats.js.errors.KeyNotFoundError:
            return None

    return await waits.until(revision, timeout_s=timeout_s, what="the router's first snapshot in the KV bucket")


async def test_only_operators_publish_overrides_and_only_the_judge_publishes_decisions(secured):
    """backend, prober and router users cannot put an override or a decision into the log; operator can."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router", "judge"], passwords=infra.passwords):
        client = IgnoreListClient(infra.nats_url, MODEL, user="backend", password=infra.passwords["backend"])
        await client.start()
        assert await client.wait_ready(10)
        first_version = client.version

        for user in ("backend", "prober", "router"):
            nc = await connect(infra, user)
            js = nc.jetstream()
            for subject, message in ((subjects.ops("override-add"), override("x/fp8", f"c-{user}")),
                                     (subjects.decision(MODEL, "x/fp8"), suspend("x/fp8"))):
                if user == "router" and subject.startswith("canary.decisions"):
                    pass  # the router may not publish decisions either: checked below with the rest
                # refused: no acknowledgement comes (0.5 s is ample for one let in; stored_on below says none was)
                with pytest.raises((nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError,
                                    nats.errors.NoRespondersError)):
                    await js.publish(subject, codec.encode(message), timeout=0.5)
            await nc.close()

        admin = await connect(infra, "admin")
        js = admin.jetstream()
        assert await stored_on(js, subjects.ops("override-add")) == 0
        assert await stored_on(js, subjects.decision(MODEL, "x/fp8")) == 0
        await waits.holds(lambda: client.version == first_version and client.ignore() == [], for_s=0.5,
                          what="the client's first version, nothing ignored")
        assert client.version == first_version and client.ignore() == []

        # the operator's credential is the one that works
        op = await connect(infra, "operator")
        await op.jetstream().publish(subjects.ops("override-add"), codec.encode(override("y/fp8", "c-op")),
                                     headers={"Nats-Msg-Id": "c-op"})
        await waits.until(lambda: client.ignore() == ["y/fp8"], timeout_s=10, what="the operator's override at the client")
        assert client.version == first_version + 1
        await op.close()
        await client.stop()

        log = infra.nats_log.read_text()
        assert 'user:backend" - Publish Violation - Subject "canary.ops.override-add"' in log
        assert 'user:prober" - Publish Violation - Subject "canary.decisions.' in log
        await admin.close()


async def test_unauthenticated_clients_are_refused_and_change_nothing(secured):
    """No credential, or a wrong password: the server refuses the connection and logs it."""
    infra = secured
    await ensure_streams(settings_for(infra))
    for kwargs in ({}, {"user": "operator", "password": "wrong"}):
        with pytest.raises((NoServersError, nats.errors.Error)):
            await nats.connect(infra.nats_url, max_reconnect_attempts=0, connect_timeout=2, allow_reconnect=False,
                               **kwargs)
    admin = await connect(infra, "admin")
    assert await stored_on(admin.jetstream(), subjects.ALL_OPS) == 0
    await admin.close()
    assert "authentication error" in infra.nats_log.read_text() or "Authorization Violation" in infra.nats_log.read_text()


async def test_a_malformed_command_changes_nothing_and_is_dead_lettered_with_its_reason(secured):
    """An operator's override without a reason, or garbage, is refused (dead letter), the snapshot stays."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        admin = await connect(infra, "admin")
        letters = []

        async def on_letter(msg):
            letters.append(codec.DEAD_LETTER.decode(msg.data))

        await admin.subscribe(subjects.deadletter("router"), cb=on_letter)
        kv = await admin.jetstream().key_value("canary-routing")
        before = await first_revision(kv)

        op = await connect(infra, "operator")
        js = op.jetstream()
        no_reason = codec.encode(override("z/fp8", "c1")).replace(b'"reason":"incident 4711"', b'"reason":""')
        await js.publish(subjects.ops("override-add"), no_reason, headers={"Nats-Msg-Id": "c1"})
        await js.publish(subjects.ops("override-add"), b"{not json", headers={"Nats-Msg-Id": "c2"})
        blank = codec.encode(override("z/fp8", "c3")).replace(b'"reason":"incident 4711"', b'"reason":" \\t "')
        await js.publish(subjects.ops("override-add"), blank, headers={"Nats-Msg-Id": "c3"})
        await waits.until(lambda: len(letters) >= 3, timeout_s=10, what="three dead letters from the router")
        assert sorted(letter.reason for letter in letters) == ["undecodable"] * 3
        assert sum("$.reason" in letter.error for letter in letters) == 2
        assert (await kv.get(subjects.kv_key(MODEL))).revision == before
        await op.close()
        await admin.close()


async def test_a_command_dressed_as_another_message_is_refused(secured):
    """A prober's lift on a results subject, a judge's override on a decisions subject: refused, nothing changes."""
    from reverie_canary.shared.contract.commands import LiftSuspension, SetMode

    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router", "judge"], passwords=infra.passwords):
        admin = await connect(infra, "admin")
        letters = []

        async def on_letter(msg):
            letters.append(codec.DEAD_LETTER.decode(msg.data))

        await admin.subscribe(subjects.ALL_DEADLETTER, cb=on_letter)
        kv = await admin.jetstream().key_value("canary-routing")
        before = await first_revision(kv)
        now = datetime.now(timezone.utc)
        forged = [
            ("prober", subjects.result(MODEL, "x/fp8"),
             LiftSuspension(command_id="f1", actor="mallory", at=now, provider="x/fp8", model=MODEL, reason="forged")),
            ("prober", subjects.result(MODEL, "x/fp8"),
             SetMode(command_id="f2", actor="mallory", at=now, mode="observe", model="*", reason="forged")),
            ("judge", subjects.decision(MODEL, "x/fp8"), override("fireworks", "f3", reason="forged")),
        ]
        for user, subject, message in forged:
            nc = await connect(infra, user)
            await nc.jetstream().publish(subject, codec.encode(message), headers={"Nats-Msg-Id": message.command_id})
            await nc.close()
        # the judge and the router each refuse what reaches them
        await waits.until(lambda: len([dl for dl in letters if dl.reason == "rejected"]) >= 3, timeout_s=10,
                          what="three rejected dead letters (judge and router)")
        assert all("may arrive there" in dl.error for dl in letters if dl.reason == "rejected")

        async def unchanged() -> bool:
            return (await kv.get(subjects.kv_key(MODEL))).revision == before

        await waits.holds(unchanged, for_s=0.5, what="the snapshot revision before the forged messages")
        assert (await kv.get(subjects.kv_key(MODEL))).revision == before
        await admin.close()


async def test_the_dashboard_user_reads_the_log_and_the_bucket_and_publishes_nothing(secured):
    """dashboard: status, the bucket's history and live subjects are readable; every canary.* publish is refused."""
    from reverie_canary.services.dashboard.sources import FleetReader

    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        admin = await connect(infra, "admin")
        await first_revision(await admin.jetstream().key_value("canary-routing"))
        async with FleetReader(settings_for(infra, "dashboard")) as reader:
            await reader.follow()
            fleet = await reader.status()
            history = await reader.snapshot_history(MODEL)
            logged = [m.version for m in reader.window.models[MODEL].snapshots]
        assert fleet.models[0].ignore_list.version == history[-1].version >= 1
        assert logged and logged[-1] == history[-1].version  # the log was read too, not only the bucket
        nc = await connect(infra, "dashboard")
        live = await nc.subscribe(subjects.ALL_ROUTING)  # subscribe-only: live subjects are readable
        js = nc.jetstream()
        for subject, message in ((subjects.ops("override-add"), override("x/fp8", "c-dash")),
                                 (subjects.decision(MODEL, "x/fp8"), suspend("x/fp8"))):
            with pytest.raises((nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError,
                                nats.errors.NoRespondersError)):
                await js.publish(subject, codec.encode(message), timeout=0.5)
        await live.unsubscribe()
        await nc.close()
        assert await stored_on(admin.jetstream(), subjects.ops("override-add")) == 0
        await admin.close()
    log = infra.nats_log.read_text()
    assert 'user:dashboard" - Publish Violation - Subject "canary.ops.override-add"' in log
    assert 'user:dashboard" - Publish Violation - Subject "canary.decisions.' in log
