"""The judge's answers to the operator commands it owns: lift and mode.

Pure, like :mod:`reverie_canary.services.judge.core` (docs/concepts/messages.md, "Operator commands are answered by events"): from the command and what folding it
produced, the one ``CommandApplied`` or ``CommandRefused`` the judge publishes
on ``canary.answers.judge.<command id>``.  Time comes from the command
(``at`` of the answer = ``at`` of the command), so the same log gives the same
answer.

- A command for a model the judge does not watch is refused (``unknown_model``):
  a typo must not look accepted (guard rails).
- A lift that ends no suspension is refused (``not_suspended``); one that ends
  one (or observe mode's shadow of one) is applied, with its decision.
- A mode switch is applied, with its ``mode_changed`` decision per model.
- A command the judge had already folded (the same id published again) gets
  no second answer: its first one is on the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reverie_canary.services.judge.core import Effect
from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract.commands import VERBS, LiftSuspension, SetMode
from reverie_canary.shared.contract.events import (
    ANSWER_MODELS_MAX,
    CommandApplied,
    CommandRefused,
    Decision,
    DecisionMade,
)

JudgeCommand = LiftSuspension | SetMode
Answer = CommandApplied | CommandRefused


def _base(command: JudgeCommand) -> dict[str, Any]:
    return {"at": command.at, "answer_id": ids.answer_id(command.command_id), "command_id": command.command_id,
            "command": VERBS[type(command)], "service": "judge", "actor": command.actor, "model": command.model,
            "provider": getattr(command, "provider", "")}


def unknown_model(command: JudgeCommand, watched: Sequence[str]) -> CommandRefused:
    """The refusal of a command whose model the judge does not watch."""
    return CommandRefused(**_base(command), code="unknown_model",
                          reason=f"{command.model} is not a watched model (watched: {', '.join(watched) or 'none'}); "
                                 "use * for every model")


def answer(command: JudgeCommand, effects: Sequence[Effect], *, new: bool) -> Answer | None:
    """The answer to ``command`` once it is folded into every model it concerns.

    Args:
        command: the lift or mode command.
        effects: every effect folding it produced, all models together.
        new: whether any model had not folded this command id before.

    Returns:
        The answer, or ``None`` for a command folded before.
    """
    if not new:
        return None
    decisions = [d for d in effects if isinstance(d, Decision)
                 and d.decision_id == ids.decision_id(d.model, d.provider, d.action, command.command_id)]
    made = [DecisionMade(decision_id=d.decision_id, model=d.model, provider=d.provider, action=d.action, at=d.at,
                         detail=d.detail) for d in decisions][:ANSWER_MODELS_MAX]
    if isinstance(command, LiftSuspension) and not made:
        scope = "any model" if command.model == "*" else command.model
        return CommandRefused(**_base(command), code="not_suspended",
                              reason=f"{command.provider} is not suspended on {scope}")
    return CommandApplied(**_base(command), decisions=made, detail="; ".join(d.detail for d in made)[:4000])
