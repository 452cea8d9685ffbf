"""Recorded replies: read field cases and judge them with the prober's checks.

The format is the field cases' (one JSON object per line: ``id``,
``kind``, ``request_language``, ``schema``, ``output_text``,
``finish_reason``, ``expected``, ``accept``, ``meta`` ...).  Each line becomes
``(id, Reply, ProbeSpec)`` and then one verdict dict; this backs
``canary check FILE`` (:func:`check_file`).  Pure apart from reading the file.

A line is decoded by its kind's Struct (:data:`CaseKind`, tagged by ``kind``): types are strict,
fields the reader does not use (``source``, ``note``, ``meta.date`` ...) are ignored, and each kind
says in one small method how it maps onto the probe.

Case kind -> probe kind (``ProbeSpec.kind``):

===========  ===============================================================
latency      ``ttft``
refusal      ``refusal``
structured   ``structured`` (``meta.response_format``; absent: json_schema,
             which is what the probe sends)
language     ``language``
encoding     ``language`` (its encoding checks judge it)
corruption   behavioural checks; ``echo`` when ``meta.prompt`` is
             ``Repeat exactly: <text>`` (the echo text), else ``corruption``
transport    ``ttft`` when ``meta.events`` holds SSE lines, else ``transport``
             (transport and generic checks only)
tools        ``tools``: the tool-call checks (:mod:`reverie_canary.client.checks.tools`)
===========  ===============================================================

Tool-call cases (``kind: "tools"``) carry the request's ``tools``, ``expected_tool``,
``expected_arguments`` and the reply's ``tool_calls`` (``[{"id", "name", "arguments"}]``,
``arguments`` the raw string as received; optional ``index`` and ``arguments_bytes``), optional
``stream_deltas`` (the ``delta.tool_calls`` entries in stream order), ``http_status`` and
``error_body`` (the raw body of a non-200 answer), and in ``meta``: ``stream`` (the reply was
streamed), ``variant``, ``tool_result_value`` (the second turn's value), ``parallel_tool_calls``
(``false``: at most one call).  The calls go through the one wire reader
(:class:`~reverie_canary.client.chunks.ChunkReader`): ``stream_deltas`` are fed as the deltas of
an SSE stream (the raw evidence: they win over ``tool_calls``), ``tool_calls`` as an unstreamed
``message.tool_calls``; so a recorded call is assembled, bounded and its faults found exactly as
a live one.
"""

from __future__ import annotations

import json
import re
import sys
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

import msgspec
from msgspec import UNSET, Struct, UnsetType

from reverie_canary.client.checks import evaluate
from reverie_canary.client.chunks import ChunkReader, error_body
from reverie_canary.client.reply import ProbeSpec, Reply, ResponseFormat, ToolCall, ToolVariant
from reverie_canary.services.prober.prompts import SENTINEL
from reverie_canary.shared.contract.errors import CanaryError

_ECHO_PROMPT = re.compile(r"^\s*Repeat exactly(?:,? without any other text)?\s*:\s*(?P<text>.+?)\s*$", re.S | re.I)

#: A time in seconds a case records (never negative).
Seconds = Annotated[float, msgspec.Meta(ge=0)]


class CaseError(CanaryError, ValueError):
    """A field-case line that cannot be read (bad JSON, wrong field types)."""


@dataclass(frozen=True)
class RecordedCase:
    """One field case, ready for :func:`reverie_canary.client.checks.evaluate`."""

    id: str
    reply: Reply
    spec: ProbeSpec
    expected: str | None = None
    accept: tuple[str, ...] = ()
    #: ``(provider tag, display name)`` the probe was pinned to (``meta.pinned``): the prober's pin rule applies
    pinned: tuple[str, str] | None = None
    #: the model's other endpoints of that display name (``meta.pinned.same_name``): the name cannot tell them apart
    same_name: tuple[str, ...] = ()


# -- the wire: what a case line holds -------------------------------------------------------


class RecordedEvent(Struct, frozen=True):
    """One recorded SSE line and the time it came (``t_s``, seconds from the request; ``t``: older spelling)."""

    line: str
    t_s: Seconds | None = None
    t: Seconds | None = None


class _Pinned(Struct, frozen=True):
    """``meta.pinned``: the endpoint the probe was pinned to and the model's others of that display name."""

    provider: str
    provider_name: str
    same_name: list[str] = []


class _RecordedReply(Struct, frozen=True, forbid_unknown_fields=True):
    """``meta.reply``: the reply's own fields as the prober kept them (``canary evidence`` writes them).

    A field left out keeps what the case's other fields say; ``null`` sets it to ``None``.
    """

    transport_error: str | None | UnsetType = UNSET
    timed_out: bool | None | UnsetType = UNSET
    done: bool | None | UnsetType = UNSET
    keepalives: int | None | UnsetType = UNSET
    tool_calls: int | None | UnsetType = UNSET
    tool_names: tuple[str, ...] | None | UnsetType = UNSET
    output_bytes: int | None | UnsetType = UNSET
    wire_bytes: int | None | UnsetType = UNSET
    cut: str | None | UnsetType = UNSET
    invalid_utf8: int | None | UnsetType = UNSET
    total_ms: float | None | UnsetType = UNSET
    generation_id: str | None | UnsetType = UNSET
    tool_faults: tuple[str, ...] | None | UnsetType = UNSET
    streamed: bool | None | UnsetType = UNSET

    def changes(self) -> dict[str, Any]:
        """The fields the case sets, by name."""
        return {f: v for f in self.__struct_fields__ if (v := getattr(self, f)) is not UNSET}


class _Meta(Struct, frozen=True, kw_only=True):
    """``meta``: the evidence a check may need (the cases' README lists the fields); others are ignored."""

    prompt: str | None = None
    provider: str | None = None
    http_status: int | None = None
    native_finish_reason: str | None = None
    #: an in-band error object; a bare string or number is kept as its ``message``
    error: dict[str, Any] | str | int | None = None
    events: list[RecordedEvent] | None = None
    #: ``output_text`` is the raw body of an unstreamed answer, read by the prober's reader
    raw_body: bool = False
    ttft_s: Seconds | None = None
    first_reasoning_delta_s: Seconds | None = None
    first_content_delta_s: Seconds | None = None
    client_timeout_s: Seconds | None = None
    ttft_threshold_s: Seconds | None = None
    reasoning_text: str | None = None
    usage: dict[str, Any] | None = None
    tool_calls: list[Any] | None = None
    reply: _RecordedReply | None = None
    response_format: ResponseFormat | None | UnsetType = UNSET
    max_tokens: Annotated[int, msgspec.Meta(ge=0)] | None = None
    expected_prefix: str | None = None
    sentinel: str | None | UnsetType = UNSET
    pinned: _Pinned | None = None
    # tool-call cases
    stream: bool | None = None
    variant: ToolVariant | None = None
    tool_result_value: str | int | float | None = None
    parallel_tool_calls: bool = True


class _Case(Struct, frozen=True, kw_only=True, tag_field="kind"):
    """The fields every case kind has (module docstring); the subclasses are the kinds."""

    #: the probe kind whose checks apply (module docstring's table)
    probe: ClassVar[str]
    #: the response format the probe sends when ``meta.response_format`` is absent
    default_format: ClassVar[ResponseFormat | None] = None
    id: Annotated[str, msgspec.Meta(min_length=1)]
    output_text: str
    finish_reason: str | None = None
    request_language: str | None = None
    schema: dict[str, Any] | None = None
    meta: _Meta | None = None
    expected: str | None = None
    accept: list[str] | None = None
    http_status: int | None = None
    error_body: str | None = None

    def spec_fields(self, meta: _Meta, stream: ChunkReader | None) -> dict[str, Any]:
        """The kind's own :class:`ProbeSpec` fields: the probe kind and what only this kind sets."""
        return {"kind": self.probe}

    def tool_fields(self, meta: _Meta) -> _ToolCase:
        """The tool-call fields of the reply (none but for ``tools`` cases)."""
        return _ToolCase()


class LatencyCase(_Case, frozen=True, kw_only=True, tag="latency"):
    """A time-to-first-token case."""

    probe = "ttft"


class RefusalCase(_Case, frozen=True, kw_only=True, tag="refusal"):
    """An empty, filtered or cut reply."""

    probe = "refusal"


class StructuredCase(_Case, frozen=True, kw_only=True, tag="structured"):
    """A JSON reply judged against ``schema``; ``meta.response_format`` absent means json_schema (what the probe sends)."""

    probe = "structured"
    default_format = "json_schema"


class LanguageCase(_Case, frozen=True, kw_only=True, tag="language"):
    """A reply in the wrong language, or a mix."""

    probe = "language"


class EncodingCase(_Case, frozen=True, kw_only=True, tag="encoding"):
    """Mojibake or byte-level tokens: the language probe's encoding checks judge it."""

    probe = "language"


class CorruptionCase(_Case, frozen=True, kw_only=True, tag="corruption"):
    """Template tokens, junk, injected words: the echo probe when ``meta.prompt`` is ``Repeat exactly: <text>``."""

    probe = "corruption"

    def spec_fields(self, meta: _Meta, stream: ChunkReader | None) -> dict[str, Any]:
        """The echo probe with its text when the prompt asks for an echo, else the corruption probe."""
        m = _ECHO_PROMPT.match(meta.prompt or "")
        return {"kind": "echo", "echo_text": m.group("text")} if m else {"kind": self.probe}


class TransportCase(_Case, frozen=True, kw_only=True, tag="transport"):
    """An HTTP, stream or body fault: the time-to-first-token probe when ``meta.events`` holds SSE lines."""

    probe = "transport"

    def spec_fields(self, meta: _Meta, stream: ChunkReader | None) -> dict[str, Any]:
        """The ttft probe when the case recorded its stream, else transport and generic checks only."""
        return {"kind": "ttft" if stream is not None and meta.events else self.probe}


class RecordedCall(Struct, frozen=True, kw_only=True):
    """One tool call as the client assembled it (``arguments``: the raw string as received)."""

    id: str | None = None
    name: str | None = None
    type: str = "function"
    arguments: str | None = None
    #: the call's index on the wire, when it was not its position
    index: int | None = None
    #: the argument bytes received, also those beyond the cap
    arguments_bytes: Annotated[int, msgspec.Meta(ge=0)] | None = None


class ToolsCase(_Case, frozen=True, kw_only=True, tag="tools"):
    """A tool-call case (module docstring): the tool-call checks."""

    probe = "tools"
    tools: list[dict[str, Any]] | None = None
    expected_tool: str | None = None
    expected_arguments: dict[str, Any] | None = None
    tool_calls: list[RecordedCall] | None = None
    stream_deltas: list[dict[str, Any]] | None = None

    def tool_fields(self, meta: _Meta) -> _ToolCase:
        """The calls assembled by the one wire reader from ``stream_deltas`` or else ``tool_calls``."""
        reader = _tool_reader(self.stream_deltas, self.tool_calls or [])
        assembled, faults = reader.tool_calls_kept()
        if self.tool_calls and not self.stream_deltas:
            assembled = _as_recorded(assembled, self.tool_calls)
        return _ToolCase(tools=self.tools, expected_tool=self.expected_tool,
                         expected_arguments=self.expected_arguments, calls=assembled, faults=faults,
                         seen=reader.tool_calls_seen, names=tuple(reader.tool_names),
                         streamed=True if self.stream_deltas else meta.stream)

    def spec_fields(self, meta: _Meta, stream: ChunkReader | None) -> dict[str, Any]:
        """The tool probe with its tools, expectations and variant (derived when ``meta.variant`` is absent)."""
        value = meta.tool_result_value
        return {"kind": self.probe, "tools": self.tools, "expected_tool": self.expected_tool,
                "expected_arguments": self.expected_arguments, "variant": meta.variant or _variant(self, meta),
                "tool_result_value": None if value is None else str(value), "parallel_calls": meta.parallel_tool_calls}


#: Every case kind, decoded by ``kind``.
CaseKind = LatencyCase | RefusalCase | StructuredCase | LanguageCase | EncodingCase | CorruptionCase \
    | TransportCase | ToolsCase

#: Case kind -> probe kind (the module docstring's table; ``corruption`` and ``transport`` may change it).
KIND_MAP: dict[str, str] = {
    str(cls.__struct_config__.tag): cls.probe for cls in typing.get_args(CaseKind)
}


# -- reading a case -------------------------------------------------------------------------


def _why(exc: msgspec.ValidationError) -> str:
    """The decoder's message with field paths as the case file spells them (``'meta.ttft_s'``)."""
    return str(exc).replace("`$.", "`").replace("`", "'")


def decode_case(obj: Any) -> CaseKind:
    """Decode one JSON-decoded case into its kind's Struct.

    Raises:
        CaseError: not an object, an unknown ``kind``, a missing required field or one of the wrong type.
    """
    if not isinstance(obj, dict):
        raise CaseError("a case must be a JSON object")
    if obj.get("kind") not in KIND_MAP:
        raise CaseError(f"unknown kind {obj.get('kind')!r}; known: {sorted(KIND_MAP)}")
    try:
        case: CaseKind = msgspec.convert(obj, CaseKind)
    except msgspec.ValidationError as exc:
        raise CaseError(_why(exc)) from None
    return case


def parse_events(events: list[RecordedEvent]) -> ChunkReader:
    """Read recorded SSE lines with their times with the prober's reader.

    The same :class:`~reverie_canary.client.chunks.ChunkReader` as
    live probes, so the same time-to-first-token rule: keep-alive comments
    (``: OPENROUTER PROCESSING``) are counted and never start the clock, the
    first content or reasoning delta with a visible character does (FP-01,
    FP-09).  A data line that is not valid JSON is read leniently
    (``{delta.content:'Paris.'}``).  An ``error`` object is an in-band error.

    Returns:
        The reader after the last line (``last_ms``: the latest time seen).
    """
    reader = ChunkReader(lenient=True)
    latest: float | None = None
    for item in events:
        t = item.t_s if item.t_s is not None else item.t
        t_ms = None if t is None else t * 1000.0
        if t_ms is not None:
            latest = t_ms if latest is None else max(latest, t_ms)
        line = item.line.strip()
        if line:
            reader.line(line.encode("utf-8", "surrogatepass"), t_ms)
    reader.last_ms = latest
    return reader


def _raw_body(text: str) -> ChunkReader:
    """Read a raw non-streamed body with the prober's reader (``body_parse`` when it is not one)."""
    reader = ChunkReader()
    reader.body(text.encode("utf-8", "surrogatepass"), None)
    return reader


@dataclass(frozen=True)
class _ToolCase:
    """The tool-call fields of a case, read (:meth:`ToolsCase.tool_fields`)."""

    tools: list[dict[str, Any]] | None = None
    expected_tool: str | None = None
    expected_arguments: dict[str, Any] | None = None
    calls: tuple[ToolCall, ...] = ()
    faults: tuple[str, ...] = ()
    seen: int = 0
    names: tuple[str, ...] = ()
    streamed: bool | None = None


def _tool_reader(deltas: list[dict[str, Any]] | None, calls: list[RecordedCall]) -> ChunkReader:
    """Feed the recorded deltas as an SSE stream, or else the calls as an unstreamed ``message.tool_calls``."""
    reader = ChunkReader()
    if deltas:
        for delta in deltas:
            line = json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]}, ensure_ascii=False)
            reader.line(b"data: " + line.encode("utf-8", "surrogatepass"), None)
    elif calls:
        entries = [{"id": c.id, "type": c.type, "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
        body = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": entries}}]},
                          ensure_ascii=False)
        reader.body(body.encode("utf-8", "surrogatepass"), None)
    return reader


def _as_recorded(assembled: tuple[ToolCall, ...], calls: list[RecordedCall]) -> tuple[ToolCall, ...]:
    """The assembled calls with the recorded index and the bytes received beyond the cap, when given."""
    return tuple(
        msgspec.structs.replace(
            call, index=call.index if rec.index is None else rec.index,
            arguments_bytes=max(rec.arguments_bytes or 0, call.arguments_bytes))
        for call, rec in zip(assembled, calls, strict=False))


def _variant(case: ToolsCase, meta: _Meta) -> str:
    """The tool probe's variant a case implies when ``meta.variant`` does not say it."""
    if meta.tool_result_value:
        return "second_turn"
    if case.expected_tool is None:
        return "no_tool"
    return "call_stream" if case.stream_deltas or meta.stream else "call"


def _text_and_error(case: _Case, meta: _Meta, stream: ChunkReader | None) -> tuple[str, str | None, dict[str, Any] | None, str | None]:
    """The reply's text, finish reason, in-band error and transport error.

    A raw body (``meta.raw_body``) is read by the prober's reader; an error recorded in ``meta.error`` wins
    over one in the stream, which wins over one read from ``error_body``.
    """
    text, finish, transport_error = case.output_text, case.finish_reason, None
    if meta.raw_body:
        body = _raw_body(text)
        transport_error = body.transport_error
        text = "" if transport_error else "".join(body.text)
        finish = finish or body.finish_reason
    error = meta.error if isinstance(meta.error, dict) or meta.error is None else {"message": str(meta.error)}
    if error is None and stream is not None:
        error = stream.error
    if error is None and case.error_body is not None:
        error = error_body(case.error_body.encode("utf-8", "surrogatepass"))
    return text, finish, error, transport_error


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _timings(meta: _Meta, stream: ChunkReader | None) -> tuple[float | None, float | None, float | None]:
    """``(ttft_ms, first_content_ms, first_reasoning_ms)``: the recorded lines win over a summary number."""
    ttft, content, reasoning = _ms(meta.ttft_s), _ms(meta.first_content_delta_s), _ms(meta.first_reasoning_delta_s)
    if stream is None or (stream.first_content_ms is None and stream.first_reasoning_ms is None):
        return ttft, content, reasoning
    content = stream.first_content_ms if stream.first_content_ms is not None else content
    reasoning = stream.first_reasoning_ms if stream.first_reasoning_ms is not None else reasoning
    return min(t for t in (content, reasoning) if t is not None), content, reasoning


def _stream_fields(meta: _Meta, stream: ChunkReader | None, tools: _ToolCase) -> dict[str, Any]:
    """The reply's stream and tool-call fields: from the recorded stream when there is one, else the tool case."""
    recorded_calls = len(meta.tool_calls or [])
    if stream is None:
        return {"keepalives": 0, "done": False, "tool_calls": max(recorded_calls, tools.seen),
                "tool_names": tools.names, "calls": tools.calls, "tool_faults": tools.faults,
                "streamed": bool(tools.streamed), "invalid_utf8": 0}
    kept = stream.tool_calls_kept() if stream.calls else (tools.calls, tools.faults)
    return {"keepalives": stream.keepalives, "done": bool(stream.done),
            "tool_calls": max(recorded_calls, stream.tool_calls_seen, tools.seen),
            "tool_names": tuple(stream.tool_names), "calls": kept[0], "tool_faults": kept[1],
            "streamed": True, "invalid_utf8": stream.invalid_utf8}


def _reply(case: _Case, meta: _Meta, stream: ChunkReader | None) -> Reply:
    """The :class:`Reply` a case records, as the prober would have assembled it."""
    text, finish, error, transport_error = _text_and_error(case, meta, stream)
    ttft_ms, first_content_ms, first_reasoning_ms = _timings(meta, stream)
    reasoning_text = meta.reasoning_text or ""
    timeout_ms = _ms(meta.client_timeout_s)
    timed_out = timeout_ms is not None and (ttft_ms is None or not (text or reasoning_text) or finish is None)
    reply = Reply(
        text=text, reasoning_text=reasoning_text, finish_reason=finish, native_finish_reason=meta.native_finish_reason,
        http_status=meta.http_status if meta.http_status is not None else case.http_status,
        error=error, transport_error=transport_error,
        ttft_ms=ttft_ms, first_content_ms=first_content_ms, first_reasoning_ms=first_reasoning_ms,
        total_ms=timeout_ms if timed_out else (stream.last_ms if stream is not None else None),
        timed_out=timed_out, served_by=meta.provider, usage=meta.usage or {},
        **_stream_fields(meta, stream, case.tool_fields(meta)),
    )
    changes = meta.reply.changes() if meta.reply is not None else {}
    return msgspec.structs.replace(reply, **changes) if changes else reply


def _spec(case: _Case, meta: _Meta, stream: ChunkReader | None) -> ProbeSpec:
    """The :class:`ProbeSpec` the probe sent: the kind's own fields over the common ones."""
    prompt = meta.prompt or ""
    sentinel = (SENTINEL if SENTINEL in prompt else None) if meta.sentinel is UNSET else meta.sentinel
    common: dict[str, Any] = {
        "language": case.request_language, "prompt": prompt, "expected_prefix": meta.expected_prefix or None,
        "sentinel": sentinel or None, "schema": case.schema,
        "response_format": case.default_format if meta.response_format is UNSET else meta.response_format,
        "max_tokens": meta.max_tokens,
        "ttft_threshold_ms": 10_000.0 if meta.ttft_threshold_s is None else meta.ttft_threshold_s * 1000.0,
    }
    return ProbeSpec(**(common | case.spec_fields(meta, stream)))


def parse_case(obj: Any) -> RecordedCase:
    """Turn one JSON-decoded field case into a :class:`RecordedCase`.

    Raises:
        CaseError: not an object, an unknown ``kind``, a required field missing or one of the wrong type.
    """
    case = decode_case(obj)
    meta = case.meta or _Meta()
    stream = parse_events(meta.events) if meta.events is not None else None
    accept = case.accept or ([case.expected] if case.expected is not None else [])
    pinned = meta.pinned
    return RecordedCase(id=case.id, reply=_reply(case, meta, stream), spec=_spec(case, meta, stream),
                        expected=case.expected, accept=tuple(accept),
                        pinned=(pinned.provider, pinned.provider_name) if pinned else None,
                        same_name=tuple(pinned.same_name) if pinned else ())


def judge_case(case: RecordedCase) -> dict[str, Any]:
    """Evaluate one case.

    Returns:
        ``{"id", "outcome", "reason", "checks": [CheckResult as dict, ...]}``
        plus ``expected``, ``accept`` and ``ok`` (outcome in ``accept``) when
        the case states what it expects.
    """
    result = evaluate(case.reply, case.spec)
    if case.pinned is not None:  # as the prober counts a reply another provider served (core.with_pin)
        from reverie_canary.services.prober.core import pin_check, with_pin

        result = with_pin(result, pin_check(case.pinned[0], case.pinned[1], case.reply.served_by, case.same_name))
    verdict: dict[str, Any] = {
        "id": case.id,
        "outcome": result.outcome,
        "reason": result.reason,
        "checks": [{"check": c.check, "outcome": c.outcome, "reason": c.reason, "evidence": msgspec.to_builtins(c.evidence)}
                   for c in result.checks],  # every key, also the defaults the wire leaves out
    }
    if case.expected is not None:
        verdict["expected"] = case.expected
    if case.accept:
        verdict["accept"] = list(case.accept)
        verdict["ok"] = result.outcome in case.accept
    return verdict


def _error_verdict(case_id: str, reason: str) -> dict[str, Any]:
    return {"id": case_id, "outcome": "error", "reason": reason, "checks": []}


def check_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Judge field-case lines, one verdict dict per non-blank line.

    Args:
        lines: JSON lines in the field cases' format (this module's docstring); blank lines are skipped.

    Yields:
        The verdict of :func:`judge_case`, or for a line that cannot be read
        ``{"id": <its id or "line-<n>">, "outcome": "error", "reason":
        "malformed_case: <why>", "checks": []}``.  Never raises for a bad line.
    """
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            yield _error_verdict(f"line-{number}", f"malformed_case: invalid JSON ({exc.msg} at column {exc.colno})")
            continue
        case_id = obj.get("id") if isinstance(obj, dict) and isinstance(obj.get("id"), str) else f"line-{number}"
        try:
            case = parse_case(obj)
        except CaseError as exc:
            yield _error_verdict(case_id, f"malformed_case: {exc}")
            continue
        yield judge_case(case)


def check_file(path: str | Path) -> Iterator[dict[str, Any]]:
    """Judge every case of a field-case JSONL file (``canary check FILE``; ``-``: standard input).

    Raises:
        OSError when the file cannot be opened; bad lines become ``error``
        verdicts (:func:`check_lines`).
    """
    if str(path) == "-":
        yield from check_lines(sys.stdin)
        return
    with open(path, encoding="utf-8") as fh:
        yield from check_lines(fh)
