"""The letters and scripts of the 17 languages: one table, read by the script and letter checks.

For each language (:data:`TABLE`, keyed by ISO 639-1 code):

- ``home``: the scripts its prose is written in (Cyrillic for Russian, Han
  and kana for Japanese);
- ``shared``: other scripts a reply in it may hold (Latin for names, brands
  and units in every non-Latin language; hanja in Korean; bopomofo in
  Chinese);
- ``letters``: every letter it writes in an alphabetic home script (lower
  case): a letter of that script outside them belongs to another language
  (``і`` in Russian is Ukrainian, ``ы`` in Ukrainian Russian, ``ñ`` in
  Portuguese Spanish, ``ş`` in German Turkish);
- ``loans``: letters that loanwords and names bring into lower-case words and
  that pass (``café``, ``naïve``, ``jalapeño`` in English; ``Citroën``-type
  names are capitalised and pass anyway);
- ``marks``: punctuation only it writes (Spanish ``¿ ¡``);
- ``forms``: spellings in its own letters that only a neighbour writes
  (Bulgarian ``ъ`` as a vowel, ``във``, ``България``, inside Russian, where
  ``ъ`` only stands before ``е ё ю я``; the Ukrainian apostrophe of
  ``пам'ять``);
- ``words``: everyday words, in its own letters, of a neighbour that shares
  them, which it never writes (``что``, ``это`` in Ukrainian; ``що``,
  ``дуже`` in Russian; Bulgarian ``това``, ``които``, ``ще`` in Russian):
  a Russian sentence whose letters are all Ukrainian ones still shows;
- ``han``: for the languages written in Han characters, the character sets
  that hold what they write: Japanese writes the Han characters of JIS
  X 0208 and its Windows extensions (``cp932``), Chinese those of GB2312
  (simplified) and Big5 (traditional).  A Han character one of them writes
  and the other never does tells them apart: ``这 们 说 個`` are Chinese,
  ``気 駅 売 込`` Japanese.  Derived from Python's own codecs, not listed;
- ``codepage``: the legacy Windows code page of its text; a letter that is
  that page's byte for one of its own letters read as cp1252 is damage, not
  another language (Turkish ``yýlýnda`` for ``yılında``: cp1254 read as
  cp1252; :func:`codepage_readings`);
- ``han_words``: Korean writes Sino-Korean words in Hangul; a run of two Han
  characters or more stands for a word and needs its gloss (``변수(變數)``).

:data:`NEIGHBOURS` holds the letters of the look-alike languages next to the
17 (Belarusian, Bulgarian, Serbian, Macedonian, Czech, Slovak, Croatian),
only to say whose a foreign letter is.

How foreign material may legitimately appear (a gloss in brackets, a quoted
name, a loanword) is the check's business (:mod:`.letters`); this module is
data and a few derived sets, with no import beyond the standard library.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from itertools import chain

LATIN, CYRILLIC, ARABIC, HAN, KANA, HANGUL, BOPOMOFO = "latin", "cyrillic", "arabic", "han", "kana", "hangul", "bopomofo"

_AZ = "abcdefghijklmnopqrstuvwxyz"
_RU = "абвгдеёжзийклмнопрстуфхцчшщъыьэюя"
_UK = "абвгґдеєжзиіїйклмнопрстуфхцчшщьюя"
#: The Arabic alphabet with its hamza and alef forms, ta marbuta, alef maqsura, the
#: vowel and shadda marks, the superscript alef and tatweel.
_AR = ("ءآأؤإئابةتثجحخدذرزسشصضطظعغفقكلمنهوىيٱ"
       "\u064b\u064c\u064d\u064e\u064f\u0650\u0651\u0652\u0653\u0654\u0655\u0670\u0640")
_VI = ("àáâãèéêìíòóôõùúýăđĩũơư"
       "ạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ")


@dataclass(frozen=True)
class Alphabet:
    """What one language writes (module docstring).

    Attributes:
        home: scripts of its prose.
        shared: other scripts its replies may hold.
        letters: every letter of its alphabetic home script it writes (lower case); empty
            for a language written in Han or Hangul.
        loans: letters of loanwords that pass in lower-case words.
        marks: punctuation only it writes.
        forms: ``(regular expression, language)`` pairs: spellings in its own letters
            that only ``language`` writes, matched on a lower-case word.
        words: ``(language, words)`` pairs: words of ``language`` (space-separated, lower
            case) written in letters the language has, that it never writes.
        han: codecs whose Han characters it writes (``gb2312``, ``big5``, ``cp932``).
        han_words: a run of two Han characters or more stands for a native word and needs a gloss.
        codepage: its legacy Windows code page (``cp1254`` for Turkish).
    """

    home: frozenset[str]
    shared: frozenset[str] = frozenset()
    letters: str = ""
    loans: str = ""
    marks: str = ""
    forms: tuple[tuple[str, str], ...] = ()
    words: tuple[tuple[str, str], ...] = ()
    han: tuple[str, ...] = ()
    han_words: bool = False
    codepage: str = "cp1252"


def _latin(letters: str, loans: str = "", marks: str = "", codepage: str = "cp1252") -> Alphabet:
    return Alphabet(home=frozenset({LATIN}), letters=_AZ + letters, loans=loans, marks=marks, codepage=codepage)


_EUROPEAN_LOANS = "àáâäæçèéêëìíîïñòóôöœùúûüÿ"
#: Cyrillic consonants: a Russian ``ъ`` stands only after a prefix, before ``е ё ю я``.
_RU_CONSONANTS = "бвгджзйклмнпрстфхцчшщ"

#: Everyday words of Russian, Ukrainian and Bulgarian in letters the other two share: function
#: words, pronouns and auxiliaries only (never a word the other language writes with another
#: meaning: Ukrainian ``он`` "over there", ``уже`` "narrower", ``от`` "here", ``все`` "all";
#: Russian ``тут`` "here", ``тому`` "to that", ``зараз`` "at once"), and no one-letter word
#: (Russian ``и``, ``к``, ``с`` stand in Ukrainian lists and abbreviations; ``й`` ends ``1-й``).
_RU_WORDS = ("что это как она они его ее её еще только когда если очень тоже нет или который которая "
             "которое которые которого которой мне меня тебя себя может будет есть где кто чтобы сейчас "
             "здесь между после нужно надо сегодня всегда из чем также лишь года время более можно "
             "человек этого этой этом всех всего своих чего него год лет ему")
_UK_WORDS = ("що це як вона вони був була було який яка яке які тільки вже дуже теж або від але мене "
             "немає ні є його її якщо можна треба сьогодні завжди щоб також навіть лише року чи йому "
             "нього чого цей цього")
_BG_WORDS = "това които която което който беше тези този тази сега нещо няма трябва"

#: The 17 languages: their scripts, letters, loan letters, marks and forms (module docstring).
TABLE: dict[str, Alphabet] = {
    "en": _latin("", loans=_EUROPEAN_LOANS),
    "es": _latin("áéíóúüñ", loans="àèïòç", marks="¿¡"),
    "pt": _latin("áâãàçéêíóôõúü", loans="èïöä"),
    "fr": _latin("àâæçéèêëîïôœùûüÿ", loans="áíóúñäöåø"),
    "de": _latin("äöüß", loans="àéè"),
    "it": _latin("àèéìíîòóùú", loans="âçêëïôûäöüñ"),
    "nl": _latin("áàäçéèêëíïóöúü", loans="âîôûñœ"),
    "pl": _latin("ąćęłńóśźż", loans="éèàáíúç", codepage="cp1250"),
    "tr": _latin("çğıöşüâîû", loans="äéë", codepage="cp1254"),
    "id": _latin("", loans=_EUROPEAN_LOANS),
    "vi": _latin(_VI, codepage="cp1258"),
    "ru": Alphabet(home=frozenset({CYRILLIC}), shared=frozenset({LATIN}), letters=_RU,
                   forms=((f"ъ(?=[{_RU_CONSONANTS}])", "bg"), ("['’ʼ](?=[яюєї])", "uk")),
                   words=(("uk", _UK_WORDS), ("bg", _BG_WORDS + " ще са"))),
    "uk": Alphabet(home=frozenset({CYRILLIC}), shared=frozenset({LATIN}), letters=_UK,
                   words=(("ru", _RU_WORDS), ("bg", _BG_WORDS))),
    # Persian keheh and yeh and the Urdu heh (ک ی ھ) are keyboard variants of ك ي ه in Arabic
    # web text; veh (ڤ) writes a foreign v.  Persian پ چ ژ گ and Urdu letters are another language.
    "ar": Alphabet(home=frozenset({ARABIC}), shared=frozenset({LATIN}), letters=_AR, loans="کیھڤ"),
    "ja": Alphabet(home=frozenset({HAN, KANA}), shared=frozenset({LATIN}), han=("cp932",)),
    "zh": Alphabet(home=frozenset({HAN}), shared=frozenset({LATIN, BOPOMOFO}), han=("gb2312", "big5")),
    "ko": Alphabet(home=frozenset({HANGUL}), shared=frozenset({LATIN, HAN}), han_words=True),
}

#: Letters of the look-alike neighbours (lower case), to say whose a foreign letter is.
NEIGHBOURS: dict[str, str] = {
    "be": "абвгдеёжзійклмнопрстуўфхцчшыьэюя",
    "bg": "абвгдежзийклмнопрстуфхцчшщъьюяѝ",
    "sr": "абвгдђежзијклљмнњопрстћуфхцчџш",
    "mk": "абвгдѓежзѕијклљмнњопрстќуфхцчџш",
    "cs": _AZ + "áčďéěíňóřšťúůýž",
    "sk": _AZ + "áäčďéíĺľňóôŕšťúýž",
    "hr": _AZ + "čćđšž",
}


def scripts_of(lang: str) -> frozenset[str]:
    """Every script a reply in ``lang`` may hold: its home scripts and the shared ones."""
    entry = TABLE[lang]
    return entry.home | entry.shared


def owners(letter: str) -> list[str]:
    """The languages of :data:`TABLE` and :data:`NEIGHBOURS` that write ``letter`` (lower case), sorted."""
    out = [lang for lang, entry in TABLE.items() if letter in entry.letters]
    out.extend(lang for lang, letters in NEIGHBOURS.items() if letter in letters)
    return sorted(out)


# -- Han characters by character set ------------------------------------------------------------

#: Byte ranges of each double-byte character set: (lead bytes, trail bytes).
_GRIDS: dict[str, tuple[range | list[int], range | list[int]]] = {
    "gb2312": (range(0xA1, 0xFF), range(0xA1, 0xFF)),
    "big5": (range(0x81, 0xFF), [*range(0x40, 0x7F), *range(0xA1, 0xFF)]),
    "cp932": ([*range(0x81, 0xA0), *range(0xE0, 0xFD)], [*range(0x40, 0x7F), *range(0x80, 0xFD)]),
}


_HAN = re.compile("[\u3400-\u9fff\uf900-\ufaff]")


@cache
def han_of(codec: str) -> frozenset[str]:
    """The Han characters of one character set, as Python's codec ``codec`` decodes it.

    Every two-byte code is decoded once (an ASCII space between codes keeps an
    invalid code from shifting the next); a few milliseconds, once per process.
    """
    leads, trails = _GRIDS[codec]
    data = bytes(chain.from_iterable((a, b, 0x20) for a in leads for b in trails))
    return frozenset(_HAN.findall(data.decode(codec, errors="ignore")))


@cache
def foreign_han(lang: str) -> frozenset[str]:
    """Han characters another Han-writing language writes and ``lang`` never does.

    For Japanese: GB2312 and Big5 characters outside cp932 (``这 们 说 這 們``);
    for Chinese: cp932 characters outside GB2312 and Big5 (``気 駅 売 込``).
    Empty for a language that does not write Han as its own (Korean's hanja
    are judged as words, :attr:`Alphabet.han_words`).
    """
    own_sets = TABLE[lang].han
    if not own_sets:
        return frozenset()
    own = frozenset().union(*(han_of(c) for c in own_sets))
    others = frozenset().union(*(han_of(c) for other, entry in TABLE.items() if other != lang for c in entry.han))
    return others - own


def sibling_scripts(lang: str) -> frozenset[str]:
    """Home scripts of the languages that share a home script with ``lang`` and that ``lang`` never writes.

    Kana for Chinese (Japanese shares its Han characters): kana in a Chinese
    reply is Japanese.
    """
    entry = TABLE[lang]
    out: set[str] = set()
    for other, o in TABLE.items():
        if other != lang and o.home & entry.home:
            out |= o.home - entry.home - entry.shared
    return frozenset(out)


@cache
def codepage_readings(lang: str) -> dict[str, str]:
    """Letters that are ``lang``'s own letters in its legacy code page read as cp1252: ``{reading: letter}``.

    Only readings that are letters ``lang`` never writes: ``{"ý": "ı", "þ": "ş", "ð": "ğ", ...}`` for
    Turkish (cp1254), ``{"œ": "ś", "ñ": "ń", ...}`` for Polish (cp1250); empty for a cp1252 language.
    """
    entry = TABLE[lang]
    if entry.codepage == "cp1252" or not entry.letters:
        return {}
    out: dict[str, str] = {}
    for byte in range(0x80, 0x100):
        try:
            letter = bytes((byte,)).decode(entry.codepage)
            reading = bytes((byte,)).decode("cp1252")
        except UnicodeDecodeError:
            continue
        if (letter.isalpha() and fold(letter) in entry.letters and reading.isalpha()
                and fold(reading) not in entry.letters + entry.loans):
            out[reading] = letter
    return out


def fold(letter: str) -> str:
    """``letter`` in lower case (one character: Turkish ``İ`` is ``i``)."""
    low = letter.lower()
    return low[0] if low else letter


def _presentation_form(ch: str) -> bool:
    return "\ufb50" <= ch <= "\ufdff" or "\ufe70" <= ch <= "\ufeff"


def base_letters(word: str) -> str:
    """``word`` as letters: NFC, Arabic presentation forms in their plain letters, no stray combining marks.

    Old web text writes Arabic in presentation forms (``ﻻ`` for ``لا``); an
    accent that did not compose with its letter is not a letter.
    """
    if word.isascii():
        return word
    word = unicodedata.normalize("NFKC" if any(map(_presentation_form, word)) else "NFC", word)
    return "".join(ch for ch in word if not unicodedata.combining(ch) or "\u0610" <= ch <= "\u06ff")
