"""Discovery's core: the cycle clock and the plan of one cycle.

What lives here: which probes each provider gets in a cycle -- every
configured kind, the language rotation, retests the judge asked for, and the
positive controls.  It knows nothing of NATS, HTTP or the wall clock: the
shell passes the cycle number, its start and the listed endpoints.

Rules (docs/concepts/probes.md, the language contract and "Services and the flow of data"):

- Cycles start at multiples of ``cycle_interval_s`` (UTC epoch); a cycle's
  deadline is ``probe_window_s`` after its start.
- Time to detect a one-language defect is bounded: every language of
  every provider is probed at least once in every ``language_coverage_cycles``
  consecutive cycles (default 4).  The language probes per provider per cycle
  follow from it: ``ceil(languages / language_coverage_cycles)`` (17 languages
  in 4 cycles: 5 a cycle), or ``languages_per_cycle`` when that is set higher
  (:func:`coverage`).  They walk a rotation through all configured languages,
  offset per provider so the fleet covers more languages each cycle.  With
  ``language_weights`` (each language's share of traffic) the rotation keeps
  the minimum the bound needs and the probes above it go to languages drawn by
  weight (:func:`languages_for`), so a language with more traffic is probed
  more often and none less often than the bound.  A language with an anomaly is probed
  again next cycle whatever the rotation says (the judge's RetestRequested),
  at most ``max_retests`` of them per provider per cycle: when more are asked
  for (a provider failing in many languages keeps asking for each), they take
  turns in the configured language order, starting at an offset that moves
  with the cycle number, and the service carries the ones left waiting to the
  next cycle, so every one is probed again and the load stays bounded.
- A kind with variants (``KIND_VARIANTS``: the tool probe's streamed and
  unstreamed call, no-tool question and second turn) is one task per variant,
  every cycle, all in the rotation's language; an endpoint whose listing does
  not declare every parameter the kind sends (``PROBE_PARAMETERS``: ``tools``
  and ``tool_choice``) gets one task without a variant instead, which the
  prober answers ``not_applicable`` without a request (docs/concepts/probes.md, the tool-call contract:
  only endpoints that advertise tools are probed).
- A positive control (``controls``: kind -> provider tag) is probed only with
  its kind and is not a production host; a control that is not listed by the
  gateway this cycle is skipped.
- The listing is read one endpoint at a time
  (:mod:`reverie_canary.shared.runtime.listing`): the entries it could not use
  are named in the plan (``EndpointsDiscovered.dropped``, at most
  ``MAX_DROPPED``, the rest counted), the others are planned as usual.  An
  endpoint the gateway itself marks degraded (``status`` below 0) is probed
  like any other: the gateway's mark is shown beside the canary's verdict
  (:func:`listing_facts`), never taken for it.
- Each task names the other watched endpoints whose ``provider_name`` is its
  own (``ProbeTask.same_name``: ``fireworks/fast`` beside ``fireworks``), so
  that the pin check says it can prove the provider that served a reply, not
  which of its endpoints did.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone

import msgspec

from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract.bounds import MESSAGE_MAX_BYTES
from reverie_canary.shared.contract.events import (
    MAX_DROPPED,
    MAX_ENDPOINTS_PER_MODEL,
    MAX_SAME_NAME,
    PROMPT_VERSION,
    DroppedEndpoint,
    Endpoint,
    EndpointsDiscovered,
    PlannedProbe,
    ProbeTask,
    variants_of,
)
from reverie_canary.shared.contract.languages import DEFAULT_COVERAGE_CYCLES, Coverage, coverage
from reverie_canary.shared.contract.languages import (
    CoverageError as CoverageError,  # the planner's refusal, said here too
)
from reverie_canary.shared.contract.listing import ListingFacts as ListingFacts  # noqa: F401 (read here too)
from reverie_canary.shared.contract.listing import facts_lines as facts_lines  # noqa: F401
from reverie_canary.shared.contract.listing import listing_facts as listing_facts  # noqa: F401

#: Kinds whose prompt is written in the rotation's first language; the others use English.
ROTATED_KINDS = frozenset({"ttft", "refusal", "tools"})


def languages_for(languages: list[str], cov: Coverage, cycle_no: int, provider: str,
                  weights: Mapping[str, float] | None = None) -> list[str]:
    """The languages ``provider`` is probed in during cycle ``cycle_no`` (retests apart).

    The first ``cov.rotated`` walk the :func:`rotation`, which alone keeps the
    bound (any ``cov.bound_cycles`` consecutive cycles see every language).
    The others, ``cov.per_cycle - cov.rotated``, are drawn among the remaining
    languages with probability by weight, without replacement (Efraimidis and
    Spirakis, "Weighted random sampling with a reservoir", 2006: the largest
    ``u ** (1 / w)``), with ``u`` from a hash of provider, cycle and language,
    so that the draw is deterministic; languages without weight fill up in
    rotation order when fewer have one.

    Returns:
        ``cov.per_cycle`` distinct languages, the rotation's first.
    """
    chosen = rotation(languages, cov.rotated, cycle_no, provider)
    extra = cov.per_cycle - len(chosen)
    if extra <= 0 or not languages:
        return chosen
    taken = set(chosen)
    weights = weights or {}
    keyed = []
    for lang in languages:
        w = weights.get(lang, 0.0)
        if lang in taken or w <= 0:
            continue
        digest = hashlib.blake2b(f"{provider}\n{cycle_no}\n{lang}".encode(), digest_size=8).digest()
        u = (int.from_bytes(digest, "big") + 1) / (2 ** 64 + 1)  # in (0, 1)
        keyed.append((math.log(u) / w, lang))
    keyed.sort(reverse=True)
    drawn = [lang for _, lang in keyed[:extra]]
    if len(drawn) < extra:  # fewer weighted languages left than probes: the rotation's next ones
        n = len(languages)
        start = languages.index(chosen[-1]) + 1 if chosen else 0
        for i in range(n):
            lang = languages[(start + i) % n]
            if len(drawn) >= extra:
                break
            if lang not in taken and lang not in drawn:
                drawn.append(lang)
    return chosen + drawn


def cycle_start(cycle_no: int, interval_s: float) -> datetime:
    """UTC start of cycle ``cycle_no`` (cycles start at multiples of the interval)."""
    return datetime.fromtimestamp(cycle_no * interval_s, tz=timezone.utc)


def rotation(languages: list[str], per_cycle: int, cycle_no: int, provider: str) -> list[str]:
    """The languages ``provider`` is probed in during cycle ``cycle_no``.

    Deterministic: a provider-specific offset (CRC-32 of the tag) plus
    ``per_cycle`` steps per cycle walks through every language in
    ``ceil(len / per_cycle)`` cycles.
    """
    if not languages:
        return []
    n = len(languages)
    k = max(1, min(per_cycle, n))
    offset = zlib.crc32(provider.encode("utf-8")) % n
    start = (offset + cycle_no * k) % n
    return [languages[(start + i) % n] for i in range(k)]


def plan(
    *,
    model: str,
    cycle_no: int,
    start: datetime,
    window_s: float,
    endpoints: list[Endpoint],
    kinds: Iterable[str],
    languages: list[str],
    controls: dict[str, str],
    languages_per_cycle: int = 0,
    language_coverage_cycles: int = DEFAULT_COVERAGE_CYCLES,
    language_weights: Mapping[str, float] | None = None,
    retests: Iterable[tuple[str, str]] = (),
    max_retests: int = 2,
    dropped: Sequence[DroppedEndpoint] = (),
) -> tuple[EndpointsDiscovered, list[ProbeTask]]:
    """Plan one cycle of one model.

    Args:
        model: model id.
        cycle_no: the cycle number; ``start`` its UTC start.
        window_s: seconds from start to the deadline.
        endpoints: what the gateway listed.
        kinds: probe kinds to run on every production host.
        languages: the configured languages, in rotation order.
        languages_per_cycle, language_coverage_cycles, language_weights: the
            spread of the language probes (:func:`coverage`, :func:`languages_for`).
        controls: probe kind -> positive-control provider tag.
        retests: ``(provider, language)`` pairs the judge asked to probe again.
        max_retests: at most this many of them per provider (see the rules above).
        dropped: the entries of the listing that could not be used (named in the
            event, at most ``MAX_DROPPED``; ``dropped_cut`` counts the rest).

    Raises:
        CoverageError: the language settings cannot keep the bound (:func:`coverage`).

    Returns:
        The EndpointsDiscovered event (with the full plan and the coverage it keeps; ``listed`` the
        endpoints the gateway listed, of which at most ``MAX_ENDPOINTS_PER_MODEL``
        are watched, :func:`watched`) and its ProbeTasks.  :func:`split` makes
        the parts that each fit one message.
    """
    kinds = list(kinds)
    weights = {lang: w for lang, w in (language_weights or {}).items() if lang in languages and w > 0}
    cov = coverage(len(languages), language_coverage_cycles, languages_per_cycle, weighted=bool(weights))
    listed = len(endpoints)
    endpoints = watched(endpoints, controls)
    cycle = ids.cycle_id(model, start)
    deadline = start + timedelta(seconds=window_s)
    by_tag = {e.provider: e for e in endpoints}
    control_tags = set(controls.values())
    retest_map = _retests_asked(retests, languages)
    same_name = same_names(endpoints)

    planned: list[PlannedProbe] = []
    tasks: list[ProbeTask] = []

    def add(endpoint: Endpoint, kind: str, language: str, control: bool) -> None:
        for variant in variants_of(kind, endpoint.supported_parameters):
            task_id = ids.task_id(model, cycle_no, endpoint.provider, kind, language, variant)
            planned.append(PlannedProbe(task_id=task_id, provider=endpoint.provider, kind=kind,  # type: ignore[arg-type]
                                        language=language, control=control, variant=variant))
            tasks.append(ProbeTask(
                at=start, task_id=task_id, model=model, provider=endpoint.provider,
                provider_name=endpoint.provider_name, kind=kind, language=language,  # type: ignore[arg-type]
                cycle=cycle, deadline=deadline, supported_parameters=list(endpoint.supported_parameters),
                max_completion_tokens=endpoint.max_completion_tokens, control=control,
                prompt_version=PROMPT_VERSION, same_name=same_name.get(endpoint.provider, []), variant=variant,
            ))

    for endpoint in sorted(endpoints, key=lambda e: e.provider):
        if endpoint.provider in control_tags:
            continue
        langs = languages_for(languages, cov, cycle_no, endpoint.provider, weights)
        for kind in kinds:
            if kind == "language":
                extra = [lang for lang in retest_map.get(endpoint.provider, []) if lang not in langs]
                chosen = list(langs) + _take_turns(extra, max_retests, cycle_no)
                for language in chosen:
                    add(endpoint, kind, language, False)
            elif kind in ROTATED_KINDS:
                add(endpoint, kind, langs[0] if langs else "en", False)
            else:
                add(endpoint, kind, "en", False)

    used_controls: dict[str, str] = {}
    for kind in kinds:
        tag = controls.get(kind)
        if tag and tag in by_tag:
            langs = rotation(languages, 1, cycle_no, tag)
            add(by_tag[tag], kind, langs[0] if (langs and kind in ROTATED_KINDS | {"language"}) else "en", True)
            used_controls[kind] = tag

    # longest first (the language probe may take three tries), so that one prober's queue does
    # not end the window on them; stable, so providers keep their order within a kind
    tasks.sort(key=lambda t: t.kind != "language")
    order = {t.task_id: i for i, t in enumerate(tasks)}
    planned.sort(key=lambda p: order[p.task_id])

    event = EndpointsDiscovered(
        at=start, model=model, cycle=cycle, cycle_no=cycle_no, deadline=deadline,
        endpoints=sorted(endpoints, key=lambda e: e.provider), planned=planned, controls=used_controls,
        listed=listed, language_coverage_cycles=cov.bound_cycles if "language" in kinds else 0,
        languages_per_cycle=cov.per_cycle if "language" in kinds else 0,
        dropped=list(dropped[:MAX_DROPPED]), dropped_cut=max(0, len(dropped) - MAX_DROPPED),
    )
    return event, tasks


def same_names(endpoints: Iterable[Endpoint]) -> dict[str, list[str]]:
    """Per endpoint tag, the other endpoints listed with the same ``provider_name`` (case and spaces aside).

    The gateway names the provider that served a reply by display name only
    (OpenRouter's streaming documentation), so the pin check cannot tell these apart:
    ``fireworks`` and ``fireworks/fast`` are both ``Fireworks``.  At most
    ``MAX_SAME_NAME`` others per endpoint, by tag; an endpoint without a name
    or alone with its name is not in the result.
    """
    by_name: dict[str, list[str]] = {}
    for e in endpoints:
        key = " ".join(e.provider_name.split()).lower()
        if key:
            by_name.setdefault(key, []).append(e.provider)
    out: dict[str, list[str]] = {}
    for tags in by_name.values():
        if len(tags) > 1:
            for tag in tags:
                out[tag] = sorted(t for t in set(tags) if t != tag)[:MAX_SAME_NAME]
    return out


def watched(endpoints: list[Endpoint], controls: dict[str, str]) -> list[Endpoint]:
    """The endpoints the cycle watches: all, up to ``MAX_ENDPOINTS_PER_MODEL`` (controls first, then by tag).

    A listing is also deduplicated by tag (the first one listed is kept), so a
    gateway that repeats an endpoint does not plan its probes twice.
    """
    unique: dict[str, Endpoint] = {}
    for e in endpoints:
        unique.setdefault(e.provider, e)
    control_tags = set(controls.values())
    ranked = sorted(unique.values(), key=lambda e: (e.provider not in control_tags, e.provider))
    return ranked[:MAX_ENDPOINTS_PER_MODEL]


def split(event: EndpointsDiscovered, budget: int = MESSAGE_MAX_BYTES) -> list[EndpointsDiscovered]:
    """``event`` as parts that each encode to at most ``budget`` bytes (docs/concepts/messages.md, "Bounds").

    A model's listing fits one message up to a few hundred endpoints; past the
    budget its endpoints, each with the probes planned for it, are packed in
    tag order into parts ``0 .. parts - 1`` that repeat the cycle's fields and
    controls.  Readers merge the parts of a cycle (the judge's open cycle, the
    router's known endpoints); a small model keeps its single message
    (``part`` 0 of 1), byte for byte as before.

    Raises:
        ValueError: when one endpoint with its planned probes alone is above ``budget``.
    """
    encode = msgspec.json.encode
    if len(encode(event)) <= budget:
        return [event]
    by_provider: dict[str, list[PlannedProbe]] = {}
    for probe in event.planned:
        by_provider.setdefault(probe.provider, []).append(probe)
    shell = len(encode(msgspec.structs.replace(event, endpoints=[], planned=[], part=MAX_ENDPOINTS_PER_MODEL - 1,
                                               parts=MAX_ENDPOINTS_PER_MODEL)))
    units: list[tuple[list[Endpoint], list[PlannedProbe]]] = []
    for endpoint in sorted(event.endpoints, key=lambda e: e.provider):
        units.append(([endpoint], by_provider.pop(endpoint.provider, [])))
    units.extend(([], [p]) for probes in by_provider.values() for p in probes)  # planned for no listed endpoint
    groups: list[tuple[list[Endpoint], list[PlannedProbe]]] = []
    endpoints: list[Endpoint] = []
    planned: list[PlannedProbe] = []
    size = shell
    for eps, probes in units:
        cost = sum(len(encode(e)) + 1 for e in eps) + sum(len(encode(p)) + 1 for p in probes)
        if shell + cost > budget:
            raise ValueError(f"endpoint {eps[0].provider if eps else '?'} of {event.model} with its {len(probes)} "
                             f"probes is {cost} bytes: above the bound of {budget} for one message")
        if (endpoints or planned) and size + cost > budget:
            groups.append((endpoints, planned))
            endpoints, planned, size = [], [], shell
        endpoints.extend(eps)
        planned.extend(probes)
        size += cost
    if endpoints or planned:
        groups.append((endpoints, planned))
    return [msgspec.structs.replace(event, endpoints=eps, planned=probes, part=i, parts=len(groups))
            for i, (eps, probes) in enumerate(groups)]


def _retests_asked(retests: Iterable[tuple[str, str]], languages: list[str]) -> dict[str, list[str]]:
    """Per provider, the retest languages asked for, in the configured language order."""
    asked: dict[str, set[str]] = {}
    for provider, language in retests:
        if language in languages:
            asked.setdefault(provider, set()).add(language)
    return {provider: [lang for lang in languages if lang in wanted] for provider, wanted in asked.items()}


def _take_turns(items: list[str], k: int, cycle_no: int) -> list[str]:
    """At most ``k`` of ``items``: a window that moves ``k`` places a cycle, so each has its turn
    within ``ceil(len(items) / k)`` consecutive cycles when the same items are asked for."""
    if len(items) <= k:
        return items
    start = (cycle_no * k) % len(items)
    return (items[start:] + items[:start])[:k]
