"""High-confidence refusal phrasing in the 17 languages (docs/concepts/probes.md, the filtering contract).

Each pattern is anchored: it must match at the start of the reply (after
whitespace and Markdown emphasis, never after a quote or a dialogue dash) or,
in a short reply, at the start of one of its sentences (the reply's gist).
A pattern names what a *model* says when it will not write the scene ("I
can't continue with this story", "As an AI", "I'm not able to help with
that"), never what a character may say in the scene: apologies alone ("Sorry
I'm late"), "I can't" alone ("I can't help but smile", "I can't stay") and
"As a ..." alone ("As a child ...") do not match.  Every pattern has a
positive example and an in-character near-miss in
``tests/unit/test_checks_refusal.py``.

The request language's patterns run, plus English: models often refuse in
English whatever language they were asked in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class RefusalPattern:
    """One anchored refusal phrase.

    Attributes:
        id: stable id ``<lang>.<name>`` (reported as evidence).
        language: ISO 639-1 code.
        regex: compiled, case-insensitive, matched with ``re.match``.
    """

    id: str
    language: str
    regex: re.Pattern[str]


_I = re.IGNORECASE

# English building blocks
_EN_CANT = r"(?:can't|cannot|can not|won't|will not|am not able to|'m not able to|am unable to|'m unable to)"
_EN_WORK = r"(?:story|roleplay|role-play|role play|scene|request|conversation|content|narrative|prompt|scenario)"

_RAW: dict[str, list[tuple[str, str]]] = {
    "en": [
        ("sorry_cant", rf"(?:I'm|I am) (?:so |really |very )?sorry,? (?:but )?I {_EN_CANT} "
                       r"(?:help|assist|continue|comply|fulfil|fulfill|provide|create|write|generate|engage|produce|do that)\b"),
        ("cant_continue", rf"I {_EN_CANT} (?:continue|write|create|generate|produce|engage in|participate in|"
                          rf"help with|assist with|help you with|assist you with|go on with|proceed with)"
                          rf"(?: with)? (?:this|that|the|your|such)(?: \w+)? {_EN_WORK}\b"),
        ("not_able_help", r"I(?:'m| am) (?:not able|unable) to (?:help|assist)(?: you)? with (?:that|this)\b"),
        ("cant_help_that", r"I (?:can't|cannot|can not) (?:help|assist)(?: you)? with (?:that|this)(?: request)?\s*[.!]"),
        ("as_an_ai", r"As an AI\b"),
        ("not_comfortable", r"I(?:'m| am) not comfortable (?:continuing|writing|creating|engaging|producing|"
                            r"generating|with (?:this|that|the) " + _EN_WORK + r")\b"),
        ("prefer_not", rf"I(?:'d| would) (?:prefer|rather) not (?:to )?(?:continue|write|engage)"
                       rf"(?: with| in)? (?:this|that|the|your) {_EN_WORK}\b"),
        ("policy", rf"(?:This|That|Your) {_EN_WORK} (?:violates|goes against|is against|breaches) "
                   r"(?:my|our|the|OpenAI's|Anthropic's|Google's)? ?(?:content |usage |safety )?"
                   r"(?:guidelines|policy|policies|rules)\b"),
    ],
    "es": [
        ("lo_siento_no_puedo", r"(?:Lo siento(?: mucho)?|Disculpa|Disculpe|Perdón),? (?:pero )?no "
                               r"(?:puedo|me es posible|estoy en condiciones de|voy a) "
                               r"(?:ayudar|ayudarte|continuar|seguir|crear|escribir|generar|cumplir|participar|"
                               r"proporcionar|hacer eso|colaborar)\b"),
        ("no_puedo_continuar", r"No (?:puedo|voy a|me es posible) (?:continuar|seguir|escribir|crear|generar|"
                               r"participar en|ayudar con|ayudarte con)(?: con)? (?:esta|este|esa|ese|tu|su|la|el) "
                               r"(?:historia|relato|escena|solicitud|petición|juego de rol|rol|conversación|"
                               r"contenido|narración)\b"),
        ("como_ia", r"Como (?:una )?(?:IA|inteligencia artificial|modelo de lenguaje|asistente de IA)\b"),
    ],
    "pt": [
        ("desculpe_nao_posso", r"(?:Desculpe|Desculpa|Lamento|Sinto muito),? (?:mas )?(?:eu )?não "
                               r"(?:posso|consigo|tenho como|vou) (?:ajudar|continuar|seguir|criar|escrever|gerar|"
                               r"atender|participar|fazer isso|colaborar)\b"),
        ("nao_posso_continuar", r"(?:Eu )?[Nn]ão (?:posso|vou|consigo) (?:continuar|seguir com|escrever|criar|gerar|"
                                r"participar d[aeo]|ajudar com)(?: com)? (?:essa|esta|este|esse|sua|seu|a|o) "
                                r"(?:história|historia|cena|solicitação|pedido|roleplay|conversa|conteúdo|narrativa)\b"),
        ("como_ia", r"Como (?:uma )?(?:IA|inteligência artificial|modelo de linguagem|assistente de IA)\b"),
    ],
    "fr": [
        ("desole", r"(?:Je suis )?[Dd]ésolée?,? (?:mais )?je ne (?:peux|pourrai|suis|vais) pas "
                   r"(?:en mesure de )?(?:vous |t')?(?:aider|continuer|poursuivre|écrire|créer|générer|participer|"
                   r"répondre à cette demande)\b"),
        ("ne_peux_pas_continuer", r"Je ne (?:peux|vais|suis) pas (?:en mesure de )?(?:continuer|poursuivre|écrire|créer|"
                                  r"générer|participer à|vous aider avec|t'aider avec) (?:cette|ce|cet|votre|ta|ton|la|le) "
                                  r"(?:histoire|récit|scène|demande|jeu de rôle|conversation|contenu)\b"),
        ("en_tant_qu_ia", r"En tant qu(?:e |')(?:IA|intelligence artificielle|modèle de langage|assistant IA)\b"),
    ],
    "de": [
        ("tut_mir_leid", r"(?:Es )?[Tt]ut mir (?:sehr )?leid,? (?:aber )?(?:ich kann|das kann ich) "
                         r"(?:dir |Ihnen )?(?:dabei |hier |damit |bei dieser Anfrage |(?:diese|die|deine|Ihre|eine solche) "
                         r"(?:Geschichte|Szene|Anfrage|Rollenspiel|Unterhaltung|Erzählung|Inhalte?) )?(?:leider )?nicht "
                         r"(?:helfen|weiterhelfen|fortsetzen|weiterschreiben|weiterführen|schreiben|erstellen|generieren|"
                         r"nachkommen|unterstützen)\b"),
        ("kann_nicht_fortsetzen", r"Ich kann (?:diese|die|deine|Ihre|eine solche) (?:Geschichte|Szene|Anfrage|"
                                  r"Rollenspiel|Unterhaltung|Erzählung|Inhalte?) nicht (?:fortsetzen|weiterschreiben|"
                                  r"weiterführen|schreiben|erstellen|unterstützen|bearbeiten)\b"),
        ("als_ki", r"Als (?:eine )?(?:KI|künstliche Intelligenz|Sprachmodell|KI-Assistent|KI-Modell)\b"),
    ],
    "it": [
        ("mi_dispiace", r"Mi dispiace,? (?:ma )?non (?:posso|sono in grado di|riesco a) "
                        r"(?:aiutarti|aiutarla|aiutare|continuare|proseguire|scrivere|creare|generare|partecipare|"
                        r"soddisfare)\b"),
        ("non_posso_continuare", r"Non (?:posso|sono in grado di) (?:continuare|proseguire|scrivere|creare|generare|"
                                 r"aiutarti con) (?:questa|questo|la|il|tua|tuo|lo) (?:storia|scena|richiesta|"
                                 r"gioco di ruolo|conversazione|contenuto|racconto)\b"),
        ("in_quanto_ia", r"(?:In quanto|Come) (?:un'|una )?(?:IA|intelligenza artificiale|modello linguistico|"
                         r"assistente IA)\b"),
    ],
    "nl": [
        ("sorry", r"(?:Sorry|Het spijt me),? (?:maar )?(?:ik kan|dat kan ik) (?:je |u )?(?:daar |hier |hierbij |"
                  r"daarmee )?niet (?:mee )?(?:helpen|verder gaan|voortzetten|schrijven|maken|genereren)\b"),
        ("kan_niet_verder", r"Ik kan (?:niet (?:verder gaan|doorgaan) met (?:dit|dat|deze|je|uw) (?:verhaal|scène|"
                            r"verzoek|rollenspel|gesprek)|(?:dit|dat|deze|je|uw) (?:verhaal|scène|verzoek|rollenspel|"
                            r"gesprek) niet (?:voortzetten|schrijven|afmaken|vervolgen))\b"),
        ("als_ai", r"Als (?:een )?(?:AI|kunstmatige intelligentie|taalmodel|AI-assistent)\b"),
    ],
    "pl": [
        ("przepraszam", r"(?:Przepraszam|Przykro mi),? (?:ale )?nie (?:mogę|jestem w stanie) (?:ci |pani |panu )?(?:w tym )?"
                        r"(?:pomóc|kontynuować|napisać|stworzyć|wygenerować|spełnić)\b"),
        ("nie_moge_kontynuowac", r"Nie (?:mogę|jestem w stanie) (?:kontynuować|napisać|tworzyć|stworzyć|pomóc w) "
                                 r"(?:tej|tego|twojej|twojego|takiej|takiego) (?:historii|opowieści|sceny|prośby|"
                                 r"rozmowy|treści|odgrywania ról)"),
        ("jako_ai", r"Jako (?:AI|SI|sztuczna inteligencja|model językowy|asystent AI)\b"),
    ],
    "ru": [
        ("izvinite", r"(?:Извините|Простите|Мне жаль|К сожалению),? (?:но )?я не (?:могу|буду|в состоянии) "
                     r"(?:помочь|продолжить|продолжать|написать|создать|сгенерировать|выполнить)"),
        ("ne_mogu_prodolzhit", r"Я не (?:могу|буду) (?:продолжить|продолжать|писать|написать|создавать|помочь с) "
                               r"(?:эту|этот|эту|вашу|ваш|твою|твой|данную|данный|такую|такой) (?:историю|сцену|запрос|"
                               r"ролевую игру|разговор|контент|рассказ|просьбу)"),
        ("kak_ii", r"Как (?:ИИ|искусственный интеллект|языковая модель|ИИ-ассистент)(?![\w-])"),
    ],
    "uk": [
        ("vybachte", r"(?:Вибачте|Перепрошую|На жаль|Мені шкода),? (?:але )?я не (?:можу|буду) "
                     r"(?:допомогти|продовжити|продовжувати|написати|створити|згенерувати|виконати)"),
        ("ne_mozhu_prodovzhyty", r"Я не (?:можу|буду) (?:продовжити|продовжувати|писати|написати|створювати|"
                                 r"допомогти з) (?:цю|цей|вашу|ваш|твою|твій|дану|даний|таку|такий) (?:історію|сцену|"
                                 r"запит|рольову гру|розмову|контент|оповідь|прохання)"),
        ("yak_shi", r"Як (?:ШІ|штучний інтелект|мовна модель|ШІ-асистент)(?![\w-])"),
    ],
    "tr": [
        ("uzgunum", r"(?:Üzgünüm|Özür dilerim|Kusura bakmayın),? (?:ama |ancak )?(?:bu (?:konuda|isteğe|talebe|"
                    r"hikayeye|hikâyeye) )?(?:yardımcı olamam|devam edemem|yardım edemem|yazamam|oluşturamam)"),
        ("devam_edemem", r"Bu (?:hikayeye|hikâyeye|sahneye|isteğe|talebe|rol yapmaya|konuşmaya) "
                         r"(?:devam edemem|yardımcı olamam|katılamam)"),
        ("yapay_zeka", r"Bir (?:yapay zeka|yapay zekâ|dil modeli|YZ asistanı) olarak"),
    ],
    "ar": [
        ("asif", r"(?:عذرًا|عذرا|آسف|آسفة|أعتذر)[،,]? ?(?:ولكن |لكن )?(?:لا أستطيع|لا يمكنني|لن أتمكن من) "
                 r"(?:المساعدة|مساعدتك|الاستمرار|المتابعة|متابعة|إكمال|كتابة|إنشاء)"),
        ("la_astatee", r"(?:لا أستطيع|لا يمكنني) (?:الاستمرار في|متابعة|إكمال|كتابة|المساعدة في) (?:هذه |هذا )?"
                       r"(?:القصة|المشهد|الطلب|لعب الأدوار|المحادثة|المحتوى)"),
        ("bisifati", r"(?:بصفتي|كوني) (?:ذكاءً|ذكاء|نموذجًا|نموذج|مساعدًا|مساعد) (?:اصطناعيًا|اصطناعي|لغويًا|لغوي|ذكيًا|ذكي)"),
    ],
    "ja": [
        ("moushiwake", r"(?:申し訳(?:ありません|ございません)|すみません|ごめんなさい)[^。\n]{0,40}"
                       r"(?:お応えできません|お手伝いできません|対応できません|続けることはできません|続けられません|"
                       r"作成できません|書くことはできません|協力できません)"),
        ("tsuzukeraremasen", r"(?:この|その|ご依頼の|ご要望の)(?:物語|ストーリー|シーン|ロールプレイ|リクエスト|内容|"
                             r"ご依頼)(?:を|は|の|には)[^。\n]{0,12}(?:続けることはできません|続けられません|"
                             r"お手伝いできません|作成できません|書くことはできません|お応えできません)"),
        ("ai_toshite", r"(?:AI|ＡＩ|人工知能|言語モデル)(?:アシスタント)?として"),
    ],
    "ko": [
        ("joesong", r"(?:죄송합니다|죄송하지만|미안하지만|죄송해요)[,.]?\s*[^.。\n]{0,30}"
                    r"(?:도와드릴 수 없|계속할 수 없|이어갈 수 없|작성할 수 없|응할 수 없|진행할 수 없|도와드리기 어렵)"),
        ("gyesok", r"(?:이|그|요청하신) (?:이야기|스토리|장면|요청|롤플레이|역할극|대화)(?:를|을|는|은)? "
                   r"(?:계속할 수 없|이어갈 수 없|진행할 수 없|작성할 수 없|도와드릴 수 없)"),
        ("ai_roseo", r"(?:AI|인공지능|언어 모델|AI 어시스턴트)(?:로서|으로서)"),
    ],
    "zh": [
        ("baoqian", r"(?:抱歉|对不起|很抱歉|不好意思)[，,]?(?:但)?我(?:无法|不能|没办法|不可以)"
                    r"(?:继续|帮助|协助|提供|创作|生成|完成|满足|参与|写)"),
        ("wufa_jixu", r"我(?:无法|不能|没办法)(?:继续|帮助你?|协助你?|创作|写)(?:这个|这段|该|你的|此)?"
                      r"(?:故事|场景|请求|角色扮演|对话|内容)"),
        ("zuowei_ai", r"作为(?:一个|一名)?(?:AI|人工智能|语言模型|AI助手|人工智能助手)"),
    ],
    "id": [
        ("maaf", r"(?:Maaf|Mohon maaf),? (?:tetapi |tapi |namun )?saya tidak (?:dapat|bisa) "
                 r"(?:membantu|melanjutkan|menulis|membuat|memenuhi|menghasilkan)\b"),
        ("tidak_dapat_melanjutkan", r"Saya tidak (?:dapat|bisa) (?:melanjutkan|membantu dengan|menulis|membuat) "
                                    r"(?:cerita|adegan|permintaan|roleplay|percakapan|konten)\b"),
        ("sebagai_ai", r"Sebagai (?:sebuah )?(?:AI|kecerdasan buatan|model bahasa|asisten AI)\b"),
    ],
    "vi": [
        ("xin_loi", r"Xin lỗi,? (?:nhưng )?(?:tôi|mình) không thể (?:giúp|tiếp tục|viết|tạo|hỗ trợ|đáp ứng|"
                    r"thực hiện)"),
        ("khong_the_tiep_tuc", r"(?:Tôi|Mình) không thể (?:tiếp tục|viết tiếp|hỗ trợ) (?:câu chuyện|cảnh|yêu cầu|"
                               r"nhập vai|cuộc trò chuyện|nội dung)"),
        ("la_ai", r"(?:Là|Với tư cách là) (?:một )?(?:AI|trí tuệ nhân tạo|mô hình ngôn ngữ|trợ lý AI)\b"),
    ],
}


def _compile() -> dict[str, tuple[RefusalPattern, ...]]:
    return {
        lang: tuple(RefusalPattern(id=f"{lang}.{name}", language=lang, regex=re.compile(rx, _I))
                    for name, rx in items)
        for lang, items in _RAW.items()
    }


#: language -> its patterns.
PATTERNS: dict[str, tuple[RefusalPattern, ...]] = _compile()

#: Every pattern by id.
BY_ID: dict[str, RefusalPattern] = {p.id: p for ps in PATTERNS.values() for p in ps}
