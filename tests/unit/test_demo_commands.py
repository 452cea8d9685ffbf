"""Every command ``canary demo --keep`` prints runs as printed: the command line's own parser accepts each."""

from __future__ import annotations

import io
import shlex
from pathlib import Path

from typer.main import get_command

from reverie_canary.canary.cli import app
from reverie_canary.canary.demo import _print_keep

MODEL = "deepseek/deepseek-chat-v3.1"


def printed_commands() -> list[list[str]]:
    out = io.StringIO()
    files = {name: Path(f"/tmp/canary-demo-x/{name}.env") for name in ("operator", "backend", "dashboard")}
    _print_keep(out, files, {"judge": "http://127.0.0.1:1/metrics"}, None, MODEL, None)
    commands = []
    for line in out.getvalue().splitlines():
        for part in line.split("#", 1)[0].split(";"):
            words = shlex.split(part)
            if words and words[0] == "canary":
                commands.append(words[1:])
    return commands


def test_every_printed_canary_command_parses_with_the_cli_as_printed():
    """override add, status, override list, explain, replay, report, watch, incident: each parses, no placeholder."""
    from reverie_canary.services.dashboard.pages import parse_at
    from reverie_canary.shared.runtime import clock

    commands = printed_commands()
    assert {c[0] for c in commands} >= {"override", "status", "explain", "replay", "report", "watch", "incident"}
    root = get_command(app)
    for argv in commands:
        group, rest = root, list(argv)
        while hasattr(group, "commands") and rest and rest[0] in group.commands:
            group, rest = group.commands[rest[0]], rest[1:]
        params = group.make_context(argv[0], rest).params  # raises on an option or argument it refuses
        if argv[0] == "incident":
            parse_at(params["at"], clock.now())  # a time, not "HH:MM"
