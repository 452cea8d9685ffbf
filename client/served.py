"""Which provider served each chat request: a bounded local ring, and counts per provider for the canary.

The chat backend hands :meth:`ServedRecorder.record` the gateway's response
metadata (the JSON of a reply, or of its first streamed chunk: OpenRouter names
the provider that served it in ``provider``, OpenRouter's streaming documentation).  The
recorder keeps **only** the provider, the model and the time -- never a prompt,
a reply, a user or a request id: it takes those two fields out of the mapping
and drops the rest -- in a ring of at most ``capacity`` entries (oldest out
first).  Optionally (:meth:`publish`, or :class:`~reverie_canary.client.IgnoreListClient`
with ``publish_served_s``) it publishes, for each period, one
:class:`ServedCounts` per model on ``canary.served.<model>``: how many requests
each provider served, nothing else.  ``canary incident`` and the dashboard's
look-back show those counts beside the canary's verdicts, to connect a user's
report to the route that served it.

Part of the chat-backend distribution: nats-py and msgspec only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from reverie_canary.client import subjects
from reverie_canary.client.wire import MAX_ENDPOINTS_PER_MODEL, Event, Slug

#: The ring's default size (entries); each is three short fields.
DEFAULT_CAPACITY = 10_000
#: The ring's largest size.
MAX_CAPACITY = 1_000_000
#: Longest provider name or model id kept (characters); a longer one is cut, never refused.
MAX_NAME = 128

#: A provider as the gateway names it in a response (``DeepInfra``) or an endpoint tag (``deepinfra/fp8``).
ProviderName = Annotated[str, Meta(min_length=1, max_length=MAX_NAME)]


class ServedCounts(Event, frozen=True, kw_only=True, tag="served_counts"):
    """How many chat requests of ``model`` each provider served from ``since`` to ``at`` (UTC).

    Published by a chat backend (``source``: its own name, optional) on
    ``canary.served.<model>``.  It carries counts only: no prompt, reply, user
    or request id ever leaves the backend (docs/chat-backend.md, "The privacy line").
    ``counts`` keys are what the gateway said (provider names such as
    ``DeepInfra``) or endpoint tags when the backend knows them.
    """

    model: Slug
    since: Annotated[datetime, Meta(tz=True)]
    source: Annotated[str, Meta(max_length=MAX_NAME)] = ""
    counts: Annotated[dict[ProviderName, Annotated[int, Meta(ge=0)]], Meta(max_length=MAX_ENDPOINTS_PER_MODEL)] = {}

    @property
    def total(self) -> int:
        """Requests counted."""
        return sum(self.counts.values())


class Served(Struct, frozen=True, array_like=True):
    """One served request in the ring: time (UTC), model, provider. Nothing else is kept."""

    at: datetime
    model: str
    provider: str


_decoder = msgspec.json.Decoder(ServedCounts)
_encoder = msgspec.json.Encoder()


def decode_counts(data: bytes | str) -> ServedCounts:
    """Decode a ServedCounts strictly (unknown fields accepted).

    Raises:
        msgspec.ValidationError, msgspec.DecodeError: the bytes are not a valid ServedCounts.
    """
    return _decoder.decode(data)


def provider_of(metadata: Mapping[str, Any] | Any) -> tuple[str | None, str | None]:
    """``(provider, model)`` from the gateway's response metadata (a mapping, or an object with attributes).

    Only these two fields are read; anything else in ``metadata`` (the reply's
    text, the prompt, ids) is never touched.  A missing or non-text field is ``None``.
    """
    def field(name: str) -> str | None:
        value = metadata.get(name) if isinstance(metadata, Mapping) else getattr(metadata, name, None)
        if not isinstance(value, str) or not value.strip():
            return None
        return value.strip()[:MAX_NAME]

    return field("provider"), field("model")


class ServedRecorder:
    """A bounded ring of (time, model, provider) per served request, and per-provider counts for publication.

    Args:
        model: the model id recorded when the metadata names none.
        capacity: the most entries kept (1 .. :data:`MAX_CAPACITY`); the oldest go first.
        source: this backend's name in the published counts (optional; never a secret).
        now: the clock (UTC).

    Raises:
        ValueError: ``capacity`` outside its bounds.
    """

    def __init__(self, model: str, *, capacity: int = DEFAULT_CAPACITY, source: str = "",
                 now: Callable[[], datetime] | None = None) -> None:
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ValueError(f"capacity {capacity} outside 1..{MAX_CAPACITY}")
        self.model = model
        self.source = source[:MAX_NAME]
        self.now = now or (lambda: datetime.now(timezone.utc))
        self.ring: deque[Served] = deque(maxlen=capacity)
        self.unrecorded = 0  # metadata that named no provider
        self._published_until: datetime | None = None
        self._pending: dict[str, dict[str, int]] = {}  # model -> provider -> count, since the last publication
        self._pending_since: datetime | None = None

    def record(self, metadata: Mapping[str, Any] | Any, *, at: datetime | None = None) -> str | None:
        """Record the provider that served one request; returns it (``None``: the metadata named none).

        Args:
            metadata: the gateway's response (or first chunk) as parsed JSON, or an object with
                ``provider`` and ``model`` attributes.  Nothing but those two fields is read.
            at: when it was served (UTC; default now).
        """
        provider, model = provider_of(metadata)
        if provider is None:
            self.unrecorded += 1
            return None
        at = at or self.now()
        model = model or self.model
        self.ring.append(Served(at, model, provider))
        if self._pending_since is None:
            self._pending_since = at
        by_model = self._pending.setdefault(model, {})
        if provider in by_model or len(by_model) < MAX_ENDPOINTS_PER_MODEL:
            by_model[provider] = by_model.get(provider, 0) + 1
        return provider

    def counts(self, since: datetime | None = None, until: datetime | None = None,
               model: str | None = None) -> dict[str, int]:
        """Requests per provider in the ring between ``since`` and ``until`` (UTC, inclusive), for one model."""
        out: dict[str, int] = {}
        for s in self.ring:
            if (model is None or s.model == model) and (since is None or s.at >= since) and \
                    (until is None or s.at <= until):
                out[s.provider] = out.get(s.provider, 0) + 1
        return out

    def take_counts(self) -> list[ServedCounts]:
        """The counts since the last call, one :class:`ServedCounts` per model (empty: nothing served)."""
        now = self.now()
        since = self._pending_since or now
        out = [ServedCounts(at=now, model=model, since=since, source=self.source, counts=dict(sorted(counts.items())))
               for model, counts in sorted(self._pending.items()) if counts]
        self._pending, self._pending_since = {}, None
        return out

    async def publish(self, nc: Any, *, timeout_s: float = 2.0) -> list[ServedCounts]:
        """Publish the counts since the last publication on ``canary.served.<model>`` (JetStream: the log keeps
        them); returns what was published.  A failed publication puts its counts back for the next one.

        Raises:
            Exception: nats-py's errors (no stream, a permission, a timeout), after putting the counts back.
        """
        batch = self.take_counts()
        js = nc.jetstream(timeout=timeout_s)
        for i, counts in enumerate(batch):
            msg_id = f"served|{counts.model}|{self.source}|{counts.since.isoformat()}"[:256]
            try:
                await js.publish(subjects.served(counts.model), _encoder.encode(counts),
                                 headers={"Nats-Msg-Id": msg_id})
            except BaseException:
                for later in batch[i:]:  # not lost: counted again in the next publication
                    pending = self._pending.setdefault(later.model, {})
                    for provider, n in later.counts.items():
                        pending[provider] = pending.get(provider, 0) + n
                    self._pending_since = min(x for x in (self._pending_since, later.since) if x is not None)
                raise
        return batch



# -- live outcome counts: how the backend's replies fared, per provider and reason -------------------------

#: Distinct reasons kept per provider and period; a further reason is counted under :data:`OTHER_REASON`.
MAX_REASONS = 16
#: The reason further reasons of a provider past :data:`MAX_REASONS` are counted under.
OTHER_REASON = "other"
#: Why a failing reply was not retried (:attr:`LiveCounts.held`): at most this many distinct reasons.
MAX_HELD = 8
#: Shortest period between two publications of one model's live counts (s): a rate bound per backend.
MIN_LIVE_PERIOD_S = 10.0

Count = Annotated[int, Meta(ge=0)]
#: A provider as live counts key it: its endpoint tag or display name, printable ASCII (bounded JSON).
ProviderKey = Annotated[str, Meta(min_length=1, max_length=MAX_NAME, pattern=r"^[ !#-\[\]-~]+$")]
#: A reason code (``leading_junk``, ``ttft_exceeded`` ...): the checks' stable codes, printable ASCII.
ReasonCode = Annotated[str, Meta(min_length=1, max_length=64, pattern=r"^[!#-\[\]-~]+$")]


class LiveOutcomes(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How one provider's replies fared in a period: counts only.

    ``replies``: replies the guard judged (passes are ``replies`` minus the counted
    reasons); ``reasons``: failing replies by the reason that names the cause (at most
    :data:`MAX_REASONS`, more under ``other``); ``retried``: failing replies sent again
    with this provider ignored; ``ignore_not_applied``: replies this provider served
    although the request's ``provider.ignore`` excluded it (something between the
    backend and the gateway dropped the ignore list).
    """

    replies: Count = 0
    reasons: Annotated[dict[ReasonCode, Count], Meta(max_length=MAX_REASONS)] = {}
    retried: Count = 0
    ignore_not_applied: Count = 0


class LiveCounts(Event, frozen=True, kw_only=True, tag="live_counts"):
    """How a chat backend's replies of ``model`` fared from ``since`` to ``at`` (UTC), per provider and reason.

    Published by the backend's client on ``canary.live.<model>`` at most once per
    period (:data:`MIN_LIVE_PERIOD_S` at least), never text, prompts, users or request
    ids: provider keys, reason codes and counts (README, "What leaves the backend").
    ``providers`` keys are what a reply can tell: the endpoint tag when its display
    name covers one tag of the snapshot's ``names``, else the display name
    (``DeepInfra`` covering ``deepinfra/fp8`` and ``deepinfra/fp4``).  ``unnamed``:
    replies that named no provider (a transport error before any chunk);
    ``overflow``: replies of providers past the bound of keys, counted only here.
    ``held``: failing replies not retried, by why (``circuit_open``, ``budget``,
    ``retried_once``, ``no_provider``, ``not_the_provider``, ``pinned``).
    ``dropped_periods`` / ``dropped_replies``: earlier periods this client could not
    publish (the bus slow or away) and the replies they counted: dropped and counted,
    never queued.
    """

    model: Slug
    since: Annotated[datetime, Meta(tz=True)]
    source: Annotated[str, Meta(max_length=MAX_NAME, pattern=r"^[ !#-\[\]-~]*$")] = ""
    providers: Annotated[dict[ProviderKey, LiveOutcomes], Meta(max_length=MAX_ENDPOINTS_PER_MODEL)] = {}
    unnamed: LiveOutcomes = LiveOutcomes()
    overflow: Count = 0
    held: Annotated[dict[ReasonCode, Count], Meta(max_length=MAX_HELD)] = {}
    dropped_periods: Count = 0
    dropped_replies: Count = 0

    @property
    def replies(self) -> int:
        """Replies counted in the period."""
        return sum(o.replies for o in self.providers.values()) + self.unnamed.replies + self.overflow


_live_decoder = msgspec.json.Decoder(LiveCounts)


def decode_live(data: bytes | str) -> LiveCounts:
    """Decode a LiveCounts strictly (unknown fields accepted).

    Raises:
        msgspec.ValidationError, msgspec.DecodeError: the bytes are not a valid LiveCounts.
    """
    return _live_decoder.decode(data)


class _Tally:
    __slots__ = ("replies", "reasons", "retried", "ignore_not_applied")

    def __init__(self) -> None:
        self.replies = 0
        self.reasons: dict[str, int] = {}
        self.retried = 0
        self.ignore_not_applied = 0

    def frozen(self) -> LiveOutcomes:
        return LiveOutcomes(replies=self.replies, reasons=dict(sorted(self.reasons.items())), retried=self.retried,
                            ignore_not_applied=self.ignore_not_applied)


class LiveRecorder:
    """Counts of a model's replies per provider and reason for the current period; bounded, never blocking.

    :meth:`record` and :meth:`retried` are synchronous dictionary updates (the guard calls
    them on the request path); :meth:`take` hands the period's counts over and starts the
    next.  Memory is bounded by :data:`MAX_ENDPOINTS_PER_MODEL` providers of
    :data:`MAX_REASONS` reasons each; nothing else is kept (no text, no ids).

    Args:
        model: the model id the counts are about.
        source: this backend's name in the published counts (optional; never a secret).
        now: the clock (UTC).
    """

    def __init__(self, model: str, *, source: str = "", now: Callable[[], datetime] | None = None) -> None:
        self.model = model
        self.source = source[:MAX_NAME]
        self.now = now or (lambda: datetime.now(timezone.utc))
        self._providers: dict[str, _Tally] = {}
        self._unnamed = _Tally()
        self._overflow = 0
        self._held: dict[str, int] = {}
        self._since: datetime | None = None
        #: periods not published (the bus slow or away) and the replies they counted, since the last publication
        self.dropped_periods = 0
        self.dropped_replies = 0

    def _tally(self, provider: str | None) -> _Tally | None:
        if self._since is None:
            self._since = self.now()
        if not provider:
            return self._unnamed
        key = provider.strip()[:MAX_NAME]
        tally = self._providers.get(key)
        if tally is None:
            if len(self._providers) >= MAX_ENDPOINTS_PER_MODEL or not _printable(key):
                return None
            tally = self._providers[key] = _Tally()
        return tally

    def record(self, provider: str | None, reason: str = "", *, ignore_not_applied: bool = False) -> None:
        """Count one judged reply of ``provider`` (``None``: it named none); ``reason`` ``""`` for a pass."""
        tally = self._tally(provider)
        if tally is None:
            self._overflow += 1
            return
        tally.replies += 1
        if reason:
            if reason not in tally.reasons and len(tally.reasons) >= MAX_REASONS - 1:
                reason = OTHER_REASON
            tally.reasons[reason[:64]] = tally.reasons.get(reason[:64], 0) + 1
        if ignore_not_applied:
            tally.ignore_not_applied += 1

    def retried(self, provider: str | None) -> None:
        """Count one failing reply of ``provider`` sent again with it ignored."""
        tally = self._tally(provider)
        if tally is not None:
            tally.retried += 1

    def held(self, why: str) -> None:
        """Count one failing reply not retried, and why (``circuit_open``, ``budget`` ...)."""
        if self._since is None:
            self._since = self.now()
        if why in self._held or len(self._held) < MAX_HELD:
            self._held[why] = self._held.get(why, 0) + 1

    @property
    def pending(self) -> int:
        """Replies counted in the current period."""
        return sum(t.replies for t in self._providers.values()) + self._unnamed.replies + self._overflow

    def take(self) -> LiveCounts | None:
        """The current period's counts (``None``: nothing counted and nothing dropped), and a new period."""
        if self._since is None and not self.dropped_periods:
            return None
        now = self.now()
        counts = LiveCounts(at=now, model=self.model, since=self._since or now, source=self.source,
                            providers={k: t.frozen() for k, t in sorted(self._providers.items())},
                            unnamed=self._unnamed.frozen(), overflow=self._overflow, held=dict(sorted(self._held.items())),
                            dropped_periods=self.dropped_periods, dropped_replies=self.dropped_replies)
        self._providers, self._unnamed, self._overflow, self._held, self._since = {}, _Tally(), 0, {}, None
        self.dropped_periods = self.dropped_replies = 0
        return counts

    def dropped(self, counts: LiveCounts) -> None:
        """``counts`` could not be published: count the period and its replies in the next one (never re-queued)."""
        self.dropped_periods += 1 + counts.dropped_periods
        self.dropped_replies += counts.replies + counts.dropped_replies

    async def publish(self, nc: Any, *, timeout_s: float = 2.0) -> LiveCounts | None:
        """Publish the period's counts on ``canary.live.<model>`` (JetStream, deduplicated by period); returns them.

        One message per call; a failure or a timeout drops the period and counts the drop in the
        next one (:meth:`dropped`): a slow bus never grows memory.

        Raises:
            Exception: nats-py's errors (no stream, a permission, a timeout), after counting the drop.
        """
        counts = self.take()
        if counts is None:
            return None
        msg_id = f"live|{counts.model}|{self.source}|{counts.since.isoformat()}"[:256]
        try:
            js = nc.jetstream(timeout=timeout_s)
            await js.publish(subjects.live(counts.model), _encoder.encode(counts), headers={"Nats-Msg-Id": msg_id})
        except BaseException:
            self.dropped(counts)
            raise
        return counts


def _printable(key: str) -> bool:
    return bool(key) and all(" " <= c <= "~" and c not in '"\\' for c in key)
