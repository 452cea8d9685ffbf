"""The event loop the services run on: uvloop where it is installed and safe, else asyncio's own.

The one place where a service's loop is made (``canary run``, ``canary up``):
:func:`run` instead of ``asyncio.run``.  uvloop (libuv, in C) does a loop
iteration, a socket read and a callback in less CPU than asyncio's selector
loop; FastStream, nats-py, redis-py and httpx (through anyio, whose asyncio
backend runs on any asyncio loop) all run on it unchanged.  It is a
dependency except on Windows (pyproject.toml); where it cannot be imported the
services run on asyncio's loop.  The start line says which (``event_loop``).

**Not the prober's by default.**  A process that runs the prober stays on
asyncio's loop under ``auto``: anyio's stream protocol queues every read with
no backpressure, and libuv reads a readable socket up to 32 times per wakeup
(256 KiB each) before the reader runs, so a gateway that floods (the hostile
fleet's 20 MB replies, tokens forever) is buffered in bursts.  At 96 in flight
against ``tests/hostile_fleet.py`` the prober's peak RSS was 410-417 MB on
uvloop against 284-316 MB on asyncio's loop (the prober's memory bound under a hostile gateway: 340 MB).  What
uvloop buys the prober (``benchmarks/prober_bench.py --loop asyncio,uvloop``,
benchmarks/README.md): about 10 % less CPU per probe, no better TTFT error.

Setting ``event_loop`` (``CANARY_EVENT_LOOP``): ``auto`` (the default: uvloop
when importable, except in a process that runs the prober), ``uvloop``
(everywhere, the prober too; refused at start when it is missing) or ``asyncio``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

from reverie_canary.shared.contract.errors import ConfigError

#: The values of the ``event_loop`` setting.
EVENT_LOOPS: tuple[str, ...] = ("auto", "uvloop", "asyncio")

T = TypeVar("T")


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


#: Services that ``auto`` keeps on asyncio's loop (module docstring: reads with no backpressure).
ASYNCIO_UNDER_AUTO = frozenset({"prober"})


def loop_factory(choice: str = "auto",
                 services: Iterable[str] = ()) -> tuple[Callable[[], asyncio.AbstractEventLoop] | None, str]:
    """The factory of the loop ``choice`` asks for and that loop's name (``uvloop`` | ``asyncio``).

    Args:
        choice: one of :data:`EVENT_LOOPS`.
        services: the services the loop will run; under ``auto`` one of
            :data:`ASYNCIO_UNDER_AUTO` among them means asyncio's loop.

    Returns:
        ``(factory, name)``; ``factory`` is ``None`` for asyncio's default loop.

    Raises:
        ConfigError when ``choice`` is ``uvloop`` and uvloop cannot be imported, or is unknown.
    """
    if choice not in EVENT_LOOPS:
        raise ConfigError(f"event_loop {choice!r}: one of {', '.join(EVENT_LOOPS)}")
    if choice == "asyncio" or (choice == "auto" and ASYNCIO_UNDER_AUTO.intersection(services)):
        return None, "asyncio"
    factory = _uvloop_factory()
    if factory is None:
        if choice == "uvloop":
            raise ConfigError("event_loop uvloop: uvloop is not installed (pip install uvloop; not on Windows)")
        return None, "asyncio"
    return factory, "uvloop"


def run(main: Coroutine[Any, Any, T], choice: str = "auto", services: Iterable[str] = ()) -> T:
    """Run ``main`` to its end on a new loop of ``choice`` for ``services`` (:func:`loop_factory`), like ``asyncio.run``.

    Raises:
        ConfigError: as :func:`loop_factory` (``main`` is closed unawaited then).
    """
    try:
        factory, _ = loop_factory(choice, services)
    except ConfigError:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def running_name() -> str:
    """The name of the running loop: ``uvloop`` or ``asyncio`` (its class's module otherwise)."""
    loop = asyncio.get_running_loop()
    module = type(loop).__module__.split(".")[0]
    return "uvloop" if module == "uvloop" else "asyncio" if module == "asyncio" else module
