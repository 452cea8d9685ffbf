"""Tool calls (docs/concepts/probes.md, the tool-call contract): the calls that arrived, judged by code like the vendors' verifiers.

The probe offers a small fixed tool set and asks for one known call (values fixed by the
prompt), or for none (a request no tool fits: text is right), or, on the second turn, for text
that uses the tool's result (:mod:`reverie_canary.services.prober.prompts`).  Each check below is
a pure function ``(reply, spec) -> CheckResult`` over :attr:`Reply.calls` (the calls as the one
wire reader assembled them, arguments as raw strings) and :attr:`Reply.tool_faults` (what the
reader saw go wrong on the way).  Rules that hold for all of them:

- **Judge the calls that arrived, never the finish reason that claims them** (OpenRouter's and OpenAI's tool-calling documentation
  §1.2): ``finish_reason: tool_calls`` with no call is no call (TC-06); ``stop`` with a valid call
  is a call (TC-19; OpenAI's own API answers a named ``tool_choice`` with ``stop``).
- **A call that exists only inside the reasoning is not a call** (the reasoning is never parsed);
  tool-call markup in the reasoning is not a failure either (TC-22): only the visible text is
  scanned.
- **Arguments are parsed strictly, after the stream ended, never repaired** (the OpenAI tool-call wire as OpenRouter passes it):
  JavaScript's ``JSON.parse`` is the bar (OpenRouter's Tool Call Error Rate uses it), so
  ``NaN``/``Infinity``, an empty string, a prefix before the object (``json\\n{…}``, TC-11), two
  values back to back (``{}{…}``, TC-15) and a JSON string holding the object (double-encoded,
  TC-12) all fail; nothing is unwrapped, because unwrapping would hide a serving fault.
- **Schemas are JSON Schema draft 7** (``jsonschema.Draft7Validator`` with its format checker),
  the semantics OpenRouter's validator applies (``@cfworker/json-schema`` in ``'7'`` mode;
  the JSON Schema specification): ``1.0`` is a valid ``integer``, ``true`` is not; known ``format``\\ s are
  asserted; ``pattern`` is unanchored; a schema that does not compile counts as always valid (as
  at OpenRouter).  ``jsonschema`` is the client distribution's ``schema`` extra and is imported
  only when a call is validated: without it the schema check says ``not_applicable`` /
  ``validator_missing``.  Values are validated as sent, never coerced first (TC-13: ``"250"`` for
  a ``number`` fails).
- **Fixed values compare as values, not text** (:func:`same_value`): numbers numerically
  (``250.0`` equals ``250``; ``true`` is not ``1``), strings after Unicode NFC, case folding and
  collapsing whitespace (``上海`` written as ``\\u4e0a\\u6d77`` in the JSON is the same string,
  TC-18; ``Quarterly Review`` for ``Quarterly review`` is a model's capitalisation, not a
  serving fault — mojibake, truncation and lost fields are what this check is for), objects as
  subsets (the call may carry optional fields the prompt did not fix), lists as multisets.

Reason codes (stable): ``tool_not_called`` (a required call not made: the reply answered in
text), ``tool_unexpected_call`` (a call where none fits), ``tool_wrong_tool`` (another offered
tool called instead), ``tool_too_many_calls`` (more than one where the request allowed one, or
more than the reader keeps), ``tool_empty_reply`` (no text and no call on a clean stop),
``tool_unknown_name``, ``tool_args_invalid_json``, ``tool_args_schema_mismatch``,
``tool_args_wrong_value``, ``tool_stream_assembly`` (a streamed reply's calls did not assemble:
ids, names, indexes, fragments after the finish, values back to back), ``tool_call_malformed``
(the same faults in an unstreamed body), ``tool_result_ignored`` (the second turn's text lacks
the value only the tool's result holds), ``tool_markup_in_content`` (tool-call markup in the
visible text: an any-reply check, in :data:`reverie_canary.client.checks.behaviour.BEHAVIOUR_CHECKS`);
``reply_too_large`` for arguments past the reader's cap.  Declining a call and making one where
none fits can be the model's own randomness: :data:`TOOL_TRIGGER_REASONS` are confirmed by the
prober with two more tries, majority decides (docs/concepts/probes.md, the tool-call contract).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import unicodedata
from typing import Any

import msgspec

from reverie_canary.client.checks.refusal import spent_on_reasoning
from reverie_canary.client.checks.tokens import find_tokens, token_view
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

#: The two reasons that can be the model's own randomness (trigger agreement): the prober
#: confirms them with two more tries at once and takes the majority, as it does for
#: :data:`reverie_canary.shared.contract.events.LANGUAGE_ANOMALIES`.
TOOL_TRIGGER_REASONS: frozenset[str] = frozenset({"tool_not_called", "tool_unexpected_call"})

#: Every reason this module gives (``reply_too_large`` is shared with the size check).
TOOL_REASONS: tuple[str, ...] = (
    "tool_not_called", "tool_unexpected_call", "tool_wrong_tool", "tool_too_many_calls", "tool_empty_reply",
    "tool_unknown_name", "tool_args_invalid_json", "tool_args_schema_mismatch", "tool_args_wrong_value",
    "tool_stream_assembly", "tool_call_malformed", "tool_result_ignored", "tool_markup_in_content",
)

#: Assembly facts (:attr:`Reply.tool_faults`) that fail a reply.  ``id_resent`` and
#: ``name_resent`` (the same id or name repeated at the same index, as Fireworks does on every
#: chunk) are tolerated: the assembly rule takes them once (the OpenAI tool-call wire as OpenRouter passes it) and OpenRouter's
#: own SDK does the same; they stay in the evidence, because a client that concatenates every
#: string field (openai-python's stream helper) would read ``read_fileread_file``.
ASSEMBLY_FAULTS: frozenset[str] = frozenset({
    "id_missing", "id_duplicate", "id_changed", "name_missing", "name_changed", "index_missing", "after_finish",
    "type_invalid",
})
TOLERATED_FACTS: frozenset[str] = frozenset({"id_resent", "name_resent"})

#: Characters of a raw value quoted in evidence.
EXCERPT_CHARS = 120


def _fact(entry: str) -> tuple[str, int | None]:
    fact, _, index = entry.partition("@")
    return fact, int(index) if index.lstrip("-").isdigit() else None


def offered_tools(spec: ProbeSpec) -> dict[str, dict[str, Any] | None]:
    """Name -> ``parameters`` schema of every tool the request offered (``None``: no schema)."""
    out: dict[str, dict[str, Any] | None] = {}
    for tool in spec.tools or ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else None
    return out


def _visible(reply: Reply) -> str:
    return reply.text.strip()


def _calls_seen(reply: Reply) -> int:
    return max(reply.tool_calls, len(reply.calls))


def _excerpt(text: str, chars: int = EXCERPT_CHARS) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


# -- parsing the arguments ---------------------------------------------------------------------


class Arguments(msgspec.Struct, frozen=True):
    """What a call's raw ``arguments`` string is.

    ``shape``: ``object`` (a JSON object: the only valid form), ``empty``, ``double_encoded``
    (a JSON string whose content is JSON), ``not_object`` (another JSON value), ``truncated``
    (the text ends inside a value), ``concatenated`` (two or more JSON values back to back),
    ``leading_text`` (text before a JSON object), ``trailing_text``, ``invalid``.
    """

    shape: str
    value: Any = None
    error: str = ""
    position: int | None = None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # JSON.parse rejects NaN, Infinity, -Infinity


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


@functools.lru_cache(maxsize=64)
def parse_arguments(raw: str) -> Arguments:
    """Parse a call's raw ``arguments`` the way a strict client does (``JSON.parse``), and name what it is.

    Args:
        raw: the string exactly as received (at most ``TOOL_ARGUMENTS_MAX_BYTES``).

    Returns:
        An :class:`Arguments`; never raises.  Results are cached by text (the checks of one
        reply ask for the same call's arguments several times).
    """
    text = raw.strip()
    if not text:
        return Arguments("empty")
    try:
        value = _DECODER.decode(text)
    except ValueError as exc:
        return _why_invalid(text, exc)
    if isinstance(value, dict):
        return Arguments("object", value)
    if isinstance(value, str):
        inner = value.strip()
        if inner[:1] in ("{", "["):
            try:
                _DECODER.decode(inner)
                return Arguments("double_encoded", value, "arguments decode to a string that holds JSON")
            except ValueError:
                pass
    return Arguments("not_object", value, f"arguments decode to {type(value).__name__}, not an object")


def _why_invalid(text: str, exc: ValueError) -> Arguments:
    message = str(exc)
    position = getattr(exc, "pos", None)
    try:
        _, end = _DECODER.raw_decode(text)
    except ValueError:
        end = None
    if end is not None:  # a whole value, then more
        try:
            _DECODER.raw_decode(text[end:].lstrip())
            return Arguments("concatenated", None, "two JSON values back to back", end)
        except ValueError:
            return Arguments("trailing_text", None, message, end)
    if text[0] in "{[":
        ends_early = message.startswith("Unterminated string") or (position is not None and position >= len(text))
        return Arguments("truncated" if ends_early else "invalid", None, message, position)
    brace = text.find("{")
    if brace > 0:
        try:
            _DECODER.raw_decode(text[brace:])
            return Arguments("leading_text", None, f"{_excerpt(text[:brace], 40)!r} before the JSON object", brace)
        except ValueError:
            pass
    return Arguments("invalid", None, message, position)


# -- trigger agreement -------------------------------------------------------------------------


def check_tool_trigger(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail a required call not made, a call where none fits, another tool, too many calls.

    Rules (docs/concepts/probes.md, the tool-call contract; the vendors' "trigger agreement"):

    - ``spec.expected_tool`` set: a reply with visible text and no call is ``tool_not_called``
      (TC-23; TC-06 whatever its finish reason says); no text and no call is left to
      :func:`check_tool_empty`; ``finish_reason: length`` with no call after reasoning is
      ``inconclusive`` / ``reasoning_budget`` (the budget went to thinking: FP-07's rule).
      Calls that do not name the expected tool: ``tool_wrong_tool`` when one names another
      offered tool (an unknown name is :func:`check_tool_names`' finding).
    - ``spec.expected_tool`` ``None`` (no tool fits; the second turn): any call is
      ``tool_unexpected_call`` (TC-08).
    - More than one call where ``spec.parallel_calls`` is false, or more calls than the reader
      keeps (``tool_calls > len(calls)``): ``tool_too_many_calls``.

    ``tool_not_called`` and ``tool_unexpected_call`` are :data:`TOOL_TRIGGER_REASONS`.
    Evidence: ``finish_reason``, ``calls`` (count), ``names``, ``expected``, ``first_chars``.
    """
    name = "tools.trigger"
    offered = offered_tools(spec)
    if not offered:
        return CheckResult(check=name, outcome="not_applicable", reason="no_tools")
    seen = _calls_seen(reply)
    names = [c.name for c in reply.calls]
    evidence: dict[str, Any] = {"finish_reason": reply.finish_reason, "calls": seen,
                                "names": [_excerpt(n or "", 64) for n in names]}
    if spec.expected_tool is None:
        if seen:
            return CheckResult(check=name, outcome="fail", reason="tool_unexpected_call", evidence=evidence)
        return CheckResult(check=name, outcome="pass")
    evidence["expected"] = spec.expected_tool
    if not seen:
        text = _visible(reply)
        if reply.finish_reason == "length" and spent_on_reasoning(reply):
            return CheckResult(check=name, outcome="inconclusive", reason="reasoning_budget", evidence=evidence)
        if not text:
            return CheckResult(check=name, outcome="not_applicable", reason="no_output", evidence=evidence)
        evidence["first_chars"] = _excerpt(text, 80)
        return CheckResult(check=name, outcome="fail", reason="tool_not_called", evidence=evidence)
    if spec.expected_tool not in names:
        if any(n in offered for n in names):
            return CheckResult(check=name, outcome="fail", reason="tool_wrong_tool", evidence=evidence)
        return CheckResult(check=name, outcome="not_applicable", reason="unknown_name", evidence=evidence)
    if seen > len(reply.calls) or (seen > 1 and not spec.parallel_calls):
        evidence["parallel_allowed"] = spec.parallel_calls
        return CheckResult(check=name, outcome="fail", reason="tool_too_many_calls", evidence=evidence)
    return CheckResult(check=name, outcome="pass")


def check_tool_empty(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail a reply with neither visible text nor a call on a clean stop (TC-07).

    Whatever the variant, a tool-offering request must get a call or words; an empty reply
    (the provider that answered 22 of 51 tool requests with nothing) is a fault.  Reasoning
    does not count (TC-07 reasoned about the call it never made).  Empty content beside a call
    is normal (TC-18, TC-22).  A ``length`` or ``content_filter`` stop is judged by the
    trigger and finish-reason checks.  Evidence: ``finish_reason``, ``reasoning_chars``.
    """
    name = "tools.empty"
    if reply.calls or reply.tool_calls or _visible(reply):
        return CheckResult(check=name, outcome="pass")
    if reply.finish_reason in ("length", "content_filter"):
        return CheckResult(check=name, outcome="not_applicable", reason="no_text",
                           evidence={"finish_reason": reply.finish_reason})
    return CheckResult(check=name, outcome="fail", reason="tool_empty_reply",
                       evidence={"finish_reason": reply.finish_reason, "reasoning_chars": len(reply.reasoning_text)})


# -- the calls themselves ------------------------------------------------------------------------


def check_tool_names(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail a call whose name is not exactly one of the offered tools' (OpenRouter's ``UnknownName``).

    Exact match, nothing stripped first: ``get_weather<|channel|>commentary`` is unknown (TC-9),
    so is ``get_weatherget_weather``.  A call without a name is the assembly check's finding.
    Evidence: ``index``, ``name``, ``offered``.
    """
    name = "tools.name"
    offered = offered_tools(spec)
    for call in reply.calls:
        if call.name is not None and call.name not in offered:
            return CheckResult(check=name, outcome="fail", reason="tool_unknown_name",
                               evidence={"index": call.index, "name": _excerpt(call.name, 80),
                                         "offered": sorted(offered)[:8]})
    return CheckResult(check=name, outcome="pass")


def check_tool_arguments(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail arguments that are not one JSON object as a strict client parses them (``InvalidJson``).

    Every call is parsed (:func:`parse_arguments`): an empty string, truncated JSON, a prefix,
    values back to back, a double-encoded string, another JSON value, or ``arguments`` sent as
    an object instead of a JSON string (``arguments_not_string``) are
    ``tool_args_invalid_json``; arguments the reader cut at its cap are ``reply_too_large``.
    Evidence: ``index``, ``name``, ``shape``, ``error``, ``position``, ``excerpt``, ``bytes``.
    """
    name = "tools.arguments_json"
    not_string = {i for f, i in map(_fact, reply.tool_faults) if f == "arguments_not_string"}
    for call in reply.calls:
        base = {"index": call.index, "name": _excerpt(call.name or "", 64)}
        if call.arguments_cut:
            return CheckResult(check=name, outcome="fail", reason="reply_too_large",
                               evidence={**base, "bytes": call.arguments_bytes, "kept_chars": len(call.arguments)})
        if call.index in not_string:
            return CheckResult(check=name, outcome="fail", reason="tool_args_invalid_json",
                               evidence={**base, "shape": "not_a_string", "excerpt": _excerpt(call.arguments)})
        parsed = parse_arguments(call.arguments)
        if parsed.shape != "object":
            evidence = {**base, "shape": parsed.shape, "excerpt": _excerpt(call.arguments)}
            if parsed.error:
                evidence["error"] = _excerpt(parsed.error)
            if parsed.position is not None:
                evidence["position"] = parsed.position
            return CheckResult(check=name, outcome="fail", reason="tool_args_invalid_json", evidence=evidence)
    return CheckResult(check=name, outcome="pass")


_VALIDATORS: dict[bytes, Any] = {}


def _validator(schema: dict[str, Any]) -> Any:
    """A draft-7 validator of ``schema`` (with its format checker), or ``None`` when it does not compile.

    Raises:
        ImportError: ``jsonschema`` (the ``schema`` extra) is not installed.
    """
    key = msgspec.json.encode(schema)
    known = _VALIDATORS.get(key, _VALIDATORS)
    if known is not _VALIDATORS:
        return known
    from jsonschema import Draft7Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft7Validator.check_schema(schema)
        validator = Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)
    except SchemaError:
        validator = None
    if len(_VALIDATORS) >= 32:
        _VALIDATORS.clear()
    _VALIDATORS[key] = validator
    return validator


def _path(parts: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def check_tool_schema(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail a call whose arguments do not validate against its tool's schema (``SchemaMismatch``).

    JSON Schema draft 7 (module docstring): ``1.0`` is an integer, a number sent as a string is
    not a number (TC-13), a required field missing fails (TC-14), optional fields may be left
    out (TC-18).  Calls with an unknown name or arguments that are not an object are the other
    checks' findings.  Evidence: ``index``, ``name``, ``path`` (``$.start.date``), ``keyword``
    (the failing schema keyword), ``message``, ``errors`` (how many, up to 16).
    ``not_applicable``: ``validator_missing`` (no ``jsonschema``), ``schema_unusable`` (a schema
    that does not compile counts as valid, as at OpenRouter).
    """
    name = "tools.arguments_schema"
    offered = offered_tools(spec)
    unusable = None
    for call in reply.calls:
        schema = offered.get(call.name) if call.name is not None else None
        if schema is None or call.arguments_cut:
            continue
        parsed = parse_arguments(call.arguments)
        if parsed.shape != "object":
            continue
        try:
            validator = _validator(schema)
        except ImportError:
            return CheckResult(check=name, outcome="not_applicable", reason="validator_missing")
        if validator is None:
            unusable = call.name
            continue
        errors = list(itertools.islice(validator.iter_errors(parsed.value), 16))
        if errors:
            from jsonschema.exceptions import best_match

            best = best_match(errors)
            return CheckResult(check=name, outcome="fail", reason="tool_args_schema_mismatch",
                               evidence={"index": call.index, "name": call.name, "path": _path(best.absolute_path),
                                         "keyword": str(best.validator), "message": _excerpt(best.message, 200),
                                         "errors": len(errors)})
    if unusable is not None:
        return CheckResult(check=name, outcome="not_applicable", reason="schema_unusable", evidence={"name": unusable})
    return CheckResult(check=name, outcome="pass")


# -- the values the prompt fixed -------------------------------------------------------------------


def _norm_text(value: str) -> str:
    return " ".join(unicodedata.normalize("NFC", value).casefold().split())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same_value(expected: Any, got: Any) -> bool:
    """Whether ``got`` carries the value ``expected`` fixes (the module docstring's rules).

    Numbers numerically (``1.0 == 1``; booleans are not numbers); strings equal after NFC, case
    folding and whitespace collapsing; objects: every expected key present with the same value
    (extra keys allowed); lists: the same values in any order; anything else by ``==``.
    """
    if _is_number(expected):
        return _is_number(got) and expected == got
    if isinstance(expected, str):
        return isinstance(got, str) and _norm_text(expected) == _norm_text(got)
    if isinstance(expected, dict):
        return isinstance(got, dict) and all(k in got and same_value(v, got[k]) for k, v in expected.items())
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return False
        left = list(got)
        for item in expected:
            match = next((i for i, g in enumerate(left) if same_value(item, g) and same_value(g, item)), None)
            if match is None:
                return False
            left.pop(match)
        return True
    return type(expected) is type(got) and expected == got


def _first_difference(expected: dict[str, Any], got: dict[str, Any], path: str = "$") -> tuple[str, Any, Any]:
    for key, want in expected.items():
        where = f"{path}.{key}"
        if key not in got:
            return where, want, "(missing)"
        if isinstance(want, dict) and isinstance(got[key], dict) and not same_value(want, got[key]):
            return _first_difference(want, got[key], where)
        if not same_value(want, got[key]):
            return where, want, got[key]
    return path, expected, got


def check_tool_values(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail when no call of the expected tool carries the values the prompt fixed.

    ``spec.expected_arguments`` is a subset (:func:`same_value`): a fixed value missing or
    different is ``tool_args_wrong_value``.  With several calls of the expected tool (parallel
    calls allowed) one that carries them all passes.  Streamed and unstreamed calls are judged
    alike, each against the prompt's values.  ``not_applicable`` when no call of the expected
    tool has arguments that are an object (``no_call``, ``no_arguments``: the other checks say
    why).  Evidence: ``index``,
    ``path``, ``expected``, ``got`` (each cut), ``calls`` (of the expected tool).
    """
    name = "tools.arguments_values"
    if not spec.expected_tool or not spec.expected_arguments:
        return CheckResult(check=name, outcome="pass")
    candidates = [c for c in reply.calls if c.name == spec.expected_tool and not c.arguments_cut]
    if not candidates:
        return CheckResult(check=name, outcome="not_applicable", reason="no_call")
    objects = [(c, parse_arguments(c.arguments).value) for c in candidates
               if parse_arguments(c.arguments).shape == "object"]
    if not objects:
        return CheckResult(check=name, outcome="not_applicable", reason="no_arguments")
    if any(same_value(spec.expected_arguments, value) for _, value in objects):
        return CheckResult(check=name, outcome="pass")
    call, value = objects[0]
    path, want, got = _first_difference(spec.expected_arguments, value)
    return CheckResult(check=name, outcome="fail", reason="tool_args_wrong_value",
                       evidence={"index": call.index, "path": path, "expected": _clip(want), "got": _clip(got),
                                 "calls": len(objects)})


def _clip(value: Any) -> Any:
    if isinstance(value, str):
        return _excerpt(value, 80)
    if isinstance(value, (dict, list)):
        return _excerpt(json.dumps(value, ensure_ascii=False), 120)
    return value


# -- assembly ---------------------------------------------------------------------------------------


def check_tool_assembly(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail calls that did not assemble: the reader's facts (:data:`ASSEMBLY_FAULTS`), values back to back.

    A missing, duplicated or changed id (another call reusing an index: Ollama sends every
    parallel call at ``index: 0``), a missing or changed name, a delta without ``index``, a
    tool-call fragment after the finish reason, a ``type`` other than ``function``, and in a
    streamed call two JSON values back to back (``{}{"city": …}``: an extra fragment, TC-15).
    Streamed: ``tool_stream_assembly``; the same faults in one unstreamed body:
    ``tool_call_malformed``.  Tolerated facts (:data:`TOLERATED_FACTS`) pass and are kept in the
    evidence (``notes``).  Evidence: ``faults``, ``notes``, ``streamed``.
    """
    name = "tools.assembly"
    faults = [f for f in reply.tool_faults if _fact(f)[0] in ASSEMBLY_FAULTS]
    notes = [f for f in reply.tool_faults if _fact(f)[0] in TOLERATED_FACTS]
    if reply.streamed:
        for call in reply.calls:
            if call.fragments > 1 and not call.arguments_cut \
                    and parse_arguments(call.arguments).shape == "concatenated":
                faults.append(f"arguments_concatenated@{call.index}")
    if not faults:
        if notes:
            return CheckResult(check=name, outcome="pass", evidence={"notes": notes[:8]})
        return CheckResult(check=name, outcome="pass")
    reason = "tool_stream_assembly" if reply.streamed else "tool_call_malformed"
    evidence: dict[str, Any] = {"faults": faults[:8], "streamed": reply.streamed}
    if notes:
        evidence["notes"] = notes[:8]
    return CheckResult(check=name, outcome="fail", reason=reason, evidence=evidence)


# -- the second turn ----------------------------------------------------------------------------------


def _digits_ascii(text: str) -> str:
    """``text`` with every decimal digit of any script as ASCII (``٣١`` -> ``31``), NFKC-normalised."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return text
    return "".join(str(unicodedata.decimal(ch)) if not ch.isascii() and ch.isdecimal() else ch for ch in text)


def result_value_in(text: str, value: str) -> bool:
    """Whether ``text`` states ``value``: a number as a number (``31``, ``31.0``, ``٣١``; not ``131``), else a word.

    Numbers: digits of any script read as ASCII, the value not inside a longer number, a
    fraction of zeros allowed (``31,0``).  Other values: case-folded substring after NFC.
    """
    if re.fullmatch(r"-?\d+(?:\.\d+)?", value):
        body = re.escape(value.lstrip("-"))
        pattern = rf"(?<![\d.,]){body}(?:[.,]0+)?(?![\d]|[.,]\d)"
        return re.search(pattern, _digits_ascii(text)) is not None
    return _norm_text(value) in _norm_text(text)


def check_tool_result(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail a second-turn reply whose text does not use the tool's result (``tool_result_ignored``).

    The result holds a value nothing else gives (``spec.tool_result_value``, a temperature the
    prompt never named): the reply's visible text must state it (:func:`result_value_in`).
    Probes without a second turn pass; a reply without text is the trigger and empty checks'
    (``not_applicable`` / ``no_text``).  Evidence: ``expected``, ``first_chars``.
    """
    name = "tools.result"
    value = spec.tool_result_value
    if not value:
        return CheckResult(check=name, outcome="pass")
    text = _visible(reply)
    if not text:
        return CheckResult(check=name, outcome="not_applicable", reason="no_text")
    if result_value_in(text, value):
        return CheckResult(check=name, outcome="pass")
    return CheckResult(check=name, outcome="fail", reason="tool_result_ignored",
                       evidence={"expected": value, "first_chars": _excerpt(text, 160)})


# -- tool-call markup in the visible text (any reply) -----------------------------------------------

#: Tool-call tags that are not single tokens: Qwen3-Coder's ``<function=NAME>`` and
#: ``<parameter=K>``, MiniMax's ``<minimax:tool_call>`` and ``<invoke name="…">``, Anthropic-style
#: ``<function_calls>``/``<invoke>``/``<parameter name=…>``, read on the token view (any bar,
#: full-width brackets).
TOOL_TAG = re.compile(
    r"</?[A-Za-z_]{0,16}:?(?:tool_calls?|function_calls?)>"
    r"|<(?:function|parameter)\s?=\s?[^<>\s]{1,64}\s?>"
    r"|</(?:function|parameter|invoke)>"
    r"|<(?:[A-Za-z_]{1,16}:)?(?:invoke|parameter|argument)\s+name\s?=\s?[\"'][^\"'<>]{1,64}[\"']\s?/?>"
)
#: A Harmony recipient or a Kimi call id left as text (the tokens around them stripped):
#: ``commentary to=functions.get_weather``, ``to=functions.x``, ``functions.get_weather:0``.
TOOL_RECIPIENT = re.compile(
    r"\b(?:commentary|analysis)\s?to=[A-Za-z_][\w.-]*"
    r"|\bto\s?=\s?functions\.[A-Za-z_][\w-]*"
    r"|\bfunctions\.[A-Za-z_][\w-]{0,63}:\d{1,3}(?=\s?\{)"
)
_Q = r"[\"']"
_IDENT = r"[a-z_][A-Za-z0-9_.-]{0,63}"
#: A tool-call object printed as text: ``{"name": "f", "arguments": …}`` (Hermes, Llama's JSON
#: calls, Mistral's list after ``[TOOL_CALLS]`` was stripped), the keys in either order, Python's
#: quotes; ``"tool_calls": [``, ``"function_call": {``, ``{"type": "function", "function": {``.
TOOL_JSON = re.compile(
    rf"\{{\s*{_Q}(?:name|tool|tool_name|function|function_name){_Q}\s*:\s*{_Q}{_IDENT}{_Q}\s*,\s*"
    rf"{_Q}(?:arguments|parameters|args|input|tool_input){_Q}\s*:"
    rf"|\{{\s*{_Q}(?:arguments|parameters){_Q}\s*:\s*\{{[^{{}}]{{0,400}}\}}\s*,\s*{_Q}(?:name|tool|function){_Q}\s*:"
    rf"\s*{_Q}{_IDENT}{_Q}"
    rf"|{_Q}(?:tool_calls|function_call){_Q}\s*:\s*[\[{{]"
    rf"|{_Q}type{_Q}\s*:\s*{_Q}function{_Q}\s*,\s*{_Q}function{_Q}\s*:\s*\{{"
)
#: A fence whose info string names a tool call (Gemma's ```` ```tool_code ````): code the model
#: meant as a call, not code the user asked for.
TOOL_FENCE = re.compile(r"(?:^|\n)[ \t]{0,3}(?:```|~~~)[ \t]*(?:tool_code|tool_call|tool_calls|function_call)\b")
#: Pythonic calls as a whole reply (``[get_weather(city='Paris'), f(a=1)]``, vLLM's ``pythonic``).
PYTHONIC_LIST = re.compile(r"\A\s*\[\s*[A-Za-z_][\w.]*\(\s*(?:[A-Za-z_]\w*\s*=[^()]*)?\)"
                           r"(?:\s*,\s*[A-Za-z_][\w.]*\(\s*(?:[A-Za-z_]\w*\s*=[^()]*)?\))*\s*\]\s*\Z")


@functools.lru_cache(maxsize=32)
def _offered_patterns(names: tuple[str, ...]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    call = re.compile(rf"(?<![\w.])(?:{alternatives})\s?\(\s*[A-Za-z_]\w*\s*[=:]")
    json_name = re.compile(rf"\{{[^{{}}]{{0,200}}{_Q}(?:name|tool|function){_Q}\s*:\s*{_Q}(?:{alternatives}){_Q}")
    return call, json_name


def find_tool_markup(text: str, names: tuple[str, ...] = (), *, called: bool = False) -> tuple[str, int, str] | None:
    """The first tool-call markup in ``text`` outside code, as ``(kind, offset, marker)``, or ``None``.

    Kinds: ``token`` (:data:`reverie_canary.client.checks.tokens.TOOL_TOKEN`: Kimi, DeepSeek,
    Mistral, Hermes, Llama, Harmony tokens with any bar and spacer), ``tag``
    (:data:`TOOL_TAG`), ``recipient`` (:data:`TOOL_RECIPIENT`: tagless Harmony or Kimi residue),
    ``json`` (:data:`TOOL_JSON`, and with ``names`` a JSON object naming an offered tool:
    ``{"name":"get_weather","city":"Lisbon"}``), ``fence`` (:data:`TOOL_FENCE`), ``pythonic``
    (a whole reply of calls, and with ``names`` an offered tool written as a call with named
    arguments: ``get_weather(city="Paris")``).  Code spans and fenced blocks are not scanned
    (JSON the user asked for in a code block is not markup), except for a fence's info string.

    Args:
        text: the visible text (never the reasoning).
        names: the offered tools' names, when the request offered tools.
        called: the reply made structured calls: an offered tool written as a call in the text
            is then narration beside the real call, not a lost one.
    """
    if not text:
        return None
    found: list[tuple[int, str, str]] = []
    for kind, start, end in find_tokens(text):
        if kind == "tool":
            found.append((start, "token", text[start:end]))
            break
    if "```" in text or "~~~" in text:
        m = TOOL_FENCE.search(text)
        if m:
            found.append((m.start(), "fence", m.group().strip()))
    lt = "<" in text or "\uff1c" in text
    brace = "{" in text
    recipient = "to=" in text or "functions." in text
    if not (lt or brace or recipient or names or "[" in text):
        return _first(found)
    masked = token_view(text)  # code blanked, bars and full-width brackets in ASCII: one view for every pattern
    if lt:
        m = TOOL_TAG.search(masked)
        if m:
            found.append((m.start(), "tag", text[m.start():m.end()]))
    if recipient:
        m = TOOL_RECIPIENT.search(masked)
        if m:
            found.append((m.start(), "recipient", m.group()))
    if brace:
        m = TOOL_JSON.search(masked)
        if m:
            found.append((m.start(), "json", _excerpt(m.group(), 80)))
    if "[" in masked and "(" in masked:
        m = PYTHONIC_LIST.search(masked)
        if m:
            found.append((m.start(), "pythonic", _excerpt(m.group().strip(), 80)))
    if names:
        call, json_name = _offered_patterns(names)
        m = None if called else call.search(masked)
        if m:
            found.append((m.start(), "pythonic", _excerpt(masked[m.start():m.end() + 40], 80)))
        if brace:
            m = json_name.search(masked)
            if m:
                found.append((m.start(), "json", _excerpt(m.group(), 80)))
    return _first(found)


def _first(found: list[tuple[int, str, str]]) -> tuple[str, int, str] | None:
    if not found:
        return None
    offset, kind, marker = min(found)
    return kind, offset, marker


def check_tool_markup(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail tool-call markup in the visible text, as a family (:func:`find_tool_markup`): any reply.

    The call a parser should have turned into ``tool_calls`` but left in the content (TC-01 to
    TC-05): tokens of any family and any bar spelling, XML-style tags, a tool-call JSON object
    printed as prose, tagless channel residue (``commentary to=functions.x``), a call in
    function-call syntax naming an offered tool; never the reasoning, never code the user can
    see as code.  It runs on every reply (behavioural integrity: a chat backend's guard runs it
    too): a probe that offered no tools knows no tool names, so only the name-free forms count
    there.  Evidence: ``kind``, ``marker``, ``offset``, ``span``.
    """
    name = "corruption.tool_markup"
    text = reply.text
    names = tuple(offered_tools(spec)) if spec.tools else ()
    found = find_tool_markup(text, names, called=bool(reply.calls))
    if found is None:
        return CheckResult(check=name, outcome="pass")
    kind, offset, marker = found
    return CheckResult(check=name, outcome="fail", reason="tool_markup_in_content",
                       evidence={"kind": kind, "marker": _excerpt(marker, 80), "offset": offset,
                                 "span": text[max(0, offset - 30):offset + 90]})


#: The tool probe's own checks, in reporting order (the markup check runs with behavioural
#: integrity, on every reply).
TOOL_CHECKS = (check_tool_trigger, check_tool_empty, check_tool_names, check_tool_arguments, check_tool_schema,
               check_tool_values, check_tool_assembly, check_tool_result)
