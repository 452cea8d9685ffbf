"""Synthetic replies for the defect families of issue 12 (items 1-7): what must be caught, and the traps.

Written for this project (no public text copied): realistic replies to the
canary's roleplay probes, in several of the 17 languages, each with the
defect of one family; and traps, replies that look close but are healthy.
The unit tests (``tests/unit/test_checks_tokens.py``, ``test_checks_scripts.py``,
``test_checks_salad.py``) assert every one; ``benchmarks/language_table.py``
prints each family's catch rate on them beside its false-trip rate on real
text.

Each case is ``(language, text)``; :func:`verdict` judges one with the whole
check pipeline (:func:`reverie_canary.client.checks.evaluate`, the
refusal probe's checks, or the language check for item 6) and says whether
the family's reason was reported.
"""

from __future__ import annotations

from reverie_canary.client.checks import evaluate
from reverie_canary.client.checks.language import assess_language
from reverie_canary.client.reply import ProbeSpec, Reply

#: family -> (reason code, what it is)
FAMILIES: dict[str, tuple[str, str]] = {
    "channel": ("channel_leak", "1. channel text with its markers stripped"),
    "reserved": ("reserved_tokens", "2. reserved and placeholder tokens"),
    "bars": ("control_tokens", "3. delimiters with full-width bars and ▁ spacers"),
    "script": ("foreign_script", "4. short runs of a foreign script"),
    "salad": ("word_salad", "5. word salad"),
    "short": ("language_switch", "6. a whole short reply in a foreign script"),
    "code": ("", "7. code is not leakage (caught: the token bare in prose)"),
    "tools": ("tool_markup_in_content", "8. tool-call markup in the visible text (any reply)"),
}

CAUGHT: dict[str, list[tuple[str, str]]] = {
    "channel": [
        ("en", "analysisThe user wants Mira to continue the scene. Keep it short.assistantfinal*Mira lifts the lamp.*"),
        ("pt", "analysisWe need to answer in Portuguese. assistantfinalMira ergue a lanterna e sorri."),
        ("zh", "analysis用户希望继续这个场景。assistantfinal米拉举起了灯。"),
        ("ru", "analysisПользователь просит продолжить сцену.assistantfinalМира поднимает фонарь."),
        ("de", "analysiswe need to continue the story in German.assistantfinalMira hebt die Laterne."),
        ("de", "*Mira hebt die Laterne.* Die Schmuggler weichen zurück.assistantfinalDie Schmuggler weichen zurück."),
        ("es", "Mira alza la lámpara.finalMira alza la lámpara y sonríe."),
        ("fr", "Mira soulève la lanterne et sourit.assistant"),
        ("it", "Mira solleva la lanterna.final"),
        ("en", "finalMira lifts the lamp and waits."),
        ("ja", "analysisユーザーは場面の続きを求めている。assistantfinalミラはランプを掲げた。"),
    ],
    "reserved": [
        ("en", "*Mira lifts the lamp.*<unused123> The storm is close now."),
        ("pt", "Mira ergue a lanterna<unused0><unused0> e sorri para o faroleiro."),
        ("de", "Die Laterne flackert <extra_id_7> im Wind, und Mira wartet."),
        ("en", "The lamp is lit.<|reserved_special_token_42|>"),
        ("fr", "La lampe brille. [PAD] [PAD] [PAD]"),
        ("zh", "灯塔的灯亮了。<pad><pad><pad>"),
        ("ru", "Маяк светит в темноте.<|endoftext|>"),
        ("en", "The lamp is lit.<|end_of_text|>"),
        ("es", "La linterna se apaga <endoftext> y Mira espera."),
        ("tr", "Fener yanıyor.<|extra_0|>"),
        ("ko", "등대의 불이 켜졌다.<｜place▁holder▁no▁12｜>"),
        ("id", "Lampu mercusuar menyala. [unused12] [unused13]"),
        ("it", "Il faro si accende [control_8] nel buio."),
        ("en", "The lamp <UNK> is lit."),
        ("vi", "Ngọn đèn sáng lên <mask> trong đêm."),
        ("en", "Mira lifts the lamp.<start_of_image>"),
        ("nl", "De lamp brandt.<audio_soft_token><audio_soft_token>"),
    ],
    "bars": [
        ("es", "Mira sonríe.<｜end▁of▁sentence｜>"),
        ("es", "Mira sonríe.<|end▁of▁sentence|>"),
        ("es", "Mira sonríe.<｜end_of_sentence｜>"),
        ("zh", "好的。<｜begin▁of▁sentence｜><｜User｜>继续"),
        ("ru", "Ок.＜｜Assistant｜＞Маяк горит."),
        ("en", "The lamp is lit.<∣im_end∣>"),
        ("pl", "Lampa świeci.<| eot_id |>"),
        ("ja", "ミラは微笑んだ。<｜begin▁of▁sentence｜><｜User｜>続けて"),
        ("en", "The lamp is lit.<︱im_end︱>"),                                  # U+FE31 bars
        ("ko", "등대가 빛난다.<￨eot_id￨>"),                                      # U+FFE8 bars
    ],
    "script": [
        ("en", "*Mira lifts the lamp.* The smugglers step back 一 and the leader lowers his knife."),
        ("en", "The smugglers отступили down the narrow stairs, cursing the old keeper."),
        ("en", "\"Welcome to the 灯塔, traveller,\" she says, lifting the lamp high above her head."),
        ("pt", "Mira ergue a lanterna e sorri为 para os contrabandistas que recuam pela escada."),
        ("pt", "O vento bate nas janelas antigas e o mar quebra nas rochas लेकिन lá embaixo."),
        ("es", "La linterna se apaga y Mira espera en la oscuridad 그리고 escucha el mar."),
        ("de", "Mira hebt die Laterne, und die Schmuggler weichen zurück في الظلام zur Tür."),
        ("fr", "Mira soulève la lanterne ; les contrebandiers reculent vers la porte ของ la tour."),
        ("tr", "Mira feneri kaldırıyor ve kaçakçılar merdivenlerden geri çekiliyor и bekliyor."),
        ("vi", "Mira nâng chiếc đèn lên và những kẻ buôn lậu lùi xuống cầu thang 的 hẹp."),
        ("id", "Mira mengangkat lampu dan para penyelundup mundur ke tangga yang sempit ใน gelap."),
        ("en", "The keeper's name was Hеlen, and she had kept the light for forty years."),
        ("ru", "Мира поднимает фонарь, и контрабандисты отступают 到 по узкой лестнице."),
        ("uk", "Міра піднімає ліхтар, і контрабандисти відступають 계단 вузькими сходами."),
        ("ar", "ترفع ميرا المصباح ويتراجع المهربون на الدرج الضيق نحو الباب."),
        ("ja", "ミラはランプを掲げ、密輸業者たちは 계단 狭い階段を後ずさりした。"),
        ("ja", "ミラはランプを掲げ、密輸業者たちはлестница狭い階段を後ずさりした。"),
        ("zh", "米拉举起灯，走私者们沿着狭窄的楼梯のように后退了。"),
        ("ko", "미라가 등불을 들어 올리자 밀수꾼들은 좁은 계단으로 отступили 물러섰다."),
        ("nl", "Mira heft de lamp op en de smokkelaars deinzen terug naar de deur ของ toren."),
    ],
    "salad": [
        ("en", "the, of \\ \\ and ing ,, tion the\\\\ a ly ness , , ment of the \\n\\n ed lamp ,, stair"),
        ("en", "Mira lamp ough the,, ed stair \\ \\ \\ smug gle rs . . . ing the of || wait ,, the"),
        ("pt", "a de \\ \\ que ção mente os , , , lan terna ç \\ \\ ão do ,, escada || mar"),
        ("es", "el la \\\\ de los ,, ción mente \\ ando , , las {{ }} faro ,, ente la"),
        ("ja", "の、、、は\\\\ を を 。。 ト ー \\ \\ に ,, ランプ \\ が"),
        ("ru", "и в \\ \\ не на ,, ого ения \\\\ ть , , маяк || ся \\ по"),
        ("de", "der die \\ \\ und ung ,, keit lich \\ \\ en , , Laterne <> sch ,, ein"),
        ("fr", "le la \\ \\ et ment ,, tion les \\ \\ eur , , phare __ ais ,, des"),
        ("ko", "의 는 \\ \\ 을 ,, 에서 \\\\ 하다 , , 등대 || 고 \\ 이"),
        ("en", "lamp ough stair tion the ing smug ed ly harbour gle ness ment keeper ward of rock ish ance "
               "light ful tower er sea ous wind less ity door al rain ive boat en gull ize night ward knife "
               "dom step ment glass ure cliff ling salt hood rope ery bell ist wave ness fog ine star age "
               "dark ling moon ish tide ous mist ward"),
        ("en", "ably ingu .getText ствие _SELECT assoc ]);\n\n.addEventListener ({ }) ]] ouch ,, \\u00 ||"),
    ],
    "short": [
        ("pt", "好的"), ("pt", "はい、わかりました"), ("en", "Да."), ("en", "好的。"), ("de", "네, 알겠습니다."),
        ("fr", "نعم"), ("es", "Конечно!"), ("zh", "はい"), ("ko", "はい"), ("ja", "네"), ("ru", "好的"),
        ("ar", "Да, конечно."), ("it", "हाँ"), ("tr", "ใช่"),
    ],
    "tools": [
        ("en", "commentary to=functions.lamp_status json{\"lit\": true}"),
        ("zh", "好的。<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>lamp"),
        ("en", "Setting up the lamp now.<|tool_calls_section_begin|><|tool_call_begin|>functions.lamp:0"),
        ("pt", "Vou acender a lanterna.\n<tool_call>\n{\"name\": \"lamp_on\", \"arguments\": {}}\n</tool_call>"),
        ("de", "<function=lamp_on>\n<parameter=level>\n3\n</parameter>\n</function>"),
        ("fr", "<minimax:tool_call><invoke name=\"lamp_on\"><parameter name=\"level\">3</parameter></invoke>"),
        ("es", "[TOOL_CALLS][{\"name\": \"lamp_on\", \"arguments\": {\"level\": 3}}]"),
        ("ru", "{\"name\": \"lamp_on\", \"parameters\": {\"level\": 3}}"),
        ("ja", "ランプをつけます。<｜tool▁call▁begin｜>function<｜tool▁sep｜>lamp_on"),
        ("en", "<|channel|>commentary to=functions.lamp_on <|constrain|>json<|message|>{\"level\":3}<|call|>"),
        ("it", "Accendo la lanterna. functions.lamp_on:0{\"level\": 3}"),
        ("en", "[lamp_on(level=3), bell_ring(times=2)]"),
        ("ko", "```tool_code\nprint(lamp_on(level=3))\n```"),
    ],
    "code": [
        ("en", "Reasoning models wrap thoughts in `<think>`.<think>Now I answer.</think>"),
        ("en", "Hermes wraps a call in `<tool_call>`.<tool_call>{\"name\": \"lamp_on\", \"arguments\": {}}</tool_call>"),
        ("pt", "O token `<|im_end|>` fecha a vez.<|im_end|>"),
        ("de", "BERT nutzt `[PAD]` zum Auffüllen. [PAD] [PAD]"),
        ("en", "```\nprint('hi')\n```\nassistantfinalThe code prints hi."),
    ],
}

TRAPS: dict[str, list[tuple[str, str]]] = {
    "channel": [
        ("en", "Analysis: the smugglers want the lamp, not the keeper."),
        ("en", "The final answer is simple: keep the light burning."),
        ("pt", "Finalmente, Mira sobe o último degrau."),
        ("it", "La finale si gioca stasera; il finalista è nervoso."),
        ("pt", "A análise final mostrou que o farol estava apagado."),
        ("en", "Our analysis of the commentary was final. We agreed."),
        ("en", "Her assistant, a quiet boy, carried the final crate."),
        ("en", "The keeper's analysis was brief — final, even."),
        ("es", "Finaliza la escena: Mira apaga la lámpara."),
        ("tr", "Bu finalde takım çok iyi oynadı."),
        ("pl", "Analiza końcowa. Finał sezonu."),
    ],
    "reserved": [
        ("en", "Replace <your name> with the keeper's name and <date> with today."),
        ("en", "She typed <3 and smiled; x < y but y > z."),
        ("en", "The footnotes [1] and [2] cite the harbour log [sic]."),
        ("en", "He pressed <Enter>, then <Esc>, then <Special> on the old console."),
        ("en", "A [Narrator] voice says the pad thai is cold."),
        ("en", "The extra ID card lay on the pad next to the mask."),
        ("en", "Use <b>bold</b> and <br> in the note."),
    ],
    "bars": [
        ("zh", "標題｜副標題｜第三章"),
        ("en", "| name | value |\n|---|---|\n| lamp | lit |"),
        ("en", "A <|> B and C ｜ D"),
    ],
    "script": [
        ("nl", "Een bekende Hebreeuwse naam die begint met de gimel is Gideon : גדעון."),
        ("nl", "Fairy Tail (フェアリーテイル Fearī Teiru, geromaniseerd als FAIRY TAIL in Japan) is een mangaserie."),
        ("nl", "Variaties Pajeon met zeevoedsel In het Koreaanse haemul pajeon (해물파전) genoemd."),
        ("en", "She whispered «спасибо» and climbed the stairs to the lamp room."),
        ("en", "The sign over the door said \"灯台\", the old Japanese word for lighthouse."),
        ("en", "*Mira laughs* (ﾉ◕ヮ◕)ﾉ*:･ﾟ✧ and lifts the lamp towards the dark harbour."),
        ("en", "The beam turns at ω = 2π rad per minute, and the lens has Δ of 3 mm."),
        ("en", "Use `print('灯台')` to print the word, then open https://example.com/灯台 to read more."),
        ("en", "Mira smiles 😊 and the gulls circle ✧ over the harbour ★ at dawn."),
        ("pt", "Nguyễn, Dvořák e Søren chegaram ao farol às nove, com o Ærø ao fundo."),
        ("ru", "Мира открыла iPhone и написала в Telegram, что маяк снова работает."),
        ("ja", "ミラはiPhoneでGoogleマップを開き、灯台までの道を調べた。"),
        ("ko", "대선의 큰 변수(變數)가 될 회담 발표에도 두 진영간의 싸움은 수그러들 것 같지 않다."),
        ("ko", "등대지기는 燈臺를 지키며 평생을 보냈다."),
        ("zh", "米拉在GitHub上看到了这个项目，然后用Python写了一个脚本。"),
        ("ar", "فتحت ميرا تطبيق WhatsApp وأرسلت رسالة إلى حارس المنارة."),
        ("pl", "Latarnia stoi samotnie — napis nad drzwiami głosi: Маяк."),
        ("en", "The old word *灯台* is carved over the door of the tower."),
    ],
    "salad": [
        ("de", "Sie können dieses kontrollieren, indem Sie mit Extras \\\\ Optionen das Optionsformular starten."),
        ("fr", "Randonnées sur sentiers balisés ; parcours de santé ; équitation ; activités nautiques : baignade, "
               "planche à voile, pédalo, canoë-kayak... ;"),
        ("ko", "좋아요~~ 오늘은 등대에 가요^^ 정말 기대돼요~ ㅎㅎ"),
        ("en", "*Mira lifts the lamp.* \"Back,\" she says — \"back, or the light goes out...\" **Now.**"),
        ("en", "| item | state |\n|---|---|\n| lamp | lit |\n| door | shut |\n| boat | near |"),
        ("en", "Paths like C:\\Users\\mira\\lamp.txt and `a\\b\\c\\d\\e` are in code or paths."),
        ("en", "The keeper wrote: --> lamp -> stairs -> door <-- and smiled."),
        ("ja", "灯台は黒い岩の上にひとりで立ち、白い塔はまだ夜の雨に濡れている。その下では海が灰色に波立っている。"),
        ("en", "Waves, gulls, wind; rain, rocks, rope: the harbour at dawn (a list, not salad)."),
        ("en", "*Mira waits. . . and waits . . . . . . and the boat never comes.*"),   # spaced ellipses
        ("en", "{{char}} smiles at {{user}}. \"Stay, {{user}},\" {{char}} says, and {{char}} lights the lamp."),
    ],
    "short": [
        ("pt", "Sim."), ("pt", "Não!"), ("ja", "好的"), ("ja", "はい"), ("ru", "OK"), ("uk", "Да"), ("ru", "Так."),
        ("ar", "OK"), ("ko", "是"), ("en", "π"), ("en", "(ツ)"), ("en", "Mira."), ("zh", "好的"), ("en", "😊👍"),
        ("de", "Ja, 好"),
    ],
    "tools": [
        ("en", "Here is the JSON you asked for:\n```json\n{\"name\": \"lamp_on\", \"arguments\": {\"level\": 3}}\n```"),
        ("en", "Models emit `<tool_call>` tags that the server turns into tool calls."),
        ("fr", "Mira écrit sur le registre : « nom : Lamp, paramètres : aucun »."),
        ("en", "The keeper's function was simple: keep the light on (and never let it go out)."),
        ("de", "Die Funktion lamp_on wird aufgerufen, wenn es dunkel wird."),
        ("en", "She said {\"name\": \"Mira\"} was written on the crate, nothing more."),
        ("es", "Mira cuenta: 1) la lámpara, 2) la campana, 3) la puerta [cerrada]."),
        ("en", "In Python you would write `lamp_on(level=3)` to turn it on."),
    ],
    "code": [
        ("en", "Reasoning models wrap their thoughts in `<think>` and `</think>`; the client hides them."),
        ("pt", "O token `<|im_end|>` fecha a vez do assistente no formato ChatML."),
        ("de", "Der Tokenizer füllt mit ``<pad>`` auf, BERT nutzt `[PAD]` und T5 `<extra_id_0>`."),
        ("en", "DeepSeek ends a sentence with:\n\n```\n<｜end▁of▁sentence｜>\n```\n\nand nothing else."),
        ("en", "~~~text\n<|start|>assistant<|channel|>analysis<|message|>...\n~~~\nThat is the Harmony format."),
        ("ru", "Гемма резервирует `<unused0>`…`<unused98>`."),
        ("en", "In Harmony the header `analysisThe` is what you see when a parser strips `<|channel|>`."),
    ],
}


#: Realistic defects the checks do not catch, by design or as a known limit:
#: counted in the catch rate the benchmark prints, never asserted.
KNOWN_MISSES: dict[str, list[tuple[str, str]]] = {
    "channel": [("en", "analysis The user wants a short scene. assistant final Mira lifts the lamp.")],  # spaced
    "reserved": [("en", "The lamp is lit.<unused_token>")],                     # an unnumbered spelling outside the list
    "bars": [("en", "The lamp is lit.<|im_end>")],                           # half a token: one bar lost
    "script": [("en", "*Mira lifts the lamp (灯) and waits by the window.*")],  # in brackets: read as a gloss
    "salad": [("en", "lamp ough stair tion the ing smug ed ly harbour gle ness ment keeper ward lamp ough "
                     "stair tion the ing smug ed ly harbour"),                  # 25 fragments, no punctuation
              ("en", "The lamp, , of stair the ing \\ smugglers wait by the door of the old tower tonight.")],
    "short": [("en", "Oui.")],                                                  # Latin: a switch, but not by script
    "code": [],
    "tools": [("en", "Calling lamp_on with level 3 now: lamp_on level=3")],   # no syntax left to see
}


def verdict(family: str, lang: str, text: str) -> tuple[str, str]:
    """``(outcome, reason)`` of one case through the checks that judge its family.

    Item 6 goes through the language check alone (what the language probe
    reports for a short reply); the others through :func:`evaluate` with the
    refusal probe's checks (behavioural integrity and the foreign-script
    check run on every prose probe).
    """
    if family == "short":
        result = assess_language(text, lang)
        return result.outcome, result.reason
    result = evaluate(Reply(text=text, finish_reason="stop", http_status=200, ttft_ms=500.0),
                      ProbeSpec(kind="refusal", language=lang))
    return result.outcome, result.reason


def caught(family: str, lang: str, text: str) -> bool:
    """Whether a case of ``CAUGHT[family]`` fails with its family's reason (item 7: fails at all)."""
    outcome, reason = verdict(family, lang, text)
    want = FAMILIES[family][0]
    return outcome == "fail" and (not want or reason == want)


def tripped(family: str, lang: str, text: str) -> bool:
    """Whether a trap of ``TRAPS[family]`` is reported with the family's reason (item 7: any leak reason)."""
    outcome, reason = verdict(family, lang, text)
    if family == "code":
        return reason in ("control_tokens", "reserved_tokens", "channel_leak", "tool_markup_in_content")
    if family == "short":
        return outcome == "fail"
    return reason == FAMILIES[family][0]
