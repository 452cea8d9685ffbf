"""The prober's checks wait no longer than the task's deadline: a late verdict would count as missing."""

from __future__ import annotations

import threading
from datetime import timedelta

from reverie_canary.client.reply import ProbeSpec, Reply
from reverie_canary.services.prober import service
from reverie_canary.services.prober.service import PUBLISH_MARGIN_S, Prober
from reverie_canary.shared.runtime import clock
from reverie_canary.shared.runtime.settings import Settings

REPLY = Reply(text="* Mira lifts the lamp.", finish_reason="stop", http_status=200, ttft_ms=10.0, total_ms=20.0)


async def test_checks_still_queued_at_the_deadline_give_an_inconclusive_result_in_time(monkeypatch):
    """One check holds the single checks thread; the next reply's task is due in 0.3 s: checks_overdue by then."""
    release = threading.Event()

    def slow(reply, spec):
        release.wait(5.0)
        return real(reply, spec)

    real = service.evaluate
    monkeypatch.setattr(service, "evaluate", slow)
    prober = Prober(Settings.load(env={}))
    try:
        blocker = service.asyncio.ensure_future(prober.judge(REPLY, ProbeSpec(kind="ttft")))
        service._TASK_DEADLINE.set(clock.now() + timedelta(seconds=0.3))
        t0 = clock.now()
        late = await prober.judge(REPLY, ProbeSpec(kind="ttft"))
        waited = (clock.now() - t0).total_seconds()
        assert (late.outcome, late.reason) == ("inconclusive", "checks_overdue")
        assert late.checks[0].evidence["waited_ms"] <= 300.0
        assert waited < 0.3 + 0.5  # returned before the deadline, with the publish margin (not after 5 s)
        assert waited >= 0.3 - PUBLISH_MARGIN_S - 0.05
        release.set()
        first = await blocker
        assert first.outcome == "pass"  # a task without a deadline in its context waits for its checks
    finally:
        release.set()
        prober.close()


async def test_checks_that_finish_in_time_are_the_verdict(monkeypatch):
    prober = Prober(Settings.load(env={}))
    try:
        service._TASK_DEADLINE.set(clock.now() + timedelta(seconds=30))
        verdict = await prober.judge(REPLY, ProbeSpec(kind="ttft"))
        assert (verdict.outcome, verdict.reason) == ("pass", "")
        service._TASK_DEADLINE.set(clock.now() - timedelta(seconds=1))  # already past: only a finished check counts
        past = await prober.judge(REPLY, ProbeSpec(kind="ttft"))
        assert past.reason == "checks_overdue"
    finally:
        prober.close()
