"""Judge service: fold the log into provider state, publish verdicts and decisions.

One durable consumer (``judge-v1``) reads discovery events, probe results,
operator commands and routing snapshots in stream order, one at a time, so the
live fold sees exactly the order ``canary replay`` reads.  Each message:
decode, load, decide (:func:`services.judge.core.decide`), save with the stream
position and the outbox, publish the outbox with deterministic ids.
"""

from __future__ import annotations

from faststream import FastStream

from services.judge.core import Effect, Policy, decide
from services.judge.store import JudgeRecord, JudgeStore, RedisJudgeStore
from shared import codec, ids, metrics, streams, subjects
from shared.broker import Delivery, Publisher
from shared.codec import Codec
from shared.commands import AddOverride, LiftSuspension, ReloadExclusions, RemoveOverride, SetMode
from shared.events import CycleClosed, CycleVerdict, Decision, EndpointsDiscovered, ProbeResult, RetestRequested
from shared.service import Shell, redis_client
from shared.settings import Settings
from shared.snapshots import IgnoreSnapshot
from shared.streams import LOG

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

    def __init__(self, store: JudgeStore, publisher: Publisher, policy: Policy, models: list[str]) -> None:
        self.store = store
        self.publisher = publisher
        self.policy = policy
        self.models = models

    async def emit(self, effects: list[Effect]) -> None:
        """Publish effects (idempotent: deterministic ids)."""
        for effect in effects:
            subject, msg_id = effect_address(effect)
            await self.publisher.publish(effect, subject, msg_id, LOG)
            if isinstance(effect, Decision):
                metrics.DECISIONS.labels(effect.action).inc()

    async def apply(self, event, delivery: Delivery) -> None:
        """Fold ``event`` into every model it concerns."""
        model = getattr(event, "model", None)
        if model is None:
            return
        targets = sorted(set(self.models) | set(await self.store.models())) if model == "*" else [model]
        for target in targets:
            await self.apply_to(target, event, delivery.stream_seq)

    async def apply_to(self, model: str, event, position: int | None) -> list[Effect]:
        record = await self.store.load(model)
        if position is not None and position <= record.position:
            if position == record.position:
                await self.emit(record.outbox)  # repair a crash between save and publish
            return []
        state, effects = decide(record.state, event, self.policy)
        if state is record.state and not effects and position is None:
            return []
        new = JudgeRecord(state=state, position=position if position is not None else record.position,
                          revision=record.revision + 1, outbox=effects)
        await self.store.save(model, new, expected_revision=record.revision)
        await self.emit(effects)
        return effects


def create_app(settings: Settings | None = None) -> FastStream:
    """The judge's FastStream app."""
    settings = settings or Settings.load()
    shell = Shell("judge", settings)
    holder: dict[str, Judge] = {}

    async def open_store() -> None:
        client = redis_client(settings)
        holder["judge"] = Judge(RedisJudgeStore(client, settings.namespace), shell.publisher,
                                Policy.from_settings(settings), list(settings.models))
        holder["redis"] = client  # type: ignore[assignment]

    async def close_store() -> None:
        client = holder.get("redis")
        if client is not None:
            await client.aclose()  # type: ignore[attr-defined]

    async def apply(event, delivery: Delivery) -> None:
        await holder["judge"].apply(event, delivery)

    shell.on_startup(open_store)
    shell.on_shutdown(close_store)
    shell.subscribe(streams.judge_consumer(settings), JUDGE_INPUT, apply)
    return shell.app
