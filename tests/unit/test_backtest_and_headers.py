"""Backtests compare two fully stated configurations; headers and decision lines say the mode."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.services.judge.core import Decision, Policy, fold
from reverie_canary.services.judge.explain import explain_provider, shadow_report
from reverie_canary.shared.contract.commands import SetMode
from reverie_canary.shared.runtime.settings import sources
from tests.judge_events import MODEL, T0, cycle_events, healthy

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios" / "judge"
CLEAN = {"CANARY_CONFIG": "", "CANARY_MODE": "", "CANARY_MIN_HOSTS": "", "CANARY_MODELS": "",
         "CANARY_FAILED_CYCLES_TO_SUSPEND": ""}


def backtest(other: Path, env: dict[str, str]):
    return CliRunner().invoke(app, ["replay", "--events", str(SCENARIOS / "two_failed_cycles_suspend.jsonl"),
                                    "--config", str(other)], env={**CLEAN, **env})


def test_a_conflicting_environment_does_not_change_what_the_backtest_compares(tmp_path):
    """The caller's CANARY_FAILED_CYCLES_TO_SUSPEND=2 beats nothing in OTHER: the same differences as without it."""
    other = tmp_path / "alt.toml"
    other.write_text("failed_cycles_to_suspend = 3\n")
    plain, conflicting = backtest(other, {}), backtest(other, {"CANARY_FAILED_CYCLES_TO_SUSPEND": "2",
                                                              "CANARY_MIN_HOSTS": "2", "CANARY_MODE": "observe"})
    assert plain.exit_code == 0 and conflicting.exit_code == 0, (plain.output, conflicting.output)
    a, b = json.loads(plain.stdout), json.loads(conflicting.stdout)
    assert [(d["action"], d["provider"]) for d in a["only_current"]] == [("suspend", "a/fp8")]
    assert (a["only_current"], a["only_other"]) == (b["only_current"], b["only_other"])
    assert [(s["name"], s["current"], s["other"], s["other_source"]) for s in b["settings"]] == [
        ("failed_cycles_to_suspend", 2, 3, f"file {other}")]
    assert a["settings"][0]["current_source"] == "default"
    assert b["settings"][0]["current_source"] == "environment CANARY_FAILED_CYCLES_TO_SUSPEND"
    assert "note" not in b
    # "current" says every policy setting it folds with and where each came from, the same ones either way
    assert b["current"]["failed_cycles_to_suspend"] == {"value": 2,
                                                        "source": "environment CANARY_FAILED_CYCLES_TO_SUSPEND"}
    assert b["current"]["min_hosts"] == {"value": 2, "source": "environment CANARY_MIN_HOSTS"}
    assert a["current"]["min_hosts"] == {"value": 2, "source": "default"}
    assert set(a["current"]) == set(b["current"]) and "ladder_s" in a["current"]


def test_a_backtest_without_a_policy_difference_says_so(tmp_path):
    """The environment already runs with OTHER's thresholds: no decision can differ, and the output says why."""
    other = tmp_path / "alt.toml"
    other.write_text("failed_cycles_to_suspend = 3\nlog_level = \"ERROR\"\n")
    out = backtest(other, {"CANARY_FAILED_CYCLES_TO_SUSPEND": "3"})
    doc = json.loads(out.stdout)
    assert (doc["only_current"], doc["only_other"]) == ([], [])
    assert "no policy setting differs" in doc["note"]
    assert [(s["name"], s["policy"]) for s in doc["settings"]] == [("log_level", False)]


def test_an_invalid_other_file_exits_2_with_the_error_a_service_gives_at_start(tmp_path):
    """``failed_cycles_to_suspend = "four"`` is refused, even when the environment sets the same setting."""
    other = tmp_path / "alt.toml"
    other.write_text('failed_cycles_to_suspend = "four"\n')
    result = backtest(other, {"CANARY_FAILED_CYCLES_TO_SUSPEND": "4"})
    assert result.exit_code == 2
    assert "Expected `int`, got `str` - at `$.failed_cycles_to_suspend`" in result.stderr
    unknown = tmp_path / "typo.toml"
    unknown.write_text("failed_cycles_to_suspnd = 4\n")
    result = backtest(unknown, {})
    assert result.exit_code == 2 and "unknown settings ['failed_cycles_to_suspnd']" in result.stderr


def test_sources_name_the_default_the_file_and_the_environment(tmp_path):
    """Each value's source is the last one that set it, as Settings.load reads them."""
    config = tmp_path / "c.toml"
    config.write_text("min_hosts = 3\nmode = \"enforce\"\n")
    got = sources({"CANARY_CONFIG": str(config), "CANARY_MODE": "observe", "NATS_URL": "nats://x:4222"})
    assert got["min_hosts"] == f"file {config}"
    assert got["mode"] == "environment CANARY_MODE"
    assert got["nats_url"] == "environment NATS_URL"
    assert got["ladder_s"] == "default"


def test_the_explain_header_names_the_kind_in_observe_and_each_decision_its_mode():
    """refusal in observe, the rest enforce: the header says both, the would-be suspension says observe."""
    policy = Policy(mode="enforce", models=(MODEL,))
    kinds = ("ttft", "refusal", "structured")
    observe = SetMode(command_id="m1", actor="alice", at=T0 - timedelta(minutes=1), mode="observe", model=MODEL,
                      kind="refusal")
    out = healthy("a/fp8", "b/fp8", "c/fp8", "d/fp8", kinds=kinds)
    out["a/fp8"]["refusal"] = ("fail", "refusal")
    states, effects = fold([observe, *cycle_events(0, out), *cycle_events(1, out)], policy)
    decisions = [e for e in effects if isinstance(e, Decision) and e.provider == "a/fp8"]
    text = explain_provider(states[MODEL], "a/fp8", policy, kinds=kinds, decisions=decisions)
    lines = text.splitlines()
    assert lines[0] == f"a/fp8 on {MODEL} (modes: enforce for ttft, structured; observe for refusal)"
    assert lines[1].startswith("  would be suspended [observe] since ")
    assert any(line.strip().startswith("- ") and "refusal: fail refusal" in line and line.endswith("[observe now]")
               for line in lines)
    assert any("would_suspend  [observe]" in line for line in lines)
    report = shadow_report(states[MODEL], policy)
    assert report.splitlines()[0].startswith(
        f"{MODEL} (modes: enforce for ttft, structured, language, echo; observe for refusal, tools): "
        "1 would-be suspension(s)")
    assert "[observe]" in report.splitlines()[-1]


def test_an_offline_replay_folds_no_command_for_a_model_the_file_shows_no_input_of(tmp_path):
    """A file with a mode for typo/model then one for *: only the watched model (it has cycles) changes mode."""
    import msgspec

    from reverie_canary.services.judge.core import fold_targets
    from reverie_canary.shared.contract import codec

    events = [*cycle_events(0, healthy("a/fp8", "b/fp8", "c/fp8")),
              SetMode(command_id="c1", actor="alice", at=T0 + timedelta(minutes=5), mode="enforce", model="typo/model"),
              SetMode(command_id="c2", actor="alice", at=T0 + timedelta(minutes=6), mode="enforce", kind="echo")]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(codec.encode(e).decode() + "\n" for e in events))
    result = CliRunner().invoke(app, ["replay", "--events", str(path)], env={**CLEAN, "CANARY_MODELS": MODEL})
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert sorted(doc["states"]) == [MODEL]
    assert [(d["action"], d["model"], d["kind"]) for d in doc["decisions"]] == [("mode_changed", MODEL, "echo")]
    # the one rule, as the live judge applies it
    assert fold_targets("typo/model", {MODEL}, {MODEL}) is None
    assert fold_targets("*", {MODEL}, {"old/model"}) == [MODEL, "old/model"]
    states, effects = fold(events, Policy(models=(MODEL,)), watched={MODEL})
    assert sorted(states) == [MODEL] and [e.model for e in effects if isinstance(e, Decision)] == [MODEL]
    assert msgspec.to_builtins(fold(events, Policy())[0]).keys() == {MODEL, "typo/model"}  # watched=None: every model
