"""Snapshots of the judge's fold, kept in NATS, so that a rebuild starts from the last one.

Redis holds the judge's state, but only as the result of folding the log; when Redis
loses it the judge folds the log again (:func:`reverie_canary.services.judge.service.rebuild`).
From the log's start that is a month of results.  So the judge also writes, every
``judge_snapshot_events`` events it applied, the states of every model it holds at
that stream position into the object store bucket :data:`BUCKET` (NATS, beside the
log: it survives what Redis does not).  A rebuild takes the newest snapshot at or
below the position it rebuilds to and folds only the log after it.

Two snapshots are kept (objects ``judge-a`` and ``judge-b``, written in turn): one
taken just before a crash may lie beyond what the durable had acknowledged, and the
other one is then used.  A snapshot is a JSON document (:class:`FoldSnapshot`),
zlib-compressed; its position is in the object's headers, so choosing one reads no
state.  ``canary replay`` still folds from the log's start unless asked
(``--from-snapshot``): an audit checks the log, not a copy of the fold.

Writing one is best effort: a snapshot that cannot be written (no bucket before
``canary init`` ran again, a permission missing) is logged and the judge goes on.
"""

from __future__ import annotations

import zlib
from datetime import datetime

import msgspec
from nats.js import JetStreamContext
from nats.js.api import ObjectMeta
from nats.js.errors import NotFoundError

from reverie_canary.services.judge.core import ModelState
from reverie_canary.shared.runtime.logging import get as get_logger
from reverie_canary.shared.runtime.retry import NATS_FAULTS
from reverie_canary.shared.runtime.streams import JUDGE_SNAPSHOTS

#: The object store bucket of the judge's snapshots (declared in shared/runtime/streams.py).
BUCKET = JUDGE_SNAPSHOTS
#: Objects written in turn.
NAMES = ("judge-a", "judge-b")
#: The header holding a snapshot's stream position (and the count of events it folded).
POSITION_HEADER = "Canary-Position"


class FoldSnapshot(msgspec.Struct, kw_only=True):
    """The states of every model the judge held after applying the log up to ``position``."""

    position: int
    taken_at: datetime
    states: dict[str, ModelState]


_decoder = msgspec.json.Decoder(FoldSnapshot)
_encoder = msgspec.json.Encoder()


def encode(snapshot: FoldSnapshot) -> bytes:
    """A snapshot as stored: compressed JSON."""
    return zlib.compress(_encoder.encode(snapshot), 3)


def decode(data: bytes) -> FoldSnapshot:
    """The snapshot stored in ``data``."""
    return _decoder.decode(zlib.decompress(data))


async def positions(js: JetStreamContext) -> dict[str, int]:
    """Object name -> the stream position of the snapshot it holds (none: no bucket, or nothing written yet)."""
    try:
        store = await js.object_store(BUCKET)
    except NotFoundError:  # no bucket (BucketNotFoundError)
        return {}
    out: dict[str, int] = {}
    for name in NAMES:
        try:
            info = await store.get_info(name)
        except NotFoundError:  # nothing written under this name yet (ObjectNotFoundError)
            continue
        header = (info.headers or {}).get(POSITION_HEADER)
        if header:
            out[name] = int(header[0] if isinstance(header, list) else header)
    return out


async def latest(js: JetStreamContext, until_seq: int) -> FoldSnapshot | None:
    """The newest snapshot at or below ``until_seq`` (``None``: none, or no bucket)."""
    usable = sorted(((p, n) for n, p in (await positions(js)).items() if p <= until_seq), reverse=True)
    if not usable:
        return None
    store = await js.object_store(BUCKET)
    for _, name in usable:
        try:
            return decode((await store.get(name)).data)
        except (*NATS_FAULTS, zlib.error, msgspec.DecodeError) as exc:  # torn or unreadable: the older one, else the log's start
            get_logger("judge").warning("snapshot_unreadable", name=name, error=repr(exc))
    return None


class SnapshotWriter:
    """Writes the judge's states every ``every`` applied events, to the older of the two objects."""

    def __init__(self, js: JetStreamContext, every: int) -> None:
        self.js = js
        self.every = every
        self.applied = 0
        self._next: str | None = None
        self._failing = False

    def due(self, applied: int) -> bool:
        """Count ``applied`` more events; whether a snapshot is due."""
        self.applied += applied
        return self.every > 0 and self.applied >= self.every

    async def write(self, states: dict[str, ModelState], position: int, at: datetime) -> int | None:
        """Write a snapshot of ``states`` at ``position``; returns its size in bytes (``None``: not written, logged)."""
        log = get_logger("judge")
        self.applied = 0
        try:
            if self._next is None:
                held = await positions(self.js)
                self._next = min(NAMES, key=lambda n: held.get(n, -1))
            data = encode(FoldSnapshot(position=position, taken_at=at, states=states))
            store = await self.js.object_store(BUCKET)
            await store.put(self._next, data, meta=ObjectMeta(name=self._next, headers={POSITION_HEADER: [str(position)]},
                                                              description=f"judge fold at stream position {position}"))
        except NATS_FAULTS as exc:
            if not self._failing:
                log.warning("snapshot_failed", error=repr(exc), bucket=BUCKET,
                            reason="a rebuild starts from an older snapshot or the log's start (is the bucket there? "
                                   "run `canary init` once after this upgrade)")
            self._failing = True
            return None
        if self._failing:
            log.info("snapshot_written_again", bucket=BUCKET)
        self._failing = False
        log.info("snapshot_written", name=self._next, position=position, models=len(states), bytes=len(data))
        self._next = NAMES[1 - NAMES.index(self._next)]
        return len(data)
