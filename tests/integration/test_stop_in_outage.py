"""Ctrl-C during a NATS outage: ``canary run`` and ``canary demo`` stop in one line, no traceback, in bounded time.

Real processes, as an operator runs them: a real NATS that is stopped under a running
service (or under the demo's own embedded one), then SIGINT.  nats-py refuses to drain a
connection that is reconnecting; the stop used to end in a ``service_stop_failed``
traceback per service (and, in the demo, the summary's read of NATS in another).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from tests import waits
from tests.integration.test_connections import servers  # noqa: F401  (the fixture: NATS a test can stop)

pytestmark = pytest.mark.integration

CANARY = str(Path(sys.executable).parent / "canary")
#: Seconds a SIGINT may take to end the process during the outage (the stop closes, it does not wait for NATS).
STOP_BOUND_S = 20.0


def run_env(settings: Settings) -> dict[str, str]:
    """The environment a ``canary`` process reads ``settings`` back from (no inherited CANARY_* setting)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANARY_", "NATS_", "REDIS_", "OPENROUTER_"))}
    return {**env, **settings.environment(with_secrets=True)}


def children_named(parent: int, name: bytes) -> list[int]:
    """The processes whose parent is ``parent`` and whose command line holds ``name`` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if ppid == parent and name in (stat.parent / "cmdline").read_bytes():
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):  # a process that ended while it was read
            continue
    return found


async def lines_until(stream: asyncio.StreamReader, seen: list[str], event: str, timeout_s: float) -> None:
    """Read JSON log lines into ``seen`` until one says ``event``."""
    async def read() -> None:
        while True:
            raw = await stream.readline()
            assert raw, f"the process ended before saying {event}: {seen[-5:]}"
            seen.append(raw.decode(errors="replace"))
            with_event = seen[-1].strip().startswith("{") and json.loads(seen[-1]).get("event") == event
            if with_event:
                return
    await waits.within(read(), timeout_s=timeout_s, what=f"the process to say {event}")


@pytest.mark.parametrize("service", ["judge", "prober"])
async def test_sigint_to_canary_run_during_a_nats_outage_stops_in_one_line(servers, service):  # noqa: F811
    """NATS stopped under ``canary run``, then SIGINT: exit 0 within the bound, one stop line, no traceback."""
    settings = servers.settings(metrics_port=-1, log_format="json", log_level="INFO")
    await ensure_streams(settings)
    proc = await asyncio.create_subprocess_exec(CANARY, "run", service, env=run_env(settings),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    seen: list[str] = []
    try:
        await lines_until(proc.stderr, seen, "started", 60)
        servers.nats.stop()
        await lines_until(proc.stderr, seen, "nats_disconnected", 20)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest = await waits.within(proc.stderr.read(), timeout_s=STOP_BOUND_S, what=f"canary run {service} to stop")
        await waits.within(proc.wait(), timeout_s=5, what="the process to exit")
        took = time.monotonic() - sent
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    stderr = "".join(seen) + rest.decode(errors="replace")
    assert "Traceback" not in stderr, stderr[-3000:]
    assert proc.returncode == 0 and took < STOP_BOUND_S
    stops = [json.loads(line) for line in rest.decode().splitlines() if line.startswith("{")]
    assert [e["event"] for e in stops if e["level"] == "error" or e["event"] == "service_stop_failed"] == []
    (closed,) = [e for e in stops if e["event"] == "nats_closed_undrained"]
    assert closed["service"] == service and "NATS unreachable at the stop" in closed["why"]


async def test_sigint_to_canary_demo_during_a_nats_outage_stops_in_one_line():
    """The demo's embedded NATS killed, then SIGINT: exit 130 within the bound, one line instead of the summary."""
    proc = await asyncio.create_subprocess_exec(CANARY, "demo", "--cycles", "50", "--rpm", "0",
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async def first_cycle() -> None:
            while b"-- cycle 1 " not in (line := await proc.stdout.readline()):
                assert line, "the demo ended before its first cycle"
        await waits.within(first_cycle(), timeout_s=120, what="the demo's first cycle")
        nats = children_named(proc.pid, b"nats-server")
        assert len(nats) == 1, nats
        os.kill(nats[0], signal.SIGKILL)
        await asyncio.sleep(2.0)  # the services see the outage
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = await waits.within(proc.communicate(), timeout_s=STOP_BOUND_S, what="canary demo to stop")
        took = time.monotonic() - sent
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert "Traceback" not in err.decode(), err.decode()[-3000:]
    assert proc.returncode == 130 and took < STOP_BOUND_S
    assert "canary demo: stopped without a summary: " in out.decode()
    assert "== summary" not in out.decode() and "error:" not in err.decode()
