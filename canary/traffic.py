"""Simulated chat traffic through the reply guard: what ``canary demo`` sends and ``benchmarks/chat_traffic.py`` measures.

Simulated users send unpinned chat requests to the simulated gateway, each with the
canary's ignore list in ``provider.ignore`` (the chat backend's
:class:`~reverie_canary.client.IgnoreListClient`), and the gateway routes them by
1/price², as OpenRouter documents unpinned routing.  Each reply goes through a
:class:`~reverie_canary.client.ReplyGuard`: its verdict, at most one retry with the
serving provider ignored, and the content-free live counts its client publishes on
``canary.live.<model>`` (the confirmation probes' trigger, docs/concepts/in-flight.md).

What counts as delivered (the benchmark's rule, the demo's too): an unstreamed reply
is judged before the user sees it, so a failing one that is retried is not delivered;
a streamed reply whose text the user already saw (the guard had decided its opening)
is delivered as it is, retried or not.

Nothing here reads a prompt's or reply's text beyond the guard's checks; the figures
are counts and times.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from reverie_canary.client import IgnoreListClient, ReplyGuard
from reverie_canary.client.guard import GuardPolicy

#: The user turns the simulated users send (a roleplay, as the product's traffic).
TURNS = ["Mira, the lighthouse keeper, hears a knock at midnight.",
         "She opens the door to a stranger soaked by the storm.",
         "The stranger asks for the map she swore never to show anyone."]
#: Requests in flight at most; a request due while this many are open is skipped and counted.
MAX_IN_FLIGHT = 64
#: Seconds one request may take at most (the gateway's reply, the retry included).
REQUEST_TIMEOUT_S = 30.0
#: How often the demo's backend publishes its live counts (s): the client's shortest period.
PUBLISH_LIVE_S = 10.0
#: Seconds the demo's traffic waits for the first ignore list (the reviewed exclusions keep the
#: positive controls out of it from the first request).
SNAPSHOT_WAIT_S = 20.0


@dataclass
class Arm:
    """What one side of a run saw: replies, broken ones delivered, retries, latency and the guard's CPU.

    ``broken``: replies delivered to a user although the guard's checks fail them (a
    retried reply counts as the retry's outcome); ``reasons`` those per reason code;
    ``held`` failing replies not retried, by why (``budget``, ``circuit_open`` ...);
    ``retries`` extra requests; ``errors`` requests that got no reply (transport);
    ``skipped`` requests not sent (:data:`MAX_IN_FLIGHT` open); ``latency_s`` per
    delivered reply (s); ``cpu_ms`` the guard's CPU per reply (ms).
    """

    replies: int = 0
    broken: int = 0
    broken_after_onset: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    errors: int = 0
    skipped: int = 0
    retry_tokens: int = 0
    latency_s: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)


def _tokens(text_chars: int, usage: dict[str, Any] | None) -> int:
    if usage and isinstance(usage.get("completion_tokens"), int):
        return usage["completion_tokens"]
    return text_chars // 4


async def send(http: httpx.AsyncClient, attempt: Any) -> tuple[Any, float, int, bool]:
    """Send one attempt and judge its reply as it comes.

    Returns:
        ``(verdict, guard CPU ms, completion tokens, shown)``: ``shown`` is true for a streamed
        reply whose text reached the user before the guard decided (delivered as it is).

    Raises:
        httpx.HTTPError: the request failed at transport level.
    """
    attempt_cpu = 0.0
    if attempt.body.get("stream"):
        sg = attempt.stream()
        verdict = None
        shown = False
        async with http.stream("POST", "/chat/completions", json=attempt.body) as resp:
            async for chunk in resp.aiter_bytes():
                t = time.perf_counter()
                verdict = sg.feed(chunk)
                attempt_cpu += time.perf_counter() - t
                if verdict is not None:
                    break
                shown = shown or not sg._junk_open  # the guard has seen the opening: text goes to the user
        if verdict is None:
            t = time.perf_counter()
            verdict = sg.finish(http_status=resp.status_code)
            attempt_cpu += time.perf_counter() - t
        chars = sum(len(x) for x in sg.reader.text)
        return verdict, attempt_cpu * 1000, _tokens(chars, None), shown and not verdict.early
    resp = await http.post("/chat/completions", json=attempt.body)
    t = time.perf_counter()
    verdict = attempt.check_body(resp.content, http_status=resp.status_code)
    attempt_cpu += time.perf_counter() - t
    usage = resp.json().get("usage") if resp.status_code == 200 else None
    return verdict, attempt_cpu * 1000, _tokens(0, usage), False


async def one_request(http: httpx.AsyncClient, guard: ReplyGuard, body: dict[str, Any], arm: Arm,
                      guarded: bool = True, after_onset: bool = False) -> None:
    """One user's request: through the guard with its one retry, or delivered as it came (judged to count it)."""
    start = time.perf_counter()
    attempt = guard.attempt(body)
    cpu = 0.0
    while True:
        try:
            verdict, ms, tokens, shown = await send(http, attempt)
        except httpx.HTTPError:
            arm.errors += 1
            return
        cpu += ms
        if not guarded:
            break
        retry = attempt.retry(verdict)
        if retry is None:
            if attempt.held:
                arm.held[attempt.held] = arm.held.get(attempt.held, 0) + 1
            break
        if shown:  # a streamed reply the user saw: delivered as it is, retried or not
            break
        arm.retries += 1
        arm.retry_tokens += tokens
        attempt = retry
    arm.replies += 1
    arm.latency_s.append(time.perf_counter() - start)
    if guarded:
        arm.cpu_ms.append(cpu)
    if verdict.outcome == "fail":
        arm.reasons[verdict.reason] = arm.reasons.get(verdict.reason, 0) + 1
        arm.broken += 1
        arm.broken_after_onset += after_onset


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs`` by rank (``nan`` when empty)."""
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def request_body(model: str, client: IgnoreListClient, rng: random.Random, stream_share: float) -> dict[str, Any]:
    """One unpinned chat request of a simulated user: a turn, streamed or not, the canary's ``provider`` object."""
    return {"model": model, "stream": rng.random() < stream_share,
            "messages": [{"role": "user", "content": rng.choice(TURNS)}],
            "provider": client.provider({"allow_fallbacks": True})}


class ChatTraffic:
    """Simulated users at a fixed rate through one guard: the demo's chat backend.

    Args:
        gateway_url: the simulated gateway's API root (``.../api/v1``).
        api_key: the gateway's key (the simulated one).
        client: the backend's :class:`~reverie_canary.client.IgnoreListClient` (started by the caller;
            its ``live`` recorder gets the guard's counts, it publishes them).
        rpm: requests per minute (> 0).
        stream_share: the share of requests streamed (0..1).
        policy: the guard's bounds (default :class:`GuardPolicy`).
        seed: the users' choices (turn, streamed or not) are this seed's.
    """

    def __init__(self, gateway_url: str, api_key: str, client: IgnoreListClient, *, rpm: float,
                 stream_share: float = 0.5, policy: GuardPolicy | None = None, seed: int = 7) -> None:
        if not rpm > 0:
            raise ValueError(f"rpm {rpm} must be > 0")
        self.gateway_url = gateway_url
        self.api_key = api_key
        self.client = client
        self.rpm = rpm
        self.stream_share = stream_share
        self.guard = ReplyGuard(client, policy=policy)
        self.arm = Arm()
        self.requests = 0
        self.rng = random.Random(seed)
        self.started_at: float | None = None
        self.stopped_at: float | None = None

    async def run(self) -> None:
        """Send requests at :attr:`rpm` until cancelled; the requests in flight finish (bounded) or are cancelled."""
        pending: set[asyncio.Task[None]] = set()
        headers = {"Authorization": f"Bearer {self.api_key}"}
        interval = 60.0 / self.rpm
        async with httpx.AsyncClient(base_url=self.gateway_url, headers=headers, timeout=REQUEST_TIMEOUT_S) as http:
            self.started_at = start = time.monotonic()
            try:
                while True:
                    if len(pending) >= MAX_IN_FLIGHT:
                        self.arm.skipped += 1
                    else:
                        body = request_body(self.client.model, self.client, self.rng, self.stream_share)
                        task = asyncio.create_task(one_request(http, self.guard, body, self.arm))
                        pending.add(task)
                        task.add_done_callback(pending.discard)
                    self.requests += 1
                    await asyncio.sleep(max(0.0, start + self.requests * interval - time.monotonic()))
            finally:
                self.stopped_at = time.monotonic()
                for task in list(pending):
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)

    def figures(self) -> dict[str, Any]:
        """The traffic's figures: ``{rpm, requests, replies, broken_delivered, broken_reasons, retried, held,
        errors, skipped, live_published, live_dropped}`` (counts; ``rpm`` requests per minute)."""
        a = self.arm
        return {"rpm": self.rpm, "requests": self.requests, "replies": a.replies, "broken_delivered": a.broken,
                "broken_reasons": dict(sorted(a.reasons.items())), "retried": a.retries,
                "held": dict(sorted(a.held.items())), "errors": a.errors, "skipped": a.skipped,
                "live_published": self.client.live_published, "live_dropped": self.client.live_dropped}


@contextlib.asynccontextmanager
async def demo_traffic(nats_url: str, password: str, gateway_url: str, api_key: str, model: str, *, rpm: float,
                       tls: Any = None, on_ready: Any = None,
                       ready: Callable[[Any], bool] | None = None) -> AsyncIterator[ChatTraffic]:
    """Run :class:`ChatTraffic` as the demo's chat backend (NATS user ``backend``) while the block runs.

    The backend's client follows the model's ignore list and publishes the guard's live counts
    every :data:`PUBLISH_LIVE_S` s (and the last period when the block ends).  The users start
    once the client has a snapshot that ``ready`` accepts (default: any; at most
    :data:`SNAPSHOT_WAIT_S` s), so the reviewed exclusions keep the positive controls out from
    the first request.

    Args:
        on_ready: called with the ChatTraffic when the users start (the demo prints a line).
        ready: whether a snapshot is the one to start with (the demo's: it holds the exclusions).
    """
    client = IgnoreListClient(nats_url, model, user="backend", password=password, tls=tls,
                              publish_live_s=PUBLISH_LIVE_S, source="demo-backend")
    await client.start()
    traffic = ChatTraffic(gateway_url, api_key, client, rpm=rpm)

    async def users() -> None:
        deadline = time.monotonic() + SNAPSHOT_WAIT_S
        while (client.snapshot is None or (ready is not None and not ready(client.snapshot))) \
                and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if on_ready is not None:
            on_ready(traffic)
        await traffic.run()

    task = asyncio.create_task(users(), name="demo-chat-traffic")
    try:
        yield traffic
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.stop()
