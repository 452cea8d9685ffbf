"""Judge service: fold the log into provider state, publish verdicts and decisions.

One durable consumer (``judge-v1``) reads discovery events, probe results,
operator commands and routing snapshots in stream order, one at a time, so the
live fold sees exactly the order ``canary replay`` reads.  Each message:
decode, load, decide (:func:`reverie_canary.services.judge.core.decide`), save with the stream
position and the outbox, publish the outbox with deterministic ids.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream import FastStream

from reverie_canary.services.judge.core import Effect, Policy, decide, initial
from reverie_canary.services.judge.replay import JUDGE_SUBJECTS, refold
from reverie_canary.services.judge.store import JudgeRecord, JudgeStore, RedisJudgeStore
from reverie_canary.shared import eventlog, ids, metrics, streams, subjects
from reverie_canary.shared.broker import Delivery, Publisher
from reverie_canary.shared.codec import Codec
from reverie_canary.shared.commands import AddOverride, LiftSuspension, ReloadExclusions, RemoveOverride, SetMode
from reverie_canary.shared.events import CycleClosed, CycleVerdict, Decision, EndpointsDiscovered, ProbeResult, RetestRequested
from reverie_canary.shared.logging import get as get_logger
from reverie_canary.shared.service import Shell, nats_connect, redis_client
from reverie_canary.shared.settings import Settings
from reverie_canary.shared.snapshots import IgnoreSnapshot
from reverie_canary.shared.streams import LOG

JUDGE_INPUT = Codec(
    EndpointsDiscovered | CycleClosed | ProbeResult | IgnoreSnapshot
    | LiftSuspension | SetMode | AddOverride | RemoveOverride | ReloadExclusions,
    "judge input",
)


def effect_address(effect: Effect) -> tuple[str, str]:
    """Subject and ``Nats-Msg-Id`` of one effect."""
    match effect:
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
                 rebuild: Callable[[int], Awaitable[list[str]]] | None = None) -> None:
        self.store = store
        self.publisher = publisher
        self.policy = policy
        self.models = models
        self.rebuild = rebuild

    async def emit(self, effects: list[Effect]) -> None:
        """Publish effects (idempotent: deterministic ids)."""
        for effect in effects:
            subject, msg_id = effect_address(effect)
            await self.publisher.publish(effect, subject, msg_id, LOG)
            if isinstance(effect, Decision):
                metrics.DECISIONS.labels(effect.action).inc()

    async def apply(self, event, delivery: Delivery) -> None:
        """Fold ``event`` into every watched model it concerns.

        Events of a model that is not configured are skipped (logged): any
        model name on the bus must not grow state.  An operator command that
        changes nothing (a lift of a provider that is not suspended) says so.
        """
        model = getattr(event, "model", None)
        if model is None:
            return
        if model == "*":
            targets = sorted(set(self.models) | set(await self.store.models()))
        elif model in self.models:
            targets = [model]
        else:
            get_logger("judge").info("model_not_watched", model=model, subject=delivery.subject)
            return
        produced = []
        for target in targets:
            produced += await self.apply_to(target, event, delivery.stream_seq)
        if isinstance(event, LiftSuspension | SetMode) and not produced:
            get_logger("judge").warning("command_without_effect", command=type(event).__name__,
                                        command_id=event.command_id, actor=event.actor,
                                        provider=getattr(event, "provider", ""), model=model)

    async def apply_to(self, model: str, event, position: int | None) -> list[Effect]:
        """Apply ``event`` at stream ``position`` to ``model``; returns the effects published."""
        record = await self.store.load(model)
        if record.revision == 0 and self.rebuild is not None and not await self.store.initialized():
            # Redis lost its state under a running judge: refold what was applied before this event
            rebuilt = await self.rebuild((position or 1) - 1)
            get_logger("judge").warning("state_rebuilt_from_log", models=rebuilt, position=(position or 1) - 1,
                                        reason="Redis lost the judge's state while it ran")
            record = await self.store.load(model)
        if position is not None and position <= record.position:
            if position == record.position:
                await self.emit(record.outbox)  # repair a crash between save and publish
                return list(record.outbox)
            return []
        state, effects = decide(record.state, event, self.policy)
        if state is record.state and not effects and position is None:
            return []
        new = JudgeRecord(state=state, position=position if position is not None else record.position,
                          revision=record.revision + 1, outbox=effects)
        await self.store.save(model, new, expected_revision=record.revision)
        await self.emit(effects)
        return effects


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
        logged = await eventlog.read_log(js, prefixes=JUDGE_SUBJECTS, until_seq=until_seq)
        states, _ = refold(logged, policy, positions={m: until_seq for m in missing})
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
        policy = Policy.from_settings(settings)
        store = RedisJudgeStore(client, settings.namespace)
        models = list(settings.models)
        nc = await nats_connect(settings, max_reconnect_attempts=-1)
        holder["redis"], holder["nats"] = client, nc  # type: ignore[assignment]

        async def rebuild_to(until_seq: int) -> list[str]:
            return await rebuild(nc.jetstream(), store, policy, models, until_seq)

        holder["judge"] = Judge(store, shell.publisher, policy, models, rebuild=rebuild_to)
        if not await store.initialized():
            floor = await eventlog.acknowledged_position(nc.jetstream(), LOG, streams.judge_consumer(settings).durable)
            rebuilt = await rebuild_to(floor)
            if rebuilt:
                shell.log.warning("state_rebuilt_from_log", models=rebuilt, position=floor,
                                  reason="no state in Redis, but the log was already consumed")

    async def close_store() -> None:
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
