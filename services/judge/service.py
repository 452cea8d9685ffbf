"""Judge service: fold the log into provider state, publish verdicts and decisions.

One durable consumer (``judge-v1``) reads discovery events, probe results,
operator commands and routing snapshots in stream order, in batches of up to
:data:`reverie_canary.shared.runtime.streams.JUDGE_BATCH` (:class:`reverie_canary.shared.runtime.consumer.Consumer`
proves each batch is the log's next messages), so the live fold sees exactly
the order ``canary replay`` reads.  Each batch: decode, fold into the states
held in memory (:class:`reverie_canary.services.judge.core.Folder`: the same fold as
:func:`reverie_canary.services.judge.core.decide`), save every model it touched with
its position and outbox in one atomic step under the judge's lease, publish
the outbox with deterministic ids, acknowledge.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from faststream import FastStream

from reverie_canary.services.judge import gauges, snapshots
from reverie_canary.services.judge.core import (
    Answer,
    Effect,
    Folder,
    JudgeCommand,
    ModelState,
    Policy,
    command_targets,
    fold_command,
    initial,
)
from reverie_canary.services.judge.replay import scan_refold
from reverie_canary.services.judge.store import Fenced, JudgeRecord, JudgeStore, ModelChange, Outbound, RedisJudgeStore
from reverie_canary.shared.contract import ids, inputs, subjects
from reverie_canary.shared.contract.errors import TooLarge, Transient
from reverie_canary.shared.contract.events import (
    FACT_KINDS,
    JUDGED_KINDS,
    CommandApplied,
    CommandRefused,
    CycleVerdict,
    Decision,
    LiveConfirmation,
    ProbeResult,
    RetestRequested,
)
from reverie_canary.shared.runtime import clock, eventlog, metrics, streams, tracing
from reverie_canary.shared.runtime.broker import Delivery, Publisher, _span_attributes
from reverie_canary.shared.runtime.config import JudgeConfig, RuntimeConfig, config_of
from reverie_canary.shared.runtime.consumer import Retake
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.service import Shell, redis_client
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG

#: Every message that may arrive on the judge's subjects (:data:`reverie_canary.shared.contract.inputs.READS`).
JUDGE_INPUT = inputs.decoder("judge")


def effect_address(effect: Outbound) -> tuple[str, str]:
    """Subject and ``Nats-Msg-Id`` of one effect (or command answer)."""
    match effect:
        case CommandApplied() | CommandRefused():
            return subjects.answer("judge", effect.command_id), effect.answer_id
        case CycleVerdict():
            return subjects.verdicts(effect.model), ids.verdict_id(effect.model, effect.cycle_no)
        case Decision():
            return subjects.decision(effect.model, effect.provider or None), effect.decision_id
        case LiveConfirmation():
            return subjects.confirmation(effect.model, effect.provider), ids.confirmation_id(effect.task_id)
        case RetestRequested():
            return (subjects.retest(effect.model),
                    ids.retest_id(effect.model, effect.provider, effect.language, effect.for_cycle_no))
    raise TypeError(f"not an effect: {type(effect).__name__}")


#: Seconds the judge's lease lasts without a renewal (renewed every third of it while the judge runs).
LEASE_TTL_S = 30.0
class Judge:
    """Folds batches of events into the states it holds in memory, the only writer of the store.

    The states of every model are loaded once (when the judge takes the store's lease) and kept;
    a batch is folded into them (:class:`reverie_canary.services.judge.core.Folder`), then every
    model it touched is saved with its position and outbox in one atomic step that checks the
    lease (:meth:`JudgeStore.commit`), then the outbox is published with deterministic ids.  A
    batch that cannot be saved leaves the held states as they were (nothing of it is kept), so
    it can be folded again; one saved but not published is published again before the next
    batch (and by the next judge that reads the records).  An event at or below a model's
    position was applied before and is skipped: redelivery changes nothing.

    Args:
        rebuild: refold the log up to a stream sequence into the models the store lost
            (:func:`rebuild`); called when the store has no marker of having held the state.
        floor: the stream sequence the durable has acknowledged (where a rebuild at start ends).
        owner: who holds the lease (host and process; shown to a judge that must wait).
        snapshots: writes the states every so many applied events, for rebuilds
            (:mod:`reverie_canary.services.judge.snapshots`).
    """

    def __init__(self, store: JudgeStore, publisher: Publisher, policy: Policy, models: list[str],
                 rebuild: Callable[[int], Awaitable[list[str]]] | None = None, *,
                 cycle_interval_s: float = 1800.0, kinds: tuple[str, ...] = JUDGED_KINDS,
                 floor: Callable[[], Awaitable[int]] | None = None, owner: str | None = None,
                 lease_ttl_s: float = LEASE_TTL_S, snapshots: snapshots.SnapshotWriter | None = None) -> None:
        self.store = store
        self.publisher = publisher
        self.policy = policy
        self.models = models
        self.rebuild = rebuild
        self.floor = floor
        self.cycle_interval_s = cycle_interval_s
        self.kinds = kinds
        self.owner = owner or f"judge@{socket.gethostname()}:{os.getpid()}"
        self.lease_ttl_s = lease_ttl_s
        self.snapshots = snapshots
        #: model -> the state last loaded or saved (what the metrics show)
        self.latest: dict[str, ModelState] = {}
        #: task id -> the trace context of the span that handled its result (shared/runtime/tracing.py)
        self.traces = tracing.Contexts()
        #: model -> its record as saved (state, position, revision, outbox, sent)
        self.records: dict[str, JudgeRecord] = {}
        self.folder = Folder(policy)
        self.lease: str | None = None
        self.generation = 0  # +1 each time the lease is taken: the consumer proves its order again
        self.loaded = False
        self.applied_through = 0  # the highest stream sequence of a saved batch
        self._renewed_at = 0.0
        self._said_standby = False
        #: Who holds the lease while this judge stands by ("" while it holds the lease, or before it asked).
        self.standby_for = ""
        self._holding = asyncio.Lock()

    # -- the lease and the records in memory --------------------------------------------------------

    async def hold(self) -> bool:
        """Whether this judge holds the store's lease now (taken or renewed here when due).

        Raises:
            Transient: the store is unreachable.
        """
        if self.lease is not None and time.monotonic() - self._renewed_at < self.lease_ttl_s / 3:
            return True
        async with self._holding:  # the pull loop and the renewal loop ask at once: one asks Redis
            return await self._hold()

    async def _hold(self) -> bool:
        log = get_logger("judge")
        if self.lease is not None and time.monotonic() - self._renewed_at < self.lease_ttl_s / 3:
            return True
        if self.lease is not None:
            if await self.store.renew(self.lease, self.lease_ttl_s):
                self._renewed_at = time.monotonic()
                return True
            log.warning("judge_lease_lost", owner=self.owner,
                        reason="the lease expired or is gone (Redis restarted or flushed): the records are read again")
            self._forget()
        token, holder = await self.store.acquire(self.owner, self.lease_ttl_s)
        series = metrics.of("judge")
        if token is None:
            self.standby_for = holder or "another judge"
            series.set("judge_lease_held", 0)
            if not self._said_standby:
                log.warning("judge_standby", owner=self.owner, holder=holder,
                            reason="another judge holds the lease: this one takes no message until it is free")
                self._said_standby = True
            return False
        self.lease, self._renewed_at, self._said_standby = token, time.monotonic(), False
        self.standby_for = ""
        series.set("judge_lease_held", 1)
        self.generation += 1
        self.loaded = False
        log.info("judge_lease_taken", owner=self.owner, ttl_s=self.lease_ttl_s)
        return True

    async def renew(self) -> None:
        """Renew the lease when due (the service's background loop; a batch does it too)."""
        if self.lease is not None:
            await self.hold()

    async def release(self) -> None:
        """Give the lease up (at shutdown: another judge may take it at once)."""
        if self.lease is not None:
            await self.store.release(self.lease)
            self._forget()

    def note(self) -> str:
        """What ``/readyz`` adds while this judge stands by (it is alive and ready to take over, not folding)."""
        return f"standby: {self.standby_for} holds the lease; this judge takes no message until it is free" \
            if self.standby_for else ""

    def _forget(self) -> None:
        metrics.of("judge").set("judge_lease_held", 0)
        self.lease, self.loaded = None, False
        self.records, self.folder = {}, Folder(self.policy)

    async def start(self) -> None:
        """Take the lease if it is free and read the records (rebuilt first if the store lost them).

        Without the lease (another judge runs) only the watched models' states are read, for the metrics.
        """
        if await self.hold():
            await self._load(None)
        else:
            await self.load_latest()

    async def load_latest(self) -> None:
        """Read every watched model's state, so that the metrics show it before the next event."""
        for model, record in (await self.store.load_many(list(self.models))).items():
            self.latest[model] = record.state

    async def _load(self, until: int | None) -> None:
        """Read every record into memory (rebuilt from the log first if the store lost them), publish unsent outboxes.

        Args:
            until: the stream sequence everything before the batch at hand was applied to
                (``None``: the durable's acknowledged position).
        """
        if self.rebuild is not None and not await self.store.initialized():
            if until is None:
                until = await self.floor() if self.floor is not None else 0
            until = max(until, self.applied_through)
            rebuilt = await self.rebuild(until)
            if rebuilt:
                get_logger("judge").warning("state_rebuilt_from_log", models=rebuilt, position=until,
                                            reason="no state in Redis, but the log was already consumed")
        known = sorted(set(self.models) | set(await self.store.models()))
        self.records = await self.store.load_many(known)
        self.folder = Folder(self.policy, {m: r.state for m, r in self.records.items()})
        for model in self.models:
            self.latest[model] = self.records[model].state
        self.loaded = True
        await self._publish_unsent()

    async def _ready(self, until: int | None) -> None:
        if not await self.hold():
            raise Retake("another judge holds the lease")
        if not self.loaded:
            await self._load(until)
        else:
            await self._publish_unsent()

    async def _publish_unsent(self) -> None:
        """Publish every saved outbox not known to be published (a crash between save and publish), oldest first."""
        unsent = sorted((r.position, m) for m, r in self.records.items() if r.unsent)
        if not unsent:
            return
        for _, model in unsent:
            await self.emit(self.records[model].outbox)
        done = {model: self.records[model].position for _, model in unsent}
        await self.store.mark_sent(done)
        for model, position in done.items():
            self.records[model].sent = position

    def samples(self):
        """The state series of every model this judge holds (:mod:`reverie_canary.services.judge.gauges`)."""
        return gauges.samples(self.latest, self.policy, cycle_interval_s=self.cycle_interval_s,
                              kinds=self.kinds)

    async def emit(self, effects: list[Outbound]) -> None:
        """Publish effects (idempotent: deterministic ids); count each one JetStream stored."""
        series = metrics.of("judge")
        for effect in effects:
            subject, msg_id = effect_address(effect)
            with self._decision_span(effect):
                stored = await self.publisher.publish(effect, subject, msg_id, LOG)
            if not stored:  # a republished outbox: counted the first time
                continue
            if isinstance(effect, Decision):
                series.inc("decisions", model=effect.model, action=effect.action)
            elif isinstance(effect, CycleVerdict):
                for verdict in effect.verdicts:
                    series.inc("verdicts", model=effect.model, verdict=verdict.verdict)

    def _decision_span(self, effect: Outbound):
        """A decision's span: child of its first evidence result's span, linked to the others' (shared/runtime/tracing.py).

        Any other effect (a verdict, an answer) is published in the span of the message that made it.
        """
        if not isinstance(effect, Decision) or not tracing.enabled():
            return contextlib.nullcontext()
        found = [c for c in (self.traces.get(ref.task_id) for ref in effect.evidence) if c is not None]
        return tracing.span("judge decision", parent=found[0] if found else None, links=found[1:],
                            attributes={"canary.decision_id": effect.decision_id, "canary.model": effect.model,
                                        "canary.provider": effect.provider, "canary.action": effect.action,
                                        "canary.evidence": len(effect.evidence)})

    # -- batches --------------------------------------------------------------------------------------

    async def apply(self, event, delivery: Delivery) -> None:
        """Fold one event (a batch of one).

        Raises:
            Rejected: what it made is above the wire bound (dead-letter it).
            Transient: see :meth:`apply_batch`.
        """
        for _, exc in await self.apply_batch([(event, delivery)]):
            raise exc

    async def apply_to(self, model: str, event, position: int | None) -> list[Effect]:
        """Apply ``event`` at stream ``position`` to ``model`` only; returns the effects published."""
        delivery = Delivery(subject="", stream_seq=position, deliveries=1, headers={})
        record = self.records.get(model)
        repaired = list(record.outbox) if record is not None and record.unsent and record.position == position else []
        _, effects = await self._apply([(event, delivery)], only=model)
        return [*[e for e in repaired if not isinstance(e, Answer)], *effects]

    async def apply_batch(self, items: list[tuple[Any, Delivery]]) -> list[tuple[int, Exception]]:
        """Fold ``items`` (in stream order) into every watched model each concerns; save once; publish.

        Events of a model that is not configured are skipped (logged): any model name on the bus
        must not grow state.  A lift or mode command is answered once folded into every model
        it concerns (:func:`reverie_canary.services.judge.core.fold_command`): the answer is saved in the
        outbox of the last model it changed, so a redelivery gives the same answer; a command
        for a model that is not watched is refused.

        Returns:
            ``(index, Rejected)`` of the items whose effects are above the wire bound (their
            state is saved; the item is to be dead-lettered).

        Raises:
            Retake: the lease was lost (or another judge holds it): nothing of the batch was saved.
            Transient: the store or NATS failed; nothing was saved, or what was saved is
                published before the next batch.
        """
        refused, _ = await self._apply(items)
        return refused

    async def _apply(self, items: list[tuple[Any, Delivery]], *, only: str | None = None
                     ) -> tuple[list[tuple[int, Exception]], list[Effect]]:
        floor = min((d.stream_seq for _, d in items if d.stream_seq is not None), default=1) - 1
        await self._ready(floor)
        try:
            return await self._fold_save_publish(items, only)
        except Fenced:
            # the lease went while the batch folded (expired, Redis restarted empty or flushed, another
            # judge): nothing was saved; read the records again, then order the batch again
            self._forget()
            raise Retake("the judge's lease went away while the batch was folded") from None

    async def _fold_save_publish(self, items: list[tuple[Any, Delivery]], only: str | None
                                 ) -> tuple[list[tuple[int, Exception]], list[Effect]]:
        log = get_logger("judge")
        folder = self.folder
        folder.share()  # the saved states stay as they are until this batch is saved
        batch = _Batch(positions={m: r.position for m, r in self.records.items()})
        watched = set(self.models)
        for index, (event, delivery) in enumerate(items):
            self._fold_one(batch, index, event, delivery, only)
        touched, outboxes, ordered, produced_for_only = batch.touched, batch.outboxes, batch.ordered, batch.only
        changes = []
        for model, position in touched.items():
            record = self.records.get(model) or JudgeRecord(state=initial(model))
            changes.append(ModelChange(model=model, before=record.state if record.revision else None,
                                       after=folder.state(model), position=position,
                                       expected_revision=record.revision, outbox=outboxes.get(model, [])))
        try:
            await self.store.commit(changes, lease=self.lease)
        except BaseException:
            self.folder = Folder(self.policy, {m: r.state for m, r in self.records.items()})  # the batch is undone
            raise
        for change in changes:
            previous = self.records.get(change.model)
            self.records[change.model] = JudgeRecord(state=change.after, position=change.position,
                                                     revision=change.revision, outbox=change.outbox,
                                                     sent=previous.sent if previous is not None else 0)
            if change.model in watched:
                self.latest[change.model] = change.after
        self.applied_through = max([self.applied_through, *(d.stream_seq or 0 for _, d in items)])
        refused: list[tuple[int, Exception]] = []
        for index, effect in ordered:
            try:
                await self.emit([effect])
            except TooLarge as exc:  # the item that made it is dead-lettered; the rest goes on
                refused.append((index, exc))
        sent = {change.model: change.position for change in changes if change.outbox}
        if sent:
            try:
                await self.store.mark_sent(sent)
            except Transient as exc:  # published: at worst published again (same ids) by the next judge
                log.warning("outbox_not_marked", models=sorted(sent), error=str(exc))
            else:
                for model, position in sent.items():
                    self.records[model].sent = position
        if self.snapshots is not None and self.snapshots.due(len(items)):
            await self.snapshots.write({m: r.state for m, r in self.records.items()}, self.applied_through,
                                       clock.now())
        return refused, produced_for_only

    def _fold_one(self, batch: _Batch, index: int, event: Any, delivery: Delivery, only: str | None) -> None:
        """Fold one item of a batch into every model it concerns (the core decides which, and the answer)."""
        model = getattr(event, "model", None)
        if model is None:
            return
        targets, refusal = ([only], None) if only is not None else command_targets(event, self.models, self.records)
        if targets is None:
            get_logger("judge").info("model_not_watched", model=model, subject=delivery.subject)
            if refusal is not None:
                batch.ordered.append((index, refusal))
            return
        span = (tracing.span(f"judge {type(event).__name__}", headers=delivery.headers,
                             attributes=_span_attributes(event, delivery))
                if tracing.enabled() else contextlib.nullcontext())
        with span:
            if isinstance(event, ProbeResult):
                self.traces.remember(event.task_id)
            seq = delivery.stream_seq
            pending = [t for t in targets if seq is None or seq > batch.positions.get(t, 0)]  # else applied before
            if isinstance(event, JudgeCommand):
                made, reply = fold_command(self.folder, event, targets, pending)
            else:
                made, reply = {t: self.folder.apply(t, event) for t in pending}, None
            for target in pending:
                if seq is not None:
                    batch.positions[target] = seq
                batch.touched[target] = batch.positions.get(target, 0)
                batch.outboxes.setdefault(target, []).extend(made[target])
                batch.ordered.extend((index, e) for e in made[target])
                if only is not None:
                    batch.only += made[target]
            if reply is None:
                return
            batch.ordered.append((index, reply))
            if pending:  # saved with the last model it changed: a redelivery gives the same answer
                batch.outboxes[pending[-1]].append(reply)
            if isinstance(reply, CommandRefused) or not reply.changed:
                get_logger("judge").warning("command_without_effect", command=type(event).__name__,
                                            command_id=event.command_id, actor=event.actor, model=model,
                                            said=getattr(reply, "detail", "") or getattr(reply, "reason", ""))


@dataclass
class _Batch:
    """What folding one batch made so far: positions, models touched, outboxes, effects in order."""

    positions: dict[str, int]
    touched: dict[str, int] = dataclass_field(default_factory=dict)
    outboxes: dict[str, list[Outbound]] = dataclass_field(default_factory=dict)
    ordered: list[tuple[int, Outbound]] = dataclass_field(default_factory=list)  # (item, effect) as made
    only: list[Effect] = dataclass_field(default_factory=list)  # what apply_to's one model produced

async def rebuild(js, store: JudgeStore, policy: Policy, models: list[str], until_seq: int) -> list[str]:
    """Fold the log again, up to ``until_seq``, into every model that has no stored record.

    Redis only stores the result of the fold (docs/concepts/judge.md): when its
    state is gone (flushed, replaced without persistence) the judge refolds the
    log the consumer had already applied, so the next event continues from where
    the lost state was.  The fold starts from the newest snapshot at or below
    ``until_seq`` (:mod:`reverie_canary.services.judge.snapshots`), else from the
    log's start.  Marks the store initialized.

    Returns:
        The models whose state was rebuilt.
    """
    missing = [m for m in models if (await store.load(m)).revision == 0]
    if missing and until_seq > 0:
        snapshot = await snapshots.latest(js, until_seq)
        # streamed: the fold holds the states, never the log (a month of results would not fit)
        states = (await scan_refold(js, policy, positions=dict.fromkeys(missing, until_seq), until_seq=until_seq,
                                    keep=None, snapshot=snapshot)).states
        get_logger("judge").info("state_refolded", models=missing, until=until_seq,
                                 from_snapshot=snapshot.position if snapshot is not None else None)
        for model in missing:
            state = states.get(model) or initial(model)
            await store.save(model, JudgeRecord(state=state, position=until_seq, revision=1), expected_revision=0)
    await store.mark_initialized()
    return missing if until_seq > 0 else []


def create_app(settings: Settings | None = None) -> FastStream:
    """The judge's FastStream app."""
    settings = settings or Settings.load()
    shell = Shell("judge", settings)
    wiring = JudgeWiring(shell, settings)
    shell.on_startup(wiring.open)
    shell.on_shutdown(wiring.close)
    spec = streams.judge_consumer(settings)
    shell.consume(spec, JUDGE_INPUT, fold=wiring.apply, batch=spec.max_ack_pending, gate=wiring.gate,
                  generation=wiring.generation)
    shell.background(wiring.keep_lease)
    return shell.app


class JudgeWiring:
    """The judge's clients, opened at start on the service's connection and closed at the stop."""

    def __init__(self, shell: Shell, settings: Settings) -> None:
        self.shell = shell
        self.settings = settings
        self.redis: Any = None
        self._judge: Judge | None = None

    @property
    def judge(self) -> Judge:
        if self._judge is None:
            raise Transient("the judge has not started")
        return self._judge

    async def open(self) -> None:
        settings, shell = self.settings, self.shell
        js = shell.connection.jetstream()
        await streams.check_log_subjects(js, [subjects.ALL_ANSWERS, subjects.ALL_CONFIRMATIONS], "judge")
        self.redis = redis_client(settings)
        config = config_of(settings, JudgeConfig)
        policy = Policy.from_config(config)
        store = RedisJudgeStore(self.redis, config_of(settings, RuntimeConfig).namespace)
        models = list(config.models)

        async def rebuild_to(until_seq: int) -> list[str]:
            return await rebuild(js, store, policy, models, until_seq)

        async def floor() -> int:
            return await eventlog.acknowledged_position(js, LOG, streams.judge_consumer(settings).durable)

        self._judge = Judge(store, shell.publisher, policy, models, rebuild=rebuild_to,
                            cycle_interval_s=config.cycle_interval_s, kinds=(*config.kinds, *FACT_KINDS), floor=floor,
                            snapshots=snapshots.SnapshotWriter(js, config.judge_snapshot_events))
        await self._judge.start()
        shell.metrics.add_source(self._judge.samples)
        shell.note = self._judge.note

    async def close(self) -> None:
        if self._judge is not None:
            self.shell.metrics.remove_source(self._judge.samples)
            with contextlib.suppress(Transient):  # Redis away: the lease runs out on its own
                await self._judge.release()
        if self.redis is not None:
            await self.redis.aclose()

    async def apply(self, items: list[tuple[Any, Delivery]]) -> list[tuple[int, Exception]]:
        return await self.judge.apply_batch(items)

    async def gate(self) -> bool:
        return await self.judge.hold()

    def generation(self) -> int:
        return self._judge.generation if self._judge is not None else 0

    async def keep_lease(self) -> None:
        """Renew the lease every third of its life, also while a long batch or a rebuild runs."""
        while True:
            await asyncio.sleep(self._judge.lease_ttl_s / 3 if self._judge is not None else LEASE_TTL_S / 3)
            with contextlib.suppress(Transient):  # Redis away, or not started yet: the next turn tries again
                await self.judge.renew()
