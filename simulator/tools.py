"""The simulated model's tool use: which call a request asks for, and what broken stacks make of it.

Pure: no HTTP, no clock.  A request that offers ``tools`` (Chat Completions' tool schema) is read into a
:class:`ToolRequest`; :func:`healthy_reply` decides what a model that uses tools well answers
(:func:`reverie_canary.simulator.model.plan_attempt` then lets the endpoint's faults damage it):

- ``tool_choice: "none"``: text, never a call;
- ``tool_choice`` naming a function: a call of that function;
- the conversation ends with a ``tool`` message (the second turn, §1.4): text that states the
  value the result holds (``It is 31 °C in Lisbon right now.``), in the language asked for;
- the prompt is one of the tool probe's (:data:`reverie_canary.services.prober.prompts.TOOL_CALLS`,
  looked up by its exact text, so the call is the one the prompt fixes, values and all): that call;
- the user's text names an offered tool (``Use the get_weather tool …``): a call of it, with
  arguments made from its schema (:func:`reverie_canary.simulator.jsongen.instance`);
- ``tool_choice: "required"`` and nothing named: a call of the first offered tool;
- otherwise (a question no tool fits, ``auto``): one sentence of text.

A call's ``arguments`` is compact JSON text (``{"city":"Sevilla","unit":"celsius"}``), its id
``call_`` and 24 letters and digits from the endpoint's seeded generator.  The faults of the
``tool_*`` kinds (:data:`reverie_canary.simulator.scenario.TOOL_KINDS`) are the functions
below: markup left in the text (:func:`render_markup`), broken argument JSON
(:func:`break_arguments`), a schema slip (:func:`slip_schema`), a call where none fits
(:func:`eager_call`), and streamed deltas that do not assemble (:func:`stream_deltas`).
"""

from __future__ import annotations

import json
import random
import re
import string
from typing import Any

from msgspec import Struct

from reverie_canary.services.prober import prompts
from reverie_canary.simulator import jsongen
from reverie_canary.simulator.text import TextSource, join_sentences
from reverie_canary.simulator.wire import ChatRequest, StreamFunction, StreamToolCall

#: The tool probe's prompts, by their exact user text: the call each fixes (tool, arguments).
PROMPTED_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    user: (tool, arguments) for tool, arguments, user in prompts.TOOL_CALLS.values()
}
#: The language of each tool-probe prompt (calls, no-tool questions, second-turn questions).
PROMPT_LANGUAGES: dict[str, str] = {
    **{user: lang for lang, (_, _, user) in prompts.TOOL_CALLS.items()},
    **{user: lang for lang, user in prompts.NO_TOOL.items()},
    **{user: lang for lang, (_, user) in prompts.SECOND_TURN.items()},
}

#: The second turn's answer per language: the result's temperature and city (never made up).
RESULT_TEXT: dict[str, str] = {
    "en": "It is {value} °C in {city} right now.",
    "es": "Ahora mismo hace {value} °C en {city}.",
    "pt": "Neste momento estão {value} °C em {city}.",
    "fr": "Il fait actuellement {value} °C à {city}.",
    "de": "In {city} sind es gerade {value} °C.",
    "it": "In questo momento a {city} ci sono {value} °C.",
    "nl": "Het is nu {value} °C in {city}.",
    "pl": "W mieście {city} jest teraz {value} °C.",
    "ru": "Сейчас в городе {city} {value} °C.",
    "uk": "Зараз у місті {city} {value} °C.",
    "tr": "{city} şu anda {value} °C.",
    "ar": "درجة الحرارة الآن في {city} هي {value} درجة مئوية.",
    "ja": "{city}の現在の気温は{value}°Cです。",
    "ko": "지금 {city}의 기온은 {value}°C입니다.",
    "zh": "{city}现在的气温是{value}°C。",
    "id": "Suhu di {city} saat ini {value} °C.",
    "vi": "Nhiệt độ hiện tại ở {city} là {value} °C.",
}

_ALNUM = string.ascii_letters + string.digits
#: Characters of argument text per streamed fragment.
FRAGMENT_CHARS = 8


class ToolRequest(Struct, frozen=True, kw_only=True):
    """What a request that offers tools asks of the model.

    Attributes:
        tools: name -> ``parameters`` schema (``None``: none given) of every offered tool, in order.
        choice: ``auto``, ``none``, ``required`` or ``function`` (a named tool).
        named: the tool ``tool_choice`` names, if any.
        result: the content of the ``tool`` message that ends the conversation, if it does.
        asked: the call the prompt fixes (a tool probe prompt): ``(name, arguments)``.
        mentioned: an offered tool the last user message names.
        previous: the last call in the history, ``(name, arguments text)``.
    """

    tools: dict[str, dict[str, Any] | None]
    choice: str = "auto"
    named: str | None = None
    result: str | None = None
    asked: tuple[str, dict[str, Any]] | None = None
    mentioned: str | None = None
    previous: tuple[str, str] | None = None


class PlannedCall(Struct, frozen=True, kw_only=True):
    """One tool call of a reply: ``arguments`` exactly as it goes on the wire."""

    id: str
    name: str
    arguments: str


def read_tools(request: ChatRequest, user: str) -> ToolRequest | None:
    """The :class:`ToolRequest` of a chat request, or ``None`` when it offers no tools.

    Args:
        request: the decoded body (``tools`` and ``tool_choice`` already validated by the gateway).
        user: the last user message's text.
    """
    if not request.tools:
        return None
    tools = {t.function.name: t.function.parameters for t in request.tools}
    choice, named = "auto", None
    tc = request.tool_choice
    if isinstance(tc, str):
        choice = tc
    elif isinstance(tc, dict):
        fn = tc.get("function")
        named = fn.get("name") if isinstance(fn, dict) else None
        choice = "function"
    last = request.messages[-1] if request.messages else None
    result = last.text() if last is not None and last.role == "tool" else None
    asked = PROMPTED_CALLS.get(user.strip())
    if asked is not None and asked[0] not in tools:
        asked = None
    mentioned = next((name for name in tools if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", user)), None)
    previous = None
    for message in request.messages:
        for call in message.tool_calls or ():
            if call.function is not None and call.function.name:
                previous = (call.function.name, call.function.arguments or "{}")
    return ToolRequest(tools=tools, choice=choice, named=named, result=result, asked=asked,
                       mentioned=mentioned, previous=previous)


def prompt_language(user: str) -> str | None:
    """The language of a tool-probe prompt, by its exact text, or ``None``."""
    return PROMPT_LANGUAGES.get(user.strip())


def encode_arguments(arguments: Any) -> str:
    """Arguments as a serving stack re-serialises them: compact JSON, non-ASCII kept."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def call_id(rng: random.Random) -> str:
    """A call id: ``call_`` and 24 letters and digits."""
    return "call_" + "".join(rng.choice(_ALNUM) for _ in range(24))


def _generated(schema: dict[str, Any] | None, rng: random.Random, text: TextSource, language: str) -> Any:
    if not schema:
        return {}
    return jsongen.instance(schema, rng=rng, sentence=lambda: text.sentences(language, rng, 1)[0])


def make_call(tr: ToolRequest, name: str, rng: random.Random, text: TextSource, language: str) -> PlannedCall:
    """A call of ``name``: the prompt's arguments when the prompt fixes this tool, else from its schema."""
    if tr.asked is not None and tr.asked[0] == name:
        arguments = tr.asked[1]
    else:
        arguments = _generated(tr.tools.get(name), rng, text, language)
    return PlannedCall(id=call_id(rng), name=name, arguments=encode_arguments(arguments))


def healthy_reply(tr: ToolRequest, language: str, rng: random.Random, text: TextSource,
                  *, text_language: str | None = None) -> tuple[str, list[PlannedCall]]:
    """What a model that uses tools well answers (the rules of the module docstring).

    Args:
        tr: the request's tools.
        language: the language asked for (ISO 639-1).
        rng: the endpoint's seeded generator.
        text: sentence source.
        text_language: the language a text reply is written in (a drifting provider's), default ``language``.

    Returns:
        ``(content, calls)``: text and no call, or empty text and one call.
    """
    lang = text_language or language
    if tr.choice == "none":
        return answer_text(lang, rng, text), []
    if tr.choice == "function" and tr.named in tr.tools:
        return "", [make_call(tr, tr.named, rng, text, language)]  # type: ignore[arg-type]
    if tr.result is not None and tr.choice != "required":
        return result_text(lang, tr.result), []
    if tr.asked is not None:
        return "", [make_call(tr, tr.asked[0], rng, text, language)]
    if tr.mentioned is not None:
        return "", [make_call(tr, tr.mentioned, rng, text, language)]
    if tr.choice == "required":
        return "", [make_call(tr, next(iter(tr.tools)), rng, text, language)]
    return answer_text(lang, rng, text), []


def answer_text(language: str, rng: random.Random, text: TextSource) -> str:
    """One sentence in ``language``: the answer to a question no tool fits."""
    return join_sentences(language, text.sentences(language, rng, 1))


def result_text(language: str, result: str) -> str:
    """Text that uses a tool's result: its temperature and city, or (another shape) the result itself."""
    try:
        value = json.loads(result)
    except ValueError:
        value = None
    if isinstance(value, dict):
        number = value.get("temperature", value.get("temp_c"))
        if number is None:
            number = next((v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)), None)
        city = value.get("city")
        if number is not None and isinstance(city, str):
            return RESULT_TEXT.get(language, RESULT_TEXT["en"]).format(value=number, city=city)
    return f"The tool returned: {result.strip()[:200]}"


# -- faults ---------------------------------------------------------------------------------------


def eager_call(tr: ToolRequest, rng: random.Random, text: TextSource, language: str) -> PlannedCall:
    """A call where none fits: the history's last call made again, else the first offered tool."""
    if tr.previous is not None and tr.previous[0] in tr.tools:
        return PlannedCall(id=call_id(rng), name=tr.previous[0], arguments=tr.previous[1])
    return make_call(tr, next(iter(tr.tools)), rng, text, language)


def render_markup(calls: list[PlannedCall], mode: str) -> str:
    """The calls as the model wrote them, before a (missing or broken) parser: one markup family.

    Modes: ``qwen3_xml``, ``hermes``, ``kimi``, ``mistral``, ``deepseek`` (as the vLLM and SGLang tool parsers read them).
    """
    out = []
    for i, call in enumerate(calls):
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = call.arguments
        pretty = json.dumps(arguments, ensure_ascii=False)
        if mode == "qwen3_xml":
            params = "".join(
                f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}\n</parameter>\n"
                for k, v in (arguments.items() if isinstance(arguments, dict) else []))
            out.append(f"<tool_call>\n<function={call.name}>\n{params}</function>\n</tool_call>")
        elif mode == "hermes":
            obj = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
            out.append(f"<tool_call>\n{obj}\n</tool_call>")
        elif mode == "kimi":
            out.append(f"<|tool_call_begin|>functions.{call.name}:{i}<|tool_call_argument_begin|>{pretty}"
                       "<|tool_call_end|>")
        elif mode == "mistral":
            out.append(json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False))
        else:  # deepseek
            out.append(f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{call.name}\n```json\n{pretty}\n```"
                       "<｜tool▁call▁end｜>")
    if mode == "kimi":
        return "<|tool_calls_section_begin|>" + "".join(out) + "<|tool_calls_section_end|>"
    if mode == "mistral":
        return "[TOOL_CALLS][" + ", ".join(out) + "]"
    if mode == "deepseek":
        return "<｜tool▁calls▁begin｜>" + "".join(out) + "<｜tool▁calls▁end｜>"
    return "\n".join(out)


def break_arguments(arguments: str, mode: str) -> str:
    """Argument text a strict client cannot use as an object.

    Modes: ``truncated`` (cut inside the last value), ``double_encoded`` (the object's JSON
    text as a JSON string), ``single_quotes`` (a Python dict's text).
    """
    if mode == "double_encoded":
        return json.dumps(arguments, ensure_ascii=False)
    if mode == "single_quotes":
        try:
            return repr(json.loads(arguments))
        except ValueError:
            return arguments.replace('"', "'")
    quote = arguments.rfind('"', 0, max(1, len(arguments) - 2))
    cut = quote + max(1, (len(arguments) - 2 - quote) // 2) if quote > 0 else max(1, len(arguments) * 2 // 3)
    return arguments[:cut]


def slip_schema(arguments: str, schema: dict[str, Any] | None, mode: str, rng: random.Random) -> str:
    """Arguments that parse but break the tool's schema.

    ``wrong_type``: the first number becomes its digits in a string (``250`` -> ``"250"``),
    else the first array or object its JSON text, else the first string a one-item list;
    ``missing_required``: a required field dropped (:func:`jsongen.break_missing_field`).
    """
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(value, dict) or not value:
        return arguments
    if mode == "missing_required":
        return encode_arguments(jsongen.break_missing_field(value, schema or {}, rng))
    for kinds, change in (((int, float), lambda v: str(v)),
                          ((list, dict), lambda v: json.dumps(v, ensure_ascii=False)),
                          ((str,), lambda v: [v])):
        key = next((k for k, v in value.items() if isinstance(v, kinds) and not isinstance(v, bool)), None)
        if key is not None:
            return encode_arguments({**value, key: change(value[key])})
    return arguments


def fragments(arguments: str) -> list[str]:
    """``arguments`` in stream fragments of :data:`FRAGMENT_CHARS` characters (joined, they give it back)."""
    return [arguments[i:i + FRAGMENT_CHARS] for i in range(0, len(arguments), FRAGMENT_CHARS)] or [""]


def stream_deltas(calls: list[PlannedCall], mode: str | None, rng: random.Random) -> list[list[StreamToolCall]]:
    """The ``delta.tool_calls`` of each chunk that streams ``calls`` (as OpenAI streams function calls).

    Healthy (``mode`` ``None``): per call, a first delta with ``index``, ``id``, ``type`` and the
    name (empty ``arguments``), then one delta per argument fragment with ``index`` only.  The
    ``tool_stream`` modes damage the first call: ``interleaved`` (every other fragment at a
    second index under another id, no name), ``lost`` (the middle fragment dropped),
    ``id_changed`` (a new id on every later fragment).
    """
    out: list[list[StreamToolCall]] = []
    ghost = len(calls)
    for i, call in enumerate(calls):
        out.append([StreamToolCall(index=i, id=call.id, type="function",
                                   function=StreamFunction(name=call.name, arguments=""))])
        pieces = fragments(call.arguments)
        damaged = mode is not None and i == 0
        if damaged and mode == "lost":
            if len(pieces) < 2:
                pieces = [pieces[0][: len(pieces[0]) // 2], pieces[0][len(pieces[0]) // 2:]]
            del pieces[len(pieces) // 2]
        ghost_opened = False
        for n, piece in enumerate(pieces):
            if damaged and mode == "interleaved" and n % 2 == 1:
                if not ghost_opened:
                    ghost_opened = True
                    out.append([StreamToolCall(index=ghost, id=call_id(rng), type="function",
                                               function=StreamFunction(arguments=piece))])
                else:
                    out.append([StreamToolCall(index=ghost, function=StreamFunction(arguments=piece))])
            elif damaged and mode == "id_changed" and n > 0:
                out.append([StreamToolCall(index=i, id=call_id(rng), function=StreamFunction(arguments=piece))])
            else:
                out.append([StreamToolCall(index=i, function=StreamFunction(arguments=piece))])
    return out
