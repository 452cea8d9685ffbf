"""Script integrity: letters of a script the requested language never uses.

A broken sampler, a bad quantization or a tokenizer mismatch shows as one
character to a few words of another script inside an otherwise good reply
(``Mira ergue a 灯 lanterna``, ``the smugglers отступили down the stairs``;
DeepSeek-V3 #1045: isolated Chinese characters in English text).  A language
detector does not see them: they are far below any share a mixing rule can
use.  Scripts are cheap and exact, so this module asks a narrower question:
*does the reply hold letters of a script its language never writes?*

Rules, in order (:func:`foreign_runs`, :func:`check_foreign_script`):

1. **Which scripts a language uses** (:data:`ALLOWED`, from the table of
   :mod:`.alphabets`): its own script (:data:`HOME`) plus Latin for every non-Latin language (names, brands,
   units, acronyms: ``iPhone`` in Russian, ``Google`` in Japanese), Han for
   Korean (hanja) and Japanese, kana for Japanese only, bopomofo for
   Chinese.  Letters of scripts outside :data:`SCRIPTS` (Cherokee,
   Mongolian ...) are not judged.
2. **Not prose, not judged**: inline code and fenced blocks, URLs, e-mail
   addresses, HTML tags are blanked first.
3. **A run** is a maximal sequence of foreign letters, words joined by spaces,
   hyphens or apostrophes ("one character to a few words").  A run is
   *exempt* when it is:

   - in brackets ``( ) （ ） [ ] 【 】`` on its line: a gloss or an aside
     (``Fairy Tail (フェアリーテイル)``, ``haemul pajeon (해물파전)``);
   - in quotes or Markdown emphasis whose letters are mostly (>= half) the
     foreign run: a quoted foreign word (``he said «спасибо»``); the same
     run inside an English line of dialogue is not exempt;
   - a gloss after a colon or dash that ends its sentence
     (``…is Gideon : גדעון.``);
   - a kaomoji part: at most three letters between symbols (``(ﾉ◕ヮ◕)ﾉ``);
   - Greek of at most three letters (``π``, ``Δt``, ``β-1,3-glucanen``:
     symbols of mathematics and science).

4. **Only a reply in its own script is judged for runs**: its home script
   holds at least half of its letters (in the first :data:`SHARE_CHARS`
   characters) and at least :data:`MIN_HOME_LETTERS`.  A reply mostly in another script is the
   language check's (a switch or a mix, :mod:`.language`).
5. Emoji, symbols, digits and punctuation are not letters and never count.

Calibration: on the 16 141 real sentences of ``shared/data/lang`` (replies of
2-5 sentences, every language) the check never fails
(benchmarks/language_table.py, row "foreign script").

Whole short replies (item 6): :func:`short_reply_switch` tells the language
check that a reply too short to detect is nevertheless *all* in a script
its language never uses (``好的`` to a Portuguese request, ``Да.`` to an
English one): a switch, not an abstention.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from reverie_canary.client.checks.alphabets import TABLE, scripts_of
from reverie_canary.client.checks.tokens import mask_code
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

#: Script -> character class (letters and the script's combining marks).
SCRIPTS: dict[str, str] = {
    "latin": "A-Za-z\u00aa\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff\uff21-\uff3a\uff41-\uff5a",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "cyrillic": "\u0400-\u052f\u2de0-\u2dff\ua640-\ua69f",
    "armenian": "\u0531-\u0587",
    "hebrew": "\u05d0-\u05ea\u05b0-\u05c7\ufb1d-\ufb4f",
    "arabic": "\u0620-\u064a\u064b-\u065f\u066e-\u06d3\u06d5-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
    "indic": "\u0900-\u0963\u0966-\u0dff",
    "thai": "\u0e00-\u0eff",
    "tibetan": "\u0f00-\u0fff",
    "myanmar": "\u1000-\u109f",
    "georgian": "\u10a0-\u10ff",
    "hangul": "\u1100-\u11ff\u3131-\u318e\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff",
    "ethiopic": "\u1200-\u139f",
    "khmer": "\u1780-\u17ff",
    "kana": "\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "han": "\u3005\u3006\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff",
    "bopomofo": "\u3105-\u312f\u31a0-\u31bf",
}

#: The script each of the 17 languages is written in (its letters must hold most of a judged reply),
#: from the one table of letters and scripts (:data:`.alphabets.TABLE`).
HOME: dict[str, frozenset[str]] = {lang: entry.home for lang, entry in TABLE.items()}

#: Scripts a reply in the language may hold besides its home script (rule 1 of the module docstring).
ALLOWED: dict[str, frozenset[str]] = {lang: scripts_of(lang) for lang in TABLE}

#: A judged reply holds at least this many letters of its home script (rule 4).
MIN_HOME_LETTERS = 12
#: Greek runs up to this many letters are symbols (rule 3).
GREEK_SYMBOL_LETTERS = 3
#: Kaomoji parts up to this many letters between symbols (rule 3).
KAOMOJI_LETTERS = 3
#: Runs examined per reply at most, and unexempted runs reported at most (bounded work).
MAX_RUNS = 64
MAX_FOUND = 5
#: Characters of a reply the check reads (a 320-token reply is about 2 kB; a
#: capped 256 KiB reply costs no more than its first 16 KiB).
SCAN_CHARS = 16 * 1024
#: Characters of the prose the home-script share is measured on (rule 4).
SHARE_CHARS = 4 * 1024

_SCRIPT_OF_GROUP = re.compile("|".join(f"(?P<{name}>[{cls}])" for name, cls in SCRIPTS.items()))


@lru_cache(maxsize=32)
def _patterns(lang: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(any foreign letter, a foreign run) for ``lang``."""
    foreign = "".join(cls for name, cls in SCRIPTS.items() if name not in ALLOWED[lang])
    letter = f"[{foreign}]"
    return re.compile(letter), re.compile(rf"{letter}+(?:[ \u00a0'’\-·]+{letter}+)*")


_ANY_KNOWN = re.compile("[" + "".join(SCRIPTS.values()) + "]")


@lru_cache(maxsize=32)
def _home_pattern(lang: str) -> re.Pattern[str]:
    return re.compile("[" + "".join(SCRIPTS[s] for s in sorted(HOME[lang])) + "]")


def home_share(text: str, lang: str) -> tuple[int, int]:
    """``(letters of lang's home script, letters of any script in SCRIPTS)`` in ``text`` (two regex scans)."""
    return len(_home_pattern(lang).findall(text)), len(_ANY_KNOWN.findall(text))


def script_counts(text: str) -> dict[str, int]:
    """Letters of ``text`` per script of :data:`SCRIPTS` (marks included; other scripts not counted)."""
    counts: dict[str, int] = {}
    for m in _SCRIPT_OF_GROUP.finditer(text):
        name = m.lastgroup
        counts[name] = counts.get(name, 0) + 1
    return counts


_URL = re.compile(r"(?:\b(?:https?|ftp)://|\bwww\.)\S+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_TAG = re.compile(r"</?[A-Za-z][^>\n]{0,80}>")


def prose(text: str) -> str:
    """``text`` with code, URLs, e-mail addresses and HTML tags blanked (same length, rule 2)."""
    t = mask_code(text)
    for trigger, pattern in (("/", _URL), ("@", _EMAIL), ("<", _TAG)):
        if trigger in t:
            t = pattern.sub(lambda m: " " * len(m.group()), t)
    return t


_BRACKETS = {"(": ")", "（": "）", "[": "]", "【": "】"}
_QUOTES = {'"': '"', "“": "”", "„": "“", "«": "»", "‹": "›", "「": "」", "『": "』", "《": "》", "〈": "〉",
           "‘": "’", "*": "*", "_": "_"}
_GLOSS_BEFORE = ":：—–=→"
_GLOSS_AFTER = ".!?。！？;\n"


def _enclosed(text: str, start: int, end: int, pairs: dict[str, str]) -> tuple[int, int] | None:
    """The innermost pair of ``pairs`` around ``text[start:end]`` on its line: ``(open, close)`` offsets.

    Looks at most 200 characters each way (a gloss or a quoted word is short).
    """
    line_start = text.rfind("\n", 0, start) + 1
    lo = max(line_start, start - 200)
    line_end = text.find("\n", end)
    hi = min(len(text) if line_end < 0 else line_end, end + 200)
    best: tuple[int, int] | None = None
    for opener, close in pairs.items():
        i = text.rfind(opener, lo, start)
        if i < 0 or (best is not None and i <= best[0]):
            continue
        if close == opener:  # a symmetric mark opens after an even number of them (in the window)
            if text.count(opener, lo, i) % 2:
                continue
        elif text.count(close, i + 1, start):
            continue  # closed before the run
        j = text.find(close, end, hi)
        if j >= 0:
            best = (i, j)
    return best


def _letters(text: str) -> int:
    return sum(1 for ch in text if ch.isalpha())


def _exempt(text: str, start: int, end: int, run: str) -> str | None:
    """Why the foreign run ``text[start:end]`` is not a defect, or ``None`` (rule 3)."""
    letters = _letters(run)
    if letters <= GREEK_SYMBOL_LETTERS and script_counts(run).keys() == {"greek"}:
        return "greek_symbol"
    if _enclosed(text, start, end, _BRACKETS):
        return "brackets"
    quoted = _enclosed(text, start, end, _QUOTES)
    if quoted and letters * 2 >= _letters(text[quoted[0] + 1:quoted[1]]):
        return "quoted"
    before = text[:start].rstrip(" \t")
    after = text[end:].lstrip(" \t")
    if before and before[-1] in _GLOSS_BEFORE and (not after or after[0] in _GLOSS_AFTER):
        return "gloss"
    if letters <= KAOMOJI_LETTERS and _kaomoji_part(text, start, end):
        return "kaomoji"
    return None


def _is_symbol(ch: str) -> bool:
    """A symbol or bracket (``◕ ) ( ✧ ° ¯``), not sentence punctuation."""
    return unicodedata.category(ch)[0] == "S" or unicodedata.category(ch) in ("Ps", "Pe")


def _kaomoji_part(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` sits between symbols: one neighbour a symbol, neither a letter or digit."""
    prev = text[start - 1] if start > 0 else " "
    nxt = text[end] if end < len(text) else " "
    if prev.isalnum() or nxt.isalnum():
        return False
    return _is_symbol(prev) or _is_symbol(nxt)


def foreign_runs(text: str, lang: str) -> tuple[list[tuple[int, int]], str]:
    """The runs of foreign-script letters in ``text`` that no exemption covers.

    Args:
        text: the reply's visible text.
        lang: the requested language (one of :data:`HOME`).

    Returns:
        ``([(start, end), ...], prose)``: offsets into ``text`` of the
        unexempted runs (rule 3; the first :data:`MAX_FOUND`, among the
        first :data:`MAX_RUNS` runs), and the prose they were found in
        (rule 2); ``([], "")`` when ``text`` holds no foreign letter.
    """
    letter, run = _patterns(lang)
    if text.isascii() or not letter.search(text):
        return [], ""
    clean = prose(text)
    found: list[tuple[int, int]] = []
    for k, m in enumerate(run.finditer(clean)):
        if k >= MAX_RUNS or len(found) >= MAX_FOUND:
            break  # bounded work per reply: the verdict is known
        if _exempt(clean, m.start(), m.end(), m.group()) is None:
            found.append((m.start(), m.end()))
    return found, clean


def check_foreign_script(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail short runs of a script the requested language never uses.

    Judged only on a reply in its home script (rule 4), in its first
    :data:`SCAN_CHARS` characters; see the module docstring for the
    exemptions (names in Latin, quoted words, glosses, emoji, symbols, code).
    Evidence: ``runs`` (up to five, 40 characters each), ``scripts`` (the
    foreign scripts found), ``count`` (runs found, at most five), ``span``
    (the text around the first run), ``home_share`` (0..1).
    """
    name = "script.foreign_runs"
    lang = spec.language
    if lang not in HOME:
        return CheckResult(check=name, outcome="pass")
    text = reply.text[:SCAN_CHARS]
    runs, clean = foreign_runs(text, lang)
    if not runs:
        return CheckResult(check=name, outcome="pass")
    home, total = home_share(clean[:SHARE_CHARS], lang)
    if home < MIN_HOME_LETTERS or home * 2 < total:
        return CheckResult(check=name, outcome="pass")
    scripts = sorted({s for a, b in runs for s in script_counts(text[a:b])})
    start, end = runs[0]
    return CheckResult(check=name, outcome="fail", reason="foreign_script",
                       evidence={"runs": [text[a:b][:40] for a, b in runs[:5]], "scripts": scripts,
                                 "count": len(runs), "span": text[max(0, start - 30):end + 30],
                                 "home_share": round(home / total, 3)})


def short_reply_switch(clean: str, lang: str) -> dict | None:
    """Whether a reply too short to detect is all in scripts ``lang`` never uses.

    Args:
        clean: the reply's prose (code, URLs, numbers already stripped).
        lang: the requested language.

    Returns:
        ``{"scripts": [...], "letters": n}`` when every judged letter is
        foreign (at least two letters, or one Han, kana or Hangul letter: a
        word), none is of a script the language uses, and no run is exempt as
        a kaomoji or a Greek symbol; else ``None``.  A short reply in the
        right script (``Sim.``, ``好的`` to a Japanese request, ``OK`` to a
        Russian one) stays ``None``: inconclusive as before.
    """
    if lang not in ALLOWED:
        return None
    letter, run = _patterns(lang)
    if clean.isascii() or not letter.search(clean):
        return None
    counts = script_counts(clean)
    if any(s in ALLOWED[lang] for s in counts):
        return None
    for m in run.finditer(clean):
        n = _letters(m.group())
        if n <= KAOMOJI_LETTERS and (_kaomoji_part(clean, m.start(), m.end())
                                     or (n <= GREEK_SYMBOL_LETTERS and script_counts(m.group()).keys() == {"greek"})):
            return None
    letters = sum(counts.values())
    if letters < 2 and not counts.keys() & {"han", "kana", "hangul"}:
        return None
    return {"scripts": sorted(counts), "letters": letters}
