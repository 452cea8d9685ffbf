"""The simulated provider: what one endpoint does with one request.

Pure: no HTTP, no clock, no global state.  :func:`read_request` turns a chat
request into what a model would understand from it (:class:`Instructions`);
:func:`plan_attempt` decides, from the endpoint's faults and a seeded
generator, how the attempt goes (:class:`Plan`): a transport failure before
streaming, or a reply with its timings, text and finish reasons.  The gateway
plays the plan out on the wire.

A healthy model follows the plain-English instructions of the probe prompts
(``services/prober/prompts.py``): ``Write your reply in <Language>.``, ``The
first character of your reply must be *``, ``End your reply with the marker
[[END]].``, ``Repeat exactly, without any other text: <S>``, and
``response_format``; a request that offers ``tools`` is answered as
:mod:`reverie_canary.simulator.tools` says (a call, or text).  Faults then
damage the reply in a fixed order (an HTTP error of a stack without a tool
parser before anything; then an empty tool reply, a call where none fits,
broken arguments, a schema slip, markup instead of a call; filter, broken
structure, repetition, truncation, injection, control tokens, leading junk,
byte-level symbols, mojibake, native error; a stream whose calls do not
assemble is the gateway's to write).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, Literal

import msgspec
from msgspec import Struct

from reverie_canary.simulator import jsongen
from reverie_canary.simulator import tools as toolsim
from reverie_canary.simulator.scenario import (
    HOSTILE_KINDS,
    BrokenStructured,
    ByteLevel,
    ControlTokens,
    Endpoint,
    Filter,
    Flaky,
    Inject,
    LanguageDrift,
    LeadingJunk,
    Mojibake,
    NativeError,
    PinBypass,
    Repetition,
    Slow,
    ToolArgs,
    ToolEager,
    ToolEmpty,
    ToolMarkup,
    ToolNoParser,
    ToolSchema,
    ToolStream,
    Truncate,
)
from reverie_canary.simulator.text import CODE_BY_NAME, LANGUAGE_NAMES, SPACELESS, TextSource, join_sentences
from reverie_canary.simulator.tools import PlannedCall, ToolRequest
from reverie_canary.simulator.wire import ChatRequest

_LANGUAGE = re.compile(r"(?:Write your reply|answer) in ([A-Z][A-Za-z]+)")
_PREFIX = re.compile(r"The first character of your reply must be (\S)")
_SENTINEL = re.compile(r"End your reply with the marker (\S+?)\.?(?=\s|$)")
_ECHO = re.compile(r"Repeat exactly, without any other text:\s?(.*)", re.DOTALL)
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|\w+|[^\w\s]")


class Instructions(Struct, frozen=True, kw_only=True):
    """What the simulated model understood from a request.

    Attributes:
        language: ISO 639-1 code asked for (``en`` when none).
        prefix: required first character (``*``), if any.
        sentinel: required closing marker (``[[END]]``), if any.
        echo: text to repeat exactly, if asked.
        response_format: ``json_schema`` / ``json_object`` when requested.
        schema: the JSON schema (from ``response_format`` or found in the prompt).
        user_text: the last user message.
        max_tokens: output budget (``max_tokens`` or ``max_completion_tokens``).
        stop: stop sequences.
        prompt_tokens: approximate prompt size in tokens.
        tools: what a request that offers tools asks (``None``: it offers none).
    """

    language: str = "en"
    prefix: str | None = None
    sentinel: str | None = None
    echo: str | None = None
    response_format: Literal["json_schema", "json_object"] | None = None
    schema: dict[str, Any] | None = None
    user_text: str = ""
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    prompt_tokens: int = 0
    tools: ToolRequest | None = None


class Failure(Struct, frozen=True, kw_only=True):
    """A transport failure of one attempt.

    Attributes:
        kind: ``status`` (HTTP error before streaming), ``hang`` (no response
            headers for ``hang_s``) or ``midstream`` (an in-band error after
            some content, OpenRouter's streaming documentation).
        status: HTTP status for ``status``; 502 for ``midstream``.
        hang_s: seconds without headers for ``hang``.
        retry_after_s: ``Retry-After`` for 429/503.
        raw: the upstream's own error message (``error.metadata.raw``), when it says one.
    """

    kind: Literal["status", "hang", "midstream"]
    status: int = 502
    hang_s: float = 0.0
    retry_after_s: int | None = None
    raw: str | None = None


class Plan(Struct, frozen=True, kw_only=True):
    """How one attempt plays out; times are seconds from the start of the request.

    Attributes:
        failure: a transport failure, or ``None``.
        reasoning: ``delta.reasoning`` text (reasoning models), maybe empty.
        reasoning_at_s: when the first reasoning delta is sent.
        content: the visible reply.
        content_at_s: when the first content delta is sent.
        chunk_interval_s: seconds between chunks.
        finish_reason: normalised finish reason (OpenRouter's finish-reason documentation).
        native_finish_reason: the provider's raw finish reason.
        completion_tokens: output tokens, reasoning included.
        reasoning_tokens: reasoning part of ``completion_tokens``.
        faults: kinds of the faults that acted (for ``/_sim`` introspection).
        hostile: the hostile-gateway fault that shapes the wire
            (:data:`reverie_canary.simulator.scenario.HOSTILE_KINDS`), or ``None``;
            the gateway plays it, the rest of the plan is the healthy reply.
        tool_calls: the reply's tool calls (finish reason ``tool_calls``), maybe none.
        tool_stream: how a streamed reply's calls fail to assemble (a ``tool_stream``
            fault's mode), or ``None``.
    """

    failure: Failure | None = None
    reasoning: str = ""
    reasoning_at_s: float | None = None
    content: str = ""
    content_at_s: float = 0.0
    chunk_interval_s: float = 0.02
    finish_reason: str = "stop"
    native_finish_reason: str = "stop"
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    faults: tuple[str, ...] = ()
    hostile: Any = None
    tool_calls: tuple[PlannedCall, ...] = ()
    tool_stream: str | None = None


def count_tokens(text: str) -> int:
    """Approximate token count: a word, a CJK character or a punctuation mark each."""
    return len(_TOKEN.findall(text))


def _cut_tokens(text: str, limit: int) -> str:
    if limit <= 0:
        return ""
    for i, m in enumerate(_TOKEN.finditer(text)):
        if i + 1 == limit:
            return text[: m.end()]
    return text


def read_request(request: ChatRequest) -> Instructions:
    """Read a chat request the way a model following plain instructions would.

    Args:
        request: the decoded ``POST /chat/completions`` body.

    Returns:
        The :class:`Instructions` found in the system and user messages and in
        ``response_format``.
    """
    system = "\n".join(m.text() for m in request.messages if m.role in ("system", "developer"))
    users = [m.text() for m in request.messages if m.role == "user"]
    user = users[-1] if users else ""
    everything = f"{system}\n{user}"
    language = "en"
    if m := _LANGUAGE.search(everything):
        language = CODE_BY_NAME.get(m.group(1).lower(), "en")
    tools = toolsim.read_tools(request, user)
    if tools is not None:
        language = toolsim.prompt_language(user) or language
    prefix = m.group(1) if (m := _PREFIX.search(everything)) else None
    sentinel = m.group(1) if (m := _SENTINEL.search(everything)) else None
    echo = m.group(1).strip() if (m := _ECHO.search(user)) else None
    fmt: Literal["json_schema", "json_object"] | None = None
    schema = None
    rf = request.response_format
    if rf is not None and rf.type == "json_schema":
        fmt = "json_schema"
        schema = rf.json_schema.schema if rf.json_schema is not None else None
    elif rf is not None and rf.type == "json_object":
        fmt = "json_object"
        schema = _schema_in(everything)
    stop: tuple[str, ...] = ()
    if isinstance(request.stop, str):
        stop = (request.stop,)
    elif isinstance(request.stop, list):
        stop = tuple(s for s in request.stop if s)
    prompt_tokens = sum(count_tokens(m.text()) + 3 for m in request.messages) + 3
    if request.tools:  # the tool definitions are part of the prompt the model reads
        prompt_tokens += count_tokens(json.dumps([msgspec.to_builtins(t) for t in request.tools]))
    return Instructions(
        language=language, prefix=prefix, sentinel=sentinel, echo=echo, response_format=fmt,
        schema=schema, user_text=user,
        max_tokens=request.max_tokens if request.max_tokens is not None else request.max_completion_tokens,
        stop=stop, prompt_tokens=prompt_tokens, tools=tools,
    )


def _schema_in(text: str) -> dict[str, Any] | None:
    """Find a JSON schema written into the prompt (json_object mode), if any."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, dict) and ("properties" in value or value.get("type") == "object"):
            return value
    return None


def applies(fault: Any, instructions: Instructions) -> bool:
    """Tell whether ``fault``'s ``when`` filter (and a drift's ``languages``) matches the request."""
    when = fault.when
    if when is not None:
        if when.json is not None and when.json != (instructions.response_format is not None):
            return False
        if when.languages is not None and instructions.language not in when.languages:
            return False
        if when.prompt_contains is not None:
            user = instructions.user_text.lower()
            if not any(s.lower() in user for s in when.prompt_contains):
                return False
    if isinstance(fault, LanguageDrift) and fault.languages is not None:
        return instructions.language in fault.languages
    return True


def active_faults(faults: list[Any], instructions: Instructions, rng: random.Random) -> list[Any]:
    """The faults that act on this request: ``when`` matches and a draw falls under ``rate``.

    One draw per fault, in order, whether it matches or not, so that the
    sequence of draws does not depend on the request's content.
    """
    out = []
    for fault in faults:
        draw = rng.random()
        if applies(fault, instructions) and draw < fault.rate:
            out.append(fault)
    return out


def bypass_target(faults: list[Any], instructions: Instructions, rng: random.Random) -> str | None:
    """The tag that really serves a request routed to an endpoint with ``pin_bypass``, else ``None``."""
    for fault in faults:
        if isinstance(fault, PinBypass):
            draw = rng.random()
            if applies(fault, instructions) and draw < fault.rate:
                return fault.serve_as
    return None


def _first(faults: list[Any], kind: type) -> Any:
    return next((f for f in faults if isinstance(f, kind)), None)


def plan_attempt(
    instructions: Instructions,
    endpoint: Endpoint,
    faults: list[Any],
    rng: random.Random,
    text: TextSource,
    *,
    chunk_interval_s: float,
) -> Plan:
    """Decide how ``endpoint`` answers one request.

    Args:
        instructions: what the request asks for (:func:`read_request`).
        endpoint: the endpoint that serves.
        faults: its current faults (the gateway may have replaced them at run time).
        rng: generator seeded from (scenario seed, endpoint tag, request count).
        text: sentence source.
        chunk_interval_s: seconds between chunks when the endpoint does not say.

    Returns:
        The :class:`Plan` of the attempt.
    """
    active = active_faults([f for f in faults if not isinstance(f, PinBypass)], instructions, rng)
    kinds = tuple(type(f).__struct_config__.tag for f in active)
    interval = endpoint.chunk_interval_s if endpoint.chunk_interval_s is not None else chunk_interval_s
    hostile = next((f for f in active if type(f).__struct_config__.tag in HOSTILE_KINDS), None)

    # an endpoint that does not list ``tools`` drops them, as providers drop unsupported parameters
    # (OpenRouter's provider-selection guide): it answers as if none were offered
    tr = instructions.tools if "tools" in endpoint.supported_parameters else None
    no_parser: ToolNoParser | None = _first(active, ToolNoParser)
    if tr is not None and no_parser is not None and tr.choice != "none":
        return Plan(failure=Failure(kind="status", status=no_parser.status, raw=no_parser.message),
                    chunk_interval_s=interval, faults=kinds)

    flaky: Flaky | None = _first(active, Flaky)
    failure = None
    if flaky is not None:
        u = rng.random()
        if u < flaky.timeout_share:
            failure = Failure(kind="hang", status=408, hang_s=flaky.hang_s)
        elif u < flaky.timeout_share + flaky.midstream_share:
            failure = Failure(kind="midstream", status=502)
        else:
            status = rng.choice(flaky.statuses)
            failure = Failure(kind="status", status=status,
                              retry_after_s=flaky.retry_after_s if status in (429, 503) else None)
        if failure.kind != "midstream":
            return Plan(failure=failure, chunk_interval_s=interval, faults=kinds)

    slow: Slow | None = _first(active, Slow)
    content_at = slow.ttft_s if slow is not None else endpoint.ttft_s
    reasoning_at = slow.reasoning_s if slow is not None else None

    drift: LanguageDrift | None = _first(active, LanguageDrift)
    calls: list[PlannedCall] = []
    if tr is not None:
        content, calls = toolsim.healthy_reply(
            tr, instructions.language, rng, text,
            text_language=drift.to if drift is not None and drift.mode == "switch" else None)
        kind = "prose"
    else:
        content, kind = compose(instructions, rng, text, drift=drift,
                                supports_format="response_format" in endpoint.supported_parameters)
    finish, native = "stop", "stop"

    reasoning = ""
    if reasoning_at is not None:
        language = LANGUAGE_NAMES.get(instructions.language, "English")
        reasoning = (
            f"The user wants a reply in {language}. I am Mira, the lighthouse keeper, so I stay in "
            "character, keep it short and follow the format they asked for. "
            "Let me check the instructions once more before I answer."
        )

    tool_stream = None
    if tr is not None:
        content, calls, tool_stream = _tool_faults(active, tr, content, calls, instructions.language, rng, text)

    filt: Filter | None = _first(active, Filter)
    if filt is not None:
        calls = []  # a filter answers instead of the model: no call
        if filt.mode == "refusal":
            content = text.refusal(instructions.language)
        else:
            content = ""
            if filt.mode == "content_filter":
                finish = native = "content_filter"
    broken: BrokenStructured | None = _first(active, BrokenStructured)
    if broken is not None and kind == "json" and filt is None:
        content, finish, native = break_structured(content, broken.mode, instructions, rng)
    if (rep := _first(active, Repetition)) is not None and content:
        content = repeat(content, instructions.language, rep.times)
    if _first(active, Truncate) is not None and content:
        content = truncate(content)
    if (inj := _first(active, Inject)) is not None and content:
        content = inject(content, inj.word)
    if (ct := _first(active, ControlTokens)) is not None:
        content = content + ct.tokens
    if (junk := _first(active, LeadingJunk)) is not None:
        content = junk.junk + content
    if _first(active, ByteLevel) is not None:
        content = content.replace(" ", "\u0120").replace("\n", "\u010a")
    if _first(active, Mojibake) is not None:
        content = content.encode("utf-8").decode("cp1252", errors="replace")
    if (ne := _first(active, NativeError)) is not None:
        content, finish, native, calls = "", "stop", ne.native_finish_reason, []
    if calls:
        finish, native = "tool_calls", "tool_calls"

    for s in instructions.stop:
        if s in content:
            content = content[: content.index(s)]
            if not calls:
                finish, native = "stop", "stop"
    reasoning_tokens = count_tokens(reasoning)
    call_tokens = sum(count_tokens(f"{c.name} {c.arguments}") for c in calls)
    if instructions.max_tokens is not None:
        budget = instructions.max_tokens
        if reasoning_tokens >= budget:
            reasoning, reasoning_tokens = _cut_tokens(reasoning, budget), budget
            content, finish, native, calls, call_tokens = "", "length", "length", [], 0
        elif count_tokens(content) > budget - reasoning_tokens:
            content = _cut_tokens(content, budget - reasoning_tokens)
            finish, native, calls, call_tokens = "length", "length", [], 0
        elif call_tokens > budget - reasoning_tokens - count_tokens(content):
            room = budget - reasoning_tokens - count_tokens(content)
            calls = [msgspec.structs.replace(calls[0], arguments=_cut_tokens(calls[0].arguments, room))]
            call_tokens = room
            finish, native = "length", "length"
    return Plan(
        failure=failure, reasoning=reasoning, reasoning_at_s=reasoning_at if reasoning else None,
        content=content, content_at_s=content_at, chunk_interval_s=interval,
        finish_reason=finish, native_finish_reason=native,
        completion_tokens=count_tokens(content) + reasoning_tokens + call_tokens, reasoning_tokens=reasoning_tokens,
        faults=kinds, hostile=hostile, tool_calls=tuple(calls), tool_stream=tool_stream if calls else None,
    )


def _tool_faults(active: list[Any], tr: ToolRequest, content: str, calls: list[PlannedCall], language: str,
                 rng: random.Random, text: TextSource) -> tuple[str, list[PlannedCall], str | None]:
    """Apply the ``tool_*`` faults (they act only when tools are offered) to a tool reply.

    Returns:
        ``(content, calls, tool_stream)``: the reply's text and calls after an empty reply, a
        call where none fits, broken arguments, a schema slip and markup left in the text
        (in that order), and the ``tool_stream`` fault's mode (``None``: streams assemble).
    """
    if _first(active, ToolEmpty) is not None:
        return "", [], None
    if _first(active, ToolEager) is not None and not calls:
        content, calls = "", [toolsim.eager_call(tr, rng, text, language)]
    if (args := _first(active, ToolArgs)) is not None:
        calls = [msgspec.structs.replace(c, arguments=toolsim.break_arguments(c.arguments, args.mode)) for c in calls]
    if (slip := _first(active, ToolSchema)) is not None:
        calls = [msgspec.structs.replace(c, arguments=toolsim.slip_schema(c.arguments, tr.tools.get(c.name),
                                                                           slip.mode, rng)) for c in calls]
    if (markup := _first(active, ToolMarkup)) is not None and calls:
        content, calls = content + toolsim.render_markup(calls, markup.mode), []
    stream: ToolStream | None = _first(active, ToolStream)
    return content, calls, stream.mode if stream is not None else None


def compose(
    instructions: Instructions,
    rng: random.Random,
    text: TextSource,
    *,
    drift: LanguageDrift | None = None,
    supports_format: bool = True,
) -> tuple[str, Literal["json", "echo", "prose"]]:
    """Write the healthy reply (or, with ``drift``, the drifted prose).

    Returns:
        ``(text, kind)`` where kind is ``json``, ``echo`` or ``prose``.
    """
    lang = instructions.language
    if instructions.response_format is not None:
        sentence = text.sentences(lang, rng, 1)[0]
        if instructions.schema is not None:
            value = jsongen.instance(instructions.schema, rng=rng, sentence=lambda: sentence)
        else:
            value = {"reply": sentence, "language": lang}
        doc = json.dumps(value, ensure_ascii=False)
        if not supports_format:
            # The provider dropped response_format: the model follows the prompt, Markdown and all.
            return f"```json\n{json.dumps(value, ensure_ascii=False, indent=2)}\n```", "json"
        return doc, "json"
    if instructions.echo is not None:
        return instructions.echo, "echo"
    star = instructions.prefix == "*"
    if star:
        count = rng.randint(1, 2)
    elif instructions.sentinel is not None:
        count = rng.randint(2, 4)
    else:
        count = text.body_count(lang, rng)
    body_lang = drift.to if drift is not None and drift.mode == "switch" else lang
    sentences = text.sentences(body_lang, rng, count)
    if drift is not None and drift.mode == "mix":
        count = max(count, 4)
        mine = text.sentences(lang, rng, count)
        theirs = text.sentences(drift.to, rng, count)
        sentences = _fit([mine[i] if i % 2 == 0 else theirs[i] for i in range(count)], instructions.max_tokens, 2)
        body = " ".join(sentences)
    else:
        body = join_sentences(body_lang, _fit(sentences, instructions.max_tokens, 1))
    if star:
        body = f"*{text.action(body_lang)}*\n\n{body}"
    elif instructions.prefix is not None and not body.startswith(instructions.prefix):
        body = f"{instructions.prefix} {body}"
    if instructions.sentinel is not None:
        body = f"{body} {instructions.sentinel}"
    return body, "prose"


#: A model asked for a short reply keeps well inside its output budget: at most this share of it.
FIT_SHARE = 0.75


def _fit(sentences: list[str], max_tokens: int | None, keep: int) -> list[str]:
    """Drop sentences from the end (keeping ``keep``) until they fit ``FIT_SHARE`` of ``max_tokens``.

    Real lines (``--sentences``) can be long; a healthy model still answers
    within the budget it was given, so its reply does not end on ``length``
    (a truncated reply is a fault profile of its own).
    """
    if max_tokens is None:
        return sentences
    out = list(sentences)
    while len(out) > keep and count_tokens(" ".join(out)) > FIT_SHARE * max_tokens:
        out.pop()
    return out


def break_structured(
    content: str, mode: str, instructions: Instructions, rng: random.Random
) -> tuple[str, str, str]:
    """Damage a JSON reply per ``broken_structured.mode``.

    Returns:
        ``(content, finish_reason, native_finish_reason)``.
    """
    try:
        value = json.loads(content)
    except ValueError:
        value = None
    schema = instructions.schema or {}
    if mode == "missing_field" and value is not None:
        return json.dumps(jsongen.break_missing_field(value, schema, rng), ensure_ascii=False), "stop", "stop"
    if mode == "wrong_type" and value is not None:
        return json.dumps(jsongen.break_wrong_type(value, rng), ensure_ascii=False), "stop", "stop"
    if mode == "fenced":
        return f"```json\n{content}\n```", "stop", "stop"
    if mode == "prose":
        return f"Here is the JSON you asked for:\n\n{content}\n\nLet me know if you need anything else.", "stop", "stop"
    # truncated: stop inside the last string value (or two thirds in), budget exhausted.
    quotes = [m.start() for m in re.finditer(r'(?<=: )"', content)]
    if quotes:
        start = quotes[-1] + 1
        end = content.find('"', start)
        cut = start + max(1, (end - start) // 2) if end > start else start + 1
    else:
        cut = max(1, len(content) * 2 // 3)
    return content[:cut], "length", "length"


def repeat(content: str, language: str, times: int) -> str:
    """Keep the reply's first sentence, then loop one short phrase ``times`` times (runaway repetition)."""
    m = re.search(r"[.!?]\*?(?=\s|$)|[。！？]", content)
    cut = m.end() if m is not None and m.end() < len(content) else 0
    opening, rest = content[:cut], content[cut:].strip() or content.strip()
    if language in SPACELESS or " " not in rest:
        phrase, joiner = rest[:6] or "...", ""
    else:
        phrase, joiner = " ".join(rest.split()[:4]), " "
    looped = joiner.join([phrase] * times)
    sep = "" if language in SPACELESS else " "
    return f"{opening}{sep}{looped}" if opening else looped


def truncate(content: str) -> str:
    """Cut the reply in the middle of a word in its second half (no closing marker survives)."""
    half = len(content) // 2
    for m in re.finditer(r"[^\W\d_]{4,}", content):
        if m.start() >= half:
            return content[: m.start() + (m.end() - m.start()) // 2]
    cut = max(1, int(len(content) * 0.6))
    while cut > 1 and not content[cut - 1].isalnum():
        cut -= 1
    return content[:cut]


def inject(content: str, word: str) -> str:
    """Insert ``word`` at the word boundary nearest the middle of the reply."""
    mid = len(content) // 2
    spaces = [m.start() for m in re.finditer(r" ", content)]
    if spaces:
        at = min(spaces, key=lambda i: abs(i - mid))
        return f"{content[:at]} {word}{content[at:]}"
    return content[:mid] + word + content[mid:]


def split_pieces(content: str) -> list[str]:
    """Split a reply into stream pieces of a few words (about 8 characters for unspaced scripts).

    ``"".join(split_pieces(s)) == s`` always holds.
    """
    if not content:
        return []
    words: list[str] = []
    for tok in re.findall(r"\S+\s*|\s+", content):
        if len(tok) > 16:
            words.extend(tok[i : i + 8] for i in range(0, len(tok), 8))
        else:
            words.append(tok)
    return ["".join(words[i : i + 3]) for i in range(0, len(words), 3)]
