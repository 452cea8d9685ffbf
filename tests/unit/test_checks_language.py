"""Language integrity (docs/concepts/probes.md, the language contract): switch, mixing, abstention; the detector comparison (``benchmarks/language_table.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.checks.language import (
    LANGUAGES,
    NEIGHBOURS,
    PARTNER,
    assess_language,
    check_language,
    rank,
    second_opinion,
)
from reverie_canary.client.checks.text import fold_homoglyphs, split_sentences, strip_for_detection
from reverie_canary.client.reply import ProbeSpec, Reply

#: A three-sentence reply to the language probe (prompts.DESCRIBE), per language.
PARAS: dict[str, str] = {
    "en": "The lighthouse stands alone on the black rocks, its white tower still wet from the night rain. Below it the sea is grey and restless, and the first gulls are circling over the harbour. Mira climbs the spiral stairs to put out the lamp before the sun rises.",
    "es": "El faro se alza solo sobre las rocas negras, con la torre blanca todavía mojada por la lluvia de la noche. A sus pies el mar está gris e inquieto, y las primeras gaviotas dan vueltas sobre el puerto. Mira sube la escalera de caracol para apagar la lámpara antes de que salga el sol.",
    "pt": "O farol ergue-se sozinho sobre as rochas escuras, com a torre branca ainda molhada da chuva da noite. Lá embaixo o mar está cinzento e agitado, e as primeiras gaivotas voam sobre o porto. Mira sobe a escada em caracol para apagar a lâmpada antes que o sol nasça.",
    "fr": "Le phare se dresse seul sur les rochers noirs, sa tour blanche encore mouillée par la pluie de la nuit. En contrebas, la mer est grise et agitée, et les premières mouettes tournent au-dessus du port. Mira monte l'escalier en colimaçon pour éteindre la lampe avant le lever du soleil.",
    "de": "Der Leuchtturm steht allein auf den schwarzen Felsen, sein weißer Turm ist noch nass vom nächtlichen Regen. Unter ihm ist das Meer grau und unruhig, und die ersten Möwen kreisen über dem Hafen. Mira steigt die Wendeltreppe hinauf, um die Lampe zu löschen, bevor die Sonne aufgeht.",
    "it": "Il faro si erge solitario sugli scogli neri, con la torre bianca ancora bagnata dalla pioggia della notte. Sotto di esso il mare è grigio e inquieto, e i primi gabbiani volteggiano sopra il porto. Mira sale la scala a chiocciola per spegnere la lampada prima che sorga il sole.",
    "nl": "De vuurtoren staat eenzaam op de zwarte rotsen, de witte toren nog nat van de regen van vannacht. Daaronder is de zee grijs en onrustig, en de eerste meeuwen cirkelen boven de haven. Mira klimt de wenteltrap op om de lamp te doven voordat de zon opkomt.",
    "pl": "Latarnia stoi samotnie na czarnych skałach, a jej biała wieża jest jeszcze mokra od nocnego deszczu. Pod nią morze jest szare i niespokojne, a pierwsze mewy krążą nad portem. Mira wspina się po krętych schodach, żeby zgasić lampę, zanim wzejdzie słońce.",
    "ru": "Маяк одиноко стоит на чёрных скалах, его белая башня ещё мокрая от ночного дождя. Внизу море серое и беспокойное, а первые чайки кружат над гаванью. Мира поднимается по винтовой лестнице, чтобы погасить лампу до восхода солнца.",
    "uk": "Маяк самотньо стоїть на чорних скелях, його біла вежа ще мокра від нічного дощу. Унизу море сіре й неспокійне, а перші чайки кружляють над гаванню. Міра піднімається гвинтовими сходами, щоб загасити лампу до сходу сонця.",
    "tr": "Deniz feneri kara kayaların üzerinde yapayalnız duruyor, beyaz kulesi hâlâ gece yağmurundan ıslak. Aşağıda deniz gri ve huzursuz, ilk martılar limanın üzerinde daireler çiziyor. Mira, güneş doğmadan lambayı söndürmek için döner merdivenleri tırmanıyor.",
    "ar": "تقف المنارة وحيدة على الصخور السوداء، وبرجها الأبيض ما زال مبللًا من مطر الليل. في الأسفل يبدو البحر رماديًا مضطربًا، وتحوم النوارس الأولى فوق الميناء. تصعد ميرا الدرج الحلزوني لتطفئ المصباح قبل شروق الشمس.",
    "ja": "灯台は黒い岩の上にひとりで立ち、白い塔はまだ夜の雨に濡れている。その下では海が灰色に波立ち、最初のカモメたちが港の上を旋回している。ミラは日が昇る前にランプを消すため、らせん階段を上っていく。",
    "ko": "등대는 검은 바위 위에 홀로 서 있고, 하얀 탑은 아직 밤비에 젖어 있다. 그 아래 바다는 잿빛으로 일렁이고, 첫 갈매기들이 항구 위를 맴돈다. 미라는 해가 뜨기 전에 등불을 끄려고 나선형 계단을 올라간다.",
    "zh": "灯塔孤零零地矗立在黑色的礁石上，白色的塔身还被夜雨打湿着。塔下的大海灰蒙蒙的，波涛起伏，第一批海鸥在港口上空盘旋。米拉沿着螺旋楼梯往上走，要在太阳升起之前把灯熄灭。",
    "id": "Mercusuar itu berdiri sendirian di atas batu karang hitam, menaranya yang putih masih basah oleh hujan semalam. Di bawahnya laut tampak kelabu dan gelisah, dan burung camar pertama berputar-putar di atas pelabuhan. Mira menaiki tangga melingkar untuk memadamkan lampu sebelum matahari terbit.",
    "vi": "Ngọn hải đăng đứng trơ trọi trên những tảng đá đen, tòa tháp trắng vẫn còn ướt vì cơn mưa đêm qua. Bên dưới, biển xám xịt và động, những con hải âu đầu tiên đang lượn vòng trên bến cảng. Mira leo lên cầu thang xoắn ốc để tắt đèn trước khi mặt trời mọc.",
}


def test_every_language_has_a_sample_and_a_partner():
    """The 17 languages each have a sample here and a partner language (PARTNER)."""
    assert set(PARAS) == set(LANGUAGES) == set(PARTNER)
    assert all(PARTNER[lang] in LANGUAGES and PARTNER[lang] != lang for lang in LANGUAGES)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_native_reply_passes(lang):
    """A clean reply in the requested language passes."""
    result = assess_language(PARAS[lang], lang)
    assert result.outcome == "pass", result.evidence


@pytest.mark.parametrize("lang", LANGUAGES)
def test_partner_language_reply_fails_as_switch(lang):
    """The same reply judged for its partner language (es<->pt, ru<->uk, zh<->ja ...) is a switch (FC-19's kind)."""
    result = assess_language(PARAS[lang], PARTNER[lang])
    assert (result.outcome, result.reason) == ("fail", "language_switch"), result.evidence
    assert result.evidence["second_opinion"][0][0] != PARTNER[lang]


def test_fc19_english_request_answered_in_chinese():
    """FC-19: an English conversation answered entirely in Chinese fails as a switch."""
    result = assess_language("简单来说，相对论告诉我们时间和空间会随着观察者的运动而改变。", "en")
    assert (result.outcome, result.reason) == ("fail", "language_switch")
    assert result.evidence["detected"][0][0] == "zh"


@pytest.mark.parametrize("expected, text", [
    ("pt", "Vou aplicar a correção and then restart the server para validar."),                      # FC-20
    ("pt", "Claro! O horário de funcionamento é das 9h às 18h, pero los sábados abrimos solamente por la mañana."),  # FC-20b
    ("es", "Claro, el faro abre a las nueve de la mañana, mas não temos ingressos para você hoje nem amanhã."),
    ("fr", "Mira monte l'escalier du phare, and then she looks at the ships that are waiting in the harbour."),
    ("en", "The lighthouse stands alone on the black rocks. 灯塔孤零零地矗立在黑色的礁石上，白色的塔身还被夜雨打湿着。 "
           "The first gulls circle over the harbour."),
    ("de", "Der Leuchtturm steht allein auf den schwarzen Felsen. The sea below is grey and restless, and the first "
           "gulls are circling over the harbour. Mira steigt die Wendeltreppe hinauf."),
    ("ru", "Маяк одиноко стоит на чёрных скалах, его белая башня ещё мокрая от ночного дождя. "
           "Унизу море сіре й неспокійне, а перші чайки кружляють над гаванню."),
    ("ja", "灯台は黒い岩の上にひとりで立ち、白い塔はまだ夜の雨に濡れている。그 아래 바다는 잿빛으로 일렁이고, 첫 갈매기들이 항구 위를 맴돈다."),
])
def test_mixing_fails_as_mix(expected, text):
    """A second language in a clause or sentence (>= 20 % of labelled letters) is a mix (FC-20, FC-20b and kin)."""
    result = assess_language(text, expected)
    assert (result.outcome, result.reason) == ("fail", "language_mix"), result.evidence
    assert result.evidence["shares"][expected] >= 0.2


@pytest.mark.parametrize("expected, text", [
    ("pt", "Para reiniciar, rode `systemctl restart nginx` e confira o endpoint /health no dashboard de monitoring."),  # FP-03
    ("en", 'Mira whispered "je ne sais quoi" and smiled at the old captain, who only shrugged and turned back to the sea.'),
    ("pt", "Ela leu a placa da Plaza de la Constitución e seguiu em direção ao porto, onde os pescadores já preparavam as redes."),
    ("de", "Mira las das alte Buch (The Lighthouse Keeper and the Sea) bis spät in die Nacht, während draußen der Sturm tobte."),
    ("pt", "Para testar, rode este código:\n```python\nfor ship in harbour.ships:\n    print(ship.name, 'is waiting')\n```\n"
           "Depois confira o resultado no terminal e me avise se algo der errado."),
    ("es", "Puedes escribirme a mira@faro.example o visitar https://faro.example/horarios para ver los horarios del faro."),
    ("fr", "Mira ouvre le fichier src/phare/lampe.py, modifie la variable LAMP_POWER et relance le service avant l'aube."),
])
def test_loanwords_code_quotes_and_single_phrases_pass(expected, text):
    """Code spans, URLs, paths, e-mails, quoted names and one foreign phrase never fail (FP-03)."""
    result = assess_language(text, expected)
    assert result.outcome == "pass", result.evidence


@pytest.mark.parametrize("text", ["Sim.", "Não!", "OK", "Mira.", "sim sim", "quebrar centralismo", "Ok, 好的"])
def test_too_short_is_inconclusive(text):
    """Below 20 letters or 3 words the check abstains (FP-04): inconclusive, never fail.

    Unless every letter is in a script the language never uses (``好的`` to a
    Portuguese request): tests/unit/test_checks_scripts.py.
    """
    result = assess_language(text, "pt")
    assert (result.outcome, result.reason) == ("inconclusive", "too_short")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40), st.sampled_from(LANGUAGES))
def test_short_text_never_fails(text, lang):
    """Property: text with fewer than 20 letters after stripping never fails, unless it is all in a foreign script."""
    from reverie_canary.client.checks.scripts import short_reply_switch

    clean = strip_for_detection(text)
    if sum(ch.isalpha() for ch in clean) < 20:
        result = assess_language(text, lang)
        assert result.outcome != "fail" or (result.reason == "language_switch" and result.evidence["short"]
                                            and short_reply_switch(clean, lang) is not None)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(PARAS)), st.sampled_from(LANGUAGES))
def test_outcome_is_deterministic(sample, expected):
    """The same text and request always give the same result (seeded langdetect, deterministic py3langid)."""
    text = PARAS[sample]
    assert assess_language(text, expected) == assess_language(text, expected)


@pytest.mark.parametrize("expected, text", [
    ("es", "El far s'alça tot sol sobre les roques negres, amb la torre blanca encara molla de la pluja de la nit. "
           "A sota, el mar és gris i inquiet, i les primeres gavines volen en cercles sobre el port."),       # Catalan
    ("nl", "Die vuurtoring staan alleen op die swart rotse, sy wit toring is nog nat van die reën van die nag. "
           "Onder hom is die see grys en onrustig, en die eerste seemeeue sirkel oor die hawe."),             # Afrikaans
    ("id", "Kerajaan negeri telah memberi peruntukan kepada jabatan untuk membaiki rumah api tersebut kerana ia amat "
           "penting. Pegawai daripada syarikat itu berkata bahawa kerja-kerja akan siap selepas bulan Disember."),  # Malay
])
def test_look_alike_neighbour_winning_is_inconclusive(expected, text):
    """A look-alike neighbour winning (Catalan for es, Afrikaans for nl, Malay for id) is inconclusive, never fail."""
    result = assess_language(text, expected)
    assert (result.outcome, result.reason) == ("inconclusive", "neighbour"), result.evidence


#: Indonesian/Malay, the one neighbour pair the detector cannot separate: the
#: distinguishing words (markers.DISTINGUISHING) decide when the two are close.
_ID_LIGHTHOUSE = ("Mercusuar itu berdiri sendirian di atas batu karang hitam, menaranya yang putih masih basah {why} "
                  "hujan semalam. Mira menaiki tangga melingkar untuk memadamkan lampu sebelum matahari terbit{tail}.")


@pytest.mark.parametrize("text, outcome, top, vocabulary", [
    # Indonesian that the detector gives to Malay by a little: an Indonesian-only word decides
    ("Sebenarnya mereka menemukan seorang anak muda yang pingsan di tepi sungai. Kedua kawannya menarik nafas "
     "panjang ketika dinding bambu pondok itu telah runtuh.", "pass", "ms", {"id": ["menemukan"], "ms": []}),
    # ... and without any distinguishing word it stays inconclusive
    ("Para pemimpin kerajaan masih berpijak kepada kenyataan akan keterbatasan seseorang. Baru kemudian, setelah "
     "perut mereka terisi, pasukan itu berangkat ke selatan.", "inconclusive", "ms", None),
    # Malay words in a reply the detector gives to Indonesian: not a pass
    (_ID_LIGHTHOUSE.format(why="oleh", tail=", iaitu sebelum pukul enam"), "inconclusive", "id",
     {"id": [], "ms": ["iaitu"]}),
    (_ID_LIGHTHOUSE.format(why="kerana", tail=""), "inconclusive", "ms", {"id": [], "ms": ["kerana"]}),
    # words of both standards: the vocabulary does not decide, the detector does
    (_ID_LIGHTHOUSE.format(why="kerana", tail=", karena ia bisa"), "pass", "id",
     {"id": ["bisa", "karena"], "ms": ["kerana"]}),
])
def test_indonesian_and_malay_are_told_apart_by_their_distinguishing_words(text, outcome, top, vocabulary):
    result = assess_language(text, "id")
    assert result.outcome == outcome, result.evidence
    assert result.reason == ("" if outcome == "pass" else "neighbour")
    assert result.evidence["detected"][0][0] == top
    assert result.evidence.get("vocabulary") == vocabulary


def test_one_sentence_close_to_malay_stays_inconclusive_whatever_its_words():
    """Distinguishing words never replace the two-sentence corroboration rule."""
    text = "Sebenarnya mereka menemukan seorang anak muda yang pingsan di tepi sungai yang dingin itu."
    result = assess_language(text, "id")
    assert (result.outcome, result.reason) == ("inconclusive", "neighbour"), result.evidence


def test_neighbours_are_known_to_the_detector():
    """Every configured neighbour is a label the restricted detector can output."""
    labels = {lang for lang, _ in rank("The lighthouse stands on the rocks at dawn.")}
    for near in NEIGHBOURS.values():
        assert set(near) <= labels


def test_second_opinion_is_seeded_and_restricted():
    """langdetect gives the same answer twice and maps zh-cn/zh-tw to zh."""
    first = second_opinion(PARAS["zh"])
    assert first == second_opinion(PARAS["zh"])
    assert first[0][0] == "zh"


def test_ukrainian_with_latin_i_homoglyphs_passes():
    """Ukrainian written with Latin ``i`` inside Cyrillic words is folded, not read as noise."""
    text = "Майдан обведений глибоким ровом i крiпким частоколом. Кругом його декiлька iнших шатер для старшин."
    assert fold_homoglyphs(text).count("i") == 0
    assert assess_language(text, "uk").outcome == "pass"


@pytest.mark.parametrize("text, expected", [
    ("One. Two! Three? Four…  Five", ["One.", "Two!", "Three?", "Four…", "Five"]),
    ("灯塔。大海！海鸥？", ["灯塔。", "大海！", "海鸥？"]),
    ("Line one\nLine two", ["Line one", "Line two"]),
])
def test_sentence_split(text, expected):
    """Sentences split on . ! ? … plus space, CJK stops and newlines."""
    assert split_sentences(text) == expected


@pytest.mark.parametrize("text, gone", [
    ("veja `x = 1` aqui", "x = 1"),
    ("veja https://example.org/a?b=1 aqui", "example"),
    ("escreva para a@b.com hoje", "a@b.com"),
    ("abra /etc/nginx/nginx.conf agora", "nginx"),
    ("às 18h30 de 2024", "18"),
    ("a variável LAMP_POWER muda", "LAMP_POWER"),
    ("texto [[END]]", "END"),
])
def test_strip_for_detection_removes_non_prose(text, gone):
    """Code, URLs, e-mails, paths, numbers, identifiers and the sentinel are stripped (the detector comparison, ``benchmarks/language_table.py``)."""
    assert gone not in strip_for_detection(text)


def test_unsupported_language_is_inconclusive():
    """A request language outside the 17 is not judged."""
    assert assess_language(PARAS["en"], "xx").reason == "unsupported_language"
    assert assess_language(PARAS["en"], None).outcome == "inconclusive"


def test_check_language_reads_the_spec():
    """check_language judges reply.text against spec.language."""
    spec = ProbeSpec(kind="language", language="de")
    assert check_language(Reply(text=PARAS["de"]), spec).outcome == "pass"
    assert check_language(Reply(text=PARAS["nl"]), spec).outcome == "fail"
