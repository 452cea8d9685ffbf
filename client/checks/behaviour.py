"""Behavioural integrity (docs/concepts/probes.md, behavioural integrity): runs on every reply.

Faults a provider's engine, template or parser causes whatever the prompt:

- junk before the expected first character: a stray punctuation mark, a lost
  first token (FC-15), a leaked role word before Markdown ``*`` (FC-14), a
  BOM or control character; legitimate openings (``¿``, ``¡``, a dialogue
  dash, Markdown, typographic quotes ``« „ “``) pass (FP-06);
- leaked control tokens (``<|im_end|>``, ``<｜end▁of▁sentence｜>``, ``[INST]``,
  ``<think>``), reserved and placeholder tokens by pattern, channel text whose
  markers were stripped (:mod:`.tokens`: every bar and spacer spelling,
  nothing inside code);
- tool-call markup in the visible text as a family (``<|tool_call_begin|>``,
  ``<tool_call>``, ``<function=…>``, ``[TOOL_CALLS]``, a tool-call JSON object
  or a Harmony recipient as text; FC-11, TC-01 to TC-05): :mod:`.tools`;
- byte-level tokenizer markers in place of spaces and newlines (``Ġ``/``Ċ``,
  SentencePiece ``▁``; FC-01);
- control characters (C0 except tab/newline/CR, DEL, C1) and U+FFFD;
- runaway repetition (legitimate short repetition passes, FP-11);
- words injected into an exact-echo sentence (FC-17);
- ``finish_reason: tool_calls`` or calls on a probe that offered no tools (FC-11; a probe
  that offered tools has its calls judged by :mod:`.tools`).

Every function here is pure and cheap: together well under a millisecond on
a 300-token reply (benchmarks/checks_bench.py).
"""

from __future__ import annotations

import difflib
import math
import operator
import re
import unicodedata
import zlib

from reverie_canary.client.checks.refusal import spent_on_reasoning
from reverie_canary.client.checks.tokens import (
    check_channel_leak,
    check_control_tokens,
    check_reserved_tokens,
    mask_code,
    without_tokens,
)
from reverie_canary.client.checks.tools import check_tool_markup
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

# -- leading junk --------------------------------------------------------------

#: A chat-template role word leaked before the answer (``assistant\n\n``,
#: ``Assistant:``, ``<|assistant|>``, Gemma's ``model\n``).
ROLE_LEAK = re.compile(r"(?:<\|?)?(?:assistant|model|system|user|human|bot)(?:\|?>)?[ \t]*(?::|\r?\n)", re.I)

#: First characters that never open a reply: stray closing or separating
#: punctuation.  Letters, digits, ``¿ ¡``, dashes, quotes, brackets, Markdown
#: and emoji are all legitimate (FP-06).
STRAY_START = frozenset(",;:)]}!?|\\.")


def _char_kind(ch: str) -> str | None:
    """Why ``ch`` cannot open a reply, or ``None`` when it can."""
    if ch == "\ufffd":
        return "replacement_char"
    if ch == "\ufeff":
        return "bom"
    cat = unicodedata.category(ch)
    if cat in ("Cc", "Cf", "Co", "Cs", "Cn"):
        return "control_char"
    if cat in ("Mn", "Me"):
        return "combining_mark"
    if ch in STRAY_START:
        return "stray_punctuation"
    return None


def check_leading_junk(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail junk before the first character the reply should open with.

    Rules (docs/concepts/probes.md, behavioural integrity; FC-14, FC-15, FP-06):

    - Leading spaces and newlines are ignored.
    - With ``spec.expected_prefix`` (the probe demanded ``*``): the reply must
      open with it; anything else is ``leading_junk`` (a role word, a
      lowercase word fragment = the lost first token, a stray mark).
    - Without: a leaked role word, a BOM, a control character, U+FFFD, a
      lone combining mark or stray ``, ; : ) ] } ! ? | \\ .`` (not ``...``)
      first is ``leading_junk``.

    Evidence: ``kind`` (``role_word``, ``lost_first_token``,
    ``stray_punctuation``, ``control_char``, ``bom``, ``replacement_char``,
    ``missing_prefix``), ``junk`` (the characters before the expected
    opening when found within 40 characters), ``first_chars``.
    """
    name = "corruption.leading_junk"
    text = reply.text
    body = text.lstrip(" \t\r\n")
    if not body:
        return CheckResult(check=name, outcome="pass")
    evidence: dict = {"first_chars": body[:24]}
    prefix = spec.expected_prefix
    if prefix:
        evidence["expected_prefix"] = prefix
        if body.startswith(prefix):
            return CheckResult(check=name, outcome="pass")
        at = body.find(prefix, 0, 40)
        if at > 0:
            evidence["junk"] = body[:at]
        if ROLE_LEAK.match(body):
            kind = "role_word"
        elif _char_kind(body[0]):
            kind = _char_kind(body[0])
        elif body[0].isalpha() and body[0].islower():
            kind = "lost_first_token"
        else:
            kind = "missing_prefix"
        evidence["kind"] = kind
        return CheckResult(check=name, outcome="fail", reason="leading_junk", evidence=evidence)
    if ROLE_LEAK.match(body):
        evidence.update(kind="role_word", junk=ROLE_LEAK.match(body).group(0))
        return CheckResult(check=name, outcome="fail", reason="leading_junk", evidence=evidence)
    kind = _char_kind(body[0])
    if kind == "stray_punctuation" and body.startswith(".."):
        kind = None
    if kind:
        evidence.update(kind=kind, junk=body[0])
        return CheckResult(check=name, outcome="fail", reason="leading_junk", evidence=evidence)
    return CheckResult(check=name, outcome="pass")


# -- byte-level tokenizer markers ----------------------------------------------

#: GPT-2 byte-level BPE shows space as U+0120 ``Ġ``, newline as U+010A ``Ċ``,
#: tab as U+0109 ``ĉ``; SentencePiece shows space as U+2581 ``▁``.  No
#: supported language uses them.
BYTELEVEL_MARKERS = ("\u0120", "\u010a", "\u0109", "\u2581")


_STRONG_MARKER = re.compile(
    "(?<=[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af.!?。！？、，,;:])[\u0120\u010a\u0109\u2581]"
    "|[\u0120\u010a\u0109\u2581](?=[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\\[]|\\Z)"
)


def check_bytelevel(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail raw byte-level tokenizer symbols standing in for whitespace (FC-01).

    Rule: at least 3 markers making at least 25 % of all whitespace-like
    separators (markers + spaces + newlines + tabs); or any marker next to a
    CJK character, after sentence punctuation or at the very end (Chinese and
    Japanese text has few spaces to replace, and Maltese, the one language
    that writes ``Ġ``/``Ċ``, only has them inside Latin words).
    Evidence: ``count``, ``share``, ``span`` around the first marker.
    """
    name = "corruption.bytelevel_tokens"
    text = reply.text
    if "\u2581" in text and ("<" in text or "\uff1c" in text):
        text = without_tokens(text)  # DeepSeek's <｜end▁of▁sentence｜> is a control token, not a spacer
    count = sum(text.count(m) for m in BYTELEVEL_MARKERS)
    if count == 0:
        return CheckResult(check=name, outcome="pass")
    spaces = text.count(" ") + text.count("\n") + text.count("\t")
    share = count / (count + spaces)
    if not ((count >= 3 and share >= 0.25) or _STRONG_MARKER.search(text)):
        return CheckResult(check=name, outcome="pass")
    first = min(i for i in (text.find(m) for m in BYTELEVEL_MARKERS) if i >= 0)
    return CheckResult(check=name, outcome="fail", reason="bytelevel_tokens",
                       evidence={"count": count, "share": round(share, 3), "span": text[max(0, first - 20):first + 40]})


# -- control characters ----------------------------------------------------------

CONTROL_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffd]")


def check_control_chars(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail C0 controls (except tab, newline, CR), DEL, C1 controls and U+FFFD.

    Reasons: ``control_characters``; ``encoding_broken`` for U+FFFD (bytes were
    lost on the way; the detector comparison (``benchmarks/language_table.py``)).
    Evidence: ``codepoints`` (up to five, ``U+XXXX``), ``offset``.
    """
    name = "corruption.control_chars"
    text = reply.text
    m = CONTROL_CHAR.search(text)
    if not m:
        return CheckResult(check=name, outcome="pass")
    found = CONTROL_CHAR.findall(text)
    codepoints = sorted({f"U+{ord(c):04X}" for c in found})[:5]
    reason = "encoding_broken" if all(c == "\ufffd" for c in found) else "control_characters"
    return CheckResult(check=name, outcome="fail", reason=reason,
                       evidence={"codepoints": codepoints, "offset": m.start(), "count": len(found)})


# -- runaway repetition ------------------------------------------------------------

#: Words, one token per kana or CJK ideograph (no spaces to split on), punctuation marks.
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
                    r"|[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[^\w\s]")
_CHAR_RUN = re.compile(r"(\S)\1{31,}")
MAX_PERIOD = 24


def _min_repeats(period: int) -> int:
    """Back-to-back copies of a unit of ``period`` tokens that make a runaway (FP-11)."""
    if period <= 3:
        return 8
    if period <= 10:
        return 4
    return 3


def find_repetition(text: str, *, min_share: float = 0.3) -> dict | None:
    """Find a unit repeated back to back often enough to be a runaway.

    Rule (FP-11: "8 or more consecutive repeats and over 30 % of the output"):
    a unit of 1-3 tokens repeated >= 8 times, 4-10 tokens >= 4 times, longer
    units (a sentence) >= 3 times, the run covering >= ``min_share`` of the
    tokens; or one character repeated 32 times.  Text that zlib compresses
    well is checked exactly; other text cannot hold such a run.

    Returns:
        ``{"unit", "period", "repeats", "share"}`` or ``None``.
    """
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) >= 200 and len(zlib.compress(raw, 1)) > 0.5 * len(raw):
        return None
    m = _CHAR_RUN.search(text)
    if m:
        return {"unit": m.group(1), "period": 1, "repeats": len(m.group(0)), "share": round(len(m.group(0)) / len(text), 3)}
    tokens = _TOKEN.findall(text.lower())
    n = len(tokens)
    if n < 3:
        return None
    best = longest_run(tokens, min_share)
    if best is None:
        return None
    covered, period, start = best
    return {"unit": " ".join(tokens[start:start + period])[:120], "period": period,
            "repeats": covered // period, "share": round(covered / n, 3)}


_RUN = re.compile(rb"\x01+")


def longest_run(tokens: list[str], min_share: float) -> tuple[int, int, int] | None:
    """The longest back-to-back run of :func:`find_repetition`: ``(tokens covered, period, start)`` or ``None``.

    Pure Python at C speed (the chat backend's light install has no numpy): for each period
    the positions whose token equals the one ``period`` later become a byte string
    (``map(operator.eq, ...)``), the shortest run that could win is looked for with
    ``bytes.find`` (most periods end there), and only then are the runs measured.  Ties go to
    the shorter period, then to the first run.  About 0.3 ms for 300 tokens of a loop, 3 ms
    for the 4,000 tokens of a capped scan (benchmarks/checks_bench.py).
    """
    n = len(tokens)
    ids: dict[str, int] = {}
    seq = [ids.setdefault(t, len(ids)) for t in tokens]
    need_cover = math.ceil(min_share * n)
    best: tuple[int, int, int] | None = None
    for period in range(1, min(MAX_PERIOD, n // 3) + 1):
        # a run of r equal positions covers r + period tokens: the least r that can still win
        least = max(_min_repeats(period) * period, need_cover, best[0] + 1 if best else 0) - period
        equal = bytes(map(operator.eq, seq, seq[period:]))
        if equal.find(b"\x01" * max(least, 1)) < 0:
            continue
        run = max(_RUN.finditer(equal), key=lambda m: m.end() - m.start())  # max keeps the first of equals
        covered = run.end() - run.start() + period
        if covered - period >= least:
            best = (covered, period, run.start())
    return best


#: Characters of a reply the repetition check scans: a runaway shows long before
#: (a 320-token reply is about 2 kB), and scanning a capped 256 KiB reply took
#: 230 ms of CPU (bounded work per probe).
REPETITION_SCAN_CHARS = 16 * 1024


def check_repetition(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail runaway repetition (:func:`find_repetition`) in the first :data:`REPETITION_SCAN_CHARS` characters.

    Short requested repetition passes (FP-11).  Code is output, not a loop:
    inline code and fenced blocks are not read (a printed list of equal
    values, ``0 0 0 0 …`` in a block, passes), except a fence left open by a
    reply cut at its budget (``finish_reason: length`` or a read cap), whose
    content may be the runaway that spent it; a loop in the prose is a loop.
    """
    name = "corruption.repetition"
    text = reply.text[:REPETITION_SCAN_CHARS]
    found = find_repetition(mask_code(text, unclosed=reply.finish_reason != "length" and reply.cut is None))
    if found is None:
        return CheckResult(check=name, outcome="pass")
    return CheckResult(check=name, outcome="fail", reason="repetition", evidence=found)


# -- exact echo ------------------------------------------------------------------

_QUOTES = "\"'“”‘’«»„"


def _echo_norm(text: str) -> str:
    t = unicodedata.normalize("NFC", text).strip()
    if len(t) >= 2 and t[0] in _QUOTES and t[-1] in _QUOTES:
        t = t[1:-1].strip()
    return " ".join(t.split())


def check_echo(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Compare an exact-echo reply with ``spec.echo_text`` word by word (FC-17).

    Whitespace runs and one pair of enclosing quotes are ignored; everything
    else must match.  Evidence: ``inserted`` and ``deleted`` words (each cut
    to 40 characters), ``similarity`` (0..1).  Without ``spec.echo_text``:
    ``pass``.  Without visible text: ``not_applicable`` / ``no_text``
    (``refusal.empty`` judges it); a reply cut because reasoning spent the
    output budget: ``inconclusive`` / ``reasoning_budget`` (FP-07: nothing
    is proven about the provider).
    """
    name = "corruption.echo"
    if not spec.echo_text:
        return CheckResult(check=name, outcome="pass")
    want, got = _echo_norm(spec.echo_text), _echo_norm(reply.text)
    if want == got:
        return CheckResult(check=name, outcome="pass")
    if not got:
        return CheckResult(check=name, outcome="not_applicable", reason="no_text")
    if reply.finish_reason == "length" and spent_on_reasoning(reply):
        return CheckResult(check=name, outcome="inconclusive", reason="reasoning_budget",
                           evidence={"finish_reason": "length"})
    a, b = want.split(), got.split()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    inserted: list[str] = []
    deleted: list[str] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("insert", "replace"):
            inserted.extend(b[j1:j2])
        if op in ("delete", "replace"):
            deleted.extend(a[i1:i2])
    return CheckResult(check=name, outcome="fail", reason="echo_mismatch",
                       evidence={"inserted": [w[:40] for w in inserted[:20]], "deleted": [w[:40] for w in deleted[:20]],
                                 "similarity": round(matcher.ratio(), 3)})


# -- finish reason consistency -------------------------------------------------------


def check_tool_calls(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail tool calls on a probe that offered no tools (FC-11).

    ``finish_reason: tool_calls`` or ``delta.tool_calls`` in the stream when
    the request sent no ``tools``.  A request that offered tools
    (``spec.tools``) passes here: its calls are judged by the tool-call checks
    (:mod:`.tools`: a call where none fits is ``tool_unexpected_call``).
    Evidence: ``finish_reason``; with calls seen, ``tool_calls`` (how many)
    and ``tools`` (their names).
    """
    name = "corruption.tool_calls"
    if spec.tools:
        return CheckResult(check=name, outcome="pass")
    if reply.finish_reason == "tool_calls" or reply.tool_calls:
        evidence: dict = {"finish_reason": reply.finish_reason}
        if reply.tool_calls:
            evidence.update(tool_calls=reply.tool_calls, tools=list(reply.tool_names))
        return CheckResult(check=name, outcome="fail", reason="unexpected_tool_calls", evidence=evidence)
    return CheckResult(check=name, outcome="pass")


#: The behavioural checks, in the order they report.
#: These are the checks any reply gets, whatever was asked (a chat backend's reply guard runs them).
BEHAVIOUR_CHECKS = (check_leading_junk, check_tool_markup, check_control_tokens, check_reserved_tokens,
                    check_channel_leak, check_bytelevel, check_control_chars, check_repetition, check_echo,
                    check_tool_calls)


def behaviour_checks(reply: Reply, spec: ProbeSpec) -> list[CheckResult]:
    """Run every behavioural check (docs/concepts/probes.md, behavioural integrity) on one reply."""
    return [check(reply, spec) for check in BEHAVIOUR_CHECKS]
