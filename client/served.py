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

