"""Every stream has an age and a byte limit and S2 compression, on a real server."""

from __future__ import annotations

import nats
import pytest
from nats.js.api import StoreCompression
from structlog.testing import capture_logs

from reverie_canary.shared.runtime import streams
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import GIB, Settings

pytestmark = pytest.mark.integration

ALL = (streams.LOG, streams.TASKS, streams.DEADLETTER, streams.NOTICES)


async def configs(url: str) -> dict:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        out = {name: (await js.stream_info(name)).config for name in ALL}
        out["kv"] = (await js.stream_info(f"KV_{streams.ROUTING_BUCKET}")).config
        return out
    finally:
        await nc.close()


async def test_every_stream_is_created_with_an_age_a_byte_limit_and_s2(infra):
    """Defaults: the log keeps 35 days and 24 GiB, compressed with S2; the others are bounded too."""
    await ensure_streams(Settings.load(env={}, nats_url=infra.nats_url))
    got = await configs(infra.nats_url)
    assert (got[streams.LOG].max_age, got[streams.LOG].max_bytes) == (35 * 86400.0, 24 * GIB)
    assert (got[streams.TASKS].max_bytes, got[streams.DEADLETTER].max_bytes) == (GIB, GIB)
    for name in ALL:
        assert got[name].compression == StoreCompression.S2, name
        assert got[name].max_age > 0 and got[name].max_bytes > 0, name
        assert got[name].num_replicas == 1
    assert got["kv"].max_bytes == streams.ROUTING_MAX_BYTES


async def test_changed_limits_and_compression_are_applied_to_existing_streams(infra):
    """An operator who changes the limits or turns compression off gets them on the next start, without losing data."""
    await ensure_streams(Settings.load(env={}, nats_url=infra.nats_url))
    nc = await nats.connect(infra.nats_url)
    await nc.jetstream().publish("canary.results.a.b", b"{}", headers={"Nats-Msg-Id": "kept"})
    await nc.close()
    await ensure_streams(Settings.load(env={}, nats_url=infra.nats_url, log_max_bytes=2 * GIB,
                                       log_max_age_s=7 * 86400.0, stream_compression="none"))
    got = await configs(infra.nats_url)
    assert (got[streams.LOG].max_bytes, got[streams.LOG].max_age) == (2 * GIB, 7 * 86400.0)
    assert got[streams.LOG].compression == StoreCompression.NONE
    nc = await nats.connect(infra.nats_url)
    assert (await nc.jetstream().stream_info(streams.LOG)).state.messages == 1
    await nc.close()


async def test_a_byte_limit_the_server_cannot_reserve_is_lowered_and_said(infra):
    """1 PiB of log on a small disk: the stream is created with what the server can reserve, and a warning says so."""
    get_logger("test")
    with capture_logs() as logs:
        await ensure_streams(Settings.load(env={}, nats_url=infra.nats_url, log_max_bytes=2 ** 50))
    got = await configs(infra.nats_url)
    assert streams.MIN_RESERVED_BYTES <= got[streams.LOG].max_bytes < 2 ** 50
    (lowered,) = [e for e in logs if e.get("event") == "stream_byte_limit_lowered"]
    assert (lowered["stream"], lowered["wanted_bytes"], lowered["reserved_bytes"]) == (
        streams.LOG, 2 ** 50, got[streams.LOG].max_bytes)


def test_settings_refuse_a_compression_or_replica_count_jetstream_has_not():
    """stream_compression is s2 or none; stream_replicas 1, 3 or 5; byte limits have a floor."""
    from reverie_canary.shared.contract.errors import ConfigError

    for bad in ({"stream_compression": "zstd"}, {"stream_replicas": 2}, {"log_max_bytes": 1000}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            Settings.load(env={}, **bad)
