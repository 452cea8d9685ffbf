"""A reader whose credential cannot take messages from the log is told so, never handed an empty log."""

from __future__ import annotations

from datetime import datetime, timezone

import nats
import pytest

from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.commands import AddOverride
from reverie_canary.shared.runtime.eventlog import LogUnreadable, scan_log
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from tests.conftest import servers

pytestmark = pytest.mark.integration

#: The dashboard's read permissions of shared/nats/server.conf without $JS.API.CONSUMER.MSG.NEXT.
CONFIG = """
accounts: { CANARY: { jetstream: enabled, users: [
  { user: admin, password: admin-pw }
  { user: reader, password: reader-pw, permissions: {
      publish: { allow: ["$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.CONSUMER.CREATE.>",
                         "$JS.API.CONSUMER.INFO.>", "$JS.API.CONSUMER.DELETE.>", "$JS.FC.>"] }
      subscribe: { allow: ["_INBOX.>"] } } }
] } }
"""


async def test_a_reader_without_next_message_permission_gets_an_error_not_an_empty_log(tmp_path):
    conf = tmp_path / "reader.conf"
    conf.write_text(CONFIG)  # start_nats adds the JetStream store
    with servers(tmp_path, conf) as (nats_url, redis_url):
        admin = Settings.load(env={}, nats_url=nats_url, redis_url=redis_url, nats_user="admin", nats_password="admin-pw")
        await ensure_streams(admin)
        nc = await nats.connect(nats_url, user="admin", password="admin-pw")
        js = nc.jetstream()
        cmd = AddOverride(command_id="ov-1", actor="alice", at=datetime.now(timezone.utc), provider="a/fp8",
                          model="acme/chat-1", reason="incident")
        await js.publish(subjects.ops("override-add"), codec.encode(cmd))
        seen: list = []
        assert await scan_log(js, seen.append, idle_s=1.0) >= 1 and len(seen) == 1  # admin reads it
        await nc.close()

        async def quiet(_exc: Exception) -> None:
            return None

        reader = await nats.connect(nats_url, user="reader", password="reader-pw", error_cb=quiet)
        try:
            with pytest.raises(LogUnreadable, match=r"1 event\(s\) for this reader.*CONSUMER\.MSG\.NEXT"):
                await scan_log(reader.jetstream(), seen.append, idle_s=1.0)
        finally:
            await reader.close()
        assert len(seen) == 1
