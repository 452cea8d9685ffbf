"""Discovery's core: the cycle clock and the plan of one cycle.

What lives here: which probes each provider gets in a cycle -- every
configured kind, the language rotation, retests the judge asked for, and the
positive controls.  It knows nothing of NATS, HTTP or the wall clock: the
shell passes the cycle number, its start and the listed endpoints.

Rules (DESIGN.md, contract 4 and "Services and the flow of data"):

- Cycles start at multiples of ``cycle_interval_s`` (UTC epoch); a cycle's
  deadline is ``probe_window_s`` after its start.
- The language probe covers ``languages_per_cycle`` languages per provider per
  cycle, rotating through all configured languages, offset per provider so the
  fleet covers more languages each cycle; a language with an anomaly is probed
  again next cycle whatever the rotation says (the judge's RetestRequested),
  at most ``max_retests`` of them per provider per cycle: when more are asked
  for (a provider failing in many languages keeps asking for each), they take
  turns in the configured language order, starting at an offset that moves
  with the cycle number, and the service carries the ones left waiting to the
  next cycle, so every one is probed again and the load stays bounded.
- A positive control (``controls``: kind -> provider tag) is probed only with
  its kind and is not a production host; a control that is not listed by the
  gateway this cycle is skipped.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone

import msgspec

from reverie_canary.services.prober.prompts import PROMPT_VERSION
from reverie_canary.shared import ids
from reverie_canary.shared.bounds import MESSAGE_MAX_BYTES
from reverie_canary.shared.events import MAX_ENDPOINTS_PER_MODEL, Endpoint, EndpointsDiscovered, PlannedProbe, ProbeTask

#: Kinds whose prompt is written in the rotation's first language; the others use English.
ROTATED_KINDS = frozenset({"ttft", "refusal"})


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
    languages_per_cycle: int,
    controls: dict[str, str],
    retests: Iterable[tuple[str, str]] = (),
    max_retests: int = 2,
) -> tuple[EndpointsDiscovered, list[ProbeTask]]:
    """Plan one cycle of one model.

    Args:
        model: model id.
        cycle_no: the cycle number; ``start`` its UTC start.
        window_s: seconds from start to the deadline.
        endpoints: what the gateway listed.
        kinds: probe kinds to run on every production host.
        languages, languages_per_cycle: the language rotation.
        controls: probe kind -> positive-control provider tag.
        retests: ``(provider, language)`` pairs the judge asked to probe again.
        max_retests: at most this many of them per provider (see the rules above).

    Returns:
        The EndpointsDiscovered event (with the full plan; ``listed`` the
        endpoints the gateway listed, of which at most ``MAX_ENDPOINTS_PER_MODEL``
        are watched, :func:`watched`) and its ProbeTasks.  :func:`split` makes
        the parts that each fit one message.
    """
    kinds = [k for k in kinds]
    listed = len(endpoints)
    endpoints = watched(endpoints, controls)
    cycle = ids.cycle_id(model, start)
    deadline = start + timedelta(seconds=window_s)
    by_tag = {e.provider: e for e in endpoints}
    control_tags = {tag for tag in controls.values()}
    retest_map = _retests_asked(retests, languages)

    planned: list[PlannedProbe] = []
    tasks: list[ProbeTask] = []

    def add(endpoint: Endpoint, kind: str, language: str, control: bool) -> None:
        task_id = ids.task_id(model, cycle_no, endpoint.provider, kind, language)
        planned.append(PlannedProbe(task_id=task_id, provider=endpoint.provider, kind=kind,  # type: ignore[arg-type]
                                    language=language, control=control))
        tasks.append(ProbeTask(
            at=start, task_id=task_id, model=model, provider=endpoint.provider,
            provider_name=endpoint.provider_name, kind=kind, language=language,  # type: ignore[arg-type]
            cycle=cycle, deadline=deadline, supported_parameters=list(endpoint.supported_parameters),
            max_completion_tokens=endpoint.max_completion_tokens, control=control,
            prompt_version=PROMPT_VERSION,
        ))

    for endpoint in sorted(endpoints, key=lambda e: e.provider):
        if endpoint.provider in control_tags:
            continue
        langs = rotation(languages, languages_per_cycle, cycle_no, endpoint.provider)
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
        listed=listed,
    )
    return event, tasks


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
    """``event`` as parts that each encode to at most ``budget`` bytes (DESIGN.md, "Bounds").

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
    endpoints, planned, size = [], [], shell
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
