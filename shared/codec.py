"""JSON encoding and strict decoding of wire messages (msgspec).

One encoder for everything; one ``Decoder`` per accepted type or tagged union,
built once at import.  Decoding is strict about types: ``"7"`` is not ``7``.
Unknown fields are accepted for forward compatibility (CONVENTIONS.md,
"Messages are types").
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from shared.commands import (
    AddOverride,
    LiftSuspension,
    OperatorCommand,
    ReloadExclusions,
    RemoveOverride,
    SetMode,
)
from shared.errors import Undecodable
from shared.events import (
    CycleClosed,
    CycleVerdict,
    DeadLetter,
    Decision,
    EndpointsDiscovered,
    ProbeResult,
    ProbeTask,
    RetestRequested,
)
from shared.snapshots import IgnoreSnapshot

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


def encode(message: Any) -> bytes:
    """Encode a Struct (or plain data) as JSON bytes."""
    return _encoder.encode(message)


class Codec:
    """A strict decoder for one type or tagged union of wire messages."""

    def __init__(self, type_: Any, name: str) -> None:
        self.name = name
        self._decoder = msgspec.json.Decoder(type_)

    def decode(self, data: bytes | str) -> Any:
        """Decode ``data``.

        Raises:
            Undecodable: when the bytes are not JSON or do not match the type;
                the message says which field and why.
        """
        try:
            return self._decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise Undecodable(f"not a valid {self.name}: {exc}") from exc


ENDPOINTS_OR_CLOSE = Codec(EndpointsDiscovered | CycleClosed, "discovery event")
PROBE_TASK = Codec(ProbeTask, "ProbeTask")
PROBE_RESULT = Codec(ProbeResult, "ProbeResult")
DECISION = Codec(Decision, "Decision")
VERDICT = Codec(CycleVerdict, "CycleVerdict")
RETEST = Codec(RetestRequested, "RetestRequested")
SNAPSHOT = Codec(IgnoreSnapshot, "IgnoreSnapshot")
DEAD_LETTER = Codec(DeadLetter, "DeadLetter")
COMMAND = Codec(OperatorCommand, "operator command")

#: Every tagged message type of the log, for replay and audits.
LOG_EVENT = Codec(
    EndpointsDiscovered
    | CycleClosed
    | ProbeResult
    | CycleVerdict
    | Decision
    | RetestRequested
    | IgnoreSnapshot
    | AddOverride
    | RemoveOverride
    | LiftSuspension
    | SetMode
    | ReloadExclusions,
    "log event",
)

#: Every message type on the wire, the work-queue tasks and dead letters included.
WIRE_TYPES = (EndpointsDiscovered, CycleClosed, ProbeTask, ProbeResult, CycleVerdict, Decision, RetestRequested,
              IgnoreSnapshot, DeadLetter, AddOverride, RemoveOverride, LiftSuspension, SetMode, ReloadExclusions)

ANY = Codec(
    EndpointsDiscovered | CycleClosed | ProbeTask | ProbeResult | CycleVerdict | Decision | RetestRequested
    | IgnoreSnapshot | DeadLetter | AddOverride | RemoveOverride | LiftSuspension | SetMode | ReloadExclusions,
    "message",
)
