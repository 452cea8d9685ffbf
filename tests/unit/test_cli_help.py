"""`canary --help` groups its commands by what they are for: operate, investigate, audit, deploy, develop."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from reverie_canary.canary.cli import COMMAND_GROUPS, GROUPS, app


def test_every_command_belongs_to_a_help_group():
    """A new command without a group would fall into an untitled panel: each top-level command has one."""
    commands = set(typer.main.get_command(app).commands)
    assert commands == set(COMMAND_GROUPS), (sorted(commands - set(COMMAND_GROUPS)),
                                             sorted(set(COMMAND_GROUPS) - commands))
    assert set(COMMAND_GROUPS.values()) == set(GROUPS)


def test_the_help_shows_the_groups_in_order_each_with_its_commands():
    """The top-level help lists the five groups in order, each command under its own group."""
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.output
    positions = [out.index(f" {group} ") for group in GROUPS]
    assert positions == sorted(positions)
    for name, group in COMMAND_GROUPS.items():
        start = out.index(f" {group} ")
        following = [out.index(f" {g} ") for g in GROUPS if out.index(f" {g} ") > start]
        end = min(following) if following else len(out)
        assert f" {name} " in out[start:end], (name, group)
