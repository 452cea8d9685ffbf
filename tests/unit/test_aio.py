"""Bounded waits and stops that never lose a cancellation (the router-restart hang)."""

from __future__ import annotations

import asyncio

from reverie_canary.shared.runtime.aio import stop_task, wait_event
from reverie_canary.shared.runtime.service import Shell
from reverie_canary.shared.runtime.settings import Settings
from tests import waits


async def test_wait_event_says_whether_the_event_was_set():
    """True when set before or during the wait, False after the timeout."""
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_event(event, 5.0) is True
    assert await wait_event(event, 0.0) is True


async def test_a_cancellation_in_the_same_tick_as_the_wake_up_is_kept():
    """The event set and the waiting task cancelled in one loop iteration: the task ends cancelled.

    This is the race that ``asyncio.wait_for`` loses on Python 3.11: it returns
    the event's result and the loop around it runs on.
    """
    event = asyncio.Event()
    passes = 0

    async def loop_like_the_routers() -> None:
        nonlocal passes
        while True:
            passes += 1
            event.clear()
            await wait_event(event, 30.0)

    task = asyncio.create_task(loop_like_the_routers())
    await asyncio.sleep(0)  # the loop is waiting
    event.set()
    task.cancel()
    await asyncio.wait({task}, timeout=1.0)
    assert task.cancelled() and passes == 1


async def test_stop_task_repeats_a_swallowed_cancellation():
    """A task that swallows its first cancellation (as wait_for can) is stopped by the next one."""
    swallowed = 0

    async def swallows_once() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed += 1

    task = asyncio.create_task(swallows_once())
    await asyncio.sleep(0)
    assert await stop_task(task, 2.0) is True
    assert task.cancelled() and swallowed == 1


async def test_stop_task_gives_up_after_its_bound_instead_of_waiting_forever():
    """A task that never stops is reported (False) after the bound; the caller goes on."""
    release = asyncio.Event()

    async def never_stops() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                pass

    task = asyncio.create_task(never_stops())
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await stop_task(task, 0.5) is False
    assert 0.5 <= loop.time() - started < 2.0
    release.set()
    assert await stop_task(task, 2.0) is True


async def test_a_shell_stops_a_background_loop_that_lost_its_first_cancellation():
    """Shell shutdown repeats the cancellation: a loop that swallowed one does not hang the shutdown."""
    shell = Shell("router", Settings.load(env={}))
    swallowed = asyncio.Event()

    async def loop() -> None:
        while True:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                if swallowed.is_set():
                    raise
                swallowed.set()

    shell.background(loop)
    await shell._after_startup()
    await asyncio.sleep(0)
    await waits.within(shell._stop_loops(), timeout_s=5.0, what="the shell to stop its loops")
    assert swallowed.is_set() and shell._tasks == []
