"""A chat backend's served-by counts: published with the backend credential, kept by the log, shown by the look-back."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import msgspec
import nats
import pytest

from reverie_canary.client import IgnoreListClient
from reverie_canary.services.dashboard.sources import REFRESH_ON, FleetReader
from reverie_canary.services.dashboard.web import read_lookback
from reverie_canary.shared.contract import subjects
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.streams import LOG
from tests import waits
from tests.integration.test_authorization import MODEL, settings_for

pytestmark = pytest.mark.integration


async def test_the_backends_counts_reach_the_log_and_the_look_back_without_any_text(secured):
    """record_served x3, publish every second as user backend: the dashboard user reads the counts back."""
    infra = secured
    await ensure_streams(settings_for(infra))
    client = IgnoreListClient(infra.nats_url, MODEL, user="backend", password=infra.passwords["backend"],
                              publish_served_s=1.0, source="chat-1")
    await client.start()
    try:
        for provider in ("DeepInfra", "DeepInfra", "Fireworks"):
            client.record_served({"provider": provider, "model": MODEL,
                                  "choices": [{"message": {"content": "uma conversa privada"}}]})

        async def published() -> list:
            async with FleetReader(settings_for(infra, "dashboard"), idle_s=0.5) as reader:
                kept = await reader.follow()
                mw = reader.window.models.get(MODEL)
                # folded into the window, not kept by the read: only what changes a view comes back
                # (a first read over a day of results must not hold each decoded result until it ends)
                assert [type(e).__name__ for e in kept if type(e).__name__ not in REFRESH_ON] == []
                return list(mw.served) if mw is not None else []

        counts = await waits.until(published, timeout_s=20, what="the backend's ServedCounts in the log",
                                   interval_s=0.5)
    finally:
        await client.stop()
    (one,) = counts
    assert one.counts == {"DeepInfra": 2, "Fireworks": 1} and one.source == "chat-1" and one.model == MODEL
    view = await read_lookback(settings_for(infra, "dashboard"), MODEL, datetime.now(timezone.utc),
                               timedelta(minutes=5).total_seconds())
    assert view.served == {"DeepInfra": 2, "Fireworks": 1}
    admin = await nats.connect(infra.nats_url, user="admin", password=infra.passwords["admin"])
    try:
        raw = await admin.jetstream().get_last_msg(LOG, subjects.served(MODEL))
    finally:
        await admin.close()
    assert b"DeepInfra" in raw.data and b"uma conversa privada" not in raw.data and b"choices" not in raw.data


async def test_the_guards_live_counts_reach_the_log_and_a_refused_period_is_dropped_and_counted(secured):
    """The guard judges replies, the client publishes LiveCounts as backend; a credential that may not: counted drop."""
    from reverie_canary.client import ReplyGuard
    from reverie_canary.client.served import decode_live

    infra = secured
    await ensure_streams(settings_for(infra))

    def judged(guard: ReplyGuard, provider: str, text: str) -> None:
        stream = guard.attempt({"model": MODEL, "stream": True}).stream()
        chunk = {"provider": provider, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
        line = b"data: " + msgspec.json.encode(chunk)
        if stream.line(line) is None:
            stream.finish()

    client = IgnoreListClient(infra.nats_url, MODEL, user="backend", password=infra.passwords["backend"],
                              publish_live_s=10.0, source="chat-1")
    await client.start()
    assert await client.wait_ready(10)
    guard = ReplyGuard(client)
    judged(guard, "DeepInfra", "uma conversa privada sobre o farol")
    judged(guard, "DeepInfra", ": uma conversa privada")
    judged(guard, "Fireworks", "outra conversa privada")
    await client.stop()  # a clean stop publishes the period's counts
    assert (client.live_published, client.live_dropped) == (1, 0)
    admin = await nats.connect(infra.nats_url, user="admin", password=infra.passwords["admin"])
    try:
        raw = await admin.jetstream().get_last_msg(LOG, subjects.live(MODEL))
    finally:
        await admin.close()
    counts = decode_live(raw.data)
    assert {k: (o.replies, o.reasons) for k, o in counts.providers.items()} == {
        "DeepInfra": (2, {"leading_junk": 1}), "Fireworks": (1, {})}
    assert b"conversa" not in raw.data and counts.source == "chat-1"

    # the dashboard's credential may not publish counts: the period is dropped and counted, never queued
    refused = IgnoreListClient(infra.nats_url, MODEL, user="dashboard", password=infra.passwords["dashboard"],
                               publish_live_s=10.0, publish_timeout_s=1.0)
    await refused.start()
    assert await refused.wait_ready(10)
    judged(ReplyGuard(refused), "DeepInfra", "texto")
    await refused._publish_live_once()
    assert (refused.live_published, refused.live_dropped) == (0, 1)
    assert (refused.live.dropped_periods, refused.live.dropped_replies) == (1, 1)
    await refused.stop()
