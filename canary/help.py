"""Help as a terminal shows it: the commands' docstrings without their reStructuredText markup.

The command line's help comes from the commands' docstrings, which are written for the
documentation as well (``--wait``, :data:`MAX_OVERRIDE`).  A terminal shows markup as
noise, so every command's help is cleaned once, when typer builds the command tree
(:class:`CanaryGroup`, the ``cls`` of every ``typer.Typer`` of the command line): roles
become their text (the last part of a dotted name), inline literals lose their double
backticks.  The usage line names each argument in capitals (``PROVIDER``, ``[FILE]`` when
it may be left out), as click does, instead of typer's ``{provider}``.
"""

from __future__ import annotations

import re
from typing import Any

from typer.core import TyperArgument, TyperGroup

#: ``:role:`text``` or ``:domain:role:`~a.b.c``` (and ``:role:`text <target>```).
_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`~?([^`<]+?)(?:\s*<[^`>]*>)?`")
#: ````literal````.
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)


def plain(text: str | None) -> str | None:
    """Return ``text`` without reStructuredText roles and inline-literal backticks.

    Args:
        text: a docstring or an option's help; ``None`` passes through.

    Returns:
        The text as a terminal should show it: ``:data:`a.b.MAX``` becomes ``MAX``,
        a double-backticked literal its bare text; single backticks are kept.
    """
    if not text:
        return text

    def role(match: re.Match[str]) -> str:
        name = match.group(1).strip()
        return name.rsplit(".", 1)[-1] if " " not in name else name

    return _LITERAL.sub(r"\1", _ROLE.sub(role, text))


class PlainArgument(TyperArgument):
    """An argument whose usage reads ``NAME`` (``[NAME]`` when optional), as click writes it."""

    def make_metavar(self, ctx: Any, *, usage: bool = False) -> str:
        """Return the argument's name for the usage line and the arguments panel."""
        var = self.metavar or (self.name or "").upper()
        if "|" in var and not var.startswith(("{", "[")):
            var = f"{{{var}}}"  # a choice, as click writes it: {observe|enforce}
        if self.nargs != 1 and not var.endswith("..."):
            var += "..."
        return var if self.required or var.startswith("[") else f"[{var}]"


def polish(command: Any) -> None:
    """Clean ``command``'s help, short help and its parameters' help; name its arguments in capitals.

    The docstring as written stays in ``command.source_help`` (and a parameter's in its
    ``source_help``) for the documentation, which renders the markup (``canary docs``).
    """
    if not hasattr(command, "source_help"):
        command.source_help = command.help
    command.help = plain(command.help)
    command.short_help = plain(command.short_help)
    for param in getattr(command, "params", ()):
        if hasattr(param, "help"):
            if not hasattr(param, "source_help"):
                param.source_help = param.help
            param.help = plain(param.help)
        if type(param) is TyperArgument:
            param.__class__ = PlainArgument  # typer builds its own argument objects; only make_metavar differs


class CanaryGroup(TyperGroup):
    """A typer group whose commands (and their sub-groups, by the same ``cls``) get :func:`polish`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        polish(self)
        for command in self.commands.values():
            polish(command)
