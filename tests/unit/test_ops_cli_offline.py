"""Operator commands without a bus: validation before publishing, the exclusions file check, time parsing.

(These were in tests/integration/test_ops_cli.py; none starts a server.)
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ('[[exclusion]]\nprovider = "{p}"\nmodel = "*"\nreason = "measured defect"\nreference = "T-1"\n'
         'date = 2026-01-01\n')


def test_exclusions_check_prints_each_entry_of_a_good_file(tmp_path):
    """check lists every entry with its line, scope, reason, reference and dates, and exits 0."""
    path = tmp_path / "good.toml"
    path.write_text(ENTRY.format(p="parasail/fp8") + "expires = 2027-01-01\n\n"
                    + ENTRY.format(p="novita/bf16").replace('"*"', '"acme/chat-1"'))
    result = CliRunner().invoke(app, ["exclusions", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "line 1: parasail/fp8 on every model (*): measured defect (T-1); reviewed 2026-01-01T00:00:00Z, "
        "expires 2027-01-01T00:00:00Z",
        "line 9: novita/bf16 on acme/chat-1: measured defect (T-1); reviewed 2026-01-01T00:00:00Z",
        f"{path}: 2 exclusion(s), valid",
    ]


def test_exclusions_check_names_the_line_of_a_bad_entry_and_exits_1(tmp_path):
    """A duplicate, or an expiry before its date, is reported with the file and line; exit status 1."""
    dup = tmp_path / "dup.toml"
    dup.write_text(ENTRY.format(p="a/fp8") + "\n" + ENTRY.format(p="a/fp8"))
    result = CliRunner().invoke(app, ["exclusions", "check", str(dup)])
    assert result.exit_code == 1
    assert f"error: {dup}:8: duplicate of the exclusion at line 1" in result.output

    early = tmp_path / "early.toml"
    early.write_text(ENTRY.format(p="a/fp8") + "expires = 2025-12-31\n")
    result = CliRunner().invoke(app, ["exclusions", "check", str(early)])
    assert result.exit_code == 1
    assert f"error: {early}:1: expires must be after date" in result.output

    result = CliRunner().invoke(app, ["exclusions", "check", str(tmp_path / "missing.toml")])
    assert result.exit_code == 1 and "cannot read" in result.output


def test_the_repository_exclusions_file_is_valid():
    """config/exclusions.toml (all examples commented out) passes the check."""
    result = CliRunner().invoke(app, ["exclusions", "check", str(ROOT / "config" / "exclusions.toml")])
    assert result.exit_code == 0, result.output
    assert result.output.endswith("0 exclusion(s), valid\n")


def test_durations_and_times_of_override_add_are_parsed_strictly():
    """--for takes 90s/30m/2h/1d/1h30m; --expires takes ISO 8601 (no zone: UTC); anything else is refused."""
    from reverie_canary.canary.cli_ops import parse_duration, parse_when

    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("2d") == timedelta(days=2) and parse_duration("45s") == timedelta(seconds=45)
    for bad in ("", "2", "h", "2x", "-1h", "0m", "1h 30"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert parse_when("2026-06-11T18:00:00Z") == datetime(2026, 6, 11, 18, tzinfo=timezone.utc)
    assert parse_when("2026-06-11T20:00+02:00") == datetime(2026, 6, 11, 18, tzinfo=timezone.utc)
    assert parse_when("2026-06-11T18:00") == datetime(2026, 6, 11, 18, tzinfo=timezone.utc)
    with pytest.raises(ValueError):
        parse_when("tomorrow")


def test_override_add_refuses_both_expiry_forms_and_a_past_expiry():
    """--expires with --for, or an expiry in the past, exits 2 before anything is published."""
    result = CliRunner().invoke(app, ["override", "add", "a/fp8", "--reason", "r", "--for", "1h",
                                      "--expires", "2030-01-01T00:00:00Z"])
    assert result.exit_code == 2 and "give --expires or --for, not both" in result.output
    result = CliRunner().invoke(app, ["override", "add", "a/fp8", "--reason", "r", "--expires", "2020-01-01"])
    assert result.exit_code == 2 and "is not in the future" in result.output


@pytest.mark.parametrize("args, says", [
    (["override", "add", "a/fp8", "--reason", "   "], "--reason must say why"),
    (["override", "add", "a/fp8", "--reason", ""], "--reason must say why"),
    (["lift", "a/fp8", "--reason", "\t"], "--reason holds a control character"),  # a tab is refused as such
    (["override", "add", "a b", "--reason", "incident 7"], "one endpoint tag without spaces"),
])
def test_a_command_the_router_would_refuse_is_refused_before_publishing(args, says):
    """Blank reasons and malformed tags exit 2 in the operator's words, with nothing published (no NATS here)."""
    result = CliRunner().invoke(app, args, env={"NATS_URL": "nats://127.0.0.1:1"})
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_watch_once_without_the_bus_prints_no_made_up_list_and_exits_1():
    """stdout carries only a real snapshot: with no bus and no cache it stays empty; stderr says why."""
    result = CliRunner().invoke(app, ["watch", "--once"], env={"NATS_URL": "nats://127.0.0.1:1", "CANARY_CONFIG": ""})
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "refused or unreachable" in result.stderr and "not confirmed by the bus" in result.stderr


def test_an_operator_command_without_the_bus_names_the_url_and_user_never_the_password():
    """``canary override list`` with NATS unreachable: exit 1, one line with the URL and the user."""
    env = {"NATS_URL": "nats://127.0.0.1:1", "NATS_USER": "ops", "NATS_PASSWORD": "hunter2-secret",
           "CANARY_CONFIG": ""}
    result = CliRunner().invoke(app, ["override", "list"], env=env)
    assert result.exit_code == 1, result.output
    assert "cannot connect to NATS at nats://127.0.0.1:1 as ops" in result.output
    assert "hunter2-secret" not in result.output
