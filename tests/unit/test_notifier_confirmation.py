"""One notice per confirmation probe's answer to live failures: confirmed, not reproduced or inconclusive."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import msgspec

from reverie_canary.services.notifier.core import (
    SEVERITY,
    FoldPolicy,
    FoldState,
    confirmation_notice,
    fold,
    label,
)
from reverie_canary.shared.contract.events import LiveConfirmation, LiveEvidence

AT = datetime(2026, 11, 1, 0, 3, tzinfo=timezone.utc)
LIVE = LiveEvidence(reason="leading_junk", key="Acme", count=9, served=40, share=0.225, median=0.01, threshold=0.07,
                    peers=5, window_s=600.0, number=1)


def fact(outcome: str, probe_outcome: str, probe_reason: str = "", *, at: datetime = AT,
         n: int = 1) -> LiveConfirmation:
    return LiveConfirmation(at=at, model="m/x", provider="acme/fp8", task_id=f"confirm|m/x|{6 + n}|acme/fp8|ttft|1",
                            kind="ttft", cycle="confirm|m/x|7", outcome=outcome,  # type: ignore[arg-type]
                            probe_outcome=probe_outcome, probe_reason=probe_reason, live=LIVE)  # type: ignore[arg-type]


def test_a_confirmed_failure_is_one_warning_that_names_provider_reason_and_shares():
    """'live failures on P confirmed by a pinned probe', with the live share against the peers' median."""
    state, [notice] = fold(FoldState(), fact("confirmed", "fail", "leading_junk"), FoldPolicy())
    assert [(k, t.outcome) for k, t in state.confirmations.items()] == [("m/x|acme/fp8|leading_junk", "confirmed")]
    assert notice.notice_id == "confirmation|confirm|m/x|7|acme/fp8|ttft|1"
    assert (notice.severity, label(notice), notice.provider, notice.reason) == \
        ("warning", "live_confirmed", "acme/fp8", "leading_junk")
    assert notice.title == "[m/x] live failures on acme/fp8 (leading_junk) confirmed by a pinned probe"
    assert "9 of 40 live replies (22.5%) against a median of 1.0% over 5 providers (threshold 7.0%, last 10 min)" \
        in notice.text
    assert "the ttft probe: fail (leading_junk)" in notice.text
    assert notice.at == AT


def test_not_reproduced_and_inconclusive_are_info():
    """A passing pinned probe is 'not reproduced'; a transport error 'inconclusive'; both info."""
    [quiet] = fold(FoldState(), fact("not_reproduced", "pass"), FoldPolicy())[1]
    [unsure] = fold(FoldState(), fact("inconclusive", "transport_error", "http_503"), FoldPolicy())[1]
    assert (label(quiet), quiet.severity) == ("live_not_reproduced", "info")
    assert quiet.title.endswith("not reproduced by a pinned probe")
    assert (label(unsure), unsure.severity) == ("live_inconclusive", "info")
    assert SEVERITY["live_confirmed"] == "warning"


def test_the_same_fact_twice_is_the_same_notice():
    """A redelivered fact gives the same notice id: the delivery book sends it once."""
    assert confirmation_notice(fact("confirmed", "fail")) == confirmation_notice(fact("confirmed", "fail"))


def test_the_same_answer_asked_again_each_cycle_is_told_once_until_it_changes_or_a_reminder_is_due():
    """Discovery asks again every cycle of a lasting defect: one notice, then one when the answer changes."""
    policy = FoldPolicy(remind_every_s=7200.0)
    state, told = FoldState(), []
    answers = [("confirmed", "fail", 0), ("confirmed", "fail", 30), ("confirmed", "fail", 60),
               ("not_reproduced", "pass", 90), ("not_reproduced", "pass", 120), ("confirmed", "fail", 150),
               ("confirmed", "fail", 150 + 120 + 1)]
    for n, (outcome, probe, minutes) in enumerate(answers, start=1):
        state, notices = fold(state, fact(outcome, probe, at=AT + timedelta(minutes=minutes), n=n), policy)
        told += [(minutes, label(x)) for x in notices]
    assert told == [(0, "live_confirmed"), (90, "live_not_reproduced"), (150, "live_confirmed"),
                    (271, "live_confirmed")]
    # the state survives the store's round trip, and an older state without the field still decodes
    assert msgspec.json.decode(msgspec.json.encode(state), type=FoldState) == state
    assert msgspec.json.decode(b'{"held":{},"closed_at":{},"ignored":{}}', type=FoldState).confirmations == {}
