#!/usr/bin/env python
"""Measure the language and encoding checks on real text; print PASS/FAIL per target.

Usage::

    python benchmarks/language_table.py [--shared DIR] [--limit N] [--variants-limit M]

Data (read by path, never copied): ``<shared>/data/lang`` (its own notes name
every source): Leipzig sentences, word pairs and single words for the 17
languages, sentences of seven look-alike languages, ftfy's mojibake cases.
``<shared>`` defaults to ``$CANARY_SHARED_DIR`` or the ``shared`` folder next
to the repository.

What is measured (this comparison is the research behind the language check's setup):

- *same*: replies of 2-5 consecutive real sentences in the requested language
  (non-overlapping, sizes cycling 2, 3, 4, 5).  A ``language_switch`` /
  ``language_mix`` here is a false alarm (target <= 0.1 %), inconclusive
  <= 2 %.  Replies whose text holds real mojibake fail ``encoding_broken``
  rightly (about 0.3 % of the lines); they are counted apart.
- *swap*: the same replies judged for a request in ``PARTNER[lang]``: fail
  >= 99 %.
- *mix*: four real sentences alternating pt/es (and es/pt): ``language_mix``
  >= 98 %; pure pt and es replies flagged <= 0.5 %.
- *words*: single words and word pairs never fail.
- *neighbours*: sentences of ca ms be bg af ro sk judged for the one of the 17
  they look most like: pass <= 5 % (each language).
- *mojibake*: ftfy's in-the-wild cases (where ftfy's expected fix differs from
  the text) fail ``encoding_broken`` >= 95 %; its negative cases that are not
  damaged are flagged <= 2 %.
- *defect families* (letters of another language of a
  shared script, a reply or passage sent twice): each family's check on
  every real sentence and every reply of 2-5 sentences (item 6: on the
  single words and word pairs) must trip 0.00 % in every language; the
  catch rate on the synthetic replies of ``tests/family_cases.py`` is
  printed beside it, and the letters check's on real sentences of two
  languages of one script (information).  A content filter speaking through
  an HTTP 4xx has no row: it is judged on error bodies, not on text (its
  synthetic cases are in the table of synthetic replies).

Each detector alone (py3langid-nb, langdetect; the same rule, no second
opinion) and the combination (the production check) are reported on a
subsample, with the median time per reply.  Exit status 1 when a target is
missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reverie_canary.client.checks.behaviour import check_repetition  # noqa: E402
from reverie_canary.client.checks.duplicate import check_duplicate  # noqa: E402
from reverie_canary.client.checks.encoding import assess_encoding  # noqa: E402
from reverie_canary.client.checks.language import (  # noqa: E402
    DEFAULT_POLICY,
    LANGUAGES,
    PARTNER,
    LanguagePolicy,
    assess_language,
    rank,
    warm_up,
)
from reverie_canary.client.checks.letters import check_foreign_letters  # noqa: E402
from reverie_canary.client.checks.salad import check_word_salad  # noqa: E402
from reverie_canary.client.checks.scripts import check_foreign_script, short_reply_switch  # noqa: E402
from reverie_canary.client.checks.text import CYRILLIC, SCRIPT_OF, strip_for_detection  # noqa: E402
from reverie_canary.client.checks.tokens import (  # noqa: E402
    check_channel_leak,
    check_control_tokens,
    check_reserved_tokens,
)
from reverie_canary.client.reply import ProbeSpec, Reply  # noqa: E402

NEIGHBOUR_LANGUAGES = ("ca", "ms", "be", "bg", "af", "ro", "sk")

VARIANTS: dict[str, LanguagePolicy] = {
    "py3langid-nb": replace(DEFAULT_POLICY, second_opinion=False),
    "langdetect": replace(DEFAULT_POLICY, first_opinion="langdetect", second_opinion=False),
    "combination": DEFAULT_POLICY,
}


def default_shared() -> Path:
    """Return ``$CANARY_SHARED_DIR``, else the folder ``shared`` beside the checkout."""
    env = os.environ.get("CANARY_SHARED_DIR")
    return Path(env) if env else ROOT.parent / "shared"


def read_lines(path: Path) -> list[str]:
    """Non-empty lines of a UTF-8 text file, stripped."""
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def build_replies(lines: list[str], limit: int | None = None) -> list[str]:
    """Join consecutive lines into replies of 2, 3, 4, 5, 2, ... sentences.

    Args:
        lines: sentences in file order.
        limit: at most this many replies (``None``: all).

    Returns:
        Non-overlapping replies; a trailing single line is dropped.
    """
    out: list[str] = []
    i = k = 0
    while i + 1 < len(lines) and (limit is None or len(out) < limit):
        n = 2 + k % 4
        out.append(" ".join(lines[i:i + n]))
        i += n
        k += 1
    return out


def alternate(first: list[str], second: list[str], count: int, per_reply: int = 4) -> list[str]:
    """Interleave real sentences of two languages: a b a b (``per_reply`` sentences)."""
    out = []
    for j in range(count):
        parts = []
        for k in range(per_reply):
            src = first if k % 2 == 0 else second
            parts.append(src[(j * per_reply // 2 + k // 2) % len(src)])
        out.append(" ".join(parts))
    return out


def spread(items: list, limit: int | None) -> list:
    """A deterministic, evenly spread subsample of at most ``limit`` items."""
    if limit is None or len(items) <= limit:
        return items
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


@dataclass
class Tally:
    """Outcomes of one dataset: counts by outcome and reason, and times."""

    counts: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    mojibake: int = 0
    times: list[float] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    @property
    def judged(self) -> int:
        return sum(self.counts.values())

    def pct(self, outcome: str) -> float:
        return 100.0 * self.counts[outcome] / self.judged if self.judged else 0.0

    def reason_pct(self, reason: str) -> float:
        return 100.0 * self.reasons[reason] / self.judged if self.judged else 0.0

    def add(self, other: Tally) -> None:
        self.counts.update(other.counts)
        self.reasons.update(other.reasons)
        self.mojibake += other.mojibake
        self.times.extend(other.times)
        self.examples.extend(other.examples)

    def median_us(self) -> float:
        return statistics.median(self.times) * 1e6 if self.times else 0.0


def judge(texts: Iterable[str], expected: str, policy: LanguagePolicy, *,
          encoding_first: bool = True, keep: str | None = None) -> Tally:
    """Run the encoding check, then the language check, on every text.

    Args:
        texts: replies.
        expected: requested language.
        policy: language policy (detector variant).
        encoding_first: count texts that fail ``encoding_broken`` apart.
        keep: remember up to five texts with this outcome (for the report).
    """
    tally = Tally()
    for text in texts:
        t0 = time.perf_counter()
        if encoding_first and assess_encoding(text).outcome == "fail":
            tally.mojibake += 1
            continue
        result = assess_language(text, expected, policy)
        tally.times.append(time.perf_counter() - t0)
        tally.counts[result.outcome] += 1
        if result.reason:
            tally.reasons[result.reason] += 1
        if keep and result.outcome == keep and len(tally.examples) < 5:
            tally.examples.append(f"[{expected}] {result.reason}: {text[:140]}")
    return tally


def likely_target(text: str) -> str:
    """The one of the 17 a look-alike text would most likely pass as."""
    probs = dict(rank(text))
    return max(LANGUAGES, key=lambda lang: probs.get(lang, 0.0))


@dataclass
class Report:
    """Everything measured for one policy."""

    same: dict[str, Tally] = field(default_factory=dict)
    swap: dict[str, Tally] = field(default_factory=dict)
    pairs: dict[str, Tally] = field(default_factory=dict)
    words: dict[str, Tally] = field(default_factory=dict)
    mixed: Tally = field(default_factory=Tally)
    pure: Tally = field(default_factory=Tally)
    neighbours: dict[str, Tally] = field(default_factory=dict)

    def pooled(self, part: dict[str, Tally]) -> Tally:
        total = Tally()
        for tally in part.values():
            total.add(tally)
        return total


def measure(data: Path, policy: LanguagePolicy, limit: int | None, *, words_limit: int | None = None) -> Report:
    """Run every dataset of the language check for one policy.

    Args:
        data: ``<shared>/data/lang``.
        policy: the variant.
        limit: replies per language (and per other dataset) at most.
        words_limit: single words / word pairs per language at most.
    """
    report = Report()
    sentences = {lang: read_lines(data / "sentences" / f"{lang}.txt") for lang in LANGUAGES}
    for lang in LANGUAGES:
        replies = spread(build_replies(sentences[lang]), limit)
        report.same[lang] = judge(replies, lang, policy, keep="fail")
        report.swap[lang] = judge(replies, PARTNER[lang], policy, keep="pass")
        for kind, into in (("word-pairs", report.pairs), ("single-words", report.words)):
            items = spread(read_lines(data / kind / f"{lang}.txt"), words_limit)
            into[lang] = judge(items, lang, policy, encoding_first=False, keep="fail")
    n_mix = min(limit or 200, 200)
    pt, es = sentences["pt"], sentences["es"]
    for first, second, lang in ((pt, es, "pt"), (es, pt, "es")):
        report.mixed.add(judge(alternate(first, second, n_mix // 2), lang, policy, keep="pass"))
        pure = [" ".join(first[4 * j:4 * j + 4]) for j in range(n_mix // 2)]
        report.pure.add(judge(pure, lang, policy, keep="fail"))
    for nb in NEIGHBOUR_LANGUAGES:
        tally = Tally()
        for text in spread(read_lines(data / "neighbors" / "sentences" / f"{nb}.txt"), limit):
            tally.add(judge([text], likely_target(text), policy, encoding_first=False, keep="pass"))
        report.neighbours[nb] = tally
    return report


def measure_mojibake(data: Path) -> dict[str, tuple[int, int, list[str]]]:
    """Encoding check on ftfy's cases: ``{file: (flagged, total, misses)}``.

    In-the-wild counts only cases ftfy's authors mark as damaged (expected fix
    differs from the text); negative counts only cases that are not damaged
    (the one negative case holding a C1 control is damaged by the project's
    rule and is counted apart).
    """
    out = {}
    for name, damaged in (("in-the-wild.json", True), ("negative.json", False)):
        cases = json.loads((data / "mojibake" / name).read_text(encoding="utf-8"))
        # ftfy's "sort of negative" cases are mojibake its authors decline to *repair* (the label says so:
        # inconsistent, safest not to decode); a canary *detects*, so they count apart, not as clean
        chosen = [c for c in cases if (c.get("fixed-encoding", c["fixed"]) != c["original"]) == damaged
                  and not c.get("label", "").lower().startswith("sort of negative")]
        flagged, odd = 0, []
        for case in chosen:
            bad = assess_encoding(case["original"]).outcome == "fail"
            flagged += bad
            if bad != damaged:
                odd.append(case["original"][:80])
        out[name] = (flagged, len(chosen), odd)
    return out


# -- the defect families (leaked tokens, scripts, salad) on real text----------------

#: family -> the check whose false trips on real text are counted (items 1-5, 7).
FAMILY_CHECKS = {
    "1. channel_leak": (check_channel_leak,),
    "2. reserved_tokens": (check_reserved_tokens,),
    "3. control_tokens (any bars, spacers)": (check_control_tokens,),
    "4. foreign_script": (check_foreign_script,),
    "5. word_salad": (check_word_salad,),
    "7. any leaked-token check (code masked)": (check_channel_leak, check_reserved_tokens, check_control_tokens),
    "8. foreign_letters (another language of the script)": (check_foreign_letters,),
    "9. duplicated_text (a reply or passage sent twice)": (check_duplicate,),
    "10. control_tokens, repetition (markup and output in code pass)": (check_control_tokens, check_repetition),
}

#: (requested, other) pairs for the letters check on real sentences: a reply of three sentences with the
#: middle one in ``other``, and a reply all in ``other`` (neighbours' sentences from ``neighbors/``).
LETTER_MIXES = (("ru", "uk"), ("uk", "ru"), ("ru", "bg"), ("uk", "bg"), ("ru", "be"), ("uk", "be"),
                ("ja", "zh"), ("zh", "ja"), ("pl", "sk"), ("en", "vi"), ("de", "tr"), ("en", "pl"),
                ("es", "pt"), ("id", "vi"))
SHORT_FAMILY = "6. short reply all in a foreign script"


@dataclass
class FamilyTally:
    """False trips of one family on the real text of one language."""

    texts: int = 0
    trips: int = 0
    examples: list[str] = field(default_factory=list)

    def pct(self) -> float:
        return 100.0 * self.trips / self.texts if self.texts else 0.0


def measure_families(data: Path) -> tuple[dict[str, dict[str, FamilyTally]], int, int]:
    """Run each family's check on every real sentence and every reply of 2-5 sentences, per language.

    Texts the encoding check fails (real mojibake: 1.4 % of the texts, each
    damaged line once alone and once in its reply) are counted
    apart, as in the language table; so are texts whose damage the letters
    check finds (Turkish written in cp1254 and read as cp1252, ``yýlýnda``:
    243 of the 1000 Turkish lines, reported as ``encoding_broken``).  Item 6
    is measured on the single words
    and word pairs (the short replies of the data set): how many its rule
    (:func:`short_reply_switch`) would call a switch.

    Returns:
        ``({family: {lang: FamilyTally}}, texts with mojibake apart, texts with code-page damage apart)``.
    """
    out: dict[str, dict[str, FamilyTally]] = {name: {} for name in (*FAMILY_CHECKS, SHORT_FAMILY)}
    apart = codepage = 0
    for lang in LANGUAGES:
        lines = read_lines(data / "sentences" / f"{lang}.txt")
        spec = ProbeSpec(kind="refusal", language=lang)
        tallies = {name: FamilyTally() for name in FAMILY_CHECKS}
        for text in build_replies(lines) + lines:
            if assess_encoding(text).outcome == "fail":
                apart += 1
                continue
            reply = Reply(text=text, finish_reason="stop")
            if check_foreign_letters(reply, spec).reason == "encoding_broken":
                codepage += 1
                continue
            for name, checks in FAMILY_CHECKS.items():
                tally = tallies[name]
                tally.texts += 1
                if any(check(reply, spec).outcome == "fail" for check in checks):
                    tally.trips += 1
                    if len(tally.examples) < 3:
                        tally.examples.append(f"[{lang}] {text[:120]}")
        for name, tally in tallies.items():
            out[name][lang] = tally
        short = FamilyTally()
        for kind in ("single-words", "word-pairs"):
            for text in read_lines(data / kind / f"{lang}.txt"):
                short.texts += 1
                clean = strip_for_detection(text, fold_cyrillic=SCRIPT_OF.get(lang) == CYRILLIC)
                if short_reply_switch(clean, lang) is not None:
                    short.trips += 1
                    if len(short.examples) < 3:
                        short.examples.append(f"[{lang}] {text[:120]}")
        out[SHORT_FAMILY][lang] = short
    return out, apart, codepage


def synthetic_rates() -> list[list]:
    """Each family's catch rate on the synthetic cases of ``tests/family_cases.py`` and its traps' trip rate."""
    from tests.family_cases import CAUGHT, FAMILIES, KNOWN_MISSES, TRAPS, caught, tripped

    rows = []
    for family, (reason, title) in FAMILIES.items():
        hits = sum(caught(family, lang, text) for lang, text in CAUGHT[family])
        cases = CAUGHT[family] + KNOWN_MISSES[family]
        all_hits = hits + sum(caught(family, lang, text) for lang, text in KNOWN_MISSES[family])
        trips = sum(tripped(family, lang, text) for lang, text in TRAPS[family])
        langs = len({lang for lang, _ in cases})
        rows.append([title, reason or "(any leak reason)",
                     f"{hits}/{len(CAUGHT[family])} ({100.0 * hits / len(CAUGHT[family]):.1f} %)",
                     f"{all_hits}/{len(cases)} ({100.0 * all_hits / len(cases):.1f} %)", langs,
                     f"{trips}/{len(TRAPS[family])}"])
    return rows


def letter_mixes(data: Path, count: int = 200) -> list[list]:
    """The letters check on real sentences of two languages of one script (:data:`LETTER_MIXES`).

    Returns:
        Rows ``[pair, one sentence inside (% caught), whole reply (% caught)]``.  Information, not a
        target: a real sentence may hold no letter or word only the other language writes (the
        Leipzig Spanish lost its accents: es/pt shows little).
    """
    def lines(lang: str) -> list[str]:
        path = data / "sentences" / f"{lang}.txt"
        return read_lines(path if path.is_file() else data / "neighbors" / "sentences" / f"{lang}.txt")

    rows = []
    for requested, other in LETTER_MIXES:
        own, theirs = lines(requested), lines(other)
        spec = ProbeSpec(kind="refusal", language=requested)
        inside = [" ".join((own[(3 * i) % len(own)], theirs[i % len(theirs)], own[(3 * i + 1) % len(own)]))
                  for i in range(count)]
        whole = [" ".join(theirs[(3 * i) % len(theirs):(3 * i) % len(theirs) + 3]) for i in range(count)]
        caught = [sum(check_foreign_letters(Reply(text=t), spec).reason == "foreign_letters" for t in texts)
                  for texts in (inside, whole)]
        rows.append([f"{other} in {requested}", f"{100.0 * caught[0] / count:.1f}", f"{100.0 * caught[1] / count:.1f}"])
    return rows


def family_targets(families: dict[str, dict[str, FamilyTally]]) -> list[Target]:
    """One official target per family: its worst language's false-trip rate on real text is 0.00 %."""
    out = []
    for name, per_lang in families.items():
        worst = max(per_lang, key=lambda k: per_lang[k].pct())
        out.append(Target(f"real text trips {name}, worst language ({worst})", per_lang[worst].pct(), 0.0, True))
    return out


# -- targets -------------------------------------------------------------------


@dataclass
class Target:
    """One measured number against its bound; ``official`` targets decide the exit status."""

    name: str
    value: float
    bound: float
    at_most: bool
    official: bool = True

    @property
    def ok(self) -> bool:
        return self.value <= self.bound if self.at_most else self.value >= self.bound

    def line(self) -> str:
        op = "<=" if self.at_most else ">="
        if self.official:
            mark = "PASS" if self.ok else "FAIL"
        else:
            mark = "info" if self.ok else "INFO"
        return f"{mark}  {self.name}: {self.value:.2f} % (bound {op} {self.bound} %)"


def targets(report: Report, mojibake: dict) -> list[Target]:
    """The issue's targets on one report of the production check.

    The issue states the same-language, swap and mixing targets over all
    replies (pooled); they decide the exit status.  The worst single
    language is printed beside them as information.  The look-alike target
    holds for each neighbour language separately.
    """
    same = report.pooled(report.same)
    swap = report.pooled(report.swap)
    worst_fail = max(report.same, key=lambda k: report.same[k].pct("fail"))
    worst_inc = max(report.same, key=lambda k: report.same[k].pct("inconclusive"))
    worst_swap = min(report.swap, key=lambda k: report.swap[k].pct("fail"))
    worst_nb = max(report.neighbours, key=lambda k: report.neighbours[k].pct("pass"))
    out = [
        Target("same language: false language_switch/language_mix", same.pct("fail"), 0.1, True),
        Target(f"  worst language ({worst_fail})", report.same[worst_fail].pct("fail"), 0.1, True, official=False),
        Target("same language: inconclusive", same.pct("inconclusive"), 2.0, True),
        Target(f"  worst language ({worst_inc})", report.same[worst_inc].pct("inconclusive"), 2.0, True, official=False),
        Target("partner-language request: fail", swap.pct("fail"), 99.0, False),
        Target(f"  worst language ({worst_swap})", report.swap[worst_swap].pct("fail"), 99.0, False, official=False),
        Target("pt/es interleaved: fail as language_mix", report.mixed.reason_pct("language_mix"), 98.0, False),
        Target("pure pt/es: flagged", report.pure.pct("fail"), 0.5, True),
        Target("word pairs: fail", report.pooled(report.pairs).pct("fail"), 0.0, True),
        Target("single words: fail", report.pooled(report.words).pct("fail"), 0.0, True),
        Target(f"look-alike neighbours: pass as one of ours, worst ({worst_nb})",
               report.neighbours[worst_nb].pct("pass"), 5.0, True),
    ]
    wild, wild_n, _ = mojibake["in-the-wild.json"]
    neg, neg_n, _ = mojibake["negative.json"]
    out.append(Target("mojibake in the wild: encoding_broken", 100.0 * wild / wild_n, 95.0, False))
    out.append(Target("mojibake negatives: flagged", 100.0 * neg / neg_n, 2.0, True))
    return out


# -- printing ------------------------------------------------------------------


def _row(cells: list, widths: list[int]) -> str:
    return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)) + " |"


def print_table(header: list[str], rows: list[list]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    print(_row(header, widths))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(_row(r, widths))


def _pio(t: Tally) -> str:
    return f"{t.pct('pass'):.1f} / {t.pct('inconclusive'):.1f} / {t.pct('fail'):.1f}"


def print_language_table(report: Report) -> None:
    rows = []
    for lang in LANGUAGES:
        s, w = report.same[lang], report.swap[lang]
        rows.append([lang, s.judged + s.mojibake, _pio(s), s.mojibake, f"{PARTNER[lang]}: {_pio(w)}",
                     f"{report.pairs[lang].pct('fail'):.1f}", f"{report.words[lang].pct('fail'):.1f}",
                     f"{s.median_us():.0f}"])
    s, w = report.pooled(report.same), report.pooled(report.swap)
    rows.append(["all", s.judged + s.mojibake, _pio(s), s.mojibake, f"--: {_pio(w)}",
                 f"{report.pooled(report.pairs).pct('fail'):.1f}", f"{report.pooled(report.words).pct('fail'):.1f}",
                 f"{s.median_us():.0f}"])
    print_table(["lang", "replies", "same pass/inc/fail %", "mojibake (apart)", "swap request: pass/inc/fail %",
                 "pairs fail %", "words fail %", "µs/reply (median)"], rows)


def print_variants(reports: dict[str, Report]) -> None:
    rows = []
    for name, r in reports.items():
        same, swap = r.pooled(r.same), r.pooled(r.swap)
        nb = Tally()
        for t in r.neighbours.values():
            nb.add(t)
        rows.append([name, _pio(same), _pio(swap), f"{r.mixed.reason_pct('language_mix'):.1f}",
                     f"{r.pure.pct('fail'):.1f}", f"{r.pooled(r.pairs).pct('fail'):.1f}",
                     f"{r.pooled(r.words).pct('fail'):.1f}", f"{nb.pct('pass'):.1f}",
                     f"{same.median_us():.0f}"])
    print_table(["variant", "same p/i/f %", "swap p/i/f %", "mix flagged %", "pure flagged %",
                 "pairs fail %", "words fail %", "neighbours pass %", "µs/reply"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=None, help="the shared folder (default: $CANARY_SHARED_DIR, else 'shared' beside the checkout)")
    parser.add_argument("--limit", type=int, default=None, help="replies per language and dataset at most (default: all)")
    parser.add_argument("--variants-limit", type=int, default=40,
                        help="replies per language for the detector-alone comparison (default 40)")
    args = parser.parse_args(argv)
    data = (args.shared or default_shared()) / "data" / "lang"
    if not data.is_dir():
        print(f"no data at {data}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    warm_up()
    print(f"warm-up (both detectors loaded): {time.perf_counter() - t0:.2f} s\n")

    t0 = time.perf_counter()
    report = measure(data, DEFAULT_POLICY, args.limit)
    print(f"## Production check (py3langid-nb + langdetect to confirm), {time.perf_counter() - t0:.1f} s\n")
    print_language_table(report)

    print("\n## Look-alike neighbours (judged for the one of the 17 they resemble most): pass / inc / fail %\n")
    print_table(["neighbour", "sentences", "pass / inc / fail %"],
                [[nb, t.judged, _pio(t)] for nb, t in report.neighbours.items()])
    print(f"\n## pt/es mixing: interleaved language_mix {report.mixed.reason_pct('language_mix'):.1f} % "
          f"(n={report.mixed.judged}; outcomes {_pio(report.mixed)}), pure flagged {report.pure.pct('fail'):.1f} % "
          f"(n={report.pure.judged})")

    mojibake = measure_mojibake(data)
    print("\n## Encoding (no language detector)\n")
    rows = []
    for name, (flagged, total, odd) in mojibake.items():
        rows.append([name, total, flagged, f"{100.0 * flagged / total:.1f}", "; ".join(repr(o) for o in odd[:3])])
    print_table(["ftfy cases", "cases", "flagged", "%", "exceptions"], rows)

    vlimit = args.variants_limit if args.limit is None else min(args.limit, args.variants_limit)
    print(f"\n## Each detector alone and the combination ({vlimit} replies per language and dataset, "
          f"{min(vlimit, 200)} single words / pairs per language)\n")
    reports = {name: measure(data, pol, vlimit, words_limit=min(vlimit, 200)) for name, pol in VARIANTS.items()}
    print_variants(reports)

    examples = report.pooled(report.same).examples + report.pure.examples + report.pooled(report.pairs).examples
    if examples:
        print("\nFalse alarms (first few):")
        for e in examples[:10]:
            print("  " + e)
    t0 = time.perf_counter()
    families, apart, codepage = measure_families(data)
    print(f"\n## Defect families on real text: false trips per language (%), "
          f"{time.perf_counter() - t0:.1f} s; {apart} texts with real mojibake and {codepage} with code-page "
          f"damage (letters check: encoding_broken) counted apart\n")
    header = ["family", "texts", *LANGUAGES, "all"]
    rows = []
    for name, per_lang in families.items():
        texts = sum(t.texts for t in per_lang.values())
        trips = sum(t.trips for t in per_lang.values())
        rows.append([name, texts, *(f"{per_lang[lang].pct():.2f}" for lang in LANGUAGES),
                     f"{100.0 * trips / texts:.2f}" if texts else "-"])
    print_table(header, rows)
    for name, per_lang in families.items():
        for tally in per_lang.values():
            for e in tally.examples:
                print(f"  false trip ({name}): {e}")
    print("\n## Defect families on synthetic replies (tests/family_cases.py)\n")
    print_table(["family", "reason", "caught", "caught, known limits included", "languages", "traps tripped"],
                synthetic_rates())
    print("\n## foreign_letters on real sentences of two languages of one script (200 replies each; information)\n")
    print_table(["mix", "one sentence of 3 caught %", "whole reply caught %"], letter_mixes(data))

    print("\n## Targets\n")
    results = targets(report, mojibake) + family_targets(families)
    for t in results:
        print(t.line())
    official = [t for t in results if t.official]
    missed = [t for t in official if not t.ok]
    print(f"\n{len(official) - len(missed)} of {len(official)} targets met"
          + (" (INFO lines are per-language detail, not targets)" if any(not t.ok for t in results) else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
