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
from redis.exceptions import RedisError, WatchError

from services.judge.core import Effect, ModelState, initial
from shared.errors import Transient
from shared.subjects import encode_token


class JudgeRecord(msgspec.Struct, kw_only=True):
    """A model's state plus the position and outbox of the last event applied."""

    state: ModelState
    position: int = 0
    revision: int = 0
    outbox: list[Effect] = []


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


class RedisJudgeStore:
    """Records as JSON under ``<namespace>:judge:<encoded model>``, saved with WATCH/MULTI."""

    def __init__(self, client: aioredis.Redis, namespace: str) -> None:
        self.client = client
        self.prefix = f"{namespace}:judge:"

    def key(self, model: str) -> str:
        return self.prefix + encode_token(model)

    async def load(self, model: str) -> JudgeRecord:
        try:
            raw = await self.client.get(self.key(model))
        except RedisError as exc:
            raise Transient(f"redis get {model}: {exc!r}", model=model) from exc
        return _decoder.decode(raw) if raw else JudgeRecord(state=initial(model))

    async def save(self, model: str, record: JudgeRecord, *, expected_revision: int) -> None:
        key = self.key(model)
        data = _encoder.encode(record)
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                await pipe.watch(key)
                raw = await pipe.get(key)
                current = _decoder.decode(raw).revision if raw else 0
                if current != expected_revision:
                    raise Transient(f"judge record of {model} is at revision {current}, expected {expected_revision}")
                pipe.multi()
                pipe.set(key, data)
                await pipe.execute()
        except WatchError as exc:
            raise Transient(f"judge record of {model} changed during save", model=model) from exc
        except RedisError as exc:
            raise Transient(f"redis save {model}: {exc!r}", model=model) from exc

    async def models(self) -> list[str]:
        from shared.subjects import decode_token

        try:
            keys = [k async for k in self.client.scan_iter(match=self.prefix + "*", count=200)]
        except RedisError as exc:
            raise Transient(f"redis scan: {exc!r}") from exc
        return sorted(decode_token((k.decode() if isinstance(k, bytes) else k)[len(self.prefix):]) for k in keys)
