"""One notice per confirmation probe's answer to live failures: confirmed, not reproduced or inconclusive."""

from __future__ import annotations

from datetime import datetime, timezone

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


def fact(outcome: str, probe_outcome: str, probe_reason: str = "") -> LiveConfirmation:
    return LiveConfirmation(at=AT, model="m/x", provider="acme/fp8", task_id="confirm|m/x|7|acme/fp8|ttft|1",
                            kind="ttft", cycle="confirm|m/x|7", outcome=outcome,  # type: ignore[arg-type]
                            probe_outcome=probe_outcome, probe_reason=probe_reason, live=LIVE)  # type: ignore[arg-type]


def test_a_confirmed_failure_is_one_warning_that_names_provider_reason_and_shares():
    """'live failures on P confirmed by a pinned probe', with the live share against the peers' median."""
    state, [notice] = fold(FoldState(), fact("confirmed", "fail", "leading_junk"), FoldPolicy())
    assert state == FoldState()
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
