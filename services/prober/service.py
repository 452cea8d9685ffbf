"""Prober service: pull ProbeTasks from the shared durable, probe, publish ProbeResults.

Every replica binds the same durable (``prober-v2``), so tasks are spread
across probers (docs/concepts/messages.md, "Subjects").  A prober fetches a task
only when one of its workers is free and says it is in
progress every ``ack_wait / 4`` while it probes (:class:`~reverie_canary.shared.runtime.consumer.Consumer`), so
the consumer's ``ack_wait`` is a few seconds (:func:`reverie_canary.shared.runtime.streams.task_ack_wait_s`)
and a dead prober's tasks are redelivered to another within it, in the same
cycle.  A result is published with the task id
as ``Nats-Msg-Id`` before the task is acked, so a redelivered task's second
result is dropped by JetStream.  A task past its cycle's deadline is dropped
unprobed: its result could not count any more.

How many workers: what the cycle was sized to.  Every task
carries ``concurrency``, the probes each prober runs at once during its cycle,
which discovery derives from the plan, the measured probe times and the
window (:mod:`reverie_canary.services.discovery.sizing`); the prober takes the
latest task's number, never above its ceiling ``prober_concurrency`` (a task
without one: the ceiling).

Every request is bounded by the task's deadline as well as the request
timeout: it gets the lesser of ``request_timeout_s`` and the
time left before ``task.deadline`` less :data:`DEADLINE_MARGIN_S` (to judge
the reply and publish its result), and reads are capped
(:class:`reverie_canary.services.prober.http.ReadLimits`).

The event loop that reads the streams times every probe's tokens, so it does
no check: every reply is judged in the checks
thread (:meth:`Prober.judge`; a 300-token reply's language check alone is
1.6-4 ms, 11 ms at 8 KiB, which inline delayed the timestamp of every chunk
that came meanwhile), and the interpreter hands the GIL over every
:data:`SWITCH_INTERVAL_S` instead of 5 ms, so the loop waits at most about
that long for the checks thread when a chunk comes in.  What the prober
loaded at start is frozen out of the garbage collector's full passes
(:func:`freeze_startup_objects`), which otherwise held the GIL for 60-100 ms.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import socket
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import httpx
from faststream import FastStream

from reverie_canary.client.checks import Evaluation, evaluate
from reverie_canary.client.checks.language import warm_up
from reverie_canary.client.checks.letters import warm_up as warm_letters
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply
from reverie_canary.services.prober.clients import ClientPool
from reverie_canary.services.prober.core import run_probe
from reverie_canary.services.prober.http import ReadLimits, request_body, send_probe
from reverie_canary.services.prober.prompts import ProbeRequest, build
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import PROBE_KINDS, PROBE_PARAMETERS, ProbeResult, ProbeTask
from reverie_canary.shared.runtime import clock, metrics, retry, streams
from reverie_canary.shared.runtime.broker import Delivery
from reverie_canary.shared.runtime.config import ProberConfig, config_of
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.memory import HeapTrimmer
from reverie_canary.shared.runtime.service import Shell
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG

#: Kinds sent with ``provider.require_parameters: true``: those whose parameters the endpoint must
#: declare (``PROBE_PARAMETERS``: structured outputs, tools), so that the gateway refuses a request
#: an endpoint cannot take instead of dropping the parameter and answering something else.
CAPABILITY_KINDS = frozenset(PROBE_PARAMETERS)
#: Seconds kept before a task's deadline to judge the reply and publish the result.
DEADLINE_MARGIN_S = 0.5
#: Seconds kept before a task's deadline to publish its result once the checks are given up on.
PUBLISH_MARGIN_S = 0.1
log = get_logger("prober")
#: The deadline of the task whose probe runs in this context (the checks' wait is capped by it).
_TASK_DEADLINE: contextvars.ContextVar[datetime | None] = contextvars.ContextVar("task_deadline", default=None)
#: Seconds a thread may hold the GIL while another waits for it (``sys.setswitchinterval``,
#: CPython's default 5 ms): the event loop's wait for the checks thread when a chunk comes in.
SWITCH_INTERVAL_S = 0.001


#: Replies judged once at start (:func:`warm_checks`): plain, accented, and with mojibake (the
#: encoding check builds its code-page tables and patterns on the first reply that needs them).
WARM_REPLIES = ("The lighthouse keeper counted nine ships before the fog rolled in.",
                "O farol ergue-se sobre as rochas; a luz varre o mar à noite, é verdade.",
                "CafÃ© au lait, sâ€™il vous plaÃ®t.")


def warm_checks() -> None:
    """Load the language detectors and run every kind's checks once, so nothing loads on a live reply.

    About 0.6 s of CPU at start (the detectors' models, compiled
    patterns, every language's letters and the Han character sets); on the
    first live replies it would hold the GIL while other probes' tokens come in.
    """
    warm_up()
    warm_letters()
    for kind in PROBE_KINDS:
        spec = build(kind, "en").spec
        for text in WARM_REPLIES:
            evaluate(Reply(text=text, finish_reason="stop", http_status=200, ttft_ms=1.0, total_ms=2.0), spec)


def freeze_startup_objects() -> None:
    """Leave what the prober loaded at start out of the garbage collector's full passes (``gc.freeze``).

    The language detectors, the compiled checks and the libraries are some 150,000
    objects that live as long as the process; a full (generation 2) collection walked
    them all, 60-100 ms with the GIL held, about twice per 1,000 probes at 64 in flight:
    every chunk that came meanwhile was stamped that much late (the TTFT
    error's max and p99).  Frozen, a full pass walks only what came since (about 20 ms).
    """
    gc.collect()
    gc.freeze()


def requests_in_flight(settings: Settings) -> int:
    """The most chat requests one prober has open at once: each probe in flight, and a language
    probe's confirmations sent beside it (``prober_concurrency x (1 + language_confirmations)``)."""
    return settings.prober_concurrency * (1 + settings.language_confirmations)


class Prober:
    """Runs probes for one prober process."""

    def __init__(self, settings: Settings, client: httpx.AsyncClient | ClientPool | None = None) -> None:
        #: The settings a prober reads (:class:`reverie_canary.shared.runtime.config.ProberConfig`).
        self.config = config_of(settings, ProberConfig)
        self.client = client
        self.prober_id = settings.prober_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.limits = ReadLimits.from_settings(settings)
        self._checks_pool: ThreadPoolExecutor | None = None
        #: Probes this prober runs at once now: the latest task's ``concurrency``, at most the ceiling.
        self.concurrency = settings.prober_concurrency
        #: Gives the C heap back after a large (hostile) read: its RSS must not keep a 20 MB reply's pieces.
        self.heap = HeapTrimmer()

    def size(self, task: ProbeTask) -> int | None:
        """Take the concurrency ``task``'s cycle was sized to; the new number when it changed, else ``None``."""
        wanted = min(self.config.prober_concurrency, task.concurrency or self.config.prober_concurrency)
        if wanted == self.concurrency:
            return None
        self.concurrency = wanted
        return wanted

    async def send(self, task: ProbeTask, probe: ProbeRequest) -> Reply:
        """Send one pinned request for ``task`` (the port :mod:`reverie_canary.services.prober.core` uses).

        The request gets ``min(request_timeout_s, time left before task.deadline
        - DEADLINE_MARGIN_S)``; none left: ``transport_error`` / ``task_deadline``
        without a request.
        """
        assert self.client is not None, "Prober.send before start"
        body = request_body(task.model, task.provider, probe, require_parameters=task.kind in CAPABILITY_KINDS,
                            supported_parameters=task.supported_parameters)
        left_s = (task.deadline - clock.now()).total_seconds() - DEADLINE_MARGIN_S
        total_s = min(self.config.request_timeout_s, left_s)
        if total_s <= 0:
            return Reply(transport_error="task_deadline", total_ms=0.0)
        ttft_deadline = self.config.ttft_threshold_s * 1.05 if task.kind == "ttft" else None
        if isinstance(self.client, ClientPool):
            with self.client.lease() as client:
                return await send_probe(client, body, ttft_deadline_s=ttft_deadline, total_timeout_s=total_s,
                                        limits=self.limits)
        return await send_probe(self.client, body, ttft_deadline_s=ttft_deadline, total_timeout_s=total_s,
                                limits=self.limits)

    async def judge(self, reply: Reply, spec: ProbeSpec) -> Evaluation:
        """Run the checks on ``reply`` in the checks thread: the event loop goes on timing other probes' tokens.

        The checks thread is one queue for every probe in flight: on a starved machine a reply can
        wait in it past its task's deadline, and a result published after the deadline counts as
        missing at the cycle's close.  So the wait ends :data:`PUBLISH_MARGIN_S` before the task's
        deadline: ``inconclusive`` / ``checks_overdue`` then (the canary's own lateness, never the
        provider's), and a check not yet started is dropped from the queue.
        """
        if self._checks_pool is None:
            self._checks_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prober-checks")
        pending = asyncio.get_running_loop().run_in_executor(self._checks_pool, evaluate, reply, spec)
        deadline = _TASK_DEADLINE.get()
        if deadline is None:
            return await pending
        left_s = (deadline - clock.now()).total_seconds() - PUBLISH_MARGIN_S
        try:
            return await asyncio.wait_for(pending, timeout=max(0.0, left_s))
        except TimeoutError:
            log.warning("checks_overdue", deadline=deadline.isoformat(), waited_s=round(max(0.0, left_s), 3))
            late = CheckResult(check="checks", outcome="inconclusive", reason="checks_overdue",
                               evidence={"waited_ms": round(max(0.0, left_s) * 1000.0, 1)})
            return Evaluation(outcome="inconclusive", reason="checks_overdue", checks=[late])

    def close(self) -> None:
        """Stop the checks thread (after the last probe)."""
        if self._checks_pool is not None:
            self._checks_pool.shutdown(wait=False, cancel_futures=True)
            self._checks_pool = None

    async def probe(self, task: ProbeTask):
        """Run ``task`` and return its ProbeResult (its outcome, time to first token and spend counted)."""
        started = time.perf_counter()
        _TASK_DEADLINE.set(task.deadline)  # this probe's own context: asyncio runs each task in a copy
        result = await run_probe(
            task,
            self.send,
            clock.now,
            max_tokens=self.config.max_tokens,
            ttft_threshold_s=self.config.ttft_threshold_s,
            confirmations=self.config.language_confirmations,
            prober=self.prober_id,
            judge=self.judge,
        )
        record(result, time.perf_counter() - started)
        read = max([a.reply.wire_bytes for a in result.attempts] or [result.reply.wire_bytes])
        self.heap.read(read)  # a hostile reply's freed pieces go back to the system, not into RSS for good
        return result


def record(result: ProbeResult, seconds: float) -> None:
    """Count one finished probe in the prober's series.

    ``canary_probes_total`` by model, provider, kind, outcome and reason; the
    time to first token of every reply that produced text (the confirmations of
    a language probe too); tokens and USD from each request's ``usage``.
    """
    m = metrics.of("prober")
    who = {"model": result.model, "provider": result.provider}
    m.inc("probes", **who, kind=result.kind, outcome=result.outcome, reason=result.reason or "none")
    m.observe("probe_seconds", seconds, kind=result.kind)
    replies = [a.reply for a in result.attempts] or [result.reply]
    for reply in replies:
        if reply.ttft_ms is not None:
            m.observe("ttft", reply.ttft_ms / 1000.0, **who)
        usage = reply.usage or {}
        for kind in ("prompt", "completion"):
            tokens = usage.get(f"{kind}_tokens")
            if isinstance(tokens, int | float) and tokens > 0:
                m.inc("probe_tokens", float(tokens), **who, type=kind)
        cost = usage.get("cost")
        if isinstance(cost, int | float) and cost > 0:
            m.inc("probe_cost", float(cost), **who)


async def publish_result(publisher, task: ProbeTask, result: ProbeResult) -> None:
    """Publish ``result`` (``Nats-Msg-Id`` = the task id), retrying a failed publish while the task's deadline allows.

    A publish JetStream did not acknowledge (its stream's leader lost, a
    cluster failing over) is tried again with the same id after
    :data:`reverie_canary.shared.runtime.retry.RESULT`'s delays, the task kept alive
    meanwhile, rather than given back to be probed again: a reply already
    judged is not asked for twice.

    Raises:
        Transient: when the next wait would end past the task's deadline (the task is
            then redelivered: :mod:`reverie_canary.shared.runtime.settle`).
    """
    subject = subjects.result(task.model, task.provider)
    attempt = 0
    while True:
        try:
            await publisher.publish(result, subject, task.task_id, LOG)
            return
        except Transient:
            attempt += 1
            wait_s = retry.RESULT.delay(attempt)
            if (task.deadline - clock.now()).total_seconds() <= wait_s:
                raise
            await asyncio.sleep(wait_s)


def create_app(settings: Settings | None = None) -> FastStream:
    """The prober's FastStream app."""
    settings = settings or Settings.load()
    shell = Shell("prober", settings, uses_redis=False)
    prober = Prober(settings)

    async def open_client() -> None:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        prober.client = ClientPool(settings, requests_in_flight(settings))
        # load the language detectors and everything the checks import or compile on first use now
        # (~0.5 s of CPU): done on the first replies, it would hold the GIL while probes are in flight
        # and inflate their time to first token
        await asyncio.to_thread(warm_checks)
        freeze_startup_objects()

    async def close_client() -> None:
        if prober.client is not None:
            await prober.client.aclose()
        prober.close()

    async def apply(task: ProbeTask, delivery: Delivery) -> None:
        changed = prober.size(task)
        if changed is not None:
            shell.log.info("concurrency_sized", concurrency=changed, ceiling=settings.prober_concurrency,
                           cycle=task.cycle, asked=task.concurrency)
            shell.metrics.set("prober_concurrency", changed)
        if clock.now() >= task.deadline:
            shell.log.info("task_expired", task_id=task.task_id, deadline=task.deadline.isoformat())
            shell.metrics.inc("tasks_expired", model=task.model)
            return
        result = await prober.probe(task)
        await publish_result(shell.publisher, task, result)
        shell.log.debug("probe_done", task_id=task.task_id, outcome=result.outcome, reason=result.reason)

    shell.on_startup(open_client)
    shell.on_shutdown(close_client)
    shell.consume(streams.prober_consumer(settings), codec.PROBE_TASK, apply, workers=lambda: prober.concurrency)
    return shell.app
