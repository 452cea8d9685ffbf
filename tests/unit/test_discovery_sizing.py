"""Sizing a cycle: the probes in flight follow from the plan, the measured probe times and the window."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import msgspec

from reverie_canary.services.discovery import sizing
from reverie_canary.services.discovery.sizing import KindTime, ProbeTimes, Tally
from reverie_canary.shared.contract import codec

START = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
#: the sizing goal's fleet: 2,000 endpoints, 6 probes each
COUNTS = {"ttft": 2000, "refusal": 2000, "structured": 2000, "echo": 2000, "language": 4000}


def sized(counts=COUNTS, times=None, window_s=600.0, fill_share=0.25, ceiling=64):
    return sizing.size(cycle_no=7, start=START, deadline=START + timedelta(seconds=window_s), models=100,
                       counts=counts, times=times or ProbeTimes(), window_s=window_s, fill_share=fill_share,
                       ceiling=ceiling)


def measured(seconds: dict[str, float], probers: int = 2) -> ProbeTimes:
    return ProbeTimes(kinds={k: KindTime(mean_s=v, samples=100) for k, v in seconds.items()}, probers=probers)


def test_the_issue_fleet_is_sized_to_end_within_a_quarter_of_the_window():
    """12,000 probes of 1.4 s (2.2 s the language ones) on 2 probers: 90 % of 150 s asks for 151 in flight, 76 each."""
    times = measured({"ttft": 1.4, "refusal": 1.4, "structured": 1.4, "echo": 1.4, "language": 2.2})
    e = sized(times=times, ceiling=128)
    assert e.probes == 12000 and e.basis == "measured"
    assert e.work_s == 8000 * 1.4 + 4000 * 2.2 == 20000.0
    assert e.tail_s == 2.2 and e.target_s == 150.0
    assert e.needed == 151  # ceil(20000 / (150 x 0.9 - 2.2))
    assert (e.per_prober, e.in_flight) == (76, 152)
    assert e.expected_wall_s == round(20000 / 152 + 2.2, 1) == 133.8
    assert e.fits


def test_the_ceiling_bounds_each_prober_and_a_plan_past_the_window_does_not_fit():
    times = measured(dict.fromkeys(COUNTS, 3.0), probers=2)
    e = sized(times=times, ceiling=16)  # 36,000 probe-seconds on 32 slots: 1,128 s
    assert (e.per_prober, e.in_flight, e.needed) == (16, 32, 273)
    assert e.expected_wall_s == round(36000 / 32 + 3.0, 1) and e.expected_wall_s > 600
    assert not e.fits
    # one prober more is not enough, enough probers make it fit again (the window, not the target)
    assert not sized(times=measured(dict.fromkeys(COUNTS, 3.0), probers=3), ceiling=16).fits
    assert sized(times=measured(dict.fromkeys(COUNTS, 3.0), probers=4), ceiling=16).fits


def test_a_small_plan_asks_for_few_probes_in_flight():
    """55 probes of about 1 s in a 9 s window (the drills): 54 in flight end them within 90 % of 2.25 s."""
    counts = {"ttft": 11, "refusal": 12, "structured": 11, "echo": 11, "language": 10}
    e = sized(counts=counts, times=measured(dict.fromkeys(counts, 1.0)), window_s=9.0)
    assert e.needed == 54 and e.per_prober == 27  # ceil(55 / (2.25 x 0.9 - 1.0)), split over 2 probers
    assert e.fits


def test_nothing_measured_runs_every_prober_at_its_ceiling_and_is_not_judged():
    e = sized(ceiling=64)
    assert e.basis == "prior" and set(e.probe_s.values()) == {sizing.PRIOR_PROBE_S}
    assert (e.probers, e.per_prober, e.in_flight) == (1, 64, 64)
    assert e.expected_wall_s == round(12000 * 3.0 / 64 + 3.0, 1) == 565.5 and e.fits
    # 1,128 s on one prober of 32 on the prior: a guess of the probe time and of the probers, not told
    assert sized(ceiling=32).expected_wall_s > 600 and sized(ceiling=32).fits
    # a kind not measured yet counts the prior; the others are measured: sized and judged
    partly = sized(times=measured({"ttft": 1.0, "refusal": 1.0, "structured": 1.0, "echo": 1.0}))
    assert partly.basis == "partial" and partly.probe_s["language"] == sizing.PRIOR_PROBE_S
    assert partly.work_s == 8000 * 1.0 + 4000 * 3.0 and partly.needed == 152  # ceil(20000 / (135 - 3))
    assert partly.per_prober == 64  # 76 asked, the ceiling
    assert not sized(times=measured({"ttft": 1.0}, probers=1), ceiling=16).fits


def test_the_tail_longer_than_the_target_asks_for_every_slot():
    e = sized(counts={"language": 10}, times=measured({"language": 20.0}), window_s=60.0)
    assert e.needed == 2 * 64 and e.per_prober == 64


def test_an_empty_plan_asks_for_nothing_and_fits():
    e = sized(counts={}, times=measured({"ttft": 1.0}))
    assert (e.probes, e.needed, e.per_prober, e.in_flight, e.expected_wall_s, e.fits) == (0, 0, 0, 0, 0.0, True)


def test_the_tally_folds_into_a_running_mean_per_kind_and_counts_probers():
    tally = Tally()
    for i in range(10):
        tally.add("ttft", 1.0 + (i % 2), f"p{i % 3}")  # mean 1.5
    tally.add("ttft", -1.0, "p9")  # clock skew: not counted
    tally.add("ttft", 0.0, "p9", outcome="transport_error", reason="task_deadline")  # no request made
    tally.add("ttft", 0.01, "p9", outcome="blind", reason="gateway_auth")  # the canary's own key
    for _ in range(3):
        tally.add("language", 9.0, "p0")  # too few to say
    times = sizing.fold(ProbeTimes(), tally, START)
    assert times.kinds["ttft"].mean_s == 1.5 and times.kinds["ttft"].samples == 10
    assert "language" not in times.kinds and times.probers == 3 and times.at == START
    kept = tally.leftover()  # too few language results: kept for the next cycle's fold
    assert kept.count == {"language": 3} and kept.total_s == {"language": 27.0}
    later = Tally()
    for _ in range(10):
        later.add("ttft", 2.5, "p0")
    again = sizing.fold(times, later, START)
    assert again.kinds["ttft"].mean_s == 1.5 + sizing.NEWEST_WEIGHT * (2.5 - 1.5)
    assert again.probers == 1
    assert sizing.fold(again, Tally(), START).probers == 1  # a cycle without results keeps the count


def test_the_fact_is_a_wire_message_that_decodes_strictly():
    e = sized(times=measured(dict.fromkeys(COUNTS, 1.4)))
    data = msgspec.json.encode(e)
    assert codec.SIZED.decode(data) == e
    assert codec.LOG_EVENT.decode(data) == e
