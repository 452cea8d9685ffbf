"""Router service: keep the three layers, publish a new IgnoreSnapshot when the merge changes.

Inputs (durable ``router-v1``, in log order): judge decisions (``suspend`` and
``end``; observe-mode ``would_*`` never touch routing) and operator commands
(``AddOverride``, ``RemoveOverride``, ``ReloadExclusions``).  Overrides and
suspensions live in Redis, so a restart keeps them; the reviewed exclusions
come from the file.  Snapshots are written to the KV bucket with
compare-and-set on the last revision (versions never go back) and published
on ``canary.routing.<model>``.  A timer publishes a new snapshot at the moment
an entry expires, not at the next cycle.

The reviewed exclusions file is read at start (an invalid file stops the
router, naming the line), again on ``ReloadExclusions``, and again whenever its
size, mtime or inode changes (polled every ``EXCLUSIONS_POLL_S``): an invalid
new file is refused with a log line naming the line, and the old exclusions
stay in force.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from datetime import datetime
from pathlib import Path

import msgspec
from faststream import FastStream
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue
from redis.exceptions import RedisError

from reverie_canary.services.router.core import Exclusion, Override, Suspension, merge, next_expiry, parse_exclusions
from reverie_canary.shared import clock, codec, eventlog, ids, streams, subjects
from reverie_canary.shared.aio import wait_event
from reverie_canary.shared.broker import Delivery
from reverie_canary.shared.codec import Codec
from reverie_canary.shared.commands import AddOverride, LiftSuspension, ReloadExclusions, RemoveOverride, SetMode
from reverie_canary.shared.errors import ConfigError, Rejected, Transient
from reverie_canary.shared.events import Decision
from reverie_canary.shared.service import Shell, nats_connect, redis_client
from reverie_canary.shared.settings import Settings
from reverie_canary.shared.snapshots import IgnoreSnapshot
from reverie_canary.shared.streams import LOG, ROUTING_BUCKET

ROUTER_INPUT = Codec(Decision | AddOverride | RemoveOverride | ReloadExclusions | LiftSuspension | SetMode,
                     "router input")

_override_dec = msgspec.json.Decoder(Override)
_suspension_dec = msgspec.json.Decoder(Suspension)
SEEN_MEMORY = 10_000
#: How often the router looks at the exclusions file for a change (seconds).
EXCLUSIONS_POLL_S = 2.0
#: A changed exclusions file must keep its (inode, size, mtime) this long before it is read.
EXCLUSIONS_SETTLE_S = 0.25
#: Longest time between two merge passes of the expiry loop (seconds).
MERGE_AT_LEAST_S = 30.0

FileSignature = tuple[int, int, int] | None


def file_signature(path: str) -> FileSignature:
    """``(inode, size, mtime_ns)`` of ``path``, or ``None`` when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Router:
    """The router's state access and snapshot publishing."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.settings = shell.settings
        self.redis = None
        self.kv: KeyValue | None = None
        self.exclusions: list[Exclusion] = []
        self.exclusions_signature: FileSignature = None
        self.exclusions_digest: str = ""
        self.lock = asyncio.Lock()
        self.wake = asyncio.Event()
        ns = self.settings.namespace
        self.k_overrides = f"{ns}:router:overrides"
        self.k_suspensions = f"{ns}:router:suspensions"
        self.k_seen = f"{ns}:router:seen"
        self.k_marker = f"{ns}:router:initialized"
        self.nc = None  # a plain connection for reading the log back (recovery)
        self.consumer = None
        self.k_models = f"{ns}:router:models"

    # -- state -------------------------------------------------------------------

    async def _call(self, coro):
        try:
            return await coro
        except RedisError as exc:
            raise Transient(f"redis: {exc!r}") from exc

    async def overrides(self) -> list[Override]:
        raw = await self._call(self.redis.hgetall(self.k_overrides))
        return sorted((_override_dec.decode(v) for v in raw.values()), key=lambda o: (o.model, o.provider))

    async def suspensions(self) -> list[Suspension]:
        raw = await self._call(self.redis.hgetall(self.k_suspensions))
        return sorted((_suspension_dec.decode(v) for v in raw.values()), key=lambda s: (s.model, s.provider))

    async def models(self) -> list[str]:
        raw = await self._call(self.redis.smembers(self.k_models))
        known = {m.decode() if isinstance(m, bytes) else m for m in raw}
        return sorted(known | set(self.settings.models))

    async def _seen(self, anchor: str) -> bool:
        return await self._call(self.redis.zscore(self.k_seen, anchor)) is not None

    async def _mark(self, anchor: str) -> None:
        await self._call(self.redis.zadd(self.k_seen, {anchor: clock.now().timestamp()}))
        await self._call(self.redis.zremrangebyrank(self.k_seen, 0, -SEEN_MEMORY - 1))

    # -- recovery --------------------------------------------------------------------

    async def recover(self, js, spec) -> int:
        """Rebuild overrides and suspensions from the log when Redis lost them.

        A marker key says this Redis has held the router's state.  Without it,
        if the router's durable consumer has already acknowledged part of the
        log, Redis was flushed or replaced: every decision and command up to
        that position is applied again (no snapshot published meanwhile), so the
        first snapshot after the restart does not drop live overrides or
        suspensions.  Returns how many events were applied (0: nothing to do).
        """
        if await self._call(self.redis.exists(self.k_marker)):
            return 0
        floor = await eventlog.acknowledged_position(js, spec.stream, spec.durable)
        applied = 0
        if floor:
            for item in await eventlog.read_log(js, prefixes=eventlog.prefixes_of(spec.filter_subjects),
                                                until_seq=floor):
                anchor = getattr(item.event, "decision_id", None) or getattr(item.event, "command_id", None)
                if anchor is None or await self._seen(anchor):
                    continue
                try:
                    await self._apply(item.event)
                except Rejected:
                    pass  # refused live too
                await self._mark(anchor)
                applied += 1
        await self._call(self.redis.set(self.k_marker, clock.now().isoformat()))
        return applied

    async def ensure_state(self) -> None:
        """Rebuild from the log if Redis lost the router's state (at start, or under a running router)."""
        if self.nc is None or self.consumer is None:
            return
        if await self._call(self.redis.exists(self.k_marker)):
            return
        applied = await self.recover(self.nc.jetstream(), self.consumer)
        if applied:
            self.shell.log.warning("state_rebuilt_from_log", events=applied,
                                   reason="no state in Redis, but the log was already consumed")

    # -- inputs --------------------------------------------------------------------

    async def apply(self, event, delivery: Delivery) -> None:
        """Apply one decision or command, then publish what changed."""
        match event:
            case Decision():
                anchor = event.decision_id
            case AddOverride() | RemoveOverride() | ReloadExclusions():
                anchor = event.command_id
            case _:
                return  # lift and mode are the judge's
        await self.ensure_state()
        if await self._seen(anchor):
            return
        changed_models = await self._apply(event)
        for model in changed_models:
            # a redelivery may follow a crash between the KV write and the publish
            # on canary.routing: republish the current version (same Nats-Msg-Id)
            await self.publish_snapshot(model, republish=delivery.deliveries > 1)
        await self._mark(anchor)
        self.wake.set()

    async def _apply(self, event) -> list[str]:
        match event:
            case Decision(action="suspend"):
                if event.until is None:
                    raise Rejected(f"suspend decision {event.decision_id} has no until")
                record = Suspension(provider=event.provider, model=event.model, reason=event.detail or event.reason,
                                    since=event.at, until=event.until, decision_id=event.decision_id)
                await self._call(self.redis.hset(self.k_suspensions, f"{event.model}\n{event.provider}",
                                                 msgspec.json.encode(record)))
                await self._call(self.redis.sadd(self.k_models, event.model))
                self.shell.log.info("suspension_applied", model=event.model, provider=event.provider,
                                    until=event.until.isoformat())
                return [event.model]
            case Decision(action="end"):
                await self._call(self.redis.hdel(self.k_suspensions, f"{event.model}\n{event.provider}"))
                return [event.model]
            case Decision():
                return []
            case AddOverride():
                if event.model != "*" and event.model not in self.settings.models:
                    raise Rejected(f"override of {event.provider} for {event.model}: not a watched model "
                                   f"({', '.join(self.settings.models)}); use * for every model")
                if event.expires_at is not None and event.expires_at <= event.at:
                    raise Rejected(f"override of {event.provider} by {event.actor} expires before it starts")
                record = Override(provider=event.provider, model=event.model, reason=event.reason, actor=event.actor,
                                  since=event.at, until=event.expires_at, reference=event.reference,
                                  command_id=event.command_id)
                await self._call(self.redis.hset(self.k_overrides, f"{event.provider}\n{event.model}",
                                                 msgspec.json.encode(record)))
                self.shell.log.info("override_added", provider=event.provider, model=event.model, actor=event.actor,
                                    reason=event.reason)
                return await self._affected(event.model)
            case RemoveOverride():
                removed = await self._call(self.redis.hdel(self.k_overrides, f"{event.provider}\n{event.model}"))
                if not removed:
                    raise Rejected(f"no override of {event.provider} for {event.model} to remove")
                self.shell.log.info("override_removed", provider=event.provider, model=event.model, actor=event.actor)
                return await self._affected(event.model)
            case ReloadExclusions():
                try:
                    self.load_exclusions()
                except ConfigError as exc:
                    raise Rejected(f"exclusions not reloaded, the old ones stay: {exc}") from exc
                self.shell.log.info("exclusions_reloaded", count=len(self.exclusions), actor=event.actor)
                return await self.models()
        return []

    # -- the reviewed exclusions file -------------------------------------------------

    def load_exclusions(self) -> bool:
        """Read the exclusions file into :attr:`exclusions` (no file configured: none).

        Returns:
            ``True`` when the file's content differs from the one last loaded.

        Raises:
            ConfigError: unreadable or invalid file (naming the line); the
                exclusions loaded before stay in force.
        """
        path = self.settings.exclusions_file
        if not path:
            self.exclusions = []
            return False
        signature = file_signature(path)
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            self.exclusions_signature = signature
            raise ConfigError(f"cannot read exclusions file {path}: {exc}") from exc
        self.exclusions_signature = signature
        digest = hashlib.sha256(raw).hexdigest()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8: {exc}") from exc
        self.exclusions = parse_exclusions(text, str(path))
        changed = digest != self.exclusions_digest
        self.exclusions_digest = digest
        return changed

    async def check_exclusions_file(self) -> bool:
        """Reload the exclusions file if it changed on disk; publish what that changes.

        An invalid new file is refused with a warning naming the line; the old
        exclusions stay (until the file changes again).  A file still being
        written (its signature moves within ``EXCLUSIONS_SETTLE_S``) is left
        for the next poll.

        Returns:
            ``True`` when new exclusions were loaded.

        Raises:
            Transient: KV or NATS unavailable while publishing.
        """
        path = self.settings.exclusions_file
        if not path:
            return False
        signature = file_signature(path)
        if signature == self.exclusions_signature:
            return False
        if signature is not None:
            # A file being saved in place is first truncated, then written: read it only once it
            # held still for EXCLUSIONS_SETTLE_S, so that a half-written file that happens to be
            # valid TOML (empty, or cut between two entries) never drops reviewed exclusions.
            await asyncio.sleep(EXCLUSIONS_SETTLE_S)
            if file_signature(path) != signature:
                return False  # still changing: the next poll looks again
        if signature is None:
            self.exclusions_signature = None
            self.shell.log.warning("exclusions_file_missing", path=path, kept=len(self.exclusions))
            return False
        try:
            changed = self.load_exclusions()
        except ConfigError as exc:
            self.shell.log.warning("exclusions_refused", path=path, error=str(exc), kept=len(self.exclusions))
            return False
        if not changed:
            return False
        self.shell.log.info("exclusions_reloaded", count=len(self.exclusions), path=path, trigger="file_changed")
        for model in await self.models():
            await self.publish_snapshot(model)
        return True

    async def _affected(self, scope: str) -> list[str]:
        if scope == "*":
            return await self.models()
        await self._call(self.redis.sadd(self.k_models, scope))
        return [scope]

    # -- snapshots -------------------------------------------------------------------

    async def current(self, model: str) -> tuple[IgnoreSnapshot | None, int]:
        """The snapshot in the KV bucket and its revision (``None, 0`` when absent)."""
        assert self.kv is not None
        try:
            entry = await self.kv.get(subjects.kv_key(model))
        except KeyNotFoundError:
            return None, 0
        except Exception as exc:  # nats timeouts and connection errors during an outage
            raise Transient(f"kv read for {model} failed: {exc!r}") from exc
        if entry.value is None:
            return None, entry.revision or 0
        return codec.SNAPSHOT.decode(entry.value), entry.revision or 0

    async def publish_snapshot(self, model: str, now: datetime | None = None, *,
                               republish: bool = False) -> IgnoreSnapshot | None:
        """Merge the layers for ``model``; write and publish a new version if it changed.

        Args:
            model: the model id.
            now: time of the merge (UTC); default the wall clock.
            republish: when the merge is unchanged, publish the current version
                on ``canary.routing.<model>`` again (deduplicated by its id).

        Returns:
            The new snapshot, or ``None`` when the merge is unchanged.

        Raises:
            Transient: KV or NATS unavailable, or another writer won the race.
        """
        async with self.lock:
            now = now or clock.now()
            entries = merge(model, self.exclusions, await self.overrides(), await self.suspensions(), now)
            previous, revision = await self.current(model)
            if previous is not None and previous.entries == entries:
                if republish:
                    await self.shell.publisher.publish(previous, subjects.routing(model),
                                                       ids.snapshot_id(model, previous.version), LOG)
                return None
            if previous is None and not entries and revision:
                return None
            snapshot = IgnoreSnapshot(at=now, model=model, version=(previous.version if previous else 0) + 1,
                                      entries=entries)
            assert self.kv is not None
            try:
                if revision:
                    await self.kv.update(subjects.kv_key(model), codec.encode(snapshot), last=revision)
                else:
                    await self.kv.create(subjects.kv_key(model), codec.encode(snapshot))
            except KeyWrongLastSequenceError as exc:
                raise Transient(f"snapshot of {model} changed underneath: {exc}") from exc
            except Exception as exc:
                if "wrong last sequence" in str(exc).lower():
                    raise Transient(f"snapshot of {model} changed underneath: {exc}") from exc
                raise Transient(f"kv write for {model} failed: {exc!r}") from exc
            await self.shell.publisher.publish(snapshot, subjects.routing(model),
                                               ids.snapshot_id(model, snapshot.version), LOG)
            self.shell.log.info("snapshot_published", model=model, version=snapshot.version,
                                ignore=snapshot.ignore_at(now))
            return snapshot

    async def expiry_loop(self) -> None:
        """Publish a new snapshot at the moment an entry expires; reload a changed exclusions file.

        The merge runs again at the next expiry (+5 ms), after every applied
        input (:attr:`wake`) and at least every 30 s; the exclusions file's
        signature is looked at every ``EXCLUSIONS_POLL_S`` seconds when one is
        configured.  Transient failures are logged and retried after 1 s.
        """
        poll_s = EXCLUSIONS_POLL_S if self.settings.exclusions_file else MERGE_AT_LEAST_S
        due = 0.0  # loop.time() of the next merge pass; 0: now
        loop = asyncio.get_running_loop()
        while True:
            self.wake.clear()  # before the pass: an input applied during it wakes the next wait
            try:
                await self.check_exclusions_file()
                if loop.time() >= due:
                    await self.ensure_state()
                    now = clock.now()
                    for model in await self.models():
                        await self.publish_snapshot(model, now)
                    upcoming = next_expiry(self.exclusions, await self.overrides(), await self.suspensions(), now)
                    wait = MERGE_AT_LEAST_S if upcoming is None else (
                        max(0.0, (upcoming - clock.now()).total_seconds()) + 0.005)
                    due = loop.time() + min(wait, MERGE_AT_LEAST_S)
            except Transient as exc:
                self.shell.log.warning("expiry_check_failed", error=str(exc))
                due = loop.time() + 1.0
            except Exception:  # a bug or an unexpected error: this loop must outlive it
                self.shell.log.error("expiry_check_crashed", exc_info=True)
                due = loop.time() + 1.0
            if await wait_event(self.wake, min(due - loop.time(), poll_s)):
                due = 0.0  # an input was applied: merge again (its expiry may be the next one)


def create_app(settings: Settings | None = None) -> FastStream:
    """The router's FastStream app.

    Raises:
        ConfigError: at start, when the reviewed exclusions file is invalid
            (the message names the file and line).
    """
    settings = settings or Settings.load()
    shell = Shell("router", settings)
    router = Router(shell)
    router.load_exclusions()

    async def open_clients() -> None:
        router.redis = redis_client(settings)
        # Bind the bucket before the subscriber starts: handlers need it at once.
        await shell.broker.connect()
        router.kv = await shell.broker.key_value(ROUTING_BUCKET, declare=False)
        router.nc = await nats_connect(settings, max_reconnect_attempts=-1)
        router.consumer = streams.router_consumer(settings)
        await router.ensure_state()

    async def close_clients() -> None:
        if router.redis is not None:
            await router.redis.aclose()
        if router.nc is not None:
            await router.nc.close()

    shell.on_startup(open_clients)
    shell.on_shutdown(close_clients)
    shell.subscribe(streams.router_consumer(settings), ROUTER_INPUT, router.apply)
    shell.background(router.expiry_loop)
    return shell.app
