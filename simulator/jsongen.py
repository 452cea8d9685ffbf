"""A plausible instance of a JSON schema, as a model under ``response_format`` would write it.

Covers what structured-output requests use in practice: ``type`` (or a list of
types), ``enum``, ``const``, ``properties`` / ``required`` /
``additionalProperties``, ``items`` / ``prefixItems`` / ``minItems`` /
``maxItems`` / ``uniqueItems``, numeric bounds and ``multipleOf``, string
lengths and common ``format``\\s, ``anyOf`` / ``oneOf`` (first non-null branch),
``allOf`` (merged) and local ``$ref``.  Values are chosen from the property
name (``city`` -> a harbour town, ``temp_c`` -> a temperature) with a seeded
generator.  ``pattern`` is honoured only when a candidate happens to match.

Why not a library: none of the declared dependencies generates instances;
``hypothesis-jsonschema`` would give valid but implausible values and is not a
dependency.
"""

from __future__ import annotations

import math
import random
import re
import uuid
from collections.abc import Callable
from typing import Any

_CITIES = ("Lisbon", "Porto", "Brest", "Galway", "Bergen", "Valparaíso", "Cádiz", "Aberdeen")
_COUNTRIES = ("Portugal", "France", "Ireland", "Norway", "Chile", "Spain", "Scotland")
_WEATHER = ("clear sky", "light rain", "thick fog", "strong wind", "overcast", "storm approaching")
_WORDS = ("lantern", "harbour", "tide", "beacon", "gull", "reef", "anchor", "compass")
_NAMES = ("Mira", "Tomas", "Ines", "Elias", "Noor")
_MAX_DEPTH = 8


class _Generator:
    def __init__(self, root: dict[str, Any], rng: random.Random, sentence: Callable[[], str]) -> None:
        self.root = root
        self.rng = rng
        self.sentence = sentence

    def resolve(self, schema: Any, depth: int = 0) -> dict[str, Any]:
        if schema is True or schema is None:
            return {}
        if schema is False or not isinstance(schema, dict):
            return {}
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and depth < _MAX_DEPTH:
            target: Any = self.root
            for part in ref.lstrip("#").strip("/").split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part, {}) if isinstance(target, dict) else {}
            merged = {**self.resolve(target, depth + 1), **{k: v for k, v in schema.items() if k != "$ref"}}
            return merged
        return schema

    def value(self, schema: Any, name: str = "", depth: int = 0) -> Any:
        s = self.resolve(schema)
        if "const" in s:
            return s["const"]
        if isinstance(s.get("enum"), list) and s["enum"]:
            return self.rng.choice(s["enum"])
        for key in ("anyOf", "oneOf"):
            branches = s.get(key)
            if isinstance(branches, list) and branches:
                usable = [b for b in branches if self.resolve(b).get("type") != "null"] or branches
                outer = {k: v for k, v in s.items() if k not in ("anyOf", "oneOf")}
                return self.value({**outer, **self.resolve(usable[0])}, name, depth)
        if isinstance(s.get("allOf"), list):
            merged = {k: v for k, v in s.items() if k != "allOf"}
            for part in s["allOf"]:
                part = self.resolve(part)
                for k, v in part.items():
                    if k == "properties":
                        merged["properties"] = {**merged.get("properties", {}), **v}
                    elif k == "required":
                        merged["required"] = sorted(set(merged.get("required", [])) | set(v))
                    else:
                        merged.setdefault(k, v)
            return self.value(merged, name, depth)
        kind = _type_of(s)
        if depth > _MAX_DEPTH:
            return {"object": {}, "array": [], "string": "", "integer": 0, "number": 0, "boolean": False}.get(kind)
        if kind == "object":
            return self.obj(s, depth)
        if kind == "array":
            return self.array(s, name, depth)
        if kind == "integer":
            return self.number(s, name, integer=True)
        if kind == "number":
            return self.number(s, name, integer=False)
        if kind == "boolean":
            return self.rng.random() < 0.7
        if kind == "null":
            return None
        return self.string(s, name)

    def obj(self, s: dict[str, Any], depth: int) -> dict[str, Any]:
        props: dict[str, Any] = s.get("properties") or {}
        required: list[str] = [k for k in s.get("required", []) if isinstance(k, str)]
        out: dict[str, Any] = {}
        for key, sub in props.items():
            out[key] = self.value(sub, key, depth + 1)
        extra = s.get("additionalProperties", True)
        for key in required:
            if key not in out:
                out[key] = self.value(extra if isinstance(extra, dict) else {"type": "string"}, key, depth + 1)
        if not props and not required and extra is not False:
            out["note"] = self.sentence()
        return out

    def array(self, s: dict[str, Any], name: str, depth: int) -> list[Any]:
        lo = int(s.get("minItems", 0))
        hi = int(s.get("maxItems", max(lo, 3)))
        count = max(lo, min(hi, 2))
        prefix = s.get("prefixItems") if isinstance(s.get("prefixItems"), list) else []
        items = s.get("items", {})
        singular = name[:-1] if name.endswith("s") else name
        out: list[Any] = []
        attempts = 0
        while len(out) < max(count, len(prefix)) and attempts < 50:
            attempts += 1
            i = len(out)
            sub = prefix[i] if i < len(prefix) else items
            item = self.value(sub, singular, depth + 1)
            if s.get("uniqueItems") and item in out:
                constrained = any(k in self.resolve(sub) for k in ("enum", "const", "pattern", "format"))
                plain = isinstance(item, str) and not constrained
                if not plain or attempts < 10:
                    continue
                item = f"{item} {i + 1}"
            out.append(item)
        return out

    def number(self, s: dict[str, Any], name: str, *, integer: bool) -> int | float:
        n = name.lower()
        if "temp" in n:
            v: float = self.rng.uniform(8.0, 24.0)
        elif "wind" in n or "speed" in n:
            v = self.rng.uniform(10.0, 60.0)
        elif "humid" in n or "percent" in n or "pct" in n:
            v = self.rng.uniform(40.0, 95.0)
        elif n in ("lat", "latitude"):
            v = self.rng.uniform(36.0, 60.0)
        elif n in ("lon", "lng", "longitude"):
            v = self.rng.uniform(-10.0, 5.0)
        elif "year" in n:
            v = self.rng.randint(1890, 2026)
        elif "prob" in n or "confidence" in n or "score" in n:
            v = self.rng.uniform(0.5, 0.99)
        else:
            v = self.rng.uniform(1.0, 40.0)
        lo, lo_open = _bound(s, "minimum", "exclusiveMinimum")
        hi, hi_open = _bound(s, "maximum", "exclusiveMaximum")
        a = -math.inf if lo is None else lo
        b = math.inf if hi is None else hi
        if not a <= v <= b:
            if lo is not None and hi is not None:
                v = a + (b - a) * self.rng.uniform(0.25, 0.75)
            elif lo is not None:
                v = a + self.rng.uniform(1.0, 10.0)
            else:
                v = b - self.rng.uniform(1.0, 10.0)

        def inside(x: float) -> bool:
            return (x > a if lo_open else x >= a) and (x < b if hi_open else x <= b)

        step = s.get("multipleOf")
        if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0:
            k = round(v / step)
            for cand in (k, k + 1, k - 1, math.ceil(a / step) if lo is not None else k,
                         math.floor(b / step) if hi is not None else k):
                if inside(cand * step):
                    k = cand
                    break
            x = k * step
            return int(round(x)) if integer or float(step).is_integer() else round(x, 10)
        if integer:
            edges = ([math.floor(a) + 1] if lo is not None else []) + ([math.ceil(b) - 1] if hi is not None else [])
            for cand in (round(v), math.ceil(v), math.floor(v), *edges):
                if inside(cand):
                    return cand
            return int(round(v))
        x = round(v, 1)
        return x if inside(x) else v

    def string(self, s: dict[str, Any], name: str) -> str:
        fmt = s.get("format")
        n = name.lower()
        if fmt == "date-time":
            text = f"2026-08-{self.rng.randint(10, 28)}T0{self.rng.randint(5, 9)}:30:00Z"
        elif fmt == "date":
            text = f"2026-08-{self.rng.randint(10, 28)}"
        elif fmt == "time":
            text = f"0{self.rng.randint(5, 9)}:30:00"
        elif fmt == "email":
            text = "keeper@lighthouse.example"
        elif fmt in ("uri", "url", "iri"):
            text = f"https://lighthouse.example/log/{self.rng.randint(1, 99)}"
        elif fmt == "uuid" or n in ("id", "uuid") or n.endswith("_id"):
            text = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        elif fmt == "hostname":
            text = "lighthouse.example"
        elif fmt == "ipv4":
            text = f"192.0.2.{self.rng.randint(1, 254)}"
        elif fmt == "ipv6":
            text = f"2001:db8::{self.rng.randint(1, 254):x}"
        elif any(k in n for k in ("city", "town", "port", "location", "place")):
            text = self.rng.choice(_CITIES)
        elif "country" in n:
            text = self.rng.choice(_COUNTRIES)
        elif n in ("name", "keeper", "character", "author", "first_name", "speaker") or n.endswith("_name"):
            text = self.rng.choice(_NAMES)
        elif any(k in n for k in ("summary", "condition", "weather", "sky", "forecast")):
            text = self.rng.choice(_WEATHER)
        elif any(k in n for k in ("description", "text", "reply", "message", "content", "story", "comment", "note")):
            text = self.sentence()
        elif "lang" in n:
            text = "en"
        elif "color" in n or "colour" in n:
            text = self.rng.choice(("white", "red", "green"))
        else:
            text = self.rng.choice(_WORDS)
        pattern = s.get("pattern")
        if isinstance(pattern, str):
            try:
                regex = re.compile(pattern)
            except re.error:
                regex = None
            if regex is not None and not regex.search(text):
                for candidate in (*_WORDS, *_CITIES, *_NAMES, "0", "1", "a", "A", "x1"):
                    if regex.search(candidate):
                        text = candidate
                        break
        lo = int(s.get("minLength", 0))
        hi = s.get("maxLength")
        while len(text) < lo:
            text = f"{text} {self.rng.choice(_WORDS)}"
        if isinstance(hi, int) and len(text) > hi:
            text = text[:hi].rstrip() if hi > 0 else ""
            text = text + "x" * (lo - len(text)) if len(text) < lo else text
        return text


def _bound(s: dict[str, Any], inclusive: str, exclusive: str) -> tuple[float | None, bool]:
    """Return the bound and whether it is open; handles Draft 4 boolean ``exclusive*``."""
    ex = s.get(exclusive)
    inc = s.get(inclusive)
    if isinstance(ex, bool):
        return (inc if isinstance(inc, (int, float)) else None), ex
    if isinstance(ex, (int, float)):
        if isinstance(inc, (int, float)) and not isinstance(inc, bool):
            tighter_inc = inc > ex if exclusive == "exclusiveMinimum" else inc < ex
            if tighter_inc:
                return inc, False
        return ex, True
    return (inc if isinstance(inc, (int, float)) and not isinstance(inc, bool) else None), False


def _type_of(s: dict[str, Any]) -> str:
    t = s.get("type")
    if isinstance(t, list):
        usable = [x for x in t if x != "null"]
        t = usable[0] if usable else "null"
    if isinstance(t, str):
        return t
    if "properties" in s or "required" in s or "additionalProperties" in s:
        return "object"
    if "items" in s or "prefixItems" in s:
        return "array"
    if any(k in s for k in ("minimum", "maximum", "multipleOf")):
        return "number"
    return "string"


def instance(schema: dict[str, Any], *, rng: random.Random, sentence: Callable[[], str]) -> Any:
    """Generate a plausible instance of ``schema``.

    Args:
        schema: a JSON schema (Draft 7 / 2020-12 keywords listed in the module docstring).
        rng: seeded generator; the same seed gives the same instance.
        sentence: gives a sentence for free-text properties (``description``).

    Returns:
        A JSON-compatible value (dict, list, str, int, float, bool or None).
    """
    return _Generator(schema, rng, sentence).value(schema)


def break_missing_field(value: Any, schema: dict[str, Any], rng: random.Random) -> Any:
    """Drop one required top-level key (or any key when none is required)."""
    if not isinstance(value, dict) or not value:
        return {}
    required = [k for k in schema.get("required", []) if k in value] or list(value)
    victim = rng.choice(required)
    return {k: v for k, v in value.items() if k != victim}


def break_wrong_type(value: Any, rng: random.Random) -> Any:
    """Replace one top-level value with one of another JSON type (``21`` -> ``"twenty-one"``)."""
    if not isinstance(value, dict) or not value:
        return "not an object"
    numeric = [k for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    key = numeric[0] if numeric else rng.choice(list(value))
    old = value[key]
    if isinstance(old, bool):
        new: Any = "yes" if old else "no"
    elif isinstance(old, (int, float)):
        new = _spell(int(old))
    elif isinstance(old, str):
        new = len(old)
    elif isinstance(old, (list, dict)):
        new = ", ".join(str(x) for x in (old if isinstance(old, list) else old.values()))
    else:
        new = "unknown"
    return {**value, key: new}


_ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def _spell(n: int) -> str:
    if n < 0:
        return "minus " + _spell(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _ONES[n % 10])
    return str(n)
