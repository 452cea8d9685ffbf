"""JSON encoding and strict decoding of wire messages (msgspec).

One encoder for everything; one ``Decoder`` per accepted type or tagged union,
built once at import.  Decoding is strict about types: ``"7"`` is not ``7``.
Unknown fields are accepted for forward compatibility (docs/development.md,
"Messages are types").

A judge decision is tagged twice: ``"type": "decision"`` like every message, and by
``action`` among its variants (:class:`~reverie_canary.shared.contract.events.Decision`).
msgspec tags a union by one field, so a union that holds decisions is decoded in two steps:
its ``type`` picks "a decision", then the decision union picks the variant by ``action``.  An
unknown tag is refused either way (:class:`Undecodable`, naming the field and the value):
a message of a type, or a decision of an action, that this code does not know is
dead-lettered with that reason, never read as another.  A reason code it does not know is
carried: ``reason`` is a free string on the wire.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any, TypeVar, Union

import msgspec

from reverie_canary.client.served import LiveCounts, ServedCounts
from reverie_canary.shared.contract.bounds import MAX_PAYLOAD, MESSAGE_MAX_BYTES, free_json_checker
from reverie_canary.shared.contract.commands import (
    VERBS,
    AddOverride,
    LiftSuspension,
    OperatorCommand,
    ReloadExclusions,
    RemoveOverride,
    ResendNotices,
    SetMode,
    SetQuantizationFloor,
)
from reverie_canary.shared.contract.errors import Oversize, Rejected, Undecodable, UnsupportedVersion
from reverie_canary.shared.contract.events import (
    DECISION_VARIANTS,
    SCHEMA_VERSION,
    AnyDecision,
    CommandApplied,
    CommandRefused,
    CycleClosed,
    CycleSized,
    CycleUnplanned,
    CycleVerdict,
    DeadLetter,
    Decision,
    EndpointsDiscovered,
    LiveConfirmation,
    NoticeDeadLettered,
    NoticesResent,
    ProbeResult,
    ProbeTask,
    RetestRequested,
)
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


def encode(message: Any) -> bytes:
    """Encode a Struct (or plain data) as JSON bytes."""
    return _encoder.encode(message)


class _Envelope(msgspec.Struct):
    """The two fields of any message that say what it is: its type tag and schema version."""

    type: str = "?"
    v: Any = None


_envelope = msgspec.json.Decoder(_Envelope)


class _DecisionTag(msgspec.Struct, frozen=True, tag_field="type", tag="decision"):
    """Stands for a decision in a union tagged by ``type``: its bytes are decoded again as :data:`AnyDecision`."""


def _members(type_: Any) -> tuple[Any, ...]:
    """The members of a union (``A | B`` or ``Union[A, B]``), or ``(type_,)``."""
    if isinstance(type_, types.UnionType) or typing.get_origin(type_) is Union:
        return typing.get_args(type_)
    return (type_,)


def _is_decision(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, Decision)


class UnionDecoder:
    """A msgspec decoder of a type or tagged union, decisions among them decoded in two steps; no bounds.

    For stored copies of messages (a service's outbox) whose bounds were never the wire's;
    wire messages are decoded by a :class:`Codec`.  ``decode`` raises what msgspec raises
    (``msgspec.DecodeError``, ``msgspec.ValidationError``).
    """

    def __init__(self, type_: Any) -> None:
        members = _members(type_)
        others = tuple(t for t in members if not _is_decision(t))
        #: the decoder of the union's decisions when the first step picks one (``None``: no second step)
        self._decisions: msgspec.json.Decoder[Any] | None = None
        #: the types the message may be, decisions as :data:`AnyDecision` (for what inspects them)
        self.others: Any = Union[others] if others else None  # noqa: UP007 (a tuple of types)
        self.has_decisions = len(others) < len(members)
        if self.has_decisions:  # decisions among them: every variant, tagged by action
            if others:
                self._decisions = msgspec.json.Decoder(AnyDecision)
                type_ = Union[(*others, _DecisionTag)]  # noqa: UP007 (a tuple of types)
            else:
                type_ = AnyDecision
        self._decoder = msgspec.json.Decoder(type_)

    def decode(self, data: bytes | str) -> Any:
        """Decode ``data`` as one of the types (a decision as its variant)."""
        message = self._decoder.decode(data)
        if isinstance(message, _DecisionTag):
            assert self._decisions is not None  # only a union with decisions decodes the stand-in
            message = self._decisions.decode(data)
        return message


class Codec:
    """A strict decoder for one type or tagged union of wire messages.

    A union that holds :class:`Decision` (or any of its variants) decodes every variant of it,
    in two steps (the module's docstring says why).
    """

    def __init__(self, type_: Any, name: str) -> None:
        self.name = name
        self._decoder = UnionDecoder(type_)
        self._free_json = free_json_checker(self._decoder.others) if self._decoder.others is not None else None
        self._free_json_decision = free_json_checker(AnyDecision) if self._decoder.has_decisions else None

    def decode(self, data: bytes | str) -> Any:
        """Decode ``data``.

        Raises:
            Oversize: when ``data`` is larger than ``MESSAGE_MAX_BYTES`` (above NATS's
                ``max_payload`` it is refused unread; below, a field out of its bound
                is named instead when there is one).
            UnsupportedVersion: when its ``v`` is not a schema version this code reads.
            Undecodable: when the bytes are not JSON or do not match the type;
                the message says which field and why.
        """
        size = len(data.encode() if isinstance(data, str) else data)
        if size > MAX_PAYLOAD:  # no valid message is larger than NATS carries: not even read
            raise Oversize(f"not a valid {self.name}: {size} bytes, above NATS's max_payload of {MAX_PAYLOAD}")
        try:
            message = self._decoder.decode(data)
        except msgspec.ValidationError as exc:
            version = self._version_problem(data) if str(exc).endswith("at `$.v`") else None
            if version is not None:
                raise UnsupportedVersion(version) from exc
            raise Undecodable(f"not a valid {self.name}: {exc}{_unknown_action(exc)}") from exc
        except msgspec.DecodeError as exc:
            raise Undecodable(f"not a valid {self.name}: {exc}") from exc
        except RecursionError as exc:  # msgspec skips an unknown field recursively
            raise Undecodable(f"not a valid {self.name}: JSON nested too deeply") from exc
        free_json = self._free_json_decision if isinstance(message, Decision) else self._free_json
        if free_json is not None:
            try:
                free_json(message, "$")
            except ValueError as exc:
                raise Undecodable(f"not a valid {self.name}: free-form JSON above its bound: {exc}") from exc
        if size > MESSAGE_MAX_BYTES:  # a field out of bounds was named above; this is the whole message
            raise Oversize(f"not a valid {self.name}: {size} bytes, above the bound of {MESSAGE_MAX_BYTES} "
                           "that every wire message keeps")
        return message

    def _version_problem(self, data: bytes | str) -> str | None:
        """The refusal of an integer ``v`` out of range (``None``: ``v`` is not an integer, a plain type error)."""
        try:
            env = _envelope.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if not isinstance(env.v, int) or isinstance(env.v, bool):
            return None
        return (f"not a valid {self.name}: unsupported schema version {env.v} of {env.type!r} "
                f"(this service reads version 1 to {SCHEMA_VERSION}); refused, not read as another version")


def wire_types(types: tuple[type, ...]) -> tuple[type, ...]:
    """``types`` with :class:`Decision` in place of each of its variants (:data:`DECISION_VARIANTS`), in order.

    For what describes the wire type by type (the AsyncAPI document, the schemas): a decision
    is a message of one of its variants' schemas.
    """
    out: list[type] = []
    for t in types:
        out += [v for v in (DECISION_VARIANTS if t is Decision else (t,)) if v not in out]
    return tuple(out)


def message_name(message: Any) -> str:
    """The name of ``message``'s type as spans, logs and tables know it: ``Decision`` for every decision variant.

    A decision's variant (``Suspended``, ``SuspensionEnded`` ...) is in its ``action``; the name
    a trace shows (``router Decision``) and a log line counts stays the message's.
    """
    return "Decision" if isinstance(message, Decision) else type(message).__name__


def _unknown_action(exc: msgspec.ValidationError) -> str:
    """What an unknown decision action means, added to msgspec's message (``""`` for another fault)."""
    if not str(exc).endswith("at `$.action`") or not str(exc).startswith("Invalid value"):
        return ""
    return (" (a decision action this service does not know, perhaps a newer judge's: refused, not read as "
            f"another; it knows {', '.join(sorted(t.action for t in typing.get_args(AnyDecision)))})")


ENDPOINTS_OR_CLOSE = Codec(EndpointsDiscovered | CycleClosed | CycleUnplanned, "discovery event")
PROBE_TASK = Codec(ProbeTask, "ProbeTask")
PROBE_RESULT = Codec(ProbeResult, "ProbeResult")
DECISION = Codec(Decision, "Decision")
VERDICT = Codec(CycleVerdict, "CycleVerdict")
RETEST = Codec(RetestRequested, "RetestRequested")
SNAPSHOT = Codec(IgnoreSnapshot, "IgnoreSnapshot")
SERVED = Codec(ServedCounts, "ServedCounts")
LIVE = Codec(LiveCounts, "LiveCounts")
DEAD_LETTER = Codec(DeadLetter, "DeadLetter")
COMMAND = Codec(OperatorCommand, "operator command")
NOTICE_DEAD = Codec(NoticeDeadLettered, "NoticeDeadLettered")
RESEND = Codec(ResendNotices, "ResendNotices")
RESENT = Codec(NoticesResent, "NoticesResent")
ANSWER = Codec(CommandApplied | CommandRefused, "command answer")
SIZED = Codec(CycleSized, "CycleSized")
CONFIRMATION = Codec(LiveConfirmation, "LiveConfirmation")

#: Every tagged message type of the log, for replay and audits.
LOG_EVENT = Codec(
    EndpointsDiscovered
    | CycleClosed
    | CycleUnplanned
    | ProbeResult
    | CycleVerdict
    | Decision
    | RetestRequested
    | IgnoreSnapshot
    | AddOverride
    | RemoveOverride
    | LiftSuspension
    | SetMode
    | ReloadExclusions
    | SetQuantizationFloor
    | CommandApplied
    | CommandRefused
    | ServedCounts
    | LiveCounts
    | CycleSized
    | LiveConfirmation,
    "log event",
)

#: Every message type on the wire, the work-queue tasks and dead letters included.
#: A decision is one of its variants (:data:`~reverie_canary.shared.contract.events.DECISION_VARIANTS`), each a
#: message of its own schema on the decisions subjects.
WIRE_TYPES = (EndpointsDiscovered, CycleClosed, CycleUnplanned, ProbeTask, ProbeResult, CycleVerdict, *DECISION_VARIANTS,
              RetestRequested,
              IgnoreSnapshot, DeadLetter, AddOverride, RemoveOverride, LiftSuspension, SetMode, ReloadExclusions,
              SetQuantizationFloor, NoticeDeadLettered, ResendNotices, NoticesResent, CommandApplied, CommandRefused,
              ServedCounts, LiveCounts, CycleSized, LiveConfirmation)

ANY = Codec(
    EndpointsDiscovered | CycleClosed | CycleUnplanned | ProbeTask | ProbeResult | CycleVerdict | Decision
    | RetestRequested | IgnoreSnapshot | DeadLetter | AddOverride | RemoveOverride | LiftSuspension | SetMode | ReloadExclusions
    | SetQuantizationFloor | NoticeDeadLettered | ResendNotices | NoticesResent
    | CommandApplied | CommandRefused | ServedCounts | LiveCounts | CycleSized | LiveConfirmation,
    "message",
)


#: Which message types may arrive on each subject family (``canary.<family>.``).
#: Publish permissions are per subject (shared/nats/server.conf), so a type that
#: arrives on another family's subject was published by someone not allowed to
#: publish it: a prober's credential cannot pass off a lift as a probe result.
ORIGINS: dict[str, tuple[type, ...]] = {
    "discovery": (EndpointsDiscovered, CycleClosed, CycleUnplanned),
    "tasks": (ProbeTask,),
    "results": (ProbeResult,),
    "verdicts": (CycleVerdict,),
    "decisions": (Decision,),
    "retest": (RetestRequested,),
    "confirmations": (LiveConfirmation,),  # the judge's answers of confirmation probes to live failures
    "routing": (IgnoreSnapshot,),
    "ops": (AddOverride, RemoveOverride, LiftSuspension, SetMode, ReloadExclusions, SetQuantizationFloor),
    "deadletter": (DeadLetter,),
    "notices": (NoticeDeadLettered, ResendNotices, NoticesResent),
    "answers": (CommandApplied, CommandRefused),
    "served": (ServedCounts,),  # chat backends' counts per provider (the backend user publishes them)
    "live": (LiveCounts,),  # chat backends' reply outcomes per provider and reason (the backend user publishes them)
    "cycles": (CycleSized,),  # discovery's sizing of a cycle of every model (no model token)
}
#: ``canary.notices.<what>``: the one type of each.
NOTICE_ORIGINS: dict[str, type] = {"dead": NoticeDeadLettered, "resend": ResendNotices, "resent": NoticesResent}


@functools.lru_cache(maxsize=8192)
def _decoded_token(token: str) -> str:
    """:func:`reverie_canary.shared.contract.subjects.decode_token`, cached: a fleet's subjects repeat every cycle."""
    from reverie_canary.shared.contract.subjects import decode_token

    return decode_token(token)


@functools.lru_cache(maxsize=16384)
def _subject_tokens(subject: str) -> tuple[str, ...]:
    """The decoded tokens of ``subject`` after ``canary.<family>``, cached: a fleet's subjects repeat every cycle.

    Raises:
        SubjectError: a token that is not an encoding (not cached: it is raised again).
    """
    return tuple(_decoded_token(t) for t in subject.split(".")[2:])


def check_origin(subject: str, message: Any) -> None:
    """Refuse a message that does not belong on the subject it arrived on.

    The type must belong to the subject's family; an operator command must
    arrive on its own verb (``canary.ops.lift`` for a lift); the model (and
    provider) tokens of the subject must name the message's own.

    Raises:
        Rejected: naming the type, the subject and what belongs there.
    """
    from reverie_canary.shared.contract.subjects import SubjectError

    parts = subject.split(".")
    family = parts[1] if len(parts) > 2 and parts[0] == "canary" else ""
    allowed = ORIGINS.get(family, ())
    kind = message_name(message)
    if not isinstance(message, allowed):
        names = ", ".join(t.__name__ for t in allowed) or "nothing this service reads"
        raise Rejected(f"a {kind} on {subject}: only {names} may arrive there", subject=subject)
    try:
        tokens = list(_subject_tokens(subject))
    except SubjectError as exc:
        raise Rejected(f"a {kind} on a malformed subject {subject}: {exc}", subject=subject) from exc
    if family == "notices":
        if NOTICE_ORIGINS.get(parts[2] if len(parts) > 2 else "") is not type(message):
            raise Rejected(f"a {kind} on {subject}: it does not belong there", subject=subject)
        return
    if family == "answers":
        assert isinstance(message, CommandApplied | CommandRefused)  # the family's origins
        if tokens != [message.service, message.command_id]:
            raise Rejected(f"a {kind} of {message.service} for command {message.command_id!r} on {subject}",
                           subject=subject)
        return
    if family == "cycles":
        if tokens != ["sized"]:
            raise Rejected(f"a {kind} on {subject}: it belongs on canary.cycles.sized", subject=subject)
        return
    if family == "ops":
        if tokens != [VERBS[type(message)]]:
            raise Rejected(f"a {kind} on {subject}: it belongs on canary.ops.{VERBS[type(message)]}", subject=subject)
        return
    model = getattr(message, "model", None)
    if family in ("discovery", "tasks", "results", "verdicts", "decisions", "retest", "routing", "served", "live") and \
            tokens[:1] != [model]:
        raise Rejected(f"a {kind} of model {model!r} on {subject}", subject=subject)
    if family in ("tasks", "results", "decisions"):
        provider = getattr(message, "provider", "") or "*"
        if tokens[1:2] != [provider]:
            raise Rejected(f"a {kind} of provider {provider!r} on {subject}", subject=subject)
