"""The task consumer's ack_wait follows the probe window, not the request timeout."""

from __future__ import annotations

import pytest

from reverie_canary.shared.runtime import streams
from reverie_canary.shared.runtime.settings import Settings


@pytest.mark.parametrize(("window_s", "interval_s", "ack_wait_s"), [
    (14.0, 20.0, 2.0),      # the getting-started page's short cycles: an eighth is 1.75 s, at least 2 s
    (80.0, 120.0, 10.0),    # an eighth of the window
    (600.0, 1800.0, 30.0),  # the default window: at most 30 s
])
def test_ack_wait_is_an_eighth_of_the_window_between_2_and_30_s(window_s, interval_s, ack_wait_s):
    """ack_wait scales with the window and ignores the 60 s request timeout; heartbeats come four times per ack_wait."""
    settings = Settings.load(env={}, probe_window_s=window_s, cycle_interval_s=interval_s, request_timeout_s=60.0)
    spec = streams.prober_consumer(settings)
    assert spec.ack_wait_s == ack_wait_s
    assert streams.task_heartbeat_s(settings) == ack_wait_s / 4


def test_an_explicit_task_ack_wait_wins():
    """CANARY_TASK_ACK_WAIT_S overrides the derived value."""
    settings = Settings.load(env={"CANARY_TASK_ACK_WAIT_S": "8"})
    assert streams.prober_consumer(settings).ack_wait_s == 8.0
    assert streams.task_heartbeat_s(settings) == 2.0
