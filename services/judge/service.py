"""Judge service: fold the log into provider state, publish verdicts and decisions.

One durable consumer (``judge-v1``) reads discovery events, probe results,
operator commands and routing snapshots in stream order, one at a time, so the
live fold sees exactly the order ``canary replay`` reads.  Each message:
decode, load, decide (:func:`reverie_canary.services.judge.core.decide`), save with the stream
position and the outbox, publish the outbox with deterministic ids.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from faststream import FastStream

from reverie_canary.services.judge import answers, gauges
from reverie_canary.services.judge.core import Effect, ModelState, Policy, decide, initial
from reverie_canary.services.judge.replay import scan_refold
from reverie_canary.services.judge.store import JudgeRecord, JudgeStore, Outbound, RedisJudgeStore
from reverie_canary.shared import eventlog, ids, inputs, metrics, streams, subjects, tracing
from reverie_canary.shared.broker import Delivery, Publisher
from reverie_canary.shared.events import (
    PROBE_KINDS,
    CommandApplied,
    CommandRefused,
    CycleVerdict,
    Decision,
    ProbeResult,
    RetestRequested,
)
from reverie_canary.shared.logging import get as get_logger
from reverie_canary.shared.service import Shell, nats_connect, redis_client
from reverie_canary.shared.settings import Settings
from reverie_canary.shared.streams import LOG

#: Every message that may arrive on the judge's subjects (:data:`reverie_canary.shared.inputs.READS`).
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
        case RetestRequested():
            return (subjects.retest(effect.model),
                    ids.retest_id(effect.model, effect.provider, effect.language, effect.for_cycle_no))
    raise TypeError(f"not an effect: {type(effect).__name__}")


class Judge:
    """Applies one event at a time through the store."""

    def __init__(self, store: JudgeStore, publisher: Publisher, policy: Policy, models: list[str],
                 rebuild: Callable[[int], Awaitable[list[str]]] | None = None, *,
                 cycle_interval_s: float = 1800.0, kinds: tuple[str, ...] = PROBE_KINDS) -> None:
        self.store = store
        self.publisher = publisher
        self.policy = policy
        self.models = models
        self.rebuild = rebuild
        self.cycle_interval_s = cycle_interval_s
        self.kinds = kinds
        #: model -> the state last loaded or saved (what the metrics show)
        self.latest: dict[str, ModelState] = {}
        #: task id -> the trace context of the span that handled its result (shared/tracing.py)
        self.traces = tracing.Contexts()

    async def load_latest(self) -> None:
        """Read every watched model's state, so that the metrics show it before the next event."""
        for model in self.models:
            self.latest[model] = (await self.store.load(model)).state

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
        """A decision's span: child of its first evidence result's span, linked to the others' (shared/tracing.py).

        Any other effect (a verdict, an answer) is published in the span of the message that made it.
        """
        if not isinstance(effect, Decision):
            return contextlib.nullcontext()
        found = [c for c in (self.traces.get(ref.task_id) for ref in effect.evidence) if c is not None]
        return tracing.span("judge decision", parent=found[0] if found else None, links=found[1:],
                            attributes={"canary.decision_id": effect.decision_id, "canary.model": effect.model,
                                        "canary.provider": effect.provider, "canary.action": effect.action,
                                        "canary.evidence": len(effect.evidence)})

    async def apply(self, event, delivery: Delivery) -> None:
        """Fold ``event`` into every watched model it concerns.

        Events of a model that is not configured are skipped (logged): any
        model name on the bus must not grow state.  A lift or mode command is
        answered once folded into every model it concerns (:mod:`reverie_canary.services.judge.answers`):
        the answer is saved in the last model's outbox with its position, so a
        redelivery gives the same answer; a command for a model that is not
        watched is refused.
        """
        model = getattr(event, "model", None)
        if model is None:
            return
        if isinstance(event, ProbeResult):
            self.traces.remember(event.task_id)
        command = isinstance(event, answers.JudgeCommand)
        if model == "*":
            targets = sorted(set(self.models) | set(await self.store.models()))
        elif model in self.models:
            targets = [model]
        else:
            get_logger("judge").info("model_not_watched", model=model, subject=delivery.subject)
            if command:
                await self.emit([answers.unknown_model(event, self.models)])
            return
        if not command:
            for target in targets:
                await self._apply_to(target, event, delivery.stream_seq)
            return
        produced: list[Effect] = []
        new = False

        def finish(effects: list[Effect], fresh: bool) -> list[Outbound]:
            reply = answers.answer(event, [*produced, *effects], new=new or fresh)
            return [reply] if reply is not None else []

        if not targets:
            await self.emit(finish([], True))
        for i, target in enumerate(targets):
            effects, fresh = await self._apply_to(target, event, delivery.stream_seq,
                                                  finish=finish if i == len(targets) - 1 else None)
            produced += effects
            new = new or fresh
        if not any(isinstance(e, Decision) for e in produced):
            get_logger("judge").warning("command_without_effect", command=type(event).__name__,
                                        command_id=event.command_id, actor=event.actor,
                                        provider=getattr(event, "provider", ""), model=model)

    async def apply_to(self, model: str, event, position: int | None) -> list[Effect]:
        """Apply ``event`` at stream ``position`` to ``model``; returns the effects published."""
        effects, _ = await self._apply_to(model, event, position)
        return effects

    async def _apply_to(self, model: str, event, position: int | None, *,
                        finish: Callable[[list[Effect], bool], list[Outbound]] | None = None
                        ) -> tuple[list[Effect], bool]:
        """Apply ``event`` at stream ``position`` to ``model``.

        Args:
            finish: for the last model of a command, what to add to its outbox
                (the answer) from the effects and whether the command was new here.

        Returns:
            The effects published (besides an answer), and whether ``event`` was
            new to this model (a command id it had not folded, or this very
            position again).
        """
        record = await self.store.load(model)
        if record.revision == 0 and self.rebuild is not None and not await self.store.initialized():
            # Redis lost its state under a running judge: refold what was applied before this event
            rebuilt = await self.rebuild((position or 1) - 1)
            get_logger("judge").warning("state_rebuilt_from_log", models=rebuilt, position=(position or 1) - 1,
                                        reason="Redis lost the judge's state while it ran")
            record = await self.store.load(model)
            self.latest[model] = record.state
        if position is not None and position <= record.position:
            if position == record.position:
                await self.emit(record.outbox)  # repair a crash between save and publish
                return [e for e in record.outbox if not isinstance(e, answers.Answer)], True
            return [], False
        fresh = getattr(event, "command_id", None) not in record.state.commands
        state, effects = decide(record.state, event, self.policy)
        outbox: list[Outbound] = [*effects, *(finish(effects, fresh) if finish is not None else [])]
        if state is record.state and not outbox and position is None:
            return [], fresh
        new = JudgeRecord(state=state, position=position if position is not None else record.position,
                          revision=record.revision + 1, outbox=outbox)
        await self.store.save(model, new, expected_revision=record.revision)
        self.latest[model] = state
        await self.emit(outbox)
        return effects, fresh


async def rebuild(js, store: JudgeStore, policy: Policy, models: list[str], until_seq: int) -> list[str]:
    """Fold the log again, up to ``until_seq``, into every model that has no stored record.

    Redis only stores the result of the fold (DESIGN.md, "The judge"): when its
    state is gone (flushed, replaced without persistence) the judge refolds the
    log the consumer had already applied, so the next event continues from where
    the lost state was.  Marks the store initialized.

    Returns:
        The models whose state was rebuilt.
    """
    missing = [m for m in models if (await store.load(m)).revision == 0]
    if missing and until_seq > 0:
        # streamed: the fold holds the states, never the log (a month of results would not fit)
        states = (await scan_refold(js, policy, positions={m: until_seq for m in missing}, until_seq=until_seq,
                                    keep=None)).states
        for model in missing:
            state = states.get(model) or initial(model)
            await store.save(model, JudgeRecord(state=state, position=until_seq, revision=1), expected_revision=0)
    await store.mark_initialized()
    return missing if until_seq > 0 else []


def create_app(settings: Settings | None = None) -> FastStream:
    """The judge's FastStream app."""
    settings = settings or Settings.load()
    shell = Shell("judge", settings)
    holder: dict[str, Judge] = {}

    async def open_store() -> None:
        client = redis_client(settings)
        checker = await nats_connect(settings)
        try:
            await streams.check_log_subjects(checker.jetstream(), [subjects.ALL_ANSWERS], "judge")
        finally:
            await checker.close()
        policy = Policy.from_settings(settings)
        store = RedisJudgeStore(client, settings.namespace)
        models = list(settings.models)
        nc = await shell.connect_nats("log reader")
        holder["redis"], holder["nats"] = client, nc  # type: ignore[assignment]

        async def rebuild_to(until_seq: int) -> list[str]:
            return await rebuild(nc.jetstream(), store, policy, models, until_seq)

        judge = holder["judge"] = Judge(store, shell.publisher, policy, models, rebuild=rebuild_to,
                                        cycle_interval_s=settings.cycle_interval_s, kinds=tuple(settings.kinds))
        if not await store.initialized():
            floor = await eventlog.acknowledged_position(nc.jetstream(), LOG, streams.judge_consumer(settings).durable)
            rebuilt = await rebuild_to(floor)
            if rebuilt:
                shell.log.warning("state_rebuilt_from_log", models=rebuilt, position=floor,
                                  reason="no state in Redis, but the log was already consumed")
        await judge.load_latest()
        shell.metrics.add_source(judge.samples)

    async def close_store() -> None:
        if "judge" in holder:
            shell.metrics.remove_source(holder["judge"].samples)
        for name in ("redis", "nats"):
            client = holder.get(name)
            if client is not None:
                await (client.aclose() if name == "redis" else client.close())  # type: ignore[attr-defined]

    async def apply(event, delivery: Delivery) -> None:
        await holder["judge"].apply(event, delivery)

    shell.on_startup(open_store)
    shell.on_shutdown(close_store)
    shell.subscribe(streams.judge_consumer(settings), JUDGE_INPUT, apply)
    return shell.app
