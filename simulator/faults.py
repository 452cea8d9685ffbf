"""Gateway-wide faults: the canary's own key refused, or the gateway gone (``canary demo --gateway-fault``).

A provider's faults live in the scenario (:mod:`reverie_canary.simulator.scenario`);
these are about the gateway itself, the answers that mean the canary cannot see
(docs/concepts/health.md):

- ``auth:N`` -- every request gets 401 from the demo's cycle ``N`` on (a revoked key);
- ``credit:N`` -- 402 (the account has no credit left);
- ``forbidden:N`` -- 403 (a key that may not do this);
- ``down:N-M`` -- the gateway refuses connections in cycles ``N`` to ``M``.

Each form takes ``N`` (to the end) or ``N-M`` (cycles ``N`` to ``M``, both
included); several faults may be given (the first that holds in a cycle wins).
:class:`Front` is a TCP front of the gateway that can refuse connections for
real (its listening socket closes, so a connect gets ``ECONNREFUSED``), and
:func:`drive` switches the faults at the demo's cycle boundaries.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

#: The HTTP answer of each key fault (``down`` has none: no connection at all).
FAULT_STATUS: dict[str, int | None] = {"auth": 401, "credit": 402, "forbidden": 403, "down": None}
#: A fault switches this share of a cycle interval before the cycle starts: after the
#: previous cycle's deadline (80 % of the interval in the demo), before the listing.
SWITCH_LEAD_SHARE = 0.1

_FORM = re.compile(r"^(?P<kind>[a-z]+):(?P<first>[0-9]{1,6})(?:-(?P<last>[0-9]{1,6}))?$")


@dataclass(frozen=True)
class GatewayFault:
    """One gateway-wide fault over the demo's cycles ``first`` to ``last`` (``None``: to the end); cycle 1 is the first."""

    kind: str
    first: int
    last: int | None = None

    @property
    def status(self) -> int | None:
        """The HTTP status every request gets (``None`` for ``down``: connections are refused)."""
        return FAULT_STATUS[self.kind]

    def active(self, cycle: int) -> bool:
        """Whether the fault holds in the demo's cycle ``cycle`` (1-based)."""
        return cycle >= self.first and (self.last is None or cycle <= self.last)

    def __str__(self) -> str:
        return f"{self.kind}:{self.first}" + (f"-{self.last}" if self.last is not None else "")


def parse_fault(text: str) -> GatewayFault:
    """``auth:3`` / ``credit:2`` / ``forbidden:2-4`` / ``down:2-3`` as a :class:`GatewayFault`.

    Raises:
        ValueError: naming the accepted forms, for anything else (an unknown
            kind, a cycle below 1, a range that ends before it starts).
    """
    m = _FORM.match(text.strip())
    kinds = ", ".join(FAULT_STATUS)
    if m is None or m["kind"] not in FAULT_STATUS:
        raise ValueError(f"gateway fault {text!r}: expected KIND:N or KIND:N-M with KIND one of {kinds} "
                         "(e.g. auth:3, credit:2, down:2-3)")
    first = int(m["first"])
    last = int(m["last"]) if m["last"] is not None else None
    if first < 1 or (last is not None and last < first):
        raise ValueError(f"gateway fault {text!r}: cycles count from 1 and a range N-M needs M >= N")
    return GatewayFault(kind=m["kind"], first=first, last=last)


class Front:
    """A TCP front of the gateway on its own port that can refuse connections (the gateway down).

    While :meth:`down`, nothing listens on the port: a connect is refused by
    the kernel (``ECONNREFUSED``), as for a gateway that is gone; the
    connections it had are closed.  :meth:`up` listens on the same port again.
    """

    def __init__(self, target_host: str, target_port: int, host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.host = host
        self.port = 0
        self.server: asyncio.base_events.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    async def up(self) -> int:
        """Listen (again, on the same port); returns the port."""
        if self.server is None:
            self.server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
            self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def down(self) -> None:
        """Stop listening and close every open connection: connects are refused from now on."""
        server, self.server = self.server, None
        if server is not None:
            server.close()
        for writer in list(self._pipes):
            writer.close()
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), timeout=2.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._pipes |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self._pipes -= {writer, up_writer}


def fault_at(faults: Sequence[GatewayFault], cycle: int) -> GatewayFault | None:
    """The fault that holds in the demo's cycle ``cycle``: the first of ``faults`` that does, or ``None``."""
    return next((f for f in faults if f.active(cycle)), None)


async def drive(faults: Sequence[GatewayFault], first_cycle_no: Callable[[], Awaitable[int]], interval_s: float,
                switch: Callable[[GatewayFault | None], Awaitable[None]]) -> None:
    """Switch the gateway's faults at the demo's cycle boundaries.

    Args:
        faults: what to do in which cycles (:func:`fault_at` picks per cycle).
        first_cycle_no: waits for and returns the cycle number (``epoch // interval``) of the demo's cycle 1.
        interval_s: the cycle interval (s).
        switch: sets the gateway to a fault, or back to serving (``None``); called only on a change.

    The switch into cycle ``n`` happens :data:`SWITCH_LEAD_SHARE` of an
    interval before the cycle starts (after the previous cycle's deadline,
    before its listing); into cycle 1 at once.  Returns after the last change.
    """
    current = fault_at(faults, 1)
    if current is not None:
        await switch(current)
    if not faults:
        return
    first = await first_cycle_no()
    horizon = max(f.last + 1 if f.last is not None else f.first for f in faults)
    for n in range(2, horizon + 1):
        want = fault_at(faults, n)
        if want == current:
            continue
        at = (first + n - 1) * interval_s - SWITCH_LEAD_SHARE * interval_s
        await asyncio.sleep(max(0.0, at - time.time()))
        await switch(want)
        current = want
