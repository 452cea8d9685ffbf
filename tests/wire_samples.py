"""Wire messages built from their types: the fields without a bound, and the largest instance allowed.

Both walk ``msgspec.inspect`` type information, so a field added to any wire type
is covered without a list to keep up to date (``codec.WIRE_TYPES`` is the table).

- :func:`unbounded` names every string, list, mapping or ``Any`` without a
  maximum length (free-form JSON, marked ``Meta(extra={"free_json": True})``,
  counts as bounded: the codec checks it with
  :func:`reverie_canary.shared.contract.bounds.check_free_json`).
- :func:`largest` builds the largest instance the bounds allow: every string
  at its maximum length in the character that encodes longest under its
  pattern (a control character is 6 bytes of JSON, ``\\u0001``), every list
  and mapping full, every optional field set.  It must decode again.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec
import msgspec.inspect as mi

from reverie_canary.shared.contract.bounds import FREE_JSON

#: Characters tried for a string's worst case, longest JSON encoding first.
_WORST_CHARS = ("\x01", "\u2028", "\U0001F600", "\u00e9", '"', "\\", "z", "a", "0", "-")


def _string_of(t: mi.StrType, n: int | None = None, salt: int = 0) -> str:
    """The longest-encoding string ``t`` allows (``n`` characters, default its maximum)."""
    n = t.max_length if n is None else n
    n = max(n, t.min_length or 0)
    for ch in _WORST_CHARS:
        candidate = ch * n
        if salt:  # distinct values (mapping keys): vary the tail in the pattern's alphabet
            candidate = candidate[: max(0, n - 6)] + _salted(ch, salt, min(6, n))
        if t.pattern is None or re.search(t.pattern, candidate):
            return candidate
    raise AssertionError(f"no string of {n} characters matches {t.pattern!r}")


def _salted(ch: str, salt: int, width: int) -> str:
    digits = format(salt, "x").rjust(width, "0")[-width:]
    return "".join(ch if d == "0" else d for d in digits) if ch in "za0-" else digits


def unbounded(type_: Any) -> list[str]:
    """Paths (``ProbeResult.checks[].evidence``) of every field without a maximum length."""
    out: list[str] = []
    seen: set[Any] = set()

    def walk(t: mi.Type, path: str) -> None:
        match t:
            case mi.Metadata():
                if (t.extra or {}).get("free_json") and isinstance(t.type, mi.DictType) and t.type.max_length:
                    return
                walk(t.type, path)
            case mi.StrType() | mi.BytesType() | mi.ByteArrayType():
                if t.max_length is None:
                    out.append(path)
            case mi.ListType() | mi.SetType() | mi.FrozenSetType() | mi.VarTupleType():
                if t.max_length is None:
                    out.append(path)
                walk(t.item_type, f"{path}[]")
            case mi.DictType():
                if t.max_length is None:
                    out.append(path)
                walk(t.key_type, f"{path}{{key}}")
                walk(t.value_type, f"{path}{{}}")
            case mi.AnyType():
                out.append(f"{path} (Any)")
            case mi.UnionType():
                for member in t.types:
                    walk(member, path)
            case mi.StructType():
                if t.cls in seen:
                    return
                seen.add(t.cls)
                for f in t.fields:
                    walk(f.type, f"{path}.{f.name}" if path else f"{t.cls.__name__}.{f.name}")
                seen.discard(t.cls)
            case _:
                pass

    walk(mi.type_info(type_), "")
    return out


def _free_json_largest() -> dict[str, Any]:
    """The largest evidence ``check_free_json`` allows: all text in long strings of 6-byte characters."""
    limits = FREE_JSON
    out: dict[str, Any] = {}
    text = limits.text
    keys = min(limits.keys, limits.items)
    for i in range(keys):
        key = f"k{i:02d}"
        text -= len(key)
        out[key] = 0
    i = 0
    while text > 0:
        n = min(limits.string, text)
        out[f"k{i:02d}"] = "\x01" * n
        text -= n
        i += 1
    for j in range(i, keys):
        out[f"k{j:02d}"] = -1.2345678901234567e-300
    return out


def largest(type_: Any) -> Any:
    """The largest instance of ``type_`` its bounds allow (see the module docstring)."""
    base = datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)
    counter = [0]

    def build(t: mi.Type) -> Any:
        match t:
            case mi.Metadata():
                if (t.extra or {}).get("free_json"):
                    return _free_json_largest()
                return build(t.type)
            case mi.StrType():
                counter[0] += 1
                return _string_of(t)
            case mi.BytesType() | mi.ByteArrayType():
                return b"\xff" * (t.max_length or 0)
            case mi.IntType():
                if t.le is not None or t.lt is not None:
                    return t.le if t.le is not None else t.lt - 1
                return 2 ** 63 - 1 if t.ge is not None or t.gt is not None else -(2 ** 63)
            case mi.FloatType():
                if t.le is not None or t.lt is not None or t.ge is not None:
                    return float(t.ge if t.ge is not None else (t.le if t.le is not None else t.lt))
                return -1.2345678901234567e-300
            case mi.BoolType():
                return False
            case mi.NoneType():
                return None
            case mi.DateTimeType():
                return base
            case mi.TimeDeltaType():
                return timedelta(days=-99999)
            case mi.LiteralType():
                return max(t.values, key=lambda v: len(msgspec.json.encode(v)))
            case mi.ListType() | mi.VarTupleType() | mi.SetType() | mi.FrozenSetType():
                items = [build(t.item_type) for _ in range(t.max_length or 0)]
                if isinstance(t, mi.SetType | mi.FrozenSetType):
                    return set(items)
                return items
            case mi.DictType():
                key_t = t.key_type.type if isinstance(t.key_type, mi.Metadata) else t.key_type
                out = {}
                for i in range(t.max_length or 0):
                    key = _string_of(key_t, salt=i + 1) if isinstance(key_t, mi.StrType) else build(key_t)
                    out[key] = build(t.value_type)
                return out
            case mi.UnionType():
                candidates = [build(m) for m in t.types]
                return max(candidates, key=lambda c: len(msgspec.json.encode(c)))
            case mi.StructType():
                kwargs = {f.name: build(f.type) for f in t.fields}
                return t.cls(**kwargs)
            case mi.AnyType():
                raise AssertionError("an unbounded Any field cannot have a largest value")
            case _:
                raise AssertionError(f"no largest value for {t!r}")

    return build(mi.type_info(type_))


def smallest(type_: Any) -> Any:
    """A small valid instance of ``type_``: required fields only, each at its least (``"a"``, 0, the first literal)."""
    base = datetime(2026, 11, 1, tzinfo=timezone.utc)

    def build(t: mi.Type) -> Any:
        match t:
            case mi.Metadata():
                return build(t.type)
            case mi.StrType():
                n = max(1, t.min_length or 0)
                for ch in ("a", "0", "-"):
                    if t.pattern is None or re.search(t.pattern, ch * n):
                        return ch * n
                raise AssertionError(f"no short string matches {t.pattern!r}")
            case mi.IntType():
                return max(0, t.ge or 0, (t.gt + 1) if t.gt is not None else 0)
            case mi.FloatType():
                return float(t.ge or 0.0)
            case mi.BoolType():
                return False
            case mi.NoneType():
                return None
            case mi.DateTimeType():
                return base
            case mi.LiteralType():
                return t.values[0]
            case mi.ListType() | mi.VarTupleType():
                return []
            case mi.DictType():
                return {}
            case mi.UnionType():
                members = [m for m in t.types if not isinstance(m, mi.NoneType)]
                return build(members[0]) if members else None
            case mi.StructType():
                return t.cls(**{f.name: build(f.type) for f in t.fields if f.required})
            case _:
                raise AssertionError(f"no small value for {t!r}")

    return build(mi.type_info(type_))
