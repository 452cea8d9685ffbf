"""A cycle discovery cannot plan is a fact on the log, with its cause (docs/concepts/health.md)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from reverie_canary.services.discovery.core import cycle_start
from reverie_canary.services.discovery.service import Discovery
from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract.events import CycleUnplanned, EndpointsDiscovered
from reverie_canary.shared.runtime.service import Shell
from reverie_canary.simulator.faults import Front
from reverie_canary.simulator.gateway import create_app as create_gateway
from reverie_canary.simulator.scenario import load_scenario
from reverie_canary.simulator.server import serve
from tests.discovery_shell import close_discovery, open_discovery

pytestmark = pytest.mark.integration


async def _logged(shell: Shell) -> list:
    from reverie_canary.shared.runtime.eventlog import read_log

    return [e.event for e in await read_log(shell.broker.connection.jetstream(), idle_s=0.5)]


async def _discovery(infra, gateway_url: str, model: str) -> Discovery:
    return await open_discovery(infra, gateway_url, [model], cycle_interval_s=3600.0, probe_window_s=600.0)


_close = close_discovery


@pytest.mark.parametrize("status, cause", [(401, "gateway_auth"), (402, "gateway_credit"), (403, "gateway_forbidden")])
async def test_a_refused_key_makes_the_cycle_unplanned_at_once(infra, status, cause):
    """The listing answers 401/402/403: one CycleUnplanned with the cause and status, no retry, no plan."""
    scenario = load_scenario("default")
    model = scenario.models[0].id
    app = create_gateway(scenario)
    async with serve(app) as url:
        app.state.gateway.outage = status
        discovery = await _discovery(infra, url, model)
        try:
            started = time.monotonic()
            n = ids.cycle_no(time.time(), 3600.0)
            planned = await discovery.plan_cycle(model, n, deadline_epoch=time.time() + 30)
            assert planned is False and time.monotonic() - started < 5  # not retried until the deadline
            logged = await _logged(discovery.shell)
        finally:
            await _close(discovery)
    unplanned = [e for e in logged if isinstance(e, CycleUnplanned)]
    assert [(e.cycle_no, e.cause, e.http_status, e.attempts) for e in unplanned] == [(n, cause, status, 1)]
    assert unplanned[0].cycle == ids.cycle_id(model, cycle_start(n, 3600.0))
    assert unplanned[0].deadline == cycle_start(n, 3600.0) + timedelta(seconds=600)
    assert not any(isinstance(e, EndpointsDiscovered) for e in logged)


async def test_an_unreachable_gateway_is_retried_until_the_deadline_then_unplanned(infra):
    """Connections refused: retried until the deadline, then one CycleUnplanned gateway_unreachable."""
    scenario = load_scenario("default")
    model = scenario.models[0].id
    async with serve(create_gateway(scenario)) as url:
        host, port = httpx.URL(url).host, httpx.URL(url).port
        front = Front(host, port)
        await front.up()
        await front.down()  # nothing listens on the front's port now
        discovery = await _discovery(infra, f"http://127.0.0.1:{front.port}/api/v1", model)
        try:
            started = time.monotonic()
            n = ids.cycle_no(time.time(), 3600.0)
            assert await discovery.plan_cycle(model, n, deadline_epoch=time.time() + 1.5) is False
            waited = time.monotonic() - started
            logged = await _logged(discovery.shell)
            # the same front up again: the next cycle is planned through it
            await front.up()
            assert await discovery.plan_cycle(model, n + 1, deadline_epoch=time.time() + 10) is True
            after = await _logged(discovery.shell)
        finally:
            await front.down()
            await _close(discovery)
    unplanned = [e for e in logged if isinstance(e, CycleUnplanned)]
    assert [(e.cycle_no, e.cause, e.http_status) for e in unplanned] == [(n, "gateway_unreachable", None)]
    assert unplanned[0].attempts >= 2 and 1.4 <= waited < 5
    assert [e.cycle_no for e in after if isinstance(e, EndpointsDiscovered)] == [n + 1]


async def test_a_listing_with_bad_entries_is_planned_for_the_good_ones_and_says_what_it_dropped(infra):
    """A real shape with one fault per entry (it used to be ``listing_unparseable``): planned, the dropped named."""
    body = (Path(__file__).resolve().parents[1] / "data" / "listings" / "one_bad_entry.json").read_bytes()
    app = Starlette(routes=[Route("/api/v1/models/{author}/{slug}/endpoints",
                                  lambda request: Response(body, media_type="application/json"))])
    model = "acme/chat-1"
    async with serve(app) as url:
        discovery = await _discovery(infra, url, model)
        try:
            n = ids.cycle_no(time.time(), 3600.0)
            assert await discovery.plan_cycle(model, n, deadline_epoch=time.time() + 10) is True
            logged = await _logged(discovery.shell)
            counted = {reason: discovery.shell.metrics.sample_value(
                "canary_listing_endpoints_dropped_total", model=model, reason=reason)
                for reason in ("no_tag", "bad_tag", "duplicate_tag", "not_an_object")}
        finally:
            await _close(discovery)
    assert not any(isinstance(e, CycleUnplanned) for e in logged)
    (plan,) = [e for e in logged if isinstance(e, EndpointsDiscovered)]
    assert [e.provider for e in plan.endpoints] == ["deepinfra/fp8", "lambda/fp8", "novita", "parasail/fp8",
                                                    "together"]
    assert [(d.index, d.reason) for d in plan.dropped] == [(2, "no_tag"), (5, "bad_tag"), (6, "duplicate_tag"),
                                                           (7, "not_an_object")]
    assert {p.provider for p in plan.planned} == {e.provider for e in plan.endpoints}
    assert counted == {"no_tag": 1.0, "bad_tag": 1.0, "duplicate_tag": 1.0, "not_an_object": 1.0}
