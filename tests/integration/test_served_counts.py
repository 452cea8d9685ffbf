"""A chat backend's served-by counts: published with the backend credential, kept by the log, shown by the look-back."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import nats
import pytest

from reverie_canary.client import IgnoreListClient
from reverie_canary.services.dashboard.sources import FleetReader
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
                await reader.follow()
                mw = reader.window.models.get(MODEL)
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
