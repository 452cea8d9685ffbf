"""Judge scenarios as event files, replayed offline by ``canary replay --events`` with expected decisions.

The files in ``tests/scenarios/judge/`` are the same logs an auditor would
fold; each line is a wire event.  Expectations are written by hand below.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app

HERE = Path(__file__).resolve().parents[1] / "scenarios" / "judge"
M = "mode_changed"

#: scenario -> [(action, provider, reason, suspension length in days or None)]
EXPECTED: dict[str, list[tuple[str, str, str, float | None]]] = {
    "two_failed_cycles_suspend": [(M, "", "operator", None), ("suspend", "a/fp8", "failed_cycles", 1)],
    "one_failed_cycle_decides_nothing": [(M, "", "operator", None)],
    "transport_errors_freeze": [(M, "", "operator", None), ("suspend", "a/fp8", "failed_cycles", 1)],
    "ladder_one_three_seven_days": [
        (M, "", "operator", None),
        ("suspend", "a/fp8", "failed_cycles", 1), ("end", "a/fp8", "expired", None),
        ("suspend", "a/fp8", "failed_cycles", 3), ("end", "a/fp8", "expired", None),
        ("suspend", "a/fp8", "failed_cycles", 7), ("end", "a/fp8", "expired", None)],
    "ladder_resets_after_fourteen_quiet_days": [
        (M, "", "operator", None), ("suspend", "a/fp8", "failed_cycles", 1), ("end", "a/fp8", "expired", None),
        ("suspend", "a/fp8", "failed_cycles", 1)],
    "suspension_expires": [(M, "", "operator", None), ("suspend", "a/fp8", "failed_cycles", 1),
                           ("end", "a/fp8", "expired", None)],
    "recovery_ends_early_and_keeps_the_ladder": [
        (M, "", "operator", None), ("suspend", "a/fp8", "failed_cycles", 1), ("end", "a/fp8", "recovered", None),
        ("suspend", "a/fp8", "failed_cycles", 3)],
    "capacity_floor_holds": [(M, "", "operator", None), ("floor_held", "a/fp8", "capacity_floor", None),
                             ("floor_held", "a/fp8", "capacity_floor", None)],
    "observe_mode_would_suspend": [("would_suspend", "a/fp8", "failed_cycles", 1),
                                   ("would_end", "a/fp8", "recovered", None)],
    "observe_per_probe_kind": [(M, "", "operator", None), (M, "", "operator", None),
                               ("would_suspend", "a/fp8", "failed_cycles", 1),
                               ("suspend", "b/fp8", "failed_cycles", 1)],
    "operator_lift": [(M, "", "operator", None), ("suspend", "a/fp8", "failed_cycles", 1),
                      ("end", "a/fp8", "lifted", None)],
    "common_mode_guard": [(M, "", "operator", None), ("common_mode", "", "common_mode", None),
                          ("common_mode", "", "common_mode", None)],
    "positive_control_passed": [(M, "", "operator", None), ("control_passed", "", "control_passed", None),
                                ("control_passed", "", "control_passed", None)],
    "unjudgeable_after_six_frozen_cycles": [(M, "", "operator", None), ("unjudgeable", "a/fp8", "frozen_too_long", None)],
    "pin_violated": [(M, "", "operator", None), ("pin_violated", "a/fp8", "pin_violated", None)],
    "provider_disappears_and_returns": [(M, "", "operator", None), ("suspend", "a/fp8", "failed_cycles", 1)],
    # "*" reaches the file's model (acme/chat-1) and the configured default model, before either has state
    "enforce_every_model_before_the_first_cycle": [(M, "", "operator", None), (M, "", "operator", None),
                                                   ("suspend", "a/fp8", "failed_cycles", 1)],
    "canary_blind_holds_a_due_suspension": [(M, "", "operator", None), ("suspend", "a/fp8", "failed_cycles", 1),
                                            ("canary_blind", "", "gateway_unreachable", None),
                                            ("suspension_held", "a/fp8", "canary_blind", None),
                                            ("suspension_held", "a/fp8", "canary_blind", None),
                                            ("suspension_held", "a/fp8", "canary_blind", None),
                                            ("end", "a/fp8", "expired", None),
                                            ("canary_sees", "", "judged_again", None)],
    # failed in observe (cycle 0), switched to enforce, failed again (cycle 1): suspended at that close
    "go_live_suspends_a_provider_failing_across_the_switch": [(M, "", "operator", None),
                                                              ("suspend", "a/fp8", "failed_cycles", 1)],
    # would_suspend in observe; the first failed cycle after the switch makes it real (the shadow climbed
    # a ladder of its own, so the real one starts at 1 day)
    "a_shadow_suspension_gives_way_after_the_switch": [("would_suspend", "a/fp8", "failed_cycles", 1),
                                                       (M, "", "operator", None),
                                                       ("suspend", "a/fp8", "failed_cycles", 1)],
    # a new kind (tools) is observed on a model in enforce until an operator switches that kind
    "new_kind_observes_until_switched": [(M, "", "operator", None), ("would_suspend", "a/fp8", "failed_cycles", 1),
                                         ("suspend", "b/fp8", "failed_cycles", 1), (M, "", "operator", None),
                                         ("would_end", "a/fp8", "recovered", None),
                                         ("end", "b/fp8", "recovered", None),
                                         ("suspend", "c/fp8", "failed_cycles", 1)],
    # a control failing one variant proves the kind; passing all four (cycle 1) freezes it, and the streak with it
    "tool_control_caught_by_one_variant": [(M, "", "operator", None), ("control_passed", "", "control_passed", None),
                                           ("suspend", "a/fp8", "failed_cycles", 1)],
    # template (a fact across the providers) observes on a model in enforce until switched
    "template_observes_until_switched": [(M, "", "operator", None), ("would_suspend", "c/fp8", "failed_cycles", 1),
                                         (M, "", "operator", None), ("suspend", "c/fp8", "failed_cycles", 1)],
    # slow_vs_peers is shown, never a suspension: eight cycles, no decision but the mode
    "slow_vs_peers_never_suspends": [(M, "", "operator", None)],
}

#: A clean environment: default settings (observe mode, floor 2, ladder 1/3/7 days).
ENV = {"CANARY_CONFIG": "", "CANARY_MODE": "", "CANARY_MIN_HOSTS": "", "CANARY_MODELS": ""}


def replay(path: Path, *extra: str) -> dict:
    result = CliRunner().invoke(app, ["replay", "--events", str(path), *extra], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_scenario_file_has_expectations():
    """No event file without a hand-written expectation, and the reverse."""
    assert sorted(p.stem for p in HERE.glob("*.jsonl")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scenario_gives_its_expected_decisions(name):
    """Folding the scenario's log gives exactly the decisions written for it."""
    out = replay(HERE / f"{name}.jsonl")
    got = []
    for d in out["decisions"]:
        days = None
        if d["action"] in ("suspend", "would_suspend"):
            until = datetime.fromisoformat(d["until"].replace("Z", "+00:00"))
            at = datetime.fromisoformat(d["at"].replace("Z", "+00:00"))
            days = (until - at).total_seconds() / 86400
        got.append((d["action"], d["provider"], d["reason"], days))
    assert got == EXPECTED[name]
    assert all(d["evidence"] for d in out["decisions"] if d["action"] in ("suspend", "would_suspend", "floor_held"))


def test_backtest_with_other_thresholds_lists_the_decisions_that_differ(tmp_path):
    """replay --config OTHER.toml: with three failed cycles needed, the two-cycle suspension disappears."""
    other = tmp_path / "other.toml"
    other.write_text("failed_cycles_to_suspend = 3\n")
    out = replay(HERE / "two_failed_cycles_suspend.jsonl", "--config", str(other))
    assert [(d["action"], d["provider"]) for d in out["only_current"]] == [("suspend", "a/fp8")]
    assert out["only_other"] == []


def test_since_shows_only_the_later_decisions_of_the_same_fold():
    """--since chooses what is shown; the fold still starts at the beginning (same state)."""
    path = HERE / "capacity_floor_holds.jsonl"
    whole, later = replay(path), replay(path, "--since", "2026-11-01T01:00:00Z")
    assert [(d["action"], d["at"]) for d in whole["decisions"]] == [
        ("mode_changed", "2026-10-31T23:59:00Z"), ("floor_held", "2026-11-01T00:40:00Z"),
        ("floor_held", "2026-11-01T01:10:00Z")]
    assert [(d["action"], d["at"]) for d in later["decisions"]] == [("floor_held", "2026-11-01T01:10:00Z")]
    assert later["states"] == whole["states"]
    bad = CliRunner().invoke(app, ["replay", "--events", str(path), "--since", "yesterday"], env=ENV)
    assert bad.exit_code == 2 and "ISO 8601" in bad.output


def test_a_bad_event_file_is_refused_with_its_line_number(tmp_path):
    """A line that is not a wire event stops the replay with the line named, exit status 2."""
    bad = tmp_path / "bad.jsonl"
    good = (HERE / "pin_violated.jsonl").read_text().splitlines()
    bad.write_text("\n".join([good[0], '{"type": "cycle_closed", "model": 7}', *good[1:]]) + "\n")
    result = CliRunner().invoke(app, ["replay", "--events", str(bad)], env=ENV)
    assert result.exit_code == 2
    assert "line 2" in result.output


def test_committed_files_match_their_builder():
    """The event files are exactly what tests/scenarios/judge/build.py writes (no hand edits drift)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("judge_build", HERE / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from reverie_canary.shared.contract import codec

    for name, events in module.scenarios().items():
        expected = "\n".join(codec.encode(e).decode() for e in events) + "\n"
        assert (HERE / f"{name}.jsonl").read_text() == expected, name


def test_backtest_sees_a_longer_suspension(tmp_path):
    """replay --config with a 2-day first step: the same suspension with another end is reported as differing."""
    other = tmp_path / "other.toml"
    other.write_text("ladder_s = [172800.0, 259200.0, 604800.0]\n")
    out = replay(HERE / "two_failed_cycles_suspend.jsonl", "--config", str(other))
    assert [(d["action"], d["provider"]) for d in out["only_current"]] == [("suspend", "a/fp8")]
    [longer] = out["only_other"]
    assert longer["action"] == "suspend" and longer["until"] > out["only_current"][0]["until"]
