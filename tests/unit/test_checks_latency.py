"""Time to first token (docs/concepts/probes.md, the latency contract): content or reasoning, keep-alives never count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reverie_canary.client.checks.latency import check_ttft, first_token_ms
from reverie_canary.client.reply import ProbeSpec, Reply

SPEC = ProbeSpec(kind="ttft", language="en")


@pytest.mark.parametrize("reply, outcome, reason", [
    (Reply(text="Hello!", ttft_ms=11_800.0, http_status=200), "fail", "ttft_exceeded"),                 # FC-24
    (Reply(text="", http_status=200, timed_out=True), "fail", "ttft_exceeded"),                          # FC-25
    (Reply(text="", http_status=200, timed_out=True, total_ms=10_500.0, keepalives=50), "fail", "ttft_exceeded"),
    (Reply(text="", http_status=200, timed_out=True, total_ms=3_000.0), "inconclusive", "timed_out"),   # gave up early
    (Reply(text="", http_status=200), "not_applicable", "no_text"),                       # finished: not slow
    (Reply(text="", http_status=200, finish_reason="tool_calls", total_ms=320.0), "not_applicable", "no_text"),
    (Reply(text=" \n", http_status=200, finish_reason="stop", total_ms=320.0), "not_applicable", "no_text"),
    (Reply(text="Use a hash map.", first_reasoning_ms=1_100.0, first_content_ms=13_400.0), "pass", ""),  # FP-09
    (Reply(text="Paris.", ttft_ms=2_000.0, keepalives=2), "pass", ""),                                   # FP-01
    (Reply(text="Paris.", ttft_ms=10_000.0), "pass", ""),                                                # at the bar
    (Reply(text="Paris."), "inconclusive", "no_timing"),
])
def test_ttft(reply, outcome, reason):
    """TTFT counts the first visible delta; only a wait on an open 200 stream up to the bar is a censored fail."""
    result = check_ttft(reply, SPEC)
    assert (result.outcome, result.reason) == (outcome, reason)


def test_threshold_is_configurable():
    """spec.ttft_threshold_ms moves the bar."""
    reply = Reply(text="x", ttft_ms=3_000.0)
    assert check_ttft(reply, ProbeSpec(kind="ttft", ttft_threshold_ms=2_500.0)).outcome == "fail"
    assert check_ttft(reply, ProbeSpec(kind="ttft", ttft_threshold_ms=5_000.0)).outcome == "pass"


@given(st.lists(st.one_of(st.none(), st.floats(min_value=0, max_value=60_000)), min_size=3, max_size=3))
def test_first_token_is_the_earliest_time(times):
    """Property: the first token is the earliest of the three recorded times."""
    reply = Reply(ttft_ms=times[0], first_content_ms=times[1], first_reasoning_ms=times[2])
    present = [t for t in times if t is not None]
    assert first_token_ms(reply) == (min(present) if present else None)
