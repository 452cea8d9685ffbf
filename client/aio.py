"""Bounded waits and stops for asyncio code that never lose a cancellation.

Part of the client distribution (the chat backend's client stops its watch with
:func:`stop_task`); the services import it as :mod:`reverie_canary.shared.runtime.aio`.

Python 3.11's ``asyncio.wait_for(aw, timeout)`` returns ``aw``'s result when
``aw`` finishes in the same loop iteration as a cancellation of the waiting
task: the cancellation is swallowed (CPython gh-86296, fixed in 3.12 by
rebuilding ``wait_for`` on ``asyncio.timeout``).  A service loop of the form
``while True: ... await asyncio.wait_for(event.wait(), t)`` then keeps running
after :meth:`asyncio.Task.cancel`, and whoever awaits the task waits forever:
the router's expiry loop did exactly that when an input woke it at the moment
it was stopped, and ``canary``'s shutdown (and the tests around a router
restart) hung until the 300 s test timeout.

- :func:`wait_event` waits for an event with a timeout on ``asyncio.timeout``
  (3.11+), which tells its own cancellation from a caller's and never swallows
  the caller's.
- :func:`stop_task` cancels a task and waits for it with a bound, cancelling
  again while it runs (a cancellation swallowed deeper down, in a library, is
  repeated), and says so when the task would not stop instead of waiting forever.
"""

from __future__ import annotations

import asyncio
from typing import Any

#: How often :func:`stop_task` repeats the cancellation of a task that still runs (seconds).
CANCEL_AGAIN_S = 0.2


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` seconds passed.

    Returns:
        ``True`` when the event is set, ``False`` on the timeout.

    Raises:
        asyncio.CancelledError: when the caller is cancelled, always (even if
            the event is set in the same loop iteration).
    """
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(max(0.0, timeout_s)):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def stop_task(task: asyncio.Task[Any], bound_s: float = 10.0) -> bool:
    """Cancel ``task`` and wait until it is done, at most ``bound_s`` seconds.

    The cancellation is repeated every :data:`CANCEL_AGAIN_S` while the task
    runs.  The task's own exception, if any, is retrieved (not raised): the
    caller is stopping it.

    Returns:
        ``True`` when the task is done, ``False`` when it was still running
        after ``bound_s`` (the caller logs that and goes on).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    while not task.done():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        task.cancel()
        await asyncio.wait({task}, timeout=min(CANCEL_AGAIN_S, remaining))
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log "never retrieved"
    return True
