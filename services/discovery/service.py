"""Discovery service: the cycle clock.

Each cycle, for every configured model: list the endpoints from the gateway,
publish ``EndpointsDiscovered`` with the plan, one ``ProbeTask`` per planned
probe onto the work queue, and ``CycleClosed`` at the deadline.  A cycle that
cannot be planned (the listing answers 401/402/403 or another 4xx, an
unparseable body, or the gateway stays unreachable or failing until the
deadline) is a fact on the log too: ``CycleUnplanned`` with its cause
(docs/concepts/health.md), never a silent skip.  Every message
has a deterministic id, so a restarted discovery repeating a step publishes
nothing twice, and a cycle a discovery before it started and never closed (it
was killed or stopped mid-cycle) is closed at its deadline by the next one
(:meth:`Discovery.close_open_cycles`).  The judge's ``RetestRequested`` events are kept in Redis until
the cycle they ask for is planned.

Each cycle is sized before its tasks go out: discovery plans
every model first, then derives the probes in flight that end the plan within
``probe_window_s x probe_fill_share`` from the probe times it measured in the
live results (``canary.results.>``, how long each held its prober) and the
probers those results came from, within the ceiling ``prober_concurrency`` per
prober (:mod:`reverie_canary.services.discovery.sizing`).  The sizing is a fact
on the log, ``CycleSized`` on ``canary.cycles.sized``, published before the
first task; every task carries its ``per_prober`` as ``concurrency``.  A cycle
that cannot end in its window even at the ceiling says so there
(``fits: false``, a ``cycle_does_not_fit`` warning; the notifier tells
operators) before any probe runs.  The measurements are kept in Redis
(``<ns>:discovery:probe-times``, written after each cycle's fold): a restarted
discovery sizes its first cycle on what the one before it measured, not at the
ceiling; when that key is missing, unreadable or refused it starts from the
prior and says so.

Live failures get a pinned confirmation at once (DESIGN, "The request in flight"):
discovery reads the chat backends' content-free counts (``canary.live.<model>``,
its durable ``discovery-live-v1``; a message id counted once), sums them over the
last ``confirm_window_s`` per model (:class:`~reverie_canary.services.discovery.confirm.LiveWindow`),
and every :data:`CONFIRM_EVERY_S` a model with new counts is weighed
(:func:`~reverie_canary.services.discovery.confirm.plan_confirmations`): a provider
whose share of a reason stands out from its peers' gets a pinned probe of the matching
kind outside the rotation, at most ``confirm_max_per_provider`` per provider per
cycle, on the listing of the model's last plan.  The budget is kept in memory: a
restarted discovery numbers a cycle's confirmations from 1 again, and their task ids
(``confirm|<model>|<cycle_no>|<tag>|<kind>|<n>``) repeat, so JetStream drops the
ones it stored before.  The probe's result is the judge's to tell (``LiveConfirmation``);
it never enters a verdict.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import httpx
import msgspec
from faststream import FastStream
from nats.errors import Error as NatsError

from reverie_canary.client.served import LiveCounts
from reverie_canary.services.discovery import confirm, sizing
from reverie_canary.services.discovery.core import coverage, cycle_start, listing_facts, plan, split
from reverie_canary.services.discovery.store import DiscoveryStore, MemoryDiscoveryStore, RedisDiscoveryStore
from reverie_canary.shared.contract import codec, ids, subjects
from reverie_canary.shared.contract.errors import CanaryError, Transient, Undecodable
from reverie_canary.shared.contract.events import (
    MAX_ENDPOINTS_PER_MODEL,
    CycleClosed,
    CycleSized,
    CycleUnplanned,
    Endpoint,
    EndpointsDiscovered,
    ProbeTask,
    RetestRequested,
)
from reverie_canary.shared.runtime import clock, retry, streams, tracing
from reverie_canary.shared.runtime.broker import Delivery, Outgoing
from reverie_canary.shared.runtime.config import DiscoveryConfig, config_of
from reverie_canary.shared.runtime.openrouter import ListingFailed, fetch_listing, make_client
from reverie_canary.shared.runtime.service import Shell, redis_client
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, TASKS

#: Join the current cycle only while this share of its probe window is still ahead.
JOIN_WINDOW_SHARE = 0.9
#: Seconds discovery keeps trying to publish a cycle's CycleSized before it goes on with the tasks.
SIZED_PUBLISH_S = 30.0
#: Seconds between two weighings of a model whose live counts changed (a flood of counts costs one
#: sum of the window this often, not one per message).
CONFIRM_EVERY_S = 0.5


class _ResultTime(msgspec.Struct):
    """The fields of a ProbeResult that sizing reads (the rest is skipped unread)."""

    kind: str
    at: datetime
    started_at: datetime | None = None
    prober: str = ""
    outcome: str = ""
    reason: str = ""


_result_time = msgspec.json.Decoder(_ResultTime)


def next_cycle(now_epoch: float, interval_s: float, window_s: float, last: int) -> int:
    """The next cycle to run after ``last``: the current one only if it has barely begun.

    A cycle joined late gives its probes less than the window and closes with
    results missing; a frozen first cycle delays every verdict by one.
    """
    n = ids.cycle_no(now_epoch, interval_s)
    if now_epoch - n * interval_s > window_s * (1 - JOIN_WINDOW_SHARE):
        n += 1
    return max(n, last + 1)


class Discovery:
    """The cycle loop of one discovery process."""

    def __init__(self, shell: Shell, store: DiscoveryStore | None = None) -> None:
        self.shell = shell
        #: The settings discovery reads (:class:`reverie_canary.shared.runtime.config.DiscoveryConfig`).
        self.config = config_of(shell.settings, DiscoveryConfig)
        self.client: httpx.AsyncClient | None = None
        #: Where the probe times and the pending retests are kept (:mod:`reverie_canary.services.discovery.store`).
        self.store: DiscoveryStore = store if store is not None else MemoryDiscoveryStore()
        #: Probe times folded from the results of the cycles before; the current cycle's, still coming in.
        self.times = sizing.ProbeTimes()
        self.tally = sizing.Tally()
        #: The per-prober concurrency of the cycle being published (0: not sized, the probers' ceiling).
        self.concurrency = 0
        self._times_dirty = False
        #: The task closing the cycles a discovery before this one left open (:meth:`close_open_cycles`).
        self._recovery: asyncio.Task | None = None
        #: Per model: the live counts of the window, the listing of its last plan, this cycle's confirmations.
        self.live: dict[str, confirm.LiveWindow] = {}
        self.listings: dict[str, list[Endpoint]] = {}
        self.budgets: dict[str, confirm.Budget] = {}
        self._weigh: set[str] = set()  # models whose counts changed since they were last weighed
        s_ = self.config
        self.thresholds = confirm.Thresholds(min_served=s_.confirm_min_served, min_failures=s_.confirm_min_failures,
                                             min_providers=s_.confirm_min_providers, k=s_.confirm_k,
                                             min_spread=s_.confirm_min_spread)

    async def on_result(self, msg) -> None:
        """Count one live ProbeResult's probe time (how long it held its prober); unreadable ones are skipped."""
        try:
            r = _result_time.decode(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if r.started_at is not None:
            self.tally.add(r.kind, (r.at - r.started_at).total_seconds(), r.prober, outcome=r.outcome,
                           reason=r.reason)

    def size(self, cycle_no: int, planned: dict[str, tuple[EndpointsDiscovered, list[ProbeTask]]]) -> CycleSized:
        """Fold the last cycle's probe times in and size cycle ``cycle_no`` from the plans of ``planned``."""
        s = self.config
        start = cycle_start(cycle_no, s.cycle_interval_s)
        if len(self.tally):
            self.times = sizing.fold(self.times, self.tally, clock.now())
            self.tally = self.tally.leftover()
            self._times_dirty = True
        counts: dict[str, int] = {}
        for _, tasks in planned.values():
            for kind, n in sizing.counts_of(tasks).items():
                counts[kind] = counts.get(kind, 0) + n
        return sizing.size(cycle_no=cycle_no, start=start, deadline=start + timedelta(seconds=s.probe_window_s),
                           models=len(planned), counts=counts, times=self.times, window_s=s.probe_window_s,
                           fill_share=s.probe_fill_share, ceiling=s.prober_concurrency)

    async def publish_sized(self, event: CycleSized) -> bool:
        """Publish ``event`` (retried up to :data:`SIZED_PUBLISH_S`), say it in the log and the metrics."""
        fields = dict(cycle_no=event.cycle_no, probes=event.probes, basis=event.basis, work_s=event.work_s,
                      probers=event.probers, per_prober=event.per_prober, in_flight=event.in_flight,
                      needed=event.needed, ceiling=event.ceiling, expected_wall_s=event.expected_wall_s,
                      target_s=event.target_s, window_s=event.window_s)
        if event.fits:
            self.shell.log.info("cycle_sized", **fields)
        else:
            self.shell.log.warning("cycle_does_not_fit", **fields,
                                   detail=f"{event.probes} probes need {event.needed} in flight to end within "
                                          f"{event.target_s:g} s; {event.probers} prober(s) x {event.ceiling} end "
                                          f"them in about {event.expected_wall_s:g} s, past the {event.window_s:g} s "
                                          "window: start more probers or raise CANARY_PROBER_CONCURRENCY")
        m = self.shell.metrics
        m.set("cycle_in_flight", event.in_flight)
        m.set("cycle_expected_wall", event.expected_wall_s)
        m.set("cycle_fits", 1 if event.fits else 0)

        async def publish() -> bool:
            await self.shell.publisher.publish(event, subjects.CYCLES_SIZED, ids.sized_id(event.cycle_no), LOG)
            return True

        published = await self._retry("cycle_sized", publish, time.time() + SIZED_PUBLISH_S)
        if not published:
            self.shell.log.error("cycle_sized_not_published", cycle_no=event.cycle_no)
        return published

    async def load_times(self) -> None:
        """Take the probe times the discovery before this one measured.

        Nothing stored (a new deployment), stored bytes that are not probe times, or the store
        refusing the read (an ACL file rendered before this key existed: run ``canary redis-acl``
        again) leave the prior in place with a warning.
        """
        try:
            times = await self.store.load_times()
        except Transient as exc:
            self.shell.log.warning("probe_times_unavailable", error=str(exc),
                                   detail="the first cycle is sized on the prior, every prober at its ceiling")
            return
        except Undecodable as exc:
            self.shell.log.warning("probe_times_unreadable", error=str(exc)[:300],
                                   detail="the first cycle is sized on the prior, every prober at its ceiling")
            return
        if times is None:
            return
        self.times = times
        self.shell.log.info("probe_times_loaded", kinds=sorted(times.kinds), probers=times.probers,
                            measured_at=times.at.isoformat() if times.at else None)

    async def save_times(self) -> None:
        """Write the probe times folded since the last write (a failure is a warning: they stay in memory)."""
        if not self._times_dirty:
            return
        try:
            await self.store.save_times(self.times)
            self._times_dirty = False
        except Transient as exc:
            self.shell.log.warning("probe_times_not_saved", error=str(exc))

    def _retest_ttl_s(self) -> int:
        return int(self.config.cycle_interval_s * 4) + 60

    async def remember_retest(self, event: RetestRequested, delivery: Delivery) -> None:
        """Keep a retest request until its cycle is planned (idempotent: a set).

        Raises:
            Transient: the store is unreachable (the request is redelivered).
        """
        await self.store.add_retests(event.model, event.for_cycle_no, [(event.provider, event.language)],
                                     self._retest_ttl_s())

    # -- confirmation probes of live failures ------------------------------------------------------

    async def on_live(self, event: LiveCounts, delivery: Delivery) -> None:
        """Count one period of a chat backend's live counts in its model's window (a message id once).

        The id is the message's ``Nats-Msg-Id`` (the client sets one per period), else its stream
        sequence.  Counts of a model discovery does not watch, of a period outside the window, or
        already counted change nothing.
        """
        s = self.config
        if s.confirm_window_s <= 0:
            return
        if event.model not in s.models:
            self.shell.metrics.inc("live_periods", model="_other", outcome="unwatched")
            return
        msg_id = delivery.headers.get("Nats-Msg-Id") or f"seq|{delivery.stream_seq}"
        window = self.live.setdefault(event.model, confirm.LiveWindow(s.confirm_window_s))
        counted = window.add(msg_id, event.at, confirm.tallies_of(event), clock.now())
        outcome = "counted" if counted else (
            "duplicate" if event.at >= clock.now() - timedelta(seconds=s.confirm_window_s) else "outside")
        self.shell.metrics.inc("live_periods", model=event.model, outcome=outcome)
        if counted:
            self._weigh.add(event.model)

    async def weigh(self, model: str) -> list[ProbeTask]:
        """Send the confirmation probes ``model``'s window asks for now; returns them (published).

        Nothing without a listing yet (no plan since this discovery started).  A publication that
        fails gives the budget back, so the next weighing asks again.

        Raises:
            Transient: NATS refused or did not acknowledge a task.
        """
        s = self.config
        endpoints = self.listings.get(model)
        window = self.live.get(model)
        if not endpoints or window is None:
            return []
        now = clock.now()
        cycle_no = ids.cycle_no(now.timestamp(), s.cycle_interval_s)
        budget = self.budgets.get(model)
        if budget is None or budget.cycle_no != cycle_no:
            budget = self.budgets[model] = confirm.Budget(cycle_no=cycle_no)
        before = confirm.Budget(cycle_no=cycle_no, spent=dict(budget.spent), asked=list(budget.asked))
        tasks = confirm.plan_confirmations(
            window.tallies(now), model=model, endpoints=endpoints, budget=budget, limits=self.thresholds,
            max_per_provider=s.confirm_max_per_provider, at=now, deadline=now + timedelta(seconds=s.probe_window_s),
            window_s=s.confirm_window_s, language=s.languages[0] if s.languages else "en")
        if not tasks:
            return []
        try:
            await self.shell.publisher.publish_many(
                [Outgoing(t, subjects.task(model, t.provider), t.task_id) for t in tasks], stream=TASKS)
        except Transient:
            self.budgets[model] = before
            raise
        for t in tasks:
            live = t.confirms
            assert live is not None
            self.shell.log.warning("confirmation_sent", model=model, provider=t.provider, kind=t.kind,
                                   variant=t.variant or None, reason=live.reason, share=live.share,
                                   median=live.median, threshold=live.threshold, count=live.count,
                                   served=live.served, peers=live.peers, task_id=t.task_id)
            self.shell.metrics.inc("confirmations_sent", model=model, kind=t.kind)
        return tasks

    async def confirm_loop(self) -> None:
        """Weigh every model whose live counts changed, every :data:`CONFIRM_EVERY_S` (a failure is retried)."""
        while True:
            await asyncio.sleep(CONFIRM_EVERY_S)
            for model in sorted(self._weigh):
                self._weigh.discard(model)
                try:
                    await self.weigh(model)
                except Transient as exc:
                    self._weigh.add(model)
                    self.shell.log.warning("confirmation_not_sent", model=model, error=str(exc))

    async def _retests(self, model: str, cycle_no: int) -> list[tuple[str, str]]:
        try:
            return await self.store.retests(model, cycle_no)
        except Transient as exc:
            self.shell.log.warning("retests_unavailable", model=model, error=str(exc))
            return []

    async def _carry_over(self, model: str, next_cycle_no: int, asked: list[tuple[str, str]],
                          tasks: list[ProbeTask]) -> None:
        """Retests of planned providers that waited for their turn move on to the next cycle.

        (``max_retests_per_cycle``; a provider no longer listed drops them.)
        Idempotent: a set, as :meth:`remember_retest`.
        """
        planned = {(t.provider, t.language) for t in tasks if t.kind == "language"}
        listed = {t.provider for t in tasks}
        waiting = [(p, lang) for p, lang in asked if p in listed and (p, lang) not in planned]
        if not waiting:
            return
        try:
            await self.store.add_retests(model, next_cycle_no, waiting, self._retest_ttl_s())
        except Transient as exc:
            self.shell.log.warning("retests_not_carried", model=model, waiting=len(waiting), error=str(exc))

    async def start_cycle(self, model: str, cycle_no: int) -> bool:
        """List, plan and publish one cycle of ``model`` (its tasks carry the cycle's sized ``concurrency``).

        Returns:
            ``True`` when the plan was published.

        Raises:
            ListingFailed: the listing cannot be used this cycle (401, 402, 403,
                another 4xx, an unparseable body): retrying will not mend it.
            Transient: gateway or NATS unavailable (the loop retries); its
                ``context["cause"]`` says which when the gateway (none: the bus).
        """
        event, tasks = await self.plan_model(model, cycle_no)
        return await self.publish_plan(model, cycle_no, event, tasks)

    async def plan_model(self, model: str, cycle_no: int) -> tuple[EndpointsDiscovered, list[ProbeTask]]:
        """List and plan one cycle of ``model``, publishing nothing (raises as :meth:`start_cycle`)."""
        s = self.config
        assert self.client is not None
        listing = await fetch_listing(self.client, model)
        start = cycle_start(cycle_no, s.cycle_interval_s)
        retests = await self._retests(model, cycle_no)
        event, tasks = plan(
            model=model, cycle_no=cycle_no, start=start, window_s=s.probe_window_s, endpoints=listing.endpoints,
            kinds=s.kinds, languages=s.languages, languages_per_cycle=s.languages_per_cycle,
            language_coverage_cycles=s.language_coverage_cycles, language_weights=s.language_weights,
            controls=s.controls, retests=retests, max_retests=s.max_retests_per_cycle, dropped=listing.dropped,
        )
        await self._carry_over(model, cycle_no + 1, retests, tasks)
        self.listings[model] = list(event.endpoints)  # the confirmations' endpoints until the next plan
        return event, tasks

    async def publish_plan(self, model: str, cycle_no: int, event: EndpointsDiscovered, tasks: list[ProbeTask]) -> bool:
        """Publish a planned cycle of ``model``: the listing's parts, then the tasks; ``True`` once done."""
        return await self.publish_plans(cycle_no, {model: (event, tasks)})

    async def publish_plans(self, cycle_no: int,
                            plans: dict[str, tuple[EndpointsDiscovered, list[ProbeTask]]]) -> bool:
        """Publish the planned cycle of every model of ``plans``: every listing first, then every task.

        Both are pipelined, every acknowledgement checked (one round trip each, 18,000 tasks of a
        2,000-endpoint fleet took 53 s; model after model, the waits for each model's acknowledgements
        still added up): a model's listing is stored before any of its tasks is sent.

        Returns:
            ``True`` once done.

        Raises:
            Transient: NATS refused or did not acknowledge (every id is deterministic: publishing the
                same plans again stores nothing twice).
        """
        pub = self.shell.publisher
        listings: list[Outgoing] = []
        outgoing: list[Outgoing] = []
        for model, (event, tasks) in plans.items():
            if event.listed > len(event.endpoints):
                self.shell.log.warning("endpoints_over_bound", model=model, listed=event.listed,
                                       watched=len(event.endpoints), bound=MAX_ENDPOINTS_PER_MODEL)
            facts = listing_facts(event.endpoints, event.dropped, event.dropped_cut)
            if facts.dropped:  # a fact on the log (EndpointsDiscovered.dropped), said here and counted below
                self.shell.log.warning("listing_dropped", model=model, cycle_no=cycle_no,
                                       dropped=len(facts.dropped) + facts.dropped_cut,
                                       entries=[f"#{d.index} {d.reason}: {d.detail}" for d in facts.dropped[:4]])
            # a large model's listing in parts that each fit the wire bound
            listings += [Outgoing(part, subjects.discovery(model), ids.discovered_id(model, cycle_no, part.part))
                         for part in split(event)]
            for task in tasks:
                if self.concurrency:
                    task = msgspec.structs.replace(task, concurrency=self.concurrency)
                # one probe is one trace: its root is the task, whose context the task's headers carry
                with tracing.span("discovery task", root=True,
                                  attributes={"canary.task_id": task.task_id, "canary.model": model,
                                              "canary.provider": task.provider, "canary.kind": task.kind,
                                              "canary.cycle": task.cycle}):
                    outgoing.append(Outgoing(task, subjects.task(model, task.provider), task.task_id,
                                             tracing.inject({})))
        await pub.publish_many(listings, stream=LOG)
        await pub.publish_many(outgoing, stream=TASKS)
        m = self.shell.metrics
        for model, (event, tasks) in plans.items():
            parts = sum(1 for listing in listings if listing.subject == subjects.discovery(model))
            self.shell.log.info("cycle_started", model=model, cycle_no=cycle_no, endpoints=len(event.endpoints),
                                tasks=len(tasks), **({"parts": parts} if parts > 1 else {}))
            facts = listing_facts(event.endpoints, event.dropped, event.dropped_cut)
            m.inc("cycles_started", model=model)
            m.inc("tasks_published", len(tasks), model=model)
            m.set("endpoints_listed", event.listed, model=model)
            m.set("endpoints_degraded", len(facts.degraded), model=model)
            for reason, count in Counter(d.reason for d in event.dropped).items():
                m.inc("endpoints_dropped", count, model=model, reason=reason)
            if event.dropped_cut:
                m.inc("endpoints_dropped", event.dropped_cut, model=model, reason="unnamed")
            m.set("cycle_started_at", event.at.timestamp(), model=model)
        return True

    async def close_cycle(self, model: str, cycle_no: int) -> bool:
        """Publish CycleClosed, stamped at the deadline; ``True`` once published."""
        s = self.config
        start = cycle_start(cycle_no, s.cycle_interval_s)
        event = CycleClosed(at=start + timedelta(seconds=s.probe_window_s), model=model,
                            cycle=ids.cycle_id(model, start), cycle_no=cycle_no)
        await self.shell.publisher.publish(event, subjects.discovery(model), ids.closed_id(model, cycle_no), LOG)
        return True

    async def plan_cycle(self, model: str, cycle_no: int, deadline_epoch: float) -> bool:
        """Plan one cycle, retrying transient failures until its deadline.

        A cycle that could not be planned is published as ``CycleUnplanned``
        (cause, last HTTP status, attempts; :meth:`unplanned`).

        Returns:
            ``True`` when the plan was published, ``False`` when the cycle is unplanned.
        """
        attempts = 0
        cause, status, detail = "bus_unavailable", None, ""
        while True:
            attempts += 1
            try:
                if await self.start_cycle(model, cycle_no):
                    return True
            except ListingFailed as exc:  # the key, the credit, an unknown model, a broken body
                cause, status, detail = exc.cause, exc.http_status, str(exc)
                break
            except Transient as exc:
                cause = exc.context.get("cause", "bus_unavailable")
                status, detail = exc.context.get("http_status"), str(exc)
                self.shell.log.warning("cycle_start_retry", model=model, cycle_no=cycle_no, cause=cause, error=detail)
            remaining = deadline_epoch - time.time()
            if remaining <= 0:
                break
            await asyncio.sleep(min(retry.GATEWAY.delay(attempts), remaining))
        await self.unplanned(model, cycle_no, cause=cause, http_status=status, detail=detail, attempts=attempts)
        return False

    async def unplanned(self, model: str, cycle_no: int, *, cause: str, http_status: int | None, detail: str,
                        attempts: int) -> bool:
        """Publish ``CycleUnplanned`` for a cycle that could not be planned; ``True`` once published.

        Retried (the bus may be what failed) until the next cycle would start.
        """
        s = self.config
        start = cycle_start(cycle_no, s.cycle_interval_s)
        event = CycleUnplanned(at=clock.now(), model=model, cycle=ids.cycle_id(model, start), cycle_no=cycle_no,
                               deadline=start + timedelta(seconds=s.probe_window_s), cause=cause,
                               http_status=http_status, detail=detail[:4000], attempts=attempts)
        self.shell.log.error("cycle_unplanned", model=model, cycle_no=cycle_no, cause=cause, http_status=http_status,
                             attempts=attempts, error=detail[:300])
        self.shell.metrics.inc("cycles_unplanned", model=model, reason=cause)

        async def publish() -> bool:
            await self.shell.publisher.publish(event, subjects.discovery(model), ids.unplanned_id(model, cycle_no), LOG)
            return True

        # until the next cycle would start, and at least once (a listing may have hung past it)
        until = max((cycle_no + 1) * s.cycle_interval_s, time.time() + 1.0)
        published = await self._retry("cycle_unplanned", publish, until)
        if not published:
            self.shell.log.error("cycle_unplanned_not_published", model=model, cycle_no=cycle_no, cause=cause)
        return published

    async def _retry(self, what: str, fn, until_epoch: float) -> bool:
        """``fn()`` until it returns or ``until_epoch`` passes, retrying :class:`Transient` (:data:`retry.GATEWAY`)."""
        attempt = 0
        while time.time() < until_epoch:
            try:
                return bool(await fn())
            except Transient as exc:
                attempt += 1
                self.shell.log.warning(f"{what}_retry", error=str(exc))
                await asyncio.sleep(min(retry.GATEWAY.delay(attempt), max(0.0, until_epoch - time.time())))
        return False

    def announce(self) -> None:
        """The start line: the models, the cycle and the bound on the time to detect a one-language defect."""
        s = self.config
        if "language" not in s.kinds:
            self.shell.log.info("discovery_started", models=len(s.models), cycle_interval_s=s.cycle_interval_s,
                                language_probe=False)
            return
        cov = coverage(len(s.languages), s.language_coverage_cycles, s.languages_per_cycle,
                       weighted=any(w > 0 for w in s.language_weights.values()))
        self.shell.log.info(
            "discovery_started", models=len(s.models), cycle_interval_s=s.cycle_interval_s, languages=cov.languages,
            languages_per_cycle=cov.per_cycle,
            weighted_per_cycle=cov.per_cycle - cov.rotated, bound_cycles=cov.bound_cycles,
            bound_s=cov.bound_cycles * s.cycle_interval_s,
            detail=f"every language of every provider probed at least once every {cov.bound_cycles} cycles "
                   f"({cov.bound_cycles * s.cycle_interval_s / 3600:g} h)")

    async def run_cycle(self, cycle_no: int, deadline_epoch: float) -> list[str]:
        """Plan every model, size the cycle and publish the sizing, then every model's plan; the models started.

        A model whose listing fails the first time is planned after the
        others (:meth:`plan_cycle`: retried until the deadline, else
        ``CycleUnplanned``), with the sizing of the ones planned first.
        """
        planned: dict[str, tuple[EndpointsDiscovered, list[ProbeTask]]] = {}
        later: list[str] = []
        for model in self.config.models:
            try:
                planned[model] = await self.plan_model(model, cycle_no)
            except (ListingFailed, Transient):
                later.append(model)
        sized = self.size(cycle_no, planned)
        self.concurrency = sized.per_prober
        await self.save_times()
        await self.publish_sized(sized)
        started = []
        try:
            await self.publish_plans(cycle_no, planned)
            started += planned
        except Transient as exc:  # each model on its own then, retried until the deadline
            self.shell.log.warning("cycle_start_retry", cycle_no=cycle_no, models=len(planned), error=str(exc))
            later += planned
        for model in later:
            if await self.plan_cycle(model, cycle_no, deadline_epoch):
                started.append(model)
        return started

    async def open_cycles(self, before_cycle_no: int) -> list[tuple[str, int]]:
        """The cycles a discovery before this one started and never closed: (model, cycle_no), for cycles before
        ``before_cycle_no`` (the first this one runs).

        The last message on each model's ``canary.discovery.<model>`` subject of
        the log says it: a plan (``EndpointsDiscovered``, or one of its parts)
        is a cycle started and not closed (the process was killed or stopped
        between its tasks and its deadline); ``CycleClosed`` or
        ``CycleUnplanned`` means nothing is open.  A model whose last message
        cannot be read is logged (``open_cycles_unknown``) and skipped.
        """
        from nats.js.errors import NotFoundError

        js = self.shell.broker.connection.jetstream()
        out = []
        for model in self.config.models:
            try:
                raw = await js.get_last_msg(LOG, subjects.discovery(model))
                event = codec.ENDPOINTS_OR_CLOSE.decode(raw.data)
            except NotFoundError:
                continue
            except (NatsError, OSError, CanaryError) as exc:  # the bus, a permission, bytes not a discovery event
                self.shell.log.warning("open_cycles_unknown", model=model, error=f"{type(exc).__name__}: {exc}")
                continue
            if isinstance(event, EndpointsDiscovered) and event.cycle_no < before_cycle_no:
                out.append((model, event.cycle_no))
        return out

    async def close_open_cycles(self, before_cycle_no: int) -> None:
        """Close, each at its deadline, the cycles :meth:`open_cycles` finds (docs/concepts/index.md: nothing is skipped
        silently; before, a discovery restarted mid-cycle left that cycle unjudged without a word).

        The close is the one the cycle would have had (``CycleClosed`` stamped
        at its deadline, its deterministic message id), so the judge's verdict
        names the results that never came as missing and freezes them.
        """
        s = self.config
        for model, cycle_no in await self.open_cycles(before_cycle_no):
            deadline = cycle_no * s.cycle_interval_s + s.probe_window_s
            self.shell.log.warning("cycle_left_open", model=model, cycle_no=cycle_no,
                                   closes_in_s=round(max(0.0, deadline - time.time()), 1),
                                   detail="a discovery before this one started the cycle and did not close it: "
                                          "closed at its deadline, its verdict names what is missing")
            await asyncio.sleep(max(0.0, deadline - time.time()))
            await self._retry("cycle_close", lambda m=model, n=cycle_no: self.close_cycle(m, n),
                              max(deadline, time.time()) + s.cycle_interval_s)

    async def run(self) -> None:
        """The cycle loop: close what a discovery before left open, start each cycle on time, close it at its
        deadline."""
        s = self.config
        self.announce()
        await self.shell.broker.connection.subscribe(subjects.ALL_RESULTS, cb=self.on_result)
        cycle_no = next_cycle(time.time(), s.cycle_interval_s, s.probe_window_s, last=-1)
        self._recovery = asyncio.create_task(self.close_open_cycles(cycle_no))
        while True:
            start = cycle_no * s.cycle_interval_s
            await asyncio.sleep(max(0.0, start - time.time()))
            deadline = start + s.probe_window_s
            started = await self.run_cycle(cycle_no, deadline)
            await asyncio.sleep(max(0.0, deadline - time.time()))
            for model in started:
                await self._retry("cycle_close", lambda m=model, n=cycle_no: self.close_cycle(m, n),
                                  deadline + s.cycle_interval_s)
            cycle_no = next_cycle(time.time(), s.cycle_interval_s, s.probe_window_s, last=cycle_no)


def create_app(settings: Settings | None = None) -> FastStream:
    """The discovery service's FastStream app."""
    settings = settings or Settings.load()
    shell = Shell("discovery", settings)
    discovery = Discovery(shell)
    closing: list[Callable[[], Awaitable[None]]] = []

    async def open_clients() -> None:
        # an upgrade without `canary init`: CycleSized would not be stored
        await streams.check_log_subjects(shell.connection.jetstream(), [subjects.ALL_CYCLES], "discovery")
        discovery.client = make_client(settings, timeout_s=30.0)
        redis = redis_client(settings)
        discovery.store = RedisDiscoveryStore(redis, settings.namespace)
        closing.append(redis.aclose)
        await discovery.load_times()
        for model in settings.models:  # rates and alerts see the series before the first cycle
            for key in ("cycles_started", "tasks_published"):
                shell.metrics.touch(key, model=model)

    async def close_clients() -> None:
        if discovery._recovery is not None:
            discovery._recovery.cancel()
        if discovery.client is not None:
            await discovery.client.aclose()
        for close in closing:
            await close()

    shell.on_startup(open_clients)
    shell.on_shutdown(close_clients)
    shell.consume(streams.discovery_consumer(settings), codec.RETEST, discovery.remember_retest)
    shell.consume(streams.discovery_live_consumer(settings), codec.LIVE, discovery.on_live)
    shell.background(discovery.run)
    shell.background(discovery.confirm_loop)
    return shell.app
