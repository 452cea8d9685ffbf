"""Where operators look: the listing's facts in ``canary status`` and in the demo's printed cycles."""

from __future__ import annotations

import asyncio
import io
from datetime import timedelta
from types import SimpleNamespace

import msgspec

from reverie_canary.canary.cli_status import model_header
from reverie_canary.canary.demo import Observer
from reverie_canary.services.dashboard.core import FleetStatus, LogWindow, fleet_status, model_status
from reverie_canary.services.judge.core import Policy, fold
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.events import (
    CycleVerdict,
    DroppedEndpoint,
    EndpointsDiscovered,
    ProviderVerdict,
)
from tests.judge_events import MODEL, cycle_events, healthy

FLEET = ("a/fp8", "b/fp8", "c/fp8")
POLICY = Policy(mode="enforce", models=(MODEL,))
DROPPED = [DroppedEndpoint(index=3, reason="no_tag", name="Nameless | acme/chat-1",
                           detail="the entry has no tag, and no provider name either")]


def with_listing(events: list, *, status: dict[str, int], dropped=(), same_name: str | None = None) -> list:
    """``events`` whose EndpointsDiscovered lists the given statuses, drops ``dropped`` and, with ``same_name``,
    gives every endpoint that one provider name."""
    out = []
    for e in events:
        if isinstance(e, EndpointsDiscovered):
            endpoints = [msgspec.structs.replace(x, status=status.get(x.provider, 0),
                                                 provider_name=same_name or x.provider_name) for x in e.endpoints]
            e = msgspec.structs.replace(e, endpoints=endpoints, dropped=list(dropped))
        out.append(e)
    return out


def status_of(events: list):
    states: dict = {}
    window = LogWindow()
    for seq, event in enumerate(events, 1):
        window.add(event, seq)
        states, _ = fold([event], POLICY, states)
    return model_status(MODEL, now=max(e.at for e in events) + timedelta(seconds=1), policy=POLICY,
                        kinds=["ttft"], state=states.get(MODEL), snapshot=None, window=window.models.get(MODEL),
                        cycle_interval_s=1800.0)


def test_status_shows_the_gateways_degraded_mark_and_the_dropped_entries():
    """The header says which endpoints the gateway marks degraded and which entries were not probed."""
    events = with_listing(cycle_events(0, healthy(*FLEET)), status={"b/fp8": -2}, dropped=DROPPED)
    status = status_of(events)
    assert status.listing.degraded == {"b/fp8": -2} and status.listing.dropped == DROPPED
    assert {p.provider: p.gateway_status for p in status.providers} == {"a/fp8": 0, "b/fp8": -2, "c/fp8": 0}
    lines = [line.plain for line in model_header(status)]
    assert "listing: 1 entry dropped, not probed: #3 'Nameless | acme/chat-1' no_tag" in lines
    assert ("the gateway itself marks degraded (status below 0), still probed: b/fp8 (status -2)") in lines
    fleet = fleet_status([status], now=status.at, window=None)
    assert msgspec.json.decode(msgspec.json.encode(fleet), type=FleetStatus) == fleet


def test_status_of_a_clean_listing_adds_no_line():
    """Nothing dropped, derived, degraded or shared: the header is as it was."""
    status = status_of(cycle_events(0, healthy(*FLEET)))
    assert not status.listing
    assert not [line.plain for line in model_header(status) if line.plain.startswith(("listing", "the gateway",
                                                                                       "pin check"))]


def _msg(event) -> SimpleNamespace:
    return SimpleNamespace(data=codec.encode(event))


def _close(observer: Observer, events: list, verdicts: dict[str, str]) -> None:
    discovered = next(e for e in events if isinstance(e, EndpointsDiscovered))
    verdict = CycleVerdict(at=discovered.deadline, model=MODEL, cycle=discovered.cycle, cycle_no=discovered.cycle_no,
                           verdicts=[ProviderVerdict(provider=p, verdict=v) for p, v in verdicts.items()])

    async def run() -> None:
        await observer.on_discovery(_msg(discovered))
        await observer.on_verdict(_msg(verdict))

    asyncio.run(run())


def test_the_demo_says_the_listing_facts_when_they_change_and_marks_degraded_rows_every_cycle():
    """Cycle 1 prints the facts, cycle 2 (the same listing) only the row marks, cycle 3 (clean) says it is clean."""
    out = io.StringIO()
    observer = Observer(out, MODEL)
    marked = {"a/fp8": "passed", "b/fp8": "failed"}
    _close(observer, with_listing(cycle_events(0, healthy("a/fp8", "b/fp8")), status={"b/fp8": -5},
                                  dropped=DROPPED, same_name="Acme"), marked)
    first = out.getvalue().splitlines()
    assert "   .. listing: 1 entry dropped, not probed: #3 'Nameless | acme/chat-1' no_tag" in first
    assert ("   .. pin check: the served-by name proves the provider, not which of its endpoints served: "
            "Acme (a/fp8, b/fp8)") in first
    assert any(line.startswith("   b/fp8") and line.endswith("[the gateway marks it degraded: status -5]")
               for line in first)
    assert not any(line.startswith("   a/fp8") and "degraded" in line for line in first)
    _close(observer, with_listing(cycle_events(1, healthy("a/fp8", "b/fp8")), status={"b/fp8": -5},
                                  dropped=DROPPED, same_name="Acme"), marked)
    second = out.getvalue().splitlines()[len(first):]
    assert not [line for line in second if line.startswith("   ..")]
    assert any(line.endswith("[the gateway marks it degraded: status -5]") for line in second)
    _close(observer, cycle_events(2, healthy("a/fp8", "b/fp8")), {"a/fp8": "passed", "b/fp8": "passed"})
    third = out.getvalue().splitlines()[len(first) + len(second):]
    assert [line for line in third if line.startswith("   ..")] == [
        "   .. listing: clean again (every entry read, none marked degraded, no provider name shared)"]
