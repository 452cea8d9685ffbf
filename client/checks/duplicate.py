"""A reply sent twice: the whole answer repeated end to end, or a passage of it duplicated.

Two copies are not a runaway loop (the repetition check of :mod:`.behaviour`
wants three copies of a sentence, eight of a word, and a third of the
reply), so neither shape below was caught:

- **the whole answer again** (``whole_reply``): a gateway re-sends the
  accumulated text with its final chunk (the reply is ``P + A`` where ``A``
  is the answer and ``P`` most of it), a stream restarted from the top, the
  answer emitted twice (``A A``, ``A\\n\\nA``, the second copy perhaps
  missing its last chunk).  Rule: the reply's opening (:data:`KEY_CHARS`
  characters) comes back later, and either the text from there on is the
  reply's start again and at least :data:`WHOLE_SHARE` of the first copy,
  or the opening stretch is followed at once by itself and the two copies
  make :data:`WHOLE_COVER` of the reply; the repeated part holds at least
  :data:`WHOLE_LETTERS` letters.  A reply that ends with the
  sentence it began with (a bookend, a refrain) is judged as a passage;
- **a passage duplicated** (``passage``): a sentence or paragraph (a run of
  whole sentences and lines) that comes back verbatim, right after itself
  with at least :data:`ADJACENT_LETTERS` letters, or further on with at least
  :data:`DISTANT_LETTERS`.  Only prose counts: the run must hold a sentence
  (a unit ending with ``. ! ? …`` or :data:`PROSE_LETTERS` letters long), so
  the chorus of a song or a poem's refrain (short lines without a stop) and
  a list of repeated values pass; code spans and blocks are not read; a
  reply that is a JSON value gets the whole-reply rule only (a list of
  equal objects is data; the structured check judges it).

Letters count as :func:`str.isalpha`; a Han, kana or Hangul character counts
:data:`CJK_WEIGHT` letters (a word of Chinese or Japanese is one to three
characters).  The first :data:`SCAN_CHARS` characters are read.  Cost: a
handful of ``str.find`` calls, one split on stops into a set; the split
into sentences only when a piece comes back (benchmarks/checks_bench.py).
"""

from __future__ import annotations

import re

from reverie_canary.client.checks.tokens import mask_code
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

CHECK = "corruption.duplicate"
REASON = "duplicated_text"

#: Characters of the reply's opening looked for again.
KEY_CHARS = 24
#: The repeated part of a whole-reply repeat holds at least this many letters.
WHOLE_LETTERS = 24
#: ... and, when the text from the repeat on is the reply's start again, it is at least this share of the
#: first copy (a separator aside, the whole of it; a sentence that comes back at the end is a bookend).
WHOLE_SHARE = 0.9
#: ... and, when the opening stretch is followed at once by itself, the two copies cover this share of
#: the reply (the re-sent text and its last chunk: a title printed twice before a long text is not it).
WHOLE_COVER = 0.7
#: Letters of a passage repeated right after itself, and of one repeated further on.
ADJACENT_LETTERS = 40
DISTANT_LETTERS = 80
#: A unit this long is prose even without a stop.
PROSE_LETTERS = 60
#: Letters a CJK character counts for.
CJK_WEIGHT = 3
#: Places where the opening comes back, tried at most.
MAX_TRIES = 16
#: Characters of a reply the check reads.
SCAN_CHARS = 16 * 1024

_CJK = re.compile("[\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7a3\uf900-\ufaff]")
#: Sentence ends (a stop and the space after it) and line breaks.
_UNIT_BREAK = re.compile(r"(?<=[.!?…。！？])[\"'”’»)*_]*\s+|(?<=[。！？])|\s*\n\s*")
_STOPS = ".!?…。！？"
#: Any stop or line break: every sentence of a repeated passage holds a piece between two of them
#: that comes back too (the gate before the sentence split).
_PIECE_BREAK = re.compile("[.!?…。！？\n]")
MIN_PIECE = 8
_CLOSERS = "\"'”’»)*_ "


def _letters(text: str) -> int:
    """Letters of ``text``, a CJK character counting :data:`CJK_WEIGHT`."""
    n = sum(1 for ch in text if ch.isalpha())
    if text.isascii():
        return n
    return n + (CJK_WEIGHT - 1) * len(_CJK.findall(text))


def find_whole_repeat(text: str) -> dict | None:
    """The whole answer repeated (module docstring, ``whole_reply``), or ``None``.

    Returns:
        ``{"kind": "whole_reply", "offset": where the second copy starts in
        ``text``, "letters": letters repeated, "share": 0..1 of the reply,
        "repeated": its first 120 characters}``.
    """
    start = len(text) - len(text.lstrip())
    body = text.strip()
    n = len(body)
    if n < 2 * KEY_CHARS:
        return None
    key = body[:KEY_CHARS]
    at = body.find(key, 1)
    tries = 0
    while at > 0 and tries < MAX_TRIES:
        tries += 1
        tail = body[at:]
        repeated = ""
        if body.startswith(tail) and len(tail) >= WHOLE_SHARE * at:
            repeated = tail  # A sep A: from here on, the reply's first copy again
        elif WHOLE_COVER * n <= 2 * at <= n and body[at:2 * at] == body[:at]:
            repeated = body[:at]  # P P dn: the accumulated text re-sent with the last chunk
        if repeated:
            letters = _letters(repeated)
            if letters >= WHOLE_LETTERS:
                return {"kind": "whole_reply", "offset": start + at, "letters": letters,
                        "share": round(len(repeated) / n, 3), "repeated": repeated[:120]}
        at = body.find(key, at + 1)
    return None


def _units(text: str) -> list[tuple[int, str]]:
    """Sentences and lines of ``text`` with their offsets (stripped, non-empty)."""
    out: list[tuple[int, str]] = []
    pos = 0
    for m in _UNIT_BREAK.finditer(text):
        piece = text[pos:m.start()]
        if piece.strip():
            out.append((pos + len(piece) - len(piece.lstrip()), piece.strip()))
        pos = m.end()
    piece = text[pos:]
    if piece.strip():
        out.append((pos + len(piece) - len(piece.lstrip()), piece.strip()))
    return out


def _may_repeat(text: str) -> bool:
    """Whether a piece between stops and line breaks comes back (a cheap gate: one split, one set)."""
    seen: set[str] = set()
    for piece in _PIECE_BREAK.split(text):
        piece = piece.strip()
        if len(piece) >= MIN_PIECE:
            if piece in seen:
                return True
            seen.add(piece)
    return False


def _is_prose(unit: str, letters: int) -> bool:
    """A sentence: it ends with a stop (before closing quotes or emphasis), or it is long."""
    return letters >= PROSE_LETTERS or unit.rstrip(_CLOSERS)[-1:] in tuple(_STOPS)


def find_passage_repeat(text: str) -> dict | None:
    """A passage of whole sentences or lines that comes back verbatim (module docstring, ``passage``).

    Returns:
        ``{"kind": "passage", "adjacent": bool, "offset": where the second
        copy starts, "letters", "units": sentences in the passage,
        "repeated": its first 120 characters}``, or ``None``.
    """
    masked = mask_code(text)
    if not _may_repeat(masked):
        return None
    units = _units(masked)
    if len(units) < 2:
        return None
    first: dict[str, int] = {}
    sizes: dict[str, int] = {}
    best: dict | None = None
    k = 0
    for j, (_, unit) in enumerate(units):
        i = first.setdefault(unit, j)
        if i == j:
            continue
        # the longest run of units starting at i that comes back from j on (not past j)
        length = 0
        while j + length < len(units) and i + length < j and units[i + length][1] == units[j + length][1]:
            length += 1
        run = [units[i + t][1] for t in range(length)]
        letters = 0
        prose = False
        for u in run:
            if u not in sizes:
                sizes[u] = _letters(u)
            letters += sizes[u]
            prose = prose or _is_prose(u, sizes[u])
        adjacent = i + length == j
        need = ADJACENT_LETTERS if adjacent else DISTANT_LETTERS
        if prose and letters >= need and (best is None or letters > best["letters"]):
            best = {"kind": "passage", "adjacent": adjacent, "offset": units[j][0], "letters": letters,
                    "units": length, "repeated": " ".join(run)[:120]}
        k += 1
        if k >= MAX_TRIES:
            break
    return best


def check_duplicate(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail a reply sent twice, whole or a passage of it (module docstring), in its first :data:`SCAN_CHARS`.

    Evidence: ``kind`` (``whole_reply``, ``passage``), ``offset`` (where the
    second copy starts), ``letters`` (repeated), ``repeated`` (its first 120
    characters); ``share`` (whole reply) or ``adjacent`` and ``units``
    (passage).
    """
    text = reply.text[:SCAN_CHARS]
    if len(text) < 2 * KEY_CHARS:
        return CheckResult(check=CHECK, outcome="pass")
    found = find_whole_repeat(text)
    if found is None and text.lstrip()[:1] not in ("{", "["):
        found = find_passage_repeat(text)
    if found is None:
        return CheckResult(check=CHECK, outcome="pass")
    return CheckResult(check=CHECK, outcome="fail", reason=REASON, evidence=found)
