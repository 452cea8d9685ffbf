"""Retry policies: capped exponential backoff with full jitter, one per kind of dependency.

Every loop that waits for something to heal takes its delays from here, so that replicas
that failed together do not retry together (after a NATS outage every chat-backend
replica and every service would otherwise reconnect at the same instant).  The delays
are tenacity's ``wait_random_exponential`` ("full jitter": uniform between 0 and
``min(cap, initial * 2 ** (attempt - 1))``; AWS Architecture Blog, "Exponential Backoff
And Jitter", 2015).  A probe is never retried: a transport error is its outcome.

The chat-backend client (``reverie_canary.client``) depends on nats-py and msgspec only;
it draws the same full-jitter delays with the standard library (its ``_connect``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nats.errors import Error as NatsError
from redis.exceptions import RedisError
from tenacity import wait_random_exponential

#: What an unreachable, slow or refusing NATS raises: nats-py's errors (its timeouts, a closed
#: connection, JetStream API answers such as no stream or a missing permission) and the socket's
#: own (``OSError``, which takes in ``TimeoutError``).  Code that talks to NATS and can go on
#: without the answer catches these, never ``Exception``.
NATS_FAULTS: tuple[type[Exception], ...] = (NatsError, OSError)
#: What an unreachable, slow or refusing Redis raises: redis-py's errors (connection, timeout,
#: authentication, permission) and the socket's own.
REDIS_FAULTS: tuple[type[Exception], ...] = (RedisError, OSError)


@dataclass(frozen=True)
class Backoff:
    """One retry policy: the first ceiling and the cap, in seconds.

    ``delay(attempt)`` is the wait before retry number ``attempt`` (1 = the first retry):
    uniform in ``[0, min(cap_s, initial_s * 2 ** (attempt - 1))]``.
    """

    name: str
    initial_s: float
    cap_s: float
    why: str = ""
    _wait: wait_random_exponential = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_wait", wait_random_exponential(multiplier=self.initial_s, max=self.cap_s))

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (>= 1), full jitter."""
        return float(self._wait(_Attempt(max(1, attempt))))


class _Attempt:
    """What tenacity's wait strategies read of a retry's state."""

    __slots__ = ("attempt_number",)

    def __init__(self, attempt_number: int) -> None:
        self.attempt_number = attempt_number


#: Discovery's calls to the gateway's endpoint listing and the bus while it plans or closes a
#: cycle: short first waits (the cycle's window is minutes), capped at 10 s so a cycle gets
#: several tries within its window.
GATEWAY = Backoff("gateway", 0.2, 10.0, "the endpoints listing and the bus while a cycle is planned or closed")
#: A process waiting for NATS, Redis or the streams at start, and ``canary init``: capped at 5 s
#: so that a service is up within seconds of its dependency.
DEPENDENCY = Backoff("dependency", 0.2, 5.0, "NATS, Redis and the streams at start; canary init")
#: A background loop of a service that crashed (expiry, exclusions, delivery): from 1 s to 30 s,
#: so a loop that fails at once does not spin.
LOOP = Backoff("loop", 1.0, 30.0, "a crashed background loop restarted")

def redelivery_delay(base_s: float, deliveries: int) -> float:
    """The ``nak`` delay of a message whose handler hit a :class:`Transient` error, in seconds.

    ``base_s * deliveries`` (linear, as the message's ``max_deliver`` budget was sized for: a Redis
    restart of a few seconds must not exhaust it) with ±25 % jitter, so that the messages of many
    consumers nak'ed in the same outage do not all come back at the same instant.
    """
    import random

    return base_s * deliveries * random.uniform(0.75, 1.25)


def reconnect_wait_s() -> float:
    """nats-py's ``reconnect_time_wait`` for one connection: 1 s ±50 %, drawn once (it has no jitter of its own)."""
    import random

    return random.uniform(0.5, 1.5)


#: A prober's result publish that JetStream did not acknowledge (a stream leader lost, the bus failing
#: over): retried with the same ``Nats-Msg-Id`` while the task's deadline allows, from 0.2 s to 2 s,
#: instead of probing the provider again.
RESULT = Backoff("result", 0.2, 2.0, "a prober's result publish while the bus fails over, within the task's deadline")

#: Every policy, by name (documented in docs/concepts/messages.md, "Retries").
POLICIES: dict[str, Backoff] = {p.name: p for p in (GATEWAY, DEPENDENCY, LOOP, RESULT)}
