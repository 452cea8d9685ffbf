"""The event loop the services run on: uvloop where it is installed, else asyncio's own.

The one place where a service's loop is made (``canary run``, ``canary up``):
:func:`run` instead of ``asyncio.run``.  uvloop (libuv, in C) does a loop
iteration, a socket read and a callback in less CPU than asyncio's selector
loop; FastStream, nats-py, redis-py and httpx (through anyio, whose asyncio
backend runs on any asyncio loop) all run on it unchanged.  It is a
dependency except on Windows (pyproject.toml); where it cannot be imported the
services run on asyncio's loop and say so in their start line (``event_loop``).

Setting ``event_loop`` (``CANARY_EVENT_LOOP``): ``auto`` (the default: uvloop
when importable), ``uvloop`` (the same, but refused at start when it is
missing) or ``asyncio``.  Measured in ``benchmarks/prober_bench.py --loop``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from reverie_canary.shared.errors import ConfigError

#: The values of the ``event_loop`` setting.
EVENT_LOOPS: tuple[str, ...] = ("auto", "uvloop", "asyncio")

T = TypeVar("T")


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def loop_factory(choice: str = "auto") -> tuple[Callable[[], asyncio.AbstractEventLoop] | None, str]:
    """The factory of the loop ``choice`` asks for and that loop's name (``uvloop`` | ``asyncio``).

    Args:
        choice: one of :data:`EVENT_LOOPS`.

    Returns:
        ``(factory, name)``; ``factory`` is ``None`` for asyncio's default loop.

    Raises:
        ConfigError when ``choice`` is ``uvloop`` and uvloop cannot be imported, or is unknown.
    """
    if choice not in EVENT_LOOPS:
        raise ConfigError(f"event_loop {choice!r}: one of {', '.join(EVENT_LOOPS)}")
    if choice == "asyncio":
        return None, "asyncio"
    factory = _uvloop_factory()
    if factory is None:
        if choice == "uvloop":
            raise ConfigError("event_loop uvloop: uvloop is not installed (pip install uvloop; not on Windows)")
        return None, "asyncio"
    return factory, "uvloop"


def run(main: Coroutine[Any, Any, T], choice: str = "auto") -> T:
    """Run ``main`` to its end on a new loop of ``choice`` (:func:`loop_factory`), like ``asyncio.run``.

    Raises:
        ConfigError: as :func:`loop_factory` (``main`` is closed unawaited then).
    """
    try:
        factory, _ = loop_factory(choice)
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
