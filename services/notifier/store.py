"""The notifier's delivery book: the folded state, and every notice's delivery on every channel.

The port is :class:`DeliveryBook`; :class:`RedisDeliveryBook` is the real
adapter and :class:`MemoryDeliveryBook` the in-process one, and both pass one
contract suite (tests/integration/test_notifier_book.py).

- :meth:`DeliveryBook.save` stores the folded state, the stream position of
  the event folded and that event's notices *with one pending delivery entry
  per channel* in one compare-and-set: a crash cannot fold an event without
  queueing its notices, nor queue them twice.  An entry that exists already
  (the same notice id on the same channel: a redelivered or re-published
  decision) is left as it is: each notice reaches each channel once.
- Delivery entries carry their attempts, the time of the first attempt and
  the next due time, so the schedule survives a restart of the notifier.
  :meth:`claim` takes the due entries of one channel and pushes their due
  time a lease ahead, so two notifier replicas never send the same entry at
  once; a replica that dies mid-send leaves the entry to be tried again when
  its lease ends.
- A delivered entry is kept ``keep_s`` (35 days, the log's age: any copy of
  the decision still in the log finds it), a dead one too; a pending one
  until it is delivered or dead.

Times are epoch seconds (floats); the shell reads the clock, never this module.
"""

from __future__ import annotations

from typing import Literal, Protocol

import msgspec
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from reverie_canary.services.notifier.core import FoldState
from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.contract.events import Notice

#: How long delivered and dead entries (and their notices) are kept unless told: the log's default age (35 days).
#: The service passes its ``log_max_age_s`` (:class:`RedisDeliveryBook`), so the book keeps what the log keeps.
KEEP_S = 35 * 86400
#: Deliveries remembered for ``canary notices list``.
RECENT = 200

Status = Literal["pending", "delivered", "dead"]


class BookRecord(msgspec.Struct, kw_only=True):
    """The folded state plus the position of the last event folded."""

    state: FoldState = msgspec.field(default_factory=FoldState)
    position: int = 0
    revision: int = 0


class Entry(msgspec.Struct, kw_only=True):
    """One notice on one channel.

    ``first_at``: the first attempt (``None`` before it); ``due_at``: the next
    attempt; ``generation``: resends so far.  Times in epoch seconds.
    """

    notice_id: str = ""
    channel: str = ""
    status: Status = "pending"
    attempts: int = 0
    created_at: float = 0.0
    first_at: float | None = None
    due_at: float = 0.0
    last_at: float | None = None
    last_error: str = ""
    delivered_at: float | None = None
    dead_at: float | None = None
    generation: int = 0


class Queued(msgspec.Struct, frozen=True, kw_only=True):
    """A notice and the channels it is to be delivered on."""

    notice: Notice
    channels: list[str]


_record_dec = msgspec.json.Decoder(BookRecord)
_entry_dec = msgspec.json.Decoder(Entry)
_notice_dec = msgspec.json.Decoder(Notice)
_enc = msgspec.json.Encoder()


class DeliveryBook(Protocol):
    """Load and atomically save the fold; queue, claim and record deliveries."""

    async def load(self) -> BookRecord:
        """The stored record (a fresh one if none)."""
        ...

    async def save(self, record: BookRecord, *, expected_revision: int, queued: list[Queued], now: float) -> int:
        """Store ``record`` and queue ``queued``, if the stored revision is still ``expected_revision``.

        Returns:
            How many delivery entries were created (existing ones are left alone).

        Raises:
            Transient: another writer got there first, or the store is unreachable.
        """
        ...

    async def claim(self, channel: str, now: float, limit: int, lease_s: float) -> list[tuple[Entry, Notice | None]]:
        """Up to ``limit`` entries of ``channel`` due at ``now``, each leased for ``lease_s``."""
        ...

    async def delivered(self, entry: Entry, now: float) -> None:
        """Record a successful attempt (``entry.attempts`` already counts it)."""
        ...

    async def failed(self, entry: Entry, now: float, due_at: float, error: str) -> None:
        """Record a failed attempt and the next due time."""
        ...

    async def dead(self, entry: Entry, now: float, error: str) -> None:
        """Record that the schedule is exhausted: the entry leaves the queue."""
        ...

    async def release(self, entry: Entry, due_at: float) -> None:
        """Give back a claimed entry unattempted (the notifier is stopping): due again at ``due_at``."""
        ...

    async def expedite(self, channel: str, now: float) -> int:
        """Make every pending entry of ``channel`` due at ``now`` (it answered again); returns how many moved."""
        ...

    async def requeue(self, channel: str, notice_id: str, now: float) -> Entry | None:
        """A dead entry becomes pending again, due now, with a fresh schedule; ``None`` if it is not dead."""
        ...

    async def entry(self, channel: str, notice_id: str) -> Entry | None:
        """One entry, or ``None``."""
        ...

    async def entries(self, status: Status, channel: str | None = None, limit: int = 100) -> list[Entry]:
        """Pending (by due time) or dead (latest first) entries; delivered ones come from :meth:`recent`."""
        ...

    async def recent(self, limit: int = 50) -> list[Entry]:
        """The latest deliveries, newest first."""
        ...

    async def notice(self, notice_id: str) -> Notice | None:
        """A queued notice's content."""
        ...

    async def channels(self) -> list[str]:
        """Every channel that ever had an entry."""
        ...

    async def next_due(self, channel: str) -> float | None:
        """The earliest due time of ``channel``'s pending entries."""
        ...


class MemoryDeliveryBook:
    """In-process book (tests of the shell, the demo's scratch)."""

    def __init__(self) -> None:
        self._record: bytes | None = None
        self._notices: dict[str, bytes] = {}
        self._entries: dict[tuple[str, str], Entry] = {}
        self._recent: list[Entry] = []

    async def load(self) -> BookRecord:
        return _record_dec.decode(self._record) if self._record else BookRecord()

    async def save(self, record: BookRecord, *, expected_revision: int, queued: list[Queued], now: float) -> int:
        current = await self.load()
        if current.revision != expected_revision:
            raise Transient(f"notifier book changed underneath (revision {current.revision})")
        self._record = _enc.encode(record)
        created = 0
        for q in queued:
            self._notices.setdefault(q.notice.notice_id, _enc.encode(q.notice))
            for channel in q.channels:
                key = (channel, q.notice.notice_id)
                if key not in self._entries:
                    self._entries[key] = Entry(notice_id=q.notice.notice_id, channel=channel, created_at=now,
                                               due_at=now)
                    created += 1
        return created

    async def claim(self, channel: str, now: float, limit: int, lease_s: float) -> list[tuple[Entry, Notice | None]]:
        due = sorted((e for (c, _), e in self._entries.items()
                      if c == channel and e.status == "pending" and e.due_at <= now), key=lambda e: e.due_at)[:limit]
        out = []
        for e in due:
            out.append((msgspec.structs.replace(e), await self.notice(e.notice_id)))
            e.due_at = now + lease_s
        return out

    def _stored(self, entry: Entry) -> Entry | None:
        return self._entries.get((entry.channel, entry.notice_id))

    async def delivered(self, entry: Entry, now: float) -> None:
        stored = self._stored(entry)
        if stored is None or stored.status != "pending":
            return
        stored.status, stored.attempts, stored.delivered_at, stored.last_at = "delivered", entry.attempts, now, now
        stored.first_at = entry.first_at
        self._recent = [msgspec.structs.replace(stored), *self._recent][:RECENT]

    async def failed(self, entry: Entry, now: float, due_at: float, error: str) -> None:
        stored = self._stored(entry)
        if stored is None or stored.status != "pending":
            return
        stored.attempts, stored.first_at, stored.last_at = entry.attempts, entry.first_at, now
        stored.due_at, stored.last_error = due_at, error

    async def dead(self, entry: Entry, now: float, error: str) -> None:
        stored = self._stored(entry)
        if stored is None or stored.status != "pending":
            return
        stored.status, stored.attempts, stored.first_at = "dead", entry.attempts, entry.first_at
        stored.last_at = stored.dead_at = now
        stored.last_error = error

    async def release(self, entry: Entry, due_at: float) -> None:
        stored = self._stored(entry)
        if stored is not None and stored.status == "pending":
            stored.due_at = due_at

    async def expedite(self, channel: str, now: float) -> int:
        moved = 0
        for (c, _), e in self._entries.items():
            if c == channel and e.status == "pending" and e.due_at > now:
                e.due_at = now
                moved += 1
        return moved

    async def requeue(self, channel: str, notice_id: str, now: float) -> Entry | None:
        e = self._entries.get((channel, notice_id))
        if e is None or e.status != "dead":
            return None
        e.status, e.attempts, e.first_at, e.due_at, e.dead_at = "pending", 0, None, now, None
        e.generation += 1
        return msgspec.structs.replace(e)

    async def entry(self, channel: str, notice_id: str) -> Entry | None:
        e = self._entries.get((channel, notice_id))
        return msgspec.structs.replace(e) if e else None

    async def entries(self, status: Status, channel: str | None = None, limit: int = 100) -> list[Entry]:
        found = [msgspec.structs.replace(e) for (c, _), e in self._entries.items()
                 if e.status == status and (channel is None or c == channel)]
        if status == "dead":
            found.sort(key=lambda e: (-(e.dead_at or 0.0), e.channel, e.notice_id))
        else:
            found.sort(key=lambda e: (e.due_at, e.channel, e.notice_id))
        return found[:limit]

    async def recent(self, limit: int = 50) -> list[Entry]:
        return self._recent[:limit]

    async def notice(self, notice_id: str) -> Notice | None:
        raw = self._notices.get(notice_id)
        return _notice_dec.decode(raw) if raw else None

    async def channels(self) -> list[str]:
        return sorted({c for c, _ in self._entries})

    async def next_due(self, channel: str) -> float | None:
        due = [e.due_at for (c, _), e in self._entries.items() if c == channel and e.status == "pending"]
        return min(due) if due else None


# -- Redis ------------------------------------------------------------------------------------

_SAVE = """
local current = redis.call('HGET', KEYS[1], 'rev') or '0'
if current ~= ARGV[1] then
  return {'rev', current}
end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'doc', ARGV[3])
local prefix, keep, now = ARGV[4], ARGV[5], ARGV[6]
local created = 0
local i = 7
while i <= #ARGV do
  local nid, notice, entry, n = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  redis.call('SET', prefix .. 'notice:' .. nid, notice, 'EX', keep, 'NX')
  for j = 1, n do
    local ch = ARGV[i + 3 + j]
    if redis.call('SET', prefix .. 'entry:' .. ch .. ':' .. nid, entry, 'NX') then
      redis.call('ZADD', prefix .. 'due:' .. ch, now, nid)
      redis.call('SADD', prefix .. 'channels', ch)
      created = created + 1
    end
  end
  i = i + 4 + n
end
return {'ok', tostring(created)}
"""

_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[2], id)
end
return ids
"""

_EXPEDITE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf')
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[1], id)
end
return #ids
"""


class RedisDeliveryBook:
    """The book in Redis, under ``<namespace>:notifier:``.

    Keys: ``state`` (hash ``rev``, ``doc``), ``notice:<id>`` (the notice),
    ``entry:<channel>:<id>`` (one delivery), ``due:<channel>`` (sorted set of
    pending ids by due time), ``dead:<channel>`` (dead ids by time),
    ``recent`` (list of the latest deliveries), ``channels`` (set).  A save is
    one Lua script: compare-and-set of the state and ``SET NX`` of each
    entry, atomic in Redis.

    A delivered or dead entry and its notice expire after ``keep_s`` seconds (the
    log's age, ``log_max_age_s``: a notice is kept as long as the facts it tells),
    and a dead id leaves ``dead:<channel>`` once it is that old; before, the book
    kept them 35 days whatever the log kept, so that a shorter-lived log (or the
    soak's compressed time) left the book growing without end.
    """

    def __init__(self, client: aioredis.Redis, namespace: str, *, keep_s: float = KEEP_S) -> None:
        self.client = client
        self.prefix = f"{namespace}:notifier:"
        self.keep_s = max(1, int(keep_s))
        self._save = client.register_script(_SAVE)
        self._claim = client.register_script(_CLAIM)
        self._expedite = client.register_script(_EXPEDITE)

    def _entry_key(self, channel: str, notice_id: str) -> str:
        return f"{self.prefix}entry:{channel}:{notice_id}"

    async def load(self) -> BookRecord:
        try:
            raw = await self.client.hget(self.prefix + "state", "doc")
        except RedisError as exc:
            raise Transient(f"redis get notifier state: {exc!r}") from exc
        return _record_dec.decode(raw) if raw else BookRecord()

    async def save(self, record: BookRecord, *, expected_revision: int, queued: list[Queued], now: float) -> int:
        args: list[str | bytes] = [str(expected_revision), str(record.revision), _enc.encode(record), self.prefix,
                                   str(self.keep_s), repr(now)]
        for q in queued:
            entry = _enc.encode(Entry(created_at=now, due_at=now))
            args += [q.notice.notice_id, _enc.encode(q.notice), entry, str(len(q.channels)), *q.channels]
        try:
            answer = await self._save(keys=[self.prefix + "state"], args=args)
        except RedisError as exc:
            raise Transient(f"redis save notifier state: {exc!r}") from exc
        status, value = (x.decode() if isinstance(x, bytes) else x for x in answer)
        if status != "ok":
            raise Transient(f"notifier book is at revision {value}, expected {expected_revision}")
        return int(value)

    async def _entries_of(self, channel: str, ids: list[str]) -> list[Entry]:
        if not ids:
            return []
        raws = await self.client.mget([self._entry_key(channel, i) for i in ids])
        out = []
        for nid, raw in zip(ids, raws, strict=False):
            if raw:
                e = _entry_dec.decode(raw)
                e.notice_id, e.channel = nid, channel
                out.append(e)
        return out

    async def claim(self, channel: str, now: float, limit: int, lease_s: float) -> list[tuple[Entry, Notice | None]]:
        try:
            ids = [i.decode() if isinstance(i, bytes) else i for i in
                   await self._claim(keys=[self.prefix + "due:" + channel], args=[repr(now), repr(now + lease_s), limit])]
            entries = [e for e in await self._entries_of(channel, ids) if e.status == "pending"]
            notices = await self.client.mget([self.prefix + "notice:" + e.notice_id for e in entries]) if entries else []
        except RedisError as exc:
            raise Transient(f"redis claim {channel}: {exc!r}") from exc
        return [(e, _notice_dec.decode(raw) if raw else None) for e, raw in zip(entries, notices, strict=False)]

    async def _write(self, entry: Entry, *, due: float | None = None, dead: float | None = None,
                     delivered: bool = False) -> None:
        stored = msgspec.structs.replace(entry, notice_id="", channel="")
        key = self._entry_key(entry.channel, entry.notice_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.set(key, _enc.encode(stored))
        if due is not None:
            pipe.zadd(self.prefix + "due:" + entry.channel, {entry.notice_id: due})
        else:
            pipe.zrem(self.prefix + "due:" + entry.channel, entry.notice_id)
            pipe.expire(key, self.keep_s)
            pipe.expire(self.prefix + "notice:" + entry.notice_id, self.keep_s)
        if dead is not None:
            pipe.zadd(self.prefix + "dead:" + entry.channel, {entry.notice_id: dead})
            pipe.zremrangebyscore(self.prefix + "dead:" + entry.channel, "-inf", f"({dead - self.keep_s!r}")
        else:
            pipe.zrem(self.prefix + "dead:" + entry.channel, entry.notice_id)
        if delivered:
            pipe.lpush(self.prefix + "recent", _enc.encode(entry))
            pipe.ltrim(self.prefix + "recent", 0, RECENT - 1)
        try:
            await pipe.execute()
        except RedisError as exc:
            raise Transient(f"redis write {entry.channel} entry: {exc!r}") from exc

    async def _current(self, entry: Entry) -> Entry | None:
        try:
            found = await self._entries_of(entry.channel, [entry.notice_id])
        except RedisError as exc:
            raise Transient(f"redis read {entry.channel} entry: {exc!r}") from exc
        return found[0] if found and found[0].status == "pending" else None

    async def delivered(self, entry: Entry, now: float) -> None:
        if await self._current(entry) is None:
            return
        await self._write(msgspec.structs.replace(entry, status="delivered", delivered_at=now, last_at=now),
                          delivered=True)

    async def failed(self, entry: Entry, now: float, due_at: float, error: str) -> None:
        if await self._current(entry) is None:
            return
        await self._write(msgspec.structs.replace(entry, last_at=now, due_at=due_at, last_error=error), due=due_at)

    async def dead(self, entry: Entry, now: float, error: str) -> None:
        if await self._current(entry) is None:
            return
        await self._write(msgspec.structs.replace(entry, status="dead", last_at=now, dead_at=now, last_error=error),
                          dead=now)

    async def release(self, entry: Entry, due_at: float) -> None:
        try:
            await self.client.zadd(self.prefix + "due:" + entry.channel, {entry.notice_id: due_at}, xx=True)
        except RedisError as exc:
            raise Transient(f"redis release {entry.channel} entry: {exc!r}") from exc

    async def expedite(self, channel: str, now: float) -> int:
        try:
            return int(await self._expedite(keys=[self.prefix + "due:" + channel], args=[repr(now)]))
        except RedisError as exc:
            raise Transient(f"redis expedite {channel}: {exc!r}") from exc

    async def requeue(self, channel: str, notice_id: str, now: float) -> Entry | None:
        e = await self.entry(channel, notice_id)
        if e is None or e.status != "dead":
            return None
        fresh = msgspec.structs.replace(e, status="pending", attempts=0, first_at=None, due_at=now, dead_at=None,
                                        generation=e.generation + 1)
        await self._write(fresh, due=now)
        try:
            await self.client.persist(self._entry_key(channel, notice_id))
            await self.client.expire(self.prefix + "notice:" + notice_id, self.keep_s)
        except RedisError as exc:
            raise Transient(f"redis requeue {channel}: {exc!r}") from exc
        return fresh

    async def entry(self, channel: str, notice_id: str) -> Entry | None:
        try:
            found = await self._entries_of(channel, [notice_id])
        except RedisError as exc:
            raise Transient(f"redis read {channel} entry: {exc!r}") from exc
        return found[0] if found else None

    async def entries(self, status: Status, channel: str | None = None, limit: int = 100) -> list[Entry]:
        if status == "delivered":
            return [e for e in await self.recent(RECENT) if channel is None or e.channel == channel][:limit]
        out: list[Entry] = []
        try:
            for ch in [channel] if channel else await self.channels():
                if status == "dead":
                    ids = await self.client.zrevrange(self.prefix + "dead:" + ch, 0, limit - 1)
                else:
                    ids = await self.client.zrange(self.prefix + "due:" + ch, 0, limit - 1)
                out += [e for e in await self._entries_of(ch, [i.decode() if isinstance(i, bytes) else i for i in ids])
                        if e.status == status]
        except RedisError as exc:
            raise Transient(f"redis list {status} entries: {exc!r}") from exc
        if status == "dead":
            out.sort(key=lambda e: (-(e.dead_at or 0.0), e.channel, e.notice_id))
        else:
            out.sort(key=lambda e: (e.due_at, e.channel, e.notice_id))
        return out[:limit]

    async def recent(self, limit: int = 50) -> list[Entry]:
        try:
            raws = await self.client.lrange(self.prefix + "recent", 0, limit - 1)
        except RedisError as exc:
            raise Transient(f"redis list recent deliveries: {exc!r}") from exc
        return [_entry_dec.decode(r) for r in raws]

    async def notice(self, notice_id: str) -> Notice | None:
        try:
            raw = await self.client.get(self.prefix + "notice:" + notice_id)
        except RedisError as exc:
            raise Transient(f"redis get notice: {exc!r}") from exc
        return _notice_dec.decode(raw) if raw else None

    async def channels(self) -> list[str]:
        try:
            members = await self.client.smembers(self.prefix + "channels")
        except RedisError as exc:
            raise Transient(f"redis channels: {exc!r}") from exc
        return sorted(m.decode() if isinstance(m, bytes) else m for m in members)

    async def next_due(self, channel: str) -> float | None:
        try:
            first = await self.client.zrange(self.prefix + "due:" + channel, 0, 0, withscores=True)
        except RedisError as exc:
            raise Transient(f"redis next due {channel}: {exc!r}") from exc
        return float(first[0][1]) if first else None
