"""Retry policies: capped exponential backoff with full jitter."""

from __future__ import annotations

import random
import statistics

import pytest

from reverie_canary.shared.runtime import retry


@pytest.mark.parametrize("policy", list(retry.POLICIES.values()), ids=lambda p: p.name)
def test_delays_are_full_jitter_under_a_doubling_capped_ceiling(policy):
    random.seed(7)
    for attempt in range(1, 12):
        ceiling = min(policy.cap_s, policy.initial_s * 2 ** (attempt - 1))
        draws = [policy.delay(attempt) for _ in range(400)]
        assert all(0.0 <= d <= ceiling + 1e-9 for d in draws)
        # full jitter: spread over the whole range, not clustered at the ceiling
        assert min(draws) < 0.1 * ceiling and max(draws) > 0.9 * ceiling
        assert statistics.mean(draws) == pytest.approx(ceiling / 2, rel=0.15)


def test_two_replicas_that_failed_together_do_not_retry_together():
    a = [retry.DEPENDENCY.delay(n) for n in range(1, 8)]
    b = [retry.DEPENDENCY.delay(n) for n in range(1, 8)]
    assert a != b


def test_redelivery_keeps_its_linear_budget_with_a_quarter_of_jitter():
    random.seed(3)
    draws = [retry.redelivery_delay(0.5, 4) for _ in range(500)]
    assert all(1.5 <= d <= 2.5 for d in draws)
    assert max(draws) - min(draws) > 0.8


def test_reconnect_waits_differ_per_connection():
    waits = {round(retry.reconnect_wait_s(), 6) for _ in range(50)}
    assert len(waits) > 40 and all(0.5 <= w <= 1.5 for w in waits)


def test_no_hand_written_doubling_is_left():
    """Every retry loop takes its delays from shared/runtime/retry.py (the client draws the same full jitter itself)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = []
    for folder in ("shared", "services", "canary", "client"):
        for path in (root / folder).rglob("*.py"):
            if "build" in path.parts:
                continue
            for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"delay\s*=\s*min\(\s*delay\s*\*\s*2", line):
                    offenders.append(f"{path.relative_to(root)}:{no}")
    assert offenders == []
