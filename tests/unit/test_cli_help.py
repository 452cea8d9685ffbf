"""`canary --help`: commands grouped by what they are for; every command's help without docstring markup."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from reverie_canary.canary.cli import COMMAND_GROUPS, GROUPS, app
from reverie_canary.canary.help import plain


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


#: reStructuredText that must not reach a terminal: a role (:data:`X`) or a double-backticked literal.
MARKUP = re.compile(r":[a-z]+:`|``")


def _commands(command, path=()):
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield path
        return
    yield path
    for name, sub in subcommands.items():
        yield from _commands(sub, (*path, name))


COMMANDS = sorted(_commands(typer.main.get_command(app)))


def test_the_walk_finds_every_subcommand():
    """The walk reaches the nested groups' commands (override add, notices resend, ...)."""
    assert {("override", "add"), ("notices", "resend"), ("exclusions", "check"), ("status",), ("incident",)} <= set(
        COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "canary")
def test_help_shows_no_docstring_markup_and_names_arguments_in_capitals(path):
    """--help: exit 0, no :role:`x` or ``x``, and the usage line has no {lower-case} argument name."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert result.exit_code == 0, result.output
    assert not MARKUP.search(result.output), result.output
    [usage] = [line for line in result.output.splitlines() if "Usage:" in line]
    assert not re.search(r"\{[a-z_]+\}", usage), usage


def test_plain_keeps_the_text_of_roles_and_literals():
    """A role becomes its name's last part, a literal its text; single backticks stay."""
    assert plain("at most :data:`reverie_canary.x.MAX_OVERRIDE` (365 days), ``--wait`` s, `canary x`") == (
        "at most MAX_OVERRIDE (365 days), --wait s, `canary x`")
    assert plain(":func:`~a.b.c` and :class:`the thing <a.B>`") == "c and the thing"
