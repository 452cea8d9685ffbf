"""Run service apps in this process: one (``canary run X``) or all five (``canary up``, the demo)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable

from faststream import FastStream

from shared.settings import Settings

SERVICES = ("discovery", "prober", "judge", "router", "notifier")


def factory(name: str) -> Callable[[Settings], FastStream]:
    """The ``create_app`` of service ``name``.

    Raises:
        ValueError: unknown service name.
    """
    if name == "discovery":
        from services.discovery.service import create_app
    elif name == "prober":
        from services.prober.service import create_app
    elif name == "judge":
        from services.judge.service import create_app
    elif name == "router":
        from services.router.service import create_app
    elif name == "notifier":
        from services.notifier.service import create_app
    else:
        raise ValueError(f"unknown service {name!r}; services: {', '.join(SERVICES)}")
    return create_app


@contextlib.asynccontextmanager
async def running(settings: Settings, names: tuple[str, ...] | list[str] = SERVICES,
                  *, probers: int = 1, passwords: dict[str, str] | None = None) -> AsyncIterator[list[FastStream]]:
    """Start the named services (each its own broker connection) and stop them on exit.

    Args:
        settings: shared settings.
        names: services to start, in order (the judge and router before discovery
            is fine: every consumer is durable).
        probers: how many prober replicas (one shared durable).
        passwords: user -> password; each service then connects as its own
            NATS user (``shared/nats/server.conf``).
    """
    apps: list[FastStream] = []
    try:
        for name in names:
            own = settings.replace(nats_user=name, nats_password=passwords[name]) if passwords else settings
            for _ in range(probers if name == "prober" else 1):
                app = factory(name)(own)
                await app.start()
                apps.append(app)
        yield apps
    finally:
        for app in reversed(apps):
            with contextlib.suppress(Exception):
                await app.stop()


async def serve_forever(settings: Settings, names: tuple[str, ...] | list[str], *, probers: int = 1) -> None:
    """Run services until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with running(settings, names, probers=probers):
        await stop.wait()
