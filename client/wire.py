"""The wire types a chat backend reads: the IgnoreSnapshot and its parts.

Defined once, here, for both distributions: the main one (``reverie-canary``)
re-exports them from :mod:`reverie_canary.shared.contract.events` and
:mod:`reverie_canary.shared.contract.snapshots`.  The router writes an
:class:`IgnoreSnapshot` to the KV bucket ``canary-routing`` (key: the encoded
model id, :func:`reverie_canary.client.subjects.kv_key`) and publishes it on
``canary.routing.<model>`` (docs/concepts/routing.md).  Each entry says which
layer(s) put a provider there, why, and until when.

Evolution rules (msgspec ``docs/schema-evolution.rst``): new fields get
defaults, a field's type never changes, unknown fields are accepted so that an
older reader keeps reading newer messages; decoding is strict about types.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from reverie_canary.client.errors import CanaryError

#: A timezone-aware datetime; the encoders always write UTC (``...Z``).
UtcDatetime = Annotated[datetime, Meta(tz=True)]
#: A non-empty identifier (provider tag, model id, task id, actor ...): visible ASCII without
#: ``"`` or ``\\``, so that it is one byte a character in JSON, a subject token, a Redis key
#: and a log line (a tag with a control character or a space from a hostile listing is refused).
Slug = Annotated[str, Meta(min_length=1, max_length=256, pattern=r"^[!#-\[\]-~]+$")]
#: The three layers of the ignore list (docs/concepts/routing.md).
Layer = Literal["exclusion", "override", "suspension"]

#: The most endpoints (providers) of one model the system watches: four times the largest
#: model the gateway lists today; discovery keeps the first ones by tag and says how many it left
#: out.  Every per-model list on the wire (an ignore list, a cycle's verdicts) is bounded by it.
MAX_ENDPOINTS_PER_MODEL = 256

#: The schema version this code reads and writes.  A message of another version is
#: refused at decoding, never read as this one (docs/concepts/messages.md, "Bounds"): a type whose
#: shape changes incompatibly gets ``v: Annotated[int, Meta(ge=1, le=2)] = 2`` of its
#: own and readers that handle both.
SCHEMA_VERSION = 1
#: The ``v`` field of every message: 1 up to :data:`SCHEMA_VERSION` (a message without ``v`` is version 1).
Version = Annotated[int, Meta(ge=1, le=SCHEMA_VERSION)]


class Event(Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of all wire events: schema version ``v`` and the UTC time ``at`` the fact describes."""

    v: Version = SCHEMA_VERSION
    at: UtcDatetime


class IgnoreReason(Struct, frozen=True, kw_only=True):
    """Why one layer ignores a provider.

    ``layer``: ``exclusion`` (reviewed file), ``override`` (operator) or
    ``suspension`` (canary).  ``until``: UTC expiry, ``None`` for no expiry.
    """

    layer: Layer
    reason: Annotated[str, Meta(max_length=4000)]
    reference: Annotated[str, Meta(max_length=256)] = ""
    actor: Annotated[str, Meta(max_length=256)] = ""
    since: UtcDatetime | None = None
    until: UtcDatetime | None = None


class IgnoreEntry(Struct, frozen=True, kw_only=True):
    """One ignored provider and every layer that ignores it."""

    provider: Slug
    reasons: Annotated[list[IgnoreReason], Meta(max_length=6)]

    def expires_at(self) -> datetime | None:
        """UTC time when the last layer lets go; ``None`` if one never expires."""
        ends = [r.until for r in self.reasons]
        if any(u is None for u in ends):
            return None
        return max(ends)  # type: ignore[type-var]

    def active_at(self, now: datetime) -> IgnoreEntry | None:
        """This entry with expired layers dropped, or ``None`` if none is left."""
        live = [r for r in self.reasons if r.until is None or r.until > now]
        if not live:
            return None
        return self if len(live) == len(self.reasons) else IgnoreEntry(provider=self.provider, reasons=live)


#: The identity of the router's store a snapshot's versions count in (:attr:`IgnoreSnapshot.epoch`).
Epoch = Annotated[str, Meta(max_length=64, pattern=r"^[A-Za-z0-9._:-]*$")]
#: A provider's display name as the gateway's replies give it (``DeepInfra``).
DisplayName = Annotated[str, Meta(min_length=1, max_length=128)]


class IgnoreSnapshot(Event, frozen=True, kw_only=True, tag="ignore_snapshot"):
    """The merged ignore list of ``model`` at ``at`` (UTC), version ``version`` of store ``epoch``.

    Versions increase by one per change and never go back *within one epoch*: a
    client refuses a lower version than one it applied of the same epoch (no
    rollback).  ``epoch`` names the router's store the versions count in; the
    router draws a new one when its store is new (a fresh deployment, a move to
    another cluster), where versions start again at 1, so a client holding
    version 7 of an older store accepts version 4 of the new one and says so.
    ``""``: a router from before epochs (one sequence, as before).

    ``names`` maps each endpoint tag of the model the router knows from the
    gateway's listing to its display name (``{"deepinfra/fp8": "DeepInfra",
    "deepinfra/fp4": "DeepInfra"}``): a reply names its provider by display
    name only, so a chat backend's guard ignores every endpoint that name covers
    on its retry, and knows which tags the ignore list's entries exclude.

    ``quantizations``: the allow-list for ``provider.quantizations`` (OpenRouter's provider
    routing documentation) that an operator's quantization floor for the model makes;
    empty: no floor, every quantization routed.  An allow-list drops every endpoint that
    declares no quantization.
    """

    model: Slug
    version: int
    entries: Annotated[list[IgnoreEntry], Meta(max_length=MAX_ENDPOINTS_PER_MODEL)] = []
    epoch: Epoch = ""
    names: Annotated[dict[Slug, DisplayName], Meta(max_length=MAX_ENDPOINTS_PER_MODEL)] = {}
    quantizations: Annotated[list[Annotated[str, Meta(max_length=16)]], Meta(max_length=16)] = []

    def tags_named(self, name: str) -> list[str]:
        """The endpoint tags whose display name is ``name`` (spaces and case ignored), sorted; ``[]``: unknown."""
        key = " ".join(name.split()).casefold()
        return sorted(tag for tag, n in self.names.items() if " ".join(n.split()).casefold() == key)

    def ignore_at(self, now: datetime) -> list[str]:
        """Provider tags to put in ``provider.ignore`` at ``now`` (UTC), sorted."""
        return sorted(e.provider for e in self.entries if e.active_at(now) is not None)

    @property
    def ignore(self) -> list[str]:
        """All provider tags of the snapshot, regardless of expiry, sorted."""
        return sorted(e.provider for e in self.entries)


class SnapshotUndecodable(CanaryError, ValueError):
    """The bytes are not a valid IgnoreSnapshot (the message says which field and why)."""


_snapshot_decoder = msgspec.json.Decoder(IgnoreSnapshot)
_encoder = msgspec.json.Encoder()


def decode_snapshot(data: bytes | str) -> IgnoreSnapshot:
    """Decode an IgnoreSnapshot strictly (``"7"`` is not ``7``; unknown fields are accepted).

    Raises:
        SnapshotUndecodable: when the bytes are not JSON or do not match the type.
    """
    try:
        return _snapshot_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise SnapshotUndecodable(f"not a valid IgnoreSnapshot: {exc}") from exc
    except RecursionError as exc:  # msgspec skips an unknown field recursively
        raise SnapshotUndecodable("not a valid IgnoreSnapshot: JSON nested too deeply") from exc


def encode(message: object) -> bytes:
    """Encode a Struct (or plain data) as JSON bytes, times in UTC."""
    return _encoder.encode(message)
