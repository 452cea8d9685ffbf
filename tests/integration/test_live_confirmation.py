"""Live counts to a pinned confirmation, end to end over real NATS and Redis, and what forged counts cannot do.

The demo's pipeline runs every service on the default simulated fleet; a chat backend's client
(its :class:`~reverie_canary.client.served.LiveRecorder`, as the ``backend`` user) publishes
content-free counts on ``canary.live.<model>``.  Lambda is slow in the fleet (its first token after
2 s, the demo's bar 1 s): live counts of ``ttft_exceeded`` on it stand out, discovery sends a
pinned ``ttft`` probe outside the rotation, it fails, the judge says ``confirmed`` and the notifier
tells operators once.  The same counts on Novita, which is healthy, are ``not_reproduced``.
"""

from __future__ import annotations

from datetime import timedelta

import nats
import pytest

from reverie_canary.canary.demo import pipeline
from reverie_canary.client.served import LiveRecorder
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.events import LiveConfirmation, ProbeTask
from reverie_canary.shared.runtime import clock
from tests import waits

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"
HEALTHY = ("DeepInfra", "Together", "Fireworks", "Parasail", "GMICloud")


def recorder(source: str, failing: dict[str, tuple[str, int]], replies: int = 30) -> LiveRecorder:
    """One period of a backend's counts: ``replies`` per provider, ``failing`` name -> (reason, count)."""
    rec = LiveRecorder(MODEL, source=source)
    for name in (*HEALTHY, *failing):
        reason, bad = failing.get(name, ("", 0))
        for i in range(replies):
            rec.record(name, reason if i < bad else "")
    return rec


class Watch:
    """Every confirmation task on the work queue and every LiveConfirmation on the log, as they come."""

    def __init__(self) -> None:
        self.tasks: dict[str, ProbeTask] = {}
        self.facts: dict[str, LiveConfirmation] = {}

    async def on_task(self, msg) -> None:
        task = codec.PROBE_TASK.decode(msg.data)
        if task.confirms is not None:
            self.tasks[task.task_id] = task

    async def on_fact(self, msg) -> None:
        fact = codec.CONFIRMATION.decode(msg.data)
        self.facts[fact.task_id] = fact


async def _watch(p, watch: Watch):
    admin = await nats.connect(p.settings.nats_url, user="admin", password=p.passwords["admin"])
    await admin.subscribe(subjects.ALL_TASKS, cb=watch.on_task)
    await admin.subscribe(subjects.ALL_CONFIRMATIONS, cb=watch.on_fact)
    backend = await nats.connect(p.settings.nats_url, user="backend", password=p.passwords["backend"])
    return admin, backend


async def test_live_failures_get_a_pinned_probe_a_fact_and_one_notice_each(tmp_path):
    """ttft_exceeded on Lambda (slow): confirmed; the same on Novita (healthy): not reproduced; a repeat: nothing new."""
    async with pipeline(workdir=tmp_path, scenario="default") as p:
        watch = Watch()
        admin, backend = await _watch(p, watch)
        try:
            await p.observer.first_seen.wait()  # discovery has a listing to pin the probes on
            lambda_counts = recorder("chat-1", {"Lambda": ("ttft_exceeded", 12)})
            published = await lambda_counts.publish(backend)
            assert published is not None and published.providers["Lambda"].reasons == {"ttft_exceeded": 12}
            await waits.until(lambda: any(f.provider == "lambda/fp8" for f in watch.facts.values()), timeout_s=60,
                              what="the LiveConfirmation of lambda/fp8", interval_s=0.2)
            await recorder("chat-2", {"Novita": ("ttft_exceeded", 12)}).publish(backend)
            await waits.until(lambda: any(f.provider == "novita/fp8" for f in watch.facts.values()), timeout_s=60,
                              what="the LiveConfirmation of novita/fp8", interval_s=0.2)

            def told(provider: str):
                return [n for n in p.observer.notices if n.provider == provider and n.action.startswith("live_")]

            await waits.until(lambda: told("lambda/fp8") and told("novita/fp8"), timeout_s=30,
                              what="the two confirmation notices", interval_s=0.2)
        finally:
            await backend.close()
            await admin.close()
        by_provider = {f.provider: f for f in watch.facts.values()}
        slow, healthy = by_provider["lambda/fp8"], by_provider["novita/fp8"]
        assert (slow.outcome, slow.kind, slow.probe_outcome, slow.probe_reason) == \
            ("confirmed", "ttft", "fail", "ttft_exceeded")
        assert (healthy.outcome, healthy.probe_outcome) == ("not_reproduced", "pass")
        assert (slow.live.reason, slow.live.key, slow.live.count, slow.live.served, slow.live.peers) == \
            ("ttft_exceeded", "Lambda", 12, 30, 6)
        assert slow.task_id.startswith(f"confirm|{MODEL}|") and slow.task_id.endswith("|lambda/fp8|ttft|1")
        assert {t.provider for t in watch.tasks.values()} == {"lambda/fp8", "novita/fp8"}
        [confirmed] = told("lambda/fp8")
        [not_reproduced] = told("novita/fp8")
        assert (confirmed.action, confirmed.severity) == ("live_confirmed", "warning")
        assert confirmed.title == f"[{MODEL}] live failures on lambda/fp8 (ttft_exceeded) confirmed by a pinned probe"
        assert (not_reproduced.action, not_reproduced.severity) == ("live_not_reproduced", "info")
        # the judge's fold never saw them: no verdict names a confirmation, Novita's streak is its own
        record = await p.judge_record()
        assert all(not c.startswith("confirm|") for c in record.state.open_cycles)
        assert record.state.providers["novita/fp8"].failed_streak == 0


async def test_a_flood_of_forged_counts_suspends_no_one_and_costs_a_bounded_number_of_probes(tmp_path):
    """Hundreds of periods that blame three healthy providers for five reasons each, repeated and redelivered:
    at most ``confirm_max_per_provider`` probes per provider per cycle, none of the three suspended or failing."""
    async with pipeline(workdir=tmp_path, scenario="default") as p:
        watch = Watch()
        admin, backend = await _watch(p, watch)
        blamed = {"DeepInfra": "deepinfra/fp8", "Together": "together", "Fireworks": "fireworks"}
        reasons = ("leading_junk", "bytelevel_tokens", "refusal", "language_switch", "schema_invalid")
        try:
            await p.observer.first_seen.wait()
            first = len(p.observer.cycles)
            js = backend.jetstream()
            sent = 0
            for n in range(300):
                rec = LiveRecorder(MODEL, source=f"forger-{n}")
                for name in ("Novita", "Parasail", "GMICloud", "Lambda", *blamed):
                    for i in range(40):
                        rec.record(name, reasons[i % len(reasons)] if name in blamed else "")
                counts = rec.take()
                assert counts is not None
                body = codec.encode(counts)
                for _ in range(2):  # the same period twice: JetStream keeps one, discovery counts one
                    await js.publish(subjects.live(MODEL), body, headers={"Nats-Msg-Id": f"forged|{n}"})
                sent += 1
            assert await p.wait_cycles(first + 3)
        finally:
            await backend.close()
            await admin.close()
        cycles_spanned = {t.task_id.split("|")[2] for t in watch.tasks.values()}
        per_cycle_provider: dict[tuple[str, str], int] = {}
        for t in watch.tasks.values():
            key = (t.task_id.split("|")[2], t.provider)
            per_cycle_provider[key] = per_cycle_provider.get(key, 0) + 1
        max_per_provider = p.settings.confirm_max_per_provider
        assert {t.provider for t in watch.tasks.values()} <= set(blamed.values())
        assert per_cycle_provider and max(per_cycle_provider.values()) <= max_per_provider
        assert len(watch.tasks) <= max_per_provider * len(blamed) * len(cycles_spanned)
        assert sent == 300
        record = await p.judge_record()
        for tag in blamed.values():
            ps = record.state.providers[tag]
            assert ps.suspension is None and ps.failed_streak == 0, tag
        assert not [d for d in p.observer.decisions if d.provider in blamed.values()]
        # every answer to a forged accusation: not reproduced (the blamed providers are healthy)
        assert {f.outcome for f in watch.facts.values()} <= {"not_reproduced", "inconclusive"}
        assert clock.now() - min(f.at for f in watch.facts.values()) < timedelta(minutes=5)


async def test_a_redelivered_period_is_counted_once():
    """The same period handed to discovery's handler twice (a redelivery: same message id) counts once."""
    from reverie_canary.services.discovery.service import Discovery
    from reverie_canary.shared.runtime.broker import Delivery
    from reverie_canary.shared.runtime.service import Shell
    from reverie_canary.shared.runtime.settings import Settings

    discovery = Discovery(Shell("discovery", Settings().replace(models=[MODEL]), uses_redis=False))
    period = recorder("chat-1", {"Lambda": ("ttft_exceeded", 4)}).take()
    assert period is not None
    once = Delivery(subject=subjects.live(MODEL), stream_seq=41, deliveries=1, headers={"Nats-Msg-Id": "live|x"})
    again = Delivery(subject=subjects.live(MODEL), stream_seq=41, deliveries=2, headers={"Nats-Msg-Id": "live|x"})
    other = Delivery(subject=subjects.live(MODEL), stream_seq=42, deliveries=1, headers={})
    await discovery.on_live(period, once)
    await discovery.on_live(period, again)
    [tally] = [t for t in discovery.live[MODEL].tallies(clock.now()) if t.provider == "Lambda"]
    assert (tally.served, tally.failures) == (30, {"ttft_exceeded": 4})
    await discovery.on_live(period, other)  # no id: its stream sequence is its identity
    [tally] = [t for t in discovery.live[MODEL].tallies(clock.now()) if t.provider == "Lambda"]
    assert (tally.served, tally.failures) == (60, {"ttft_exceeded": 8})
    assert discovery._weigh == {MODEL}
