"""A discovery stopped or killed mid-cycle: the next one closes that cycle at its deadline (nothing skipped silently).

Before, the cycle's tasks ran but no ``CycleClosed`` ever came: no verdict, no
frozen providers, no word in any log (docs/concepts/health.md).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from reverie_canary.canary.runtime import running
from reverie_canary.services.discovery.core import cycle_start
from reverie_canary.services.discovery.service import Discovery
from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract.events import CycleClosed, EndpointsDiscovered
from reverie_canary.shared.runtime.eventlog import read_log
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.gateway import create_app as create_gateway
from reverie_canary.simulator.scenario import load_scenario
from reverie_canary.simulator.server import serve
from tests import waits
from tests.discovery_shell import close_discovery, open_discovery

pytestmark = pytest.mark.integration

INTERVAL_S, WINDOW_S = 6.0, 4.0


async def _discovery(infra, gateway_url: str, models: list[str]) -> Discovery:
    return await open_discovery(infra, gateway_url, models, cycle_interval_s=INTERVAL_S, probe_window_s=WINDOW_S)


_close = close_discovery


async def _logged(discovery: Discovery) -> list:
    return [e.event for e in await read_log(discovery.shell.broker.connection.jetstream(), idle_s=0.5)]


async def test_a_cycle_left_open_is_closed_once_at_its_deadline_by_the_next_discovery(infra):
    scenario = load_scenario("default")
    model = scenario.models[0].id
    async with serve(create_gateway(scenario)) as url:
        first = await _discovery(infra, url, [model])
        try:
            # a cycle with most of its window ahead, planned and published, then the process gone
            n = ids.cycle_no(time.time(), INTERVAL_S)
            if time.time() - n * INTERVAL_S > 1.0:
                n += 1
                await asyncio.sleep(max(0.0, n * INTERVAL_S - time.time()))
            assert await first.start_cycle(model, n)
        finally:
            await _close(first)
        second = await _discovery(infra, url, [model])
        try:
            assert await second.open_cycles(n + 1) == [(model, n)]
            assert await second.open_cycles(n) == []  # a cycle the new loop runs itself is not its to close
            await waits.within(second.close_open_cycles(n + 1), timeout_s=INTERVAL_S + 10,
                               what=f"cycle {n} closed by the second discovery")
            closed_at = time.time()
            assert await second.open_cycles(n + 1) == []  # closed: a third discovery finds nothing open
            await second.close_open_cycles(n + 1)  # and closing again publishes nothing
            logged = await _logged(second)
        finally:
            await _close(second)
    deadline = cycle_start(n, INTERVAL_S) + timedelta(seconds=WINDOW_S)
    assert closed_at >= deadline.timestamp()  # not before the probes' window ended
    closes = [e for e in logged if isinstance(e, CycleClosed)]
    assert [(e.cycle_no, e.at, e.cycle) for e in closes] == [(n, deadline, ids.cycle_id(model, cycle_start(n, INTERVAL_S)))]
    assert [e.cycle_no for e in logged if isinstance(e, EndpointsDiscovered)] == [n]


async def test_a_model_never_planned_or_already_closed_has_nothing_open(infra):
    scenario = load_scenario("default")
    planned, never = scenario.models[0].id, "acme/never-planned"
    async with serve(create_gateway(scenario)) as url:
        d = await _discovery(infra, url, [planned, never])
        try:
            n = ids.cycle_no(time.time(), INTERVAL_S) - 5  # an old cycle, started and closed
            assert await d.start_cycle(planned, n)
            assert await d.close_cycle(planned, n)
            assert await d.open_cycles(n + 10) == []
        finally:
            await _close(d)


async def test_the_discovery_service_stopped_mid_cycle_and_started_again_closes_that_cycle(infra):
    """The whole service (``canary run discovery`` as the runtime runs it): stopped after a plan, started again."""
    from reverie_canary.shared.contract import codec, subjects
    from reverie_canary.shared.runtime.service import nats_connect

    scenario = load_scenario("default")
    model = scenario.models[0].id
    async with serve(create_gateway(scenario)) as url:
        settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                                 models=[model], openrouter_base_url=url, openrouter_api_key=SIMULATED_KEY,
                                 cycle_interval_s=INTERVAL_S, probe_window_s=WINDOW_S, log_level="WARNING")
        await ensure_streams(settings)
        nc = await nats_connect(settings)
        planned: list[int] = []
        closed: list[int] = []

        async def on_discovery(msg) -> None:
            try:
                e = codec.ENDPOINTS_OR_CLOSE.decode(msg.data)
            except Exception:
                return
            (planned if isinstance(e, EndpointsDiscovered) else closed).append(e.cycle_no)

        await nc.subscribe(subjects.ALL_DISCOVERY, cb=on_discovery)
        async with running(settings, ["discovery"]):
            await waits.until(lambda: planned, timeout_s=INTERVAL_S * 2 + 10, what="a cycle planned")
            n = planned[0]
        assert n not in closed  # stopped before its deadline
        async with running(settings, ["discovery"]):
            await waits.until(lambda: n in closed, timeout_s=INTERVAL_S * 2 + 10,
                              what=f"cycle {n} closed by the discovery started after the stop")
        await nc.close()
    assert closed.count(n) == 1
