"""The demo's chat traffic: the reviewed exclusions each fleet gets, the figures it prints, its bounds."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest

from reverie_canary.canary.demo import _print_summary, demo_exclusions_file, fleet_exclusions
from reverie_canary.canary.traffic import ChatTraffic
from reverie_canary.services.router.core import parse_exclusions
from reverie_canary.simulator.scenario import load_scenario


def test_each_fleet_gets_the_reviewed_entries_of_its_own_hosts():
    """The default fleet: its refusal control only; the full fleet: its five controls; comments kept."""
    path = demo_exclusions_file()
    assert path and Path(path).name == "demo-exclusions.toml"
    text = Path(path).read_text("utf-8")
    for name, want in (("default", {"control-filter/strict"}),
                       ("full", set(load_scenario("full").controls.values()))):
        tags = {e.tag for e in load_scenario(name).models[0].endpoints}
        kept = fleet_exclusions(text, tags)
        assert {e.provider for e in parse_exclusions(kept, name)} == want, name
        assert kept.startswith("# Reviewed exclusions for the simulated fleets")
    assert parse_exclusions(fleet_exclusions(text, set()), "none") == []


def summary(traffic):
    return {"providers": {}, "ignore": [], "notices": [], "probes": [], "traffic": traffic}


def test_the_summary_says_the_traffic_figures_in_one_line():
    """Replies, broken delivered, retried, what was not retried and why, the live counts published."""
    out = StringIO()
    _print_summary(out, summary({"rpm": 120.0, "requests": 216, "replies": 214, "broken_delivered": 14,
                                 "broken_reasons": {"leading_junk": 2}, "retried": 26,
                                 "held": {"budget": 1, "retried_once": 4}, "errors": 1, "skipped": 0,
                                 "live_published": 10, "live_dropped": 0}))
    assert ("   chat traffic through the reply guard: 214 replies, 14 broken delivered, 26 retried, 5 failing not "
            "retried (budget 1, retried_once 4), 1 without a reply; live counts published 10 times") \
        in out.getvalue().splitlines()
    quiet = StringIO()
    _print_summary(quiet, summary(None))
    assert "chat traffic" not in quiet.getvalue()


def test_the_traffic_refuses_a_rate_that_is_not_positive():
    """rpm 0 or below is no traffic: refused with the reason (the demo's --rpm 0 starts none instead)."""
    with pytest.raises(ValueError, match="rpm 0 must be > 0"):
        ChatTraffic("http://127.0.0.1:1/api/v1", "k", client=None, rpm=0)  # type: ignore[arg-type]
