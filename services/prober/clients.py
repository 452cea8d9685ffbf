"""The prober's HTTP clients: its requests spread over small connection pools.

httpcore's pool (1.0.x) walks every connection it holds twice per request
(when it assigns one, when the response closes) and asks each idle one
whether its socket became readable (a ``poll()`` per connection), with an
idle count recomputed inside that walk: quadratic in the pool's size
(encode/httpcore#1035, encode/httpx#3215).  With the connections kept alive
(:mod:`reverie_canary.services.prober.http`) a prober of 96 probes in flight
held ~100 connections in one pool, and a cycle's burst of starts kept the
event loop busy for about a second (py-spy: 25 % of the prober's time in
``_assign_requests_to_connections``, 18 % in ``has_expired``): requests
waited up to 1.2 s before they were written.

So the prober's requests go to :class:`ClientPool`: ``ceil(requests /
SHARD_CONNECTIONS)`` clients of at most :data:`SHARD_CONNECTIONS` connections
each, one TLS context shared, every request to the client with the fewest
requests in flight (so no client is ever asked for more connections than it
has, and each keeps its own connections warm).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import httpx

from reverie_canary.shared.runtime.openrouter import make_client
from reverie_canary.shared.runtime.settings import Settings

#: Connections of one client: its pool's bookkeeping per request grows with the square of this.
SHARD_CONNECTIONS = 16


class ClientPool:
    """``requests`` chat requests at once over clients of at most :data:`SHARD_CONNECTIONS` connections.

    Args:
        settings: the gateway's URL, key and attribution headers (:func:`make_client`).
        requests: the most requests in flight at once
            (:func:`reverie_canary.services.prober.service.requests_in_flight`).
    """

    def __init__(self, settings: Settings, requests: int, *, shard: int = SHARD_CONNECTIONS) -> None:
        count = max(1, math.ceil(requests / shard))
        per_client = math.ceil(requests / count)
        tls = httpx.create_ssl_context()  # one CA bundle load for all of them
        self.clients = [make_client(settings, connections=per_client, ssl_context=tls) for _ in range(count)]
        self.in_flight = [0] * count

    @contextlib.contextmanager
    def lease(self) -> Iterator[httpx.AsyncClient]:
        """The client with the fewest requests in flight, counted as one more until the block ends."""
        i = min(range(len(self.in_flight)), key=self.in_flight.__getitem__)
        self.in_flight[i] += 1
        try:
            yield self.clients[i]
        finally:
            self.in_flight[i] -= 1

    async def aclose(self) -> None:
        """Close every client (their connections)."""
        for client in self.clients:
            await client.aclose()
