"""Bounded waits for tests: every wait has its own bound and says what it waited for.

A test must not be able to wait forever on a condition (the suite's 300 s
pytest timeout is a backstop, not a bound): use these instead of hand-written
``while`` loops, bare ``asyncio.wait_for`` or a ``sleep`` as synchronisation.
A wait that runs out fails the test with :class:`WaitTimeout`, naming what it
waited for, how long, and the last value the condition gave.

- :func:`until` polls a condition (a plain or async callable) until it holds.
- :func:`within` awaits one awaitable (an event's ``wait()``, a coroutine).
- :func:`holds` checks that a condition keeps holding for a while (nothing
  published, nothing changed): the honest form of "sleep, then assert".
- :func:`until_sync` is :func:`until` for code outside an event loop.

Waits are built on ``asyncio.timeout``, which never swallows a cancellation
(``reverie_canary.shared.runtime.aio`` says why ``asyncio.wait_for`` does on 3.11).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A bounded wait ran out; the message says what was awaited, for how long, and the last value."""


async def _value(condition: Callable[[], Any]) -> Any:
    value = condition()
    if inspect.isawaitable(value):
        value = await value
    return value


async def until(condition: Callable[[], Any], *, timeout_s: float, what: str, interval_s: float = 0.02) -> Any:
    """Poll ``condition()`` until it returns a truthy value, at most ``timeout_s`` seconds.

    Args:
        condition: a callable returning a value or an awaitable of one; an
            exception it raises ends the wait (it is a bug, not a "not yet").
        timeout_s: the bound (seconds).
        what: what is awaited, for the failure message ("the client ignores lambda/fp8").
        interval_s: time between two polls (seconds).

    Returns:
        The truthy value.

    Raises:
        WaitTimeout: after ``timeout_s`` without a truthy value.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    last: Any = None
    while True:
        last = await _value(condition)
        if last:
            return last
        if loop.time() >= deadline:
            raise WaitTimeout(f"waited {timeout_s:g} s for {what}; last value: {last!r}")
        await asyncio.sleep(min(interval_s, max(0.0, deadline - loop.time())))


async def within(awaitable: Awaitable[T], *, timeout_s: float, what: str) -> T:
    """Await ``awaitable`` for at most ``timeout_s`` seconds.

    Raises:
        WaitTimeout: when it did not finish in time (it is cancelled).
    """
    try:
        async with asyncio.timeout(timeout_s):
            return await awaitable
    except TimeoutError:
        raise WaitTimeout(f"waited {timeout_s:g} s for {what}") from None


async def holds(condition: Callable[[], Any], *, for_s: float, what: str, interval_s: float = 0.05) -> None:
    """Check that ``condition()`` stays truthy for ``for_s`` seconds (polled every ``interval_s``).

    Raises:
        AssertionError: at the first poll where it does not hold, with the value it gave.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + for_s
    while True:
        value = await _value(condition)
        if not value:
            raise AssertionError(f"{what} stopped holding after {for_s - (deadline - loop.time()):.2f} s: "
                                 f"{value!r}")
        if loop.time() >= deadline:
            return
        await asyncio.sleep(min(interval_s, max(0.0, deadline - loop.time())))


def until_sync(condition: Callable[[], T], *, timeout_s: float, what: str, interval_s: float = 0.05) -> T:
    """:func:`until` outside an event loop (threads, subprocesses).

    Raises:
        WaitTimeout: after ``timeout_s`` without a truthy value.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"waited {timeout_s:g} s for {what}; last value: {last!r}")
        time.sleep(min(interval_s, max(0.0, deadline - time.monotonic())))


async def caught_up(js: Any, stream: str, *durables: str) -> bool:
    """A condition for :func:`until`: every durable has nothing pending and nothing unacknowledged.

    A consumer that does not exist yet is not caught up.
    """
    from nats.js.errors import NotFoundError

    for durable in durables:
        try:
            info = await js.consumer_info(stream, durable)
        except NotFoundError:
            return False
        if info.num_pending or info.num_ack_pending:
            return False
    return True
