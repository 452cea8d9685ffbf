"""Encoding integrity (docs/concepts/probes.md, the language contract): broken encoding in a reply.

Rules (the detector comparison (``benchmarks/language_table.py``), and case FC-22):

- U+FFFD (a replacement character: bytes were lost) or a C1 control
  character (U+0080..U+009F, a cp1252 byte decoded as Latin-1): neither
  belongs in a reply.
- Mojibake: UTF-8 decoded as a single-byte code page (cp1252, Latin-1,
  cp1251, MacRoman ... ``soluÃ§Ã£o``, ``â€”``, ``РњР°СЏРє``).  Pure Python (the
  chat backend's light install runs it, no ftfy): a *sequence* is a lead
  character and its continuations that the code page's bytes turn back into
  one valid UTF-8 character; a sequence is mojibake when what surrounds it
  cannot be text (:func:`_bad_sequence`: ``Ã``/``Â`` before a symbol; a
  three-byte sequence of symbols; a symbol with letters on both sides, as
  in ``fÃ¼r`` or ``wei√ü``; two sequences back to back with a symbol among
  them), never for a lone pair legitimate text makes (Ukrainian ``Ві``,
  ``кі»``, ``NESTLÉ®``).  Nor is a sequence mojibake when its repair is a control,
  unassigned or private character, when it is DOS line drawing (cp437's box
  characters), or when most accented letters of its window belong to no
  sequence (styled text such as ``MÄ£ÄM ÌÑÌ``: real mojibake leaves few
  genuine ones beside it).  The rules follow ftfy's ``badness`` heuristic in
  spirit; on the project's sentences of 40 languages (23,141 lines) they
  flag the same damaged lines ftfy does and no clean one.

Speed: mojibake of UTF-8 always contains a lead byte (0xC2..0xF4) followed
by a continuation byte (0x80..0xBF) as decoded by some single-byte code
page, so a one-class pair regex (:data:`_SUSPECT`, a few µs) finds the
candidates and only those are looked at.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

CHECK = "encoding"

#: The code pages ftfy re-decodes UTF-8 from (its CHARMAP_ENCODINGS, plus Latin-1).
_CODEPAGES = ("cp1252", "latin-1", "cp1251", "cp1250", "cp1253", "cp1254", "cp1257",
              "iso8859-2", "mac_roman", "cp437")


def _decoded(codec: str, lo: int, hi: int) -> set[str]:
    out: set[str] = set()
    for b in range(lo, hi + 1):
        try:
            out.add(bytes([b]).decode(codec))
        except UnicodeDecodeError:
            pass
    return out


def _suspect_pattern() -> re.Pattern[str]:
    lead: set[str] = set()
    cont: set[str] = set()
    for codec in _CODEPAGES:
        lead |= _decoded(codec, 0xC2, 0xF4)
        cont |= _decoded(codec, 0x80, 0xBF)
    lead_cls = re.escape("".join(sorted(lead)))
    cont_cls = re.escape("".join(sorted(cont)))
    return re.compile(f"[{lead_cls}][{cont_cls}]")


_SUSPECT = _suspect_pattern()
REPLACEMENT = re.compile("\ufffd")


def _replacement_spellings() -> re.Pattern[str]:
    """U+FFFD's UTF-8 bytes (EF BF BD) as each code page reads them: ``ï¿½`` (cp1252), ``пїЅ`` (cp1251) ...

    A replacement character that went through mojibake: bytes were lost
    *and* re-decoded.  ftfy repairs the cp1252 spelling but not the cp1251
    one (a line of the Leipzig Indonesian sentences holds ``пїЅ``).
    """
    spellings = set()
    for codec in _CODEPAGES:
        try:
            spellings.add(b"\xef\xbf\xbd".decode(codec))
        except UnicodeDecodeError:
            pass
    return re.compile("|".join(re.escape(s) for s in sorted(spellings)))


REPLACEMENT_MOJIBAKE = _replacement_spellings()
C1_CONTROL = re.compile("[\u0080-\u009f]")


def _context(text: str, start: int, end: int, width: int = 30) -> str:
    return text[max(0, start - width):end + width]


def _byte_maps() -> tuple[tuple[str, dict[str, int]], ...]:
    """Per code page, the byte each character above ASCII stands for (cp1252 read sloppily, as ftfy does:
    its five undefined bytes as the C1 characters Latin-1 gives them)."""
    out = []
    for codec in _CODEPAGES:
        table: dict[str, int] = {}
        for b in range(0x80, 0x100):
            try:
                table.setdefault(bytes([b]).decode(codec), b)
            except UnicodeDecodeError:
                pass
        if codec == "cp1252":
            for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D):
                table.setdefault(chr(b), b)
        out.append((codec, table))
    return tuple(out)


_BYTES = _byte_maps()
#: Code pages of another script than Latin: a lone pair of their letters is often real text (``Ві``).
_NON_LATIN = frozenset({"cp1251", "cp1253"})
#: Symbols that also appear in clean text beside letters (ftfy's "common"): never suspicious alone.
_COMMON = frozenset("\u00a0\u00ad\u00b7\u00b4\u2013\u2014\u2015\u2026\u2019")
#: cp1252 letters that follow ``Ã``/``Â`` only in mojibake (``ÃŸ`` for ß, ``Ãœ`` for Ü, ``âœ”``).
_MOJIBAKE_LETTERS = frozenset("ŠšŒœŽžŸ")
#: Characters of a window kept either side of the first damaged sequence (evidence).
_WINDOW = 30
#: Longest window of evidence (characters).
_MAX_WINDOW = 400


#: Categories a repaired character may not have: controls, unassigned and private-use code points.
_NOT_TEXT = frozenset({"Cc", "Cn", "Co"})
#: The Box Drawing and Block Elements blocks, what DOS text art is drawn with.
_DRAWING_LO, _DRAWING_HI = "\u2500", "\u259f"


def _suspicious(ch: str) -> bool:
    """Not a letter or a mark (ordinal indicators and the micro sign count as symbols here)."""
    return ch in "ªºµ" or not unicodedata.category(ch).startswith(("L", "M"))


def _sequences(text: str, start: int) -> Iterator[tuple[str, str, int]]:
    """Every ``(code page, character, end)`` a mojibake sequence starting at ``text[start]`` decodes to."""
    if start >= len(text):
        return
    for codec, table in _BYTES:
        lead = table.get(text[start])
        if lead is None or not 0xC2 <= lead <= 0xF4:
            continue
        k = 1 if lead < 0xE0 else 2 if lead < 0xF0 else 3
        conts = [table.get(c) for c in text[start + 1:start + 1 + k]]
        if len(conts) < k or any(b is None or not 0x80 <= b <= 0xBF for b in conts):
            continue
        try:
            char = bytes([lead, *conts]).decode("utf-8")  # type: ignore[list-item]  (None refused above)
        except UnicodeDecodeError:
            continue  # an overlong form or a surrogate: not what an encoder writes
        if unicodedata.category(char) in _NOT_TEXT:
            continue  # a "repair" into a control, unassigned or private character repairs nothing (``o¬ô``)
        if codec == "cp437" and _drawing(text, start, start + 1 + k) and not _drawing_run(text, start, k):
            continue  # DOS line drawing (``├┤a┼┐a``), not a run of letters drawn in it (``╨┐╤Ç╨░``)
        yield codec, char, start + 1 + k


def _drawing(text: str, start: int, end: int) -> bool:
    """Every character of ``text[start:end]`` is a box-drawing or block character."""
    return all(_DRAWING_LO <= c <= _DRAWING_HI for c in text[start:end])


def _drawing_run(text: str, start: int, k: int) -> bool:
    """A two-byte cp437 sequence at ``start`` has another one right before or after it (a word, not art)."""
    table = dict(_BYTES)["cp437"]

    def pair(at: int) -> bool:
        if at < 0 or at + 1 >= len(text):
            return False
        lead, cont = table.get(text[at]), table.get(text[at + 1])
        return lead is not None and 0xC2 <= lead < 0xE0 and cont is not None and 0x80 <= cont <= 0xBF
    return k == 1 and (pair(start + 2) or pair(start - 2))


def _bad_sequence(text: str, i: int) -> str | None:
    """The code page in which the sequence at ``text[i]`` is mojibake, or ``None`` (module docstring's rules)."""
    for codec, char, end in _sequences(text, i):
        lead, conts = text[i], text[i + 1:end]
        odd = [c for c in conts if _suspicious(c)]
        latin = codec not in _NON_LATIN
        if latin and lead in "ÂÃ" and (odd or conts[0] in _MOJIBAKE_LETTERS):
            return codec  # the two leads of U+0080..U+00FF: ``Ã©``, ``Â\xa0``, ``ÃŸ``
        if len(conts) >= 2 and odd and (0x2000 <= ord(char) < 0x3000 or not (i and text[i - 1].isalpha())) and \
                (all(_suspicious(c) or c in _MOJIBAKE_LETTERS for c in conts) if latin
                 else unicodedata.category(char)[0] in "PS"):
            return codec  # a three-byte character of symbols: ``â€™``, ``вЂ”``, ``ä¸­`` (never ``Brontë…”``)
        if latin and unicodedata.category(lead)[0] == "S" and i and text[i - 1].isalpha():
            return codec  # a symbol after a letter, MacRoman's ``√`` in ``wei√ü`` (never ``L’é``)
        context = (text[i - 1] if i else " ") + text[i:end] + (text[end] if end < len(text) else " ")
        for j in range(1, len(context) - 1):
            if _suspicious(context[j]) and context[j] not in _COMMON and context[j - 1].isalpha() \
                    and context[j + 1].isalpha():
                return codec  # a symbol inside a word: ``fÃ¼r``, ``MÃ¤rz``
        if (odd or _suspicious(lead)) and any(c == codec for c, _, _ in _sequences(text, end)):
            return codec  # two back to back: ``РњР°``, ``×‘×”``
    return None


def _redecoded(text: str, codec: str) -> str:
    """``text`` with every sequence of ``codec`` turned back into its character (the repair, for the evidence)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        for c, char, end in _sequences(text, i):
            if c == codec:
                out.append(char)
                i = end
                break
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def find_mojibake(text: str) -> dict | None:
    """Find the first mojibake sequence (module docstring's rules).

    Args:
        text: any text.

    Returns:
        ``{"span": str, "fixed": str, "codec": str}``: a window around the first damaged
        sequence (cut at ASCII characters, never inside a sequence, at most
        :data:`_MAX_WINDOW` characters) and that window re-decoded; or ``None``
        when the text is clean.  Pure ASCII is always clean.
    """
    if text.isascii():
        return None
    for m in _SUSPECT.finditer(text):
        for i in (m.start(), m.start() - 1, m.start() - 2):  # a pair can be the tail of a longer sequence
            codec = _bad_sequence(text, i) if i >= 0 else None
            if codec is not None:
                break
        else:
            continue
        lo, hi = max(0, i - _WINDOW), min(len(text), i + 4 + _WINDOW)
        while lo > 0 and not text[lo].isascii() and i - lo < _MAX_WINDOW // 2:
            lo -= 1
        while hi < len(text) and not text[hi - 1].isascii() and hi - i < _MAX_WINDOW // 2:
            hi += 1
        span = text[lo:hi]
        fixed = _redecoded(span, codec)
        covered, letters = _covered(span, codec)
        if letters > 2 * covered:
            continue  # most accented letters around it are no sequence: styled text (``MÄ£ÄM ÌÑÌ``)
        return {"span": span, "fixed": fixed, "codec": codec}
    return None


def _covered(text: str, codec: str) -> tuple[int, int]:
    """``(characters in sequences of codec, non-ASCII letters in none)`` of ``text``, walked left to right."""
    covered = letters = i = 0
    while i < len(text):
        end = next((e for c, _, e in _sequences(text, i) if c == codec), None)
        if end is None:
            letters += not text[i].isascii() and text[i].isalpha()
            i += 1
        else:
            covered += end - i
            i = end
    return covered, letters


def assess_encoding(text: str) -> CheckResult:
    """Judge ``text`` for broken encoding.

    Args:
        text: the reply's visible text.

    Returns:
        ``fail`` / ``encoding_broken`` with evidence ``{"defect":
        "replacement_char" | "c1_control" | "replacement_mojibake" |
        "mojibake", "span", "fixed"?}``,
        else ``pass``.  Source: the detector comparison (``benchmarks/language_table.py``),
        case FC-22.
    """
    for defect, pattern in (("replacement_char", REPLACEMENT), ("c1_control", C1_CONTROL),
                            ("replacement_mojibake", REPLACEMENT_MOJIBAKE)):
        if defect == "replacement_mojibake" and text.isascii():
            continue
        m = pattern.search(text)
        if m:
            return CheckResult(check=CHECK, outcome="fail", reason="encoding_broken",
                               evidence={"defect": defect, "offset": m.start(),
                                         "span": _context(text, m.start(), m.end())})
    found = find_mojibake(text)
    if found:
        return CheckResult(check=CHECK, outcome="fail", reason="encoding_broken",
                           evidence={"defect": "mojibake", "span": found["span"], "fixed": found["fixed"],
                                     "codec": found["codec"]})
    return CheckResult(check=CHECK, outcome="pass")


def check_encoding(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Run :func:`assess_encoding` on ``reply.text`` (``spec`` is not needed)."""
    return assess_encoding(reply.text)
