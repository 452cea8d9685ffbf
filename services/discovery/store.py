"""What discovery keeps between cycles and across restarts: the probe times it measured and the retests asked.

The port is :class:`DiscoveryStore`; :class:`RedisDiscoveryStore` is the real adapter and
:class:`MemoryDiscoveryStore` the scratch one (the shell's tests run on it).  One contract
suite runs against both (``tests/integration/test_discovery_store.py``).

- **Probe times** (:class:`reverie_canary.services.discovery.sizing.ProbeTimes`): written after
  each cycle's fold, read once at start, so that a restarted discovery sizes its first cycle on
  what the one before it measured.  Kept :data:`TIMES_TTL_S` after the last write.
- **Retests**: the judge's ``RetestRequested`` for a model's cycle, kept (a set: a redelivered
  request changes nothing) until that cycle is planned, at most four cycles.

Every Redis failure is a :class:`reverie_canary.shared.contract.errors.Transient` (a refused
read of the probe times too: an ACL file rendered before the key existed); stored probe times
that are not a ``ProbeTimes`` are an :class:`reverie_canary.shared.contract.errors.Undecodable`.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import msgspec
from redis.exceptions import RedisError

from reverie_canary.services.discovery.sizing import ProbeTimes
from reverie_canary.shared.contract.errors import Transient, Undecodable
from reverie_canary.shared.contract.subjects import encode_token

#: Bytes of stored probe times read at the most (a handful of kinds is about 300 B).
MAX_TIMES_BYTES = 16 * 1024
#: Seconds stored probe times are kept after their last write (a discovery stopped longer starts from the prior).
TIMES_TTL_S = 7 * 24 * 3600

_times_decoder = msgspec.json.Decoder(ProbeTimes)


def decode_times(raw: bytes) -> ProbeTimes:
    """Stored probe times, a kind whose mean is not a positive finite number of seconds dropped.

    Raises:
        Undecodable: more than :data:`MAX_TIMES_BYTES`, or bytes that are not a ``ProbeTimes``.
    """
    if len(raw) > MAX_TIMES_BYTES:
        raise Undecodable(f"stored probe times of {len(raw)} bytes, above the bound of {MAX_TIMES_BYTES}")
    try:
        times = _times_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise Undecodable(f"stored probe times: {exc}") from exc
    kinds = {k: v for k, v in times.kinds.items() if math.isfinite(v.mean_s) and v.mean_s > 0 and v.samples >= 0}
    return ProbeTimes(kinds=kinds, probers=max(0, times.probers), at=times.at)


class DiscoveryStore(Protocol):
    """Discovery's probe times and pending retests."""

    async def load_times(self) -> ProbeTimes | None:
        """The probe times last saved (``None``: none, or expired).

        Raises:
            Transient: the store is unreachable or refused the read.
            Undecodable: what is stored is not probe times.
        """
        ...

    async def save_times(self, times: ProbeTimes) -> None:
        """Replace the stored probe times (kept :data:`TIMES_TTL_S`).

        Raises:
            Transient: the store is unreachable.
        """
        ...

    async def add_retests(self, model: str, cycle_no: int, wanted: list[tuple[str, str]], ttl_s: int) -> None:
        """Keep ``(provider, language)`` retests of ``model``'s cycle ``cycle_no`` for ``ttl_s`` (idempotent).

        Raises:
            Transient: the store is unreachable.
        """
        ...

    async def retests(self, model: str, cycle_no: int) -> list[tuple[str, str]]:
        """The retests kept for ``model``'s cycle ``cycle_no``, sorted.

        Raises:
            Transient: the store is unreachable.
        """
        ...


class MemoryDiscoveryStore:
    """The store in a process's memory (nothing expires: a test's run is shorter than any keeping time)."""

    def __init__(self) -> None:
        self.times: bytes | None = None
        self.retest_sets: dict[tuple[str, int], set[tuple[str, str]]] = {}

    async def load_times(self) -> ProbeTimes | None:
        return None if self.times is None else decode_times(self.times)

    async def save_times(self, times: ProbeTimes) -> None:
        self.times = msgspec.json.encode(times)

    async def add_retests(self, model: str, cycle_no: int, wanted: list[tuple[str, str]], ttl_s: int) -> None:
        self.retest_sets.setdefault((model, cycle_no), set()).update(wanted)

    async def retests(self, model: str, cycle_no: int) -> list[tuple[str, str]]:
        return sorted(self.retest_sets.get((model, cycle_no), set()))


class RedisDiscoveryStore:
    """The store in Redis: ``<ns>:discovery:probe-times`` and a set ``<ns>:retest:<model>:<cycle>`` per cycle.

    Args:
        client: a redis-py asyncio client (bytes in, bytes out).
        namespace: the deployment's key prefix.
    """

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.times_key = f"{namespace}:discovery:probe-times"
        self.namespace = namespace

    def _retest_key(self, model: str, cycle_no: int) -> str:
        return f"{self.namespace}:retest:{encode_token(model)}:{cycle_no}"

    async def load_times(self) -> ProbeTimes | None:
        try:
            raw = await self.client.get(self.times_key)
        except (RedisError, OSError) as exc:  # NOPERM included: an ACL file rendered before this key existed
            raise Transient(f"redis get {self.times_key}: {exc!r}") from exc
        return None if raw is None else decode_times(raw)

    async def save_times(self, times: ProbeTimes) -> None:
        try:
            await self.client.set(self.times_key, msgspec.json.encode(times), ex=TIMES_TTL_S)
        except (RedisError, OSError) as exc:
            raise Transient(f"redis set {self.times_key}: {exc!r}") from exc

    async def add_retests(self, model: str, cycle_no: int, wanted: list[tuple[str, str]], ttl_s: int) -> None:
        if not wanted:
            return
        key = self._retest_key(model, cycle_no)
        try:
            async with self.client.pipeline(transaction=False) as pipe:  # the ACL allows no MULTI
                pipe.sadd(key, *(f"{provider}\n{language}" for provider, language in wanted))
                pipe.expire(key, ttl_s)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            raise Transient(f"redis sadd {key}: {exc!r}") from exc

    async def retests(self, model: str, cycle_no: int) -> list[tuple[str, str]]:
        key = self._retest_key(model, cycle_no)
        try:
            raw = await self.client.smembers(key)
        except (RedisError, OSError) as exc:
            raise Transient(f"redis smembers {key}: {exc!r}") from exc
        out = []
        for item in raw:
            provider, _, language = (item.decode() if isinstance(item, bytes) else item).partition("\n")
            out.append((provider, language))
        return sorted(out)
