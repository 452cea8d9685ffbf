"""Read the gateway's endpoints listing permissively: one endpoint at a time.

Pure: bytes in, a :class:`Listing` out; no HTTP, no clock.  The HTTP call is
:func:`reverie_canary.shared.runtime.openrouter.fetch_listing`.

Rules (OpenRouter's endpoints listing API, and real listings captured in public repositories):

- The envelope, ``{"data": {"endpoints": [...]}}``, must have the documented
  shape; a body that does not is refused whole (:class:`ListingUnreadable`,
  the cycle's cause ``listing_unparseable``).
- Each entry of ``endpoints`` is read on its own, so that one bad entry never
  blinds the model.  An entry that cannot be used is dropped and named with
  its reason (:class:`reverie_canary.shared.contract.events.DroppedEndpoint`:
  ``not_an_object``, ``no_tag``, ``bad_tag``, ``duplicate_tag``); the others
  are probed.
- A missing, null or empty ``tag`` (listings before mid-2025 carry none) is
  derived from the entry's ``provider_name``: the display name as a slug
  (``DeepInfra`` -> ``deepinfra``, ``Google AI Studio`` -> ``google-ai-studio``),
  which the gateway's routing takes as "every endpoint of that provider";
  when the listing has another endpoint of the same provider, the quantization
  follows (``deepinfra/bf16``), the form the gateway's tags take.  The derived
  tag says so (``Endpoint.tag_from``).  It is a best guess: a display name
  whose slug differs (``AtlasCloud`` is ``atlas-cloud``) routes nowhere, and its
  probes end in transport errors (the provider is ``frozen``, never
  ``failed``), never in a wrong verdict.  Without a provider name no tag can
  be derived: ``no_tag``.
- A field null where the API documents a value (``provider_name``,
  ``supported_parameters``, ``status``, ``pricing``, ``context_length``), or
  of another type anywhere, is read as absent and named in
  ``Endpoint.unread``; the endpoint is kept.  Null where the API allows it
  (``quantization``, ``max_completion_tokens``) is just absent.
- Bounds: a display name is cut to 128 characters, a model id to 256, a
  quantization to 64; a supported parameter that is not a short token is left
  out (at most 64 are kept); a price that is a JSON number is read as its
  decimal text, an unreadable optional price is left out
  (:func:`listed_pricing`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import msgspec
from msgspec import Struct

from reverie_canary.shared.contract.errors import CanaryError
from reverie_canary.shared.contract.events import DroppedEndpoint, Endpoint, Price, Pricing

#: Bounds of what the listing hands on (the fields of :class:`Endpoint`).
_TOKEN = 64
_PARAMETERS = 64
_NAME = 128
#: The longest slug derived from a display name (a tag is at most 256 characters).
_BASE = 128
#: Integers outside +-2**53 are not read (JSON numbers past it lose precision).
_INT_LIMIT = 2 ** 53
#: Quantization values that say nothing about the endpoint (no suffix to tell two endpoints apart).
_NO_QUANTIZATION = frozenset({"", "unknown"})


class ListingUnreadable(CanaryError, ValueError):
    """The body is not the documented envelope ``{"data": {"endpoints": [...]}}`` (the message says where)."""


class Listing(Struct, frozen=True, kw_only=True):
    """What one endpoints listing gave: the usable endpoints, in listing order, and the entries dropped.

    ``entries`` is how many entries the listing had (usable and dropped).
    """

    model_id: str = ""
    endpoints: list[Endpoint] = []
    dropped: list[DroppedEndpoint] = []
    entries: int = 0


class _Data(Struct, kw_only=True):
    id: str = ""
    endpoints: list[msgspec.Raw] = []


class _Envelope(Struct, kw_only=True):
    data: _Data


_envelope = msgspec.json.Decoder(_Envelope)
_MISSING = object()
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def read_listing(body: bytes) -> Listing:
    """Read an endpoints listing body (see the module's rules).

    Returns:
        The :class:`Listing`: every usable endpoint as an
        :class:`~reverie_canary.shared.contract.events.Endpoint` within its wire
        bounds, and a :class:`~reverie_canary.shared.contract.events.DroppedEndpoint`
        for each entry that could not be used.

    Raises:
        ListingUnreadable: the body is not JSON, or not the documented envelope.
    """
    try:
        envelope = _envelope.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ListingUnreadable(str(exc)) from exc
    entries: list[tuple[int, dict[str, Any]]] = []
    dropped: list[DroppedEndpoint] = []
    for index, raw in enumerate(envelope.data.endpoints):
        entry = msgspec.json.decode(raw)
        if isinstance(entry, dict):
            entries.append((index, entry))
        else:
            dropped.append(DroppedEndpoint(index=index, reason="not_an_object",
                                           detail=f"the entry is a JSON {_json_kind(entry)}, not an object"))
    read = [_Read.of(index, entry) for index, entry in entries]
    _derive_tags(read)
    endpoints: list[Endpoint] = []
    taken: set[str] = set()
    for r in read:
        if r.problem is not None:
            dropped.append(r.drop(*r.problem))
            continue
        assert r.tag is not None
        if r.tag in taken:
            how = "derived" if r.tag_from else "listed"
            dropped.append(r.drop("duplicate_tag", f"its tag {r.tag!r} ({how}) is an earlier entry's: "
                                                   "the first is kept"))
            continue
        endpoint = r.endpoint()
        if endpoint is None:
            dropped.append(r.drop("bad_tag", f"the tag {_printable(r.tag)[:80]!r} is not an identifier: empty, "
                                             "longer than 256, or with a space, a quote or a control character"))
            continue
        taken.add(r.tag)
        endpoints.append(endpoint)
    dropped.sort(key=lambda d: d.index)
    return Listing(model_id=envelope.data.id[:256], endpoints=endpoints, dropped=dropped,
                   entries=len(envelope.data.endpoints))


def slug_of(provider_name: str) -> str:
    """A display name as the gateway's provider slug is usually made: ``Google AI Studio`` -> ``google-ai-studio``.

    Letters and digits (accents taken off), lower case, every other run of
    characters one ``-``; at most 128 characters.  Not every provider's slug
    is made so (``AtlasCloud`` is ``atlas-cloud``): a derived tag is a guess
    and says so (:attr:`Endpoint.tag_from`).
    """
    plain = unicodedata.normalize("NFKD", provider_name).encode("ascii", "ignore").decode("ascii").lower()
    return re.sub(r"[^a-z0-9]+", "-", plain).strip("-")[:_BASE].strip("-")


class _Read:
    """One entry as read: its fields within bounds, what was unread, its tag (listed or derived)."""

    __slots__ = ("index", "name", "tag", "tag_from", "provider_name", "fields", "unread", "problem")

    def __init__(self, index: int) -> None:
        self.index = index
        self.name = ""
        self.tag: str | None = None
        self.tag_from = ""
        self.provider_name = ""
        self.fields: dict[str, Any] = {}
        self.unread: list[str] = []
        self.problem: tuple[str, str] | None = None

    @classmethod
    def of(cls, index: int, entry: dict[str, Any]) -> _Read:
        r = cls(index)
        unread = r.unread
        name = _field(entry, "name", str, unread, nullable=True)
        provider_name = _field(entry, "provider_name", str, unread, nullable=False)
        r.provider_name = _printable(provider_name or "")[:_NAME]
        r.name = _printable(name or provider_name or "")[:_NAME]
        tag = _field(entry, "tag", str, unread, nullable=True)
        r.tag = tag if tag is not None and tag.strip() else None
        params = _field(entry, "supported_parameters", list, unread, nullable=False)
        kept = [p for p in params or () if isinstance(p, str) and 0 < len(p) <= _TOKEN]
        if params is not None and any(not isinstance(p, str) for p in params):
            unread.append("supported_parameters")  # the strings among them are kept
        quantization = _field(entry, "quantization", str, unread, nullable=True)
        raw_pricing = _field(entry, "pricing", dict, unread, nullable=False)
        pricing = listed_pricing(raw_pricing)
        if raw_pricing is not None and pricing is None:
            unread.append("pricing")
        r.fields = {
            "provider_name": r.provider_name,
            "model_id": (_field(entry, "model_id", str, unread, nullable=True) or "")[:256],
            "supported_parameters": kept[:_PARAMETERS],
            "quantization": quantization[:_TOKEN] if quantization is not None else None,
            "context_length": _integer(entry, "context_length", unread, nullable=False),
            "max_completion_tokens": _integer(entry, "max_completion_tokens", unread, nullable=True),
            "status": _integer(entry, "status", unread, nullable=False),
            "pricing": pricing,
        }
        return r

    @property
    def quantization(self) -> str | None:
        return self.fields.get("quantization")

    def drop(self, reason: str, detail: str) -> DroppedEndpoint:
        return DroppedEndpoint(index=self.index, reason=reason, name=self.name, detail=detail[:300])

    def endpoint(self) -> Endpoint | None:
        """The entry as an :class:`Endpoint`, or ``None`` when its tag is not an identifier."""
        try:
            return msgspec.convert(
                {**msgspec.to_builtins(self.fields), "provider": self.tag, "tag_from": self.tag_from,
                 "unread": sorted(set(self.unread))[:16]}, Endpoint)
        except msgspec.ValidationError:
            return None


def _derive_tags(read: list[_Read]) -> None:
    """Give each entry without a tag one derived from its provider name (the module's rules), or a problem."""
    bases: dict[str, int] = {}
    for r in read:
        base = r.tag.split("/", 1)[0].strip().lower() if r.tag is not None else slug_of(r.provider_name)
        if base:
            bases[base] = bases.get(base, 0) + 1
    for r in read:
        if r.tag is not None:
            continue
        base = slug_of(r.provider_name)
        if not base:
            why = "no provider name either" if not r.provider_name else \
                f"its provider name {r.provider_name!r} has no letter or digit to make one of"
            r.problem = ("no_tag", f"the entry has no tag, and {why}: it can be neither pinned nor ignored")
            continue
        quantization = slug_of(r.quantization or "")
        if bases.get(base, 0) > 1 and quantization not in _NO_QUANTIZATION:
            r.tag, r.tag_from = f"{base}/{quantization[:_TOKEN]}", "provider_name+quantization"
        else:
            r.tag, r.tag_from = base, "provider_name"


def _field(entry: dict[str, Any], key: str, kind: type, unread: list[str], *, nullable: bool) -> Any:
    """``entry[key]`` when it is a ``kind``; ``None`` when absent, null or of another type (named in ``unread``
    unless absent, or null where the API allows it)."""
    value = entry.get(key, _MISSING)
    if value is _MISSING:
        return None
    if value is None:
        if not nullable:
            unread.append(key)
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        unread.append(key)
        return None
    return value


def _integer(entry: dict[str, Any], key: str, unread: list[str], *, nullable: bool) -> int | None:
    """An integer field: a JSON integer within +-2**53, or a float with no fraction (``163840.0``)."""
    value = entry.get(key, _MISSING)
    if value is _MISSING:
        return None
    if value is None:
        if not nullable:
            unread.append(key)
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or abs(value) > _INT_LIMIT:
        unread.append(key)
        return None
    return value


def listed_pricing(raw: dict[str, Any] | None) -> Pricing | None:
    """The ``pricing`` object of a listed endpoint as :class:`Pricing` (OpenRouter's endpoints listing API).

    Only ``prompt``, ``completion``, ``request`` and ``discount`` are kept (the
    other prices concern images, audio, web search and caches, which probes do
    not use).  Prices are decimal strings; one written as a JSON number
    (``"request": 0``, seen in real listings) is read as its decimal text.  A
    listing without ``prompt`` and ``completion``, or with one of the four
    that does not read (a word, a discount above 1), gives ``None``: the spend
    of that endpoint is then unpriced, never guessed, and the listing itself
    is still used.
    """
    if not isinstance(raw, dict):
        return None
    kept: dict[str, Any] = {}
    for key in ("prompt", "completion", "request"):
        value = raw.get(key)
        if value is None and key == "request":
            continue
        text = _price_text(value)
        if text is None:
            return None
        kept[key] = text
    discount = raw.get("discount")
    if discount is not None:
        if not isinstance(discount, int | float) or isinstance(discount, bool) or not 0 <= discount <= 1:
            return None
        kept["discount"] = float(discount)
    return Pricing(**kept)


def _price_text(value: Any) -> str | None:
    """A price as the wire's decimal text (a JSON number as its shortest decimal), or ``None`` when it is not one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = repr(value)
    if not isinstance(value, str):
        return None
    try:
        return msgspec.convert(value, Price)
    except msgspec.ValidationError:
        return None


def _printable(text: str) -> str:
    """``text`` without control characters (a name reaches terminals and log lines)."""
    return _CONTROL.sub("", text)


def _json_kind(value: Any) -> str:
    return {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string",
            list: "array"}.get(type(value), type(value).__name__)
