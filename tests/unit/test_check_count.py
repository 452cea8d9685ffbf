"""Every reply's checks fit the wire's bound, with room for the pin check the prober adds."""

from __future__ import annotations

import pytest

from reverie_canary.client.checks import evaluate
from reverie_canary.client.reply import ProbeSpec, Reply
from reverie_canary.shared.contract.events import MAX_CHECKS, PROBE_KINDS


@pytest.mark.parametrize("kind", PROBE_KINDS)
def test_the_most_checks_of_a_reply_stay_below_the_wire_bound(kind):
    """A slow reply gets the latency check on top of its kind's: still at most MAX_CHECKS - 1 (the pin check is next).

    A ProbeResult above the bound is refused by the judge's strict decoder: the probe is lost (``missing``).
    """
    slow = Reply(http_status=200, text="Hello there, friend. " * 5, finish_reason="stop", timed_out=True,
                 ttft_ms=None)
    for reply in (slow, Reply(http_status=200, text="Paris.", finish_reason="stop", ttft_ms=300.0)):
        assert len(evaluate(reply, ProbeSpec(kind=kind, language="en")).checks) <= MAX_CHECKS - 1
