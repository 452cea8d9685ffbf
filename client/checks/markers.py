"""High-signal function words per language, for clause-level mixing.

A character n-gram detector blurs close languages inside one sentence
(pt/es, pt/en: cases FC-20, FC-20b).  Function words do not: ``pero``,
``los`` are Spanish, ``não``, ``você`` Portuguese, ``and``, ``the`` English.
The language check uses them for three things only:

- to find the point inside a clause where the language changes (a split
  before the first marker of a new language);
- as corroboration: a clause counts as foreign only if it carries at least two
  markers of the foreign language and none of the requested one;
- as a veto: a sentence with at least two markers of the requested language,
  and no more of the detected one, is not foreign (short ru/uk sentences).

A word listed for two languages, or in :data:`_SHARED`, is a marker for
neither (:data:`MARKERS` keeps only the words exclusive to one list).
Lists are short and hand-made from grammar, not from the test data.
"""

from __future__ import annotations

_RAW: dict[str, str] = {
    "en": "the and of to is are was were be been this that these those with for "
          "then but have has had you they their there which would will what when "
          "from not it its he she his her we our my him them who how why "
          "where because about into over after before while should could",
    "es": "pero los las el del y muy también estaba fue eres soy hay ya pues "
          "cuando donde sus usted ustedes nosotros ellos ellas él mañana "
          "solamente sólo aquí allí así entonces mucho muchos mucha esto eso "
          "estos hasta sin tiene tienen hace hacer qué cómo dónde yo",
    "pt": "não você vocês são também às ao aos um uma uns umas em nas com pelo "
          "pela pelos pelas isso isto aquilo ele ela eles elas nós lhe lhes seu "
          "seus suas muito muita até já então foi tem têm estão estava vou vai "
          "eram depois onde aqui ali assim coisa sem fazer faz meu minha eu",
    "fr": "le des et est une du dans pour pas sur au aux avec cette ces ils elle "
          "elles sont où nous vous leur leurs aussi très être été fait sans chez "
          "mon sa ses c'est qu'il j'ai n'est d'un d'une",
    "it": "che è per sono gli della delle degli dei nel nella nelle alla alle "
          "anche più questo questa questi quello quella come ho hai abbiamo "
          "siamo io lui lei loro noi voi mio mia suo perché dove già ancora molto",
    "de": "der und ist nicht ein eine einen einem mit sich auch auf für von dem "
          "den zu ich sie wir aber oder noch nur schon wenn dass sehr wird werden "
          "hat haben bin bist sind kann über nach bei aus durch mein dein kein keine",
    "nl": "het een van niet dat op zijn voor met ook maar aan hij zij wij ik naar "
          "wel nog bij uit wordt worden om deze heeft hebben geen mijn ons onze",
    "pl": "nie się jest że w z jak ale tak czy jego jej oraz który która które "
          "być był była tylko już może bardzo jestem są mnie tego ten przez dla "
          "od przy także",
    "tr": "ve bir bu için ile çok ama gibi olarak daha ben sen biz siz onlar "
          "değil var yok mı mu mü şey kadar sonra önce",
    "id": "yang ini itu dengan untuk tidak dari akan ada juga atau pada saya "
          "kamu mereka sudah bisa adalah dalam ke karena oleh telah kami kita "
          "belum harus",
    "vi": "của và là không những các có được này cho với một người trong đã "
          "sẽ cũng như khi để từ đó rất nhưng tôi bạn chúng",
    "ru": "что это и как его она они был была было есть который которая "
          "которые только уже еще ещё тоже или от он мы вы но меня тебя себя "
          "нет да с бы",
    "uk": "що це і й як його вона вони був була було є який яка які тільки вже "
          "ще теж або від він ми ви але мене ні немає з б",
}

#: Words that are common in two or more of the 17 languages (``que``, ``la``,
#: ``de``, ``no``, ``se`` ...): a marker for none of them.
_SHARED = frozenset(
    ["a", "o", "e", "i", "de", "da", "do", "das", "dos", "la", "le", "les", "el", "lo", "al", "del", "se", "que", "por", "para", "como", "con", "mi", "tu", "su", "sua", "no", "nos", "os", "en", "un", "una", "uno", "era", "vamos", "ser", "somos", "algo", "este", "esta", "desde", "sobre", "entre", "nada", "porque", "quando", "está", "están", "mas", "mais", "ou", "il", "di", "ma", "ne", "non", "qui", "ce", "te", "je", "dit", "die", "was", "wie", "er", "es", "is", "over", "dan", "ha", "sei", "ta", "та", "так", "все", "тебе", "себе", "не", "на", "в", "по", "у", "же", "для", "to", "na", "do", "po", "mes", "son", "her", "me", "as", "on"]
)


def _build() -> dict[str, frozenset[str]]:
    words: dict[str, set[str]] = {lang: set(raw.split()) - _SHARED for lang, raw in _RAW.items()}
    owners: dict[str, int] = {}
    for ws in words.values():
        for w in ws:
            owners[w] = owners.get(w, 0) + 1
    return {lang: frozenset(w for w in ws if owners[w] == 1) for lang, ws in words.items()}


#: language -> function words exclusive to it among the lists above.
MARKERS: dict[str, frozenset[str]] = _build()

#: word -> the one language it marks.
MARKER_LANGUAGE: dict[str, str] = {w: lang for lang, ws in MARKERS.items() for w in ws}


#: Words that tell a requested language from one look-alike neighbour when a
#: character n-gram model cannot: ``{(requested, neighbour): (requested's,
#: neighbour's)}``.  Indonesian and Malaysian Malay share most of their
#: vocabulary; they differ in a known set of everyday words and spellings
#: (``karena``/``kerana``, ``saja``/``sahaja``, ``uang``/``wang``,
#: ``bisa``/``boleh``, ``-itas``/``-iti`` loans ...), the classic lexical cue of
#: the "discriminating similar languages" task (Zampieri et al., DSL shared
#: task, VarDial 2014-2017).  Hand-made from grammar and dictionaries, not from
#: the test data; a word common in both standards is left out (``boleh``,
#: ``kereta``, ``kerajaan``, ``ketika``, ``daripada``).
DISTINGUISHING: dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]] = {
    ("id", "ms"): (
        frozenset(
            ["karena", "saja", "uang", "bisa", "kantor", "polisi", "bisnis", "yaitu", "bahwa", "maupun", "mobil", "kamar", "silakan", "paham", "coba", "jadwal", "kendaraan", "berbagi", "menemukan", "ditemukan", "mempergunakan", "dipergunakan", "universitas", "kualitas", "aktivitas", "komunitas", "fasilitas", "kapasitas", "nggak", "enggak", "gak", "udah", "aja", "banget", "dong", "sih", "kok", "gimana", "kayak", "bikin", "pengen", "gue", "lo"]
        ),
        frozenset(
            ["kerana", "sahaja", "wang", "polis", "bisnes", "iaitu", "bahawa", "mahupun", "bilik", "sila", "faham", "cuba", "jadual", "kenderaan", "berkongsi", "menjumpai", "memandangkan", "manakala", "mengikut", "menerusi", "syarikat", "universiti", "kualiti", "aktiviti", "komuniti", "kemudahan", "percuma", "seronok", "televisyen", "teksi", "hospital"]
        ),
    ),
}
