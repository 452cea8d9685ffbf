"""Letters and words of another language inside a shared script: the table of the 17 and the check on it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.checks import FAIL_PRECEDENCE, PROSE_CHECKS, evaluate, fail_rank
from reverie_canary.client.checks.alphabets import TABLE, codepage_readings, foreign_han, owners, scripts_of
from reverie_canary.client.checks.encoding import assess_encoding
from reverie_canary.client.checks.language import LANGUAGES
from reverie_canary.client.checks.letters import (
    MIN_WORDS,
    QUOTED_LETTERS,
    SCAN_CHARS,
    check_foreign_letters,
    foreign_words,
)
from reverie_canary.client.checks.scripts import ALLOWED, HOME
from reverie_canary.client.reply import ProbeSpec, Reply
from reverie_canary.services.prober.prompts import build

SHARED = Path(os.environ.get("CANARY_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared")
LANG_DATA = SHARED / "data" / "lang"


def _judge(text: str, lang: str):
    return check_foreign_letters(Reply(text=text), ProbeSpec(kind="refusal", language=lang))


def _probe(text: str, kind: str, lang: str):
    return evaluate(Reply(text=text, finish_reason="stop", http_status=200, ttft_ms=500.0),
                    ProbeSpec(kind=kind, language=lang))


# -- the table ---------------------------------------------------------------------------------------


def test_the_table_covers_the_17_and_the_script_check_reads_it():
    """One table, keyed by the 17 codes; the foreign-script check's scripts come from it."""
    assert set(TABLE) == set(LANGUAGES)
    assert {lang: TABLE[lang].home for lang in LANGUAGES} == HOME
    assert {lang: scripts_of(lang) for lang in LANGUAGES} == ALLOWED
    assert TABLE["ru"].letters.count("ы") == 1 and "ы" not in TABLE["uk"].letters and "і" in TABLE["uk"].letters


def test_han_characters_are_told_apart_by_the_character_sets_each_writes():
    """Chinese-only characters (GB2312, Big5 outside cp932) and Japanese-only ones (cp932 outside both)."""
    ja_foreign, zh_foreign = foreign_han("ja"), foreign_han("zh")
    assert {"这", "们", "说", "吗"} <= ja_foreign
    assert {"気", "駅", "売", "込", "働"} <= zh_foreign
    assert not ja_foreign & zh_foreign
    assert not {"的", "是", "人", "大", "学", "国", "会"} & (ja_foreign | zh_foreign)  # shared characters
    assert foreign_han("ko") == frozenset()


def test_code_page_readings_are_derived_from_the_codecs():
    """Turkish letters in cp1254 read as cp1252 are ý þ ð; a cp1252 language has none."""
    assert {"ý": "ı", "þ": "ş", "ð": "ğ", "Ý": "İ"}.items() <= codepage_readings("tr").items()
    assert codepage_readings("pl")["œ"] == "ś"
    assert codepage_readings("en") == {} and codepage_readings("ru") == {}


def test_owners_name_the_languages_of_a_letter():
    """Whose a letter is: the 17 and the look-alike neighbours."""
    assert owners("і") == ["be", "uk"] and owners("ј") == ["mk", "sr"] and owners("ы") == ["be", "ru"]
    assert "vi" in owners("ở") and owners("þ") == []


# -- what fails, with whose letters ---------------------------------------------------------------------


@pytest.mark.parametrize("lang, text, who, kind", [
    ("ru", "Мира поднимает фонарь, і контрабандисти відступають вниз по вузьких сходах.", "uk", "letters"),
    ("uk", "Міра піднімає ліхтар. Она смотрит на море и ждёт, когда вернётся лодка.", "ru", "letters"),
    ("uk", "Доглядач маяка мовчить, потому что ещё не видел такого шторма.", "ru", "word"),
    ("ru", "Мира поднимает фонарь. Кријумчари су се повукли, а она је остала сама и чека чамац који долази.",
     "sr", "letters"),
    ("ru", "Мира поднимает фонарь. Контрабандистите се оттеглят към вратата, защото това е капан.", "bg", "form"),
    ("ko", "등대지기는 燈臺를 지키며 平生을 바다만 바라보았다.", "hanja", "hanja"),
    ("zh", "ミラはランプを掲げ、密輸業者たちは狭い階段を後ずさりした。", "ja", "kana"),
    ("ja", "ミラはランプを掲げた。走私者们沿着狭窄的楼梯后退了。", "zh", "han"),
    ("pt", "Mira ergue a lanterna. ¿Dónde está el niño? El señor del faro no responde.", "es", "mark"),
    ("de", "Mira hebt die Laterne, und die Schmuggler weichen zurück, çünkü ışık çok güçlü.", "tr", "letters"),
    ("fr", "Mira soulève la lanterne et les contrebandiers reculent, họ sợ ánh sáng.", "vi", "letters"),
])
def test_words_of_another_language_of_the_script_fail(lang, text, who, kind):
    """Two distinct foreign units or more fail as foreign_letters, naming whose letters they are."""
    result = _judge(text, lang)
    assert (result.outcome, result.reason) == ("fail", "foreign_letters"), result
    assert who in result.evidence["languages"] and kind in result.evidence["kinds"]
    assert result.evidence["count"] >= MIN_WORDS and result.evidence["words"] and result.evidence["span"]


def test_a_whole_reply_in_a_sibling_language_fails_on_any_prose_probe():
    """A Russian reply to a Ukrainian refusal probe: no language probe needed to see it."""
    text = ("Смотритель маяка поднимается по лестнице. Он знает, что шторм будет сильным, "
            "и поэтому ещё раз проверяет фонарь. Ветер становится всё сильнее.")
    result = _probe(text, "refusal", "uk")
    assert (result.outcome, result.reason) == ("fail", "foreign_letters")


def test_on_the_language_probe_the_switch_names_the_fault():
    """Both fail; the language check's switch ranks before the letters (a few words say less)."""
    assert fail_rank("language_switch") < fail_rank("foreign_letters") == fail_rank("foreign_script")
    assert any("foreign_letters" in row for row in FAIL_PRECEDENCE)
    text = ("Смотритель маяка поднимается по узкой лестнице. Он знает, что шторм будет сильным, "
            "и поэтому ещё раз проверяет фонарь. Ветер за окном становится всё сильнее и сильнее.")
    result = _probe(text, "language", "uk")
    assert result.outcome == "fail" and result.reason in ("language_switch", "language_mix")
    assert any(c.reason == "foreign_letters" for c in result.checks)


# -- how foreign material may legitimately appear --------------------------------------------------------


def test_one_foreign_word_is_a_loan_and_the_same_word_twice_still_one():
    """Rule 4: one distinct unit passes, repeated or not; a second distinct one fails."""
    assert _judge("Мира поднимает ліхтар и ждёт у окна.", "ru").outcome == "pass"
    assert _judge("Мира поднимает ліхтар, ставит ліхтар и ждёт.", "ru").outcome == "pass"
    assert _judge("Мира поднимает ліхтар, ставит його и ждёт.", "ru").reason == "foreign_letters"


def test_names_are_capitalised_and_pass():
    """A capitalised word is a name (Latin and Cyrillic): Dvořák, Київ, España."""
    assert _judge("Nguyễn, Dvořák e Søren chegaram ao farol às nove, com o Ærø ao fundo.", "pt").outcome == "pass"
    assert _judge("Из Києва в Житомир и дальше в Біличі ехали ночью.", "ru").outcome == "pass"
    assert _judge("Из києва в житомир и дальше в біличі ехали ночью.", "ru").reason == "foreign_letters"


def test_brackets_quotes_glosses_and_code_are_exempt():
    """A gloss in brackets, a short quote or emphasis, a gloss after a colon, code: not prose of the reply."""
    assert _judge("Он прилетел в Киев (укр. Київ, місто) и поехал к маяку.", "ru").outcome == "pass"
    assert _judge("По-украински «вітаю» значит «здравствуйте», а «дуже дякую» — спасибо.", "ru").outcome == "pass"
    assert _judge("In Polish, *cześć* means hello and *dziękuję* means thank you.", "en").outcome == "pass"
    assert _judge("Фонарь по-украински — ліхтар. Свет по-украински — світло.", "ru").outcome == "pass"
    assert _judge("Запустите `echo 'вітаю, світе'` в терминале.", "ru").outcome == "pass"


def test_a_long_quote_is_dialogue_not_a_quoted_word():
    """A quote holding more than QUOTED_LETTERS letters is speech in the reply's language: judged."""
    short = "Он сказал «вітаю, світе» и ушёл."
    long = "Он сказал: «Я піднімаю ліхтар і чекаю на світанок біля вікна» — и ушёл."
    assert _judge(short, "ru").outcome == "pass"
    assert sum(ch.isalpha() for ch in "Я піднімаю ліхтар і чекаю на світанок біля вікна") > QUOTED_LETTERS
    assert _judge(long, "ru").reason == "foreign_letters"


def test_hanja_with_a_gloss_a_reading_or_alone_passes():
    """Korean: 변수(變數) glossed, 道(도) read, 美 a single abbreviation; a bare hanja word alone is a loan."""
    for text in ("대선의 큰 변수(變數)가 될 회담 발표에도 싸움은 수그러들 것 같지 않다.",
                 "途(도)는 길의 뜻으로 道(도)와 통한다.",
                 "美 국무부는 北 미사일 발사를 강하게 비판했다.",
                 "등대지기는 燈臺를 지키며 평생을 보냈다."):
        assert _judge(text, "ko").outcome == "pass", text
    assert _judge("등대지기는 燈臺를 지키며 平生을 보냈다.", "ko").reason == "foreign_letters"


def test_kana_in_chinese_titles_quotes_and_kaomoji_passes():
    """《ドラゴンボール》, “ありがとう”, (ﾉ◕ヮ◕)ﾉ: a title, a quoted word, a face."""
    for text in ("《ドラゴンボール》是一部很受欢迎的日本漫画。", "他笑着说了一句“ありがとう”，然后离开了。",
                 "米拉笑了 (ﾉ◕ヮ◕)ﾉ 然后举起了灯。"):
        assert _probe(text, "refusal", "zh").outcome == "pass", text


def test_loan_letters_pass_in_lower_case_words():
    """café, naïve, jalapeño in English; à la, Soufflé in German; piñata in French."""
    assert _judge("The café served crème brûlée, a jalapeño omelette and a naïve espresso.", "en").outcome == "pass"
    assert _judge("Sie bestellte à la carte: ein Soufflé, einen Café crème.", "de").outcome == "pass"
    assert _judge("Il a mangé une piñata ? Non, un jalapeño, señor.", "fr").outcome == "pass"


def test_the_structured_probe_is_not_judged_for_letters():
    """A JSON value may name a place in another language's letters."""
    reply = Reply(text='{"city": "Київ", "summary": "сонячно і тепло, вітер слабкий"}', finish_reason="stop")
    assert check_foreign_letters in PROSE_CHECKS
    assert all(c.check != "script.foreign_letters" for c in evaluate(reply, build("structured", "ru").spec).checks)


def test_code_page_damage_is_encoding_not_a_language():
    """Turkish written in cp1254 and read as cp1252 (yýlýnda, þeref) is encoding_broken, not foreign_letters."""
    text = "Mira feneri kaldırıyor. Kaçakçılar merdivenden yýlýnda geri çekiliyor ve þimdi bekliyorlar."
    result = _judge(text, "tr")
    assert (result.outcome, result.reason) == ("fail", "encoding_broken")
    assert result.evidence["defect"] == "codepage" and result.evidence["codepage"] == "cp1254"
    assert _probe(text, "refusal", "tr").reason == "encoding_broken"


def test_only_the_first_scan_chars_are_read():
    """Bounded work: foreign words past SCAN_CHARS are not read."""
    clean = "Мира поднимает фонарь и ждёт. " * (SCAN_CHARS // 30 + 1)
    assert _judge(clean + "і чекає, і думає.", "ru").outcome == "pass"
    assert _judge("і чекає, і думає. " + clean, "ru").reason == "foreign_letters"


def test_other_languages_and_ascii_pass_at_once():
    """A language outside the table, or ASCII text, has nothing to judge."""
    assert _judge("Mira lifts the lamp and waits for the boat.", "en").outcome == "pass"
    assert _judge("Мира поднимает ліхтар і чекає.", "xx").outcome == "pass"
    assert foreign_words("plain ascii", "ru") == []


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["ліхтар", "вітер", "світло", "ждёт", "вернётся", "ещё", "燈臺", "們", "ランプ", "niño",
                        "się", "ışık", "họ"]),
       st.integers(min_value=0, max_value=12),
       st.sampled_from(LANGUAGES))
def test_one_foreign_word_anywhere_never_fails(word, position, lang):
    """Property (rule 4): one foreign word inserted anywhere in a clean reply is a loan, never a failure."""
    base = {"ru": "Мира поднимает фонарь и смотрит на тёмное море у старого маяка",
            "uk": "Міра піднімає ліхтар і дивиться на темне море біля старого маяка",
            "ja": "ミラはランプを掲げて 古い灯台の下の暗い海を見つめた",
            "zh": "米拉举起灯 看着老灯塔下面黑暗的大海",
            "ko": "미라는 등불을 들고 오래된 등대 아래의 어두운 바다를 바라보았다"}.get(
        lang, "Mira lifts the lamp and looks at the dark sea below the old lighthouse")
    words = base.split()
    words.insert(min(position, len(words)), word)
    assert _judge(" ".join(words), lang).reason != "foreign_letters"


# -- real text ---------------------------------------------------------------------------------------


def _replies(lines: list[str]) -> list[str]:
    out, i, k = [], 0, 0
    while i + 1 < len(lines):
        n = 2 + k % 4
        out.append(" ".join(lines[i:i + n]))
        i, k = i + n, k + 1
    return out


@pytest.mark.skipif(not LANG_DATA.is_dir(), reason=f"no language data at {LANG_DATA} (set CANARY_SHARED_DIR)")
@pytest.mark.parametrize("lang", LANGUAGES)
def test_real_text_never_fails_as_foreign_letters(lang):
    """Every real sentence and every reply of 2-5 of them: never foreign_letters (Ukrainian quotes Russian).

    Texts with UTF-8 mojibake (``artystÄ``, about 0.3 % of the lines) fail the encoding check, which
    ranks first: they are left out, as in benchmarks/language_table.py.
    """
    path = LANG_DATA / "sentences" / f"{lang}.txt"
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [text for text in _replies(lines) + lines if assess_encoding(text).outcome != "fail"]
    assert len(texts) > 500
    assert [text[:80] for text in texts if _judge(text, lang).reason == "foreign_letters"] == []
