"""Builders of judge input events for tests: cycles of a model with chosen outcomes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from reverie_canary.shared.contract import codec, ids, subjects
from reverie_canary.shared.contract.events import (
    CycleClosed,
    Endpoint,
    EndpointsDiscovered,
    PlannedProbe,
    ProbeResult,
    ReplyEvidence,
)

MODEL = "acme/chat-1"
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
CYCLE = timedelta(minutes=30)
WINDOW = timedelta(minutes=10)


def cycle_events(
    n: int,
    outcomes: dict[str, dict[str, str | tuple[str, str]]],
    *,
    model: str = MODEL,
    start: datetime | None = None,
    controls: dict[str, dict[str, str]] | None = None,
    missing: set[tuple[str, str]] = frozenset(),
    extra_endpoints: tuple[str, ...] = (),
    numbers: dict[str, dict[str, dict]] | None = None,
    languages: dict[str, str] | None = None,
) -> list:
    """Events of cycle ``n``: discovery, one result per (provider, kind), close.

    Args:
        n: cycle number; the cycle starts at ``T0 + n * 30 min`` unless ``start`` is given.
        outcomes: provider -> kind -> outcome, or ``(outcome, reason)``; a kind written
            ``tools:call_stream`` is that kind's variant (its own task).
        controls: control provider -> kind -> outcome.
        missing: (provider, kind) pairs planned but never answered.
        extra_endpoints: listed endpoints that get no probes.
        numbers: provider -> kind -> the reply's numbers (``prompt_tokens``, ``completion_tokens``,
            ``ttft_ms``): those results carry them in ``reply`` (``usage``, ``ttft_ms``), with
            ``max_tokens`` 320 and prompt version ``p1``.
        languages: provider -> the language of its language probe (default ``pt``).
    """
    start = start or T0 + n * CYCLE
    cycle = ids.cycle_id(model, start)
    controls = controls or {}
    planned: list[PlannedProbe] = []
    results: list[ProbeResult] = []
    at = start + timedelta(minutes=1)
    for group, is_control in ((outcomes, False), (controls, True)):
        for provider, kinds in sorted(group.items()):
            for key, value in sorted(kinds.items()):
                outcome, reason = (value, "") if isinstance(value, str) else value
                kind, _, variant = key.partition(":")
                language = (languages or {}).get(provider, "pt") if kind == "language" else "en"
                task = ids.task_id(model, n, provider, kind, language, variant)
                planned.append(PlannedProbe(task_id=task, provider=provider, kind=kind, language=language,
                                            control=is_control, variant=variant))
                if (provider, key) in missing:
                    continue
                at += timedelta(seconds=1)
                given = (numbers or {}).get(provider, {}).get(key)
                extra: dict = {}
                if given is not None:
                    usage = {k: given[k] for k in ("prompt_tokens", "completion_tokens") if k in given}
                    extra = {"reply": ReplyEvidence(ttft_ms=given.get("ttft_ms"), usage=usage),
                             "max_tokens": 320, "prompt_version": "p1"}
                results.append(ProbeResult(at=at, task_id=task, model=model, provider=provider, kind=kind,
                                           language=language, cycle=cycle, outcome=outcome, reason=reason,
                                           control=is_control, variant=variant, **extra))
    endpoints = [Endpoint(provider=p, provider_name=p.title()) for p in sorted({*outcomes, *controls, *extra_endpoints})]
    control_map = {kind.partition(":")[0]: provider for provider, kinds in controls.items() for kind in kinds}
    discovered = EndpointsDiscovered(at=start, model=model, cycle=cycle, cycle_no=n, deadline=start + WINDOW,
                                     endpoints=endpoints, planned=planned, controls=control_map)
    closed = CycleClosed(at=start + WINDOW, model=model, cycle=cycle, cycle_no=n)
    return [discovered, *results, closed]


def healthy(*providers: str, kinds: tuple[str, ...] = ("ttft", "structured")) -> dict[str, dict[str, str]]:
    """Every provider passes every kind."""
    return {p: dict.fromkeys(kinds, "pass") for p in providers}


async def publish_events(js, events) -> None:
    """Publish discovery events and results on the subjects, with the ``Nats-Msg-Id`` headers the services use.

    Args:
        js: a JetStream context allowed to publish there (admin in the secured tests).
        events: :func:`cycle_events` output (EndpointsDiscovered, ProbeResult, CycleClosed).
    """
    for ev in events:
        if isinstance(ev, ProbeResult):
            subject, msg_id = subjects.result(ev.model, ev.provider), ev.task_id
        elif isinstance(ev, EndpointsDiscovered):
            subject, msg_id = subjects.discovery(ev.model), ids.discovered_id(ev.model, ev.cycle_no)
        else:
            subject, msg_id = subjects.discovery(ev.model), ids.closed_id(ev.model, ev.cycle_no)
        await js.publish(subject, codec.encode(ev), headers={"Nats-Msg-Id": msg_id})
