"""Probe prompts: synthetic, fixed per language, versioned.

No real conversation is ever used (docs/concepts/probes.md, the filtering contract).  Each probe asks for
something a check can verify exactly: a required first character, a closing
marker, an exact echo, a JSON schema, a language.  Change any text here and
bump :data:`PROMPT_VERSION`: results of different versions are not comparable.

The instructions are plain English in the system message, so any model (and the
simulated gateway, :mod:`simulator`) can follow them:

- ``Write your reply in <Language>.``
- ``The first character of your reply must be *.``
- ``End your reply with the marker [[END]].``
- ``Repeat exactly, without any other text: <sentence>``

The tool-call probe (kind ``tools``, docs/concepts/probes.md, the tool-call contract) offers the fixed tool set
:data:`TOOLS` (version :data:`TOOL_SET_VERSION`) and asks, per variant
(:data:`reverie_canary.client.reply.TOOL_VARIANTS`), for one known call with values the prompt
fixes (:data:`TOOL_CALLS`; ``call`` unstreamed, ``call_stream`` streamed), for none
(:data:`NO_TOOL`: a question no tool fits, text is right), or for text that uses the tool's
result (:data:`SECOND_TURN`: the call and its result are in the history).  The request body a
tool probe sends (:func:`reverie_canary.services.prober.http.request_body`; the budget field is the one
the endpoint lists, ``max_tokens`` or ``max_completion_tokens``)::

    {"model": <model>, "messages": [...], "max_tokens": 320, "stream": false | true,
     "provider": {"order": [tag], "only": [tag], "allow_fallbacks": false, "require_parameters": true},
     "plugins": [], "tools": TOOLS, "tool_choice": "auto"}

``stream`` is ``false`` for ``call`` only.  ``tool_choice: "auto"`` in every variant: the model
decides, which trigger agreement (``no_tool``) needs and which the vendors' verifiers measure;
``"required"`` or a named tool would make vLLM and SGLang constrain the arguments and hide the
parser faults the probe is for (the vLLM and SGLang structured-output documentation), and the named form is refused by some hosts
(§1.1).  ``auto`` is the default with tools, but it is sent, so ``require_parameters`` also
makes the gateway refuse an endpoint that does not take it; only endpoints listing both
``tools`` and ``tool_choice`` are probed
(:data:`reverie_canary.shared.contract.events.PROBE_PARAMETERS`).  No ``parallel_tool_calls``
(default ``true``; the checks allow more than one call, :attr:`ProbeSpec.parallel_calls`).  No
tool is ``strict``: strict schemas require every property, and the set has optional ones
(the JSON Schema specification; OpenAI's structured-outputs guide).

Tokens per endpoint and cycle, the four variants, estimated from the characters sent (about 3.5
characters per token for the JSON and English text, fewer for Cyrillic and CJK; not counted with a
tokenizer, and each host's template wraps the tools in its own words): the tool set is 1,501
characters of JSON, about 430 tokens in every request; the messages 330-730 characters (the second
turn's history the longest), 100-250 tokens; so 550-700 prompt tokens a request, about 2,500 a
cycle.  Completions: a call some 40-80 tokens, a sentence of text 20-40, about 200 a cycle; the
budget caps each reply at 320 (a reasoning model may spend all of it: at most 1,280).  About
2,700 tokens per endpoint a cycle, at most about 3,800.  A declined or unexpected call is
confirmed by two more requests (:data:`reverie_canary.client.checks.tools.TOOL_TRIGGER_REASONS`):
a host that declines costs two requests of that variant more.
"""

from __future__ import annotations

import json
from typing import Any

from msgspec import Struct

from reverie_canary.client.languages import LANGUAGE_NAMES
from reverie_canary.client.reply import TOOL_VARIANTS, ProbeSpec
from reverie_canary.shared.contract.events import PROMPT_VERSION as PROMPT_VERSION  # bumped there, with the wire

SENTINEL = "[[END]]"
PREFIX = "*"

SYSTEM = (
    "You are Mira, the keeper of a lighthouse in an interactive adventure story. "
    "Stay in character. Write your reply in {language}."
)

#: Short in-character turn for the time-to-first-token probe.
SCENE_TURN: dict[str, str] = {
    "en": "The storm is coming, Mira. What do you do?",
    "es": "Se acerca la tormenta, Mira. ¿Qué haces?",
    "pt": "A tempestade está chegando, Mira. O que você faz?",
    "fr": "La tempête arrive, Mira. Que fais-tu ?",
    "de": "Der Sturm zieht auf, Mira. Was tust du?",
    "it": "Sta arrivando la tempesta, Mira. Che cosa fai?",
    "nl": "De storm komt eraan, Mira. Wat doe je?",
    "pl": "Nadciąga burza, Miro. Co robisz?",
    "ru": "Надвигается шторм, Мира. Что ты делаешь?",
    "uk": "Насувається шторм, Міро. Що ти робиш?",
    "tr": "Fırtına geliyor, Mira. Ne yapıyorsun?",
    "ar": "العاصفة قادمة يا ميرا. ماذا تفعلين؟",
    "ja": "嵐が近づいているよ、ミラ。どうする？",
    "ko": "폭풍이 다가오고 있어, 미라. 어떻게 할 거야?",
    "zh": "暴风雨要来了，米拉。你会怎么做？",
    "id": "Badai akan datang, Mira. Apa yang kamu lakukan?",
    "vi": "Cơn bão đang đến, Mira. Cô sẽ làm gì?",
}

#: A paragraph request for the language probe, in the language itself.
DESCRIBE: dict[str, str] = {
    "en": "Mira, describe the lighthouse and the sea at dawn in three or four sentences.",
    "es": "Mira, describe el faro y el mar al amanecer en tres o cuatro frases.",
    "pt": "Mira, descreva o farol e o mar ao amanhecer em três ou quatro frases.",
    "fr": "Mira, décris le phare et la mer à l'aube en trois ou quatre phrases.",
    "de": "Mira, beschreibe den Leuchtturm und das Meer im Morgengrauen in drei oder vier Sätzen.",
    "it": "Mira, descrivi il faro e il mare all'alba in tre o quattro frasi.",
    "nl": "Mira, beschrijf de vuurtoren en de zee bij zonsopgang in drie of vier zinnen.",
    "pl": "Mira, opisz latarnię morską i morze o świcie w trzech lub czterech zdaniach.",
    "ru": "Мира, опиши маяк и море на рассвете в трёх-четырёх предложениях.",
    "uk": "Міро, опиши маяк і море на світанку в трьох-чотирьох реченнях.",
    "tr": "Mira, şafak vaktinde deniz fenerini ve denizi üç ya da dört cümleyle anlat.",
    "ar": "ميرا، صفي المنارة والبحر عند الفجر في ثلاث أو أربع جمل.",
    "ja": "ミラ、夜明けの灯台と海の様子を三、四文で描写してください。",
    "ko": "미라, 새벽의 등대와 바다를 서너 문장으로 묘사해 줘.",
    "zh": "米拉，请用三四句话描述黎明时分的灯塔和大海。",
    "id": "Mira, gambarkan mercusuar dan laut saat fajar dalam tiga atau empat kalimat.",
    "vi": "Mira, hãy miêu tả ngọn hải đăng và biển lúc bình minh trong ba hoặc bốn câu.",
}

#: Supported traffic with some tension: the filtering probe (contract 2).
SCENE_CONTINUATION = (
    "Continue this scene from an adventure story. Smugglers have cornered Mira on the "
    "lighthouse stairs; their leader draws a knife and threatens to throw her lamp into "
    "the sea. Write what happens next in two to four sentences and keep the tension."
)

ECHO_TEXT = "The lighthouse keeper counted nine ships before the fog rolled in."

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temp_c": {"type": "number"},
        "summary": {"type": "string"},
    },
    "required": ["city", "temp_c", "summary"],
    "additionalProperties": False,
}


class ProbeRequest(Struct, frozen=True, kw_only=True):
    """The chat-completions body parts of one probe and the spec it is checked against.

    ``tools`` (the tool probe's :data:`TOOLS`), ``tool_choice`` (:data:`TOOL_CHOICE`) and
    ``stream`` (``False``: the unstreamed tool call) are the parts only the tool probe sets.
    """

    messages: list[dict[str, Any]]
    max_tokens: int
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | None = None
    stream: bool = True
    spec: ProbeSpec


# -- the tool-call probe ---------------------------------------------------------------------------

#: The tool set's version: a change to :data:`TOOLS` or to the tool prompts bumps it and
#: :data:`PROMPT_VERSION`.
TOOL_SET_VERSION = "t1"

#: Three functions whose parameters hold a nested object (``create_event.start``), an enum
#: (``get_weather.unit``), an array of strings (``create_event.attendees``), a number with a
#: minimum, patterns, required and optional fields.  The shapes of the field cases
#: of the team's data folder, so recorded and live calls are judged against one set.
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, as written by the user."},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                         "description": "Temperature unit (optional)."},
            },
            "required": ["city"],
            "additionalProperties": False,
        }}},
    {"type": "function", "function": {
        "name": "convert_currency",
        "description": "Convert an amount of money between two currencies.",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number", "minimum": 0},
                "from": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 code, e.g. EUR."},
                "to": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 code, e.g. USD."},
            },
            "required": ["amount", "from", "to"],
            "additionalProperties": False,
        }}},
    {"type": "function", "function": {
        "name": "create_event",
        "description": "Create a calendar event.",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1},
                "start": {
                    "type": "object",
                    "properties": {
                        "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                        "time": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"},
                    },
                    "required": ["date"],
                    "additionalProperties": False,
                },
                "duration_minutes": {"type": "integer", "minimum": 1},
                "attendees": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["title", "start"],
            "additionalProperties": False,
        }}},
]

#: The ``tool_choice`` every tool probe sends (the module docstring says why ``auto``).
TOOL_CHOICE = "auto"

TOOL_SYSTEM = (
    "You are a helpful assistant that can use tools. When one of the tools fits the user's request, "
    "call it, with the argument values exactly as the user wrote them. When none fits, answer in "
    "{language} in one or two sentences. Write numbers in digits."
)

#: Per language: the tool the prompt calls for, the values it fixes (a subset the call must
#: hold; the optional fields it does not name may be left out) and the prompt.  Every tool in
#: several languages; values in the language's own script (Cyrillic, Arabic, CJK, Vietnamese
#: with its diacritics), names in the nominative and quoted where the sentence would inflect them.
TOOL_CALLS: dict[str, tuple[str, dict[str, Any], str]] = {
    "en": ("create_event", {"title": "Quarterly review", "start": {"date": "2026-03-14", "time": "09:30"},
                            "duration_minutes": 45, "attendees": ["Ana", "Bruno"]},
           'Use the create_event tool to add an event titled "Quarterly review" on 2026-03-14 at 09:30, '
           "lasting 45 minutes, with Ana and Bruno as attendees."),
    "es": ("get_weather", {"city": "Sevilla", "unit": "celsius"},
           "Usa la herramienta get_weather para consultar el tiempo actual en Sevilla, en grados Celsius."),
    "pt": ("convert_currency", {"amount": 250, "from": "EUR", "to": "BRL"},
           "Use a ferramenta convert_currency para converter 250 EUR em BRL."),
    "fr": ("create_event", {"title": "Réunion budgétaire", "start": {"date": "2026-05-20", "time": "14:00"},
                            "duration_minutes": 30, "attendees": ["Chloé", "Marc"]},
           "Utilise l'outil create_event pour créer un événement intitulé « Réunion budgétaire » le 2026-05-20 "
           "à 14:00, d'une durée de 30 minutes, avec Chloé et Marc comme participants."),
    "de": ("get_weather", {"city": "München", "unit": "fahrenheit"},
           "Nutze das Werkzeug get_weather, um das aktuelle Wetter in München in Grad Fahrenheit abzufragen."),
    "it": ("convert_currency", {"amount": 1200, "from": "CHF", "to": "EUR"},
           "Usa lo strumento convert_currency per convertire 1200 CHF in EUR."),
    "nl": ("create_event", {"title": "Tandartscontrole", "start": {"date": "2026-04-02", "time": "08:15"},
                            "duration_minutes": 20},
           'Gebruik de tool create_event om een afspraak met de titel "Tandartscontrole" te maken op 2026-04-02 '
           "om 08:15, met een duur van 20 minuten."),
    "pl": ("get_weather", {"city": "Kraków", "unit": "celsius"},
           "Użyj narzędzia get_weather, aby sprawdzić aktualną pogodę; miasto: „Kraków”, jednostka: stopnie "
           "Celsjusza."),
    "ru": ("create_event", {"title": "Обзор квартала", "start": {"date": "2026-03-14", "time": "10:00"},
                            "duration_minutes": 60, "attendees": ["Анна", "Борис"]},
           "Используй инструмент create_event, чтобы создать событие с названием «Обзор квартала» на 2026-03-14 "
           "в 10:00 продолжительностью 60 минут; участники: Анна и Борис."),
    "uk": ("convert_currency", {"amount": 500, "from": "UAH", "to": "USD"},
           "Скористайся інструментом convert_currency, щоб конвертувати 500 UAH у USD."),
    "tr": ("get_weather", {"city": "İzmir", "unit": "celsius"},
           'get_weather aracını kullanarak "İzmir" şehrinin şu anki hava durumunu santigrat derece olarak öğren.'),
    "ar": ("create_event", {"title": "اجتماع الفريق", "start": {"date": "2026-06-01", "time": "11:00"},
                            "duration_minutes": 45, "attendees": ["ليلى", "عمر"]},
           'استخدم أداة create_event لإنشاء حدث بعنوان "اجتماع الفريق" بتاريخ 2026-06-01 الساعة 11:00 لمدة 45 '
           'دقيقة، والحضور: "ليلى" و"عمر".'),
    "ja": ("get_weather", {"city": "大阪", "unit": "celsius"},
           "get_weather ツールを使って、「大阪」の現在の天気を摂氏で調べてください。"),
    "ko": ("convert_currency", {"amount": 30000, "from": "KRW", "to": "JPY"},
           "convert_currency 도구를 사용해서 30000 KRW를 JPY로 환전해 줘."),
    "zh": ("create_event", {"title": "季度回顾", "start": {"date": "2026-03-14", "time": "15:30"},
                            "duration_minutes": 90, "attendees": ["王伟", "李娜"]},
           "请使用 create_event 工具创建一个标题为“季度回顾”的日程，时间是 2026-03-14 15:30，时长 90 分钟，参与者：王伟、李娜。"),
    "id": ("convert_currency", {"amount": 75, "from": "USD", "to": "IDR"},
           "Gunakan alat convert_currency untuk mengonversi 75 USD ke IDR."),
    "vi": ("get_weather", {"city": "Đà Nẵng", "unit": "celsius"},
           'Hãy dùng công cụ get_weather để xem thời tiết hiện tại ở "Đà Nẵng", theo độ C.'),
}

#: A question no tool of the set fits: the right answer is text, no call (trigger agreement).
NO_TOOL: dict[str, str] = {
    "en": "Tell me one interesting fact about lighthouses, in one sentence.",
    "es": "Cuéntame un dato curioso sobre los faros, en una sola frase.",
    "pt": "Conte-me uma curiosidade sobre faróis, em uma só frase.",
    "fr": "Dis-moi un fait intéressant sur les phares, en une seule phrase.",
    "de": "Erzähl mir eine interessante Tatsache über Leuchttürme, in einem einzigen Satz.",
    "it": "Dimmi una curiosità sui fari, in una sola frase.",
    "nl": "Vertel me één interessant feit over vuurtorens, in één zin.",
    "pl": "Podaj jedną ciekawostkę o latarniach morskich, w jednym zdaniu.",
    "ru": "Расскажи один интересный факт о маяках, одним предложением.",
    "uk": "Розкажи один цікавий факт про маяки, одним реченням.",
    "tr": "Bana deniz fenerleri hakkında ilginç bir bilgiyi tek cümleyle anlat.",
    "ar": "أخبرني بمعلومة طريفة واحدة عن المنارات في جملة واحدة.",
    "ja": "灯台についての面白い事実を一つ、一文で教えてください。",
    "ko": "등대에 관한 흥미로운 사실 하나를 한 문장으로 알려 줘.",
    "zh": "请用一句话告诉我一个关于灯塔的有趣事实。",
    "id": "Ceritakan satu fakta menarik tentang mercusuar dalam satu kalimat.",
    "vi": "Hãy kể cho tôi một điều thú vị về ngọn hải đăng trong một câu.",
}

#: The second turn's question: the city (as the call names it) and the user's words.
SECOND_TURN: dict[str, tuple[str, str]] = {
    "en": ("Lisbon", "What is the temperature in Lisbon right now, in degrees Celsius? Use the get_weather tool."),
    "es": ("Sevilla", "¿Qué temperatura hace ahora en Sevilla, en grados Celsius? Usa la herramienta get_weather."),
    "pt": ("Porto", "Qual é a temperatura agora no Porto, em graus Celsius? Use a ferramenta get_weather."),
    "fr": ("Lyon", "Quelle température fait-il en ce moment à Lyon, en degrés Celsius ? Utilise l'outil get_weather."),
    "de": ("München", "Wie warm ist es gerade in München, in Grad Celsius? Nutze das Werkzeug get_weather."),
    "it": ("Napoli", "Che temperatura c'è adesso a Napoli, in gradi Celsius? Usa lo strumento get_weather."),
    "nl": ("Utrecht", "Hoe warm is het nu in Utrecht, in graden Celsius? Gebruik de tool get_weather."),
    "pl": ("Kraków", "Jaka jest teraz temperatura w mieście „Kraków”, w stopniach Celsjusza? Użyj narzędzia "
                     "get_weather."),
    "ru": ("Казань", "Какая сейчас температура в городе «Казань», в градусах Цельсия? Используй инструмент "
                     "get_weather."),
    "uk": ("Львів", "Яка зараз температура в місті «Львів», у градусах Цельсія? Скористайся інструментом "
                    "get_weather."),
    "tr": ("İzmir", '"İzmir" şehrinde şu an sıcaklık kaç santigrat derece? get_weather aracını kullan.'),
    "ar": ("الإسكندرية", 'كم درجة الحرارة الآن في مدينة "الإسكندرية" بالدرجات المئوية؟ استخدم أداة get_weather.'),
    "ja": ("大阪", "「大阪」の今の気温は摂氏何度ですか？get_weather ツールを使ってください。"),
    "ko": ("부산", '지금 "부산"의 기온은 섭씨 몇 도야? get_weather 도구를 사용해 줘.'),
    "zh": ("广州", "“广州”现在的气温是摄氏多少度？请使用 get_weather 工具。"),
    "id": ("Surabaya", "Berapa suhu di Surabaya sekarang, dalam derajat Celsius? Gunakan alat get_weather."),
    "vi": ("Đà Nẵng", 'Nhiệt độ hiện tại ở "Đà Nẵng" là bao nhiêu độ C? Hãy dùng công cụ get_weather.'),
}
#: The value only the tool's result holds (a temperature the question never names), and the id of
#: the call in the history: nine letters and digits (Mistral's templates require exactly that).
TOOL_RESULT_VALUE = "31"
TOOL_CALL_ID = "call00001"


def second_turn_messages(language: str, system: str) -> list[dict[str, Any]]:
    """The second turn's history: the question, the assistant's call (``content`` null), the tool's result.

    The result is a JSON string (``{"city": …, "temperature": 31, "unit": "celsius"}``); the
    assistant turn carries ``content: null`` beside its call, as OpenRouter's own example does
    (the OpenAI tool-call wire as OpenRouter passes it; some providers reject ``""``).
    """
    city, question = SECOND_TURN[language]
    arguments = json.dumps({"city": city, "unit": "celsius"}, ensure_ascii=False)
    result = json.dumps({"city": city, "temperature": int(TOOL_RESULT_VALUE), "unit": "celsius"}, ensure_ascii=False)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": TOOL_CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": TOOL_CALL_ID, "content": result},
    ]


def _build_tools(language: str, variant: str, max_tokens: int, threshold_ms: float) -> ProbeRequest:
    if variant not in TOOL_VARIANTS:
        raise ValueError(f"unknown tool variant {variant!r}; known: {list(TOOL_VARIANTS)}")
    system = TOOL_SYSTEM.format(language=LANGUAGE_NAMES[language])
    common = dict(kind="tools", language=language, tools=TOOLS, variant=variant, max_tokens=max_tokens,
                  ttft_threshold_ms=threshold_ms)
    if variant in ("call", "call_stream"):
        tool, arguments, user = TOOL_CALLS[language]
        spec = ProbeSpec(**common, prompt=user, expected_tool=tool, expected_arguments=arguments)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    elif variant == "no_tool":
        user = NO_TOOL[language]
        spec = ProbeSpec(**common, prompt=user)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    else:
        messages = second_turn_messages(language, system)
        spec = ProbeSpec(**common, prompt=messages[1]["content"], tool_result_value=TOOL_RESULT_VALUE)
    return ProbeRequest(messages=messages, max_tokens=max_tokens, tools=TOOLS, tool_choice=TOOL_CHOICE,
                        stream=variant != "call", spec=spec)


def build(kind: str, language: str, *, max_tokens: int = 320, ttft_threshold_s: float = 10.0,
          variant: str = "call") -> ProbeRequest:
    """Build the request and spec of one probe.

    Args:
        kind: ``ttft`` / ``refusal`` / ``structured`` / ``language`` / ``echo`` / ``tools``.
        language: ISO 639-1 code, one of :data:`LANGUAGE_NAMES`.
        max_tokens: output budget (generous, so that ``length`` is rare).
        ttft_threshold_s: latency bar carried in the spec.
        variant: the tool probe's variant (``call``, ``call_stream``, ``no_tool``,
            ``second_turn``; the module docstring gives the body it makes); other kinds ignore it.

    Raises:
        ValueError: unknown kind, language or tool variant.
    """
    if language not in LANGUAGE_NAMES:
        raise ValueError(f"unknown language {language!r}")
    system = SYSTEM.format(language=LANGUAGE_NAMES[language])
    threshold_ms = ttft_threshold_s * 1000.0
    if kind == "tools":
        return _build_tools(language, variant, max_tokens, threshold_ms)
    if kind == "ttft":
        system += f" The first character of your reply must be {PREFIX}, starting with an action in asterisks."
        user = SCENE_TURN[language]
        spec = ProbeSpec(kind=kind, language=language, prompt=user, expected_prefix=PREFIX,
                         max_tokens=max_tokens, ttft_threshold_ms=threshold_ms)
        fmt = None
    elif kind == "refusal":
        system += f" End your reply with the marker {SENTINEL}."
        user = SCENE_CONTINUATION
        spec = ProbeSpec(kind=kind, language=language, prompt=user, sentinel=SENTINEL,
                         max_tokens=max_tokens, ttft_threshold_ms=threshold_ms)
        fmt = None
    elif kind == "structured":
        user = "Report the weather at the lighthouse as a JSON object: the city, the temperature in °C and a short summary."
        fmt = {
            "type": "json_schema",
            "json_schema": {"name": "lighthouse_weather", "strict": True, "schema": WEATHER_SCHEMA},
        }
        spec = ProbeSpec(kind=kind, language=language, prompt=user, schema=WEATHER_SCHEMA,
                         response_format="json_schema", max_tokens=max_tokens, ttft_threshold_ms=threshold_ms)
    elif kind == "language":
        user = DESCRIBE[language]
        spec = ProbeSpec(kind=kind, language=language, prompt=user, max_tokens=max_tokens,
                         ttft_threshold_ms=threshold_ms)
        fmt = None
    elif kind == "echo":
        user = f"Repeat exactly, without any other text: {ECHO_TEXT}"
        system = "Repeat the user's sentence exactly."
        spec = ProbeSpec(kind=kind, language="en", prompt=user, echo_text=ECHO_TEXT,
                         max_tokens=max_tokens, ttft_threshold_ms=threshold_ms)
        fmt = None
    else:
        raise ValueError(f"unknown probe kind {kind!r}")
    return ProbeRequest(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        max_tokens=max_tokens,
        response_format=fmt,
        spec=spec,
    )
