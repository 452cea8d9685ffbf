"""``canary demo --keep`` after NATS restarts: it keeps printing cycles, and says the outage once.

The demo's embedded NATS is stopped for longer than a few reconnection attempts (the
demo's own connection used to give up after three and go quiet while the services
recovered), then started again on its port with its store, as an operator restarts it.
"""

from __future__ import annotations

import asyncio
import io

import pytest

from reverie_canary.canary.demo import pipeline

pytestmark = pytest.mark.integration

#: How long NATS stays down (s): longer than nats-py's three reconnection attempts of 2 s.
OUTAGE_S = 8.0


async def test_after_a_nats_restart_the_demo_keeps_printing_cycles_and_says_so_once(tmp_path):
    """Two cycles, NATS down for 8 s and back: two more cycles are printed; 'lost' and 'back' once each."""
    out = io.StringIO()
    async with pipeline(workdir=tmp_path, out=out) as p:
        assert await p.wait_cycles(2), out.getvalue()[-2000:]
        await asyncio.to_thread(p.nats_server.stop)
        await asyncio.sleep(OUTAGE_S)
        await asyncio.to_thread(p.nats_server.start_again)
        seen = len(p.observer.cycles)
        assert await p.wait_cycles(seen + 2), out.getvalue()[-3000:]
    text = out.getvalue()
    assert text.count("the connection to NATS was lost") == 1, text[-3000:]
    assert text.count("NATS is back after") == 1, text[-3000:]
    after = text.split("NATS is back after", 1)[1]
    assert after.count("-- cycle ") >= 2, after
