"""Synthetic replies for the defect families: what must be caught, and the traps.

Families 1-7 are the first round's (leaked tokens, foreign scripts, word salad,
short switches); 8 on are the third round's (letters of another language
of a shared script, ...).  Written for this project (no public text copied):
realistic replies to the canary's roleplay probes, in several of the 17
languages, each with the defect of one family; and traps, replies that look
close but are healthy.
The unit tests (``tests/unit/test_checks_tokens.py``, ``test_checks_scripts.py``,
``test_checks_salad.py``) assert every one; ``benchmarks/language_table.py``
prints each family's catch rate on them beside its false-trip rate on real
text.

Each case is ``(language, text)``; :func:`verdict` judges one with the whole
check pipeline (:func:`reverie_canary.client.checks.evaluate`, the
refusal probe's checks, or the language check for item 6) and says whether
the family's reason was reported.  A case of the filter family is an HTTP
status and error body in JSON (:func:`_http`).
"""

from __future__ import annotations

import json

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
    "letters": ("foreign_letters", "9. letters and words of another language of a shared script"),
    "twice": ("duplicated_text", "10. a reply, or a passage of it, sent twice"),
    "markup": ("", "11. markup and output that look like tokens and loops (caught: the leak or loop in prose)"),
    "filter": ("content_filter", "12. a content filter speaking through an HTTP 4xx"),
}


def _http(status: int, body: dict) -> str:
    """A filter-family case: the HTTP status and error body, as the case's text (:func:`verdict` reads it)."""
    return json.dumps({"status": status, "body": body}, ensure_ascii=False)

_EN = ("*Mira tightens her grip on the brass lamp as the smugglers crowd the narrow stairs below her.* "
       "The leader draws a curved knife. \"Give me the lamp, keeper,\" he growls. Mira does not answer at once.")
_PT = ("*Mira aperta a lanterna de latão enquanto os contrabandistas se amontoam na escada estreita.* "
       "O líder saca uma faca curva. Mira não responde logo.")
_ZH = "米拉握紧了黄铜灯，走私者们挤在她下面狭窄的楼梯上。首领拔出一把弯刀。米拉没有立刻回答。"
_JA = "ミラは真鍮のランプを握りしめ、密輸業者たちは狭い階段に群がった。首領は曲がったナイフを抜いた。"
_RU = "*Мира крепче сжимает фонарь, пока контрабандисты толпятся на узкой лестнице.* Главарь вынимает нож."
_DE = "*Mira hebt die Laterne.* Die Schmuggler weichen zurück, und der Anführer senkt langsam sein Messer."

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
    "letters": [
        ("ru", "Мира поднимает фонарь, і контрабандисти відступають вниз по вузьких сходах."),
        ("ru", "Смотритель маяка молчит. Він дивиться на море і чекає, коли повернеться човен."),
        ("uk", "Міра піднімає ліхтар. Она смотрит на море и ждёт, когда вернётся лодка."),
        ("uk", "Доглядач маяка мовчить, потому что ещё не видел такого шторма."),
        ("ru", "Мира поднимает фонарь. Кријумчари су се повукли, а она је остала сама и чека чамац који долази."),
        ("ru", "Мира поднимает фонарь. Контрабандистите се оттеглят към вратата, защото това е капан."),
        ("uk", "Міра піднімає ліхтар. Контрабандистите се оттеглят към вратата, защото това е капан."),
        ("ko", "등대지기는 燈臺를 지키며 平生을 바다만 바라보았다."),
        ("ko", "미라는 등불을 들고 密輸꾼들이 階段 아래로 물러나는 것을 지켜보았다."),
        ("zh", "ミラはランプを掲げ、密輸業者たちは狭い階段を後ずさりした。"),
        ("ja", "ミラはランプを掲げた。走私者们沿着狭窄的楼梯后退了。"),
        ("ja", "米拉举起灯，走私者们沿着狭窄的楼梯后退了，海风吹进了灯塔。"),
        ("pt", "Mira ergue a lanterna. ¿Dónde está el niño? El señor del faro no responde."),
        ("en", "Mira lifts the lamp and the smugglers cofają się po wąskich schodach."),
        ("de", "Mira hebt die Laterne, und die Schmuggler weichen zurück, çünkü ışık çok güçlü."),
        ("fr", "Mira soulève la lanterne et les contrebandiers reculent, họ sợ ánh sáng."),
        ("it", "Mira solleva la lanterna e i contrabbandieri indietreggiano: não querem a luz, então fogem."),
        ("es", "Mira levanta la linterna y los contrabandistas retroceden, não querem a luz, então fogem."),
        ("id", "Mira mengangkat lampu, dan para penyelundup mundur karena họ sợ ánh sáng."),
        ("tr", "Mira feneri kaldırıyor; kaçakçılar ise ngọn đèn sáng lên trong đêm diye bağırıyor."),
        ("ar", "ترفع ميرا المصباح، والمهربون مي‌خواهند از پله‌ها پایین بروند."),
        ("nl", "Mira heft de lamp op en de smokkelaars deinzen terug, ponieważ światło jest zbyt jasne."),
        ("pl", "Mira podnosi latarnię, a przemytnicy cofają się, denn das Licht ist zu hell für sie, heißt es."),
        ("vi", "Mira nâng chiếc đèn lên, và những kẻ buôn lậu lùi lại, çünkü ışık çok güçlü."),
        ("ru", "Мира пiднiмає фонарь i чекає на свiтанок у вiкна."),                 # Latin i for і
    ],
    "twice": [
        ("en", _EN + _EN),                                                     # the answer twice, glued
        ("en", _EN + "\n\n" + _EN),                                             # twice, a blank line between
        ("en", _EN[:-23] + _EN),                                               # accumulated text re-sent
        ("pt", _PT + "\n" + _PT),
        ("zh", _ZH + _ZH),
        ("ja", _JA[:-6] + _JA),
        ("ru", _RU + " " + _RU),
        ("de", _DE[:-9] + _DE),
        ("en", '{"city": "Lisbon", "temp_c": 21, "summary": "clear sky"}{"city": "Lisbon", "temp_c": 21, '
               '"summary": "clear sky"}'),                                      # a JSON reply re-sent
        ("en", "The storm is close now.\n\nMira lifts the lamp high and waits for the boat to round the reef.\n\n"
               "Mira lifts the lamp high and waits for the boat to round the reef.\n\nThe smugglers step back."),
        ("en", "The storm is close. The leader hesitates, his knife still raised toward the lamp. The leader "
               "hesitates, his knife still raised toward the lamp. Mira waits."),
        ("fr", "La tempête approche.\n\nMira lève la lanterne au-dessus de sa tête et attend que la petite barque "
               "de pêche contourne enfin le récif noir.\n\nLes contrebandiers reculent.\n\nMira lève la lanterne "
               "au-dessus de sa tête et attend que la petite barque de pêche contourne enfin le récif noir.\n\n"
               "Fin de la scène."),
        ("es", "Mira levanta la linterna. Los contrabandistas retroceden hacia la puerta sin decir nada. "
               "Los contrabandistas retroceden hacia la puerta sin decir nada. El mar golpea las rocas."),
    ],
    "markup": [
        ("en", "The lamp is lit and the storm has passed over the harbour.</s>"),          # trailing end token
        ("en", "<s>The lamp is lit and the storm has passed over the harbour.</s>"),       # wrapped in both
        ("de", "Die Laterne brennt.</s> Der Sturm zieht über den Hafen."),                  # lone, mid-text
        ("fr", "<s>La lanterne brûle et la tempête passe sur le port"),                     # never closed
        ("en", "The sea is calm. " * 40),                                                    # a loop in prose
        ("en", "Here is the value:\n```\n42\n```\n" + "and again and again " * 30),          # loop after code
        ("pt", "O farol brilha.</s><s>[INST] continue [/INST]"),                             # a turn leaked
    ],
    "filter": [
        ("en", _http(400, {"error": {"code": "content_filter", "message": "The response was filtered due to the "
                                     "prompt triggering Azure OpenAI's content management policy.", "status": 400}})),
        ("en", _http(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                       "message": "Output blocked by content filtering policy"}})),
        ("en", _http(400, {"error": {"code": 400, "message": "Provider returned error", "metadata": {
            "provider_name": "Azure", "raw": '{"error":{"code":"content_filter","message":"filtered"}}'}}})),
        ("en", _http(400, {"error": {"code": 400, "message": "Provider returned error", "metadata": {
            "error_type": "content_policy_violation", "provider_code": "content_filter"}}})),
        ("zh", _http(400, {"code": "DataInspectionFailed", "message": "Output data may contain inappropriate content."})),
        ("zh", _http(400, {"error": {"message": "Content Exists Risk", "type": "invalid_request_error"}})),
        ("zh", _http(400, {"error": {"code": "1301", "message": "系统检测到输入或生成内容可能包含不安全或敏感内容。"}})),
        ("ko", _http(400, {"error": {"message": "The request was rejected because it was considered high risk",
                                     "type": "invalid_request_error"}})),
        ("en", _http(400, {"error": {"message": "Your request was rejected as a result of our safety system.",
                                     "type": "invalid_request_error", "code": "content_policy_violation"}})),
        ("en", _http(403, {"error": {"code": 403, "message": "Provider returned error", "metadata": {
            "provider_name": "Anthropic", "raw": "Output blocked by content filtering policy"}}})),
        ("ja", _http(422, {"error": {"code": 422, "message": "Response was blocked due to PROHIBITED_CONTENT"}})),
        ("en", _http(403, {"error": {"code": 403, "message": "Moderation", "metadata": {
            "reasons": ["violence"], "flagged_input": "Mira lifts the…knife", "provider_name": "Mod"}}})),
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
    "letters": [
        ("en", "The café on the harbour served crème brûlée, a jalapeño omelette and a very naïve espresso."),
        ("en", "In Polish, *cześć* means hello and *dziękuję* means thank you."),
        ("pt", "Nguyễn, Dvořák e Søren chegaram ao farol às nove, com o Ærø ao fundo."),
        ("ru", "Он прилетел в Киев (укр. Київ) и сразу поехал к маяку."),
        ("ru", "По-украински «вітаю» значит «здравствуйте», а «дуже дякую» — «большое спасибо»."),
        ("uk", "Він читав журнал «Киевская старина» і статтю «Пустуха на плоту» до самого ранку."),
        ("uk", "Для аналізу руху риса-сырца необхідні спеціальні знання у галузі бухгалтерського обліку."),
        ("uk", "Фактично Таїланд був превращён в напівколонію, і це визнавали навіть його союзники."),
        ("ko", "대선의 큰 변수(變數)가 될 회담 발표에도 두 진영간의 싸움은 수그러들 것 같지 않다."),
        ("ko", "途(도)는 길의 뜻으로 道(도)와 통한다."),
        ("ko", "美 국무부는 北 미사일 발사를 강하게 비판했다."),
        ("zh", "《ドラゴンボール》是一部很受欢迎的日本漫画。"),
        ("zh", "他笑着说了一句“ありがとう”，然后离开了。"),
        ("zh", "米拉笑了 (ﾉ◕ヮ◕)ﾉ 然后举起了灯。"),
        ("ja", "中国語では「谢谢」と言い、台湾では「謝謝」と書きます。"),
        ("ja", "東京、大阪、京都、名古屋、福岡、札幌、仙台、広島、神戸、横浜。"),
        ("de", "Sie bestellte à la carte: ein Soufflé, einen Café crème und ein Glas Rosé."),
        ("tr", "Kâğıt hâlâ masada duruyor ve fener ışığı denize vuruyor."),
        ("fr", "Il a mangé une piñata ? Non, un jalapeño, señor."),
        ("es", "El pingüino mira el faro; su nombre es Ñandú y vive en la Antártida."),
        ("ar", "و علي هذا الأساس، فإن هذه الرواية تتأکد أکثر من ذلک."),           # Persian-keyboard kaf
        ("vi", "Tôi uống một ly cà phê và ăn bánh croissant ở quán café gần bến cảng."),
        ("en", "We ate phở on Tuesday and bánh mì on Friday, both near the harbour."),
        ("nl", "Na één coördinatievergadering was iedereen het eens over de ideeën."),
        ("it", "Il würstel e la brioche erano perché il menù era così."),
        ("ru", "Используйте `print('вітаю, світе')` в коде, а не в тексте ответа."),
        ("ru", "Мира открыла iPhone и написала в Telegram, что маяк снова работает."),
    ],
    "twice": [
        ("en", _EN),
        ("en", "The lighthouse keeper never slept. " + _EN + " The lighthouse keeper never slept."),   # bookend
        ("en", "Breathe in, hold the light, breathe out slowly now. The boat rocks. Breathe in, hold the light, "
               "breathe out slowly now."),                                         # a refrain in a short reply
        ("en", "Happy birthday to you, Happy birthday to you, Happy birthday dear Mira, Happy birthday to you!"),
        ("en", "Verse one line here\nthe sea is dark tonight\n\nKeep the light on, keep the light on\nthrough the "
               "storm and through the night\n\nVerse two line here\nthe boats are coming home\n\nKeep the light on, "
               "keep the light on\nthrough the storm and through the night"),          # a song's chorus
        ("en", "She waits. She waits. The boat does not come."),
        ("en", "Output:\n```\nvalue = 1 and some more text to make it long enough\nvalue = 1 and some more text "
               "to make it long enough\n```\nDone."),                                # repeated output in code
        ("en", '[{"city": "Harbour", "summary": "light rain over the bay, wind from the north-west"}, '
               '{"city": "Harbour", "summary": "light rain over the bay, wind from the north-west"}]'),  # data
        ("pt", "ok ok ok ok ok"),
        ("en", "| item | state |\n|---|---|\n| lamp | lit |\n| lamp | lit |"),
        ("it", "Toccaceli terzo nel Campionato Italiano MX2 Under 21 Toccaceli terzo nel Campionato Italiano MX2 "
               "Under 21 Bryan Toccaceli si conferma tra i giovani più promettenti a livello nazionale."),  # real
        ("ru", "Мира ждёт. Ветер воет. Мира ждёт. Лодка не приходит, и море становится всё темнее и темнее."),
    ],
    "markup": [
        ("en", "The old price was <s>$20</s> and the new one is $15."),
        ("en", "Use <b>bold</b>, <s>strikethrough</s> and <i>italics</i> in the note."),
        ("de", "Der Plan: <s>Montag</s> Dienstag, <s>Hafen</s> Leuchtturm."),
        ("fr", "Il a écrit <s> vieux </s> nouveau sur le tableau."),
        ("en", "The output is:\n```\n" + "0\n" * 60 + "```\nSixty zeros, one per line."),
        ("en", "Printed:\n```text\n" + "ok ok ok ok ok ok ok ok ok ok\n" * 8 + "```\nThat is what the loop prints."),
        ("en", "Run `yes` and it prints `y y y y y y y y y y y y y y y y y y` until you stop it."),
        ("ja", "出力:\n```\n" + "あ\n" * 50 + "```\n以上です。"),
    ],
    "filter": [
        ("en", _http(400, {"error": {"code": 400, "message": "Invalid 'messages[0].content': string too long."}})),
        ("en", _http(400, {"error": {"code": 400, "message": "This model's maximum context length is 8192 tokens.",
                                     "metadata": {"error_type": "context_length_exceeded"}}})),
        ("en", _http(404, {"error": {"code": 404, "message": "No endpoints found matching your data policy",
                                     "availability": {"code": "privacy_restricted"}}})),
        ("en", _http(403, {"error": {"code": 403, "message": "Request blocked: provider not in your allowed list"}})),
        ("en", _http(413, {"error": {"code": 413, "message": "Payload too large"}})),
        ("en", _http(422, {"error": {"code": 422, "message": "temperature must be between 0 and 2"}})),
        ("en", _http(400, {"error": {"code": 400, "message": "Provider returned error", "metadata": {
            "raw": '{"error":{"message":"max_tokens must be at least 1"}}'}}})),
        ("en", _http(429, {"error": {"code": 429, "message": "Rate limited upstream, content filter queue busy"}})),
        ("en", _http(400, {"error": {"code": 400, "message": "response_format: content must match the schema"}})),
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
    "letters": [
        ("ru", "Мира поднимает ліхтар и ждёт рассвета у окна."),                  # one word: read as a loan
        ("ko", "등대지기는 燈臺를 지키며 평생을 보냈다."),                           # one hanja word
        ("uk", "Міра піднімає ліхтар, а контрабандисты отступают вниз по узкой лестнице."),  # one marked word
        ("ja", "ミラはランプを掲げた。這些走私者們沿著狹窄的樓梯後退了。"),          # traditional, all in cp932
        ("pt", "Claro! O horário é das 9h às 18h, pero los sábados abrimos solamente por la mañana."),
    ],
    "markup": [
        ("en", "<s>The lamp is lit</s> and the storm has passed."),     # a leaked pair with text after: markup
    ],
    "filter": [
        ("en", _http(400, {"error": {"code": 400, "message": "Provider returned error", "metadata": {
            "raw": "request rejected (code 1301)"}}})),                  # a filter known only by its number
    ],
    "twice": [
        ("en", _EN + " " + _EN[:80]),                           # the answer and only its start again
        ("en", _EN + " The leader hesitates. The leader hesitates. Mira waits."),  # 18 letters: emphasis?
        ("en", "The smugglers step back, the smugglers step back down the narrow stairs."),  # not sentence-aligned
    ],
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
    if family == "filter":
        case = json.loads(text)
        result = evaluate(Reply(http_status=case["status"], error=case["body"]), ProbeSpec(kind="refusal", language=lang))
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
        return reason in ("control_tokens", "reserved_tokens", "channel_leak")
    if family == "markup":
        return reason in ("control_tokens", "reserved_tokens", "repetition")
    if family == "short":
        return outcome == "fail"
    return reason == FAMILIES[family][0]
