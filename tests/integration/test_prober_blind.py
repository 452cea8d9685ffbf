"""A probe the gateway refuses for the canary's own key, or cannot carry at all, is blind: never a provider's fault."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import httpx
import pytest

from reverie_canary.services.prober.service import Prober
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.events import ProbeTask
from reverie_canary.shared.runtime.openrouter import make_client
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.faults import Front
from reverie_canary.simulator.gateway import create_app
from reverie_canary.simulator.scenario import load_scenario
from reverie_canary.simulator.server import serve

pytestmark = pytest.mark.integration


async def _probe(url: str, scenario, kind: str = "ttft"):
    model = scenario.models[0]
    endpoint = model.endpoints[0]
    settings = Settings.load(env={}, openrouter_base_url=url, openrouter_api_key=SIMULATED_KEY, ttft_threshold_s=1.0, request_timeout_s=3.0)
    now = datetime.now(timezone.utc)
    task = ProbeTask(at=now, task_id=f"t|{kind}", model=model.id, provider=endpoint.tag,
                     provider_name=endpoint.provider_name, kind=kind, language="en", cycle="c",
                     deadline=now + timedelta(seconds=5))
    async with make_client(settings) as client:
        result = await Prober(settings, client).probe(task)
    assert codec.PROBE_RESULT.decode(codec.encode(result)) == result  # the judge's strict decoder takes it
    return result


@pytest.mark.parametrize("status, reason", [(401, "gateway_auth"), (402, "gateway_credit"), (403, "gateway_forbidden")])
async def test_a_refused_key_is_blind_with_its_reason(status, reason):
    """Every request answered 401/402/403: the result is blind with the status kept as evidence."""
    scenario = load_scenario("default")
    app = create_app(scenario)
    async with serve(app) as url:
        async with httpx.AsyncClient() as c:
            r = await c.put(url.removesuffix("/api/v1") + "/_sim/outage", json={"status": status})
            assert r.status_code == 200 and r.json() == {"status": status, "scope": "all"}
        for kind in ("ttft", "structured"):
            result = await _probe(url, scenario, kind)
            assert (result.outcome, result.reason) == ("blind", reason)
            assert result.reply.http_status == status
        async with httpx.AsyncClient() as c:
            r = await c.put(url.removesuffix("/api/v1") + "/_sim/outage", json={"status": status, "scope": "chat"})
            assert r.json() == {"status": status, "scope": "chat"}
            listing = await c.get(url + f"/models/{scenario.models[0].id}/endpoints")
            assert listing.status_code == 200  # the listing still works, the probes do not
        assert (await _probe(url, scenario)).outcome == "blind"
        async with httpx.AsyncClient() as c:
            await c.put(url.removesuffix("/api/v1") + "/_sim/outage", json={"status": None})
        assert (await _probe(url, scenario)).outcome != "blind"  # the key is served again


async def test_connections_refused_at_the_gateway_are_blind_gateway_unreachable():
    """Nothing listens where the gateway was: blind / gateway_unreachable, not a provider's transport error."""
    scenario = load_scenario("default")
    async with serve(create_app(scenario)) as url:
        front = Front("127.0.0.1", httpx.URL(url).port)
        await front.up()
        await front.down()
        result = await _probe(f"http://127.0.0.1:{front.port}/api/v1", scenario)
    assert (result.outcome, result.reason) == ("blind", "gateway_unreachable")
    assert result.reply.http_status is None
