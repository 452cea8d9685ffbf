"""Guard rails of the operator's command line that need no server: unwatched models, bounds, control characters."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from reverie_canary.canary.cli import app

ENV = {"CANARY_MODELS": "acme/chat-1", "NATS_URL": "nats://127.0.0.1:9", "REDIS_URL": "redis://127.0.0.1:9/0",
       "CANARY_CONFIG": ""}


@pytest.mark.parametrize("args", [
    ["status", "--model", "nosuch/m"],
    ["status", "--model", "nosuch/m", "--json"],
    ["explain", "a/fp8", "--model", "nosuch/m"],
    ["incident", "--model", "nosuch/m", "--at", "21:40"],
])
def test_a_read_command_for_an_unwatched_model_exits_2_naming_the_watched_ones(args):
    """status, explain and incident refuse a model the settings do not watch (one check), before any server."""
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 2, result.output
    assert "error: 'nosuch/m' is not a watched model (CANARY_MODELS: acme/chat-1)" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("args, says", [
    (["override", "add", "a/fp8", "--reason", "x" * 2001], "--reason is too long: at most 2000 characters, 2001 given"),
    (["lift", "a/fp8", "--reason", "y" * 2500], "--reason is too long: at most 2000 characters, 2500 given"),
    (["override", "add", "a/fp8", "--reason", "r", "--reference", "z" * 300],
     "--reference is too long: at most 256 characters, 300 given"),
    (["override", "add", "a/fp8", "--reason", "r", "--for", "99999999999d"], "--for: duration too long"),
    (["override", "add", "a/fp8", "--reason", "r", "--for", "9" * 400 + "s"], "--for: duration too long"),
    (["override", "add", "a/fp8", "--reason", "r", "--for", "100000d"],
     "--for: duration too long: '100000d' (at most 365 d)"),
    (["override", "add", "a/fp8", "--reason", "r", "--for", "366d"], "(at most 365 d)"),
    (["override", "add", "a/fp8", "--reason", "r", "--expires", "9999-12-31T23:59:59Z"],
     "is more than 365 d ahead, the longest an override lasts"),
])
def test_an_over_long_value_is_refused_saying_it_is_too_long_and_the_bound(args, says):
    """Too long a reason, reference or override: exit 2, the bound named, no traceback, nothing published."""
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert "must say why" not in result.stderr and "OverflowError" not in result.output


def test_an_override_of_up_to_a_year_is_not_refused_by_its_length():
    """365 days is the longest override accepted: it gets as far as the bus (absent here: exit 1, not 2)."""
    from datetime import timedelta

    from reverie_canary.canary.cli_ops import MAX_OVERRIDE, parse_duration

    assert timedelta(days=365) == MAX_OVERRIDE and parse_duration("365d", MAX_OVERRIDE) == MAX_OVERRIDE
    result = CliRunner().invoke(app, ["override", "add", "a/fp8", "--reason", "r", "--for", "365d",
                                      "--timeout", "0.1"], env=ENV)
    assert result.exit_code == 1 and "cannot connect to NATS" in result.stderr, result.output


HOSTILE = "esc \x1b]0;PWNED\x07 \x1b[2J"


@pytest.mark.parametrize("args, env, says", [
    (["override", "add", "novita/fp8", "--reason", HOSTILE], {}, "--reason holds a control character (U+001B at character 5)"),
    (["lift", "a/fp8", "--reason", "tab\there"], {}, "--reason holds a control character (U+0009 at character 4)"),
    (["override", "add", "a/fp8", "--reason", "r", "--reference", "INC\x9b7"], {},
     "--reference holds a control character (U+009B at character 4)"),
    (["override", "remove", "a/fp8", "--reason", "line\nbreak"], {}, "--reason holds a control character (U+000A"),
    (["mode", "observe", "--reason", "bell\x07"], {}, "--reason holds a control character (U+0007"),
    (["override", "add", "a/fp8", "--reason", "r"], {"CANARY_ACTOR": "alice\x1b[2J"},
     "the actor (--actor or $CANARY_ACTOR) holds a control character (U+001B at character 6)"),
    (["override", "add", "a/fp8", "--reason", "r", "--actor", "alice\n"], {}, "the actor (--actor or $CANARY_ACTOR) "
     "holds a control character (U+000A"),
])
def test_control_characters_in_operator_text_are_refused_before_publishing(args, env, says):
    """C0 and C1 control characters (tab and newline too) in reasons, references and actors: exit 2, raw text never echoed."""
    result = CliRunner().invoke(app, args, env={**ENV, **env})
    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert "\x1b" not in result.output and "\x07" not in result.output and "\x9b" not in result.output


def test_every_command_text_field_refuses_a_control_character_on_the_wire():
    """The wire bounds themselves (what the router and the judge decode with) refuse them: a hand-made command too."""
    from datetime import datetime, timezone

    import msgspec

    from reverie_canary.shared.contract.commands import AddOverride, LiftSuspension, RemoveOverride, SetMode

    base = {"command_id": "c1", "actor": "alice", "at": datetime.now(timezone.utc)}
    good = {AddOverride: {"provider": "a/fp8", "reason": "incident 7 — ünïcode is fine", "reference": "INC-7"},
            RemoveOverride: {"provider": "a/fp8", "reason": ""}, LiftSuspension: {"provider": "a/fp8",
                                                                               "model": "m/x", "reason": "ok"},
            SetMode: {"mode": "observe", "model": "*", "reason": ""}}
    for cls, fields in good.items():
        msgspec.convert({**base, **fields}, cls)
        for name in [*fields, "actor"]:
            if name == "mode":
                continue
            for bad in ("\x1b[2J", "\t", "\n", "\x7f", "\x9b", "\x00"):
                value = (fields.get(name) or "x") + bad
                with pytest.raises(msgspec.ValidationError, match=rf"\$\.{name}"):
                    msgspec.convert({**base, **fields, name: value}, cls)


def test_text_from_the_log_or_redis_is_printed_with_its_control_characters_escaped():
    """An old override and decision holding ESC print as \\x1b in override list, replay's timeline and the answers."""
    from datetime import datetime, timezone

    from reverie_canary.canary.cli_judge import _decision_line
    from reverie_canary.canary.cli_ops import snapshot_lines
    from reverie_canary.client.wire import IgnoreEntry, IgnoreReason, IgnoreSnapshot
    from reverie_canary.shared.contract.events import make_decision
    from reverie_canary.shared.runtime.printable import printable, printable_view

    now = datetime.now(timezone.utc)
    snapshot = IgnoreSnapshot(at=now, model="m/x", version=3, entries=[IgnoreEntry(provider="novita/fp8", reasons=[
        IgnoreReason(layer="override", reason=HOSTILE, actor="bob", reference="T\x9b1", since=now)])])
    lines = "\n".join(snapshot_lines("m/x", snapshot, now))
    assert "esc \\x1b]0;PWNED\\x07 \\x1b[2J" in lines and "ref T\\x9b1" in lines
    decision = make_decision(at=now, decision_id="d1", model="m/x", provider="a/fp8", action="mode_changed",
                        reason="operator", detail="by " + HOSTILE)
    line = _decision_line(7, decision)
    assert "by esc \\x1b]0;PWNED\\x07 \\x1b[2J" in line
    for text in (lines, line):
        assert not any(ord(c) < 0x20 and c != "\n" or 0x7f <= ord(c) < 0xa0 for c in text)
    assert printable("a\tb\nc") == "a\\tb\\nc" and printable("a\nb", newlines=True) == "a\nb"
    assert printable_view({"k\x1b": [("x\x07",)]}) == {"k\\x1b": [("x\\x07",)]}
    assert printable_view(snapshot).entries[0].reasons[0].since == now  # other values kept


def test_notices_list_prints_a_receivers_error_with_its_control_characters_escaped(capsys):
    """A dead letter whose error text (from the receiver) holds ESC: the table shows \\x1b, never the byte."""
    from reverie_canary.canary.cli_notices import _print_tables

    row = {"ref": "msg_1", "channel": "hook", "severity": "critical", "action": "suspend", "provider": "p",
           "attempts": 7, "dead_at": "2026-12-01T10:00:00Z", "error": "HTTP 500 " + HOSTILE, "next_attempt_at": None,
           "delivered_at": None}
    _print_tables({"channels": [], "dead": [row], "pending": [], "recent": []})
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;PWNED\\x07" in out


def test_the_wire_refuses_an_override_longer_than_a_year_as_the_cli_does():
    """An add_override expiring 9999-12-01 decodes as Undecodable (the router dead-letters it); 365 days decode."""
    from datetime import datetime, timedelta, timezone

    from reverie_canary.shared.contract import codec
    from reverie_canary.shared.contract.commands import MAX_OVERRIDE_S, AddOverride
    from reverie_canary.shared.contract.errors import Undecodable

    now = datetime(2026, 12, 1, 21, 0, tzinfo=timezone.utc)
    year = AddOverride(command_id="c", actor="a", at=now, provider="p", reason="r",
                       expires_at=now + timedelta(seconds=MAX_OVERRIDE_S))
    assert codec.COMMAND.decode(codec.encode(year)) == year
    with pytest.raises(Undecodable, match="more than 365 days after at"):
        codec.COMMAND.decode(codec.encode(year).replace(b'"expires_at":"2027', b'"expires_at":"9999'))
    with pytest.raises(ValueError):
        AddOverride(command_id="c", actor="a", at=now, provider="p", reason="r", expires_at=now + timedelta(days=366))


def test_a_reviewed_exclusion_with_a_control_character_is_refused_naming_its_line(tmp_path):
    """exclusions check (the router's own parser, used by reload too): a reason with ESC exits 1 naming line and character."""
    path = tmp_path / "bad.toml"
    path.write_text('[[exclusion]]\nprovider = "a/fp8"\nmodel = "*"\nreason = "measured \\u001b[2J defect"\n'
                    'reference = "T-1"\ndate = 2026-01-01\n')
    result = CliRunner().invoke(app, ["exclusions", "check", str(path)])
    assert result.exit_code == 1, result.output
    assert f"{path}:1: reason holds a control character (U+001B at character 10)" in result.stderr
    assert "\x1b" not in result.output


def test_canary_probe_prints_a_providers_served_by_with_its_control_characters_escaped():
    """A reply whose served_by header holds ESC [2J: the probe's line shows \\x1b, the layout's newlines stay."""
    from datetime import datetime, timezone

    from reverie_canary.canary.cli_probe import _describe
    from reverie_canary.shared.contract.events import ProbeResult, ReplyEvidence

    result = ProbeResult(at=datetime.now(timezone.utc), task_id="t1", model="m/x", provider="a/fp8", kind="ttft",
                         cycle="c1", outcome="pass", reply=ReplyEvidence(served_by="Evil\x1b[2J", first_bytes="hi",
                                                                          http_status=200, finish_reason="stop"))
    text = _describe(1, result)
    assert "served_by Evil\\x1b[2J" in text and "\x1b" not in text and "\n   first bytes: 'hi'" in text
