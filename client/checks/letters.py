"""Letters of another language inside a script the requested language shares with it.

Language detection and the foreign-script check (:mod:`.scripts`) cannot
see a mix inside one script: Ukrainian ``і ї є`` words in a Russian reply,
Russian ``ы э ъ ё`` words in a Ukrainian one, Serbian ``ј љ њ`` or a
Bulgarian ``ъ`` vowel in either, ``ñ`` words in Portuguese, Vietnamese tone
letters in German, hanja put in place of Hangul words in a Korean reply, a
Chinese request answered in Japanese (the Han characters are shared: kana
and the Japanese-only character forms decide), a Japanese one in Chinese
(``这 们 说``).  This module asks: *does the reply hold words whose letters
another language of its script writes and it never does?*  It reads the
table of :mod:`.alphabets`.

Rules, in order (:func:`foreign_words`, :func:`check_foreign_letters`):

1. **Not prose, not judged**: code spans and blocks, URLs, e-mail
   addresses, HTML tags and the probe's closing marker are blanked
   (:func:`.scripts.prose`).  In Cyrillic, a Latin look-alike inside a
   Cyrillic word reads as its Cyrillic letter (``пiдняв`` with a Latin ``i``
   is Ukrainian).
2. **Foreign units**:

   - in an alphabetic home script (Latin, Cyrillic, Arabic): a *lower-case*
     word holding a letter of that script outside the language's letters
     and loan letters, or a neighbour's spelling
     (:attr:`.alphabets.Alphabet.forms`); a punctuation mark only another
     language of the script writes (``¿``); once one such word is found, a
     neighbour's everyday words too (:attr:`.alphabets.Alphabet.words`:
     ``что``, ``это`` in Ukrainian; they support a finding, never start one);
   - Chinese: a run of kana, a Han character only Japanese writes;
     Japanese: a Han character only Chinese writes, a run of
     :data:`HAN_CLAUSE` Han characters with no kana (a Chinese clause);
   - Korean: a run of two Han characters or more (a hanja word).

3. **Exempt**: a capitalised word (a name: ``Dvořák``, ``Київ``, ``España``);
   a unit in brackets on its line (a gloss or an aside: ``변수(變數)``,
   ``Киев (укр. Київ)``); a unit in quotes or emphasis that hold at most
   :data:`QUOTED_LETTERS` letters (a quoted word, name or title:
   ``«Киевской старины»``; a line of dialogue is longer); a gloss after a
   colon or dash that ends its sentence; a hanja word read in brackets right
   after it (``道(도)``); a single hanja (the press's ``美 中 北 男 女``); kana
   of a kaomoji.
4. **A loanword passes**: one foreign word is a loan, a cited word or a
   name written in lower case; the reply fails with :data:`MIN_WORDS`
   distinct foreign units or more.
5. **Damage is not a language**: a word whose foreign letters are all the
   language's own letters in its legacy code page read as cp1252
   (``yýlýnda``, ``þeref``: Turkish in cp1254; 243 of the 1000 real
   Turkish sentences) is encoding damage: ``encoding_broken``, not
   ``foreign_letters``, when every unit is such a word.

Calibration: on the 16 141 real sentences of ``shared/data/lang`` and their
replies of 2-5 sentences the check never fails, though the real Ukrainian
text holds a Russian word here and there (``сырца``, ``превращён``: one
per reply at most) and quotes Russian titles (benchmarks/language_table.py,
row "foreign_letters").  Cost on a 300-token reply with nothing foreign: one
class scan of the home script's foreign letters, for Han one encode in the
language's own character set (benchmarks/checks_bench.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from heapq import merge
from itertools import chain

from reverie_canary.client.checks.alphabets import (
    ARABIC,
    CYRILLIC,
    HAN,
    KANA,
    LATIN,
    TABLE,
    base_letters,
    codepage_readings,
    fold,
    foreign_han,
    owners,
    sibling_scripts,
)
from reverie_canary.client.checks.scripts import (
    _BRACKETS,
    _GLOSS_AFTER,
    _GLOSS_BEFORE,
    _QUOTES,
    SCRIPTS,
    _enclosed,
    _kaomoji_part,
    prose,
)
from reverie_canary.client.checks.text import SENTINEL_RE, fold_homoglyphs
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

CHECK = "script.foreign_letters"
REASON = "foreign_letters"

#: Distinct foreign units a reply needs to fail (rule 4).
MIN_WORDS = 2
#: A quote or emphasis holding at most this many letters is a quoted word, name or title (rule 3).
QUOTED_LETTERS = 24
#: A run of this many Han characters with no kana or punctuation between is a Chinese clause in
#: Japanese (Japanese prose puts kana between its words; a compound noun this long is rare).
HAN_CLAUSE = 12
#: Kana of a kaomoji: at most this many between symbols (rule 3).
KAOMOJI_LETTERS = 3
#: Characters of a reply the check reads; candidate units it examines and distinct units it finds at most.
SCAN_CHARS = 16 * 1024
MAX_UNITS = 64
MAX_FOUND = 5

_COMBINING = "\u0300-\u036f"
_JOINERS = "'’ʼ\\-"
_JOINER_CHARS = "'’ʼ-"
_CASED = frozenset({LATIN, CYRILLIC})
#: Characters of the Latin class that belong to no language: the ordinal indicators ``ª º`` and the
#: full-width forms of the ASCII letters (CJK typesetting).
_NOT_LANGUAGE_LETTERS = "ªº" + "".join(map(chr, range(0xFF21, 0xFF3B))) + "".join(map(chr, range(0xFF41, 0xFF5B)))


@dataclass(frozen=True)
class Unit:
    """One foreign unit: where it is, what it is, whose it is.

    Attributes:
        start, end: offsets into the reply's text.
        kind: ``letters`` (a word with foreign letters), ``form`` (a
            neighbour's spelling), ``word`` (a neighbour's everyday word),
            ``mark`` (punctuation), ``kana``, ``han`` (a character one
            sibling writes), ``clause`` (Han without kana), ``hanja``,
            ``codepage`` (a word whose foreign letters are all its own
            letters in its legacy code page read as cp1252: damage).
        languages: who writes it (``uk``, ``bg``, ``ja`` ...; ``other`` when
            none of the table; the code page for ``codepage``).
        key: what makes it distinct (the word in lower case).
    """

    start: int
    end: int
    kind: str
    languages: tuple[str, ...]
    key: str


class _Patterns:
    """The compiled patterns of one requested language."""

    def __init__(self, lang: str) -> None:
        entry = TABLE[lang]
        self.lang = lang
        self.alphabetic = [s for s in sorted(entry.home) if s in (LATIN, CYRILLIC, ARABIC)]
        self.allowed = {lang_letter for ch in entry.letters + entry.loans for lang_letter in (ch, ch.upper())}
        if LATIN in entry.home:
            self.allowed |= set(_NOT_LANGUAGE_LETTERS)
        classes = "".join(SCRIPTS[s] for s in self.alphabetic)
        #: a letter of the home script the language never writes (one explicit class: a fast scan)
        foreign = sorted(_expand(classes) - self.allowed)
        self.foreign_letter = re.compile(f"[{_ranges(foreign)}]") if foreign else _NEVER
        self.word = re.compile(f"[{classes}{_COMBINING}]+(?:[{_JOINERS}][{classes}{_COMBINING}]+)*") if classes else None
        self.forms = [(re.compile(p), who) for p, who in entry.forms]
        self.form_any = re.compile("|".join(p for p, _ in entry.forms)) if entry.forms else None
        #: the first character of every form (``ъ``, the apostrophes): no form without one of them
        self.form_cues = "".join(sorted({ch for p, _ in entry.forms for ch in _first_class(p)}))
        self.words = {w: who for who, words in entry.words for w in words.split()}
        #: runs of the script's letters: the reply's words, to meet :attr:`words` by set intersection
        self.token = re.compile(f"[{classes}]+") if classes else None
        sibling_marks = {m: other for other, o in TABLE.items() if other != lang and o.home & entry.home
                         for m in o.marks if m not in entry.marks}
        self.marks = sibling_marks
        self.mark = re.compile(f"[{re.escape(''.join(sibling_marks))}]") if sibling_marks else None
        kana = KANA in sibling_scripts(lang)
        self.kana = re.compile(f"[{SCRIPTS[KANA]}]+") if kana else None
        self.foreign_han = foreign_han(lang)
        self.han_words = re.compile(f"[{SCRIPTS[HAN]}]{{2,}}") if entry.han_words else None
        self.cased = bool(_CASED & set(self.alphabetic))
        self.cyrillic = CYRILLIC in entry.home
        self.han = re.compile(f"[{SCRIPTS[HAN]}]+") if self.foreign_han else None
        self.han_codecs = entry.han
        #: the language writes kana between its Han characters: a long run without any is another's clause
        self.han_clause = re.compile(f"[{SCRIPTS[HAN]}]{{{HAN_CLAUSE},}}") if KANA in entry.home else None
        #: letters that are this language's own, in its legacy code page read as cp1252
        self.codepage = codepage_readings(lang)


_NEVER = re.compile(r"(?!)")
_LATIN_RUN = re.compile("[A-Za-z]+")
#: Every byte but the ASCII letters: what ``bytes.translate`` deletes to see whether any Latin letter is left.
_NOT_ASCII_LETTERS = bytes(b for b in range(256) if not (65 <= b <= 90 or 97 <= b <= 122))


def _latin_in_cyrillic(text: str) -> bool:
    """A Latin letter touching a Cyrillic one, or a lone ``i`` between words.

    The cue for :func:`.text.fold_homoglyphs`, whose own pattern is slow on
    long Cyrillic text: one scan for Latin runs (few in Russian or Ukrainian
    prose), each looked at once.
    """
    for m in _LATIN_RUN.finditer(text):
        before = text[m.start() - 1] if m.start() else " "
        after = text[m.end()] if m.end() < len(text) else " "
        if "\u0400" <= before <= "\u04ff" or "\u0400" <= after <= "\u04ff":
            return True
        if m.group() in ("i", "I") and before == " " and after == " ":
            return True
    return False


def _first_class(pattern: str) -> str:
    """The characters a form's pattern can start with: its first character or first ``[...]`` class."""
    if pattern.startswith("["):
        return pattern[1:pattern.index("]")]
    return pattern[0]


def _expand(classes: str) -> set[str]:
    """The characters of a regular-expression class body made of characters and ``a-b`` ranges."""
    out: set[str] = set()
    i = 0
    while i < len(classes):
        if i + 2 < len(classes) and classes[i + 1] == "-":
            out.update(map(chr, range(ord(classes[i]), ord(classes[i + 2]) + 1)))
            i += 3
        else:
            out.add(classes[i])
            i += 1
    return out


def _ranges(chars: list[str]) -> str:
    """A class body for sorted ``chars``, consecutive code points as ranges."""
    parts: list[str] = []
    i = 0
    while i < len(chars):
        j = i
        while j + 1 < len(chars) and ord(chars[j + 1]) == ord(chars[j]) + 1:
            j += 1
        parts.append(re.escape(chars[i]) if i == j else f"{re.escape(chars[i])}-{re.escape(chars[j])}")
        i = j + 1
    return "".join(parts)


@lru_cache(maxsize=32)
def _patterns(lang: str) -> _Patterns:
    return _Patterns(lang)


def _letters(text: str) -> int:
    return sum(1 for ch in text if ch.isalpha())


def _exempt(text: str, start: int, end: int) -> str | None:
    """Why the unit ``text[start:end]`` is legitimate, or ``None`` (rule 3, position rules)."""
    if _enclosed(text, start, end, _BRACKETS):
        return "brackets"
    quoted = _enclosed(text, start, end, _QUOTES)
    if quoted and _letters(text[quoted[0] + 1:quoted[1]]) <= QUOTED_LETTERS:
        return "quoted"
    before = text[:start].rstrip(" \t")
    after = text[end:].lstrip(" \t")
    if before and before[-1] in _GLOSS_BEFORE and (not after or after[0] in _GLOSS_AFTER):
        return "gloss"
    return None


def _word_at(clean: str, p: _Patterns, at: int) -> re.Match[str] | None:
    """The word of the home script that holds offset ``at`` (joined by apostrophes and hyphens)."""
    start = at
    lo = max(0, at - 64)
    while start > lo and (clean[start - 1].isalpha() or clean[start - 1] in _JOINER_CHARS
                          or unicodedata.combining(clean[start - 1])):
        start -= 1
    while start < at and clean[start] in _JOINER_CHARS:
        start += 1
    m = p.word.match(clean, start)
    return m if m is not None and m.end() > at else None


def _judge_word(word: str, p: _Patterns) -> tuple[str, set[str]]:
    """``(kind, languages)`` of a lower-case word with a foreign letter or spelling; ``("", ...)`` if neither."""
    languages: set[str] = set()
    kind = ""
    letters = {ch for ch in base_letters(word) if ch.isalpha() and fold(ch) not in p.allowed}
    if letters and letters <= p.codepage.keys():
        kind = "codepage"
        languages.add(TABLE[p.lang].codepage)
    elif letters:
        kind = "letters"
        for letter in letters:
            languages.update(owners(fold(letter)) or ["other"])
    if p.forms:
        low = word.lower()
        for pattern, who in p.forms:
            if pattern.search(low):
                kind = kind or "form"
                languages.add(who)
    return kind, languages


def _word_units(clean: str, p: _Patterns) -> Iterator[Unit]:
    """Lower-case words with foreign letters or a neighbour's spelling, then its everyday words (rule 2).

    Only the words around a foreign letter or a form are looked at; a
    neighbour's everyday words (:attr:`.alphabets.Alphabet.words`) support a
    finding once one such word is found, and never start one.
    """
    if p.word is None:
        return
    hits = [p.foreign_letter.finditer(clean)]
    if p.form_any is not None and any(ch in clean for ch in p.form_cues):
        hits.append(p.form_any.finditer(clean))
    done = -1
    found = False
    for hit in merge(*hits, key=lambda h: h.start()):
        if hit.start() < done:
            continue
        m = _word_at(clean, p, hit.start())
        if m is None:
            continue
        done = m.end()
        word = m.group()
        if p.cased and word[0].isupper():
            continue  # a name
        kind, languages = _judge_word(word, p)
        if not kind:
            continue
        languages.discard(p.lang)
        found = True
        yield Unit(m.start(), m.end(), kind, tuple(sorted(languages or {"other"})), word.lower())
    if found and p.words:
        for m in p.word.finditer(clean):
            who = p.words.get(m.group())
            if who is not None:
                yield Unit(m.start(), m.end(), "word", (who,), m.group())


def _mark_units(clean: str, p: _Patterns) -> Iterator[Unit]:
    """Punctuation only a sibling language writes (``¿ ¡``), each with the words it opens (rule 2)."""
    if p.mark is None or not any(mark in clean for mark in p.marks):
        return
    for m in p.mark.finditer(clean):
        yield Unit(m.start(), m.end(), "mark", (p.marks[m.group()],), clean[m.start():m.start() + 16].lower())


def _encodes(text: str, codecs: tuple[str, ...]) -> bool:
    """Whether one of the language's own character sets encodes ``text``: then no Han character is foreign.

    A C-level pass that stops at the first character the set lacks; a
    Japanese reply is almost always all in cp932, a Chinese one in GB2312 or Big5.
    """
    for codec in codecs:
        try:
            text.encode(codec)
        except UnicodeEncodeError:
            continue
        return True
    return False


def _han_units(clean: str, p: _Patterns) -> Iterator[Unit]:
    """Kana runs, Han characters only a sibling writes, hanja words (rule 2, Han scripts)."""
    if p.kana is not None:
        for m in p.kana.finditer(clean):
            if len(m.group()) <= KAOMOJI_LETTERS and _kaomoji_part(clean, m.start(), m.end()):
                continue
            yield Unit(m.start(), m.end(), "kana", ("ja",), m.group())
    if p.han is not None:
        foreign = p.foreign_han
        who = ("zh",) if p.lang == "ja" else ("ja",)
        if p.han_clause is not None:
            for m in p.han_clause.finditer(clean):
                yield Unit(m.start(), m.end(), "clause", who, m.group())
        if not _encodes(clean, p.han_codecs) and not foreign.isdisjoint(clean):  # the runs only on a hit
            for m in p.han.finditer(clean):
                run = m.group()
                if foreign.isdisjoint(run):
                    continue
                for i, ch in enumerate(run):
                    if ch in foreign:
                        yield Unit(m.start() + i, m.start() + i + 1, "han", who, ch)
    if p.han_words is not None:
        for m in p.han_words.finditer(clean):
            if clean[m.end():m.end() + 1] in ("(", "（"):
                continue  # read in brackets right after it: 道(도)
            yield Unit(m.start(), m.end(), "hanja", ("hanja",), m.group())


def foreign_words(text: str, lang: str) -> list[Unit]:
    """The foreign units of ``text`` that no exemption covers (rules 1-3).

    Args:
        text: the reply's visible text.
        lang: the requested language (a key of :data:`.alphabets.TABLE`).

    Returns:
        The units in order of appearance (offsets into ``text``); the search
        stops at :data:`MAX_FOUND` distinct units or :data:`MAX_UNITS`
        examined; ``[]`` for ASCII text or a language outside the table.
    """
    if lang not in TABLE or text.isascii():
        return []
    p = _patterns(lang)
    clean = prose(text)
    if "[" in clean:
        clean = SENTINEL_RE.sub(lambda m: " " * len(m.group()), clean)  # the probe's closing marker
    if p.cyrillic and clean.encode("ascii", "ignore").translate(None, _NOT_ASCII_LETTERS) and _latin_in_cyrillic(clean):
        clean = fold_homoglyphs(clean)  # one character for one: offsets hold
    found: list[Unit] = []
    keys: set[str] = set()
    for examined, unit in enumerate(chain(_word_units(clean, p), _mark_units(clean, p), _han_units(clean, p))):
        if examined >= MAX_UNITS or len(keys) >= MAX_FOUND:
            break  # bounded work: the verdict is known
        if _exempt(clean, unit.start, unit.end) is None:
            found.append(unit)
            keys.add(unit.key)
    return sorted(found, key=lambda u: u.start)


def warm_up() -> None:
    """Compile every language's patterns and decode the Han character sets now, not on a first reply.

    About 0.1 s of CPU, once per process (the prober calls it at start).
    """
    for lang in TABLE:
        _patterns(lang)


def check_foreign_letters(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail words of another language of the same script (rule 4: :data:`MIN_WORDS` distinct units).

    Judged on the first :data:`SCAN_CHARS` characters.  When every unit is
    code-page damage (rule 5) the reason is ``encoding_broken`` (evidence
    ``defect: codepage``, ``codepage``, ``read_as``, ``words``, ``count``,
    ``span``).  Otherwise the reason is ``foreign_letters``; evidence: ``words``
    (up to five distinct units, 40 characters each), ``languages`` (whose
    letters they are), ``kinds``, ``count`` (distinct units), ``span`` (the
    text around the first).
    """
    lang = spec.language
    if lang not in TABLE:
        return CheckResult(check=CHECK, outcome="pass")
    text = reply.text[:SCAN_CHARS]
    units = foreign_words(text, lang)
    distinct: dict[str, Unit] = {}
    for u in units:
        distinct.setdefault(u.key, u)
    if len(distinct) < MIN_WORDS:
        return CheckResult(check=CHECK, outcome="pass")
    found = list(distinct.values())
    first = found[0]
    if all(u.kind == "codepage" for u in found):
        entry = TABLE[lang]
        return CheckResult(check=CHECK, outcome="fail", reason="encoding_broken", evidence={
            "defect": "codepage", "codepage": entry.codepage, "read_as": "cp1252",
            "words": [text[u.start:u.end][:40] for u in found[:MAX_FOUND]], "count": len(found),
            "span": text[max(0, first.start - 30):first.end + 30]})
    return CheckResult(check=CHECK, outcome="fail", reason=REASON, evidence={
        "words": [text[u.start:u.end][:40] for u in found[:MAX_FOUND]],
        "languages": sorted({who for u in found for who in u.languages}),
        "kinds": sorted({u.kind for u in found}),
        "count": len(found),
        "span": text[max(0, first.start - 30):first.end + 30],
    })
