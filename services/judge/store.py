"""Where the judge keeps its folded state: one record per model.

The port is :class:`JudgeStore`; :class:`RedisJudgeStore` is the real adapter
and :class:`MemoryJudgeStore` the scratch one that ``canary replay`` folds
into.  A record holds the state, the stream position of the last event applied
and the effects that event produced (the outbox), saved together atomically,
so a crash between save and publish is repaired on redelivery: the same
position is recognised and its outbox published again under the same
``Nats-Msg-Id`` s (CONVENTIONS.md, "A service is a pure core").
"""

from __future__ import annotations

from typing import Protocol

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from reverie_canary.services.judge.core import Effect, ModelState, initial
from reverie_canary.shared.errors import Transient
from reverie_canary.shared.events import CommandApplied, CommandRefused
from reverie_canary.shared.subjects import decode_token, encode_token


#: What an outbox holds: the fold's effects, and the answer to an operator command.
Outbound = Effect | CommandApplied | CommandRefused


class JudgeRecord(msgspec.Struct, kw_only=True):
    """A model's state plus the position and outbox of the last event applied."""

    state: ModelState
    position: int = 0
    revision: int = 0
    outbox: list[Outbound] = []


_decoder = msgspec.json.Decoder(JudgeRecord)
_encoder = msgspec.json.Encoder()


class JudgeStore(Protocol):
    """Load and atomically save judge records."""

    async def load(self, model: str) -> JudgeRecord:
        """The model's record (a fresh one if none is stored)."""
        ...

    async def save(self, model: str, record: JudgeRecord, *, expected_revision: int) -> None:
        """Store ``record`` if the stored revision is still ``expected_revision``.

        Raises:
            Transient: another writer got there first, or the store is unreachable.
        """
        ...

    async def models(self) -> list[str]:
        """Every model with a stored record."""
        ...

    async def initialized(self) -> bool:
        """Whether this store has held the judge's state (a marker that disappears with the data)."""
        ...

    async def mark_initialized(self) -> None:
        """Set the marker of :meth:`initialized`."""
        ...


class MemoryJudgeStore:
    """In-process store: replay scratch state and tests of the shell."""

    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}

    async def load(self, model: str) -> JudgeRecord:
        raw = self.records.get(model)
        return _decoder.decode(raw) if raw else JudgeRecord(state=initial(model))

    async def save(self, model: str, record: JudgeRecord, *, expected_revision: int) -> None:
        current = await self.load(model)
        if current.revision != expected_revision:
            raise Transient(f"judge record of {model} changed underneath (revision {current.revision})")
        self.records[model] = _encoder.encode(record)

    async def models(self) -> list[str]:
        return sorted(self.records)

    async def initialized(self) -> bool:
        return True

    async def mark_initialized(self) -> None:
        return None


_CAS = """
local current = redis.call('HGET', KEYS[1], 'rev')
if (current or '0') ~= ARGV[1] then
  return current or '0'
end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'doc', ARGV[3])
return 'ok'
"""


class RedisJudgeStore:
    """Records in a hash ``<namespace>:judge:<encoded model>`` (``rev``, ``doc``).

    A save is one compare-and-set Lua script: it writes only if ``rev`` is
    still the revision the record was loaded at (atomic in Redis, one round trip).
    """

    def __init__(self, client: aioredis.Redis, namespace: str) -> None:
        self.client = client
        self.prefix = f"{namespace}:judge:"
        self._cas = client.register_script(_CAS)

    def key(self, model: str) -> str:
        return self.prefix + encode_token(model)

    @property
    def marker(self) -> str:
        return self.prefix.removesuffix(":judge:") + ":judge-initialized"

    async def initialized(self) -> bool:
        try:
            return bool(await self.client.exists(self.marker))
        except RedisError as exc:
            raise Transient(f"redis exists: {exc!r}") from exc

    async def mark_initialized(self) -> None:
        try:
            await self.client.set(self.marker, b"1")
        except RedisError as exc:
            raise Transient(f"redis set: {exc!r}") from exc

    async def load(self, model: str) -> JudgeRecord:
        try:
            raw = await self.client.hget(self.key(model), "doc")
        except RedisError as exc:
            raise Transient(f"redis get {model}: {exc!r}", model=model) from exc
        return _decoder.decode(raw) if raw else JudgeRecord(state=initial(model))

    async def save(self, model: str, record: JudgeRecord, *, expected_revision: int) -> None:
        try:
            answer = await self._cas(keys=[self.key(model)],
                                     args=[str(expected_revision), str(record.revision), _encoder.encode(record)])
        except RedisError as exc:
            raise Transient(f"redis save {model}: {exc!r}", model=model) from exc
        if answer not in (b"ok", "ok"):
            raise Transient(f"judge record of {model} is at revision {answer!r}, expected {expected_revision}",
                            model=model)

    async def models(self) -> list[str]:
        try:
            keys = [k async for k in self.client.scan_iter(match=self.prefix + "*", count=200)]
        except RedisError as exc:
            raise Transient(f"redis scan: {exc!r}") from exc
        return sorted(decode_token((k.decode() if isinstance(k, bytes) else k)[len(self.prefix):]) for k in keys)
