"""Encoding integrity (docs/concepts/probes.md, the language contract): broken encoding in a reply.

Rules (the detector comparison (``benchmarks/language_table.py``), and case FC-22):

- U+FFFD (a replacement character: bytes were lost) or a C1 control
  character (U+0080..U+009F, a cp1252 byte decoded as Latin-1): neither
  belongs in a reply; ftfy does not treat U+FFFD as damage, hence the regex.
- Mojibake: ``ftfy.fix_encoding(span) != span`` (UTF-8 decoded as cp1252,
  Latin-1, cp1251, MacRoman ... ``soluÃ§Ã£o``, ``â€”``).

Speed: ftfy scans with a large regex (about 0.3 µs per character).  Mojibake
of UTF-8 always contains a lead byte (0xC2..0xF4) followed by a continuation
byte (0x80..0xBF) as decoded by some single-byte code page, so a one-class
pair regex (:data:`_SUSPECT`, a few µs) finds the candidates and ftfy only
looks at a window around each.
"""

from __future__ import annotations

import re

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
_WINDOW = 60


def _context(text: str, start: int, end: int, width: int = 30) -> str:
    return text[max(0, start - width):end + width]


def find_mojibake(text: str) -> dict | None:
    """Find the first span ftfy would re-decode.

    Args:
        text: any text.

    Returns:
        ``{"span": str, "fixed": str}`` for the first damaged window, or
        ``None`` when the text is clean.  Pure ASCII is always clean.
    """
    if text.isascii():
        return None
    matches = list(_SUSPECT.finditer(text))
    if not matches:
        return None
    import ftfy  # lazily: its import costs about 50 ms

    windows: list[list[int]] = []
    for m in matches:
        lo, hi = max(0, m.start() - _WINDOW), min(len(text), m.end() + _WINDOW)
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = hi
        else:
            windows.append([lo, hi])
    for lo, hi in windows:
        span = text[lo:hi]
        fixed = ftfy.fix_encoding(span)
        if fixed != span:
            return {"span": span, "fixed": fixed}
    return None


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
                           evidence={"defect": "mojibake", "span": found["span"], "fixed": found["fixed"]})
    return CheckResult(check=CHECK, outcome="pass")


def check_encoding(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Run :func:`assess_encoding` on ``reply.text`` (``spec`` is not needed)."""
    return assess_encoding(reply.text)
