"""A service's view of its dependencies: NATS and Redis up or in an outage, said once each way.

A :class:`Link` is one service's connection state to one dependency, over all
of its connections to it (the judge holds two NATS connections: the broker's
and the log reader's).  The first connection lost logs one ``<dep>_disconnected``
line; the last one back logs one ``<dep>_reconnected`` line with the outage
length; nothing is logged per
reconnect attempt.  The same state feeds ``/readyz`` and the series
``canary_dependency_up``, ``canary_dependency_outages_total`` and
``canary_dependency_last_outage_seconds``.

NATS reports through nats-py's ``disconnected_cb`` / ``reconnected_cb``
(:meth:`Link.nats_callbacks`); Redis has no such callbacks, so the service shell
pings it (:data:`REDIS_WATCH_S`) and reports what it sees.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from faststream.exceptions import IncorrectState

from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.metrics import ServiceMetrics

#: Seconds between two Redis pings of a service while Redis answers / during an outage.  An
#: outage found by a failed ping is counted from the last successful one: its logged length is
#: at most this much longer than the real one.
REDIS_WATCH_S = 1.0
REDIS_WATCH_DOWN_S = 0.5


class Link:
    """One service's connections to one dependency: up, or down since when and why."""

    def __init__(self, service: str, dependency: str, target: str, metrics: ServiceMetrics) -> None:
        """Args:
            service: the service (for the log line and the series).
            dependency: ``nats`` or ``redis``.
            target: where it connects, already safe to print (password masked).
            metrics: the service's series.
        """
        self.service = service
        self.dependency = dependency
        self.target = target
        self.metrics = metrics
        self.down: dict[str, str] = {}  # connection -> the error that took it down
        self.since: float | None = None  # monotonic time of the outage's start
        self.outages = 0
        self.last_outage_s: float | None = None
        self.last_ok: float | None = None  # monotonic time the dependency last answered (pings)
        self._log = get_logger(service)
        metrics.touch("dependency_outages", dependency=dependency)

    @property
    def up(self) -> bool:
        """No connection to the dependency is down."""
        return not self.down

    def outage_s(self) -> float:
        """Seconds since the current outage began (0 when up)."""
        return 0.0 if self.since is None or self.up else time.monotonic() - self.since

    def connected(self) -> None:
        """A connection works (the service started, or a ping was answered): the dependency counts as up."""
        self.last_ok = time.monotonic()
        if self.up:
            self.metrics.set("dependency_up", 1, dependency=self.dependency)

    def lost(self, connection: str = "main", error: str = "", *, since: float | None = None) -> None:
        """Connection ``connection`` is down; the first one down starts an outage and logs it once.

        Args:
            since: monotonic time the outage began, when known better than now
                (the last successful ping before a failed one).
        """
        if connection in self.down:
            return
        first = self.up
        self.down[connection] = error
        if not first:
            return
        self.since = time.monotonic() if since is None else since
        self.outages += 1
        self.metrics.set("dependency_up", 0, dependency=self.dependency)
        self.metrics.inc("dependency_outages", dependency=self.dependency)
        self._log.warning(f"{self.dependency}_disconnected", target=self.target, connection=connection,
                          error=error or None)

    def restored(self, connection: str = "main") -> None:
        """Connection ``connection`` works again; the last one back ends the outage and logs its length."""
        if connection not in self.down:
            return
        del self.down[connection]
        if self.down:
            return
        outage = time.monotonic() - (self.since or time.monotonic())
        self.last_outage_s, self.since = outage, None
        self.metrics.set("dependency_up", 1, dependency=self.dependency)
        self.metrics.set("dependency_last_outage", round(outage, 3), dependency=self.dependency)
        self._log.info(f"{self.dependency}_reconnected", target=self.target, outage_s=round(outage, 1))

    def problem(self) -> str | None:
        """The readiness problem while down (``None`` when up)."""
        if self.up:
            return None
        errors = sorted({e for e in self.down.values() if e})
        why = f" ({errors[0]})" if errors else ""
        return f"{self.dependency} {self.target} unreachable for {self.outage_s():.0f} s{why}"

    def nats_callbacks(self, client: Callable[[], Any], connection: str) -> dict[str, Callable[[], Awaitable[None]]]:
        """nats-py ``disconnected_cb`` / ``reconnected_cb`` reporting connection ``connection`` here.

        Args:
            client: returns the nats-py client (``None`` or raising before it exists);
                a disconnect of a client being closed (shutdown) is no outage.
        """

        def current():
            try:
                return client()
            except IncorrectState:  # FastStream's broker before it connected
                return None

        async def disconnected() -> None:
            nc = current()
            if nc is None or nc.is_closed or getattr(nc, "is_draining", False):
                return
            error = getattr(nc, "last_error", None)
            self.lost(connection, f"{type(error).__name__}: {error}" if error else "connection lost")

        async def reconnected() -> None:
            self.restored(connection)

        return {"disconnected_cb": disconnected, "reconnected_cb": reconnected}
