"""The demo's banner says one compression factor, wherever it says one."""

from __future__ import annotations

import re

import pytest

from reverie_canary.canary.demo import compression_text


@pytest.mark.parametrize("cycle_s", [4.0, 4.9, 12.7])
def test_the_banner_says_one_time_factor_and_the_days_it_makes(cycle_s):
    """x367 for 4.9 s cycles in the cycle's parenthesis and in 'latency cannot shrink', never a stale x450."""
    text = compression_text(cycle_s)
    factor = round(1800 / cycle_s)
    assert re.findall(r"(?:\(|shrink )x(\d+)", text) == [str(factor), str(factor)], text
    assert f"1 day = {round(86400 * cycle_s / 1800)} s" in text
    assert "scaled x10" in text
