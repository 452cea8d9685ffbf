"""Script integrity: foreign-script runs inside a reply, short replies all in one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.checks import evaluate
from reverie_canary.client.checks.encoding import assess_encoding
from reverie_canary.client.checks.language import LANGUAGES, assess_language
from reverie_canary.client.checks.scripts import (
    ALLOWED,
    HOME,
    check_foreign_script,
    script_counts,
    short_reply_switch,
)
from reverie_canary.client.checks.text import strip_for_detection
from reverie_canary.client.reply import ProbeSpec, Reply
from reverie_canary.services.prober.prompts import build


def _judge(text: str, lang: str):
    return check_foreign_script(Reply(text=text), ProbeSpec(kind="refusal", language=lang))


# -- item 4: short runs of a foreign script ------------------------------------------------------


@pytest.mark.parametrize("lang, text, script", [
    ("en", "*Mira lifts the lamp.* The smugglers step back 一 and the leader lowers his knife.", "han"),
    ("en", "The smugglers отступили down the narrow stairs, cursing the old keeper.", "cyrillic"),
    ("en", "\"Welcome to the 灯塔, traveller,\" she says, lifting the lamp high above her head.", "han"),
    ("pt", "Mira ergue a lanterna e sorri为 para os contrabandistas que recuam pela escada.", "han"),
    ("pt", "O vento bate nas janelas antigas e o mar quebra nas rochas लेकिन lá embaixo.", "indic"),
    ("es", "La linterna se apaga y Mira espera en la oscuridad 그리고 escucha el mar.", "hangul"),
    ("de", "Mira hebt die Laterne, und die Schmuggler weichen zurück في الظلام zur Tür.", "arabic"),
    ("fr", "Mira soulève la lanterne ; les contrebandiers reculent vers la porte ของ la tour.", "thai"),
    ("tr", "Mira feneri kaldırıyor ve kaçakçılar merdivenlerden geri çekiliyor и bekliyor.", "cyrillic"),
    ("vi", "Mira nâng chiếc đèn lên và những kẻ buôn lậu lùi xuống cầu thang 的 hẹp.", "han"),
    ("id", "Mira mengangkat lampu dan para penyelundup mundur ke tangga yang sempit ใน gelap.", "thai"),
    ("en", "The keeper's name was Hеlen, and she had kept the light for forty years.", "cyrillic"),  # homoglyph
    ("ru", "Мира поднимает фонарь, и контрабандисты отступают 到 по узкой лестнице.", "han"),
    ("uk", "Міра піднімає ліхтар, і контрабандисти відступають 계단 вузькими сходами.", "hangul"),
    ("ar", "ترفع ميرا المصباح ويتراجع المهربون на الدرج الضيق نحو الباب.", "cyrillic"),
    ("ja", "ミラはランプを掲げ、密輸業者たちは 계단 狭い階段を後ずさりした。", "hangul"),
    ("ja", "ミラはランプを掲げ、密輸業者たちはлестница狭い階段を後ずさりした。", "cyrillic"),
    ("zh", "米拉举起灯，走私者们沿着狭窄的楼梯のように后退了。", "kana"),
    ("ko", "미라가 등불을 들어 올리자 밀수꾼들은 좁은 계단으로 отступили 물러섰다.", "cyrillic"),
])
def test_foreign_script_runs_fail(lang, text, script):
    """One character to a few words of a script the language never uses fail as foreign_script."""
    result = _judge(text, lang)
    assert (result.outcome, result.reason) == ("fail", "foreign_script"), result
    assert script in result.evidence["scripts"]


@pytest.mark.parametrize("lang, text", [
    ("nl", "Een bekende Hebreeuwse naam die begint met de gimel is Gideon : גדעון."),              # real, Leipzig
    ("nl", "Fairy Tail (フェアリーテイル Fearī Teiru, geromaniseerd als FAIRY TAIL in Japan) is een mangaserie."),
    ("nl", "Variaties Pajeon met zeevoedsel In het Koreaanse haemul pajeon (해물파전) genoemd."),
    ("en", "She whispered «спасибо» and climbed the stairs to the lamp room."),                  # quoted word
    ("en", "The sign over the door said \"灯台\", the old Japanese word for lighthouse."),
    ("en", "*Mira laughs* (ﾉ◕ヮ◕)ﾉ*:･ﾟ✧ and lifts the lamp towards the dark harbour."),         # kaomoji
    ("en", "The beam turns at ω = 2π rad per minute, and the lens has Δ of 3 mm."),           # Greek symbols
    ("en", "Use `print('灯台')` to print the word, then open https://example.com/灯台 to read more."),
    ("en", "Mira smiles 😊 and the gulls circle ✧ over the harbour ★ at dawn."),                 # emoji, symbols
    ("pt", "Nguyễn, Dvořák e Søren chegaram ao farol às nove, com o Ærø ao fundo."),            # Latin names
    ("ru", "Мира открыла iPhone и написала в Telegram, что маяк снова работает."),            # Latin in Russian
    ("ja", "ミラはiPhoneでGoogleマップを開き、灯台までの道を調べた。"),
    ("ko", "대선의 큰 변수(變數)가 될 회담 발표에도 두 진영간의 싸움은 수그러들 것 같지 않다."),      # hanja
    ("ko", "등대지기는 燈臺를 지키며 평생을 보냈다."),                                            # bare hanja
    ("zh", "米拉在GitHub上看到了这个项目，然后用Python写了一个脚本。"),
    ("ar", "فتحت ميرا تطبيق WhatsApp وأرسلت رسالة إلى حارس المنارة."),
    ("en", "灯塔孤零零地矗立在黑色的礁石上，白色的塔身还被夜雨打湿着。"),                         # a whole switch: the language check's
    ("pl", "Latarnia stoi samotnie — napis nad drzwiami głosi: Маяк."),                           # a gloss after a colon
])
def test_names_quotes_glosses_emoji_symbols_and_code_pass(lang, text):
    """Names, quoted foreign words, glosses, emoji, symbols and code do not trip the check."""
    result = _judge(text, lang)
    assert result.outcome == "pass", result


def test_a_quoted_word_is_exempt_but_dialogue_is_not():
    """A quote that is the foreign word is exempt; a line of dialogue with a foreign word inside is not."""
    assert _judge('He said "спасибо" and left the lighthouse at dawn.', "en").outcome == "pass"
    assert _judge('"I will keep the спасибо light burning," he said at dawn.', "en").reason == "foreign_script"


def test_emphasis_around_the_whole_action_is_not_a_quote():
    """Roleplay narration in asterisks holds the foreign run among English words: still a failure."""
    assert _judge("*Mira lifts the 灯 and waits by the window.*", "en").reason == "foreign_script"
    assert _judge("*Mira smiles.* 灯 *She waits by the window.*", "en").reason == "foreign_script"
    assert _judge("The old word *灯台* is carved over the door of the tower.", "en").outcome == "pass"


def test_the_foreign_script_fails_the_probe_and_asks_for_a_retest():
    """On the language probe the run fails the probe; foreign_script is a language anomaly (retried)."""
    from reverie_canary.shared.contract.events import LANGUAGE_ANOMALIES

    text = ("O farol ergue-se sozinho sobre as rochas escuras, com a torre branca ainda molhada da chuva. "
            "Lá embaixo o mar está cinzento e agitado, e as primeiras gaivotas 飞 voam sobre o porto.")
    result = evaluate(Reply(text=text, finish_reason="stop"), build("language", "pt").spec)
    assert (result.outcome, result.reason) == ("fail", "foreign_script")
    assert "foreign_script" in LANGUAGE_ANOMALIES


def test_the_structured_probe_is_not_judged_for_scripts():
    """A JSON value may name a place in its own script: the structured probe does not run the check."""
    reply = Reply(text='{"city": "東京", "temp_c": 21, "summary": "clear sky over the bay"}', finish_reason="stop")
    assert all(c.check != "script.foreign_runs" for c in evaluate(reply, build("structured", "en").spec).checks)


def test_mojibake_of_a_replacement_character_is_encoding():
    """``пїЅ`` is U+FFFD's UTF-8 read as cp1251: broken encoding, which ranks before the foreign script."""
    text = "Kejuaraan nasional III пїЅ 1992 diadakan di Bandung, dan jumlah peserta mencapai lima puluh orang."
    assert assess_encoding(text).evidence["defect"] == "replacement_mojibake"
    result = evaluate(Reply(text=text, finish_reason="stop"), build("language", "id").spec)
    assert result.reason == "encoding_broken"


def test_every_language_has_a_home_and_latin_is_allowed():
    """Each of the 17 has a home script; Latin (names, brands) is allowed in every one."""
    assert set(HOME) == set(LANGUAGES)
    assert all("latin" in ALLOWED[lang] and HOME[lang] <= ALLOWED[lang] for lang in LANGUAGES)
    assert script_counts("Aя灯あ한") == {"latin": 1, "cyrillic": 1, "han": 1, "kana": 1, "hangul": 1}


# -- item 6: a whole short reply in a foreign script --------------------------------------------------


@pytest.mark.parametrize("lang, text", [
    ("pt", "好的"), ("pt", "はい、わかりました"), ("en", "Да."), ("en", "好的。"), ("de", "네, 알겠습니다."),
    ("fr", "نعم"), ("es", "Конечно!"), ("zh", "はい"), ("ko", "はい"), ("ja", "네"), ("ru", "好的"),
    ("ar", "Да, конечно."), ("it", "हाँ"), ("tr", "ใช่"),
])
def test_a_short_reply_all_in_a_foreign_script_is_a_switch(lang, text):
    """A reply too short to detect, all in a script the language never uses, fails as language_switch."""
    result = assess_language(text, lang)
    assert (result.outcome, result.reason) == ("fail", "language_switch"), result.evidence
    assert result.evidence["short"] is True


@pytest.mark.parametrize("lang, text", [
    ("pt", "Sim."), ("pt", "Não!"), ("ja", "好的"), ("ja", "はい"), ("ru", "OK"), ("uk", "Да"), ("ru", "Так."),
    ("ar", "OK"), ("ko", "是"), ("en", "π"), ("en", "(ツ)"), ("en", "Mira."), ("zh", "好的"), ("en", "😊👍"),
    ("de", "Ja, 好"),
])
def test_a_short_reply_in_a_script_of_the_language_stays_inconclusive(lang, text):
    """Short replies in a script the language uses (or with a letter of it) stay inconclusive, as before (FP-04)."""
    result = assess_language(text, lang)
    assert (result.outcome, result.reason) == ("inconclusive", "too_short"), result.evidence


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40), st.sampled_from(LANGUAGES))
def test_short_text_with_a_letter_of_the_language_never_fails(text, lang):
    """Property (FP-04): fewer than 20 letters and one letter of a script the language uses: never a failure."""
    clean = strip_for_detection(text)
    counts = script_counts(clean)
    if sum(ch.isalpha() for ch in clean) < 20 and any(s in ALLOWED[lang] for s in counts):
        assert assess_language(text, lang).outcome != "fail"
    if short_reply_switch(clean, lang) is None and sum(ch.isalpha() for ch in clean) < 20:
        assert assess_language(text, lang).outcome != "fail"
