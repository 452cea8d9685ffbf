"""The one reader of the chat-completion wire: live replies and recorded ones.

Both the HTTP layer (:mod:`reverie_canary.services.prober.http`) and the
field-case reader (:mod:`reverie_canary.services.prober.recorded`) feed a
:class:`ChunkReader` and take its :class:`~reverie_canary.client.reply.Reply`;
no other code parses a chunk (docs/development.md: "Keep one reader of the
chat-completion wire").

The wire (OpenRouter's streaming documentation): Server-Sent Events, one
``data: {json}`` line per chunk, ``data: [DONE]`` at the end, comment lines
(``: OPENROUTER PROCESSING``) as keep-alives; or one JSON body (a
``chat.completion``).  A chunk is
``{id, provider, choices: [{delta: {content, reasoning | reasoning_content,
tool_calls}, finish_reason, native_finish_reason, error}], usage, error}``;
a body has ``message`` where a chunk has ``delta``.  Every ``data:`` line is
one chunk (OpenRouter's JSON never spans lines); ``event:``, ``id:`` and
``retry:`` lines are ignored.

**The time-to-first-token rule** (one for live and recorded replies): the
clock stops at the first content *or* reasoning delta that holds a visible
character, i.e. one that is not only whitespace.  Keep-alive comments, empty
deltas (``"content": ""``, the role delta) and whitespace-only deltas
(``" "``, ``"\\n"``) never stop it: a chat user sees nothing until then, and a
provider that sends a space at once and its answer 12 s later is slow
(docs/concepts/probes.md, the latency contract; FP-01, FP-09).  The same rule gives
``first_content_ms`` and ``first_reasoning_ms``.

**Bounds**: text and reasoning together are kept up to
``reply_max_bytes`` (UTF-8); the chunk that crosses it is cut at a character
boundary and the reader asks its caller to stop (``Reply.cut``,
``Reply.output_bytes`` say what was cut).  Line and body caps are the
caller's (they are about bytes on the wire).

**Tool calls** (the OpenAI tool-call wire as OpenRouter passes it): streamed ``delta.tool_calls`` are assembled by
``index``: ``id``, ``type`` and ``function.name`` are taken from the first delta that carries
them, ``function.arguments`` fragments are appended in order and kept exactly as received
(never parsed here: parsing is the checks' job, after the stream ended); a call delivered
whole in one chunk is accepted.  Unstreamed ``message.tool_calls`` entries are calls whose
index is their place in the list.  What goes wrong on the way is recorded as facts
(``Reply.tool_faults``: a new id at a used index, a repeated or missing id, a name sent again
or in pieces, a delta without an index, fragments after the finish reason ...), never
repaired.  Bounded: at most :data:`~reverie_canary.client.reply.MAX_TOOL_CALLS` calls kept,
each with at most ``TOOL_ARGUMENTS_MAX_BYTES`` of arguments (the rest counted), ids and names
cut; a hostile stream of endless fragments or indexes costs counters, not memory.

**Speed**: each line is decoded once by msgspec into the Structs
below (unknown fields skipped without building them); no dict is built per
chunk.  A chunk whose JSON is valid but whose types are not (``"content":
5``) is read again untyped and kept leniently; invalid UTF-8 is read with
U+FFFD in place of the bad bytes (``Reply.invalid_utf8`` counts the lines).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec import Struct

from reverie_canary.client.bounds import TOKEN_CHARS, clamp, label
from reverie_canary.client.reply import (
    MAX_TOOL_CALLS,
    MAX_TOOL_FAULTS,
    TOOL_ARGUMENTS_MAX_BYTES,
    TOOL_CALL_NAME_CHARS,
    TOOL_FAULT_CHARS,
    TOOL_ID_CHARS,
    Reply,
    ToolCall,
)

#: Tool names kept per reply, and the length of each (evidence stays bounded).
MAX_TOOL_NAMES = 8
TOOL_NAME_CHARS = 64
#: Characters of a non-JSON data line or body kept as evidence.
EVIDENCE_CHARS = 300
#: Distinct tool-call indexes (or ids) counted per reply.
MAX_TOOL_INDEXES = 1024


class ToolFunction(Struct, frozen=True):
    """``tool_calls[].function``: the name and the arguments (a JSON-encoded string on the wire)."""

    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(Struct, frozen=True):
    """One ``delta.tool_calls`` (or ``message.tool_calls``) entry; streamed calls repeat their ``index``.

    ``arguments_not_string`` is never on the wire: the lenient reading sets it when
    ``function.arguments`` came as an object instead of a JSON string.
    """

    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: ToolFunction | None = None
    arguments_not_string: bool = False


class Delta(Struct, frozen=True):
    """``choices[].delta`` of a chunk, or ``choices[].message`` of a body."""

    content: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class Choice(Struct, frozen=True):
    """``choices[]``: finish reasons are ``null`` until the last chunk; ``error`` on a mid-stream failure."""

    delta: Delta | None = None
    message: Delta | None = None
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    error: dict[str, Any] | None = None


class Chunk(Struct, frozen=True):
    """A ``chat.completion.chunk`` (or a ``chat.completion`` body); ``provider`` is the display name."""

    id: str | None = None
    provider: str | None = None
    choices: list[Choice] | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class _Call:
    """One tool call being assembled (bounded: arguments past the cap are counted, not kept)."""

    __slots__ = ("index", "id", "name", "parts", "kept", "received", "fragments")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id: str | None = None
        self.name: str | None = None
        self.parts: list[str] = []
        self.kept = 0
        self.received = 0
        self.fragments = 0

    def add(self, piece: str) -> None:
        size = len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
        self.received += size
        self.fragments += 1
        room = TOOL_ARGUMENTS_MAX_BYTES - self.kept
        if room <= 0:
            return
        if size > room:
            piece = _prefix_within(piece, room)
            size = _utf8_len(piece)
        self.parts.append(piece)
        self.kept += size


_decode_chunk = msgspec.json.Decoder(Chunk).decode
_decode_any = msgspec.json.Decoder().decode
_LENIENT_DELTA = re.compile(r"""(?:content|reasoning(?:_content)?)['"]?\s*[:=]\s*(['"])(?P<value>.*?)\1""")
_DONE = b"[DONE]"


def _utf8_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


def _prefix_within(s: str, limit: int) -> str:
    """The longest prefix of ``s`` whose UTF-8 form fits ``limit`` bytes."""
    if limit <= 0:
        return ""
    raw = s.encode("utf-8", "surrogatepass")[:limit]
    return raw.decode("utf-8", "ignore")


class ChunkReader:
    """Accumulates one chat completion from SSE lines or a JSON body.

    Args:
        reply_max_bytes: bytes of text plus reasoning kept (UTF-8); ``None``
            for no cap (recorded cases, whose text is given whole).
        lenient: read a data line that is not JSON with a pattern
            (``{delta.content:'Paris.'}``, hand-written field cases) instead
            of calling it ``body_parse``.

    Feed it with :meth:`line` (one SSE line, without its line break) or
    :meth:`body` (a whole JSON body); both return ``False`` when the caller
    should stop reading: ``[DONE]``, an error object, a line that is not
    JSON, or the cap.  Times are ms from the request start, given by the
    caller (the moment the bytes were read, or the recorded time).
    """

    __slots__ = (
        "reply_max_bytes", "lenient", "text", "reasoning", "kept_bytes", "output_bytes",
        "ttft_ms", "first_content_ms", "first_reasoning_ms", "finish_reason", "native_finish_reason",
        "served_by", "generation_id", "usage", "error", "transport_error", "done", "keepalives",
        "tool_indexes", "tool_names", "cut", "invalid_utf8", "last_ms", "data_lines",
        "calls", "tool_faults", "last_tool_index",
    )

    def __init__(self, *, reply_max_bytes: int | None = None, lenient: bool = False) -> None:
        self.reply_max_bytes = reply_max_bytes
        self.lenient = lenient
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.kept_bytes = 0
        self.output_bytes = 0
        self.ttft_ms: float | None = None
        self.first_content_ms: float | None = None
        self.first_reasoning_ms: float | None = None
        self.finish_reason: str | None = None
        self.native_finish_reason: str | None = None
        self.served_by: str | None = None
        self.generation_id: str | None = None
        self.usage: dict[str, Any] = {}
        self.error: dict[str, Any] | None = None
        self.transport_error: str | None = None
        self.done = False
        self.keepalives = 0
        self.tool_indexes: set[int] = set()
        self.tool_names: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.tool_faults: list[str] = []
        self.last_tool_index: int | None = None
        self.cut: str | None = None
        self.invalid_utf8 = 0
        self.last_ms: float | None = None
        self.data_lines = 0

    # -- input ---------------------------------------------------------------------

    def line(self, raw: bytes, t_ms: float | None) -> bool:
        """Read one SSE line (no line break); ``False``: stop reading."""
        if t_ms is not None:
            self.last_ms = t_ms
        if raw[:5] == b"data:":
            payload = raw[5:].strip()
            if payload == _DONE:
                self.done = True
                return False
            if not payload:
                return True
            self.data_lines += 1
            return self._payload(payload, t_ms)
        if raw[:1] == b":":
            self.keepalives += 1
        return True

    def parsed(self, obj: Any, t_ms: float | None) -> bool:
        """Read one chunk a client library already parsed; ``False``: stop reading.

        ``obj`` is the chunk as a mapping (the JSON of one ``data:`` line, decoded) or as
        an object with the chunk's attributes (an SDK's ``ChatCompletionChunk``: the
        OpenAI SDK keeps OpenRouter's extra fields, ``provider`` and ``reasoning``, as
        attributes).  The same rules as :meth:`line`, without decoding JSON again: a
        backend that already parsed the stream hands the guard its chunks.  A chunk of
        the wrong shape is read leniently (fields of the wrong type dropped); one that
        is not a chunk at all is ``body_parse``.
        """
        if t_ms is not None:
            self.last_ms = t_ms
        self.data_lines += 1
        try:
            chunk = msgspec.convert(obj, Chunk, from_attributes=True)
        except msgspec.ValidationError:
            value = obj
            if not isinstance(value, dict):
                dump = getattr(obj, "model_dump", None)
                try:
                    value = dump() if callable(dump) else None
                except (TypeError, ValueError, AttributeError):  # it cannot say itself: not a chunk we can read
                    value = None
            found = _lenient_chunk(value)
            if found is None:
                self.transport_error = "body_parse"
                return False
            chunk = found
        return self._chunk(chunk, t_ms)

    def body(self, raw: bytes, t_ms: float | None) -> None:
        """Read a complete non-streamed JSON body (``chat.completion``); a bad body is ``body_parse``."""
        if t_ms is not None:
            self.last_ms = t_ms
        chunk = self._decode(raw)
        if chunk is None:
            self.transport_error = "body_parse"
            return
        self.done = True
        self._chunk(chunk, t_ms)

    # -- decoding ------------------------------------------------------------------

    def _payload(self, payload: bytes, t_ms: float | None) -> bool:
        try:
            chunk = _decode_chunk(payload)
        except (msgspec.ValidationError, msgspec.DecodeError):
            chunk = self._decode(payload)
            if chunk is None:
                if self.lenient:
                    return self._lenient(payload, t_ms)
                self.transport_error = "body_parse"
                return False
        return self._chunk(chunk, t_ms)

    def _decode(self, raw: bytes) -> Chunk | None:
        """Decode a chunk the slow way: typed, then invalid UTF-8 replaced, then untyped and lenient."""
        try:
            return _decode_chunk(raw)
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError:
            fixed = raw.decode("utf-8", "replace").encode("utf-8")
            if fixed == raw:
                return None  # not JSON at all
            self.invalid_utf8 += 1
            raw = fixed
            try:
                return _decode_chunk(raw)
            except msgspec.ValidationError:
                pass
            except msgspec.DecodeError:
                return None
        try:
            value = _decode_any(raw)
        except msgspec.DecodeError:
            return None
        return _lenient_chunk(value)

    def _lenient(self, payload: bytes, t_ms: float | None) -> bool:
        m = _LENIENT_DELTA.search(payload.decode("utf-8", "replace"))
        if m is not None:
            if m.group(0).lstrip("'\"").startswith("reasoning"):
                return self._add_reasoning(m.group("value"), t_ms)
            return self._add_text(m.group("value"), t_ms)
        return True

    # -- one chunk -----------------------------------------------------------------

    def _chunk(self, chunk: Chunk, t_ms: float | None) -> bool:
        if chunk.provider:
            self.served_by = label(chunk.provider)
        if chunk.id and self.generation_id is None:
            self.generation_id = label(chunk.id)
        if chunk.usage is not None:
            self.usage = clamp(chunk.usage)
        go_on = True
        if chunk.choices:
            for choice in chunk.choices:
                delta = choice.delta if choice.delta is not None else choice.message
                if delta is not None:
                    if delta.content:
                        go_on = self._add_text(delta.content, t_ms) and go_on
                    reasoning = delta.reasoning or delta.reasoning_content
                    if reasoning:
                        go_on = self._add_reasoning(reasoning, t_ms) and go_on
                    if delta.tool_calls:
                        self.add_tool_calls(delta.tool_calls, whole=choice.delta is None)
                if choice.finish_reason:
                    self.finish_reason = label(choice.finish_reason, TOKEN_CHARS)
                if choice.native_finish_reason:
                    self.native_finish_reason = label(choice.native_finish_reason, TOKEN_CHARS)
                if choice.error is not None:
                    self.error = clamp(choice.error)
        if chunk.error is not None:
            self.error = clamp(chunk.error)
        return go_on and self.error is None

    def _room(self, piece: str) -> tuple[str, bool]:
        """``piece`` as far as the cap allows, and whether the cap still has room."""
        size = _utf8_len(piece)
        self.output_bytes += size
        cap = self.reply_max_bytes
        if cap is None or self.kept_bytes + size <= cap:
            self.kept_bytes += size
            return piece, True
        kept = _prefix_within(piece, cap - self.kept_bytes)
        self.kept_bytes += _utf8_len(kept)
        self.cut = "reply_max_bytes"
        return kept, False

    def _add_text(self, piece: str, t_ms: float | None) -> bool:
        if self.cut is not None:
            return False
        if self.first_content_ms is None and not piece.isspace():
            self.first_content_ms = t_ms
            if self.ttft_ms is None:
                self.ttft_ms = t_ms
        piece, room = self._room(piece)
        self.text.append(piece)
        return room

    def _add_reasoning(self, piece: str, t_ms: float | None) -> bool:
        if self.cut is not None:
            return False
        if self.first_reasoning_ms is None and not piece.isspace():
            self.first_reasoning_ms = t_ms
            if self.ttft_ms is None:
                self.ttft_ms = t_ms
        piece, room = self._room(piece)
        self.reasoning.append(piece)
        return room

    def add_tool_calls(self, calls: list[ToolCallDelta], *, whole: bool = False) -> None:
        """Assemble tool-call entries: streamed deltas (``whole=False``) or ``message.tool_calls``.

        Streamed entries are keyed by ``index`` (an entry without one continues the call its
        ``id`` names, else the last call, else opens one, and is an ``index_missing`` fact);
        ``id``, ``type`` and ``name`` are taken once, later values are facts (``*_resent``,
        ``*_changed``); arguments are appended.  Whole entries (``whole=True``) are one call
        each, at the next free index.  Facts: :attr:`reverie_canary.client.reply.Reply.tool_faults`.
        """
        after_finish = not whole and self.finish_reason is not None
        for call in calls:
            fn = call.function
            if not whole and not after_finish and call.id is None and call.type is None and \
                    (fn is None or fn.name is None) and not call.arguments_not_string:
                acc = self.calls.get(call.index)  # type: ignore[arg-type]
                if acc is not None:  # the common delta: more arguments for a call already open
                    self.last_tool_index = acc.index
                    piece = fn.arguments if fn is not None else None
                    if piece:
                        size = len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
                        if acc.kept + size <= TOOL_ARGUMENTS_MAX_BYTES:
                            acc.parts.append(piece)
                            acc.kept += size
                            acc.received += size
                            acc.fragments += 1
                        else:
                            acc.add(piece)
                    continue
            if whole:
                index = len(self.tool_indexes)
                while index in self.calls:
                    index += 1
            else:
                index = call.index if call.index is not None else self._index_of(call.id)
            fresh = index not in self.tool_indexes
            if fresh and len(self.tool_indexes) < MAX_TOOL_INDEXES:
                self.tool_indexes.add(index)
            self.last_tool_index = index
            if after_finish:
                self._fault("after_finish", index)
            if call.index is None and not whole:
                self._fault("index_missing", index)
            name = fn.name if fn is not None else None
            if name and len(self.tool_names) < MAX_TOOL_NAMES and name[:TOOL_NAME_CHARS] not in self.tool_names:
                self.tool_names.append(name[:TOOL_NAME_CHARS])
            acc = self.calls.get(index)
            if acc is None:
                if len(self.calls) >= MAX_TOOL_CALLS:
                    continue  # counted in tool_indexes, not kept
                acc = self.calls[index] = _Call(index)
            if call.type is not None and call.type != "function":
                self._fault("type_invalid", index)
            if call.id:
                ident = call.id[:TOOL_ID_CHARS]
                if acc.id is None:
                    if any(other.id == ident for other in self.calls.values()):
                        self._fault("id_duplicate", index)
                    acc.id = ident
                else:
                    self._fault("id_resent" if ident == acc.id else "id_changed", index)
            if name:
                name = name[:TOOL_CALL_NAME_CHARS]
                if acc.name is None:
                    acc.name = name
                else:
                    self._fault("name_resent" if name == acc.name else "name_changed", index)
            if call.arguments_not_string:
                self._fault("arguments_not_string", index)
            if fn is not None and fn.arguments:
                acc.add(fn.arguments)

    def _index_of(self, call_id: str | None) -> int:
        """The index a streamed entry without ``index`` continues: its id's call, else the last, else a new one."""
        if call_id:
            for acc in self.calls.values():
                if acc.id == call_id[:TOOL_ID_CHARS]:
                    return acc.index
            return max(self.tool_indexes, default=-1) + 1
        if self.last_tool_index is not None:
            return self.last_tool_index
        return 0

    def _fault(self, fact: str, index: int) -> None:
        entry = f"{fact}@{index}"[:TOOL_FAULT_CHARS]
        if len(self.tool_faults) < MAX_TOOL_FAULTS and entry not in self.tool_faults:
            self.tool_faults.append(entry)

    # -- output --------------------------------------------------------------------

    @property
    def tool_calls_seen(self) -> int:
        """Tool calls seen so far (distinct ``index`` values)."""
        return len(self.tool_indexes)

    def tool_calls_kept(self) -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
        """The calls assembled so far (in the order they opened) and the assembly facts.

        A call that never got an id or a name adds ``id_missing`` / ``name_missing`` here,
        once the reply is complete.
        """
        if not self.calls:
            return (), tuple(self.tool_faults)
        faults = self.tool_faults
        calls = []
        for acc in self.calls.values():
            calls.append(ToolCall(index=acc.index, id=acc.id, name=acc.name, arguments="".join(acc.parts),
                                  arguments_bytes=acc.received, fragments=acc.fragments))
            if acc.id is None or acc.name is None:
                if faults is self.tool_faults:
                    faults = list(faults)
                for fact, missing in (("id_missing", acc.id is None), ("name_missing", acc.name is None)):
                    entry = f"{fact}@{acc.index}"
                    if missing and len(faults) < MAX_TOOL_FAULTS and entry not in faults:
                        faults.append(entry)
        return tuple(calls), tuple(faults)

    def reply(self, **fields: Any) -> Reply:
        """The :class:`Reply` read so far; ``fields`` add what the caller knows (status, times, errors)."""
        calls, faults = self.tool_calls_kept()
        values: dict[str, Any] = {
            "text": "".join(self.text),
            "reasoning_text": "".join(self.reasoning),
            "finish_reason": self.finish_reason,
            "native_finish_reason": self.native_finish_reason,
            "error": self.error,
            "transport_error": self.transport_error,
            "ttft_ms": self.ttft_ms,
            "first_content_ms": self.first_content_ms,
            "first_reasoning_ms": self.first_reasoning_ms,
            "served_by": self.served_by,
            "generation_id": self.generation_id,
            "usage": self.usage,
            "keepalives": self.keepalives,
            "done": self.done,
            "tool_calls": self.tool_calls_seen,
            "tool_names": tuple(self.tool_names),
            "calls": calls,
            "tool_faults": faults,
            "streamed": self.data_lines > 0,
            "output_bytes": self.output_bytes,
            "cut": self.cut,
            "invalid_utf8": self.invalid_utf8,
        }
        values.update(fields)
        return Reply(**values)


class LineSplitter:
    """Cut a byte stream into SSE lines, whatever the network's chunking.

    Lines end with ``\\n``, ``\\r\\n`` or ``\\r`` (the SSE spec); a line split
    across reads (even inside a multi-byte character) is joined before it is
    handed out, so it is decoded once, whole.  Empty lines are dropped.

    Args:
        line_max_bytes: longest line accepted; past it :attr:`too_long` is set
            and nothing more is returned.
    """

    __slots__ = ("rest", "line_max_bytes", "too_long")

    def __init__(self, line_max_bytes: int) -> None:
        self.rest = b""
        self.line_max_bytes = line_max_bytes
        self.too_long = False

    def feed(self, data: bytes) -> list[bytes]:
        """The complete lines ``data`` finishes (``[]`` once a line was too long)."""
        if self.too_long or not data:
            return []
        if self.rest:
            data = self.rest + data
        lines = data.splitlines()
        self.rest = lines.pop() if data[-1:] not in (b"\n", b"\r") else b""
        limit = self.line_max_bytes
        if len(self.rest) > limit or any(len(line) > limit for line in lines):
            self.too_long = True
            return []
        return [line for line in lines if line]

    def end(self) -> bytes:
        """The last line when the stream ends without a line break (``b""`` if none)."""
        rest, self.rest = self.rest, b""
        return b"" if self.too_long else rest


def _lenient_chunk(value: Any) -> Chunk | None:
    """A :class:`Chunk` from untyped JSON: fields of the wrong type are dropped, never guessed."""
    if not isinstance(value, dict):
        return None
    choices = []
    raw_choices = value.get("choices")
    for c in raw_choices if isinstance(raw_choices, list) else []:
        if not isinstance(c, dict):
            continue
        delta = c.get("delta") if isinstance(c.get("delta"), dict) else c.get("message")
        d = None
        if isinstance(delta, dict):
            calls = delta.get("tool_calls")
            d = Delta(content=_str(delta.get("content")), reasoning=_str(delta.get("reasoning")),
                      reasoning_content=_str(delta.get("reasoning_content")),
                      tool_calls=[lenient_tool_call(call) for call in calls if isinstance(call, dict)]
                      if isinstance(calls, list) else None)
        streamed = isinstance(c.get("delta"), dict)  # else a body's message: its calls are whole
        choices.append(Choice(delta=d if streamed else None, message=None if streamed else d,
                              finish_reason=_str(c.get("finish_reason")),
                              native_finish_reason=_str(c.get("native_finish_reason")),
                              error=c.get("error") if isinstance(c.get("error"), dict) else None))
    return Chunk(id=_str(value.get("id")), provider=_str(value.get("provider")), choices=choices,
                 usage=value.get("usage") if isinstance(value.get("usage"), dict) else None,
                 error=value.get("error") if isinstance(value.get("error"), dict) else None)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def lenient_tool_call(call: dict[str, Any]) -> ToolCallDelta:
    """A :class:`ToolCallDelta` from untyped JSON: wrong types dropped, never guessed.

    ``function.arguments`` that is not a string (an object sent as is, where the wire wants a
    JSON-encoded string) is kept as its compact JSON text and marked ``arguments_not_string``:
    a client that decodes the string it was promised breaks on it.
    """
    index = call.get("index")
    fn = call.get("function")
    name = arguments = None
    not_string = False
    if isinstance(fn, dict):
        name = _str(fn.get("name"))
        raw = fn.get("arguments")
        if isinstance(raw, str) or raw is None:
            arguments = raw
        else:
            not_string = True
            arguments = msgspec.json.encode(raw).decode()
    return ToolCallDelta(index=index if isinstance(index, int) and not isinstance(index, bool) else None,
                         id=_str(call.get("id")), type=_str(call.get("type")),
                         function=ToolFunction(name=name, arguments=arguments), arguments_not_string=not_string)


def error_body(raw: bytes) -> dict[str, Any]:
    """The ``error`` object of a non-200 body (OpenRouter's error documentation), else the body's first characters."""
    try:
        data = _decode_any(raw)
    except msgspec.DecodeError:
        return {"message": raw[:EVIDENCE_CHARS].decode("utf-8", errors="replace")}
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return clamp(data["error"])
    return {"message": str(clamp(data))[:EVIDENCE_CHARS]}
