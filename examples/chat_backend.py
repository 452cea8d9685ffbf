"""A chat backend that routes around quarantined providers: ``IgnoreListClient`` in use.

The canary's router keeps one ``IgnoreSnapshot`` per model in the NATS KV
bucket ``canary-routing``.  A chat backend follows it with
:class:`reverie_canary.client.IgnoreListClient` and, for every OpenRouter request,
asks it for the ``provider`` object: the backend's own preferences with the
current ``ignore`` list merged in.  The client never blocks a request on the
bus: it answers from memory, drops expired entries on its own clock, keeps the
last good snapshot (and a cache file) through outages, and catches up when the
bus returns.

Two ways to run it (see ``examples/README.md``)::

    # against canary demo's system, started here in-process: embedded NATS and
    # Redis, the simulated OpenRouter gateway and all five services
    python examples/chat_backend.py

    # against any NATS that runs the canary (the chat backend's credential)
    NATS_URL=nats://nats.internal:4222 NATS_USER=backend NATS_PASSWORD=... \\
        python examples/chat_backend.py --model deepseek/deepseek-chat-v3.1

    # over TLS (compose.tls.yaml): the CA and the backend's client certificate
    NATS_URL=tls://nats.internal:4222 CANARY_NATS_CA_FILE=certs/ca.pem \
        CANARY_NATS_CERT_FILE=certs/client.pem CANARY_NATS_KEY_FILE=certs/client-key.pem \
        NATS_USER=backend NATS_PASSWORD=... python examples/chat_backend.py

Each simulated request prints the ``provider`` object it would send, the
snapshot version it came from and ``age_s``, how many seconds ago the bus last
confirmed that snapshot (``None``: never, e.g. a cached snapshot while the bus
is down).  Nothing is sent to OpenRouter.

The first request also shows the reply guard (:class:`reverie_canary.client.ReplyGuard`)
on a streamed reply: a stand-in for the gateway streams a reply from ``DeepInfra``
that opens with a leaked role word; the guard decides at the chunk that shows it,
the backend stops reading, and the one retry goes out with DeepInfra's endpoints in
``provider.ignore``; the second provider's reply passes.  A reply served by a provider the
ignore list excludes (``ignore_not_applied`` in the counts: something dropped the list on the
way) is said on a line of its own.  The guard's counts per
provider and reason are published on ``canary.live.<model>`` every 60 s (counts only:
``client/README.md`` says what leaves the backend).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from reverie_canary.client import IgnoreListClient, IgnoreSnapshot, ReplyGuard, Verdict, tls_context

#: The backend's own provider preferences; the client adds ``ignore`` to them.
PREFERENCES: dict[str, Any] = {"sort": "latency", "allow_fallbacks": True, "data_collection": "deny"}

TURNS = [
    "Mira, the lighthouse keeper, hears a knock at midnight.",
    "She opens the door to a stranger soaked by the storm.",
    "The stranger asks for the map she swore never to show anyone.",
    "Mira lies, and the stranger knows it.",
    "Thunder; the lamp at the top of the tower goes dark.",
]


def request_body(client: IgnoreListClient, model: str, turn: str) -> dict[str, Any]:
    """The body of one OpenRouter chat completion request (POST /api/v1/chat/completions).

    Args:
        client: the started ignore-list client.
        model: the model id.
        turn: the user's message.

    Returns:
        A JSON-serialisable dict; ``provider`` comes from :meth:`IgnoreListClient.provider`
        (synchronous, never waits on the bus).
    """
    return {
        "model": model,
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are the narrator of an interactive story. Stay in character."},
            {"role": "user", "content": turn},
        ],
        "provider": client.provider(PREFERENCES),
    }


def gateway_stand_in(body: dict[str, Any]) -> list[bytes]:
    """The SSE lines the gateway would stream for ``body`` (a stand-in: nothing is sent anywhere).

    Like the gateway, it serves the first provider ``provider.ignore`` leaves: DeepInfra answers
    with a role word leaked before the Markdown (a broken chat template); Lambda, then Fireworks,
    answer cleanly.
    """
    ignored = {str(p).casefold() for p in (body.get("provider") or {}).get("ignore") or []}
    hosts = (("DeepInfra", {"deepinfra/fp8", "deepinfra/fp4", "deepinfra"},
              "assistant\n\n*Mira sets the lamp down and listens.*"),
             ("Lambda", {"lambda/fp8", "lambda"}, "*Mira sets the lamp down and listens.*"),
             ("Fireworks", {"fireworks"}, "*Mira sets the lamp down and listens.*"))
    provider, _, text = next((h for h in hosts if not (h[1] | {h[0].casefold()}) & ignored), hosts[-1])
    lines = [b": OPENROUTER PROCESSING"]
    for i in range(0, len(text), 6):
        lines.append(b"data: " + json.dumps({"provider": provider, "choices": [
            {"index": 0, "delta": {"content": text[i:i + 6]}, "finish_reason": None}]}).encode())
    lines.append(b"data: " + json.dumps({"provider": provider, "choices": [
        {"index": 0, "delta": {}, "finish_reason": "stop"}]}).encode())
    lines.append(b"data: [DONE]")
    return lines


def guarded_reply(guard: ReplyGuard, body: dict[str, Any]) -> Verdict:
    """Stream one reply through the guard, with its one retry; print what happened; the last verdict.

    A real backend reads the response with a timeout of ``stream.wait_s()`` before the first
    token (``stream.timeout()`` when it passes), shows the text as it comes once the guard has
    seen the opening, and stops reading as soon as a verdict comes back.
    """
    attempt = guard.attempt(body)
    while True:
        stream = attempt.stream()
        verdict = None
        for line in gateway_stand_in(attempt.body):
            verdict = stream.line(line)
            if verdict is not None:
                break  # decided early: stop reading (close the response)
        if verdict is None:
            verdict = stream.finish()
        when = "early" if verdict.early else "at the end"
        print(f"  attempt {attempt.number}: served by {verdict.provider}, {verdict.outcome}"
              + (f" ({verdict.reason}, decided {when})" if verdict.reason else ""), flush=True)
        if attempt.ignore_not_applied:  # counted as ignore_not_applied in the live counts too
            print(f"  ignore list NOT applied: {verdict.provider} served although provider.ignore excludes it "
                  "(something on the way to the gateway dropped the list)", flush=True)
        retry = attempt.retry(verdict)
        if retry is None:
            if attempt.held:
                print(f"  not retried: {attempt.held}", flush=True)
            return verdict
        print(f"  retrying once with provider={json.dumps(retry.body['provider'])}", flush=True)
        attempt = retry


def describe(client: IgnoreListClient) -> str:
    """``version=7 age_s=0.4 connected=True`` for the log line of a request (and why it is not current)."""
    age = "None" if client.age_s is None else f"{client.age_s:.1f}"
    line = f"version={client.version} age_s={age} connected={client.connected}"
    return f"{line} problem={client.problem!r}" if client.problem else line


def tls_from_environment() -> ssl.SSLContext | None:
    """TLS to NATS from the canary's variables: ``CANARY_NATS_CA_FILE`` and the backend's client pair.

    ``None`` unless ``NATS_URL`` is ``tls://`` (compose.tls.yaml; docs/deployment/security.md).
    """
    if not os.environ.get("NATS_URL", "").startswith("tls://"):
        return None
    return tls_context(os.environ.get("CANARY_NATS_CA_FILE", ""), os.environ.get("CANARY_NATS_CERT_FILE", ""),
                       os.environ.get("CANARY_NATS_KEY_FILE", ""))


async def run_backend(nats_url: str, user: str, password: str, model: str, cache: Path,
                      requests: int, interval_s: float, tls: ssl.SSLContext | None = None) -> None:
    """Follow ``model``'s ignore list and build ``requests`` request bodies, one every ``interval_s`` seconds."""

    def changed(snapshot: IgnoreSnapshot) -> None:
        print(f"[ignore list v{snapshot.version}] {json.dumps(snapshot.ignore)}", flush=True)

    client = IgnoreListClient(nats_url, model, user=user, password=password, cache_path=cache, on_change=changed,
                              tls=tls, publish_live_s=60.0, source="chat-backend-example")
    guard = ReplyGuard(client)  # never waits on the bus: it reads the snapshot in memory
    await client.start()  # loads the cache file, then follows the bus in the background; never raises
    try:
        if not await client.wait_ready(10.0):
            print(f"no snapshot yet ({client.problem or 'bus unreachable'}, and no cache): requests go out "
                  "without an ignore list", flush=True)
        for i in range(requests):
            body = request_body(client, model, TURNS[i % len(TURNS)])
            if i == 0:
                print("request body:", json.dumps(body, indent=2), flush=True)
                print("the reply guard on a streamed reply:", flush=True)
                guarded_reply(guard, body)
            print(f"request {i + 1:>2}: provider={json.dumps(body['provider'])}  {describe(client)}", flush=True)
            await asyncio.sleep(interval_s)
    finally:
        await client.stop()


@contextlib.asynccontextmanager
async def demo_system(verbose: bool) -> AsyncIterator[tuple[str, str, str, str]]:
    """Start canary demo's system in-process; yield (NATS URL, backend user, its password, model)."""
    from reverie_canary.canary.demo import pipeline
    from reverie_canary.shared.runtime.logging import configure

    configure("console", "WARNING", stream=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="chat-backend-example-") as tmp:
        async with pipeline(workdir=Path(tmp), scenario="default", out=sys.stderr if verbose else None) as p:
            backend = p.settings_for("backend")
            yield backend.nats_url, backend.nats_user, backend.nats_password, p.settings.models[0]


async def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the example; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model id (default: $CANARY_MODELS' first, or the demo's)")
    parser.add_argument("--requests", type=int, default=12, help="simulated requests (default 12)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between requests (default 2)")
    parser.add_argument("--cache", type=Path, default=None, help="snapshot cache file (default: a temporary one)")
    parser.add_argument("--verbose", action="store_true", help="with the demo: print its cycles and decisions")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="chat-backend-cache-") as tmp:
        cache = args.cache or Path(tmp) / "ignore-list.json"
        if os.environ.get("NATS_URL"):
            model = args.model or (os.environ.get("CANARY_MODELS", "").split(",")[0].strip()
                                   or "deepseek/deepseek-chat-v3.1")
            print(f"following {model} on {os.environ['NATS_URL']}", flush=True)
            await run_backend(os.environ["NATS_URL"], os.environ.get("NATS_USER", ""),
                              os.environ.get("NATS_PASSWORD", ""), model, cache, args.requests, args.interval,
                              tls=tls_from_environment())
            return 0
        try:
            import reverie_canary.canary.demo  # noqa: F401  (the main distribution's demo system)
        except ModuleNotFoundError:
            print("NATS_URL is not set, and the demo system needs the main distribution (only the client is "
                  "installed): set NATS_URL (and NATS_USER, NATS_PASSWORD) to a NATS that runs the canary, or "
                  "install the main distribution from the checkout (`pip install -e .` at its root) for the "
                  "in-process demo", file=sys.stderr, flush=True)
            return 2
        print("NATS_URL is not set: starting canary demo's system here (embedded NATS and Redis, simulated "
              "gateway, five services; a cycle every 4 s) ...", flush=True)
        async with demo_system(args.verbose) as (url, user, password, model):
            print(f"following {args.model or model} on {url} as {user}; the judge suspends the slow and broken "
                  "providers after two failed cycles", flush=True)
            await run_backend(url, user, password, args.model or model, cache, args.requests, args.interval)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except KeyboardInterrupt:
        sys.exit(130)
