"""The chat-backend client: the ``provider`` object for the next OpenRouter request.

Usage (see ``examples/chat_backend.py``; ``pip install reverie-canary-client``, which
needs only nats-py and msgspec)::

    from reverie_canary.client import IgnoreListClient


    client = IgnoreListClient(nats_url, "deepseek/deepseek-chat-v3.1", cache_path="/var/cache/canary.json")
    await client.start()            # never raises for an unreachable bus
    body["provider"] = client.provider({"sort": "price"})   # sync, never blocks
    ...
    await client.stop()

Guarantees (docs/concepts/routing.md; issue "Router and its users"):

- At start it loads the last good snapshot from ``cache_path`` (if given), then
  the current one from the KV bucket ``canary-routing``, then watches it.
- It keeps the last good snapshot when NATS is unreachable and says how old it
  is (:attr:`age_s`); it reconnects and catches up on its own (on reconnection
  it reads the current value again and watches anew, within about a second).
- It refuses a snapshot whose version is lower than one it applied of the same
  store (``IgnoreSnapshot.epoch``: no rollback), and says so until it applies a
  newer one: in :attr:`problem`, in the counter :attr:`refused_rollbacks` and in
  the log (``snapshot_refused``, each refused version once).  A snapshot of
  another epoch (the router's store is new: a fresh deployment, another
  cluster, a cache file from another system) is applied whatever its version,
  and said once at WARNING (``snapshot_epoch_changed``; :attr:`epoch_changes`).
- :meth:`health` says all of it in one value (connected, version, epoch, age,
  problem, the counters) for the backend's own health endpoint and metrics.
- :meth:`provider` drops entries whose ``until`` has passed on the client's own
  clock, merges the caller's preferences (their ``ignore`` entries are kept),
  hands over the operators' quantization floor as ``quantizations`` (an
  allow-list; :meth:`quantizations`), and never waits on the bus.
- :attr:`problem` says, in one line, why it has no current snapshot (bus
  unreachable, credential refused, bucket or snapshot missing); each new
  problem is logged once at WARNING, and its end at INFO.
- :meth:`record_served` (when the caller hands it the gateway's response
  metadata) keeps which provider served each request, with its time, in a
  bounded ring (:class:`~reverie_canary.client.served.ServedRecorder`); with
  ``publish_served_s`` it publishes counts per provider on
  ``canary.served.<model>`` that often.  Never a prompt or a reply: only the
  provider, the model and the time are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import ssl
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import nats
from msgspec import Struct
from nats.errors import Error as NatsError
from nats.js.api import DeliverPolicy
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, NotFoundError

from reverie_canary.client import subjects
from reverie_canary.client.aio import stop_task
from reverie_canary.client.served import DEFAULT_CAPACITY, MIN_LIVE_PERIOD_S, LiveRecorder, ServedRecorder
from reverie_canary.client.subjects import ROUTING_BUCKET
from reverie_canary.client.wire import IgnoreSnapshot, SnapshotUndecodable, decode_snapshot, encode

#: While the watch is quiet, read the current value this often (seconds).
RECHECK_S = 15.0
#: How often the watch loop looks for a reconnection to resynchronise (seconds).
POLL_S = 0.5
#: Timeout of one JetStream request (bucket lookup, get); short, so that a
#: request lost in an outage does not delay catching up after it (seconds).
JS_TIMEOUT_S = 2.0
#: Longest wait for the watch task to stop in :meth:`IgnoreListClient.stop` (seconds).
STOP_S = 5.0
#: Seconds an unused watch consumer lives on the server after its client went (``KeyValue.watch``'s 5 minutes).
WATCH_IDLE_S = 300.0
#: KV headers (ADR-8, as nats-py's ``nats.js.kv``): the operation of a delete or purge, a server's marker.
KV_OPERATION = "KV-Operation"
KV_DEL = "DEL"
KV_PURGE = "PURGE"
MARKER_REASON = "Nats-Marker-Reason"


#: Seconds between the client's pings to NATS, and how many may go unanswered before the connection is
#: taken for lost (``health().problem`` says so, the cache is served meanwhile).
PING_INTERVAL_S = 5
MAX_OUTSTANDING_PINGS = 2

class IgnoreListClient:
    """Follows one model's IgnoreSnapshot and hands out the ``provider`` object.

    Args:
        nats_url: NATS server URL.
        model: the model id whose ignore list is followed.
        user, password: the chat backend's NATS credential (read-only on routing).
        cache_path: file keeping the last good snapshot across restarts.
        on_change: called with each newly applied snapshot.
        now: the client's clock (UTC), for expiry; default the system clock.
        tls: an SSLContext for a ``tls://`` NATS (:func:`reverie_canary.client.tls_context`: the
            CA to trust, the backend's client certificate); ``None``: as the URL says.
        served_capacity: entries the ring of served requests keeps (:meth:`record_served`).
        publish_served_s: publish the counts per provider this often (s); ``None``: never
            (the ring stays local).  Publishing needs the ``backend`` credential.
        source: this backend's name in the published counts (optional).
        publish_live_s: publish the reply guard's live counts (:class:`~reverie_canary.client.served.LiveCounts`:
            per provider and outcome reason, counts only) on ``canary.live.<model>`` this often (s, at least
            10); ``None``: never (they stay local, in :attr:`live`).  A period the bus cannot take within
            ``publish_timeout_s`` is dropped and the drop counted in the next one: never queued.
        publish_timeout_s: longest wait for one publication (s).
    """

    def __init__(self, nats_url: str, model: str, *, user: str = "", password: str = "",
                 cache_path: str | os.PathLike[str] | None = None,
                 on_change: Callable[[IgnoreSnapshot], None] | None = None,
                 now: Callable[[], datetime] | None = None,
                 tls: ssl.SSLContext | None = None, served_capacity: int = DEFAULT_CAPACITY,
                 publish_served_s: float | None = None, source: str = "",
                 publish_live_s: float | None = None, publish_timeout_s: float = 2.0) -> None:
        self.nats_url = nats_url
        #: TLS to NATS (a ``tls://`` URL): :func:`reverie_canary.client.tls_context` builds one
        self.tls = tls
        self.model = model
        self.user = user
        self.password = password
        self.cache_path = Path(cache_path) if cache_path else None
        self.on_change = on_change
        self.now = now or (lambda: datetime.now(timezone.utc))
        self.snapshot: IgnoreSnapshot | None = None
        #: snapshots refused (undecodable, or a rollback within one epoch)
        self.refused: int = 0
        #: snapshots refused because their version was lower than the one applied, in the same epoch
        self.refused_rollbacks: int = 0
        #: snapshots of another epoch applied (the router's store was new)
        self.epoch_changes: int = 0
        self.connected = False
        self._problem: str | None = None  # the bus's side: unreachable, refused credential, no bucket ...
        self._refusing: str | None = None  # a rollback refused and nothing newer applied since
        self._refused_version: tuple[str, int] | None = None
        self._contact: float | None = None
        self._checked = 0.0  # time.monotonic() of the last word from the bus (a value or a read)
        self._resync = False
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._last_error: str | None = None
        self._refused: str | None = None  # the server's authorization error, until a connection succeeds
        self._nc: Any = None
        self._log = _Log(logging.getLogger("reverie_canary.client"))
        self.served = ServedRecorder(model, capacity=served_capacity, source=source, now=self.now)
        if publish_served_s is not None and not 1.0 <= publish_served_s <= 86400.0:
            raise ValueError(f"publish_served_s {publish_served_s} outside 1..86400 s")
        self.publish_served_s = publish_served_s
        self._publisher: asyncio.Task[None] | None = None
        #: the reply guard's counts per provider and outcome reason for the current period (ReplyGuard records)
        self.live = LiveRecorder(model, source=source, now=self.now)
        if publish_live_s is not None and not MIN_LIVE_PERIOD_S <= publish_live_s <= 86400.0:
            raise ValueError(f"publish_live_s {publish_live_s} outside {MIN_LIVE_PERIOD_S:g}..86400 s")
        self.publish_live_s = publish_live_s
        self.publish_timeout_s = publish_timeout_s
        self._live_publisher: asyncio.Task[None] | None = None
        #: live-count periods published, and those dropped (the bus slow or away)
        self.live_published = 0
        self.live_dropped = 0

    # -- what the chat backend calls ---------------------------------------------

    def ignore(self) -> list[str]:
        """Provider tags to ignore now (expired entries dropped on this client's clock)."""
        if self.snapshot is None:
            return []
        return self.snapshot.ignore_at(self.now())

    def quantizations(self) -> list[str]:
        """The quantizations allowed now (the operators' quantization floor); ``[]``: no floor, every one routed.

        What goes in ``provider.quantizations``: an allow-list, so an endpoint
        that declares no quantization is not routed to while it is set.
        """
        return list(self.snapshot.quantizations) if self.snapshot is not None else []

    def provider(self, preferences: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``provider`` object for the next request (OpenRouter's provider routing documentation).

        Args:
            preferences: the caller's own provider preferences (``order``,
                ``sort``, ``ignore``, ``quantizations`` ...); kept, with ``ignore``
                unioned and ``quantizations`` narrowed to those the floor allows.

        Returns:
            A new dict, e.g. ``{"sort": "price", "ignore": ["lambda/fp8"]}``, with
            ``"quantizations": ["fp8", "bf16", ...]`` while a quantization floor is
            set (:meth:`quantizations`).  The caller's own ``quantizations`` are
            kept where the floor allows them; when it allows none of them, the
            floor's list is sent (an empty list would filter nothing).
        """
        out = dict(preferences or {})
        ours = self.ignore()
        theirs = list(out.get("ignore") or [])
        out["ignore"] = sorted(set(theirs) | set(ours))
        allowed = self.quantizations()
        if allowed:
            asked = [q for q in (out.get("quantizations") or []) if q in allowed]
            out["quantizations"] = asked or allowed
        return out

    def record_served(self, metadata: Any, *, at: datetime | None = None) -> str | None:
        """Record which provider served one request, from the gateway's response metadata (sync, never blocks).

        Args:
            metadata: the response JSON (or its first streamed chunk) as a dict; only its
                ``provider`` and ``model`` are read, nothing else is kept.
            at: when (UTC; default now).

        Returns:
            The provider recorded, or ``None`` when the metadata named none.
        """
        return self.served.record(metadata, at=at)

    @property
    def version(self) -> int:
        """Version of the applied snapshot (0: none)."""
        return self.snapshot.version if self.snapshot else 0

    @property
    def epoch(self) -> str:
        """Epoch (the router store's identity) of the applied snapshot (``""``: none, or a router without epochs)."""
        return self.snapshot.epoch if self.snapshot else ""

    @property
    def problem(self) -> str | None:
        """Why the ignore list served may not be the current one, in one line; ``None`` when it is.

        The bus's side first (unreachable, credential refused, no bucket or snapshot), else a
        refused rollback: the bus holds an older version of the same store than the one served.
        """
        return self._problem or self._refusing

    def health(self) -> ClientHealth:
        """The client's state in one value (for the backend's health endpoint, metrics and log)."""
        age = self.age_s
        return ClientHealth(model=self.model, connected=self.connected, version=self.version, epoch=self.epoch,
                            age_s=None if age is None else round(age, 3), problem=self.problem,
                            refused=self.refused, refused_rollbacks=self.refused_rollbacks,
                            epoch_changes=self.epoch_changes)

    @property
    def age_s(self) -> float | None:
        """Seconds since the bus last confirmed the snapshot (``None``: never)."""
        return None if self._contact is None else time.monotonic() - self._contact

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Load the cached snapshot and start following the bus in the background."""
        self._stopping = False
        self._load_cache()
        if self._contact is None:  # until the bus answers, the list served is not known to be current
            # said in health() at once, not logged: a start is not a problem worth a warning line
            self._problem = (f"{self._nats_prefix()}not answered yet: connecting (serving "
                             + (f"v{self.version} from the cache" if self.snapshot is not None else "no snapshot")
                             + " until the current one is read)")
        self._task = asyncio.create_task(self._run(), name=f"ignore-list-{self.model}")
        if self.publish_served_s is not None:
            self._publisher = asyncio.create_task(self._publish_served(), name=f"served-{self.model}")
        if self.publish_live_s is not None:
            self._live_publisher = asyncio.create_task(self._publish_live(), name=f"live-{self.model}")
        await asyncio.sleep(0)

    async def wait_ready(self, timeout_s: float = 10.0) -> bool:
        """Wait (``timeout_s`` at most) until the bus answered; ``True`` then, else only if a cached snapshot is served.

        The bus's answer may be that the model has no snapshot yet (the router has
        not written one, or does not watch the model): then ``True`` with
        ``snapshot`` ``None``, nothing ignored, and ``problem`` saying why.  A
        backend that must not start without an ignore list checks ``snapshot``.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._contact is not None:
                return True
            await asyncio.sleep(0.05)
        return self.snapshot is not None

    async def stop(self) -> None:
        """Stop following the bus and close the connection (returns within about a second)."""
        self._stopping = True
        if self._live_publisher is not None:
            await stop_task(self._live_publisher, STOP_S)
            self._live_publisher = None
            await self._publish_live_once()
        if self._publisher is not None:
            await stop_task(self._publisher, STOP_S)
            self._publisher = None
            await self._publish_once()  # the last period's counts are not lost on a clean stop
        task = self._task
        if task is not None:
            # Python 3.11's asyncio.wait_for (inside nats-py's KeyWatcher.updates) can swallow a
            # cancellation when an update arrives at the same moment: the loop also checks
            # _stopping, and stop_task cancels again until the task is done (bounded).
            if not await stop_task(task, STOP_S):
                self._log.error("ignore_list_client_not_stopped", model=self.model, waited_s=STOP_S)
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._nc.close(), timeout=5.0)

    # -- applying snapshots ------------------------------------------------------

    def apply(self, raw: bytes) -> bool:
        """Apply a snapshot's bytes if newer, or of another epoch; ``True`` when applied.

        Within one epoch, lower versions are refused (no rollback: counted in
        :attr:`refused_rollbacks`, said in :attr:`problem` until a newer version
        comes, logged once per refused version) and an equal one changes
        nothing.  A snapshot of another epoch is applied whatever its version
        (a new store counts from 1 again) and logged.  Undecodable bytes are
        refused with a log line, and the last good snapshot stays.
        """
        try:
            snapshot = decode_snapshot(raw)
        except SnapshotUndecodable as exc:
            self._log.warning("snapshot_refused", reason="undecodable", error=str(exc))
            self.refused += 1
            return False
        if snapshot.model != self.model:
            return False
        held = self.snapshot
        if held is not None and snapshot.epoch != held.epoch:
            self.epoch_changes += 1
            self._log.warning("snapshot_epoch_changed", model=self.model, version=snapshot.version,
                              epoch=snapshot.epoch or "(none)", applied=held.version, applied_epoch=held.epoch or "(none)",
                              meaning="the router's store is new: its versions count again from 1")
        elif held is not None and snapshot.version <= held.version:
            if snapshot.version < held.version:
                self.refused += 1
                self.refused_rollbacks += 1
                if self._refused_version != (snapshot.epoch, snapshot.version):
                    self._refused_version = (snapshot.epoch, snapshot.version)
                    self._refusing = (f"refusing v{snapshot.version} from the bus: v{held.version} of the same "
                                      f"store (epoch {held.epoch or '(none)'}) is served; a rollback is refused "
                                      "until a newer version comes (if the store was reset without a new epoch, "
                                      "delete the cache file" + (f" {self.cache_path}" if self.cache_path else "")
                                      + " and restart)")
                    self._log.warning("snapshot_refused", model=self.model, reason="rollback",
                                      version=snapshot.version, applied=held.version, epoch=held.epoch or "(none)",
                                      refused_rollbacks=self.refused_rollbacks)
            return False
        if self._refusing is not None:
            self._log.info("snapshot_rollback_over", model=self.model, version=snapshot.version)
        self._refusing = self._refused_version = None
        self.snapshot = snapshot
        self._save_cache(raw)
        if self.on_change is not None:
            try:
                self.on_change(snapshot)
            except Exception:  # the caller's callback must not stop the client following the bus
                self._log.error("on_change_failed", version=snapshot.version, exc_info=True)
        return True

    async def _publish_served(self) -> None:
        assert self.publish_served_s is not None
        while not self._stopping:
            await asyncio.sleep(self.publish_served_s)
            await self._publish_once()

    async def _publish_once(self) -> None:
        if self._nc is None or not self.connected:
            return  # kept for the next period
        try:
            await self.served.publish(self._nc)
        except (NatsError, OSError) as exc:  # a permission, no stream, a timeout: counted again next time
            self._log.warning("served_counts_not_published", model=self.model, error=repr(exc))

    async def _publish_live(self) -> None:
        assert self.publish_live_s is not None
        while not self._stopping:
            await asyncio.sleep(self.publish_live_s)
            await self._publish_live_once()

    async def _publish_live_once(self) -> None:
        """Publish the period's live counts, or drop them and count the drop (bus away, slow or refusing)."""
        if self._nc is None or not self.connected:
            counts = self.live.take()
            if counts is not None:
                self.live.dropped(counts)
                self.live_dropped += 1
            return
        try:
            sent = await asyncio.wait_for(self.live.publish(self._nc, timeout_s=self.publish_timeout_s),
                                          timeout=self.publish_timeout_s + 0.5)
            self.live_published += sent is not None
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # a permission, no stream, a timeout: dropped and counted (LiveRecorder.publish)
            self.live_dropped += 1
            self._log.warning("live_counts_dropped", model=self.model, error=repr(exc),
                              dropped_periods=self.live.dropped_periods)

    def _load_cache(self) -> None:
        if self.cache_path is None or not self.cache_path.exists():
            return
        try:
            self.apply(self.cache_path.read_bytes())
        except OSError as exc:
            self._log.warning("cache_unreadable", path=str(self.cache_path), error=str(exc))

    def _save_cache(self, raw: bytes) -> None:
        if self.cache_path is None:
            return
        try:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.cache_path.parent, prefix=".snapshot-")
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
            os.replace(tmp, self.cache_path)
        except OSError as exc:
            self._log.warning("cache_not_written", path=str(self.cache_path), error=str(exc))

    # -- following the bus ---------------------------------------------------------

    async def _connect(self) -> Any:
        kwargs: dict[str, Any] = {}
        if self.user:
            kwargs = {"user": self.user, "password": self.password}
        if self.tls is not None:
            kwargs["tls"] = self.tls
        attempt = 0
        while True:
            try:
                # nats-py waits reconnect_time_wait between reconnects with no jitter of its own: drawn
                # once per client, so that the replicas of a chat backend do not reconnect in step
                # a server that hangs (a frozen process, a black-holed link) keeps the socket open: nats-py's
                # own pings (every 2 min) would say so minutes later, while health() showed connected and no
                # problem; a ping every PING_INTERVAL_S, two unanswered, ends the connection within ~15 s
                return await nats.connect(
                    self.nats_url, name=f"canary-client-{self.model}", connect_timeout=2,
                    ping_interval=PING_INTERVAL_S, max_outstanding_pings=MAX_OUTSTANDING_PINGS,
                    max_reconnect_attempts=-1, reconnect_time_wait=random.uniform(0.5, 1.5), allow_reconnect=True,
                    disconnected_cb=self._disconnected, reconnected_cb=self._reconnected,
                    error_cb=self._error, **kwargs)
            except (NatsError, OSError) as exc:  # NoServersError, OSError, auth errors: keep serving the cache
                self._last_error = self._last_error or repr(exc)
                self._set_problem(self._unreachable())
                attempt += 1
                # capped exponential backoff with full jitter (as reverie_canary.shared.runtime.retry, whose
                # tenacity this light distribution does not depend on): uniform in [0, min(5, 0.2 * 2^n)]
                await asyncio.sleep(random.uniform(0.0, min(5.0, 0.2 * 2 ** (attempt - 1))))

    async def _disconnected(self) -> None:
        self.connected = False
        if not self._stopping:
            self._set_problem(f"{self._lost_prefix()}; serving the last good snapshot until it returns")

    async def _reconnected(self) -> None:
        self._now_connected()
        self._resync = True  # the server may have lost the watch's ephemeral consumer

    def _now_connected(self) -> None:
        """Connected (again): ``connected`` and ``problem`` change together, never one without the other.

        A problem about the connection (lost, refused, unreachable) is replaced at once by what is
        true now: connected, the current snapshot not read yet; reading it clears the problem.
        """
        self.connected = True
        self._refused = self._last_error = None
        if self._problem is not None and self._problem.startswith(f"{self._nats_prefix()}not answered yet"):
            self._problem = (f"connected to NATS at {_public_url(self.nats_url)}; reading the current snapshot "
                             f"(serving v{self.version} until then)")  # the first connect: not logged either
            return
        if self.problem is not None and self.problem.startswith((self._lost_prefix(), self._nats_prefix())):
            self._set_problem(f"connected to NATS at {_public_url(self.nats_url)}; reading the current snapshot "
                              f"again (serving v{self.version} until then)")

    def _lost_prefix(self) -> str:
        return f"connection to NATS at {_public_url(self.nats_url)} lost"

    def _nats_prefix(self) -> str:
        return f"NATS at {_public_url(self.nats_url)} "

    async def _error(self, exc: Exception) -> None:
        # nats-py's default logs every failed attempt at ERROR; an outage is expected here
        text = str(exc) or repr(exc)
        self._log.debug("bus_error", error=repr(exc))
        if "authorization" in text.lower():
            self._refused = text
        self._last_error = self._refused or text  # the server then drops the connection: keep the cause
        if not self.connected and not self._stopping:
            self._set_problem(self._unreachable())

    def _unreachable(self) -> str:
        if self._refused:
            return (f"NATS at {_public_url(self.nats_url)} refused the credential of user "
                    f"{self.user or '(none)'!r}: {self._refused}")
        return f"NATS at {_public_url(self.nats_url)} refused or unreachable: {self._last_error}"

    def _set_problem(self, problem: str | None) -> None:
        """Record why there is no current snapshot (the bus's side); log each change once."""
        if problem == self._problem:
            return
        if problem is None:
            self._log.info("ignore_list_current", model=self.model, version=self.version)
        else:
            self._log.warning("ignore_list_not_current", model=self.model, problem=problem,
                              serving_version=self.version)
        self._problem = problem

    async def _run(self) -> None:
        try:
            self._nc = await self._connect()
        except Exception as exc:  # the task's top: what no reconnect heals (a malformed URL, a TLS setting)
            said = f"{type(exc).__name__}: {exc}".replace(self.nats_url, _public_url(self.nats_url))
            if self.password:
                said = said.replace(self.password, "***")  # never print a credential
            self._last_error = said
            self._set_problem(f"cannot follow NATS at {_public_url(self.nats_url)} ({said}): serving the last "
                              "good snapshot, and no newer one will come; fix the setting and restart")
            self._log.error("client_cannot_follow", model=self.model, error=said)
            return
        self._now_connected()
        key = subjects.kv_key(self.model)
        while not self._stopping:
            try:
                self._resync = False
                js = self._nc.jetstream(timeout=JS_TIMEOUT_S)
                kv = await js.key_value(ROUTING_BUCKET)
                await self._refresh(kv, key)
                sub = await self._watch(js, kv, key)
                self._checked = time.monotonic()
                try:
                    while not self._resync and not self._stopping:
                        await asyncio.sleep(POLL_S)
                        if not self._resync and time.monotonic() - self._checked >= RECHECK_S:
                            await self._refresh(kv, key)  # the bus still answers: the snapshot is current
                            self._checked = time.monotonic()
                finally:
                    with contextlib.suppress(Exception):
                        await sub.unsubscribe()
            except asyncio.CancelledError:
                raise
            except (BucketNotFoundError, NotFoundError):
                self._set_problem(f"the KV bucket {ROUTING_BUCKET} does not exist yet (`canary init` creates it)")
                await asyncio.sleep(1.0)
            except Exception as exc:
                self._log.debug("watch_restart", error=repr(exc))
                if not self.connected:
                    self._last_error = self._last_error or repr(exc)
                    self._set_problem(self._unreachable())
                await asyncio.sleep(1.0)

    async def _watch(self, js: Any, kv: Any, key: str) -> Any:
        """Watch ``key``: an ordered consumer from its last value whose callback applies each value at once.

        What ``KeyValue.watch`` subscribes to (the bucket's stream and subject prefix, the last
        value per subject, an idle consumer dropped after 5 minutes), without its queue and
        the task that would read it: an update is decoded and applied in nats-py's delivery
        callback, one hop fewer per client.  Deletes and purges are skipped;
        any other value goes through :meth:`apply` (bounds, malformed snapshots and rollbacks
        refused as before).
        """
        stream = getattr(kv, "_stream", None) or f"KV_{ROUTING_BUCKET}"
        prefix = getattr(kv, "_pre", None) or f"$KV.{ROUTING_BUCKET}."
        return await js.subscribe(f"{prefix}{key}", stream=stream, cb=self._on_entry, ordered_consumer=True,
                                  deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, inactive_threshold=WATCH_IDLE_S)

    async def _on_entry(self, msg: Any) -> None:
        """Apply one KV value as it is delivered (nats-py's callback: never raises)."""
        if self._stopping:
            return
        headers = msg.headers or {}
        if headers.get(KV_OPERATION) in (KV_DEL, KV_PURGE) or MARKER_REASON in headers:
            return  # a delete, a purge or a server's expiry marker: not a snapshot
        try:
            self.apply(msg.data)
        except Exception:  # apply catches what a snapshot can do; this one must not stop the deliveries
            self._log.error("snapshot_apply_failed", model=self.model, exc_info=True)
        self._contact = self._checked = time.monotonic()
        self._set_problem(None)

    async def _refresh(self, kv: Any, key: str) -> None:
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:
            self._contact = time.monotonic()
            self._set_problem(f"no snapshot for {self.model} yet: is the router running, and is the model "
                              "in its CANARY_MODELS?")
            return
        if entry.value:
            self.apply(entry.value)
        self._contact = time.monotonic()
        self._set_problem(None)


class ClientHealth(Struct, frozen=True, kw_only=True):
    """What :meth:`IgnoreListClient.health` says: the snapshot served and why it may not be current.

    ``age_s``: seconds since the bus last confirmed it (``None``: never); ``problem``: one line, ``None``
    when current; ``refused`` snapshots refused in all, ``refused_rollbacks`` of them older versions of
    the same store, ``epoch_changes`` snapshots of a new store applied.
    """

    model: str
    connected: bool
    version: int
    epoch: str = ""
    age_s: float | None = None
    problem: str | None = None
    refused: int = 0
    refused_rollbacks: int = 0
    epoch_changes: int = 0


class _Log:
    """Log lines as ``event key=value ...`` through the standard library (no structlog here).

    The fields also travel in ``extra`` (under ``canary``), so an application that
    renders records with structlog's ``ProcessorFormatter`` keeps them as fields.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def _emit(self, level: int, event: str, exc_info: bool = False, **fields: Any) -> None:
        if self._logger.isEnabledFor(level):
            text = " ".join([event, *(f"{k}={v}" for k, v in fields.items())])
            self._logger.log(level, text, exc_info=exc_info, extra={"canary": {"event": event, **fields}})

    def debug(self, event: str, **fields: Any) -> None:
        self._emit(logging.DEBUG, event, **fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, event, **fields)

    def error(self, event: str, exc_info: bool = False, **fields: Any) -> None:
        self._emit(logging.ERROR, event, exc_info=exc_info, **fields)


def _public_url(url: str) -> str:
    """``url`` without any ``user:password@`` part (never print a credential)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url.rpartition("@")[2]
    return f"{scheme}://{rest.rpartition('@')[2]}"


def snapshot_bytes(snapshot: IgnoreSnapshot) -> bytes:
    """Wire bytes of a snapshot (for tests and tools)."""
    return encode(snapshot)

