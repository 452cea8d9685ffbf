"""Router service: a thin shell around :func:`reverie_canary.services.router.core.decide`.

Inputs (durable ``router-v2``, in log order, pulled one at a time by the shell's
:class:`~reverie_canary.shared.runtime.consumer.Consumer`; the table is
:data:`reverie_canary.shared.contract.inputs.READS`): judge decisions, the operator
commands the router owns (``AddOverride``, ``RemoveOverride``,
``ReloadExclusions``, ``SetQuantizationFloor``) and discovery's ``EndpointsDiscovered`` (for the guard
rails); besides them, the router's own timer (expiry) and the exclusions file.

Each input: decode, load the record (kept in memory between inputs; the save
is a compare-and-set, so a second writer or a Redis that lost the record is
noticed), decide, save state + stream position + outbox in one atomic step,
then carry out the outbox: write each new snapshot to the KV bucket
(compare-and-set on the revision, versions never go back) and publish it on
``canary.routing.<model>``, then publish the command's answer
(``CommandApplied`` or ``CommandRefused``, id ``answer|<command id>``) on
``canary.answers.router.<command id>`` (docs/concepts/messages.md, "Operator commands are answered by events").  A redelivered input (same position) carries out its
saved outbox again under the same ids, so it gets the same answer, stored once.

When Redis has lost the router's record while the durable consumer has already
acknowledged part of the log, the state is rebuilt from the log up to that
position (following the answers the log holds for each command), the versions
are taken from the KV bucket, and nothing expired is kept.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import OrderedDict, deque
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from faststream import FastStream
from nats.errors import Error as NatsError
from nats.js.api import DeliverPolicy
from nats.js.errors import APIError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

from reverie_canary.services.router.core import (
    ExclusionsRead,
    KvSeen,
    Note,
    Outbound,
    Published,
    Refolder,
    RouterPolicy,
    SnapshotMade,
    Tick,
    active_suspensions,
    answers_of,
    decide,
    entries_digest,
    lean,
    next_change,
    watched_and_known,
)
from reverie_canary.services.router.exclusions import EXCLUSIONS_POLL_S, ExclusionsFile
from reverie_canary.services.router.store import RedisRouterStore, RouterRecord, RouterStore, StaleRecord
from reverie_canary.shared.contract import codec, ids, inputs, subjects
from reverie_canary.shared.contract.bounds import fit
from reverie_canary.shared.contract.commands import ReloadExclusions
from reverie_canary.shared.contract.errors import Transient, Undecodable
from reverie_canary.shared.contract.events import MAX_ENDPOINTS_PER_MODEL, CommandApplied, CommandRefused, Decision
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot
from reverie_canary.shared.runtime import clock, eventlog, metrics, streams, tracing
from reverie_canary.shared.runtime.aio import wait_event
from reverie_canary.shared.runtime.broker import Delivery, Publisher
from reverie_canary.shared.runtime.config import RouterConfig, RuntimeConfig, config_of
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.service import Shell, redis_client
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, ROUTING_BUCKET

ROUTER_INPUT = inputs.decoder("router")
#: What the router folds; other messages on its subjects (a lift, a cycle close) are acknowledged and skipped.
ROUTER_FOLDS = inputs.folded("router")
#: Subjects a rebuild reads: the router's inputs and its own answers (a command follows its answer).
#: The router's own answers on the log (``canary.answers.router.``).
ANSWERS_PREFIX = subjects.answer("router", "x").rsplit(".", 1)[0] + "."
REBUILD_PREFIXES = (*inputs.prefixes("router"), ANSWERS_PREFIX)
#: Longest time between two merge passes of the expiry loop (seconds).
MERGE_AT_LEAST_S = 30.0
#: Expiry passes run this long after the expiry itself, so that the merge sees it expired (seconds).
EXPIRY_GRACE_S = 0.005


#: Trace contexts kept per model for a close's version not made yet: as many as a close can number.
HELD_TRACES_PER_MODEL = 4 * MAX_ENDPOINTS_PER_MODEL + 1
#: Models whose held trace contexts are kept at once (the oldest model's are dropped first).
HELD_TRACES_MODELS = 256


#: JetStream's error codes of a write whose expected last sequence is not the subject's
#: (JSStreamWrongLastSequenceErrF, JSStreamWrongLastSequenceConstantErr).
WRONG_LAST_SEQUENCE_CODES = frozenset({10071, 10164})


def new_epoch(now: datetime) -> str:
    """A new store's identity: its first start's time (UTC, to the second) and 48 random bits.

    Only taken by a state without one (:class:`KvSeen`); the time makes it readable in a log line
    (``20261101T120000Z-3f9a0c1b22d4``), the random part keeps two stores started in one second apart.
    """
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(6)}"


def kv_conflict(exc: BaseException) -> bool:
    """Whether a KV write failed because another writer moved the key's revision (a compare-and-set lost).

    nats-py raises :class:`KeyWrongLastSequenceError` for it; a version that does not map the
    code raises the plain :class:`APIError` with JetStream's error code.
    """
    return isinstance(exc, KeyWrongLastSequenceError) or (
        isinstance(exc, APIError) and exc.err_code in WRONG_LAST_SEQUENCE_CODES)


class SnapshotSink:
    """Writes snapshots to the KV bucket and publishes them on ``canary.routing.<model>``.

    Writes are compare-and-set on the KV revision the router last wrote or read
    (kept in memory, so a write is one round trip); a revision that moved
    underneath is read again, and a snapshot the bucket already holds (or a
    newer one) is not written again.
    """

    def __init__(self, kv: KeyValue, publisher: Publisher) -> None:
        self.kv = kv
        self.publisher = publisher
        self.revisions: dict[str, tuple[int, int]] = {}  # model -> (version, KV revision)
        #: model -> the snapshot last read from or written to the bucket (what the metrics show)
        self.latest: dict[str, IgnoreSnapshot] = {}

    def samples(self):
        """Each model's ignore list as state series: size by layer and in all, version, time (UTC)."""
        now = clock.now()
        for model in sorted(self.latest):
            snapshot = self.latest[model]
            m = {"model": model}
            layers = {"exclusion": 0, "override": 0, "suspension": 0}
            active = [e for e in (entry.active_at(now) for entry in snapshot.entries) if e is not None]
            for entry in active:
                for layer in {r.layer for r in entry.reasons}:
                    layers[layer] = layers.get(layer, 0) + 1
            for layer, count in layers.items():
                yield "ignore_size", {**m, "layer": layer}, count
            yield "ignore_size", {**m, "layer": "all"}, len(active)
            yield "ignore_version", m, snapshot.version
            yield "ignore_published_at", m, snapshot.at.timestamp()

    async def current(self, model: str) -> tuple[IgnoreSnapshot | None, int]:
        """The snapshot in the bucket and its revision (``None, 0`` when absent).

        Raises:
            Transient: the bucket cannot be read (NATS down).
        """
        try:
            entry = await self.kv.get(subjects.kv_key(model))
        except KeyNotFoundError:
            self.revisions.pop(model, None)
            return None, 0
        except (NatsError, OSError) as exc:  # nats timeouts and connection errors during an outage
            raise Transient(f"kv read for {model} failed: {exc!r}") from exc
        if entry.value is None:
            return None, entry.revision or 0
        try:
            snapshot = codec.SNAPSHOT.decode(entry.value)
        except Undecodable:
            return None, entry.revision or 0
        self.revisions[model] = (snapshot.version, entry.revision or 0)
        self.latest[model] = snapshot
        return snapshot, entry.revision or 0

    async def versions(self, models: list[str]) -> dict[str, Published]:
        """What the bucket holds for ``models``: version and entries' digest per model that has a snapshot."""
        out = {}
        for model in models:
            snapshot, _ = await self.current(model)
            if snapshot is not None:
                out[model] = Published(version=snapshot.version, at=snapshot.at, epoch=snapshot.epoch,
                                       digest=entries_digest(snapshot.entries, snapshot.names,
                                                             quantizations=snapshot.quantizations))
        return out

    async def write(self, snapshot: IgnoreSnapshot, *, check: bool = False, links: Sequence[Any] = ()) -> bool:
        """Write ``snapshot`` unless the bucket has it (or a newer one), then publish it.

        Args:
            check: read the bucket first instead of trusting the remembered
                revision (a repair after a crash or a redelivery).
            links: trace contexts of the other inputs the version holds (the earlier
                decisions of one close): the snapshot's span is linked to each.

        Returns:
            ``True`` when it was written now, ``False`` when the bucket had it already.

        Raises:
            Transient: KV or NATS unavailable, or another writer moved the revision twice.
        """
        model = snapshot.model
        known = None if check else self.revisions.get(model)
        if known is None:
            current, revision = await self.current(model)
            if current is not None and current.version >= snapshot.version:
                if current.version == snapshot.version:
                    await self.announce(current, links=links)  # a crash may have come between the write and the publish
                return False
            known = (current.version if current is not None else 0, revision)
        snapshot = fit(snapshot)  # the bucket holds what the subject carries: one message under the wire bound
        data = codec.encode(snapshot)
        key = subjects.kv_key(model)
        try:
            if known[1]:
                revision = await self.kv.update(key, data, last=known[1])
            else:
                revision = await self.kv.create(key, data)
        except (NatsError, OSError) as exc:  # timeouts, no stream response, connection closed, a conflict
            self.revisions.pop(model, None)
            if not kv_conflict(exc):
                raise Transient(f"kv write for {model} failed: {exc!r}") from exc
            if check:
                raise Transient(f"snapshot of {model} changed underneath: {exc}") from exc
            return await self.write(snapshot, check=True, links=links)
        self.revisions[model] = (snapshot.version, revision)
        self.latest[model] = snapshot
        metrics.of("router").inc("snapshots_published", model=model)
        await self.announce(snapshot, links=links)
        return True

    async def announce(self, snapshot: IgnoreSnapshot, *, links: Sequence[Any] = ()) -> None:
        """Publish ``snapshot`` on ``canary.routing.<model>`` (deduplicated by its version's id).

        In a span of its own, child of the message that made it (a decision, an override, the timer:
        shared/runtime/tracing.py) and linked to ``links``, the earlier decisions of the same close
        that the version also holds: each of their traces reaches the snapshot.
        """
        with tracing.span("router snapshot", links=links,
                          attributes={"canary.model": snapshot.model, "canary.version": snapshot.version,
                                      "canary.ignored": len(snapshot.entries)}):
            await self.publisher.publish(snapshot, subjects.routing(snapshot.model),
                                         ids.snapshot_id(snapshot.model, snapshot.version), LOG)


class Router:
    """The router's shell: one input at a time through the store, the sink and the publisher.

    Args:
        settings: the service's settings.
        store: where the record lives.
        sink: the KV bucket and the routing subject.
        publisher: for the answers.
        exclusions: the reviewed exclusions file.
        js: a JetStream context for reading the log back (rebuild); ``None``: no rebuild.
    """

    def __init__(self, settings: Settings, store: RouterStore, sink: SnapshotSink, publisher: Publisher,
                 exclusions: ExclusionsFile, js: Any = None) -> None:
        self.settings = settings
        self.policy = RouterPolicy.from_settings(settings)
        self.store = store
        self.sink = sink
        self.publisher = publisher
        self.exclusions = exclusions
        self.js = js
        self.consumer = streams.router_consumer(settings)
        self.log = get_logger("router")
        self.record: RouterRecord | None = None
        self.confirmed = -1  # the revision whose outbox was carried out in full
        self.lock = asyncio.Lock()
        self.wake = asyncio.Event()
        self.start_file: ExclusionsRead | None = None
        #: model -> trace contexts of the routing decisions of a close whose version is not made yet
        #: (memory only, as the judge's result contexts: after a restart the version is linked to none)
        self.held_traces: OrderedDict[str, deque[Any]] = OrderedDict()

    # -- the record -------------------------------------------------------------------

    async def current(self, *, rebuild_until: int | None = None) -> RouterRecord:
        """The record: the one in memory, else the stored one, else one rebuilt from the log (its outbox, the
        snapshots of what changed while the state was lost, carried out at once).

        Args:
            rebuild_until: the log position to rebuild up to when the record is
                gone; default the durable consumer's acknowledged position.
        """
        if self.record is not None:
            return self.record
        record = await self.store.load()
        if record.revision == 0 and self.js is not None:
            floor = rebuild_until if rebuild_until is not None else await eventlog.acknowledged_position(
                self.js, LOG, self.consumer.durable)
            if floor > 0:
                record = await self.rebuild(floor)
                self.log.warning("state_rebuilt_from_log", position=floor, overrides=len(record.state.overrides),
                                 suspensions=len(active_suspensions(record.state, clock.now())),
                                 reason="no state in Redis, but the log was already consumed")
                # what changed while the state was lost (an expiry in the outage) is written now: the input
                # that comes next would otherwise leave this version taken and never written
                await self._carry_out(record, record.outbox, repair=True)
        self.record = record
        return record

    async def rebuild(self, until_seq: int) -> RouterRecord:
        """Fold the log up to ``until_seq`` into a new record, save it, and return it (its outbox not yet carried out)."""
        # streamed: the log's events are folded as the scan reads them, never held (a rebuild that held
        # them, even lean, grew with the log: the soak's router, +20 MB per 100 cycles of a 21-endpoint
        # fleet, rebuilt after each empty Redis).  The router's answers come after their commands, so a
        # first scan reads them alone (their own subjects: a few per operator command) and the second folds
        answers: list[Any] = []
        await eventlog.scan_log(self.js, lambda item: answers.append(item.event), prefixes=(ANSWERS_PREFIX,),
                                until_seq=until_seq)
        file = self.start_file or self.exclusions.read("start")
        folder = Refolder(self.policy, answers_of(answers), exclusions=file.exclusions or [],
                          exclusions_digest=file.digest)
        await eventlog.scan_log(self.js, lambda item: folder.feed(lean(item.event)), prefixes=REBUILD_PREFIXES,
                                until_seq=until_seq)
        now = clock.now()
        state = folder.result(now)
        kv = await self.sink.versions(watched_and_known(state, self.policy))
        state, effects = decide(state, KvSeen(versions=kv, new_epoch=new_epoch(now)), now, self.policy)
        record = RouterRecord(state=state, position=until_seq, revision=1,
                              outbox=[e for e in effects if isinstance(e, SnapshotMade)])
        await self.store.save(record, expected_revision=0)
        return record

    # -- inputs -----------------------------------------------------------------------

    async def apply(self, event: Any, delivery: Delivery) -> None:
        """The durable consumer's handler: fold one input at its stream position."""
        if not isinstance(event, ROUTER_FOLDS):
            return  # a lift, a mode, a cycle close: another service's
        if isinstance(event, ReloadExclusions):
            event = self.exclusions.read("command", command=event)
        await self.step(event, delivery.stream_seq)

    async def step(self, event: Any, position: int | None) -> None:
        """Decide ``event`` (at stream ``position``, or ``None`` for the router's own inputs), save, carry out.

        A refused command is answered, not raised; a malformed decision never gets here (decoding
        refuses a suspension without its ``until``).

        Raises:
            Transient: Redis, KV or NATS unavailable; the input is tried again.
        """
        async with self.lock:
            for attempt in (1, 2):
                record = await self.current(rebuild_until=None if position is None else position - 1)
                if position is not None and position <= record.position:
                    if position == record.position:
                        await self._carry_out(record, record.outbox, repair=True)
                    return
                state, effects = decide(record.state, event, clock.now(), self.policy)
                outbound = [e for e in effects if isinstance(e, Outbound)]
                if position is None and state is record.state and not outbound:
                    self._log_notes(effects)
                    return
                new = RouterRecord(state=state, position=record.position if position is None else position,
                                   revision=record.revision + 1,
                                   outbox=outbound if position is not None else self._carried(record, outbound))
                try:
                    await self.store.save(new, expected_revision=record.revision)
                except StaleRecord:
                    self.record = None  # another writer, or Redis lost it: load (or rebuild) and decide again
                    if attempt == 2:
                        raise
                    continue
                previous_confirmed = self.confirmed == record.revision
                self.record = new
                self._log_notes(effects)
                self._hold_trace(event, outbound)
                await self._carry_out(new, outbound, repair=False, all_done=previous_confirmed or position is not None)
                self.wake.set()
                return

    def _hold_trace(self, event: Any, outbound: list[Outbound]) -> None:
        """Keep the current span's context when ``event`` is a decision whose close's version comes later.

        A close's routing decisions make one version after the last of them
        (``Decision.routing_follows``); the snapshot's span is the child of the input that makes
        it and is linked to the contexts kept here, so that no decision's trace stops at the router.
        """
        if not isinstance(event, Decision) or event.routing_follows == 0 or not tracing.enabled():
            return
        if any(isinstance(e, SnapshotMade) and e.snapshot.model == event.model for e in outbound):
            return
        held = self.held_traces.get(event.model)
        if held is None:
            held = self.held_traces[event.model] = deque(maxlen=HELD_TRACES_PER_MODEL)
        self.held_traces.move_to_end(event.model)
        held.append(tracing.current())
        while len(self.held_traces) > HELD_TRACES_MODELS:
            self.held_traces.popitem(last=False)

    def _carried(self, record: RouterRecord, outbound: list[Outbound]) -> list[Outbound]:
        """The outbox of an input without a position: the last input's answers, its snapshots not yet
        written (superseded ones dropped), and the new snapshots."""
        fresh = {e.snapshot.model for e in outbound if isinstance(e, SnapshotMade)}
        done = self.confirmed == record.revision
        kept = [e for e in record.outbox if not isinstance(e, SnapshotMade)
                or (not done and e.snapshot.model not in fresh)]
        return [*kept, *outbound]

    async def _carry_out(self, record: RouterRecord, effects: list[Outbound], *, repair: bool,
                         all_done: bool = True) -> None:
        for effect in effects:
            match effect:
                case SnapshotMade(snapshot=snapshot):
                    last = record.state.published.get(snapshot.model)
                    if repair and last is not None and last.version > snapshot.version:
                        continue  # superseded by a later version
                    written = await self.sink.write(snapshot, check=repair,
                                                    links=tuple(self.held_traces.get(snapshot.model, ())))
                    self.held_traces.pop(snapshot.model, None)  # the version holds them: linked once
                    if written:
                        self.log.info("snapshot_published", model=snapshot.model, version=snapshot.version,
                                      ignore=snapshot.ignore_at(snapshot.at),
                                      **({"quantizations": snapshot.quantizations} if snapshot.quantizations else {}))
                case CommandApplied() | CommandRefused():
                    await self.publisher.publish(effect, subjects.answer("router", effect.command_id),
                                                 effect.answer_id, LOG)
                    self._log_answer(effect)
        if repair or all_done:
            self.confirmed = record.revision

    def _log_answer(self, answer: CommandApplied | CommandRefused) -> None:
        fields = {"command": answer.command, "command_id": answer.command_id, "actor": answer.actor,
                  "provider": answer.provider, "model": answer.model}
        if isinstance(answer, CommandRefused):
            self.log.warning("command_refused", code=answer.code, reason=answer.reason, **fields)
            return
        self.log.info("command_applied", versions={v.model: v.version for v in answer.snapshots},
                      forced=answer.forced, **fields)
        if answer.floor_broken:
            self.log.warning("capacity_floor_broken_by_operator", models=[b.model for b in answer.floor_broken],
                             **fields)

    def _log_notes(self, effects: list) -> None:
        for note in effects:
            if isinstance(note, Note):
                (self.log.warning if note.level == "warning" else self.log.info)(note.event, **note.fields)

    # -- start and the timer -------------------------------------------------------------

    async def start(self) -> None:
        """Take over from an older durable, load or rebuild the state, repair an unfinished outbox,
        then apply what the KV bucket holds, the exclusions file and the clock."""
        if self.js is not None:
            await streams.check_log_subjects(self.js, [subjects.ALL_ANSWERS], "router")
            floor = await self.migrate_consumer()
        else:
            floor = None
        async with self.lock:
            record = await self.current(rebuild_until=floor)
            if record.outbox:  # a crash may have come between the last save and its publishes
                await self._carry_out(record, record.outbox, repair=True)
        kv = await self.sink.versions(watched_and_known(record.state, self.policy))
        await self.step(KvSeen(versions=kv, new_epoch=new_epoch(clock.now())), None)
        await self.step(self.start_file or self.exclusions.read("start"), None)
        await self.step(Tick(), None)

    async def migrate_consumer(self) -> int | None:
        """Create this version's durable after the position an older one reached, and delete the older one.

        Returns:
            The older durable's acknowledged position (the log already applied),
            or ``None`` when there was nothing to take over.
        """
        try:
            await self.js.consumer_info(LOG, self.consumer.durable)
            return None
        except NotFoundError:
            pass
        for old in streams.ROUTER_PREVIOUS_DURABLES:
            try:
                info = await self.js.consumer_info(LOG, old)
            except NotFoundError:
                continue
            floor = info.ack_floor.stream_seq if info.ack_floor else 0
            config = self.consumer.config()
            if floor:
                config.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
                config.opt_start_seq = floor + 1
            await self.js.add_consumer(LOG, config)
            await self.js.delete_consumer(LOG, old)
            self.log.warning("consumer_migrated", old=old, new=self.consumer.durable, position=floor)
            return floor
        return None

    async def expiry_loop(self) -> None:
        """Publish a new snapshot at the moment an entry expires; read a changed exclusions file.

        The timer's merge runs at the next expiry (+5 ms) and at least every 30 s;
        after an input it only looks again when the next expiry is; the
        exclusions file's signature is looked at every ``EXCLUSIONS_POLL_S``
        seconds when one is configured.  An outbox not carried out in full is
        tried again first.  Failures are logged and retried after 1 s.
        """
        poll_s = EXCLUSIONS_POLL_S if self.exclusions.path else MERGE_AT_LEAST_S
        loop = asyncio.get_running_loop()
        due = 0.0  # loop.time() of the next merge pass; 0: now
        while True:
            self.wake.clear()  # before the pass: an input applied during it wakes the next wait
            try:
                record = self.record
                if record is not None and self.confirmed != record.revision:
                    async with self.lock:
                        if self.record is record:
                            await self._carry_out(record, [e for e in record.outbox if isinstance(e, SnapshotMade)],
                                                  repair=True)
                read = await self.exclusions.poll()
                if read is not None:
                    await self.step(read, None)
                if loop.time() >= due:
                    await self.step(Tick(), None)
                    due = loop.time() + self._wait_s()
            except Transient as exc:
                self.log.warning("expiry_check_failed", error=str(exc))
                due = loop.time() + 1.0
            except Exception:  # a bug or an unexpected error: this loop must outlive it
                self.log.error("expiry_check_crashed", exc_info=True)
                due = loop.time() + 1.0
            # wait_event, not asyncio.wait_for: on Python 3.11 wait_for can swallow the cancellation
            # that stops the service when an input wakes the loop at the same moment (CPython gh-86296)
            if await wait_event(self.wake, min(due - loop.time(), poll_s)):
                due = min(due, loop.time() + self._wait_s())  # an input may have brought an earlier expiry

    def _wait_s(self) -> float:
        """Seconds until the next merge pass: the next expiry (+5 ms), at most ``MERGE_AT_LEAST_S``."""
        if self.record is None:
            return 1.0
        now = clock.now()
        upcoming = next_change(self.record.state, now)
        if upcoming is None:
            return MERGE_AT_LEAST_S
        return min(MERGE_AT_LEAST_S, max(0.0, (upcoming - now).total_seconds()) + EXPIRY_GRACE_S)


def create_app(settings: Settings | None = None) -> FastStream:
    """The router's FastStream app.

    Raises:
        ConfigError: at start, when the reviewed exclusions file is invalid
            (the message names the file and line).
    """
    settings = settings or Settings.load()
    shell = Shell("router", settings)
    exclusions = ExclusionsFile(config_of(settings, RouterConfig).exclusions_file)
    wiring = RouterWiring(shell, settings, exclusions, exclusions.read_at_start())
    shell.on_startup(wiring.open)
    shell.on_shutdown(wiring.close)
    shell.consume(streams.router_consumer(settings), ROUTER_INPUT, wiring.apply)
    shell.background(wiring.expiry_loop)
    return shell.app


class RouterWiring:
    """The router's clients, opened at start on the service's connection and closed at the stop."""

    def __init__(self, shell: Shell, settings: Settings, exclusions: ExclusionsFile, start_file: ExclusionsRead) -> None:
        self.shell = shell
        self.settings = settings
        self.exclusions = exclusions
        self.start_file = start_file
        self.redis: Any = None
        self.sink: SnapshotSink | None = None
        self._router: Router | None = None

    @property
    def router(self) -> Router:
        if self._router is None:
            raise Transient("the router has not started")
        return self._router

    async def open(self) -> None:
        shell, settings = self.shell, self.settings
        self.redis = redis_client(settings)
        # the bucket is bound before the consumer starts: the handler needs it at once
        kv = await shell.connection.jetstream().key_value(ROUTING_BUCKET)
        self.sink = SnapshotSink(kv, shell.publisher)
        router = Router(settings, RedisRouterStore(self.redis, config_of(settings, RuntimeConfig).namespace), self.sink,
                        shell.publisher,
                        self.exclusions, js=shell.connection.jetstream())
        router.start_file = self.start_file
        self._router = router
        await router.start()
        shell.metrics.add_source(self.sink.samples)

    async def close(self) -> None:
        if self.sink is not None:
            self.shell.metrics.remove_source(self.sink.samples)
        if self.redis is not None:
            await self.redis.aclose()

    async def apply(self, event: Any, delivery: Delivery) -> None:
        await self.router.apply(event, delivery)

    async def expiry_loop(self) -> None:
        await self.router.expiry_loop()
