"""The prober's connections to the gateway, and what its clock counts.

On a real socket against the simulated gateway (scenario ``hostile``): a reply
read to ``[DONE]`` leaves its connection in the pool for the next probe (it
was closed before, so every probe paid a new connection, a TLS handshake
against the real gateway); a reply that never ends closes its own; and the
times a reply records start when its request was written, so a wait for a
pooled connection is not counted as the provider's time.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from reverie_canary.services.prober.clients import ClientPool
from reverie_canary.services.prober.http import request_body, send_probe
from reverie_canary.services.prober.prompts import build
from reverie_canary.services.prober.service import Prober, requests_in_flight
from reverie_canary.shared.contract.events import ProbeTask
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.gateway import create_app
from reverie_canary.simulator.scenario import load_scenario
from reverie_canary.simulator.server import serve

#: The simulated gateway refuses chat completions without a key.
AUTH = {"Authorization": f"Bearer {SIMULATED_KEY}"}

pytestmark = pytest.mark.integration

MODEL = "deepseek/deepseek-chat-v3.1"


class Connections:
    """Counts the TCP connections a client opens (httpcore's ``connection.connect_tcp`` trace event)."""

    def __init__(self) -> None:
        self.opened = 0

    async def hook(self, request: httpx.Request) -> None:
        inner = request.extensions.get("trace")

        async def trace(event: str, info: dict) -> None:
            if event == "connection.connect_tcp.complete":
                self.opened += 1
            if inner is not None:
                await inner(event, info)

        request.extensions["trace"] = trace


@pytest.fixture
async def gateway():
    async with serve(create_app(load_scenario("hostile"))) as url:
        yield url


def body(tag: str, kind: str = "echo") -> dict:
    return request_body(MODEL, tag, build(kind, "en", max_tokens=64), require_parameters=False)


async def test_a_reply_read_to_done_leaves_its_connection_for_the_next_probe(gateway):
    """Four probes one after another open one connection; a stream held open after its finish closes its own."""
    seen = Connections()
    async with httpx.AsyncClient(base_url=gateway + "/", timeout=5, event_hooks={"request": [seen.hook]},
                                 headers=AUTH) as client:
        for tag in ("deepinfra/fp8", "lambda/fp8", "novita/fp8", "deepinfra/fp8"):
            reply = await send_probe(client, body(tag), ttft_deadline_s=None, total_timeout_s=3.0)
            assert reply.done and reply.transport_error is None and reply.text, (tag, reply)
        assert seen.opened == 1
        # finish reason and usage, then held open without [DONE]: judged after the grace, its connection closed
        held = await send_probe(client, body("openend/fp8"), ttft_deadline_s=None, total_timeout_s=3.0)
        assert not held.done and held.finish_reason == "stop" and held.transport_error is None
        reply = await send_probe(client, body("deepinfra/fp8"), ttft_deadline_s=None, total_timeout_s=3.0)
        assert reply.done and seen.opened == 2


async def test_the_reply_clock_starts_when_the_request_is_written_not_while_it_waits_for_a_connection(gateway):
    """With one connection for two probes, the second waits for the first's whole reply; its times do not count it.

    The first (Lambda: first token after 0.5 s) holds the only connection; the
    second waits at least that long before its request is written.  Its
    ``total_ms`` is what came after the request was written, so the probe's
    wall time exceeds it by the wait (>= 0.5 s), however loaded the machine.
    """
    one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx.AsyncClient(base_url=gateway + "/", timeout=5, limits=one, headers=AUTH) as client:
        async def timed(tag: str):
            t0 = time.perf_counter()
            reply = await send_probe(client, body(tag), ttft_deadline_s=None, total_timeout_s=10.0)
            return reply, (time.perf_counter() - t0) * 1000.0

        first = asyncio.create_task(timed("lambda/fp8"))
        await asyncio.sleep(0.05)  # the first has the connection
        (r1, wall1), (r2, wall2) = await asyncio.gather(first, timed("deepinfra/fp8"))
    assert r1.done and r2.done, (r1, r2)
    assert r1.ttft_ms >= 500.0 and r2.ttft_ms >= 150.0  # never less than the injected delays
    assert wall2 - r2.total_ms >= 500.0, (wall2, r2.total_ms)
    assert r2.ttft_ms <= r2.total_ms


async def test_the_prober_clients_hold_every_request_a_prober_can_have_in_flight(gateway):
    """Sized to the concurrency and the language confirmations, over clients of 16: none waits, each keeps its own.

    48 probes at once open one connection each, spread evenly over three clients
    (httpcore's pool bookkeeping per request grows with the square of its size:
    services/prober/clients.py); 16 more afterwards open none.
    """
    settings = Settings.load(env={}, openrouter_base_url=gateway, openrouter_api_key=SIMULATED_KEY, prober_concurrency=16,
                             language_confirmations=2)
    assert requests_in_flight(settings) == 48
    pool = ClientPool(settings, requests_in_flight(settings))
    assert len(pool.clients) == 3
    seen = Connections()
    for client in pool.clients:
        client.event_hooks["request"].append(seen.hook)
    prober = Prober(settings, pool)
    try:
        now = datetime.now(timezone.utc)
        tasks = [ProbeTask(at=now, task_id=f"t{i}", model=MODEL, provider="deepinfra/fp8", provider_name="DeepInfra",
                           kind="echo", language="en", cycle="c", deadline=now + timedelta(seconds=10))
                 for i in range(48)]
        results = await asyncio.gather(*(prober.probe(t) for t in tasks))
        assert {r.outcome for r in results} == {"pass"}
        assert seen.opened == 48 and pool.in_flight == [0, 0, 0]
        again = await asyncio.gather(*(prober.probe(t) for t in tasks[:16]))
        assert {r.outcome for r in again} == {"pass"} and seen.opened == 48
    finally:
        await pool.aclose()
        prober.close()


class ClosingServer:
    """An HTTP/1.1 server on a real socket that answers each connection's first request with a short SSE
    reply (kept alive), and closes the connection at its ``close_on``-th request without a byte: what a
    server does when its idle timeout and the client's keep-alive expiry race (uvicorn 5 s, httpx 5 s)."""

    SSE = (b'data: {"id":"gen-1","provider":"Edge","choices":[{"index":0,"delta":{"content":"Ol\\u00e1."},'
           b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')

    def __init__(self, close_on: int) -> None:
        self.close_on = close_on
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        n = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next((line.split(b":", 1)[1] for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length:")), b"0"))
                await reader.readexactly(length)
                n += 1
                if n == self.close_on:
                    return  # closed without a byte of response
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             + f"content-length: {len(self.SSE)}\r\n\r\n".encode() + self.SSE)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/api/v1"

    async def __aexit__(self, *exc) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def edge_body() -> dict:
    return request_body(MODEL, "edge/fp8", build("ttft", "pt"), require_parameters=False)


async def test_a_kept_connection_the_server_closed_idle_is_sent_again_once_on_a_new_one():
    """The second probe reuses the kept connection, which the server drops unread: sent again, it passes.

    Found by the suite on a clean clone: a healthy provider of the demo frozen two cycles in a row with
    ``connection_lost`` -- its cycle's first probe met the connection uvicorn had just closed after 5 s idle.
    """
    async with ClosingServer(close_on=2) as url, httpx.AsyncClient(base_url=url + "/") as client:
        first = await send_probe(client, edge_body(), ttft_deadline_s=None, total_timeout_s=5.0)
        second = await send_probe(client, edge_body(), ttft_deadline_s=None, total_timeout_s=5.0)
    assert (first.transport_error, first.text) == (None, "Olá.")
    assert (second.transport_error, second.text, second.http_status) == (None, "Olá.", 200)


async def test_a_new_connection_lost_before_the_reply_is_the_replys_and_not_sent_again():
    """The server drops the first request of a new connection: connection_lost, one connection, no second try."""
    server = ClosingServer(close_on=1)
    async with server as url, httpx.AsyncClient(base_url=url + "/") as client:
        reply = await send_probe(client, edge_body(), ttft_deadline_s=None, total_timeout_s=5.0)
    assert (reply.transport_error, reply.http_status) == ("connection_lost", None)
    assert server.connections == 1
