"""What an operator should know about a listing beyond its endpoints: read from ``EndpointsDiscovered``.

Discovery says these facts when it plans a cycle; the dashboard, ``canary status`` and the demo
show them.  They are a pure read of the wire event's fields, so they live with the contract and
no service reads another's insides for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from reverie_canary.shared.contract.events import DroppedEndpoint, Endpoint, degraded


class ListingFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What an operator should know about one listing beyond its endpoints (:func:`listing_facts`).

    ``dropped`` the entries not used (``dropped_cut`` more than named);
    ``derived`` tag -> where a tag the listing did not carry came from
    (``Endpoint.tag_from``); ``degraded`` tag -> the listed ``status`` below 0
    (the gateway itself marks the endpoint degraded); ``unread`` tag -> fields
    read as absent; ``same_name`` display name -> the tags that share it (the
    pin check proves the provider, not which of these served).
    """

    dropped: list[DroppedEndpoint] = []
    dropped_cut: int = 0
    derived: dict[str, str] = {}
    degraded: dict[str, int] = {}
    unread: dict[str, list[str]] = {}
    same_name: dict[str, list[str]] = {}

    def __bool__(self) -> bool:
        return bool(self.dropped or self.dropped_cut or self.derived or self.degraded or self.unread
                    or self.same_name)


def listing_facts(endpoints: Iterable[Endpoint], dropped: Sequence[DroppedEndpoint] = (),
                  dropped_cut: int = 0) -> ListingFacts:
    """The facts of a listing worth saying (see :class:`ListingFacts`); empty (falsy) for a clean listing."""
    endpoints = sorted(endpoints, key=lambda e: e.provider)
    names: dict[str, tuple[str, list[str]]] = {}
    for e in endpoints:
        key = " ".join(e.provider_name.split()).lower()
        if key:
            names.setdefault(key, (e.provider_name, []))[1].append(e.provider)
    return ListingFacts(
        dropped=sorted(dropped, key=lambda d: d.index), dropped_cut=dropped_cut,
        derived={e.provider: e.tag_from for e in endpoints if e.tag_from},
        degraded={e.provider: e.status for e in endpoints if degraded(e) and e.status is not None},
        unread={e.provider: list(e.unread) for e in endpoints if e.unread},
        same_name={name: tags for name, tags in names.values() if len(tags) > 1},
    )


def facts_lines(facts: ListingFacts) -> list[str]:
    """``facts`` as the lines an operator reads (the demo's cycle, ``canary status``); none for a clean listing."""
    lines = []
    if facts.dropped or facts.dropped_cut:
        named = "; ".join(f"#{d.index}" + (f" {d.name!r}" if d.name else "") + f" {d.reason}"
                          for d in facts.dropped)
        more = f" and {facts.dropped_cut} more" if facts.dropped_cut else ""
        count = len(facts.dropped) + facts.dropped_cut
        lines.append(f"listing: {count} entr{'y' if count == 1 else 'ies'} dropped, not probed: {named}{more}")
    if facts.derived:
        how = {"provider_name": "its provider name",
               "provider_name+quantization": "its provider name and quantization"}
        lines.append("listing: no tag listed, derived from " + "; ".join(
            f"{how.get(source, source)}: {tag}" for tag, source in facts.derived.items()))
    if facts.degraded:
        lines.append("the gateway itself marks degraded (status below 0), still probed: " + ", ".join(
            f"{tag} (status {status})" for tag, status in facts.degraded.items()))
    if facts.unread:
        lines.append("listing: read as absent (null or of another type): " + "; ".join(
            f"{tag} {', '.join(fields)}" for tag, fields in facts.unread.items()))
    if facts.same_name:
        lines.append("pin check: the served-by name proves the provider, not which of its endpoints served: "
                     + "; ".join(f"{name} ({', '.join(tags)})" for name, tags in facts.same_name.items()))
    return lines
