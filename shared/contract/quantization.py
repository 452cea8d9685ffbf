"""The quantizations an endpoint may declare, and how OpenRouter's ``provider.quantizations`` matches them.

One table, read by the operators' quantization floor (``SetQuantizationFloor``), the router that
turns a floor into the allow-list of a snapshot, the CLI and the read views.

Facts (OpenRouter's endpoints listing API and provider routing documentation):

- An endpoint's ``quantization`` is one of :data:`QUANTIZATIONS` or ``unknown``, or null
  (undeclared).
- ``provider.quantizations`` is an **allow-list**: only endpoints whose quantization it names are
  routed to.  ``fp4`` also admits ``mxfp4`` and ``nvfp4``; ``fp8`` also admits ``mxfp8``
  (:data:`FAMILIES`).
- An endpoint that declares no quantization (null, ``unknown``, or a value outside the enum) is
  named by no allow-list the router publishes: **an allow-list drops it**.  The router counts and
  names such endpoints in its answer, and the capacity floor may bring the list down altogether
  (docs/concepts/routing.md, "The quantization floor").
"""

from __future__ import annotations

#: The quantizations OpenRouter's listing declares (``unknown`` aside), lowest precision first.
QUANTIZATIONS: tuple[str, ...] = ("int4", "fp4", "mxfp4", "nvfp4", "fp6", "int8", "fp8", "mxfp8", "fp16",
                                  "bf16", "fp32")
#: Bits per weight of each quantization: what ``--min`` compares (``--min fp8`` denies every one with fewer bits).
BITS: dict[str, int] = {"int4": 4, "fp4": 4, "mxfp4": 4, "nvfp4": 4, "fp6": 6, "int8": 8, "fp8": 8, "mxfp8": 8,
                        "fp16": 16, "bf16": 16, "fp32": 32}
#: A name in ``provider.quantizations`` that admits its members too (OpenRouter's provider routing documentation).
FAMILIES: dict[str, tuple[str, ...]] = {"fp4": ("mxfp4", "nvfp4"), "fp8": ("mxfp8",)}
#: Quantization values that declare nothing: an allow-list drops their endpoints.
UNDECLARED: frozenset[str] = frozenset({"", "unknown"})

assert set(BITS) == set(QUANTIZATIONS) and all(m in QUANTIZATIONS for ms in FAMILIES.values() for m in ms)


def normalise(value: str | None) -> str | None:
    """An endpoint's quantization as the table spells it (lower case); ``None`` when it declares none.

    A value outside :data:`QUANTIZATIONS` is kept as given (lower case): it is declared, but no
    allow-list names it.
    """
    text = (value or "").strip().lower()
    return None if text in UNDECLARED else text


def family_of(member: str) -> str | None:
    """The family name that admits ``member`` too (``mxfp8`` -> ``fp8``); ``None`` for none."""
    return next((root for root, members in FAMILIES.items() if member in members), None)


def expand(denied: list[str] | tuple[str, ...]) -> set[str]:
    """``denied`` with the members of every denied family (``fp4`` -> ``fp4``, ``mxfp4``, ``nvfp4``)."""
    out = set(denied)
    for root in denied:
        out.update(FAMILIES.get(root, ()))
    return out


def below(minimum: str) -> list[str]:
    """The quantizations with fewer bits than ``minimum`` (``fp8`` -> ``int4 fp4 mxfp4 nvfp4 fp6``).

    Raises:
        ValueError: ``minimum`` is not in :data:`QUANTIZATIONS`.
    """
    if minimum not in BITS:
        raise ValueError(f"unknown quantization {minimum!r}; one of {', '.join(QUANTIZATIONS)}")
    return [q for q in QUANTIZATIONS if BITS[q] < BITS[minimum]]


def deny_problem(denied: list[str] | tuple[str, ...]) -> str | None:
    """Why a floor denying ``denied`` cannot be written as an allow-list, or ``None`` when it can.

    Refused: a value outside :data:`QUANTIZATIONS`, and a family member denied while its family
    name stays allowed (``mxfp8`` without ``fp8``: the gateway's ``fp8`` admits ``mxfp8``), and a
    floor that denies every quantization (an allow-list that admits nothing).
    """
    unknown = [q for q in denied if q not in BITS]
    if unknown:
        return (f"unknown quantization(s) {', '.join(unknown)}; one of {', '.join(QUANTIZATIONS)} "
                "(an endpoint that declares none cannot be denied: every floor drops it)")
    for member in denied:
        root = family_of(member)
        if root is not None and root not in denied:
            return (f"{member} cannot be denied alone: the gateway's {root} admits {member} too; "
                    f"deny {root} to drop both")
    if expand(denied) >= set(QUANTIZATIONS):
        return "the floor denies every quantization: no endpoint would be left"
    return None


def allowed(denied: list[str] | tuple[str, ...]) -> list[str]:
    """The allow-list of a floor denying ``denied``: every quantization not denied, in table order."""
    gone = expand(denied)
    return [q for q in QUANTIZATIONS if q not in gone]


def admits(allow: list[str] | tuple[str, ...], quantization: str | None) -> bool:
    """Whether the allow-list ``allow`` routes to an endpoint of ``quantization`` (empty list: no filter)."""
    if not allow:
        return True
    q = normalise(quantization)
    return q is not None and q in expand(list(allow))
