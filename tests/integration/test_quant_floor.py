"""``canary quant-floor`` against real NATS and Redis: the command, the router's answer, the snapshot, the client.

docs/concepts/routing.md, "The quantization floor".  The command runs as a subprocess with the
operator's credential (as ``tests/integration/test_ops_cli.py`` does for overrides and modes);
the router runs in-process; a chat backend's ``IgnoreListClient`` follows the bucket with the
backend's credential.
"""

from __future__ import annotations

from datetime import datetime, timezone

import msgspec
import pytest

from reverie_canary.canary.runtime import running
from reverie_canary.client import IgnoreListClient
from reverie_canary.shared.contract import codec, quantization, subjects
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.streams import LOG, ROUTING_BUCKET
from tests import waits
from tests.integration.test_ops_cli import MODEL, _answers_of, _has_snapshot, admin_js, canary, settings_for
from tests.judge_events import cycle_events, healthy, publish_events

#: The listing: two hosts the floor keeps, one it denies, one that declares nothing.
FLEET = {"a/fp8": "fp8", "b/bf16": "bf16", "c/fp4": "fp4", "e": None}


async def list_fleet(infra) -> None:
    """Publish (as admin) discovery's listing of FLEET for MODEL, each endpoint with its quantization."""
    discovered = cycle_events(0, healthy(*FLEET), model=MODEL, start=datetime.now(timezone.utc))[0]
    endpoints = [msgspec.structs.replace(e, quantization=FLEET[e.provider]) for e in discovered.endpoints]
    nc, js = await admin_js(infra)
    try:
        await publish_events(js, [msgspec.structs.replace(discovered, endpoints=endpoints)])
    finally:
        await nc.close()


async def snapshot(infra):
    nc, js = await admin_js(infra)
    try:
        entry = await (await js.key_value(ROUTING_BUCKET)).get(subjects.kv_key(MODEL))
        return codec.SNAPSHOT.decode(entry.value)
    finally:
        await nc.close()


@pytest.mark.integration
async def test_quant_floor_round_trip_reaches_the_snapshot_and_the_client(secured):
    """--deny fp4: answered by the router (allow-list, hosts left out, the undeclared one named), written to the
    bucket, handed to the backend's client; an override that breaks the capacity floor brings fp4 back; --clear ends it."""
    infra = secured
    await ensure_streams(settings_for(infra))
    client = IgnoreListClient(infra.nats_url, MODEL, user="backend", password=infra.passwords["backend"])
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        await waits.until(lambda: _has_snapshot(infra), timeout_s=10, what="the router's first snapshot")
        await list_fleet(infra)
        await client.start()
        try:
            assert await client.wait_ready(10)
            before = (await snapshot(infra)).version

            code, out, err = await canary(infra, "quant-floor", MODEL, "--deny", "fp4", "--reason", "drifts in pt")
            assert code == 0, err
            allow = quantization.allowed(["fp4"])
            made = await snapshot(infra)
            assert (made.version, made.quantizations, made.ignore) == (before + 1, allow, [])
            lines = out.splitlines()
            assert lines[0] == f"quantization floor on {MODEL} denies fp4: drifts in pt (alice)"
            assert lines[1] == (f"  denies fp4; {MODEL}: quantizations {', '.join(allow)}: 2 usable host(s) kept "
                                "(a/fp8, b/bf16)")
            assert lines[2] == f"  snapshot v{made.version}: quantizations {', '.join(allow)}; ignore []"
            assert err.splitlines() == [
                f"warning: the allow-list leaves out 2 usable host(s) of {MODEL}: c/fp4 (fp4), e (undeclared)",
                "warning: 1 of them declare no quantization (e): an allow-list drops every endpoint that declares "
                "none"]

            # the command is on the log under its own id, and answered once by the router
            nc, js = await admin_js(infra)
            stored = await js.get_last_msg(LOG, subjects.ops("quant-floor"))
            await nc.close()
            command = codec.COMMAND.decode(stored.data)
            assert stored.headers["Nats-Msg-Id"] == command.command_id and command.deny == ["fp4"]
            [(msg_id, subject, answer)] = await _answers_of(infra, command.command_id)
            assert (msg_id, subject) == (f"answer|{command.command_id}", subjects.answer("router", command.command_id))
            assert answer.snapshots[0].quantizations == allow

            # the chat backend's client hands the allow-list over with the ignore list
            await waits.until(lambda: client.version == made.version, timeout_s=10, what="the client to follow")
            assert client.provider({"sort": "price"}) == {"sort": "price", "ignore": [], "quantizations": allow}

            # a/fp8 overridden: b/bf16 alone is allowed, below the capacity floor: fp4 comes back
            code, out, err = await canary(infra, "override", "add", "a/fp8", "--reason", "incident 9", "--model", MODEL)
            assert code == 0, err
            relaxed = await snapshot(infra)
            assert relaxed.ignore == ["a/fp8"]
            assert relaxed.quantizations == quantization.allowed([])  # fp4 back, with mxfp4 and nvfp4
            await waits.until(lambda: client.version == relaxed.version, timeout_s=10, what="the client to follow")
            assert client.provider()["quantizations"] == relaxed.quantizations

            code, out, err = await canary(infra, "quant-floor", MODEL, "--clear", "--reason", "fixed upstream")
            assert code == 0, err
            cleared = await snapshot(infra)
            assert cleared.quantizations == [] and cleared.version == relaxed.version + 1
            assert f"  snapshot v{cleared.version}: quantizations none (every quantization routed); " \
                   'ignore ["a/fp8"]' in out.splitlines()
            await waits.until(lambda: client.version == cleared.version, timeout_s=10, what="the client to follow")
            assert "quantizations" not in client.provider()
        finally:
            await client.stop()


@pytest.mark.integration
async def test_a_floor_the_router_cannot_apply_is_refused_and_a_bad_one_never_sent(secured):
    """A model the router does not watch: refused by the router (exit 1); mxfp8 alone: refused offline (exit 2)."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        await waits.until(lambda: _has_snapshot(infra), timeout_s=10, what="the router's first snapshot")
        version = (await snapshot(infra)).version
        code, out, err = await canary(infra, "quant-floor", "typo/model", "--min", "fp8", "--reason", "x")
        assert code == 1 and out == ""
        assert "the router refused command" in err and "not a watched model" in err
        code, out, err = await canary(infra, "quant-floor", MODEL, "--deny", "mxfp8", "--reason", "x")
        assert code == 2
        assert err == "error: mxfp8 cannot be denied alone: the gateway's fp8 admits mxfp8 too; deny fp8 to drop both\n"
        code, out, err = await canary(infra, "quant-floor", MODEL, "--clear", "--reason", "nothing to clear")
        assert code == 1 and f"rejected: no quantization floor on {MODEL} to clear" in err
        assert (await snapshot(infra)).version == version
