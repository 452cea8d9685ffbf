"""What each stateful service folds, in one table: everything else about its input derives from it.

A service's input used to be listed in four places (its durable consumer's
filter, the subjects ``canary replay`` reads, the service's strict decoder and
its fold's union type) and the four drifted.
:data:`READS` says, per service, which message types it folds and the subject
family (``canary.<family>.>``) each arrives on; from it:

- :func:`filters`: the durable consumer's filter subjects, in table order;
- :func:`prefixes`: the same as prefixes, for reading the log back;
- :func:`decoder`: a strict decoder of every type that may *arrive* on those
  families (:data:`reverie_canary.shared.contract.codec.ORIGINS`), so that another
  service's command on ``canary.ops`` decodes and is skipped, not dead-lettered;
- :func:`folded`: the types the fold handles (its input union).
"""

from __future__ import annotations

from typing import Union

from reverie_canary.shared.contract.codec import ORIGINS, Codec
from reverie_canary.shared.contract.commands import (
    AddOverride,
    LiftSuspension,
    ReloadExclusions,
    RemoveOverride,
    SetMode,
    SetQuantizationFloor,
)
from reverie_canary.shared.contract.events import (
    CommandApplied,
    CommandRefused,
    CycleClosed,
    CycleSized,
    CycleUnplanned,
    CycleVerdict,
    Decision,
    EndpointsDiscovered,
    LiveConfirmation,
    ProbeResult,
)
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot
from reverie_canary.shared.contract.subjects import PREFIX

#: service -> subject family -> the message types of that family the service folds.
READS: dict[str, dict[str, tuple[type, ...]]] = {
    # docs/concepts/judge.md: discovery opens and closes cycles (or says it could
    # not plan one: the canary is blind), results fill them, the routing snapshot feeds the
    # capacity floor, the operator lifts and switches modes.
    "judge": {
        "discovery": (EndpointsDiscovered, CycleClosed, CycleUnplanned),
        "results": (ProbeResult,),
        "ops": (LiftSuspension, SetMode),
        "routing": (IgnoreSnapshot,),
    },
    # docs/concepts/routing.md: the judge's decisions, the operators' overrides, reloads and quantization floors,
    # and the endpoints the gateway lists (for the guard rails on operator commands).
    "router": {
        "decisions": (Decision,),
        "ops": (AddOverride, RemoveOverride, ReloadExclusions, SetQuantizationFloor),
        "discovery": (EndpointsDiscovered,),
    },
    # the notifier tells every decision, folds persisting states with the
    # cycle verdicts, tells each new ignore list, and each operator command by its answer.
    "notifier": {
        "decisions": (Decision,),
        "verdicts": (CycleVerdict,),
        "routing": (IgnoreSnapshot,),
        "answers": (CommandApplied, CommandRefused),
        # a cycle that cannot fit its window is told before it runs, and when one fits again
        "cycles": (CycleSized,),
        # what a pinned confirmation probe said about a provider's live failures: one notice each
        "confirmations": (LiveConfirmation,),
    },
}



def check(reads: dict[str, dict[str, tuple[type, ...]]]) -> None:
    """Refuse a table in which a service reads a type on a family where it never arrives.

    Raises:
        TypeError: naming the service, the types and the family.
    """
    for service, families in reads.items():
        for family, types in families.items():
            stray = [t.__name__ for t in types if t not in ORIGINS.get(family, ())]
            if stray:
                raise TypeError(f"{service} reads {stray} on canary.{family}, where they never arrive (codec.ORIGINS)")


check(READS)


def filters(service: str) -> list[str]:
    """``canary.<family>.>`` for each family ``service`` reads, in table order."""
    return [f"{PREFIX}.{family}.>" for family in READS[service]]


def prefixes(service: str) -> tuple[str, ...]:
    """The subject prefixes of :func:`filters` (``canary.results.``), for reading the log back."""
    return tuple(f"{PREFIX}.{family}." for family in READS[service])


def folded(service: str) -> tuple[type, ...]:
    """Every type ``service`` folds, in table order."""
    return tuple(t for types in READS[service].values() for t in types)


def arriving(service: str) -> tuple[type, ...]:
    """Every type that may arrive on the families ``service`` reads (what its decoder accepts)."""
    out: list[type] = []
    for family in READS[service]:
        out += [t for t in ORIGINS[family] if t not in out]
    return tuple(out)


def decoder(service: str) -> Codec:
    """A strict decoder of :func:`arriving` types (a tagged union), named after ``service``."""
    return Codec(Union[arriving(service)], f"{service} input")  # noqa: UP007 (a tuple of types)
