"""Probe prompts: synthetic, fixed per language, versioned.

No real conversation is ever used (DESIGN.md, contract 2).  Each probe asks for
something a check can verify exactly: a required first character, a closing
marker, an exact echo, a JSON schema, a language.  Change any text here and
bump :data:`PROMPT_VERSION`: results of different versions are not comparable.

The instructions are plain English in the system message, so any model (and the
simulated gateway, :mod:`simulator`) can follow them:

- ``Write your reply in <Language>.``
- ``The first character of your reply must be *.``
- ``End your reply with the marker [[END]].``
- ``Repeat exactly, without any other text: <sentence>``
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from reverie_canary.client.reply import ProbeSpec

PROMPT_VERSION = "p1"

LANGUAGE_NAMES: dict[str, str] = {
    "en": "English", "es": "Spanish", "pt": "Portuguese", "fr": "French",
    "de": "German", "it": "Italian", "nl": "Dutch", "pl": "Polish",
    "ru": "Russian", "uk": "Ukrainian", "tr": "Turkish", "ar": "Arabic",
    "ja": "Japanese", "ko": "Korean", "zh": "Chinese", "id": "Indonesian",
    "vi": "Vietnamese",
}

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
    """The chat-completions body parts of one probe and the spec it is checked against."""

    messages: list[dict[str, str]]
    max_tokens: int
    response_format: dict[str, Any] | None = None
    spec: ProbeSpec


def build(kind: str, language: str, *, max_tokens: int = 320, ttft_threshold_s: float = 10.0) -> ProbeRequest:
    """Build the request and spec of one probe.

    Args:
        kind: ``ttft`` / ``refusal`` / ``structured`` / ``language`` / ``echo``.
        language: ISO 639-1 code, one of :data:`LANGUAGE_NAMES`.
        max_tokens: output budget (generous, so that ``length`` is rare).
        ttft_threshold_s: latency bar carried in the spec.

    Raises:
        ValueError: unknown kind or language.
    """
    if language not in LANGUAGE_NAMES:
        raise ValueError(f"unknown language {language!r}")
    system = SYSTEM.format(language=LANGUAGE_NAMES[language])
    threshold_ms = ttft_threshold_s * 1000.0
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
