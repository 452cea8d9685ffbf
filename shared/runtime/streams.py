"""Streams, durable consumers and the KV bucket: declared here and only here.

Two services that declare one stream differently overwrite each other
(FastStream's and nats-py's documentation), so every service calls :func:`ensure` with the
same settings and binds with ``JStream(name, declare=False)``.

- ``CANARY_LOG``: the audit log (LIMITS retention, ``log_max_age_s`` >= 30 days
  and ``log_max_bytes``, no delete, no purge).  Every fact goes here, so one stream sequence orders
  everything a fold needs, and ``canary replay`` reads the same order the
  judge read live.
- ``CANARY_TASKS``: probe tasks (WORK_QUEUE: a task is removed when acked; a
  dead prober's task is redelivered after ``ack_wait``, a few seconds: a live
  prober says every task it holds is in progress, :func:`task_heartbeat_s`).
- ``CANARY_DEADLETTER``: refused messages with their reason.
- ``CANARY_NOTICES``: the notifier's own: notices that exhausted their delivery
  schedule (``canary.notices.dead.<channel>``, with the error), operators'
  resend requests (``canary.notices.resend``) and the notifier's answers
  (``canary.notices.resent``).  Kept as long as the log, bounded in bytes.
- KV ``canary-routing``: the latest IgnoreSnapshot per model, history kept.
- object store ``canary-judge-snapshots``: the judge's fold at two recent positions, so that
  a rebuild after Redis lost the state starts there, not at the log's start.

A durable's configuration is not updated by the server once it exists, nor by
nats-py or FastStream when a service binds it (FastStream's and nats-py's documentation):
every service reconciles its durables with this module at start
(:func:`reverie_canary.shared.runtime.preflight.reconcile_consumers`), which updates what
the server allows to change in place (``ack_wait``, ``max_deliver``,
``max_ack_pending``, the filter) and logs what it changed.  A change the server
refuses in place (the ack policy) needs a new ``-vN``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    KeyValueConfig,
    ObjectStoreConfig,
    RetentionPolicy,
    StorageType,
    StoreCompression,
    StreamConfig,
)
from nats.js.errors import NotFoundError

from reverie_canary.shared.contract import inputs, subjects
from reverie_canary.shared.contract.subjects import ROUTING_BUCKET  # noqa: F401  (defined with the client)
from reverie_canary.shared.runtime.settings import Settings

LOG = "CANARY_LOG"
TASKS = "CANARY_TASKS"
DEADLETTER = "CANARY_DEADLETTER"
NOTICES = "CANARY_NOTICES"
#: Byte bound of ``CANARY_NOTICES`` (a dead letter is a few KiB: tens of thousands fit).
NOTICES_MAX_BYTES = 128 * 1024 * 1024
ROUTING_HISTORY = 64
#: Byte bound of the KV bucket: 64 versions of a few hundred models' snapshots, each under the wire bound.
ROUTING_MAX_BYTES = 256 * 1024 * 1024
#: Object store bucket of the judge's fold snapshots (:mod:`reverie_canary.services.judge.snapshots`).
JUDGE_SNAPSHOTS = "canary-judge-snapshots"
#: Its byte bound: two snapshots of a few hundred models, compressed (a few MB each).
JUDGE_SNAPSHOTS_MAX_BYTES = 512 * 1024 * 1024

LOG_SUBJECTS = [
    subjects.ALL_DISCOVERY,
    subjects.ALL_RESULTS,
    subjects.ALL_VERDICTS,
    subjects.ALL_DECISIONS,
    subjects.ALL_RETEST,
    subjects.ALL_CONFIRMATIONS,
    subjects.ALL_ROUTING,
    subjects.ALL_OPS,
    subjects.ALL_ROUTER,
    subjects.ALL_ANSWERS,
    subjects.ALL_SERVED,
    subjects.ALL_LIVE,
    subjects.ALL_CYCLES,
]


def stream_configs(settings: Settings) -> list[StreamConfig]:
    """The streams, configured from ``settings`` (durations in seconds, sizes in bytes).

    Every stream has an age and a byte limit (docs/concepts/messages.md, "Bounds"; past
    either the oldest messages go), S2 compression of the file store
    (``stream_compression``: JSON events shrink about three times,
    ``benchmarks/log_storage.py``) and ``stream_replicas`` copies.
    """
    window = min(settings.duplicate_window_s, settings.log_max_age_s)
    common = {"storage": StorageType.FILE, "compression": StoreCompression(settings.stream_compression),
              "num_replicas": settings.stream_replicas}
    return [
        StreamConfig(
            name=LOG,
            description="reverie-canary event log: discovery, results, verdicts, decisions, ops, routing",
            subjects=LOG_SUBJECTS,
            retention=RetentionPolicy.LIMITS,
            max_age=settings.log_max_age_s,
            max_bytes=settings.log_max_bytes,
            duplicate_window=window,
            deny_delete=True,
            deny_purge=True,
            **common,
        ),
        StreamConfig(
            name=TASKS,
            description="reverie-canary probe tasks (work queue)",
            subjects=[subjects.ALL_TASKS],
            retention=RetentionPolicy.WORK_QUEUE,
            max_age=max(settings.cycle_interval_s * 4, 3600.0),
            max_bytes=settings.tasks_max_bytes,
            duplicate_window=min(window, max(settings.cycle_interval_s * 4, 3600.0)),
            **common,
        ),
        StreamConfig(
            name=DEADLETTER,
            description="reverie-canary refused messages, with reasons",
            subjects=[subjects.ALL_DEADLETTER],
            retention=RetentionPolicy.LIMITS,
            max_age=settings.log_max_age_s,
            max_bytes=settings.deadletter_max_bytes,
            duplicate_window=min(120.0, settings.log_max_age_s),
            **common,
        ),
        StreamConfig(
            name=NOTICES,
            description="reverie-canary notices: dead letters of the notifier, resend requests and answers",
            subjects=[subjects.ALL_NOTICES],
            retention=RetentionPolicy.LIMITS,
            max_age=settings.log_max_age_s,
            max_bytes=NOTICES_MAX_BYTES,
            duplicate_window=window,
            **common,
        ),
    ]


#: The smallest byte limit :func:`ensure` lowers a stream's to when the server cannot reserve more.
MIN_RESERVED_BYTES = 64 * 1024 * 1024


async def ensure(js: JetStreamContext, settings: Settings) -> None:
    """Create or update the streams, the KV bucket and the judge's snapshot bucket; safe to call from every service.

    Raises:
        nats.js.errors.APIError: when the server refuses a configuration.
    """
    for config in stream_configs(settings):
        try:
            info = await js.stream_info(config.name)  # type: ignore[arg-type]
        except NotFoundError:
            await _reserving(js.add_stream, config)
            continue
        if _differs(info.config, config):
            await _reserving(js.update_stream, config)
    try:
        await js.key_value(ROUTING_BUCKET)
    except NotFoundError:
        await js.create_key_value(
            KeyValueConfig(
                bucket=ROUTING_BUCKET,
                description="latest IgnoreSnapshot per model (key: encoded model id)",
                history=ROUTING_HISTORY,
                storage=StorageType.FILE,
                max_bytes=ROUTING_MAX_BYTES,
                replicas=settings.stream_replicas,
            )
        )
    try:
        await js.object_store(JUDGE_SNAPSHOTS)
    except NotFoundError:
        await _create_snapshot_bucket(js, settings)


async def ensure_best_effort(js: JetStreamContext, settings: Settings, log: Any) -> bool:
    """:func:`ensure`, where the credential may: a service that may not manage streams logs that and goes on.

    ``canary init`` (or the demo) created them as admin (``shared/nats/server.conf``).

    Returns:
        Whether every stream and bucket is as declared now.
    """
    try:
        await ensure(js, settings)
    except NatsError as exc:  # a refusal (APIError), or a request the server left unanswered (a permission)
        log.warning("streams_not_ensured", error=str(exc))
        return False
    return True


async def _create_snapshot_bucket(js: JetStreamContext, settings: Settings) -> None:
    """Create the judge's snapshot bucket, halving its byte limit while the server cannot reserve it (as streams)."""
    from nats.js.errors import APIError

    limit = JUDGE_SNAPSHOTS_MAX_BYTES
    while True:
        try:
            await js.create_object_store(JUDGE_SNAPSHOTS, ObjectStoreConfig(
                bucket=JUDGE_SNAPSHOTS, description="reverie-canary: snapshots of the judge's fold (a rebuild starts there)",
                max_bytes=limit, storage=StorageType.FILE, replicas=settings.stream_replicas))
            return
        except APIError as exc:
            if "insufficient" not in str(exc).lower() or limit // 2 < MIN_RESERVED_BYTES:
                raise
            limit //= 2


async def _reserving(call, config: StreamConfig) -> None:
    """Create or update ``config``; when the server cannot reserve its byte limit, halve it (logged) and retry.

    JetStream reserves a file stream's ``max_bytes`` against the server's store
    (by default three quarters of the free disk): a small disk would otherwise
    refuse the stream outright.  The stream then keeps less history than
    configured, and says so in one warning line.
    """
    from nats.js.errors import APIError

    from reverie_canary.shared.runtime.logging import get as get_logger

    wanted = config.max_bytes
    while True:
        try:
            await call(config)
        except APIError as exc:
            if "insufficient" not in str(exc).lower() or not config.max_bytes \
                    or config.max_bytes // 2 < MIN_RESERVED_BYTES:
                raise
            config.max_bytes //= 2
            continue
        if config.max_bytes != wanted:
            get_logger("streams").warning("stream_byte_limit_lowered", stream=config.name, wanted_bytes=wanted,
                                          reserved_bytes=config.max_bytes,
                                          reason="the server cannot reserve more storage")
        return


async def check_log_subjects(js: JetStreamContext, needed: list[str], service: str) -> None:
    """Refuse to start a service whose messages the log stream would not store.

    A deployment upgraded without running ``canary init`` again keeps the old
    stream subjects; the service's publishes there would fail one by one.

    Raises:
        ConfigError: naming the subjects the stream lacks and what to run.
    """
    from reverie_canary.shared.contract.errors import ConfigError

    try:
        info = await js.stream_info(LOG)
    except NotFoundError as exc:
        raise ConfigError(f"{service}: the stream {LOG} does not exist: run `canary init` (as admin) first") from exc
    missing = [s for s in needed if s not in (info.config.subjects or [])]
    if missing:
        raise ConfigError(f"{service}: the stream {LOG} does not take {', '.join(missing)} yet: run `canary init` "
                          "(as admin) once after this upgrade")


def _differs(current: StreamConfig, wanted: StreamConfig) -> bool:
    keys = ("subjects", "max_age", "duplicate_window", "deny_delete", "deny_purge", "description", "max_bytes",
            "num_replicas")
    if any(getattr(current, k) != getattr(wanted, k) for k in keys):
        return True
    return (current.compression or StoreCompression.NONE) != (wanted.compression or StoreCompression.NONE)


@dataclass(frozen=True)
class ConsumerSpec:
    """A durable consumer: its stream, name and configuration."""

    stream: str
    durable: str
    filter_subjects: list[str]
    max_ack_pending: int
    ack_wait_s: float
    max_deliver: int
    deliver_policy: DeliverPolicy = DeliverPolicy.ALL

    def config(self) -> ConsumerConfig:
        """The nats-py ``ConsumerConfig`` for this durable."""
        return ConsumerConfig(
            durable_name=self.durable,
            filter_subjects=self.filter_subjects,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait_s,
            max_deliver=self.max_deliver,
            max_ack_pending=self.max_ack_pending,
            deliver_policy=self.deliver_policy,
        )


#: Bounds of the task consumer's derived ``ack_wait`` (seconds): :func:`task_ack_wait_s`.
TASK_ACK_WAIT_MIN_S = 2.0
TASK_ACK_WAIT_MAX_S = 30.0
#: ``ack_wait`` is this share of the probe window (a dead prober's tasks come back within it).
TASK_ACK_WAIT_SHARE = 1 / 8
#: In-progress signals a prober sends per ``ack_wait`` for every task it holds.
HEARTBEATS_PER_ACK_WAIT = 4


def task_ack_wait_s(settings: Settings) -> float:
    """Seconds a task may go without word from its prober before JetStream gives it to another one.

    A prober says every task it holds is in progress :data:`HEARTBEATS_PER_ACK_WAIT`
    times per ``ack_wait`` (:func:`task_heartbeat_s`), from the moment it fetched
    it, so ``ack_wait`` no longer has to cover a probe: it is an eighth of the probe
    window, between 2 and 30 s (the getting-started page's short cycles, a 14 s window: 2 s; the
    default 600 s window: 30 s), and a SIGKILLed prober's tasks are probed by
    another prober within the same cycle (before, ``ack_wait``
    followed the request timeout: 370 s).  ``task_ack_wait_s`` in the settings
    overrides it.
    """
    if settings.task_ack_wait_s:
        return settings.task_ack_wait_s
    return min(TASK_ACK_WAIT_MAX_S, max(TASK_ACK_WAIT_MIN_S, settings.probe_window_s * TASK_ACK_WAIT_SHARE))


def task_heartbeat_s(settings: Settings) -> float:
    """Seconds between two in-progress signals of a prober for each task it holds (``ack_wait`` / 4)."""
    return task_ack_wait_s(settings) / HEARTBEATS_PER_ACK_WAIT


def prober_consumer(settings: Settings) -> ConsumerSpec:
    """Shared by every prober replica: one task goes to one prober.

    ``ack_wait`` is short (:func:`task_ack_wait_s`): the prober keeps each task it
    holds alive with in-progress signals; a task whose prober died is redelivered
    to another after at most ``ack_wait``.  ``max_deliver`` deliveries at most,
    the same budget the settle table (:mod:`reverie_canary.shared.runtime.settle`) counts (with 3
    here and 5 there, a third delivery that failed was nak'ed and never came back,
    without a dead letter).
    """
    return ConsumerSpec(
        stream=TASKS,
        durable="prober-v2",
        filter_subjects=[subjects.ALL_TASKS],
        max_ack_pending=1000,
        ack_wait_s=task_ack_wait_s(settings),
        max_deliver=settings.max_deliver,
    )


#: Messages the judge holds at a time: one batch, folded and saved together.
JUDGE_BATCH = 256


def judge_consumer(settings: Settings) -> ConsumerSpec:
    """In stream order, :data:`JUDGE_BATCH` messages in flight: the fold must see the log's order.

    The judge reads it in batches (:class:`reverie_canary.shared.runtime.consumer.Consumer`, ordered batches), which
    applies a batch only once it is provably the log's next messages, so a message that comes
    back late (a stopped process's, a nak'ed one) is never passed over.  Its filter is what the
    judge folds (:data:`reverie_canary.shared.contract.inputs.READS`).
    """
    return ConsumerSpec(
        stream=LOG,
        durable="judge-v1",
        filter_subjects=inputs.filters("judge"),
        max_ack_pending=JUDGE_BATCH,
        ack_wait_s=30.0,
        max_deliver=settings.max_deliver,
    )


#: Durables the router used before; at start the router moves from the newest one found to
#: :func:`router_consumer` without replaying what it had applied (router-v1: no discovery).
ROUTER_PREVIOUS_DURABLES = ("router-v1",)


def router_consumer(settings: Settings) -> ConsumerSpec:
    """Strictly ordered: decisions, operator commands and discovery in log order.

    Its filter is what the router folds (:data:`reverie_canary.shared.contract.inputs.READS`).
    """
    return ConsumerSpec(
        stream=LOG,
        durable="router-v2",
        filter_subjects=inputs.filters("router"),
        max_ack_pending=1,
        ack_wait_s=30.0,
        max_deliver=settings.max_deliver,
    )


#: The notifier's earlier durables, newest first; ``notifier_consumer`` takes over the position of the
#: first one found (v2: decisions only, unordered; v3: read raw operator commands, not their answers).
NOTIFIER_PREVIOUS_DURABLES = ("notifier-v3", "notifier-v2")


def notifier_consumer(settings: Settings) -> ConsumerSpec:
    """Decisions, cycle verdicts, routing snapshots and command answers, strictly in log order.

    Its filter is what the notifier folds (:data:`reverie_canary.shared.contract.inputs.READS`).  One
    message in flight: folding persisting states (a start before its reminders
    and its end) needs the log's order.  Delivery runs apart from this
    consumer, so a slow channel never holds it up.  A new durable starts where
    one of :data:`NOTIFIER_PREVIOUS_DURABLES` stopped, else with new messages.
    """
    return ConsumerSpec(
        stream=LOG,
        durable="notifier-v4",
        filter_subjects=inputs.filters("notifier"),
        max_ack_pending=1,
        ack_wait_s=30.0,
        max_deliver=settings.max_deliver,
        deliver_policy=DeliverPolicy.NEW,
    )


def notifier_resend_consumer(settings: Settings) -> ConsumerSpec:
    """Operators' ``ResendNotices`` (``canary.notices.resend``), from the time the durable is first created."""
    return ConsumerSpec(
        stream=NOTICES,
        durable="notifier-resend-v1",
        filter_subjects=[subjects.NOTICES_RESEND],
        max_ack_pending=1,
        ack_wait_s=30.0,
        max_deliver=settings.max_deliver,
        deliver_policy=DeliverPolicy.NEW,
    )


def discovery_consumer(settings: Settings) -> ConsumerSpec:
    """The judge's retest requests (docs/concepts/probes.md, the language contract)."""
    return ConsumerSpec(
        stream=LOG,
        durable="discovery-v1",
        filter_subjects=[subjects.ALL_RETEST],
        max_ack_pending=64,
        ack_wait_s=30.0,
        max_deliver=settings.max_deliver,
    )



def discovery_live_consumer(settings: Settings) -> ConsumerSpec:
    """The chat backends' live counts (``canary.live.>``): discovery sums them for confirmation probes.

    From the time the durable is first created (counts older than the window ask for nothing);
    many in flight, each handled at once (a dictionary update), a redelivery counted once.
    """
    return ConsumerSpec(
        stream=LOG,
        durable="discovery-live-v1",
        filter_subjects=[subjects.ALL_LIVE],
        max_ack_pending=256,
        ack_wait_s=30.0,
        max_deliver=settings.max_deliver,
        deliver_policy=DeliverPolicy.NEW,
    )
