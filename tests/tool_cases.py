"""Synthetic tool-call replies: the faults each tool check must catch, and correct replies it must pass.

Written for this project (no public text copied): replies to the canary's own tool prompts
(:mod:`reverie_canary.services.prober.prompts`, every variant, all 17 languages), each built
through the one wire reader (:class:`reverie_canary.client.chunks.ChunkReader`) from the SSE
chunks or the JSON body a provider would send, so that the reader's assembly is part of what is
tested.  ``tests/unit/test_checks_tools.py`` asserts every case; ``benchmarks/tool_checks.py``
prints each check's catch rate on :data:`FAILING` beside its false trips on :data:`PASSING`.

A case is :class:`Case`: its id, the probe's language and variant (or its own spec), the reply,
and the verdict: ``("fail", reason)`` for a fault (the reason names the check that must catch it
and the cause), ``("pass", "")`` for a correct reply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import msgspec

from reverie_canary.client.chunks import ChunkReader
from reverie_canary.client.reply import ProbeSpec, Reply
from reverie_canary.services.prober.prompts import LANGUAGE_NAMES, SECOND_TURN, TOOL_CALLS, build

LANGUAGES = list(LANGUAGE_NAMES)

#: Which check gives which reason (the benchmark's rows; the markup check is an any-reply check).
CHECK_OF_REASON: dict[str, str] = {
    "tool_not_called": "tools.trigger", "tool_unexpected_call": "tools.trigger", "tool_wrong_tool": "tools.trigger",
    "tool_too_many_calls": "tools.trigger", "tool_empty_reply": "tools.empty", "tool_unknown_name": "tools.name",
    "tool_args_invalid_json": "tools.arguments_json", "tool_args_schema_mismatch": "tools.arguments_schema",
    "tool_args_wrong_value": "tools.arguments_values", "tool_stream_assembly": "tools.assembly",
    "tool_call_malformed": "tools.assembly", "tool_result_ignored": "tools.result",
    "tool_markup_in_content": "corruption.tool_markup", "tool_capability_error": "transport",
}


@dataclass(frozen=True)
class Case:
    """One synthetic reply and its verdict."""

    id: str
    language: str
    variant: str
    reply: Reply
    outcome: str
    reason: str = ""
    spec: ProbeSpec | None = field(default=None, compare=False)

    def probe_spec(self) -> ProbeSpec:
        """The spec the reply is judged against (the probe's own, unless the case brings one)."""
        return self.spec or build("tools", self.language, variant=self.variant).spec


# -- replies through the wire reader --------------------------------------------------------------


def _line(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode()


def sse(deltas: list[dict[str, Any]], *, finish: str | None = "tool_calls", done: bool = True,
        after: list[dict[str, Any]] = ()) -> Reply:
    """A streamed reply: each item a ``delta`` (``{"content": …}``, ``{"tool_calls": [...]}``), then the finish."""
    reader = ChunkReader(reply_max_bytes=256 * 1024)
    t = 100.0
    reader.line(_line({"id": "gen-1", "provider": "Lab", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}), t)
    for delta in deltas:
        t += 20.0
        reader.line(_line({"id": "gen-1", "provider": "Lab", "choices": [{"index": 0, "delta": delta}]}), t)
    if finish is not None:
        reader.line(_line({"id": "gen-1", "provider": "Lab",
                           "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}), t + 1)
    for delta in after:
        reader.line(_line({"id": "gen-1", "provider": "Lab", "choices": [{"index": 0, "delta": delta}]}), t + 2)
    if done:
        reader.line(b"data: [DONE]", t + 3)
    return reader.reply(http_status=200, total_ms=t + 3)


def body(message: dict[str, Any], *, finish: str | None = "tool_calls") -> Reply:
    """An unstreamed reply: one ``chat.completion`` body with ``message``."""
    reader = ChunkReader(reply_max_bytes=256 * 1024)
    raw = json.dumps({"id": "gen-1", "provider": "Lab",
                      "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}]},
                     ensure_ascii=False).encode()
    reader.body(raw, 400.0)
    return reader.reply(http_status=200, total_ms=400.0)


def streamed(name: str | None, arguments: str, *, call_id: str | None = "call_1", index: int = 0, pieces: int = 7,
             content: str | None = None, reasoning: str | None = None, finish: str | None = "tool_calls",
             done: bool = True) -> Reply:
    """One call streamed the OpenAI way: id, type and name first, then the arguments in ``pieces``-character fragments."""
    deltas: list[dict[str, Any]] = []
    if reasoning:
        deltas += [{"reasoning": reasoning[i:i + 30]} for i in range(0, len(reasoning), 30)]
    if content:
        deltas.append({"content": content})
    first: dict[str, Any] = {"index": index, "type": "function", "function": {"arguments": ""}}
    if call_id is not None:
        first["id"] = call_id
    if name is not None:
        first["function"]["name"] = name
    deltas.append({"tool_calls": [first]})
    deltas += [{"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + pieces]}}]}
               for i in range(0, len(arguments), pieces)]
    return sse(deltas, finish=finish, done=done)


def whole(calls: list[tuple[str | None, str]], *, content: str | None = None, finish: str | None = "tool_calls",
          ids: list[str | None] | None = None) -> Reply:
    """Calls in one unstreamed body: ``[(name, arguments), ...]``."""
    ids = ids or [f"call_{i + 1}" for i in range(len(calls))]
    entries = []
    for (name, arguments), call_id in zip(calls, ids, strict=True):
        entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
        if call_id is not None:
            entry["id"] = call_id
        entries.append(entry)
    return body({"content": content, "tool_calls": entries}, finish=finish)


def text(words: str, *, finish: str | None = "stop", reasoning: str | None = None, stream: bool = True) -> Reply:
    """A text answer, streamed in word-sized deltas (or one body)."""
    if not stream:
        return body({"content": words, **({"reasoning": reasoning} if reasoning else {})}, finish=finish)
    deltas: list[dict[str, Any]] = [{"reasoning": reasoning}] if reasoning else []
    deltas += [{"content": words[i:i + 12]} for i in range(0, len(words), 12)]
    return sse(deltas, finish=finish)


def expected(language: str) -> tuple[str, dict[str, Any]]:
    """The tool and the values the language's call prompt fixes."""
    tool, arguments, _ = TOOL_CALLS[language]
    return tool, arguments


def args_of(language: str, **changes: Any) -> str:
    """The fixed arguments of ``language`` as JSON, with top-level ``changes`` (``None``: drop the key)."""
    _, arguments = expected(language)
    value = {**arguments, **changes}
    return json.dumps({k: v for k, v in value.items() if v is not None}, ensure_ascii=False)


# -- correct replies ------------------------------------------------------------------------------

#: One sentence about lighthouses per language: the right answer where no tool fits.
NO_TOOL_ANSWERS: dict[str, str] = {
    "en": "The Pharos of Alexandria guided ships into the harbour for more than a thousand years.",
    "es": "El faro de Alejandría fue una de las siete maravillas del mundo antiguo.",
    "pt": "O farol de Alexandria foi uma das sete maravilhas do mundo antigo.",
    "fr": "Le phare d'Alexandrie était l'une des sept merveilles du monde antique.",
    "de": "Der Leuchtturm von Alexandria war eines der sieben Weltwunder der Antike.",
    "it": "Il faro di Alessandria era una delle sette meraviglie del mondo antico.",
    "nl": "De vuurtoren van Alexandrië was een van de zeven wereldwonderen van de oudheid.",
    "pl": "Latarnia na wyspie Faros była jednym z siedmiu cudów świata starożytnego.",
    "ru": "Александрийский маяк был одним из семи чудес света.",
    "uk": "Александрійський маяк був одним із семи чудес світу.",
    "tr": "İskenderiye Feneri, antik dünyanın yedi harikasından biriydi.",
    "ar": "كانت منارة الإسكندرية إحدى عجائب الدنيا السبع في العالم القديم.",
    "ja": "アレクサンドリアの大灯台は古代世界の七不思議の一つでした。",
    "ko": "알렉산드리아의 등대는 고대 세계 7대 불가사의 중 하나였습니다.",
    "zh": "亚历山大灯塔是古代世界七大奇迹之一。",
    "id": "Mercusuar Alexandria adalah salah satu dari tujuh keajaiban dunia kuno.",
    "vi": "Ngọn hải đăng Alexandria là một trong bảy kỳ quan của thế giới cổ đại.",
}

#: The second turn's answer per language, stating the result's temperature (31) in the
#: language's own way: ``31 °C``, ``31℃``, ``31도``, Arabic-Indic ``٣١``.
SECOND_TURN_ANSWERS: dict[str, str] = {
    "en": "It is 31 °C in Lisbon right now.",
    "es": "Ahora mismo hace 31 °C en Sevilla.",
    "pt": "Agora está fazendo 31 °C no Porto.",
    "fr": "Il fait actuellement 31 °C à Lyon.",
    "de": "In München sind es gerade 31 °C.",
    "it": "A Napoli ci sono adesso 31 gradi.",
    "nl": "Het is nu 31 graden in Utrecht.",
    "pl": "W Krakowie jest teraz 31°C.",
    "ru": "Сейчас в Казани 31 °C.",
    "uk": "Зараз у Львові 31 °C.",
    "tr": "İzmir'de şu an sıcaklık 31 derece.",
    "ar": "درجة الحرارة الآن في الإسكندرية ٣١ درجة مئوية.",
    "ja": "大阪の現在の気温は31℃です。",
    "ko": "지금 부산의 기온은 섭씨 31도입니다.",
    "zh": "广州现在的气温是31摄氏度。",
    "id": "Suhu di Surabaya sekarang 31 °C.",
    "vi": "Nhiệt độ hiện tại ở Đà Nẵng là 31 độ C.",
}

THINKING = "The user wants the tool called with the values they gave. I will call it with exactly those values."


def _passing() -> list[Case]:
    out: list[Case] = []
    for lang in LANGUAGES:
        tool, _ = expected(lang)
        compact = args_of(lang)
        out.append(Case(f"ok-call-{lang}", lang, "call", whole([(tool, compact)]), "pass"))
        out.append(Case(f"ok-stream-{lang}", lang, "call_stream", streamed(tool, compact), "pass"))
        out.append(Case(f"ok-no-tool-{lang}", lang, "no_tool", text(NO_TOOL_ANSWERS[lang]), "pass"))
        out.append(Case(f"ok-second-turn-{lang}", lang, "second_turn", text(SECOND_TURN_ANSWERS[lang]), "pass"))
    # the traps: what a correct reply may look like
    tool, fixed = expected("en")
    out += [
        Case("ok-escaped-cjk", "zh", "call", whole([("create_event", json.dumps(expected("zh")[1]))]), "pass"),
        Case("ok-pretty-printed", "ru", "call_stream", streamed("create_event",
                                                                json.dumps(expected("ru")[1], ensure_ascii=False,
                                                                           indent=2)), "pass"),
        Case("ok-integer-written-1.0", "en", "call", whole([(tool, args_of("en", duration_minutes=45.0))]), "pass"),
        Case("ok-amount-written-250.0", "pt", "call", whole([("convert_currency", args_of("pt", amount=250.0))]),
             "pass"),
        Case("ok-optional-left-out", "nl", "call_stream", streamed("create_event", args_of("nl")), "pass"),
        Case("ok-optional-added", "nl", "call", whole([("create_event", args_of("nl", attendees=["Sanne"]))]), "pass"),
        Case("ok-attendees-in-another-order", "ar", "call",
             whole([("create_event", args_of("ar", attendees=["عمر", "ليلى"]))]), "pass"),
        Case("ok-title-case", "en", "call", whole([(tool, args_of("en", title="Quarterly Review"))]), "pass"),
        Case("ok-decomposed-vietnamese", "vi", "call",
             whole([("get_weather", json.dumps({"city": "Đa\u0300 Na\u0306\u0303ng", "unit": "celsius"},
                                               ensure_ascii=False))]), "pass"),
        Case("ok-empty-content-beside-call", "es", "call", whole([("get_weather", args_of("es"))], content=""), "pass"),
        Case("ok-null-content-beside-call", "es", "call", whole([("get_weather", args_of("es"))], content=None), "pass"),
        Case("ok-text-before-call", "de", "call_stream",
             streamed("get_weather", args_of("de"), content="Ich sehe nach, wie das Wetter in München ist."), "pass"),
        Case("ok-reasoning-before-call", "ja", "call_stream",
             streamed("get_weather", args_of("ja"), reasoning=THINKING), "pass"),
        Case("ok-markup-in-reasoning-only", "ko", "call_stream",
             streamed("convert_currency", args_of("ko"),
                      reasoning='<tool_call>{"name": "convert_currency", "arguments": {"amount": 30000}}</tool_call>'),
             "pass"),
        Case("ok-stop-with-a-valid-call", "tr", "call_stream", streamed("get_weather", args_of("tr"), finish="stop"),
             "pass"),
        Case("ok-no-finish-reason-but-done", "it", "call", whole([("convert_currency", args_of("it"))], finish=None),
             "pass"),
        Case("ok-whole-call-in-one-chunk", "uk", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "tool_0_convert", "type": "function",
                                   "function": {"name": "convert_currency", "arguments": args_of("uk")}}]}]), "pass"),
        Case("ok-fireworks-repeats-id-and-name", "id", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "call_fw", "type": "function",
                                   "function": {"name": "convert_currency", "arguments": part}}]}
                  for part in ('{"amount": 75, ', '"from": "USD", ', '"to": "IDR"}')]), "pass"),
        Case("ok-parallel-calls-allowed", "es", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                   "function": {"name": "get_weather", "arguments": args_of("es")}}]},
                  {"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                   "function": {"name": "get_weather",
                                                "arguments": '{"city": "Sevilla", "unit": "fahrenheit"}'}}]}]), "pass"),
        Case("ok-parallel-interleaved-by-index", "pl", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                   "function": {"name": "get_weather", "arguments": '{"city": '}}]},
                  {"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                   "function": {"name": "get_weather", "arguments": '{"city": '}}]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": '"Kraków", "unit": "celsius"}'}}]},
                  {"tool_calls": [{"index": 1, "function": {"arguments": '"Kraków"}'}}]}]), "pass"),
        Case("ok-second-turn-full-width-digits", "ja", "second_turn", text("大阪の気温は３１度です。"), "pass"),
        Case("ok-second-turn-31.0", "en", "second_turn", text("The thermometer in Lisbon reads 31.0 °C."), "pass"),
        Case("ok-second-turn-reasoning-first", "fr", "second_turn",
             text(SECOND_TURN_ANSWERS["fr"], reasoning="The tool says 31 degrees; I report it."), "pass"),
        Case("ok-no-tool-short", "en", "no_tool", text("Lighthouses use Fresnel lenses."), "pass"),
        Case("ok-no-tool-unstreamed", "de", "no_tool", text(NO_TOOL_ANSWERS["de"], stream=False), "pass"),
        Case("ok-json-in-a-code-block-asked-for", "en", "no_tool",
             text('Here is an example:\n```json\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n```'),
             "pass", spec=msgspec.structs.replace(build("tools", "en", variant="no_tool").spec,
                                                  prompt="Show an example tool call as JSON in a code block.")),
        Case("ok-mentions-the-tool-in-words", "en", "no_tool",
             text("No tool is needed: the get_weather tool is for weather, and lighthouses use Fresnel lenses."),
             "pass"),
        Case("ok-narrates-beside-the-call", "en", "call_stream",
             streamed(tool, args_of("en"), content='Calling create_event(title="Quarterly review") now.'), "pass"),
    ]
    return out


# -- failing replies ------------------------------------------------------------------------------

#: A text answer in place of the call, per language (the model declined: trigger disagreement).
DECLINED: dict[str, str] = {
    "en": "Sure! The quarterly review is on March 14 at 9:30 with Ana and Bruno; I have noted it for you.",
    "es": "Ahora mismo en Sevilla hace sol y unos 24 grados, un día muy agradable.",
    "de": "In München ist es gerade bewölkt bei etwa 60 Grad Fahrenheit.",
    "ru": "Хорошо, событие «Обзор квартала» запланировано на 14 марта в 10:00.",
    "zh": "好的，我已为您安排了“季度回顾”，时间是3月14日15:30。",
    "ar": "حسنًا، تم تحديد اجتماع الفريق يوم 1 يونيو الساعة 11:00.",
    "ja": "大阪は現在晴れで、気温はおよそ25度です。",
    "pt": "250 EUR equivalem a cerca de 1.500 BRL hoje.",
    "ko": "30000원은 약 3300엔입니다.",
}

#: Tool-call markup left in the text, one family each (the call named is the language's own).
MARKUP: list[tuple[str, str, str]] = [
    ("hermes", "en", '<tool_call>\n{"name": "create_event", "arguments": {"title": "Quarterly review"}}\n</tool_call>'),
    ("qwen3-xml", "es", "<tool_call>\n<function=get_weather>\n<parameter=city>\nSevilla\n</parameter>\n</function>\n"
                        "</tool_call>"),
    ("qwen3-xml-bare", "de", "<function=get_weather>\n<parameter=city>\nMünchen\n</parameter>\n</function>"),
    ("minimax", "ja", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">大阪</parameter>\n'
                      "</invoke>\n</minimax:tool_call>"),
    ("kimi", "ru", "<|tool_calls_section_begin|><|tool_call_begin|>functions.create_event:0<|tool_call_argument_begin|>"
                   '{"title": "Обзор квартала"}<|tool_call_end|><|tool_calls_section_end|>'),
    ("kimi-stripped", "uk", 'functions.convert_currency:0{"amount": 500, "from": "UAH", "to": "USD"}'),
    ("deepseek-fullwidth", "zh", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>create_event\n"
                                 '```json\n{"title": "季度回顾"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    ("deepseek-ascii-bars", "ko", "<|tool▁calls▁begin|><|tool▁call▁begin|>function<|tool▁sep|>convert_currency"),
    ("mistral", "fr", '[TOOL_CALLS][{"name": "create_event", "arguments": {"title": "Réunion budgétaire"}}]'),
    ("mistral-v11", "it", '[TOOL_CALLS]convert_currency[ARGS]{"amount": 1200, "from": "CHF", "to": "EUR"}'),
    ("harmony", "pl", '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Kraków"}'
                      "<|call|>"),
    ("harmony-stripped", "tr", 'commentary to=functions.get_weather json{"city": "İzmir"}'),
    ("llama-json", "vi", '{"name": "get_weather", "parameters": {"city": "Đà Nẵng", "unit": "celsius"}}'),
    ("llama-python-tag", "es", '<|python_tag|>get_weather.call(city="Sevilla")'),
    ("flattened-json", "pl", '{"name":"get_weather","city":"Kraków"}'),
    ("json-after-words", "id", 'Baik, saya panggil alatnya: {"name": "convert_currency", "arguments": {"amount": 75}}'),
    ("pythonic-list", "de", '[get_weather(city="München", unit="fahrenheit")]'),
    ("pythonic-in-prose", "ar", 'سأستدعي create_event(title="اجتماع الفريق") الآن.'),
    ("gemma-tool-code", "nl", '```tool_code\nprint(create_event(title="Tandartscontrole"))\n```'),
    ("openai-legacy", "pt", '{"function_call": {"name": "convert_currency", "arguments": "{\\"amount\\": 250}"}}'),
    ("anthropic-xml", "en", '<function_calls><invoke name="create_event"><parameter name="title">Quarterly review'
                            "</parameter></invoke></function_calls>"),
]


def _failing() -> list[Case]:
    out: list[Case] = []
    # trigger: declined, wrong tool, calls where none fits, too many
    for lang, words in DECLINED.items():
        out.append(Case(f"declined-{lang}", lang, "call_stream", text(words), "fail", "tool_not_called"))
    out.append(Case("declined-finish-claims-a-call", "en", "call", text('{"title": "Quarterly review"}', stream=False,
                                                                         finish="tool_calls"), "fail", "tool_not_called"))
    out.append(Case("wrong-tool-es", "es", "call", whole([("convert_currency", '{"amount": 1, "from": "EUR", "to": "USD"}')]),
                    "fail", "tool_wrong_tool"))
    out.append(Case("wrong-tool-zh", "zh", "call_stream", streamed("get_weather", '{"city": "上海"}'), "fail",
                    "tool_wrong_tool"))
    for lang, (tool, arguments) in {"en": ("get_weather", '{"city": "Alexandria"}'),
                                    "ru": ("create_event", '{"title": "Маяк", "start": {"date": "2026-01-01"}}'),
                                    "zh": ("get_weather", '{"city": "亚历山大"}'),
                                    "ar": ("get_weather", '{"city": "الإسكندرية"}'),
                                    "pt": ("convert_currency", '{"amount": 1, "from": "EUR", "to": "BRL"}')}.items():
        out.append(Case(f"unexpected-call-{lang}", lang, "no_tool", streamed(tool, arguments), "fail",
                        "tool_unexpected_call"))
    city = SECOND_TURN["fr"][0]
    out.append(Case("second-turn-calls-again", "fr", "second_turn",
                    whole([("get_weather", json.dumps({"city": city}))]), "fail", "tool_unexpected_call"))
    single = msgspec.structs.replace(build("tools", "es", variant="call").spec, parallel_calls=False)
    out.append(Case("two-calls-where-one-is-allowed", "es", "call",
                    whole([("get_weather", args_of("es")), ("get_weather", args_of("es"))]), "fail",
                    "tool_too_many_calls", spec=single))
    out.append(Case("runaway-calls", "es", "call", whole([("get_weather", args_of("es"))] * 6), "fail",
                    "tool_too_many_calls"))
    # empty
    out.append(Case("empty-stop", "de", "call_stream", sse([], finish="stop"), "fail", "tool_empty_reply"))
    out.append(Case("empty-claims-a-call", "ja", "call", body({"content": None}, finish="tool_calls"), "fail",
                    "tool_empty_reply"))
    out.append(Case("empty-after-reasoning", "en", "call_stream", sse([{"reasoning": THINKING}], finish="stop"),
                    "fail", "tool_empty_reply"))
    out.append(Case("whitespace-only-no-tool", "ko", "no_tool", text(" \n "), "fail", "tool_empty_reply"))
    out.append(Case("empty-second-turn", "vi", "second_turn", sse([], finish="stop"), "fail", "tool_empty_reply"))
    # unknown names
    for cid, lang, name in [("name-channel-token", "es", "get_weather<|channel|>commentary"),
                            ("name-doubled", "de", "get_weatherget_weather"),
                            ("name-prefixed", "ja", "functions.get_weather"),
                            ("name-case", "tr", "Get_Weather"),
                            ("name-hyphen", "vi", "get-weather")]:
        out.append(Case(cid, lang, "call", whole([(name, args_of(lang))]), "fail", "tool_unknown_name"))
    # arguments that are not one JSON object
    full = args_of("en")
    for cid, lang, raw in [("json-truncated", "en", full[:40]),
                           ("json-truncated-cjk", "zh", args_of("zh")[:25]),
                           ("json-double-encoded", "ru", json.dumps(args_of("ru"), ensure_ascii=False)),
                           ("json-empty", "es", ""),
                           ("json-fence-header", "pt", "json\n" + args_of("pt")),
                           ("json-fenced", "it", "```json\n" + args_of("it") + "\n```"),
                           ("json-nan", "ko", '{"amount": NaN, "from": "KRW", "to": "JPY"}'),
                           ("json-python-quotes", "id", "{'amount': 75, 'from': 'USD', 'to': 'IDR'}"),
                           ("json-trailing-comma", "uk", '{"amount": 500, "from": "UAH", "to": "USD",}'),
                           ("json-two-objects", "pl", '{"city": "Kraków"}{"unit": "celsius"}'),
                           ("json-array", "tr", '["İzmir", "celsius"]'),
                           ("json-leaked-tag-in-key", "fr", '{"title": "Réunion budgétaire", "start date: 2026-05-20\\n'
                                                            '</parameter": ')]:
        out.append(Case(cid, lang, "call", whole([(expected(lang)[0], raw)]), "fail", "tool_args_invalid_json"))
    out.append(Case("json-streamed-truncated", "ar", "call_stream", streamed("create_event", args_of("ar")[:50]),
                    "fail", "tool_args_invalid_json"))
    out.append(Case("json-object-not-a-string", "nl", "call",
                    body({"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                        "name": "create_event", "arguments": expected("nl")[1]}}]}), "fail", "tool_args_invalid_json"))
    # schema
    for cid, lang, raw in [("schema-number-as-string", "pt", args_of("pt", amount="250")),
                           ("schema-integer-as-string", "en", args_of("en", duration_minutes="45")),
                           ("schema-integer-fraction", "ru", args_of("ru", duration_minutes=60.5)),
                           ("schema-required-missing", "ja", '{"unit": "celsius"}'),
                           ("schema-extra-property", "es", args_of("es", country="España")),
                           ("schema-enum", "de", args_of("de", unit="Fahrenheit")),
                           ("schema-date-pattern", "zh", args_of("zh", start={"date": "2026年3月14日", "time": "15:30"})),
                           ("schema-nested-flattened", "fr", args_of("fr", start="2026-05-20 14:00")),
                           ("schema-array-as-string", "ar", args_of("ar", attendees="ليلى، عمر")),
                           ("schema-array-json-encoded", "en", args_of("en", attendees='["Ana", "Bruno"]')),
                           ("schema-currency-lowercase", "it", args_of("it", to="eur")),
                           ("schema-negative-amount", "ko", args_of("ko", amount=-30000)),
                           ("schema-boolean-as-integer", "nl", args_of("nl", duration_minutes=True)),
                           ("schema-empty-title", "ru", args_of("ru", title=""))]:
        out.append(Case(cid, lang, "call", whole([(expected(lang)[0], raw)]), "fail", "tool_args_schema_mismatch"))
    out.append(Case("schema-streamed-args-lost", "zh", "call_stream", streamed("create_event", "{}"), "fail",
                    "tool_args_schema_mismatch"))
    # values the prompt fixed
    for cid, lang, raw in [("value-translated-city", "es", args_of("es", city="Seville")),
                           ("value-mojibake", "de", args_of("de", city="MÃ¼nchen")),
                           ("value-cut", "en", args_of("en", title="Quarterly rev")),
                           ("value-swapped-currencies", "it", args_of("it", **{"from": "EUR", "to": "CHF"})),
                           ("value-amount", "pt", args_of("pt", amount=25)),
                           ("value-lost-attendee", "ru", args_of("ru", attendees=["Анна"])),
                           ("value-date", "zh", args_of("zh", start={"date": "2026-03-15", "time": "15:30"})),
                           ("value-time-lost", "fr", args_of("fr", start={"date": "2026-05-20"})),
                           ("value-unit", "vi", args_of("vi", unit="fahrenheit")),
                           ("value-replacement-chars", "ar", args_of("ar", title="\ufffd\ufffd\ufffd")),
                           ("value-duration", "nl", args_of("nl", duration_minutes=2)),
                           ("value-latin-for-cyrillic", "ru", args_of("ru", attendees=["Anna", "Boris"]))]:
        out.append(Case(cid, lang, "call", whole([(expected(lang)[0], raw)]), "fail", "tool_args_wrong_value"))
    out.append(Case("value-streamed-missing", "tr", "call_stream", streamed("get_weather", '{"city": "Izmir"}'),
                    "fail", "tool_args_wrong_value"))
    # assembly
    out += [
        Case("assembly-ollama-index-reuse", "es", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                   "function": {"name": "get_weather", "arguments": args_of("es")}}]},
                  {"tool_calls": [{"index": 0, "id": "call_b", "type": "function",
                                   "function": {"name": "get_weather", "arguments": args_of("es")}}]}]),
             "fail", "tool_stream_assembly"),
        Case("assembly-empty-object-first", "en", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "toolu_1", "type": "function",
                                   "function": {"name": "create_event", "arguments": "{}"}}]},
                  {"tool_calls": [{"index": 0, "function": {"arguments": args_of("en")}}]}]),
             "fail", "tool_stream_assembly"),
        Case("assembly-no-id", "ja", "call_stream", streamed("get_weather", args_of("ja"), call_id=None), "fail",
             "tool_stream_assembly"),
        Case("assembly-empty-id", "ko", "call_stream", streamed("convert_currency", args_of("ko"), call_id=""),
             "fail", "tool_stream_assembly"),
        Case("assembly-duplicate-ids", "pl", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
                                   "function": {"name": "get_weather", "arguments": args_of("pl")}}]},
                  {"tool_calls": [{"index": 1, "id": "call_x", "type": "function",
                                   "function": {"name": "get_weather", "arguments": args_of("pl")}}]}]),
             "fail", "tool_stream_assembly"),
        Case("assembly-split-over-two-ids", "uk", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                   "function": {"name": "convert_currency", "arguments": '{"amount": 500, '}}]},
                  {"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                                   "function": {"arguments": '"from": "UAH", "to": "USD"}'}}]}]),
             "fail", "tool_stream_assembly"),
        Case("assembly-name-in-pieces", "id", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                   "function": {"name": "convert_", "arguments": ""}}]},
                  {"tool_calls": [{"index": 0, "function": {"name": "currency", "arguments": args_of("id")}}]}]),
             "fail", "tool_stream_assembly"),
        Case("assembly-after-finish", "it", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                   "function": {"name": "convert_currency", "arguments": args_of("it")[:20]}}]}],
                 after=[{"tool_calls": [{"index": 0, "function": {"arguments": args_of("it")[20:]}}]}]),
             "fail", "tool_stream_assembly"),
        Case("assembly-no-index", "tr", "call_stream",
             sse([{"tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": args_of("tr")}}]}]),
             "fail", "tool_stream_assembly"),
        Case("assembly-type", "vi", "call_stream",
             sse([{"tool_calls": [{"index": 0, "id": "call_1", "type": "tool",
                                   "function": {"name": "get_weather", "arguments": args_of("vi")}}]}]),
             "fail", "tool_stream_assembly"),
        Case("malformed-body-no-id", "de", "call", whole([("get_weather", args_of("de"))], ids=[None]), "fail",
             "tool_call_malformed"),
        Case("malformed-body-duplicate-ids", "fr", "call",
             whole([("create_event", args_of("fr")), ("create_event", args_of("fr"))], ids=["c1", "c1"]), "fail",
             "tool_call_malformed"),
    ]
    # the second turn: the result not used
    for cid, lang, words in [("result-ignored-en", "en", "It is warm and sunny in Lisbon today."),
                             ("result-other-number-de", "de", "In München sind es gerade 28 °C."),
                             ("result-ignored-zh", "zh", "广州现在天气很好，阳光明媚。"),
                             ("result-in-a-larger-number-ru", "ru", "Сейчас в Казани 131 градус по шкале."),
                             ("result-ignored-ar", "ar", "الطقس في الإسكندرية جميل اليوم.")]:
        out.append(Case(cid, lang, "second_turn", text(words), "fail", "tool_result_ignored"))
    # markup in the visible text
    for family, lang, leaked in MARKUP:
        out.append(Case(f"markup-{family}", lang, "call_stream", text(leaked), "fail", "tool_markup_in_content"))
    out.append(Case("markup-beside-a-call", "en", "call_stream",
                    streamed("create_event", args_of("en"),
                             content='<tool_call>{"name": "create_event", "arguments": {}}</tool_call>'),
                    "fail", "tool_markup_in_content"))
    out.append(Case("markup-in-no-tool-answer", "fr", "no_tool",
                    text('<tool_call>{"name": "get_weather", "arguments": {"city": "Alexandrie"}}</tool_call>'),
                    "fail", "tool_markup_in_content"))
    # capability
    for status in (400, 422):
        out.append(Case(f"capability-{status}", "en", "call",
                        Reply(http_status=status, error={"message": "Provider returned error", "code": status,
                                                         "metadata": {"raw": "tools are not supported"}}),
                        "fail", "tool_capability_error"))
    return out


PASSING: list[Case] = _passing()
FAILING: list[Case] = _failing()

#: Realistic faults the checks do not catch, by design or as a known limit: counted in the
#: catch rates the benchmark prints, never asserted.
KNOWN_MISSES: list[Case] = [
    # a number the model invented that happens to be the result's: indistinguishable from using it
    Case("miss-guessed-the-value", "en", "second_turn", text("Lisbon is around 31 °C this time of year, I think."),
         "fail", "tool_result_ignored"),
    # markup with the syntax stripped: nothing left that says "call"
    Case("miss-markup-words-only", "es", "call_stream", text("get_weather city Sevilla unit celsius"), "fail",
         "tool_markup_in_content"),
]
