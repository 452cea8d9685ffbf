"""Text helpers shared by the checks: normalisation, splitting, scripts.

Pure string functions, no detector and no state.  The language check strips
what is not prose before it detects anything (the detector comparison, ``benchmarks/language_table.py``,
recommendation 5: code, URLs, e-mail addresses, paths and numbers skew every
detector towards ``en``), then splits the prose into sentences and clauses.
"""

from __future__ import annotations

import re
import unicodedata

#: The closing marker the refusal probe demands (prompts.SENTINEL); removed
#: before any content check so that "END" is never read as English.
SENTINEL_RE = re.compile(r"\[\[\s*END\s*\]\]", re.IGNORECASE)

_FENCED = re.compile(r"(?:```|~~~).*?(?:```|~~~|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"(?:\b(?:https?|ftp)://|\bwww\.)\S+", re.IGNORECASE)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
#: One token that is a path: ``/health``, ``C:\\x``, ``~/x``, ``./x``,
#: ``src/main.py``; ``e/ou`` (pt "and/or") and ``24/7`` are not paths.
_PATH = re.compile(
    r"(?:[A-Za-z]:)?(?:~|\.{1,2})?[\\/][\w.\-~/\\]+"
    r"|[\w.-]+/[\w\-/]*[\w-]+\.[A-Za-z0-9]{1,6}"
    r"|[\w.-]+(?:/[\w.-]+){2,}"
)
#: Identifiers: snake_case, camelCase, dotted names (``os.path``, ``config.yaml``).
_SNAKE = re.compile(r"\w*_\w*")
_DOTTED = re.compile(r"\b[A-Za-z]\w*(?:\.[A-Za-z]\w*)+\b")
_DIGIT = re.compile(r"\d")
_HTML = re.compile(r"</?[A-Za-z][^>\n]{0,80}>|<\|[^|>\n]{0,80}\|>")
_HANDLE = re.compile(r"(?<!\w)[@#]\w+")
#: Numbers with attached units or ordinals: ``9h``, ``18:03``, ``40.º``, ``5%``.
_NUMBER = re.compile(r"[+\-]?\d(?:[\d/%ºª°'’]|[.,:](?=\d))*[^\W\d_]{0,3}(?![^\W\d_])")
_MARKDOWN = re.compile(r"[*_#>|~=^]+")
_SPACES = re.compile(r"[\t\u00a0\u2000-\u200b\u3000][ \t\u00a0\u2000-\u200b\u3000]*| {2,}")


_CYR = "а-яА-ЯёЁіІїЇєЄґҐ"
_LATIN_TO_CYRILLIC = str.maketrans("aceiopxyACEHIKMOPTXB", "асеіорхуАСЕНІКМОРТХВ")
_MIXED_WORD = re.compile(rf"\b(?=[\w'’]*[{_CYR}])(?=[\w'’]*[A-Za-z])[\w'’]+\b")
_LONE_LATIN_I = re.compile(rf"(?<=[{_CYR}] )[iI](?= [{_CYR}])")


def fold_homoglyphs(text: str) -> str:
    """Replace Latin look-alike letters inside Cyrillic words with Cyrillic ones.

    Old web text (and some keyboards) writes Ukrainian ``i`` with the Latin
    letter: ``крiпким``, ``ровом i``.  The detector reads such words as noise.
    Only words that mix both scripts, and a lone ``i`` between Cyrillic
    words, are touched.
    """
    if not _MIXED_WORD.search(text) and not _LONE_LATIN_I.search(text):
        return text
    text = _MIXED_WORD.sub(lambda m: m.group().translate(_LATIN_TO_CYRILLIC), text)
    return _LONE_LATIN_I.sub(lambda m: m.group().translate(_LATIN_TO_CYRILLIC), text)


_EDGE_PUNCT = ".,;:!?)(\"'«»“”"


def _strip_paths(t: str) -> str:
    """Blank out whitespace-delimited tokens that look like paths (one pass per slash)."""
    out: list[str] = []
    last = 0
    i = 0
    n = len(t)
    while True:
        j1, j2 = t.find("/", i), t.find("\\", i)
        j = min(x for x in (j1, j2, n) if x >= 0)
        if j >= n:
            break
        start = j
        while start > 0 and not t[start - 1].isspace():
            start -= 1
        end = j
        while end < n and not t[end].isspace():
            end += 1
        token = t[start:end]
        core_end = start + len(token.rstrip(_EDGE_PUNCT))
        core_start = end - len(token.lstrip(_EDGE_PUNCT))
        if core_start < core_end and _PATH.fullmatch(t[core_start:core_end]):
            out.append(t[last:core_start])
            out.append(" ")
            last = core_end
        i = end
    if not out:
        return t
    out.append(t[last:])
    return "".join(out)


def _has_dotted_identifier(t: str) -> bool:
    i = t.find(".")
    n = len(t)
    while i != -1:
        if 0 < i < n - 1 and t[i - 1].isascii() and t[i - 1].isalpha() and t[i + 1].isascii() and t[i + 1].isalpha():
            return True
        i = t.find(".", i + 1)
    return False


def strip_for_detection(text: str, *, fold_cyrillic: bool = False) -> str:
    """Return the prose of ``text``: NFC, no code, URLs, e-mails, paths, numbers.

    Args:
        text: a reply as the client assembled it.
        fold_cyrillic: also fold Latin look-alikes inside Cyrillic words
            (:func:`fold_homoglyphs`; for ru/uk requests).

    Returns:
        The text with code spans (fenced and inline), URLs, e-mail addresses,
        file paths, identifiers, HTML/role tags, handles, numbers, Markdown
        markers and the probe sentinel replaced by spaces; sentence
        punctuation and newlines are kept so that splitting still works.
        Each pattern runs only when a cheap test finds its trigger character.
        Source: the detector comparison (``benchmarks/language_table.py``); case FP-03.
    """
    t = unicodedata.normalize("NFC", text)
    if "[" in t:
        t = SENTINEL_RE.sub(" ", t)
    if "`" in t or "~~~" in t:
        t = _FENCED.sub("\n", t)
        t = _INLINE_CODE.sub(" ", t)
    if "://" in t or "www." in t:
        t = _URL.sub(" ", t)
    if "@" in t:
        t = _EMAIL.sub(" ", t)
    if "<" in t:
        t = _HTML.sub(" ", t)
    if "/" in t or "\\" in t:
        t = _strip_paths(t)
    if "_" in t:
        t = _SNAKE.sub(" ", t)
    if _has_dotted_identifier(t):
        t = _DOTTED.sub(" ", t)
    if "@" in t or "#" in t:
        t = _HANDLE.sub(" ", t)
    if _DIGIT.search(t):
        t = _NUMBER.sub(" ", t)
    if any(ch in t for ch in "*_#>|~=^"):
        t = _MARKDOWN.sub(" ", t)
    if fold_cyrillic:
        t = fold_homoglyphs(t)
    if _SPACES.search(t):
        t = _SPACES.sub(" ", t)
    return t


_NON_LETTERS = re.compile(r"[\W\d_]+")


def count_letters(text: str) -> int:
    """Count letters (word characters that are not digits or ``_``; one CJK character is one letter)."""
    return len(_NON_LETTERS.sub("", text))


_CLAUSE_BREAK = re.compile(r"\s*(?:[,;:，、；：()\[\]{}«»“”„\"—–]|\s-\s)\s*")


_END_MARKS = re.compile(r"[.!?…。！？\n]+")
_CLOSERS = "\"'”’»)]"
_CJK_STOPS = "。！？"


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences on ``. ! ? …`` + space, CJK stops and newlines.

    A Latin stop ends a sentence only when whitespace follows (after closing
    quotes or brackets), so ``3.14`` and ``e.g.x`` do not split.

    Returns:
        Non-empty stripped sentences in order (the detector comparison, ``benchmarks/language_table.py``,
        recommendation 3).
    """
    out: list[str] = []
    start = 0
    n = len(text)
    for m in _END_MARKS.finditer(text):
        end = m.end()
        marks = m.group()
        if "\n" not in marks and marks[-1] not in _CJK_STOPS:
            while end < n and text[end] in _CLOSERS:
                end += 1
            if end < n and not text[end].isspace():
                continue
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = end
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out


def split_clauses(sentence: str) -> list[str]:
    """Split one sentence on commas, semicolons, colons, brackets, quotes, dashes.

    Returns:
        Non-empty stripped clauses in order (case FC-20b: the Spanish clause
        after the comma).
    """
    return [c.strip() for c in _CLAUSE_BREAK.split(sentence) if c and c.strip()]


# -- scripts -------------------------------------------------------------------

LATIN, CYRILLIC, ARABIC, CJK, HANGUL, OTHER = "latin", "cyrillic", "arabic", "cjk", "hangul", "other"

#: The script each supported language is written in (kana and hanzi both count
#: as ``cjk``: zh versus ja is left to the detector).
SCRIPT_OF: dict[str, str] = {
    "en": LATIN, "es": LATIN, "pt": LATIN, "fr": LATIN, "de": LATIN, "it": LATIN,
    "nl": LATIN, "pl": LATIN, "tr": LATIN, "id": LATIN, "vi": LATIN,
    "ru": CYRILLIC, "uk": CYRILLIC, "ar": ARABIC, "ja": CJK, "zh": CJK, "ko": HANGUL,
}


def script_of_char(ch: str) -> str:
    """Return the script class of one letter (``latin``, ``cyrillic`` ...)."""
    o = ord(ch)
    if o < 0x250 or 0x1E00 <= o <= 0x1EFF:
        return LATIN
    if 0x400 <= o <= 0x52F:
        return CYRILLIC
    if 0x600 <= o <= 0x6FF or 0x750 <= o <= 0x77F or 0xFB50 <= o <= 0xFEFF:
        return ARABIC
    if (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x3040 <= o <= 0x30FF
            or 0xF900 <= o <= 0xFAFF or 0x31F0 <= o <= 0x31FF or 0xFF66 <= o <= 0xFF9F):
        return CJK
    if 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
        return HANGUL
    return OTHER


_RUN_PATTERNS = (
    (LATIN, "A-Za-z\u00c0-\u024f\u1e00-\u1eff"),
    (CYRILLIC, "\u0400-\u052f"),
    (ARABIC, "\u0600-\u06ff\u0750-\u077f\ufb50-\ufeff"),
    (CJK, "\u4e00-\u9fff\u3400-\u4dbf\u3040-\u30ff\uf900-\ufaff\u31f0-\u31ff\uff66-\uff9f"),
    (HANGUL, "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"),
)
_SCRIPT_RUN = re.compile("|".join(f"(?P<{name}>[{cls}]+)" for name, cls in _RUN_PATTERNS))


def split_scripts(text: str) -> list[tuple[str, str]]:
    """Cut ``text`` where the script of its letters changes.

    Returns:
        ``[(script, span), ...]``; non-letters stay with the run they follow.
        Letters of other scripts (Greek, Thai ...) do not cut.
    """
    if text.isascii():
        return [(LATIN, text)] if text else []
    runs: list[tuple[str, str]] = []
    current: str | None = None
    start = 0
    for m in _SCRIPT_RUN.finditer(text):
        script = m.lastgroup
        if current is None:
            current = script
        elif script != current:
            runs.append((current, text[start:m.start()]))
            current, start = script, m.start()
    runs.append((current or OTHER, text[start:]))
    return runs


def _class_of_other_scripts(script: str) -> re.Pattern[str]:
    return re.compile("[" + "".join(cls for name, cls in _RUN_PATTERNS if name != script) + "]")


_OTHER_SCRIPT = {name: _class_of_other_scripts(name) for name, _ in _RUN_PATTERNS}


def has_other_script(text: str, script: str) -> bool:
    """Whether ``text`` holds letters of a script other than ``script`` (one regex scan)."""
    if script == LATIN and text.isascii():
        return False
    pattern = _OTHER_SCRIPT.get(script)
    return bool(pattern.search(text)) if pattern is not None else False


def dominant_script(text: str) -> tuple[str, float]:
    """Return the most frequent script of the letters and its share (0..1)."""
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            s = script_of_char(ch)
            counts[s] = counts.get(s, 0) + 1
    if not counts:
        return OTHER, 0.0
    best = max(counts, key=counts.__getitem__)
    return best, counts[best] / sum(counts.values())
