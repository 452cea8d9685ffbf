"""Notifier service: tell operators about every decision, every new ignore list and who commanded what.

Each message becomes one structured log line (``operator_notice``) and, when
``CANARY_WEBHOOK_URL`` is set, one JSON POST to that URL.  Delivery
bookkeeping in Redis (``SET NX`` per message id, kept 35 days) makes a
redelivered message a no-op; a failed webhook call is retried by redelivery.
"""

from __future__ import annotations

import httpx
from faststream import FastStream
from redis.exceptions import RedisError

from reverie_canary.services.notifier.core import describe_command, describe_decision, describe_snapshot
from reverie_canary.shared import streams
from reverie_canary.shared.broker import Delivery
from reverie_canary.shared.codec import Codec
from reverie_canary.shared.errors import Transient
from reverie_canary.shared.commands import Command, OperatorCommand
from reverie_canary.shared.events import Decision
from reverie_canary.shared.service import Shell, redis_client
from reverie_canary.shared.settings import Settings
from reverie_canary.shared.snapshots import IgnoreSnapshot

NOTIFIER_INPUT = Codec(Decision | IgnoreSnapshot | OperatorCommand, "decision, snapshot or operator command")
KEEP_S = 35 * 86400


def create_app(settings: Settings | None = None) -> FastStream:
    """The notifier's FastStream app."""
    settings = settings or Settings.load()
    shell = Shell("notifier", settings)
    clients: dict[str, object] = {}

    async def open_clients() -> None:
        clients["redis"] = redis_client(settings)
        if settings.webhook_url:
            clients["http"] = httpx.AsyncClient(timeout=10.0)

    async def close_clients() -> None:
        for c in clients.values():
            await c.aclose()  # type: ignore[attr-defined]

    async def apply(event, delivery: Delivery) -> None:
        if isinstance(event, Decision):
            line, payload = describe_decision(event)
        elif isinstance(event, IgnoreSnapshot):
            line, payload = describe_snapshot(event)
        elif isinstance(event, Command):
            line, payload = describe_command(event)
        else:
            return
        key = f"{settings.namespace}:notifier:sent:{payload['id']}"
        redis = clients["redis"]
        try:
            if await redis.exists(key):  # type: ignore[attr-defined]
                return
        except RedisError as exc:
            raise Transient(f"redis: {exc!r}") from exc
        shell.log.info("operator_notice", message=line, **{k: v for k, v in payload.items() if k != "id"})
        http = clients.get("http")
        if http is not None:
            try:
                response = await http.post(settings.webhook_url, json={"text": line, **payload})  # type: ignore[attr-defined]
                response.raise_for_status()
            except httpx.HTTPError as exc:
                raise Transient(f"webhook: {exc!r}") from exc
        try:
            await redis.set(key, b"1", ex=KEEP_S)  # type: ignore[attr-defined]
        except RedisError as exc:
            raise Transient(f"redis: {exc!r}") from exc

    shell.on_startup(open_clients)
    shell.on_shutdown(close_clients)
    shell.subscribe(streams.notifier_consumer(settings), NOTIFIER_INPUT, apply, batch=16)
    return shell.app
