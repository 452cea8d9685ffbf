"""Serve an ASGI app with uvicorn on a real socket.

``serve`` binds the socket itself, so ``port=0`` gets a free port that is known
before the first request; tests and ``canary demo`` use it.  ``main`` is the
command line: ``python -m reverie_canary.simulator --scenario default --port 8080``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import uvicorn

from reverie_canary.shared.contract.errors import ConfigError

#: The signals that stop ``python -m reverie_canary.simulator`` (SIGHUP: its terminal closed).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Server(uvicorn.Server):
    """A uvicorn server that leaves the process's signals to the process.

    ``uvicorn.Server.serve`` replaces the SIGINT and SIGTERM handlers while it
    runs and, once it stopped, raises the signal again under the handler it
    found.  Where that handler does nothing (SIGINT ignored by the shell that
    started a background job; SIGTERM of PID 1 in a container, whose default
    action the kernel does not apply) the signal ended the server but not the
    program, which then waited forever.  Whoever runs :func:`serve` installs
    its own handlers (:func:`main`, ``canary demo``) and leaves the block.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def serve(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    shutdown_timeout_s: float = 2.0,
) -> AsyncIterator[str]:
    """Run ``app`` until the block exits; yield the OpenRouter-style base URL.

    Args:
        app: an ASGI app (:func:`reverie_canary.simulator.gateway.create_app`).
        host: interface to bind.
        port: TCP port; 0 picks a free one.
        shutdown_timeout_s: seconds open requests (a hanging provider, a
            stream) get on exit before they are cancelled.

    Yields:
        ``"http://<host>:<port>/api/v1"``.

    Raises:
        OSError: when the address cannot be bound.
        RuntimeError: when uvicorn stops during start-up.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    bound_port = sock.getsockname()[1]
    # log_config=None: uvicorn's records go to the process's logging (structlog, masked), not its own handlers
    config = uvicorn.Config(app, host=host, port=bound_port, log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=shutdown_timeout_s, log_config=None)
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped during start-up")
            await asyncio.sleep(0.005)
        url_host = f"[{host}]" if family == socket.AF_INET6 else host
        yield f"http://{url_host}:{bound_port}/api/v1"
    finally:
        server.should_exit = True
        try:
            await task
        finally:
            sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the simulated gateway until SIGINT, SIGTERM or SIGHUP, however it was started.

    ``python -m reverie_canary.simulator [--scenario NAME|PATH] [--host H] [--port P]
    [--sentences DIR] [--keepalive-s S]``.  Returns the exit status: 0 after a
    stop signal, 1 when the address cannot be bound, 2 on a bad scenario.
    """
    from reverie_canary.simulator.gateway import create_app
    from reverie_canary.simulator.scenario import load_scenario

    parser = argparse.ArgumentParser(prog="python -m reverie_canary.simulator",
                                     description="Simulated OpenRouter gateway with a scripted provider fleet.")
    parser.add_argument("--scenario", default="default",
                        help="packaged scenario name (default, full, hostile) or a TOML file path")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=_port, default=8080, help="TCP port, 0 for a free one")
    parser.add_argument("--sentences", default=None, help="directory of <lang>.txt real sentences")
    parser.add_argument("--keepalive-s", type=float, default=None, help="keep-alive comment interval, seconds")
    args = parser.parse_args(argv)
    try:
        scenario = load_scenario(args.scenario)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    app = create_app(scenario, sentences_dir=args.sentences, keepalive_s=args.keepalive_s)

    async def run() -> None:
        # Handlers of our own, whatever the process inherited: a shell starts a background job with
        # SIGINT ignored, and the kernel applies no default action to a signal sent to PID 1.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, stop.set)
        async with serve(app, host=args.host, port=args.port) as url:
            endpoints = sum(len(m.endpoints) for m in scenario.models)
            print(f"simulated OpenRouter gateway at {url} ({args.scenario}: {len(scenario.models)} model(s), "
                  f"{endpoints} endpoints)", flush=True)
            await stop.wait()

    try:
        asyncio.run(run())
    except OSError as exc:  # address in use, not allowed, unknown host
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535)")
    return port
