"""Discovery's retest requests on a real Redis: kept per cycle, capped, and the waiting ones carried on."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from reverie_canary.services.discovery.core import plan, rotation
from reverie_canary.services.discovery.service import Discovery
from reverie_canary.services.discovery.store import RedisDiscoveryStore
from reverie_canary.shared.contract.events import PROBE_KINDS, Endpoint, RetestRequested
from reverie_canary.shared.runtime.service import Shell, redis_client
from reverie_canary.shared.runtime.settings import LANGUAGES, Settings

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"
START = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
ENDPOINTS = [Endpoint(provider="a/fp8", provider_name="A"), Endpoint(provider="b/fp8", provider_name="B")]


async def test_retests_waiting_for_their_turn_move_to_the_next_cycle(infra):
    """Four languages asked for a/fp8, two a cycle: the other two are planned the cycle after, none lost."""
    settings = Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                             models=[MODEL], language_coverage_cycles=17, max_retests_per_cycle=2)
    discovery = Discovery(Shell("discovery", settings))
    discovery.store = RedisDiscoveryStore(redis_client(settings), settings.namespace)
    try:
        n = 40
        rotated = {lang for c in (n, n + 1) for lang in rotation(list(LANGUAGES), 1, c, "a/fp8")}
        asked = [lang for lang in LANGUAGES if lang not in rotated][:4]
        for lang in asked:
            event = RetestRequested(at=START, model=MODEL, provider="a/fp8", language=lang, for_cycle_no=n,
                                    reason="language_switch", source_task_id=f"t-{lang}")
            await discovery.remember_retest(event, None)
            await discovery.remember_retest(event, None)  # redelivery changes nothing
        # a provider no longer listed keeps nothing waiting
        gone = RetestRequested(at=START, model=MODEL, provider="gone/fp8", language="es", for_cycle_no=n,
                               reason="language_switch", source_task_id="t-gone")
        await discovery.remember_retest(gone, None)

        planned: list[str] = []
        for cycle_no in (n, n + 1):
            retests = await discovery._retests(MODEL, cycle_no)
            _, tasks = plan(model=MODEL, cycle_no=cycle_no, start=START, window_s=600, endpoints=ENDPOINTS,
                            kinds=PROBE_KINDS, languages=list(LANGUAGES), language_coverage_cycles=17, controls={},
                            retests=retests, max_retests=settings.max_retests_per_cycle)
            langs = [t.language for t in tasks if t.provider == "a/fp8" and t.kind == "language"]
            assert len(langs) == 3, langs
            planned += langs[1:]
            await discovery._carry_over(MODEL, cycle_no + 1, retests, tasks)
            if cycle_no == n:
                waiting = await discovery._retests(MODEL, n + 1)
                assert sorted(waiting) == sorted(("a/fp8", lang) for lang in asked if lang not in langs[1:])
        assert sorted(planned) == sorted(asked)
        assert await discovery._retests(MODEL, n + 2) == []
    finally:
        await discovery.store.client.aclose()
