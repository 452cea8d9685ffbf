"""Recorded replies: read field cases and judge them with the prober's checks.

The format is the field cases' (one JSON object per line: ``id``,
``kind``, ``request_language``, ``schema``, ``output_text``,
``finish_reason``, ``expected``, ``accept``, ``meta`` ...).  Each line becomes
``(id, Reply, ProbeSpec)`` and then one verdict dict; this backs
``canary check FILE`` (:func:`check_file`).  Pure apart from reading the file.

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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from reverie_canary.client.checks import evaluate
from reverie_canary.client.chunks import ChunkReader, error_body
from reverie_canary.client.reply import TOOL_VARIANTS, ProbeSpec, Reply, ToolCall
from reverie_canary.services.prober.prompts import SENTINEL
from reverie_canary.shared.contract.errors import CanaryError

KIND_MAP = {
    "latency": "ttft",
    "refusal": "refusal",
    "structured": "structured",
    "language": "language",
    "encoding": "language",
    "corruption": "corruption",
    "transport": "transport",
    "tools": "tools",
}

_ECHO_PROMPT = re.compile(r"^\s*Repeat exactly(?:,? without any other text)?\s*:\s*(?P<text>.+?)\s*$", re.S | re.I)


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


def _seconds(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CaseError(f"meta.{field} must be a number of seconds")
    return float(value)


def parse_events(events: Any) -> ChunkReader:
    """Read recorded SSE lines with their times (``[{"t_s", "line"}, ...]``) with the prober's reader.

    The same :class:`~reverie_canary.client.chunks.ChunkReader` as
    live probes, so the same time-to-first-token rule: keep-alive comments
    (``: OPENROUTER PROCESSING``) are counted and never start the clock, the
    first content or reasoning delta with a visible character does (FP-01,
    FP-09).  A data line that is not valid JSON is read leniently
    (``{delta.content:'Paris.'}``).  An ``error`` object is an in-band error.

    Returns:
        The reader after the last line (``last_ms``: the latest time seen).

    Raises:
        CaseError: ``events`` is not a list of objects with a ``line``.
    """
    if not isinstance(events, list):
        raise CaseError("meta.events must be a list")
    reader = ChunkReader(lenient=True)
    latest: float | None = None
    for item in events:
        if not isinstance(item, dict) or not isinstance(item.get("line"), str):
            raise CaseError("meta.events items need a 'line' string")
        t = _seconds(item.get("t_s", item.get("t")), "events.t_s")
        t_ms = None if t is None else t * 1000.0
        if t_ms is not None:
            latest = t_ms if latest is None else max(latest, t_ms)
        line = item["line"].strip()
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
    """The tool-call fields of a case, read (:func:`_tool_fields`)."""

    tools: list[dict[str, Any]] | None = None
    expected_tool: str | None = None
    expected_arguments: dict[str, Any] | None = None
    calls: tuple[ToolCall, ...] = ()
    faults: tuple[str, ...] = ()
    seen: int = 0
    names: tuple[str, ...] = ()
    streamed: bool | None = None


def _tool_fields(obj: dict[str, Any], meta: dict[str, Any]) -> _ToolCase:
    """Read ``tools``, ``expected_tool``, ``expected_arguments``, ``tool_calls``, ``stream_deltas``.

    The calls are assembled by the one wire reader (module docstring).

    Raises:
        CaseError: a field of the wrong type.
    """
    tools = obj.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise CaseError("'tools' must be a list of tool objects or null")
    expected_tool = obj.get("expected_tool")
    if expected_tool is not None and not isinstance(expected_tool, str):
        raise CaseError("'expected_tool' must be a string or null")
    expected_arguments = obj.get("expected_arguments")
    if expected_arguments is not None and not isinstance(expected_arguments, dict):
        raise CaseError("'expected_arguments' must be an object or null")
    calls = obj.get("tool_calls")
    if calls is None:
        calls = []
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise CaseError("'tool_calls' must be a list of {id, name, arguments}")
    deltas = obj.get("stream_deltas")
    if deltas is not None and not (isinstance(deltas, list) and all(isinstance(d, dict) for d in deltas)):
        raise CaseError("'stream_deltas' must be a list of delta objects")
    reader = ChunkReader()
    if deltas:
        for delta in deltas:
            line = json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]}, ensure_ascii=False)
            reader.line(b"data: " + line.encode("utf-8", "surrogatepass"), None)
    elif calls:
        entries = []
        for call in calls:
            arguments = call.get("arguments")
            if arguments is not None and not isinstance(arguments, str):
                raise CaseError("tool_calls[].arguments must be the raw string as received")
            entries.append({"id": call.get("id"), "type": call.get("type", "function"),
                            "function": {"name": call.get("name"), "arguments": arguments}})
        body = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": entries}}]},
                          ensure_ascii=False)
        reader.body(body.encode("utf-8", "surrogatepass"), None)
    assembled, faults = reader.tool_calls_kept()
    if calls and not deltas:  # the recorded index and the bytes received beyond the cap, when given
        fixed = []
        for call, recorded in zip(assembled, calls, strict=False):
            index, size = recorded.get("index", call.index), recorded.get("arguments_bytes", call.arguments_bytes)
            if isinstance(index, bool) or not isinstance(index, int) or isinstance(size, bool) \
                    or not isinstance(size, int):
                raise CaseError("tool_calls[].index and arguments_bytes must be integers")
            fixed.append(msgspec.structs.replace(call, index=index, arguments_bytes=max(size, call.arguments_bytes)))
        assembled = tuple(fixed)
    stream = meta.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise CaseError("meta.stream must be a boolean")
    return _ToolCase(tools=tools, expected_tool=expected_tool, expected_arguments=expected_arguments,
                     calls=assembled, faults=faults, seen=reader.tool_calls_seen, names=tuple(reader.tool_names),
                     streamed=True if deltas else stream)


def _tool_spec(meta: dict[str, Any], case: _ToolCase) -> dict[str, Any]:
    """The :class:`ProbeSpec` fields of a tool-call case.

    Raises:
        CaseError: ``meta.variant``, ``meta.tool_result_value`` or ``meta.parallel_tool_calls`` of the wrong type.
    """
    variant = meta.get("variant")
    if variant is None:
        variant = ("second_turn" if meta.get("tool_result_value") else
                   "no_tool" if case.expected_tool is None else "call_stream" if case.streamed else "call")
    if variant not in TOOL_VARIANTS:
        raise CaseError(f"unknown meta.variant {variant!r}; known: {list(TOOL_VARIANTS)}")
    value = meta.get("tool_result_value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, str | int | float)):
        raise CaseError("meta.tool_result_value must be a string or a number")
    parallel = meta.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise CaseError("meta.parallel_tool_calls must be a boolean")
    return {"tools": case.tools, "expected_tool": case.expected_tool, "expected_arguments": case.expected_arguments,
            "variant": variant, "tool_result_value": None if value is None else str(value), "parallel_calls": parallel}


def parse_case(obj: Any) -> RecordedCase:
    """Turn one decoded field case into a :class:`RecordedCase`.

    Raises:
        CaseError: a required field is missing or has the wrong type.
    """
    if not isinstance(obj, dict):
        raise CaseError("a case must be a JSON object")
    case_id = obj.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise CaseError("'id' must be a non-empty string")
    kind = obj.get("kind")
    if kind not in KIND_MAP:
        raise CaseError(f"unknown kind {kind!r}")
    text = obj.get("output_text")
    if not isinstance(text, str):
        raise CaseError("'output_text' must be a string")
    finish = obj.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise CaseError("'finish_reason' must be a string or null")
    language = obj.get("request_language")
    if language is not None and not isinstance(language, str):
        raise CaseError("'request_language' must be a string or null")
    schema = obj.get("schema")
    if schema is not None and not isinstance(schema, dict):
        raise CaseError("'schema' must be an object or null")
    meta = obj.get("meta") or {}
    if not isinstance(meta, dict):
        raise CaseError("'meta' must be an object")
    accept = obj.get("accept") or ([obj["expected"]] if isinstance(obj.get("expected"), str) else [])
    if not isinstance(accept, list) or not all(isinstance(a, str) for a in accept):
        raise CaseError("'accept' must be a list of strings")

    stream = parse_events(meta["events"]) if "events" in meta and meta["events"] is not None else None
    transport_error = None
    if meta.get("raw_body"):
        body = _raw_body(text)
        transport_error = body.transport_error
        text = "" if transport_error else "".join(body.text)
        finish = finish or body.finish_reason
    error = meta.get("error")
    if error is not None and not isinstance(error, dict):
        error = {"message": str(error)}
    if stream is not None and stream.error is not None and error is None:
        error = stream.error

    ttft_s = _seconds(meta.get("ttft_s"), "ttft_s")
    first_reasoning = _seconds(meta.get("first_reasoning_delta_s"), "first_reasoning_delta_s")
    first_content = _seconds(meta.get("first_content_delta_s"), "first_content_delta_s")
    ttft_ms = ttft_s * 1000.0 if ttft_s is not None else None
    first_reasoning_ms = first_reasoning * 1000.0 if first_reasoning is not None else None
    first_content_ms = first_content * 1000.0 if first_content is not None else None
    if stream is not None and (stream.first_content_ms is not None or stream.first_reasoning_ms is not None):
        # the recorded lines are the raw evidence: they win over a summary number
        first_content_ms = stream.first_content_ms if stream.first_content_ms is not None else first_content_ms
        first_reasoning_ms = stream.first_reasoning_ms if stream.first_reasoning_ms is not None else first_reasoning_ms
        ttft_ms = min(t for t in (first_content_ms, first_reasoning_ms) if t is not None)
    client_timeout = _seconds(meta.get("client_timeout_s"), "client_timeout_s")
    reasoning_text = meta.get("reasoning_text") or ""
    if not isinstance(reasoning_text, str):
        raise CaseError("meta.reasoning_text must be a string")
    produced = bool(text or reasoning_text)
    timed_out = client_timeout is not None and (ttft_ms is None or not produced or finish is None)
    usage = meta.get("usage") or {}
    if not isinstance(usage, dict):
        raise CaseError("meta.usage must be an object")
    http_status = meta.get("http_status", obj.get("http_status"))
    if http_status is not None and (isinstance(http_status, bool) or not isinstance(http_status, int)):
        raise CaseError("http_status must be an integer")
    recorded_calls = meta.get("tool_calls") or []
    if not isinstance(recorded_calls, list):
        raise CaseError("meta.tool_calls must be a list")
    raw_error = obj.get("error_body")
    if raw_error is not None:
        if not isinstance(raw_error, str):
            raise CaseError("'error_body' must be the raw body, a string")
        if error is None:
            error = error_body(raw_error.encode("utf-8", "surrogatepass"))
    tool_case = _tool_fields(obj, meta) if kind == "tools" else _ToolCase()

    recorded = meta.get("reply") or {}
    if not isinstance(recorded, dict):
        raise CaseError("meta.reply must be an object")
    reply = Reply(
        text=text,
        reasoning_text=reasoning_text,
        finish_reason=finish,
        native_finish_reason=meta.get("native_finish_reason"),
        http_status=http_status,
        error=error,
        transport_error=transport_error,
        ttft_ms=ttft_ms,
        first_content_ms=first_content_ms,
        first_reasoning_ms=first_reasoning_ms,
        total_ms=client_timeout * 1000.0 if (timed_out and client_timeout is not None) else
        (stream.last_ms if stream is not None else None),
        timed_out=timed_out,
        served_by=meta.get("provider") if isinstance(meta.get("provider"), str) else None,
        usage=usage,
        keepalives=stream.keepalives if stream is not None else 0,
        done=bool(stream is not None and stream.done),
        tool_calls=max(len(recorded_calls), stream.tool_calls_seen if stream is not None else 0, tool_case.seen),
        tool_names=tuple(stream.tool_names) if stream is not None else tool_case.names,
        calls=stream.tool_calls_kept()[0] if stream is not None and stream.calls else tool_case.calls,
        tool_faults=stream.tool_calls_kept()[1] if stream is not None and stream.calls else tool_case.faults,
        streamed=stream is not None or bool(tool_case.streamed),
        invalid_utf8=stream.invalid_utf8 if stream is not None else 0,
    )
    if recorded:
        reply = _with_recorded(reply, recorded)

    prompt = meta.get("prompt") or ""
    if not isinstance(prompt, str):
        raise CaseError("meta.prompt must be a string")
    probe_kind = KIND_MAP[kind]
    echo_text = None
    if kind == "corruption":
        m = _ECHO_PROMPT.match(prompt)
        if m:
            echo_text, probe_kind = m.group("text"), "echo"
    if kind == "transport" and stream is not None and meta.get("events"):
        probe_kind = "ttft"
    if "response_format" in meta:
        fmt = meta["response_format"]
    else:
        fmt = "json_schema" if kind == "structured" else None
    if fmt not in (None, "json_schema", "json_object"):
        raise CaseError(f"unknown meta.response_format {fmt!r}")
    threshold_s = _seconds(meta.get("ttft_threshold_s"), "ttft_threshold_s")
    max_tokens = meta.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise CaseError("meta.max_tokens must be an integer")
    prefix = meta.get("expected_prefix")
    if prefix is not None and not isinstance(prefix, str):
        raise CaseError("meta.expected_prefix must be a string")
    sentinel = meta.get("sentinel", SENTINEL if SENTINEL in prompt else None)
    if sentinel is not None and not isinstance(sentinel, str):
        raise CaseError("meta.sentinel must be a string")
    pinned = meta.get("pinned")
    if pinned is not None and not (isinstance(pinned, dict) and isinstance(pinned.get("provider"), str)
                                   and isinstance(pinned.get("provider_name"), str)):
        raise CaseError("meta.pinned must be {provider, provider_name}")
    same_name = pinned.get("same_name", []) if pinned else []
    if not isinstance(same_name, list) or not all(isinstance(t, str) for t in same_name):
        raise CaseError("meta.pinned.same_name must be a list of provider tags")
    tool_spec = _tool_spec(meta, tool_case) if kind == "tools" else {}
    spec = ProbeSpec(
        **tool_spec,
        kind=probe_kind,
        language=language,
        prompt=prompt,
        expected_prefix=prefix or None,
        sentinel=sentinel or None,
        echo_text=echo_text,
        schema=schema,
        response_format=fmt,
        max_tokens=max_tokens,
        ttft_threshold_ms=threshold_s * 1000.0 if threshold_s is not None else 10_000.0,
    )
    expected = obj.get("expected") if isinstance(obj.get("expected"), str) else None
    return RecordedCase(id=case_id, reply=reply, spec=spec, expected=expected, accept=tuple(accept),
                        pinned=(pinned["provider"], pinned["provider_name"]) if pinned else None,
                        same_name=tuple(same_name))


#: ``meta.reply``: the reply's own fields as the prober kept them (``canary evidence`` writes them), each
#: with its type; a field left out keeps what the case's other fields say.
RECORDED_REPLY_FIELDS: dict[str, tuple[type, ...]] = {
    "transport_error": (str,), "timed_out": (bool,), "done": (bool,), "keepalives": (int,),
    "tool_calls": (int,), "tool_names": (list,), "output_bytes": (int,), "wire_bytes": (int,), "cut": (str,),
    "invalid_utf8": (int,), "total_ms": (int, float), "generation_id": (str,),
    "tool_faults": (list,), "streamed": (bool,),
}


def _with_recorded(reply: Reply, recorded: dict[str, Any]) -> Reply:
    """``reply`` with the fields of ``meta.reply`` (:data:`RECORDED_REPLY_FIELDS`).

    Raises:
        CaseError: an unknown field or one of the wrong type.
    """
    changes: dict[str, Any] = {}
    for name, value in recorded.items():
        types = RECORDED_REPLY_FIELDS.get(name)
        if types is None:
            raise CaseError(f"meta.reply.{name} is not a recorded reply field; known: {sorted(RECORDED_REPLY_FIELDS)}")
        if value is None:
            changes[name] = None
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise CaseError(f"meta.reply.{name} has the wrong type")
        changes[name] = tuple(str(v) for v in value) if name in ("tool_names", "tool_faults") else value
    return msgspec.structs.replace(reply, **changes)


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
