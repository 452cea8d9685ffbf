"""The judge's ``Decision`` as it was before its variants: one struct, ``action`` a field, ``until`` optional.

A frozen copy of the wire type every decision on the log up to now was encoded with (tag
``decision``, schema version 1), kept to prove that the tagged variants read those bytes and
write bytes it reads (``tests/unit/test_decision_variants.py``).  Never used by the services.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from reverie_canary.shared.contract.events import (
    MAX_ENDPOINTS_PER_MODEL,
    MAX_PROBES_PER_ENDPOINT,
    Event,
    Excerpt,
    HeldSuspension,
    Id,
    Mode,
    Reason,
    ResultRef,
    Slug,
    Token,
    UtcDatetime,
)

LegacyAction = Literal[
    "suspend", "end", "floor_held", "would_suspend", "would_end", "common_mode", "control_passed",
    "pin_violated", "unjudgeable", "mode_changed", "canary_blind", "canary_sees", "suspension_held",
]


class LegacyDecision(Event, frozen=True, kw_only=True, tag="decision"):
    """The decision before the variants, field for field."""

    decision_id: Slug
    model: Slug
    provider: Id = ""
    action: LegacyAction
    reason: Reason = ""
    detail: Excerpt = ""
    until: UtcDatetime | None = None
    ladder_level: int = 0
    cycles: Annotated[list[Id], Meta(max_length=32)] = []
    evidence: Annotated[list[ResultRef], Meta(max_length=MAX_PROBES_PER_ENDPOINT)] = []
    mode: Mode = "enforce"
    kind: Token | None = None
    actor: Id | None = None
    held: Annotated[list[HeldSuspension], Meta(max_length=MAX_ENDPOINTS_PER_MODEL)] = []
    routing_follows: Annotated[int, Meta(ge=0, le=4 * MAX_ENDPOINTS_PER_MODEL)] = 0
