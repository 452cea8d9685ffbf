"""The size bounds every wire message keeps (docs/concepts/messages.md, "Bounds").

Three layers, each checked where it can be:

1. **The message.**  No wire message is larger than :data:`MESSAGE_MAX_BYTES`,
   half of NATS's ``max_payload`` (:data:`MAX_PAYLOAD`, the server default that
   ``shared/nats/server.conf`` keeps): a consumer refuses a larger one before
   parsing it (:class:`reverie_canary.shared.contract.codec.Codec`), and a service never
   publishes one (:class:`reverie_canary.shared.runtime.broker.Publisher`): the input
   that produced it is dead-lettered with the reason instead of the result
   being lost on the wire.
2. **Every field.**  Every string, list and mapping of every wire type has a
   maximum length (``msgspec.Meta(max_length=...)``), checked at decoding;
   free-form JSON (check evidence, usage) is checked by :func:`check_free_json`
   against :data:`FREE_JSON`.  ``tests/unit/test_wire_bounds.py`` walks every
   type of :data:`reverie_canary.shared.contract.codec.WIRE_TYPES` and fails on a field
   without a bound.
3. **The aggregates.**  Messages that grow with the fleet are sized by their
   producers: discovery splits a large model's ``EndpointsDiscovered`` into
   parts (``part`` of ``parts``) that each fit, and the largest part at the
   largest allowed values is measured by the same test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reverie_canary.client.bounds import FREE_JSON, FreeJsonLimits  # noqa: F401  (re-exported)

# defined with the checks, in the client distribution (the prober and the chat backend share them)
from reverie_canary.shared.contract.errors import CanaryError

#: NATS's default ``max_payload`` (1 MiB); ``shared/nats/server.conf`` and the
#: embedded servers keep it, and ``tests/integration/test_bounds_live.py`` reads it
#: from a running server.
MAX_PAYLOAD = 1024 * 1024
#: The largest wire message a service publishes or accepts: half of
#: ``max_payload``, so that headers, a bigger reader and future fields keep room.
MESSAGE_MAX_BYTES = MAX_PAYLOAD // 2




def check_free_json(value: dict[str, Any], limits: FreeJsonLimits = FREE_JSON) -> None:
    """Check a decoded free-form JSON mapping against ``limits``.

    Raises:
        ValueError: naming the first bound it breaks (msgspec turns it into a
            ``ValidationError`` with the field's path when raised at decoding).
    """
    if not _within(value, limits):  # the common case answers in one pass; else the walk names the breach
        _walk(value, limits)


def _walk(value: dict[str, Any], limits: FreeJsonLimits) -> None:
    """The walk of :func:`check_free_json` that names the first bound ``value`` breaks (``ValueError``)."""
    totals = {"text": 0, "items": 0}

    def walk(node: Any, depth: int) -> None:
        if isinstance(node, str):
            if len(node) > limits.string:
                raise ValueError(f"a string of {len(node)} characters (at most {limits.string})")
            totals["text"] += len(node)
        elif isinstance(node, dict | list):
            if depth > limits.depth:
                raise ValueError(f"nested deeper than {limits.depth}")
            if len(node) > limits.container:
                raise ValueError(f"a container of {len(node)} items (at most {limits.container})")
            for key in node if isinstance(node, dict) else ():
                walk(key, depth)
            for child in node.values() if isinstance(node, dict) else node:
                totals["items"] += 1
                walk(child, depth + 1)
        if totals["text"] > limits.text:
            raise ValueError(f"more than {limits.text} characters of text")
        if totals["items"] > limits.items:
            raise ValueError(f"more than {limits.items} values")

    if len(value) > limits.keys:
        raise ValueError(f"{len(value)} keys (at most {limits.keys})")
    walk(value, 1)


#: Values that hold no text and nothing nested (exact types: anything else goes to the full walk).
_SCALARS = frozenset((int, float, bool, type(None)))


def _within(value: Any, limits: FreeJsonLimits) -> bool:
    """Whether ``value`` keeps every bound of ``limits`` (``False`` also when unsure: the full walk decides).

    One pass over a stack of containers, no closure, no path, the totals in locals; it answers
    at the first sign of a breach or of a value that is not plain JSON (a ``dict`` or ``str``
    subclass ...) and leaves the message naming it to :func:`check_free_json`'s walk.
    """
    if type(value) is not dict or len(value) > limits.keys:
        return False
    string, container, max_depth = limits.string, limits.container, limits.depth
    text = items = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth or len(node) > container:
            return False
        items += len(node)
        if type(node) is dict:
            for key in node:
                if type(key) is not str or len(key) > string:
                    return False
                text += len(key)
            children = node.values()
        else:
            children = node
        for child in children:
            kind = type(child)
            if kind is str:
                if len(child) > string:
                    return False
                text += len(child)
            elif kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif kind not in _SCALARS:
                return False
        if text > limits.text or items > limits.items:
            return False
    return True


#: A text cut by :func:`fit` ends with this mark and the number of characters cut.
CUT_MARK = "…[cut {n}]"


def fit(message: Any, budget: int = MESSAGE_MAX_BYTES) -> Any:
    """``message`` itself when its JSON is at most ``budget`` bytes, else a copy with its longest texts cut.

    Only free texts shrink (strings whose type has no pattern, and the strings
    inside free-form JSON), longest first, each to half with :data:`CUT_MARK`;
    identifiers, codes, numbers, times and the lengths of lists never change,
    so a fitted message says the same facts with less prose.  When that is not
    enough, a type with a ``shed()`` method (``CycleVerdict``) sheds what it can
    do without (pointers to other log entries, counted) and is fitted again.

    Raises:
        TooLarge: when even the fully cut message is above ``budget``.
    """
    import msgspec

    from reverie_canary.shared.contract.errors import TooLarge

    encoder = msgspec.json.Encoder()
    size = len(encoder.encode(message))
    if size <= budget:
        return message
    import heapq

    type_ = type(message)
    data = msgspec.to_builtins(message)
    heap = [(-t.length(), i, t) for i, t in enumerate(_texts(msgspec.inspect.type_info(type_), data))]
    heapq.heapify(heap)
    while size > budget:  # the size is kept by difference: one text's encoding, not the message's
        if not heap or -heap[0][0] == 0:
            shed = getattr(msgspec.convert(data, type_), "shed", None)
            lean = shed() if shed is not None else None
            if lean is not None:
                return fit(lean, budget)
            raise TooLarge(f"a {type_.__name__} of {size} bytes: above the bound of {budget} bytes even with "
                           "every free text cut", size=size)
        _, i, text = heapq.heappop(heap)
        before = len(encoder.encode(text.value()))
        text.cut()
        size -= before - len(encoder.encode(text.value()))
        heapq.heappush(heap, (-text.length(), i, text))
    return msgspec.convert(data, type_)


@dataclass
class _Text:
    """A free-text slot inside the builtins of a message: ``container[key]``."""

    container: Any
    key: Any

    def value(self) -> str:
        text: str = self.container[self.key]
        return text

    def length(self) -> int:
        return len(self.container[self.key])

    def cut(self) -> None:
        """Halve the text, marking the cut; a text too short for the mark is halved bare."""
        text = self.container[self.key]
        keep = len(text) // 2
        cut = text[:keep] + CUT_MARK.format(n=len(text) - keep)
        self.container[self.key] = cut if len(cut) < len(text) else text[:keep]


def _texts(t: Any, data: Any) -> list[_Text]:
    """Every free-text slot of ``data`` (the builtins of a value of type ``t``)."""
    import msgspec.inspect as mi

    out: list[_Text] = []

    def free(node: Any) -> None:  # inside free-form JSON: every string is text
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, str):
                out.append(_Text(node, key))
            else:
                free(value)

    def walk(t: Any, container: Any, key: Any) -> None:
        value = container[key]
        if value is None:
            return
        match t:
            case mi.Metadata():
                walk(t.type, container, key)
            case mi.StrType():
                if t.pattern is None and isinstance(value, str):
                    out.append(_Text(container, key))
            case mi.ListType() | mi.VarTupleType():
                for i in range(len(value)):
                    walk(t.item_type, value, i)
            case mi.DictType():
                if isinstance(t.value_type, mi.AnyType):
                    free(value)
                else:
                    for k in list(value):
                        walk(t.value_type, value, k)
            case mi.UnionType():
                for member in t.types:
                    if _matches(member, value):
                        walk(member, container, key)
                        break
            case mi.StructType():
                if isinstance(value, dict):
                    for f in t.fields:
                        if f.encode_name in value:
                            walk(f.type, value, f.encode_name)
            case _:
                pass

    walk(t, {"": data}, "")
    return out


def _matches(t: Any, value: Any) -> bool:
    """Whether builtins ``value`` is of union member ``t`` (enough to find the texts)."""
    import msgspec.inspect as mi

    while isinstance(t, mi.Metadata):
        t = t.type
    match t:
        case mi.StrType():
            return isinstance(value, str)
        case mi.ListType() | mi.VarTupleType():
            return isinstance(value, list)
        case mi.DictType() | mi.StructType():
            return isinstance(value, dict)
        case _:
            return False


def free_json_checker(type_: Any) -> Callable[[Any, str], None] | None:
    """A function that checks every free-form JSON field of a decoded ``type_`` (``None``: it has none).

    Free-form JSON fields are marked ``Meta(extra={"free_json": True})`` (``FreeJson`` in
    :mod:`reverie_canary.shared.contract.events`).  The function, called as ``check(value, path="$")``,
    raises ``ValueError`` naming the field's path and the bound it breaks.  Paths are built only
    when a bound is broken, and an empty mapping is not walked: the check runs on every message a
    service decodes (about 2 µs for a probe result whose evidence is empty).
    """
    import msgspec.inspect as mi

    def plan(t: Any, seen: frozenset[type]) -> Any:
        """A checker of values of type ``t``, or ``None`` when ``t`` holds no free JSON."""
        match t:
            case mi.Metadata():
                if (t.extra or {}).get("free_json"):
                    return _check_leaf
                return plan(t.type, seen)
            case mi.ListType() | mi.VarTupleType():
                inner = plan(t.item_type, seen)
                if inner is None:
                    return None
                leaves = getattr(inner, "leaf_fields", None)
                if leaves is not None:  # items whose free JSON is their own fields (check evidence): no call per item

                    def check_leaf_items(value: Any) -> None:
                        for i, v in enumerate(value):
                            for name in leaves:
                                child = getattr(v, name)
                                if child:
                                    try:
                                        _check_leaf(child)
                                    except _Breach as b:
                                        b.parts += (f".{name}", f"[{i}]")
                                        raise
                    return check_leaf_items

                def check_items(value: Any) -> None:
                    for i, v in enumerate(value):
                        try:
                            inner(v)
                        except _Breach as b:
                            b.parts.append(f"[{i}]")
                            raise
                return check_items
            case mi.DictType():
                inner = plan(t.value_type, seen)
                if inner is None:
                    return None

                def check_values(value: Any) -> None:
                    for k, v in value.items():
                        try:
                            inner(v)
                        except _Breach as b:
                            b.parts.append(f".{k}")
                            raise
                return check_values
            case mi.UnionType():
                planned = [(m, plan(m, seen)) for m in t.types]
                members: list[tuple[Any, Any]] = [(getattr(m, "cls", None), c) for m, c in planned if c is not None]
                if not members:
                    return None
                if len(members) == 1 and members[0][0] is None:  # FreeJson | None: the leaf passes over None
                    return members[0][1]

                chosen: dict[type, tuple[Any, ...]] = {}  # the value's type -> the members' checkers that apply

                def check_union(value: Any) -> None:
                    kind = type(value)
                    checkers = chosen.get(kind)
                    if checkers is None:
                        checkers = chosen[kind] = tuple(c for cls, c in members if cls is None or isinstance(value, cls))
                    for c in checkers:
                        c(value)
                return check_union
            case mi.StructType():
                if t.cls in seen:
                    return None
                checked = [(f.name, plan(f.type, seen | {t.cls})) for f in t.fields]
                if not any(c is not None for _, c in checked):
                    return None

                # a field that is a struct whose free JSON is its own fields (a reply's usage) is walked here
                fields = [(n, c, getattr(c, "leaf_fields", None)) for n, c in checked if c is not None]

                def check_struct(value: Any) -> None:
                    for name, c, leaves in fields:
                        child = getattr(value, name)
                        if not child:  # None, or an empty mapping or list: nothing to walk
                            continue
                        try:
                            if leaves is None:
                                c(child)
                                continue
                            for leaf in leaves:
                                grandchild = getattr(child, leaf)
                                if grandchild:
                                    try:
                                        _check_leaf(grandchild)
                                    except _Breach as b:
                                        b.parts.append(f".{leaf}")
                                        raise
                        except _Breach as b:
                            b.parts.append(f".{name}")
                            raise
                if all(c is _check_leaf for _, c, _ in fields):
                    check_struct.leaf_fields = tuple(n for n, _, _ in fields)  # type: ignore[attr-defined]
                return check_struct
            case _:
                return None

    root = plan(mi.type_info(type_), frozenset())
    if root is None:
        return None

    def check(value: Any, path: str = "$") -> None:
        try:
            root(value)
        except _Breach as b:
            raise ValueError(f"{b.message} - at `{path}{''.join(reversed(b.parts))}`") from None
    return check


class _Breach(CanaryError, ValueError):
    """A broken bound on its way up to the checker, collecting its path (innermost part first)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.parts: list[str] = []


def _check_leaf(value: Any) -> None:
    if not value or not isinstance(value, dict):
        return
    try:
        check_free_json(value)
    except ValueError as exc:
        raise _Breach(str(exc)) from None
