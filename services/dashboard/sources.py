"""Reading what the read model needs: the judge's state, the router's snapshots and the log.

:class:`FleetReader` is the I/O side of :mod:`reverie_canary.services.dashboard.core`:
it loads each model's judge record from Redis (read only), its current
IgnoreSnapshot from the KV bucket ``canary-routing``, and folds the last day of
the log (``CANARY_LOG``, from :data:`~reverie_canary.services.dashboard.core.SPEND_WINDOW_S`
ago) into a :class:`~reverie_canary.services.dashboard.core.LogWindow`, then
follows the log from where it stopped (``canary status --watch``).  It writes
nothing anywhere.

The NATS credential is the settings' one: the ``operator`` user (``canary
status``) or the read-only ``dashboard`` user (``canary dashboard``, ``canary
incident``) may read the streams and the bucket (``shared/nats/server.conf``).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from typing import Any

from reverie_canary.services.dashboard.core import (
    SPEND_WINDOW_S,
    FleetStatus,
    LogWindow,
    SnapshotMark,
    add_snapshot,
    fleet_status,
    model_status,
)
from reverie_canary.services.judge.core import ModelState, Policy
from reverie_canary.services.judge.store import RedisJudgeStore
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.errors import CanaryError, Transient, Undecodable
from reverie_canary.shared.contract.events import DECISION_VARIANTS
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot
from reverie_canary.shared.runtime import clock, eventlog
from reverie_canary.shared.runtime.retry import NATS_FAULTS
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, ROUTING_BUCKET

#: What the window folds: listings and closes, results, verdicts, decisions (and snapshots, to notice them).
#: Operator commands too (the provider page shows overrides and lifts, who and why) and the chat
#: backends' served counts (the look-back shows them), their live counts and the confirmation probes' answers
#: (shown beside the verdicts).
WINDOW_SUBJECTS = eventlog.prefixes_of([subjects.ALL_DISCOVERY, subjects.ALL_RESULTS, subjects.ALL_VERDICTS,
                                        subjects.ALL_DECISIONS, subjects.ALL_ROUTING, subjects.ALL_OPS,
                                        subjects.ALL_SERVED, subjects.ALL_CYCLES, subjects.ALL_LIVE,
                                        subjects.ALL_CONFIRMATIONS])
#: The longest one read of the log may take (s): a bound, not an expectation (a day of a large fleet reads in seconds).
READ_TIMEOUT_S = 120.0
#: Types whose arrival changes what ``canary status`` shows at a glance (a refresh of ``--watch``).
#: A decision arrives as one of its variants (``Suspended`` ...): every variant's name is here.
REFRESH_ON = ("CycleVerdict", "CycleClosed", "Decision", *(t.__name__ for t in DECISION_VARIANTS), "IgnoreSnapshot",
              "CycleUnplanned", "CycleSized")


class SourceError(CanaryError):
    """A source of the read model could not be read (NATS, the bucket, Redis); the message says which."""


class FleetReader:
    """Loads the read model's inputs and builds :class:`~reverie_canary.services.dashboard.core.FleetStatus`.

    Use as an async context manager.  :meth:`follow` folds the log events that
    arrived since the last call; :meth:`status` builds the view from the
    window, Redis and the bucket as they are now.
    """

    def __init__(self, settings: Settings, *, window_s: float = SPEND_WINDOW_S, idle_s: float = 2.0,
                 read_timeout_s: float = READ_TIMEOUT_S, window: LogWindow | None = None) -> None:
        self.settings = settings
        self.window_s = window_s
        self.idle_s = idle_s
        self.read_timeout_s = read_timeout_s
        self.window = window or LogWindow()
        self.nc: Any = None
        self.js: Any = None
        self.kv: Any = None
        self.redis: Any = None
        self.store: RedisJudgeStore | None = None

    async def __aenter__(self) -> FleetReader:
        from reverie_canary.shared.runtime.service import nats_connect_once, redis_client

        try:
            self.nc = await nats_connect_once(self.settings)
        except ConnectionError as exc:
            raise SourceError(str(exc)) from exc
        self.js = self.nc.jetstream(timeout=5.0)
        self.redis = redis_client(self.settings)
        self.store = RedisJudgeStore(self.redis, self.settings.namespace)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.redis is not None:
            with contextlib.suppress(Exception):
                await self.redis.aclose()
        if self.nc is not None:
            with contextlib.suppress(Exception):
                await self.nc.close()

    async def follow(self) -> list[Any]:
        """Fold the log events stored since the last call (the first call: the last ``window_s``).

        Returns:
            The events folded whose type is in :data:`REFRESH_ON` (a view changes with them), in
            log order; the others are folded and not kept: a first read folds the whole window
            (at 2,000 endpoints a day of results), and holding each decoded event until the read
            ends made the read's peak memory the window's size.

        Raises:
            SourceError: the log cannot be read (no stream: ``canary init``; a permission).
        """
        from nats.js.errors import NotFoundError

        folded: list[Any] = []

        def on_event(item: eventlog.LoggedEvent) -> None:
            self.window.add(item.event, item.seq)
            if type(item.event).__name__ in REFRESH_ON:
                folded.append(item.event)

        try:
            if self.window.since is None:
                self.window.since = clock.now() - timedelta(seconds=self.window_s)
                self.window.log_start = await self._log_start()
                read = eventlog.scan_log(self.js, on_event, prefixes=WINDOW_SUBJECTS, since=self.window.since,
                                         idle_s=self.idle_s)
            else:
                read = eventlog.scan_log(self.js, on_event, prefixes=WINDOW_SUBJECTS,
                                         from_seq=self.window.last_seq + 1, idle_s=self.idle_s)
            last = await asyncio.wait_for(read, timeout=self.read_timeout_s)
        except TimeoutError as exc:
            raise SourceError(f"reading the log {LOG} took longer than {self.read_timeout_s:g} s "
                              f"({self.window.events} events folded so far)") from exc
        except NotFoundError as exc:
            raise SourceError(f"no stream {LOG} on {self.settings.nats_url} (run canary init)") from exc
        except NATS_FAULTS as exc:  # a timeout, a permission the credential lacks
            raise SourceError(f"reading the log {LOG} failed: {exc!r}") from exc
        self.window.last_seq = max(self.window.last_seq, last)
        return folded

    async def _log_start(self) -> datetime | None:
        """When the log's oldest message was stored (facts before it are gone: the stream's age limit)."""
        info = await self.js.stream_info(LOG)
        if not info.state.messages:
            return None
        try:
            return (await self.js.get_msg(LOG, info.state.first_seq)).time
        except NATS_FAULTS:  # deleted meanwhile, or not permitted: unknown
            return None

    async def snapshot(self, model: str) -> IgnoreSnapshot | None:
        """The model's current IgnoreSnapshot in the bucket (``None``: none written)."""
        from nats.js.errors import BucketNotFoundError, KeyNotFoundError, NotFoundError

        try:
            if self.kv is None:
                self.kv = await self.js.key_value(ROUTING_BUCKET)
            entry = await self.kv.get(subjects.kv_key(model))
        except KeyNotFoundError:
            return None
        except (BucketNotFoundError, NotFoundError) as exc:
            raise SourceError(f"no KV bucket {ROUTING_BUCKET} (run canary init)") from exc
        except NATS_FAULTS as exc:
            raise SourceError(f"reading the KV bucket {ROUTING_BUCKET} failed: {exc!r}") from exc
        if not entry.value:
            return None
        try:
            return codec.SNAPSHOT.decode(entry.value)
        except Undecodable as exc:
            raise SourceError(f"the snapshot of {model} in {ROUTING_BUCKET} is unreadable: {exc}") from exc

    async def snapshot_history(self, model: str) -> list[SnapshotMark]:
        """The model's snapshots the KV bucket still keeps (its history: the last versions), oldest first.

        Raises:
            SourceError: the bucket cannot be read.
        """
        from nats.js.errors import BucketNotFoundError, NoKeysError, NotFoundError

        try:
            if self.kv is None:
                self.kv = await self.js.key_value(ROUTING_BUCKET)
            entries = await asyncio.wait_for(self.kv.history(subjects.kv_key(model)), timeout=10.0)
        except NoKeysError:
            return []
        except (BucketNotFoundError, NotFoundError) as exc:
            raise SourceError(f"no KV bucket {ROUTING_BUCKET} (run canary init)") from exc
        except NATS_FAULTS as exc:
            raise SourceError(f"reading the history of {ROUTING_BUCKET} failed: {exc!r}") from exc
        marks = []
        for entry in entries:
            if not entry.value:
                continue
            try:
                s = codec.SNAPSHOT.decode(entry.value)
            except Undecodable:
                continue  # the router never wrote it; the look-back says what it knows
            marks.append(SnapshotMark(version=s.version, at=s.at, entries=list(s.entries),
                                      quantizations=list(s.quantizations)))
        return marks

    async def merge_history(self, model: str) -> None:
        """Add the bucket's kept snapshots of ``model`` to the window (the log read may start after the one in
        force at a look-back's time)."""
        mw = self.window.model(model)
        for mark in await self.snapshot_history(model):
            add_snapshot(mw, mark)

    async def judge_state(self, model: str) -> ModelState | None:
        """The judge's stored state of ``model`` (``None``: nothing in Redis)."""
        assert self.store is not None
        try:
            if model not in await self.store.models():
                return None
            return (await self.store.load(model)).state
        except Transient as exc:
            raise SourceError(f"Redis at {self.settings.redis_url.split('@')[-1]}: {exc}") from exc

    async def status(self, models: list[str] | None = None, now: datetime | None = None) -> FleetStatus:
        """The fleet's state now (default: the configured models), from the window folded so far."""
        now = now or clock.now()
        policy = Policy.from_settings(self.settings)
        views = []
        for model in models or list(self.settings.models):
            views.append(model_status(
                model, now=now, policy=policy, kinds=list(self.settings.kinds),
                state=await self.judge_state(model), snapshot=await self.snapshot(model),
                window=self.window.models.get(model), cycle_interval_s=self.settings.cycle_interval_s,
                controls=dict(self.settings.controls), log_start=self.window.log_start,
                time_scale=self.settings.time_scale))
        return fleet_status(views, now=now, window=self.window)


async def read_fleet(settings: Settings, models: list[str] | None = None) -> FleetStatus:
    """One read of the fleet's state now (what ``canary status`` prints).

    Raises:
        SourceError: NATS, the bucket or Redis could not be read.
    """
    async with FleetReader(settings) as reader:
        await reader.follow()
        return await reader.status(models)
