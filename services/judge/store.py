"""Where the judge keeps its folded state: one record per model, written in parts, one atomic step per batch.

The port is :class:`JudgeStore`; :class:`RedisJudgeStore` is the real adapter
and :class:`MemoryJudgeStore` the scratch one (replays, tests of the shell);
``tests/integration/test_judge_store.py`` runs one contract against both.

A record holds a model's state, the stream position of the last event applied
to it, a revision, and the effects of the last batch that applied events to it
(the outbox), with the position whose outbox was published (``sent``).  The
live judge keeps the states in memory and is their only writer
(:meth:`JudgeStore.acquire`: a lease whose token every save checks, so a judge
that lost it -- paused, partitioned, replaced -- cannot write behind the one
that holds it now); after each batch it saves every model the batch touched,
with their positions and outboxes, in **one** atomic step (:meth:`JudgeStore.commit`),
before it publishes and acknowledges anything.  A crash between save and
publish is repaired when the judge reads its records again: an outbox whose
position is not ``sent`` is published again under the same ``Nats-Msg-Id`` s
(docs/development.md, "A service is a pure core").

A state is stored in parts so that a batch writes what it changed, not the
whole record: every field of :class:`ModelState` but ``providers`` and
``open_cycles`` (``m:<field>``), each provider (``p:<provider>``), each open
cycle without its results (``c:<cycle>``) and each result of an open cycle
(``r:<cycle> <task id>``: cycle ids and task ids are slugs, which hold no space).
A probe result therefore writes one result and ``m:updated_at``, whatever the
number of providers of its model (``benchmarks/judge_bench.py``).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from reverie_canary.services.judge.core import Effect, Measured, ModelState, OpenCycle, ProviderState, initial
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import (
    CommandApplied,
    CommandRefused,
    Language,
    Outcome,
    Reason,
    ResultRef,
    Token,
)
from reverie_canary.shared.contract.subjects import decode_token, encode_token
from reverie_canary.shared.runtime.logging import get as get_logger

#: What an outbox holds: the fold's effects, and the answer to an operator command.
Outbound = Effect | CommandApplied | CommandRefused


class JudgeRecord(msgspec.Struct, kw_only=True):
    """A model's state plus the position and outbox of the last batch applied to it.

    ``sent``: the position whose outbox was published (an outbox with ``sent`` below
    ``position`` may not have been: the judge publishes it again when it reads the record).
    """

    state: ModelState
    position: int = 0
    revision: int = 0
    outbox: list[Outbound] = []
    sent: int = 0

    @property
    def unsent(self) -> bool:
        """Whether the outbox may not have been published."""
        return bool(self.outbox) and self.sent != self.position


class Fenced(Transient):
    """The judge's lease is not held by this writer (lost, expired, or taken by another judge): nothing was written."""


@dataclass
class ModelChange:
    """What one batch did to one model: its state before (as stored) and after, position, outbox."""

    model: str
    before: ModelState | None
    after: ModelState
    position: int
    expected_revision: int
    outbox: list[Outbound] = field(default_factory=list)

    @property
    def revision(self) -> int:
        return self.expected_revision + 1


class JudgeStore(Protocol):
    """Load and atomically save judge records; a lease so that one judge writes at a time."""

    async def load(self, model: str) -> JudgeRecord:
        """The model's record (a fresh one if none is stored)."""
        ...

    async def load_many(self, models: list[str]) -> dict[str, JudgeRecord]:
        """The records of ``models`` (fresh ones for those not stored)."""
        ...

    async def save(self, model: str, record: JudgeRecord, *, expected_revision: int) -> None:
        """Replace the record if the stored revision is still ``expected_revision``.

        Raises:
            Transient: another writer got there first, or the store is unreachable.
        """
        ...

    async def commit(self, changes: list[ModelChange], *, lease: str | None) -> None:
        """Save every change at once, or none: each model's changed parts, position, revision and outbox.

        Args:
            lease: the token of :meth:`acquire` (``None``: no lease is checked, for tools and tests).

        Raises:
            Fenced: ``lease`` is not the one held now.
            Transient: a stored revision is not the change's ``expected_revision``, or the
                store is unreachable.
        """
        ...

    async def mark_sent(self, positions: dict[str, int]) -> None:
        """Record that the outbox saved at ``positions[model]`` was published."""
        ...

    async def acquire(self, owner: str, ttl_s: float) -> tuple[str | None, str]:
        """Take the judge's lease for ``ttl_s`` if nobody holds it.

        Returns:
            ``(token, owner)`` when taken; ``(None, holder)`` when another holds it.
        """
        ...

    async def renew(self, token: str, ttl_s: float) -> bool:
        """Extend the lease ``token`` holds by ``ttl_s`` (``False``: it is not held by ``token`` any more)."""
        ...

    async def release(self, token: str) -> None:
        """Give the lease up if ``token`` still holds it."""
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


# -- a state in parts -------------------------------------------------------------------------------------

_encoder = msgspec.json.Encoder()
_msgpack = msgspec.msgpack.Encoder()
_META = tuple(f for f in msgspec.structs.fields(ModelState) if f.name not in ("providers", "open_cycles"))
_META_DECODERS = {f.name: msgspec.json.Decoder(f.type) for f in _META}
_PROVIDER = msgspec.json.Decoder(ProviderState)
_CYCLE = msgspec.json.Decoder(OpenCycle)
_RESULT = msgspec.json.Decoder(ResultRef)
#: An outbox is a list of messages; each is decoded as one of :data:`Outbound` (a decision as its variant).
_OUTBOX = msgspec.json.Decoder(list[msgspec.Raw])
_OUTBOUND = codec.UnionDecoder(Outbound)


class _LegacyRecord(msgspec.Struct, kw_only=True):
    """The first layout's one JSON document per model: a :class:`JudgeRecord`, its outbox read as :func:`_outbox`."""

    state: ModelState
    position: int = 0
    revision: int = 0
    outbox: list[msgspec.Raw] = []
    sent: int = 0


_LEGACY = msgspec.json.Decoder(_LegacyRecord)


def _outbox(raw: list[msgspec.Raw]) -> list[Outbound]:
    """The messages of a stored outbox.

    Raises:
        msgspec.ValidationError: when one is not an :data:`Outbound`.
    """
    return [_OUTBOUND.decode(item) for item in raw]
#: Hash fields of a record besides its state's parts.
REV, POS, OUTBOX, SENT, LEGACY_DOC = "rev", "pos", "outbox", "sent", "doc"


def _result_field(cycle: str, task_id: str) -> str:
    return f"r:{cycle} {task_id}"


class _StoredResult(msgspec.Struct, array_like=True, frozen=True):
    """A result of an open cycle as stored: its field (``r:<cycle> <task id>``) already names its cycle and task.

    ``measured``: the numbers the facts across the model's providers read at the close
    (:class:`~reverie_canary.services.judge.core.Measured`: token counts, time to first token),
    kept here with the result and never in its ``ResultRef``; a result stored without them
    (before they were kept) reads as having none.
    """

    kind: Token
    outcome: Outcome
    reason: Reason = ""
    language: Language | None = None
    measured: Measured | None = None


_STORED_RESULT = msgspec.json.Decoder(_StoredResult)


def _result_value(cycle: str, task_id: str, ref: ResultRef, measured: Measured | None = None) -> bytes:
    """``ref`` as stored under :func:`_result_field`: ``[kind, outcome, reason, language, measured]``.

    Without the task id and cycle the field's name already holds, a stored result is about 40
    bytes instead of 150 (a large model writes one a result); its numbers (``measured``:
    ``[380,40,320,812.5,"p1"]``) add about 20 bytes, ``null`` when it has none.  A reference whose own task id or
    cycle is not its field's (no fold makes one) is stored whole, without numbers.
    """
    if ref.task_id == task_id and ref.cycle == cycle:
        return _encoder.encode(_StoredResult(kind=ref.kind, outcome=ref.outcome, reason=ref.reason,
                                             language=ref.language, measured=measured))
    return _encoder.encode(ref)


def _result_from(cycle: str, task_id: str, raw: bytes) -> tuple[ResultRef, Measured | None]:
    """The result stored under ``r:<cycle> <task_id>`` and its numbers (the short form of :func:`_result_value`, or whole)."""
    if raw[:1] != b"[":
        return _RESULT.decode(raw), None  # whole (as before the short form)
    short = _STORED_RESULT.decode(raw)
    return ResultRef(task_id=task_id, cycle=cycle, kind=short.kind, outcome=short.outcome, reason=short.reason,
                     language=short.language), short.measured


def _head(cycle: OpenCycle) -> bytes:
    """An open cycle without its results and their numbers (they are stored one by one)."""
    return _encoder.encode(msgspec.structs.replace(cycle, results={}, measured={}))


def _same_head(a: OpenCycle, b: OpenCycle) -> bool:
    return (a.cycle == b.cycle and a.cycle_no == b.cycle_no and a.opened_at == b.opened_at
            and a.deadline == b.deadline and a.parts == b.parts and (a.planned is b.planned or a.planned == b.planned))


def state_parts(state: ModelState) -> dict[str, bytes]:
    """Every part of ``state`` (field -> JSON)."""
    out = {f"m:{f.name}": _encoder.encode(getattr(state, f.name)) for f in _META}
    for name, ps in state.providers.items():
        out[f"p:{name}"] = _encoder.encode(ps)
    for cid, cycle in state.open_cycles.items():
        out[f"c:{cid}"] = _head(cycle)
        for task_id, ref in cycle.results.items():
            out[_result_field(cid, task_id)] = _result_value(cid, task_id, ref, cycle.measured.get(task_id))
    return out


def delta(before: ModelState | None, after: ModelState) -> tuple[dict[str, bytes], list[str]]:
    """The parts to write and the parts to delete to turn the stored ``before`` into ``after``.

    Parts ``after`` shares with ``before`` (the same objects: :class:`reverie_canary.services.judge.core.Folder`
    copies only what a result changes) are not even compared; a result costs one part and the
    model's ``updated_at``.
    """
    if before is None:
        return state_parts(after), []
    sets: dict[str, bytes] = {}
    deletes: list[str] = []
    for f in _META:
        new = getattr(after, f.name)
        old = getattr(before, f.name)
        if new is not old and new != old:
            sets[f"m:{f.name}"] = _encoder.encode(new)
    if after.providers is not before.providers:
        for name, ps in after.providers.items():
            old_ps = before.providers.get(name)
            if old_ps is not ps and old_ps != ps:
                sets[f"p:{name}"] = _encoder.encode(ps)
        deletes += [f"p:{name}" for name in before.providers if name not in after.providers]
    if after.open_cycles is not before.open_cycles:
        for cid, cycle in after.open_cycles.items():
            old_cycle = before.open_cycles.get(cid)
            if old_cycle is cycle:
                continue
            if old_cycle is None:
                sets[f"c:{cid}"] = _head(cycle)
                for task_id, ref in cycle.results.items():
                    sets[_result_field(cid, task_id)] = _result_value(cid, task_id, ref, cycle.measured.get(task_id))
                continue
            if not _same_head(old_cycle, cycle):
                sets[f"c:{cid}"] = _head(cycle)
            if cycle.results is not old_cycle.results or cycle.measured is not old_cycle.measured:
                old_results, old_measured = old_cycle.results, old_cycle.measured
                for task_id, ref in cycle.results.items():
                    old_ref = old_results.get(task_id)
                    measured, old_m = cycle.measured.get(task_id), old_measured.get(task_id)
                    if (old_ref is not ref and old_ref != ref) or (old_m is not measured and old_m != measured):
                        sets[_result_field(cid, task_id)] = _result_value(cid, task_id, ref, measured)
                deletes += [_result_field(cid, t) for t in old_results if t not in cycle.results]
        for cid, old_cycle in before.open_cycles.items():
            if cid not in after.open_cycles:
                deletes.append(f"c:{cid}")
                deletes += [_result_field(cid, t) for t in old_cycle.results]
    return sets, deletes


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else value


def record_from_parts(model: str, parts: dict[str, bytes]) -> JudgeRecord:
    """The record stored in ``parts`` (hash fields; a legacy ``doc`` record too)."""
    if not parts:
        return JudgeRecord(state=initial(model))
    if LEGACY_DOC in parts:  # the first layout: one JSON document per model
        legacy = _LEGACY.decode(parts[LEGACY_DOC])
        return JudgeRecord(state=legacy.state, position=legacy.position, revision=legacy.revision,
                           outbox=_outbox(legacy.outbox), sent=legacy.sent)
    meta: dict[str, Any] = {}
    providers: dict[str, ProviderState] = {}
    cycles: dict[str, OpenCycle] = {}
    results: dict[str, dict[str, ResultRef]] = {}
    measured: dict[str, dict[str, Measured]] = {}
    for name, raw in parts.items():
        kind, _, rest = name.partition(":")
        if kind == "m":
            if rest in _META_DECODERS:
                meta[rest] = _META_DECODERS[rest].decode(raw)
        elif kind == "p":
            providers[rest] = _PROVIDER.decode(raw)
        elif kind == "c":
            cycles[rest] = _CYCLE.decode(raw)
        elif kind == "r":
            cid, _, task_id = rest.partition(" ")
            ref, numbers = _result_from(cid, task_id, raw)
            results.setdefault(cid, {})[task_id] = ref
            if numbers is not None:
                measured.setdefault(cid, {})[task_id] = numbers
    for cid, refs in results.items():
        if cid in cycles:
            cycles[cid].results = dict(sorted(refs.items()))
            cycles[cid].measured = dict(sorted(measured.get(cid, {}).items()))
    meta.setdefault("model", model)
    state = ModelState(**meta, providers=dict(sorted(providers.items())),
                       open_cycles=dict(sorted(cycles.items(), key=lambda kv: kv[1].deadline)))
    try:
        outbox = _outbox(_OUTBOX.decode(parts[OUTBOX])) if OUTBOX in parts else []
    except msgspec.ValidationError as exc:  # an effect above a wire bound: publishing it was refused anyway
        get_logger("judge").error("judge_outbox_unreadable", model=model, error=str(exc))
        outbox = []
    return JudgeRecord(state=state, position=int(parts.get(POS, b"0")), revision=int(parts.get(REV, b"0")),
                       outbox=outbox, sent=int(parts.get(SENT, b"0") or 0))


def record_parts(record: JudgeRecord) -> dict[str, bytes]:
    """Every hash field of ``record``."""
    return {**state_parts(record.state), REV: str(record.revision).encode(), POS: str(record.position).encode(),
            OUTBOX: _encoder.encode(record.outbox), SENT: str(record.sent).encode()}


def change_parts(change: ModelChange, *, full: bool) -> tuple[dict[str, bytes], list[str]]:
    """The fields one commit writes and deletes for ``change`` (all of them when ``full``)."""
    if full:
        sets, deletes = state_parts(change.after), []
    else:
        sets, deletes = delta(change.before, change.after)
    sets[REV] = str(change.revision).encode()
    sets[POS] = str(change.position).encode()
    sets[OUTBOX] = _encoder.encode(change.outbox)
    return sets, deletes


# -- adapters -----------------------------------------------------------------------------------------------


class MemoryJudgeStore:
    """In-process store with the Redis adapter's layout (hash fields per model): replays and tests of the shell."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, bytes]] = {}
        self.lease: tuple[str, str, float] | None = None  # token, owner, expiry (monotonic s)

    async def load(self, model: str) -> JudgeRecord:
        return record_from_parts(model, self.records.get(model, {}))

    async def load_many(self, models: list[str]) -> dict[str, JudgeRecord]:
        return {m: await self.load(m) for m in models}

    async def save(self, model: str, record: JudgeRecord, *, expected_revision: int) -> None:
        current = await self.load(model)
        if current.revision != expected_revision:
            raise Transient(f"judge record of {model} changed underneath (revision {current.revision})")
        self.records[model] = record_parts(record)

    async def commit(self, changes: list[ModelChange], *, lease: str | None) -> None:
        if lease is not None and self._holder() != lease:
            raise Fenced("the judge's lease is not held by this writer: nothing saved")
        for change in changes:
            stored = self.records.get(change.model, {})
            if int(stored.get(REV, b"0")) != change.expected_revision:
                raise Transient(f"judge record of {change.model} changed underneath "
                                f"(revision {int(stored.get(REV, b'0'))}, expected {change.expected_revision})")
        for change in changes:
            stored = self.records.get(change.model, {})
            full = LEGACY_DOC in stored or change.before is None
            sets, deletes = change_parts(change, full=full)
            parts = {} if full else dict(stored)
            for name in deletes:
                parts.pop(name, None)
            parts.update(sets)
            self.records[change.model] = parts

    async def mark_sent(self, positions: dict[str, int]) -> None:
        for model, position in positions.items():
            if model in self.records:
                self.records[model][SENT] = str(position).encode()

    def _holder(self) -> str | None:
        if self.lease is None or self.lease[2] <= time.monotonic():
            return None
        return self.lease[0]

    async def acquire(self, owner: str, ttl_s: float) -> tuple[str | None, str]:
        if self._holder() is not None:
            return None, self.lease[1]  # type: ignore[index]
        token = f"{owner}|{secrets.token_hex(8)}"
        self.lease = (token, owner, time.monotonic() + ttl_s)
        return token, owner

    async def renew(self, token: str, ttl_s: float) -> bool:
        if self._holder() != token:
            return False
        self.lease = (token, self.lease[1], time.monotonic() + ttl_s)  # type: ignore[index]
        return True

    async def release(self, token: str) -> None:
        if self._holder() == token:
            self.lease = None

    async def models(self) -> list[str]:
        return sorted(self.records)

    async def initialized(self) -> bool:
        return True

    async def mark_initialized(self) -> None:
        return None


#: KEYS: [lease, model keys...]; ARGV: [lease token or '', the batch as ONE MessagePack array with an entry
#: per model key: [expected rev, full (1: delete every field first), [field, value, field, value, ...],
#: [field to delete, ...]]].  One argument instead of four per model and two per field: Redis parses,
#: copies and hands over each argument of a script call on its own, and a batch of 256 events is a
#: few thousand fields (``benchmarks/judge_bench.py``).  ``cmsgpack`` is part of Redis's Lua; it reads
#: MessagePack str but not bin, so the values (JSON, UTF-8) go as str.  A value of at least
#: :data:`_LARGE` bytes (a large model's outbox or listing) goes as an argument of its own instead and
#: the array holds its index in ARGV: unpacking it from the array would cost Redis as much again
#: as taking it as an argument (about 1 ns a byte; 0.3 ms for a 250-provider verdict).
_COMMIT = """
if ARGV[1] ~= '' then
  local holder = redis.call('GET', KEYS[1])
  if holder ~= ARGV[1] then
    return {'fenced', holder or ''}
  end
end
local batch = cmsgpack.unpack(ARGV[2])
for m = 1, #batch do
  local current = redis.call('HGET', KEYS[m + 1], 'rev') or '0'
  if current ~= batch[m][1] then
    return {'stale', KEYS[m + 1], current}
  end
end
for m = 1, #batch do
  local key = KEYS[m + 1]
  local change = batch[m]
  if change[2] == 1 then
    redis.call('DEL', key)
  end
  local sets, dels = change[3], change[4]
  for k = 2, #sets, 2 do
    if type(sets[k]) == 'number' then
      sets[k] = ARGV[sets[k]]
    end
  end
  for k = 1, #sets, 1000 do
    redis.call('HSET', key, unpack(sets, k, math.min(k + 999, #sets)))
  end
  for k = 1, #dels, 1000 do
    redis.call('HDEL', key, unpack(dels, k, math.min(k + 999, #dels)))
  end
end
return {'ok'}
"""

#: Bytes from which a value goes to :data:`_COMMIT` as an argument of its own.
_LARGE = 4096

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 0
"""

_REPLACE = """
local current = redis.call('HGET', KEYS[1], 'rev')
if (current or '0') ~= ARGV[1] then
  return current or '0'
end
redis.call('DEL', KEYS[1])
for k = 2, #ARGV, 1000 do
  redis.call('HSET', KEYS[1], unpack(ARGV, k, math.min(k + 999, #ARGV)))
end
return 'ok'
"""


class RedisJudgeStore:
    """Records in a hash ``<namespace>:judge:<encoded model>`` (fields: see the module); the lease in
    ``<namespace>:judge-lease``.

    A batch's save is one Lua script (atomic in Redis, one round trip): it checks the lease's token
    and every model's revision, then writes the parts each model changed (a record in the first
    layout, one ``doc`` field, is rewritten whole the first time).
    """

    def __init__(self, client: aioredis.Redis, namespace: str) -> None:
        self.client = client
        self.prefix = f"{namespace}:judge:"
        self.lease_key = f"{namespace}:judge-lease"
        self._commit = client.register_script(_COMMIT)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._replace = client.register_script(_REPLACE)
        self._legacy: set[str] = set()

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

    def _record(self, model: str, raw: dict) -> JudgeRecord:
        parts = {_text(k): v for k, v in raw.items()}
        if LEGACY_DOC in parts:
            self._legacy.add(model)
        return record_from_parts(model, parts)

    async def load(self, model: str) -> JudgeRecord:
        try:
            raw = await self.client.hgetall(self.key(model))
        except RedisError as exc:
            raise Transient(f"redis get {model}: {exc!r}", model=model) from exc
        return self._record(model, raw)

    async def load_many(self, models: list[str]) -> dict[str, JudgeRecord]:
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for model in models:
                    pipe.hgetall(self.key(model))
                raws = await pipe.execute()
        except RedisError as exc:
            raise Transient(f"redis get {len(models)} judge records: {exc!r}") from exc
        return {model: self._record(model, raw) for model, raw in zip(models, raws, strict=False)}

    async def save(self, model: str, record: JudgeRecord, *, expected_revision: int) -> None:
        fields = [v for kv in record_parts(record).items() for v in kv]
        try:
            answer = await self._replace(keys=[self.key(model)], args=[str(expected_revision), *fields])
        except RedisError as exc:
            raise Transient(f"redis save {model}: {exc!r}", model=model) from exc
        if _text(answer) != "ok":
            raise Transient(f"judge record of {model} is at revision {answer!r}, expected {expected_revision}",
                            model=model)
        self._legacy.discard(model)

    async def commit(self, changes: list[ModelChange], *, lease: str | None) -> None:
        if not changes:
            return
        batch: list[Any] = []
        large: list[bytes] = []  # values sent as arguments of their own: ARGV[3], ARGV[4], ...
        for change in changes:
            full = change.before is None or change.model in self._legacy
            sets, deletes = change_parts(change, full=full)
            flat: list[Any] = []
            for name, value in sets.items():
                if len(value) >= _LARGE:  # an argument of its own (see _COMMIT); ARGV counts from 1
                    flat += (name, len(large) + 3)
                    large.append(value)
                else:  # as MessagePack str: Redis's cmsgpack reads no bin
                    flat += (name, value.decode())
            batch.append((str(change.expected_revision), 1 if full else 0, flat, deletes))
        args = [lease or "", _msgpack.encode(batch), *large]
        try:
            answer = await self._commit(keys=[self.lease_key, *(self.key(c.model) for c in changes)], args=args)
        except RedisError as exc:
            raise Transient(f"redis save of {len(changes)} judge record(s): {exc!r}") from exc
        status = _text(answer[0])
        if status == "fenced":
            holder = _text(answer[1]) or "nobody"
            raise Fenced(f"the judge's lease is held by {holder.split('|')[0]}, not this judge: nothing saved",
                         holder=holder)
        if status != "ok":
            raise Transient(f"judge record {_text(answer[1])} is at revision {_text(answer[2])}: "
                            "another writer saved it; nothing saved")
        for change in changes:
            self._legacy.discard(change.model)

    async def mark_sent(self, positions: dict[str, int]) -> None:
        if not positions:
            return
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for model, position in positions.items():
                    pipe.hset(self.key(model), SENT, str(position))
                await pipe.execute()
        except RedisError as exc:
            raise Transient(f"redis: marking {len(positions)} outbox(es) published: {exc!r}") from exc

    async def acquire(self, owner: str, ttl_s: float) -> tuple[str | None, str]:
        token = f"{owner}|{secrets.token_hex(8)}"
        try:
            if await self.client.set(self.lease_key, token, nx=True, px=int(ttl_s * 1000)):
                return token, owner
            holder = await self.client.get(self.lease_key)
        except RedisError as exc:
            raise Transient(f"redis: taking the judge's lease: {exc!r}") from exc
        return None, (_text(holder) or "").split("|")[0] or "nobody (it expired just now)"

    async def renew(self, token: str, ttl_s: float) -> bool:
        try:
            return bool(await self._renew(keys=[self.lease_key], args=[token, int(ttl_s * 1000)]))
        except RedisError as exc:
            raise Transient(f"redis: renewing the judge's lease: {exc!r}") from exc

    async def release(self, token: str) -> None:
        with contextlib.suppress(RedisError):
            await self._release(keys=[self.lease_key], args=[token])

    async def models(self) -> list[str]:
        try:
            keys = [k async for k in self.client.scan_iter(match=self.prefix + "*", count=200)]
        except RedisError as exc:
            raise Transient(f"redis scan: {exc!r}") from exc
        return sorted(decode_token(_text(k)[len(self.prefix):]) for k in keys)
