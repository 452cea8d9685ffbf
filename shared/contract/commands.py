"""Operator commands: imperative, tagged, published on ``canary.ops.<verb>``.

Only the operators' NATS credential may publish on ``canary.ops.>`` (the server
configuration in ``shared/nats/server.conf``); every command still names its ``actor`` and
carries a ``command_id`` (its ``Nats-Msg-Id``) so that a command sent twice is
applied once (docs/concepts/routing.md).
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from reverie_canary.client.wire import SCHEMA_VERSION, Layer, Version  # noqa: F401  (Layer re-exported; defined once, with the snapshot)
from reverie_canary.shared.contract.events import JudgedKind, Mode, Slug, UtcDatetime

#: No C0 or C1 control character (nor DEL) anywhere, tab and newline included: operator free
#: text is printed on other operators' terminals, where ``ESC [2J`` would clear the screen
#: (a command holding one is refused at decoding and dead-lettered with the reason).  msgspec
#: patterns match with ``re.search``; ``.`` stops at a newline, itself a control character,
#: so the look-ahead finds the first control character wherever it is (also in ECMAScript).
NO_CONTROL = r"^(?!.*[\x00-\x1f\x7f-\x9f])"
#: An operator's free-text reason; required, so never empty nor blank (at least one non-space),
#: and without a control character.
Reason = Annotated[str, Meta(min_length=1, max_length=2000, pattern=NO_CONTROL + r".*\S")]
#: An optional free-text note of an operator (a reason where none is required).
Note = Annotated[str, Meta(max_length=2000, pattern=NO_CONTROL)]
#: A URL or a ticket an operator names.
Reference = Annotated[str, Meta(max_length=256, pattern=NO_CONTROL)]
#: A :data:`Slug` an operator types (actor, provider, model): visible ASCII without ``"`` or
#: ``\\``; ``(?!\n)`` because Python's ``$`` also matches before a final newline, which the
#: client's ``Slug`` lets through.
CommandSlug = Annotated[str, Meta(min_length=1, max_length=256, pattern=r"^[!#-\[\]-~]+(?!\n)$")]
#: A model id or ``*`` for every model.
ModelScope = CommandSlug


class Command(Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of operator commands: who asked, when (UTC), and a unique id."""

    v: Version = SCHEMA_VERSION
    command_id: Slug
    actor: CommandSlug
    at: UtcDatetime


#: The longest an operator override lasts, from its command's ``at`` to its ``expires_at`` (s):
#: 365 days.  An override is an incident's stop-gap (docs/concepts/routing.md: runtime incident
#: overrides); a defect that outlasts a year belongs in the reviewed exclusions file, dated and
#: reviewed, and a slip such as ``--for 100000d`` or ``--expires 9999-12-31`` must not mean "forever".
MAX_OVERRIDE_S = 365 * 86400.0


class AddOverride(Command, frozen=True, kw_only=True, tag="add_override"):
    """Ignore ``provider`` for ``model`` (or ``*``) now, until ``expires_at`` if given.

    ``force``: apply it past the guard rails (a provider the gateway does not
    list for the model, or fewer than ``min_hosts`` usable hosts left); the
    router's answer then says which were passed (guard rails).
    """

    provider: CommandSlug
    model: ModelScope = "*"
    reason: Reason
    expires_at: UtcDatetime | None = None
    reference: Reference = ""
    force: bool = False

    def __post_init__(self) -> None:
        """Refuse an expiry more than :data:`MAX_OVERRIDE_S` after ``at`` (at decoding: dead-lettered as undecodable).

        Raises:
            ValueError: naming the bound (msgspec reports it as a validation error).
        """
        if self.expires_at is not None and (self.expires_at - self.at).total_seconds() > MAX_OVERRIDE_S:
            raise ValueError(f"expires_at is more than {MAX_OVERRIDE_S / 86400:g} days after at, the longest an "
                             "override lasts")


class RemoveOverride(Command, frozen=True, kw_only=True, tag="remove_override"):
    """Remove the operator override of ``provider`` for ``model`` (or ``*``)."""

    provider: CommandSlug
    model: ModelScope = "*"
    reason: Note = ""


class LiftSuspension(Command, frozen=True, kw_only=True, tag="lift_suspension"):
    """End the canary suspension of ``provider`` for ``model`` at once."""

    provider: CommandSlug
    model: CommandSlug
    reason: Reason


class SetMode(Command, frozen=True, kw_only=True, tag="set_mode"):
    """Switch ``model`` (or ``*``) to observe or enforce, for one probe kind (or fact kind: ``template``) or all."""

    mode: Mode
    model: ModelScope = "*"
    kind: JudgedKind | None = None
    reason: Note = ""


class ReloadExclusions(Command, frozen=True, kw_only=True, tag="reload_exclusions"):
    """Ask the router to read the reviewed exclusions file again.

    ``force``: apply the file even if it leaves fewer than ``min_hosts`` usable hosts.
    """

    reason: Note = ""
    force: bool = False


#: The most quantizations one floor denies (every value of the enum fits).
MAX_DENIED = 16


class SetQuantizationFloor(Command, frozen=True, kw_only=True, tag="set_quantization_floor"):
    """Route ``model`` only to endpoints of a quantization the floor does not deny; ``deny`` empty: no floor.

    The router turns the floor into the snapshot's ``quantizations`` allow-list
    (OpenRouter's ``provider.quantizations``; the values and their families in
    :mod:`reverie_canary.shared.contract.quantization`): ``deny=["fp4", "int4"]`` publishes every
    other quantization.  An endpoint that declares no quantization is dropped by any
    allow-list; the router's answer counts and names them.  The capacity floor wins: when the
    allow-list would leave fewer than ``min_hosts`` usable hosts, the router allows denied
    quantizations back, most bits first (or publishes no allow-list) and says so
    (docs/concepts/routing.md, "The quantization floor").
    """

    model: CommandSlug
    deny: Annotated[list[Annotated[str, Meta(min_length=1, max_length=16, pattern=r"^[a-z0-9]+$")]],
                    Meta(max_length=MAX_DENIED)] = []
    reason: Reason


OperatorCommand = AddOverride | RemoveOverride | LiftSuspension | SetMode | ReloadExclusions | SetQuantizationFloor

#: The ``canary.ops.<verb>`` verb of each command type.
VERBS: dict[type, str] = {
    AddOverride: "override-add",
    RemoveOverride: "override-remove",
    LiftSuspension: "lift",
    SetMode: "mode",
    ReloadExclusions: "exclusions-reload",
    SetQuantizationFloor: "quant-floor",
}

#: The service that owns (and answers) each command (docs/concepts/messages.md, "Operator commands are answered by events").
OWNERS: dict[type, str] = {
    AddOverride: "router",
    RemoveOverride: "router",
    ReloadExclusions: "router",
    SetQuantizationFloor: "router",
    LiftSuspension: "judge",
    SetMode: "judge",
}


class ResendNotices(Command, frozen=True, kw_only=True, tag="resend_notices"):
    """Deliver dead-lettered notices again, through the notifier (``canary.notices.resend``).

    ``notice_ids`` names notices by notice id or webhook id (``msg_…``); ``all``
    takes every dead letter; ``channel`` limits either to one channel.  It is not
    an ``OperatorCommand`` of ``canary.ops.>``: only the notifier reads it.
    """

    notice_ids: Annotated[list[Annotated[str, Meta(min_length=1, max_length=600)]], Meta(max_length=100)] = []
    all: bool = False
    channel: Annotated[str, Meta(max_length=32)] | None = None
    reason: Note = ""
