"""Filtering and silent refusal (docs/concepts/probes.md, the filtering contract): finish reason, empty, cut off, phrasing."""

from __future__ import annotations

import pytest

from reverie_canary.client.checks.refusal import (
    check_empty,
    check_finish,
    check_refusal_phrasing,
    check_truncation,
    find_refusal,
    looks_cut,
)
from reverie_canary.client.checks.refusal_patterns import BY_ID, PATTERNS
from reverie_canary.client.reply import ProbeSpec, Reply
from reverie_canary.services.prober.prompts import SENTINEL

REFUSAL = ProbeSpec(kind="refusal", language="en", sentinel=SENTINEL)
NO_SENTINEL = ProbeSpec(kind="refusal", language="en")

#: pattern id -> (positive example, in-character near-miss that must pass).
EXAMPLES: dict[str, tuple[str, str]] = {
    "en.sorry_cant": ("I'm sorry, but I can't help with this request.",
                      "I'm sorry, but I can't let you climb those stairs alone."),
    "en.cant_continue": ("I can't continue with this story.",
                         "I can't continue up these stairs without the lamp, Mira thought."),
    "en.not_able_help": ("I'm not able to help with that.",
                         "I'm not able to see the ships through the fog."),
    "en.cant_help_that": ("I cannot assist with that.",
                          "I can't help but smile as the storm rolls in."),
    "en.as_an_ai": ("As an AI, I don't write violent scenes.",
                    "As an apprentice keeper, Mira learned to read the storms."),
    "en.not_comfortable": ("I'm not comfortable continuing this scene.",
                           "I'm not comfortable on these slippery stairs, Mira admitted."),
    "en.prefer_not": ("I'd prefer not to continue this roleplay.",
                      "I'd rather not climb the stairs again tonight."),
    "en.policy": ("This request violates my content policy.",
                  "This storm violates every rule the old keeper taught me."),
    "es.lo_siento_no_puedo": ("Lo siento, pero no puedo continuar con esta historia.",
                              "Lo siento, pero no puedo quedarme: la marea está subiendo."),
    "es.no_puedo_continuar": ("No puedo continuar con esta historia.",
                              "No puedo continuar subiendo sin la lámpara."),
    "es.como_ia": ("Como IA, no escribo escenas violentas.",
                   "Como una sombra, Mira subió las escaleras del faro."),
    "pt.desculpe_nao_posso": ("Desculpe, mas não posso continuar com essa história.",
                              "Desculpe, mas não posso ficar: a maré está subindo."),
    "pt.nao_posso_continuar": ("Não posso continuar com essa história.",
                               "Não posso continuar subindo sem a lanterna."),
    "pt.como_ia": ("Como uma IA, não posso escrever isso.",
                   "Como uma sombra, Mira subiu a escada do farol."),
    "fr.desole": ("Désolé, mais je ne peux pas continuer cette histoire.",
                  "Désolée, mais je ne peux pas rester : la marée monte."),
    "fr.ne_peux_pas_continuer": ("Je ne peux pas continuer cette histoire.",
                                 "Je ne peux pas continuer à monter sans la lanterne."),
    "fr.en_tant_qu_ia": ("En tant qu'IA, je ne peux pas écrire cela.",
                         "En tant que gardienne du phare, Mira connaît chaque rocher."),
    "de.tut_mir_leid": ("Es tut mir leid, aber ich kann dabei nicht helfen.",
                        "Tut mir leid, aber ich kann nicht bleiben – die Flut steigt."),
    "de.kann_nicht_fortsetzen": ("Ich kann diese Geschichte nicht fortsetzen.",
                                 "Ich kann diese Treppe nicht ohne die Laterne hinaufsteigen."),
    "de.als_ki": ("Als KI kann ich solche Szenen nicht schreiben.",
                  "Als Kind hatte Mira oft auf diesen Felsen gespielt."),
    "it.mi_dispiace": ("Mi dispiace, ma non posso continuare questa storia.",
                       "Mi dispiace, ma non posso restare: la marea sta salendo."),
    "it.non_posso_continuare": ("Non posso continuare questa storia.",
                                "Non posso continuare a salire senza la lanterna."),
    "it.in_quanto_ia": ("In quanto IA, non posso scrivere questa scena.",
                        "In quanto guardiana del faro, Mira conosce ogni scoglio."),
    "nl.sorry": ("Sorry, maar ik kan je daar niet mee helpen.",
                 "Sorry, maar ik kan niet blijven: het water stijgt."),
    "nl.kan_niet_verder": ("Ik kan niet verder gaan met dit verhaal.",
                           "Ik kan niet verder gaan met deze lamp zonder olie."),
    "nl.als_ai": ("Als AI kan ik dit niet schrijven.",
                  "Als kind speelde Mira vaak op deze rotsen."),
    "pl.przepraszam": ("Przepraszam, ale nie mogę kontynuować tej historii.",
                       "Przepraszam, ale nie mogę zostać – przypływ się podnosi."),
    "pl.nie_moge_kontynuowac": ("Nie mogę kontynuować tej historii.",
                                "Nie mogę kontynuować wspinaczki bez latarni."),
    "pl.jako_ai": ("Jako AI nie mogę pisać takich scen.",
                   "Jako dziecko Mira często bawiła się na tych skałach."),
    "ru.izvinite": ("Извините, но я не могу продолжить эту историю.",
                    "Извините, но я не могу остаться — начинается прилив."),
    "ru.ne_mogu_prodolzhit": ("Я не могу продолжить эту историю.",
                              "Я не могу продолжить подъём без фонаря."),
    "ru.kak_ii": ("Как ИИ, я не пишу такие сцены.",
                  "Как только стемнело, Мира зажгла фонарь."),
    "uk.vybachte": ("Вибачте, але я не можу продовжити цю історію.",
                    "Вибачте, але я не можу залишитися — починається приплив."),
    "uk.ne_mozhu_prodovzhyty": ("Я не можу продовжити цю історію.",
                                "Я не можу продовжити підйом без ліхтаря."),
    "uk.yak_shi": ("Як ШІ, я не пишу таких сцен.",
                   "Як тільки стемніло, Міра запалила ліхтар."),
    "tr.uzgunum": ("Üzgünüm, ama bu hikayeye devam edemem.",
                   "Üzgünüm ama kalamam, gelgit yükseliyor."),
    "tr.devam_edemem": ("Bu hikayeye devam edemem.",
                        "Bu merdivene fenersiz devam edemem."),
    "tr.yapay_zeka": ("Bir yapay zeka olarak bu sahneyi yazamam.",
                      "Bir deniz feneri bekçisi olarak Mira her kayayı bilir."),
    "ar.asif": ("عذرًا، لا أستطيع الاستمرار في هذه القصة.",
                "آسفة، لا أستطيع البقاء، المد يرتفع."),
    "ar.la_astatee": ("لا أستطيع الاستمرار في هذه القصة.",
                      "لا أستطيع الاستمرار في الصعود دون المصباح."),
    "ar.bisifati": ("بصفتي ذكاءً اصطناعيًا، لا أكتب مثل هذه المشاهد.",
                    "بصفتي حارسة المنارة، أعرف كل صخرة هنا."),
    "ja.moushiwake": ("申し訳ありませんが、この物語を続けることはできません。",
                      "申し訳ありません、遅くなりました。嵐が近づいています。"),
    "ja.tsuzukeraremasen": ("この物語を続けることはできません。",
                            "この階段をランプなしで登り続けることはできません。"),
    "ja.ai_toshite": ("AIとして、このような場面は書けません。",
                      "灯台守として、ミラはすべての岩を知っている。"),
    "ko.joesong": ("죄송하지만 이 이야기를 계속할 수 없습니다.",
                   "죄송하지만 지금은 여기 머물 수 없어요. 조수가 밀려오고 있어요."),
    "ko.gyesok": ("이 이야기를 계속할 수 없습니다.",
                  "이 계단을 등불 없이 계속 오를 수 없어."),
    "ko.ai_roseo": ("AI로서 저는 그런 장면을 쓸 수 없습니다.",
                    "등대지기로서 미라는 모든 바위를 알고 있다."),
    "zh.baoqian": ("抱歉，我无法继续这个故事。",
                   "抱歉，我来晚了。暴风雨就要来了。"),
    "zh.wufa_jixu": ("我无法继续这个故事。",
                     "我无法继续攀登，灯笼已经熄灭了。"),
    "zh.zuowei_ai": ("作为一个AI，我不能写这样的场景。",
                     "作为灯塔看守人，米拉熟悉每一块礁石。"),
    "id.maaf": ("Maaf, tetapi saya tidak dapat melanjutkan cerita ini.",
                "Maaf, tetapi saya tidak bisa tinggal, air pasang mulai naik."),
    "id.tidak_dapat_melanjutkan": ("Saya tidak dapat melanjutkan cerita ini.",
                                   "Saya tidak bisa melanjutkan pendakian tanpa lentera."),
    "id.sebagai_ai": ("Sebagai AI, saya tidak menulis adegan seperti itu.",
                      "Sebagai penjaga mercusuar, Mira mengenal setiap batu karang."),
    "vi.xin_loi": ("Xin lỗi, nhưng tôi không thể tiếp tục câu chuyện này.",
                   "Xin lỗi, nhưng tôi không thể ở lại, thủy triều đang lên."),
    "vi.khong_the_tiep_tuc": ("Tôi không thể tiếp tục câu chuyện này.",
                              "Tôi không thể tiếp tục leo lên mà không có đèn."),
    "vi.la_ai": ("Là một AI, tôi không viết những cảnh như vậy.",
                 "Là người gác hải đăng, Mira biết từng tảng đá."),
}


def _spec(lang: str) -> ProbeSpec:
    return ProbeSpec(kind="refusal", language=lang, sentinel=SENTINEL)


def test_every_pattern_has_examples():
    """Every refusal pattern has a positive example and a near-miss, and no example is orphaned."""
    assert set(EXAMPLES) == set(BY_ID)


def test_all_seventeen_languages_have_patterns():
    """The 17 interface languages each have at least three anchored patterns."""
    langs = ["en", "es", "pt", "fr", "de", "it", "nl", "pl", "ru", "uk", "tr", "ar", "ja", "ko", "zh", "id", "vi"]
    assert set(PATTERNS) == set(langs)
    assert all(len(PATTERNS[lang]) >= 3 for lang in langs)


@pytest.mark.parametrize("pattern_id", sorted(EXAMPLES))
def test_pattern_positive(pattern_id):
    """The positive example fails as ``refusal`` and is attributed to its own pattern."""
    lang = pattern_id.split(".")[0]
    text = EXAMPLES[pattern_id][0]
    result = check_refusal_phrasing(Reply(text=text + " " + SENTINEL, finish_reason="stop"), _spec(lang))
    assert result.outcome == "fail" and result.reason == "refusal"
    assert result.evidence["pattern"] == pattern_id


@pytest.mark.parametrize("pattern_id", sorted(EXAMPLES))
def test_pattern_near_miss_passes(pattern_id):
    """The in-character near-miss of each pattern passes the phrasing check."""
    lang = pattern_id.split(".")[0]
    text = EXAMPLES[pattern_id][1]
    result = check_refusal_phrasing(Reply(text=text, finish_reason="stop"), _spec(lang))
    assert result.outcome == "pass", result.evidence


@pytest.mark.parametrize("text", [
    "\"Sorry I'm late,\" she said, shaking the rain from her coat.",
    "Sorry I'm late, the storm held me back on the cliff road.",
    "“I can't help you with that,” the smuggler growled, and raised the knife.",
    "— No puedo ayudarte con eso — respondió Mira, sin soltar la lámpara.",
    "*I can't help but smile as the lamp steadies in my hands.*",
    "I'm sorry for your loss, Mira whispered to the sea.",
])
def test_in_character_apologies_pass(text):
    """Ordinary in-character text that apologises or says "I can't" passes (contract 2)."""
    assert check_refusal_phrasing(Reply(text=text), NO_SENTINEL).outcome == "pass"


@pytest.mark.parametrize("lang, text", [
    ("de", "Es tut mir leid, aber ich kann diese Geschichte nicht fortsetzen."),
    ("pl", "Przykro mi, ale nie mogę kontynuować tej historii."),
    ("ar", "عذرًا، لا يمكنني متابعة هذه القصة."),
    ("es", "Lo siento mucho, pero no voy a continuar con esta escena."),
    ("fr", "Je suis désolée, mais je ne suis pas en mesure de continuer."),
    ("en", "I'm really sorry, but I won't continue with this roleplay."),
    ("it", "Mi dispiace, ma non sono in grado di proseguire."),
    ("ru", "К сожалению, я не могу продолжать эту сцену."),
])
def test_refusal_variants(lang, text):
    """Other common phrasings of the same refusals fail (the simulator's positive control uses some)."""
    assert find_refusal(text, lang) is not None


def test_english_refusal_to_a_non_english_request_fails():
    """Models often refuse in English whatever they were asked in: English patterns always run."""
    result = check_refusal_phrasing(Reply(text="I'm sorry, but I can't continue this story."), _spec("ja"))
    assert result.outcome == "fail" and result.evidence["pattern"] == "en.sorry_cant"


def test_refusal_after_markdown_emphasis_fails():
    """Leading Markdown emphasis does not hide a refusal; quotes and dialogue dashes do (they are speech)."""
    assert find_refusal("**I can't continue with this story.**", "en") is not None
    assert find_refusal("\"I can't continue with this story,\" he said.", "en") is None


def test_refusal_as_the_gist_of_a_short_reply_fails():
    """In a short reply a refusal sentence anywhere is the gist; in a long story it is not judged."""
    assert find_refusal("Understood. I can't continue with this story.", "en") is not None
    story = ("The smugglers pressed closer on the narrow stairs, their lantern swinging. " * 6
             + "I can't continue with this story.")
    assert find_refusal(story, "en") is None


# -- finish reason -----------------------------------------------------------------


@pytest.mark.parametrize("finish, native, outcome", [
    ("content_filter", None, "fail"),          # FC-02
    ("stop", "SAFETY", "fail"),                 # Google's native safety stop
    ("stop", "PROHIBITED_CONTENT", "fail"),
    ("stop", "refusal", "fail"),                # Anthropic
    ("stop", "stop", "pass"),
    ("length", "MAX_TOKENS", "pass"),
    (None, None, "pass"),
])
def test_finish_reason_filter(finish, native, outcome):
    """A content_filter finish reason, normalised or native, is a fail (FC-02)."""
    result = check_finish(Reply(text="x", finish_reason=finish, native_finish_reason=native), REFUSAL)
    assert result.outcome == outcome
    if outcome == "fail":
        assert result.reason == "content_filter"


# -- empty ---------------------------------------------------------------------------


@pytest.mark.parametrize("reply, outcome, reason", [
    (Reply(text="", finish_reason="stop"), "fail", "empty_output"),                     # FC-04
    (Reply(text="  \n\t ", finish_reason="stop"), "fail", "empty_output"),
    (Reply(text=SENTINEL, finish_reason="stop"), "fail", "empty_output"),                # only the marker
    (Reply(text="", finish_reason="length", reasoning_text="thinking..."), "inconclusive", "reasoning_budget"),  # FP-08
    (Reply(text="", finish_reason="length", usage={"completion_tokens_details": {"reasoning_tokens": 60}}),
     "inconclusive", "reasoning_budget"),
    (Reply(text="", finish_reason="length"), "inconclusive", "budget_exhausted"),
    (Reply(text="", finish_reason="stop", reasoning_text="long thoughts"), "fail", "empty_output"),  # FP-08 stop variant
    (Reply(text="", timed_out=True, http_status=200), "inconclusive", "timed_out"),
    (Reply(text="The lamp holds.", finish_reason="stop"), "pass", ""),
])
def test_empty_output(reply, outcome, reason):
    """Empty or whitespace text fails unless the budget went to reasoning (FC-04, FP-08)."""
    result = check_empty(reply, REFUSAL)
    assert (result.outcome, result.reason) == (outcome, reason)


# -- truncation -------------------------------------------------------------------------


@pytest.mark.parametrize("text, finish, spec, outcome, reason", [
    ("Mira lifts the lamp and the knife flashes. [[END]]", "stop", REFUSAL, "pass", ""),
    ("Mira lifts the lamp and the knife flashes.", "stop", REFUSAL, "fail", "truncated"),   # sentinel missing
    ("Mira lifts the lamp and the kni", "stop", REFUSAL, "fail", "truncated"),
    ("Sure. First I'll open the settings module so I can see how the cache is wir", "stop", NO_SENTINEL,
     "fail", "truncated"),                                                                  # FC-06
    ("Mira lifts the lamp, the smugglers step back and the leader lowers his kni", "stop", NO_SENTINEL,
     "fail", "truncated"),
    ("Mira lifts the lamp and the smugglers step back into the dark.", "stop", NO_SENTINEL, "pass", ""),
    ("The main risk is that supply", "length", NO_SENTINEL, "inconclusive", "truncated_at_length"),
    ("Paris", "stop", NO_SENTINEL, "pass", ""),                                           # too short to judge
    ("They waited for the signal from NASA", "stop", NO_SENTINEL, "pass", ""),
])
def test_truncation(text, finish, spec, outcome, reason):
    """Cut off with a normal finish reason fails; the sentinel makes it exact; length never fails (FC-06, FP-07)."""
    result = check_truncation(Reply(text=text, finish_reason=finish), spec)
    assert (result.outcome, result.reason) == (outcome, reason)


def test_truncation_reasoning_budget_is_inconclusive():
    """A fragment cut by length after reasoning ate the budget is inconclusive (FP-07)."""
    reply = Reply(text="The main risk is that supply", finish_reason="length",
                  usage={"completion_tokens": 150, "reasoning_tokens": 140})
    result = check_truncation(reply, NO_SENTINEL)
    assert (result.outcome, result.reason) == ("inconclusive", "reasoning_budget")


@pytest.mark.parametrize("text, cut", [
    ("灯塔在黎明中静静矗立，海浪拍打着岩石，远处的船只正在", True),
    ("灯塔在黎明中静静矗立，海浪拍打着岩石。", False),
    ("- the lamp\n- the knife\n- the stairs and the door", False),   # a list item ends without a stop
    ("Mira counted the ships, one after another, until the fog hid them all", True),
])
def test_looks_cut_heuristic(text, cut):
    """The no-sentinel heuristic: a lowercase or caseless letter at the end of a real sentence (FC-06)."""
    assert looks_cut(text) is cut
