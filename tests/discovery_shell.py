"""A Discovery on a real NATS and Redis without its cycle loop: the tests call its steps themselves."""

from __future__ import annotations

from reverie_canary.services.discovery.service import Discovery
from reverie_canary.services.discovery.store import RedisDiscoveryStore
from reverie_canary.shared.runtime.openrouter import make_client
from reverie_canary.shared.runtime.service import Shell, ensure_streams, redis_client
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator import SIMULATED_KEY


async def open_discovery(infra, gateway_url: str, models: list[str], *, cycle_interval_s: float,
                         probe_window_s: float) -> Discovery:
    """A connected Discovery for ``models`` at ``gateway_url`` (streams ensured; the simulated gateway's key).

    Close it with :func:`close_discovery`.
    """
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=models, openrouter_base_url=gateway_url, openrouter_api_key=SIMULATED_KEY,
                             cycle_interval_s=cycle_interval_s, probe_window_s=probe_window_s)
    await ensure_streams(settings)
    shell = Shell("discovery", settings)
    await shell.broker.connect()
    discovery = Discovery(shell)
    discovery.client = make_client(settings, timeout_s=2.0)
    discovery.store = RedisDiscoveryStore(redis_client(settings), settings.namespace)
    return discovery


async def close_discovery(discovery: Discovery) -> None:
    """Close what :func:`open_discovery` opened."""
    await discovery.client.aclose()
    await discovery.store.client.aclose()
    await discovery.shell.broker.stop()
