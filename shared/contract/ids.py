"""Deterministic message ids (the ``Nats-Msg-Id`` header).

The same fact always gets the same id, so a retry after a crash, or a
redelivered task, is dropped by JetStream's duplicate window instead of being
stored twice (FastStream's and nats-py's documentation).
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from reverie_canary.shared.contract.timefmt import utc_text


def cycle_id(model: str, start: datetime) -> str:
    """``<model>@<start UTC ISO-8601>``: names one probe cycle of one model."""
    return f"{model}@{utc_text(start, precision='us')}"


def cycle_no(epoch_s: float, interval_s: float) -> int:
    """Number of the cycle that contains ``epoch_s`` (cycles start at multiples of the interval)."""
    return int(epoch_s // interval_s)


def task_id(model: str, cycle_no: int, provider: str, kind: str, language: str | None, variant: str = "") -> str:
    """One probe of one provider in one cycle (a kind's variant, when it has one, last)."""
    base = f"t|{model}|{cycle_no}|{provider}|{kind}|{language or '-'}"
    return f"{base}|{variant}" if variant else base


def confirm_cycle(model: str, cycle_no: int) -> str:
    """The ``cycle`` of a confirmation probe sent during cycle ``cycle_no``: no cycle plans it."""
    return f"confirm|{model}|{cycle_no}"


def confirm_task_id(model: str, cycle_no: int, provider: str, kind: str, number: int) -> str:
    """The ``number``-th confirmation probe of ``provider`` sent during cycle ``cycle_no``."""
    return f"confirm|{model}|{cycle_no}|{provider}|{kind}|{number}"


def confirmation_id(task_id: str) -> str:
    """The LiveConfirmation that answers the confirmation probe ``task_id``."""
    return f"confirmation|{task_id}"


def discovered_id(model: str, cycle_no: int, part: int = 0) -> str:
    """The EndpointsDiscovered of a cycle (part 0 keeps the id of a single-message listing)."""
    return f"disc|{model}|{cycle_no}" if part == 0 else f"disc|{model}|{cycle_no}|part{part}"


def closed_id(model: str, cycle_no: int) -> str:
    """The CycleClosed of a cycle."""
    return f"close|{model}|{cycle_no}"


def sized_id(cycle_no: int) -> str:
    """The CycleSized of a cycle (every model's)."""
    return f"sized|{cycle_no}"


def unplanned_id(model: str, cycle_no: int) -> str:
    """The CycleUnplanned of a cycle discovery could not plan."""
    return f"unplanned|{model}|{cycle_no}"


def verdict_id(model: str, cycle_no: int) -> str:
    """The CycleVerdict of a cycle."""
    return f"verdict|{model}|{cycle_no}"


def decision_id(model: str, provider: str, action: str, anchor: str) -> str:
    """A judge decision; ``anchor`` is the cycle number or command id behind it."""
    return f"dec|{model}|{provider or '*'}|{action}|{anchor}"


def retest_id(model: str, provider: str, language: str, for_cycle_no: int) -> str:
    """A retest request for a language in a coming cycle."""
    return f"retest|{model}|{provider}|{language}|{for_cycle_no}"


def snapshot_id(model: str, version: int) -> str:
    """One IgnoreSnapshot version of a model."""
    return f"snap|{model}|{version}"


def answer_id(command_id: str) -> str:
    """The one answer (CommandApplied or CommandRefused) to an operator command."""
    return f"answer|{command_id}"


def content_id(prefix: str, payload: bytes) -> str:
    """An id from content, for messages that carry no identity of their own."""
    return f"{prefix}|{hashlib.sha256(payload).hexdigest()[:32]}"
