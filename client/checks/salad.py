"""Word salad: fragments and punctuation noise with no sentence structure.

A collapsed quantization, a wrong RoPE scaling or a template that derails the
model produces text of real-looking word pieces between runs of backslashes,
doubled separators and stray punctuation (``the, of \\\\ and ing ,, tion the
\\\\n a ly``), or an endless run of words with no sentence in it.  It is not
repetition (no unit repeats) and not a language switch (the pieces are
"in" the language), so neither check sees it.

The measure (deterministic, language-independent, on the prose only: code,
URLs, e-mail addresses, HTML tags, Windows paths and ``{{user}}`` template
variables blanked; Markdown table rows skipped):

- **noise units** (:func:`noise`): every backslash; every run of two or more
  punctuation marks that holds one of ``| { } < >`` or a doubled separator
  (``,,`` ``;;`` ``::``); every lone ``,`` ``.`` ``|`` or run of ``_``
  standing between spaces (filler).  Natural text has a few (``Extras \\\\
  Optionen`` in a German manual, ``-->``); quotes, brackets, ellipses,
  dashes, Markdown emphasis, spaced ellipses (``. . .``), French spacing
  (``bonjour ;``), Korean ``^^`` and ``~~`` are not noise.
- **words**: letter runs, plus one per two Han or kana characters.
- **verdict**: ``word_salad`` when the noise holds at least
  :data:`MIN_NOISE` units *and* at least :data:`MIN_DENSITY` per word; or,
  with at least :data:`RUN_ON_WORDS` words, when there are that many words
  per sentence or clause mark (no sentence structure at all).

Calibration (benchmarks/language_table.py, row "word salad"): on the real
sentences of the 17 languages (each sentence alone and replies of 2-5, 20 600
texts) the most noise is 2 units (a German manual's ``Extras \\ Optionen``),
the highest density 0.053 (one unit in a short Korean line), the most words
per punctuation mark 27.5 (a Vietnamese list run together): each threshold
sits at twice that or more.  No real reply trips it.
"""

from __future__ import annotations

import re

from reverie_canary.client.checks.scripts import prose
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

#: Noise units a salad holds at least (real text: at most 2).
MIN_NOISE = 5
#: Noise units per word a salad holds at least (real text: at most 0.053).
MIN_DENSITY = 0.1
#: Words, and words per punctuation mark, of a run-on without any sentence
#: structure (real text: at most 27.5 words per mark).
RUN_ON_WORDS = 60

_ODD = frozenset("\\|{}<>")
_RUN = re.compile(r"[^\w\s]{2,}")
_DOUBLED = re.compile(r"([,;:])\1")
_LONE_CHARS = ",.|_"
_LONE = re.compile(r"(?<!\S)(?:[,.|]|_+)(?!\S)")
_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[^\W\d_{_CJK_CLASS}]+")
_CJK = re.compile(f"[{_CJK_CLASS}]")
_MARK_CHARS = ".!?,;:。！？，、؟،…—-–"
_TABLE_ROW = re.compile(r"^[ \t]*\|.*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{\s*[\w.]+\s*\}\}")
_SPACED_ELLIPSIS = re.compile(r"\.(?: \.){2,}")
_WINDOWS_PATH = re.compile(r"(?<!\w)(?:[A-Za-z]:|\\\\[\w.-]+)\\[\w.\\-]*")

#: Characters a reply is scanned for (a salad shows early; bounded work per reply).
SCAN_CHARS = 8 * 1024


def noise(text: str) -> tuple[int, list[str]]:
    """Count the noise units of ``text`` (prose already): ``(units, up to five examples)``.

    Each pattern runs only when a cheap substring test finds its trigger
    (most replies hold none: about 10 µs on a 300-token reply).
    """
    units = text.count("\\")
    examples: list[str] = []
    if units:
        i = text.find("\\")
        examples.append(text[max(0, i - 8):i + 8])
    if any(ch in text for ch in "|{}<>") or any(d in text for d in (",,", ";;", "::")):
        for m in _RUN.finditer(text):
            run = m.group()
            if "\\" in run:
                continue  # counted per backslash
            if any(ch in _ODD for ch in run) or _DOUBLED.search(run):
                units += 1
                if len(examples) < 5:
                    examples.append(run[:16])
    if text[:1] in _LONE_CHARS or any(ws + ch in text for ws in " \n\t" for ch in _LONE_CHARS):
        for m in _LONE.finditer(text):
            units += 1
            if len(examples) < 5:
                examples.append(m.group()[:16])
    return units, examples


def words(text: str) -> int:
    """Letter runs of ``text``, plus one per two Han or kana characters (Chinese and Japanese use no spaces)."""
    n = len(_WORD.findall(text))
    if not text.isascii():
        n += len(_CJK.findall(text)) // 2
    return n


def assess_salad(text: str) -> CheckResult:
    """Judge ``text`` for word salad (see the module docstring for the measure).

    Returns:
        ``fail`` / ``word_salad`` with evidence ``kind`` (``noise`` or
        ``run_on``), ``noise`` (units), ``words``, ``density`` (units per
        word), ``examples`` (up to five noise units) or ``per_mark`` (words
        per punctuation mark); else ``pass``.
    """
    name = "corruption.word_salad"
    t = prose(text[:SCAN_CHARS])
    if "|" in t:
        t = _TABLE_ROW.sub("", t)
    if "\\" in t:
        t = _WINDOWS_PATH.sub(" ", t)
    if "{{" in t:
        t = _PLACEHOLDER.sub(" ", t)  # {{user}}: a template variable, not noise
    if ". ." in t:
        t = _SPACED_ELLIPSIS.sub("…", t)  # Chicago-style ". . ." is one ellipsis
    units, examples = noise(t)
    if units >= MIN_NOISE:
        n_words = words(t)
        density = units / n_words if n_words else float(units)
        if density >= MIN_DENSITY:
            return CheckResult(check=name, outcome="fail", reason="word_salad",
                               evidence={"kind": "noise", "noise": units, "words": n_words,
                                         "density": round(density, 3), "examples": examples})
    marks = sum(map(t.count, _MARK_CHARS))
    bound = 2 * (t.count(" ") + t.count("\n") + 1) + (0 if t.isascii() else len(_CJK.findall(t)) // 2)  # >= words
    if bound < RUN_ON_WORDS * (marks + 1):
        return CheckResult(check=name, outcome="pass")  # too few words for a run-on
    n_words = words(t)
    if n_words >= RUN_ON_WORDS and n_words / (marks + 1) >= RUN_ON_WORDS:  # no sentence structure
        return CheckResult(check=name, outcome="fail", reason="word_salad",
                           evidence={"kind": "run_on", "words": n_words, "per_mark": round(n_words / (marks + 1), 1)})
    return CheckResult(check=name, outcome="pass")


def check_word_salad(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Run :func:`assess_salad` on the reply's text (every probe but the structured one: JSON is all marks)."""
    return assess_salad(reply.text)
