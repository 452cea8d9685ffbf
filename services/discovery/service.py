"""Discovery service: the cycle clock.

Each cycle, for every configured model: list the endpoints from the gateway,
publish ``EndpointsDiscovered`` with the plan, one ``ProbeTask`` per planned
probe onto the work queue, and ``CycleClosed`` at the deadline.  A cycle that
cannot be planned (the listing answers 401/402/403 or another 4xx, an
unparseable body, or the gateway stays unreachable or failing until the
deadline) is a fact on the log too: ``CycleUnplanned`` with its cause
(DESIGN.md, "The canary's own health"), never a silent skip.  Every message
has a deterministic id, so a restarted discovery repeating a step publishes
nothing twice.  The judge's ``RetestRequested`` events are kept in Redis until
the cycle they ask for is planned.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import httpx
from faststream import FastStream

from reverie_canary.services.discovery.core import coverage, cycle_start, plan, split
from reverie_canary.shared import clock, codec, ids, retry, streams, subjects, tracing
from reverie_canary.shared.broker import Delivery
from reverie_canary.shared.errors import Transient
from reverie_canary.shared.events import CycleClosed, CycleUnplanned, ProbeTask, RetestRequested
from reverie_canary.shared.openrouter import ListingFailed, list_endpoints, make_client
from reverie_canary.shared.service import Shell, redis_client
from reverie_canary.shared.settings import Settings
from reverie_canary.shared.streams import LOG, TASKS
from reverie_canary.shared.subjects import encode_token
from reverie_canary.shared.events import MAX_ENDPOINTS_PER_MODEL


#: Join the current cycle only while this share of its probe window is still ahead.
JOIN_WINDOW_SHARE = 0.9


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

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.settings = shell.settings
        self.client: httpx.AsyncClient | None = None
        self.redis = None

    def _retest_key(self, model: str, cycle_no: int) -> str:
        return f"{self.settings.namespace}:retest:{encode_token(model)}:{cycle_no}"

    async def remember_retest(self, event: RetestRequested, delivery: Delivery) -> None:
        """Keep a retest request until its cycle is planned (idempotent: a set)."""
        key = self._retest_key(event.model, event.for_cycle_no)
        try:
            await self.redis.sadd(key, f"{event.provider}\n{event.language}")
            await self.redis.expire(key, int(self.settings.cycle_interval_s * 4) + 60)
        except Exception as exc:  # redis.exceptions.RedisError and connection errors
            raise Transient(f"redis: {exc!r}") from exc

    async def _retests(self, model: str, cycle_no: int) -> list[tuple[str, str]]:
        try:
            raw = await self.redis.smembers(self._retest_key(model, cycle_no))
        except Exception as exc:
            self.shell.log.warning("retests_unavailable", model=model, error=repr(exc))
            return []
        out = []
        for item in raw:
            provider, _, language = (item.decode() if isinstance(item, bytes) else item).partition("\n")
            out.append((provider, language))
        return sorted(out)

    async def _carry_over(self, model: str, next_cycle_no: int, asked: list[tuple[str, str]],
                          tasks: list[ProbeTask]) -> None:
        """Retests of planned providers that waited for their turn move on to the next cycle.

        (``max_retests_per_cycle``; a provider no longer listed drops them.)
        Idempotent: a set, as :meth:`remember_retest`.
        """
        planned = {(t.provider, t.language) for t in tasks if t.kind == "language"}
        listed = {t.provider for t in tasks}
        waiting = [f"{p}\n{lang}" for p, lang in asked if p in listed and (p, lang) not in planned]
        if not waiting:
            return
        key = self._retest_key(model, next_cycle_no)
        try:
            await self.redis.sadd(key, *waiting)
            await self.redis.expire(key, int(self.settings.cycle_interval_s * 4) + 60)
        except Exception as exc:
            self.shell.log.warning("retests_not_carried", model=model, waiting=len(waiting), error=repr(exc))

    async def start_cycle(self, model: str, cycle_no: int) -> bool:
        """List, plan and publish one cycle of ``model``.

        Returns:
            ``True`` when the plan was published.

        Raises:
            ListingFailed: the listing cannot be used this cycle (401, 402, 403,
                another 4xx, an unparseable body): retrying will not mend it.
            Transient: gateway or NATS unavailable (the loop retries); its
                ``context["cause"]`` says which when the gateway (none: the bus).
        """
        s = self.settings
        assert self.client is not None
        endpoints = await list_endpoints(self.client, model)
        start = cycle_start(cycle_no, s.cycle_interval_s)
        retests = await self._retests(model, cycle_no)
        event, tasks = plan(
            model=model, cycle_no=cycle_no, start=start, window_s=s.probe_window_s, endpoints=endpoints,
            kinds=s.kinds, languages=s.languages, languages_per_cycle=s.languages_per_cycle,
            language_coverage_cycles=s.language_coverage_cycles, language_weights=s.language_weights,
            controls=s.controls, retests=retests, max_retests=s.max_retests_per_cycle,
        )
        await self._carry_over(model, cycle_no + 1, retests, tasks)
        pub = self.shell.publisher
        if event.listed > len(event.endpoints):
            self.shell.log.warning("endpoints_over_bound", model=model, listed=event.listed,
                                   watched=len(event.endpoints), bound=MAX_ENDPOINTS_PER_MODEL)
        parts = split(event)
        for part in parts:  # a large model's listing in parts that each fit the wire bound
            await pub.publish(part, subjects.discovery(model), ids.discovered_id(model, cycle_no, part.part), LOG)
        for task in tasks:
            # one probe is one trace: its root is the task (shared/tracing.py)
            with tracing.span("discovery task", root=True,
                              attributes={"canary.task_id": task.task_id, "canary.model": model,
                                          "canary.provider": task.provider, "canary.kind": task.kind,
                                          "canary.cycle": task.cycle}):
                await pub.publish(task, subjects.task(model, task.provider), task.task_id, TASKS)
        self.shell.log.info("cycle_started", model=model, cycle_no=cycle_no, endpoints=len(event.endpoints),
                            tasks=len(tasks), **({"parts": len(parts)} if len(parts) > 1 else {}))
        m = self.shell.metrics
        m.inc("cycles_started", model=model)
        m.inc("tasks_published", len(tasks), model=model)
        m.set("endpoints_listed", event.listed, model=model)
        m.set("cycle_started_at", start.timestamp(), model=model)
        return True

    async def close_cycle(self, model: str, cycle_no: int) -> bool:
        """Publish CycleClosed, stamped at the deadline; ``True`` once published."""
        s = self.settings
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
        s = self.settings
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
        """The start line: the models, the cycle and the bound on the time to detect a one-language defect (issue 12)."""
        s = self.settings
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

    async def run(self) -> None:
        """The cycle loop: start each cycle on time, close it at its deadline."""
        s = self.settings
        self.announce()
        cycle_no = next_cycle(time.time(), s.cycle_interval_s, s.probe_window_s, last=-1)
        while True:
            start = cycle_no * s.cycle_interval_s
            await asyncio.sleep(max(0.0, start - time.time()))
            deadline = start + s.probe_window_s
            started = []
            for model in s.models:
                if await self.plan_cycle(model, cycle_no, deadline):
                    started.append(model)
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

    async def open_clients() -> None:
        discovery.client = make_client(settings, timeout_s=30.0)
        discovery.redis = redis_client(settings)
        for model in settings.models:  # rates and alerts see the series before the first cycle
            for key in ("cycles_started", "tasks_published"):
                shell.metrics.touch(key, model=model)

    async def close_clients() -> None:
        if discovery.client is not None:
            await discovery.client.aclose()
        if discovery.redis is not None:
            await discovery.redis.aclose()

    shell.on_startup(open_clients)
    shell.on_shutdown(close_clients)
    shell.subscribe(streams.discovery_consumer(settings), codec.RETEST, discovery.remember_retest)
    shell.background(discovery.run)
    return shell.app
