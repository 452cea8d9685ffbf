"""A real local HTTP receiver of notices for the tests and the benchmark (uvicorn on a socket).

It verifies each webhook request twice: with the ``standardwebhooks`` library
and with an HMAC computed here from the spec (``{id}.{timestamp}.{body}``,
base64 key after ``whsec_``), so a signing bug shared by the library cannot
hide.  It can answer 503 (``status``), stop listening (``stop()``: connection
refused) and start again on the same port, or hold requests without answering
(``hold``).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reverie_canary.canary.embedded import free_port
from reverie_canary.simulator.server import serve


def new_secret() -> str:
    """A fresh ``whsec_`` secret of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def spec_signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256>`` of ``{id}.{timestamp}.{body}`` (Standard Webhooks, computed by hand)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


@dataclass
class Received:
    """One request that reached the receiver."""

    headers: dict[str, str]
    body: bytes
    verified: bool
    at: float
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")


class Receiver:
    """Records notices POSTed to ``/hook``; verifies signatures when given the secret."""

    def __init__(self, secret: str | None = None, *, status: int = 200) -> None:
        self.secret = secret
        self.status = status
        self.received: list[Received] = []
        self.refused = 0
        self.hold: asyncio.Event | None = None
        self.arrived = asyncio.Condition()
        self.port = free_port()
        self._server: Any = None
        self.app = Starlette(routes=[Route("/hook", self._hook, methods=["POST"])])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def verify(self, headers: dict[str, str], body: bytes) -> bool:
        """Both checks: the reference library and the hand-computed HMAC."""
        if not self.secret:
            return False
        from standardwebhooks import Webhook, WebhookVerificationError

        try:
            Webhook(self.secret).verify(body, headers)
        except (WebhookVerificationError, ValueError):
            return False
        expected = spec_signature(self.secret, headers["webhook-id"], headers["webhook-timestamp"], body)
        return any(hmac.compare_digest(expected, s) for s in headers["webhook-signature"].split(" "))

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        if self.hold is not None:
            await self.hold.wait()
        if self.status >= 300:
            self.refused += 1
            return Response(status_code=self.status)
        try:
            data = json.loads(body)
        except ValueError:
            data = {}
        async with self.arrived:
            self.received.append(Received(headers=headers, body=body, verified=self.verify(headers, body),
                                          at=time.monotonic(), data=data))
            self.arrived.notify_all()
        return Response(status_code=204)

    async def start(self) -> None:
        """Listen on ``self.port`` (again, after :meth:`stop`)."""
        self._cm = serve(self.app, port=self.port, shutdown_timeout_s=0.5)
        await self._cm.__aenter__()

    async def stop(self) -> None:
        """Stop listening: connections are refused until :meth:`start`."""
        if self._cm is not None:
            cm, self._cm = self._cm, None
            if self.hold is not None:
                self.hold.set()
            await cm.__aexit__(None, None, None)

    _cm: Any = None

    async def wait_for(self, count: int, timeout_s: float) -> bool:
        """Wait until ``count`` requests were accepted; ``False`` after ``timeout_s``."""
        async def enough() -> None:
            async with self.arrived:
                await self.arrived.wait_for(lambda: len(self.received) >= count)
        try:
            await asyncio.wait_for(enough(), timeout=timeout_s)
            return True
        except TimeoutError:
            return False

    def ids(self) -> list[str]:
        return [r.webhook_id for r in self.received]


@asynccontextmanager
async def receiving(secret: str | None = None, **kwargs):
    """A started :class:`Receiver`, stopped on exit."""
    r = Receiver(secret, **kwargs)
    await r.start()
    try:
        yield r
    finally:
        await r.stop()
