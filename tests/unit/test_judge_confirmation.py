"""A confirmation probe's result is a fact for operators: it never enters a verdict or a streak."""

from __future__ import annotations

from datetime import timedelta

import msgspec

from reverie_canary.services.judge.core import Folder, Policy, confirmation_of, decide, fold, initial
from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract.events import (
    CycleVerdict,
    Decision,
    LiveConfirmation,
    LiveEvidence,
    ProbeResult,
)
from tests.judge_events import CYCLE, MODEL, T0, cycle_events, healthy

ENFORCE = Policy(mode="enforce")
FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8", "e/fp8")
LIVE = LiveEvidence(reason="leading_junk", key="A", count=9, served=40, share=0.225, median=0.0, threshold=0.06,
                    peers=5, window_s=600.0, number=1)


def confirmation(n: int, provider: str, outcome: str, reason: str = "", *, cycle: str | None = None) -> ProbeResult:
    """A confirmation probe's result sent during cycle ``n`` (by default with the confirmation's own cycle id)."""
    return ProbeResult(at=T0 + n * CYCLE + timedelta(minutes=3), task_id=ids.confirm_task_id(MODEL, n, provider, "ttft", 1),
                       model=MODEL, provider=provider, kind="ttft", language="en",
                       cycle=cycle or ids.confirm_cycle(MODEL, n), outcome=outcome, reason=reason,  # type: ignore[arg-type]
                       confirms=LIVE)


def bad(provider: str) -> dict:
    out = healthy(*FLEET)
    out[provider]["ttft"] = ("fail", "ttft_exceeded")
    return out


def with_result(events: list, result: ProbeResult) -> list:
    """The cycle's events with ``result`` just before its close."""
    return [*events[:-1], result, events[-1]]


def test_a_failed_confirmation_is_confirmed_and_nothing_else():
    """A failing confirmation probe gives one LiveConfirmation ``confirmed``; state and streaks stay as they were."""
    state = initial(MODEL)
    result = confirmation(0, "a/fp8", "fail", "leading_junk")
    new, effects = decide(state, result, ENFORCE)
    assert new is state
    assert effects == [LiveConfirmation(at=result.at, model=MODEL, provider="a/fp8", task_id=result.task_id,
                                        kind="ttft", cycle=result.cycle, outcome="confirmed", probe_outcome="fail",
                                        probe_reason="leading_junk", live=LIVE)]


def test_outcomes_map_to_confirmed_not_reproduced_inconclusive():
    """fail -> confirmed, pass -> not_reproduced, anything else -> inconclusive; a planned result -> none."""
    said = {o: confirmation_of(confirmation(0, "a/fp8", o)).outcome  # type: ignore[union-attr]
            for o in ("fail", "pass", "transport_error", "inconclusive", "not_applicable", "blind")}
    assert said == {"fail": "confirmed", "pass": "not_reproduced", "transport_error": "inconclusive",
                    "inconclusive": "inconclusive", "not_applicable": "inconclusive", "blind": "inconclusive"}
    planned = msgspec.structs.replace(confirmation(0, "a/fp8", "fail"), confirms=None)
    assert confirmation_of(planned) is None


def test_a_failed_confirmation_changes_no_verdict_and_no_streak():
    """Two cycles a provider passes, each with a failed confirmation of it (in the cycle's own id too): passed twice,
    no decision, a passed streak of 2 -- the same states and verdicts as without the confirmations."""
    with_confirms = []
    without = []
    for n in range(2):
        events = cycle_events(n, healthy(*FLEET))
        cycle = events[0].cycle
        # one with its own cycle id, one forged into the open cycle's id: neither is planned there
        with_confirms += with_result(with_result(events, confirmation(n, "a/fp8", "fail", "leading_junk")),
                                     confirmation(n, "a/fp8", "fail", "leading_junk", cycle=cycle))
        without += events
    states, effects = fold(with_confirms, ENFORCE)
    states_without, effects_without = fold(without, ENFORCE)
    assert states == states_without
    assert [e for e in effects if not isinstance(e, LiveConfirmation)] == effects_without
    assert [e.outcome for e in effects if isinstance(e, LiveConfirmation)] == ["confirmed"] * 4
    verdicts = [v.verdict for e in effects if isinstance(e, CycleVerdict) for v in e.verdicts if v.provider == "a/fp8"]
    assert verdicts == ["passed", "passed"]
    assert states[MODEL].providers["a/fp8"].passed_streak == 2
    assert not [e for e in effects if isinstance(e, Decision)]


def test_a_passed_confirmation_does_not_break_a_failed_streak():
    """Failing cycles suspend at the second as always: a passing confirmation between them resets nothing."""
    events = cycle_events(0, bad("a/fp8")) + [confirmation(0, "a/fp8", "pass")] + cycle_events(1, bad("a/fp8"))
    _, effects = fold(events, ENFORCE)
    assert [d.provider for d in effects if isinstance(d, Decision) and d.action == "suspend"] == ["a/fp8"]
    assert [e.outcome for e in effects if isinstance(e, LiveConfirmation)] == ["not_reproduced"]


def test_the_folder_says_the_same_as_decide():
    """The judge service's in-place fold gives the same fact and leaves the state as decide does."""
    events = [*cycle_events(0, healthy(*FLEET))[:-1], confirmation(0, "b/fp8", "fail", "leading_junk")]
    folder = Folder(ENFORCE)
    made = [e for ev in events for e in folder.apply(MODEL, ev)]
    states, effects = fold(events, ENFORCE)
    assert made == effects
    assert folder.state(MODEL) == states[MODEL]
