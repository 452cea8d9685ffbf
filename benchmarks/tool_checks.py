#!/usr/bin/env python
"""Each tool-call check's catch rate on its faults and false trips on correct replies, and what it costs.

Usage::

    CANARY_SHARED_DIR=/path/to/shared python benchmarks/tool_checks.py [--runs N] [--no-real-text]

Three tables:

1. **Catch and false trips** per check, on the synthetic set of ``tests/tool_cases.py`` (replies to
   the canary's own tool prompts, 17 languages, built through the wire reader): *caught* is how
   many of the faults of that check's reasons the check itself fails (its own result, not the
   folded one), *named* how many the probe's folded reason names (precedence); *known misses*
   (``KNOWN_MISSES``) count in the denominator; *false trips* is how many correct replies the
   check fails (its own result).
2. **The markup check on real text** (it runs on every reply): the share of replies of 1 to 5
   real sentences of the 17 languages (``$CANARY_SHARED_DIR/data/lang/sentences``, read by path)
   it fails, without and with the tool names offered.
3. **Cost**: median µs of each tool check on a streamed call and on a text reply, the whole
   ``evaluate`` of a tool probe, and the wire reader on a streamed call beside a text stream.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reverie_canary.client.checks import evaluate, tokens  # noqa: E402
from reverie_canary.client.checks.tools import (  # noqa: E402
    TOOL_CHECKS,
    check_tool_markup,
    find_tool_markup,
)
from reverie_canary.client.chunks import ChunkReader  # noqa: E402
from reverie_canary.client.reply import ProbeSpec, Reply  # noqa: E402
from reverie_canary.services.prober.prompts import LANGUAGE_NAMES, TOOLS, build  # noqa: E402
from tests.tool_cases import CHECK_OF_REASON, FAILING, KNOWN_MISSES, PASSING, Case  # noqa: E402

CHECKS: dict[str, Callable[[Reply, ProbeSpec], object]] = {
    **{c.__name__: c for c in TOOL_CHECKS}, "check_tool_markup": check_tool_markup}


def _own(case: Case) -> dict[str, tuple[str, str]]:
    """Every check's own ``(outcome, reason)`` on ``case``, by check name."""
    return {c.check: (c.outcome, c.reason) for c in evaluate(case.reply, case.probe_spec()).checks}


def catch_table() -> list[tuple[str, ...]]:
    rows = []
    names = sorted({CHECK_OF_REASON[c.reason] for c in FAILING}, key=list(CHECK_OF_REASON.values()).index)
    results = {c.id: (_own(c), evaluate(c.reply, c.probe_spec())) for c in FAILING + PASSING + KNOWN_MISSES}
    for check in names:
        faults = [c for c in FAILING if CHECK_OF_REASON[c.reason] == check]
        misses = [c for c in KNOWN_MISSES if CHECK_OF_REASON[c.reason] == check]
        caught = sum(results[c.id][0].get(check, ("", ""))[0] == "fail" for c in faults + misses)
        named = sum(results[c.id][1].reason == c.reason for c in faults + misses)
        langs = len({c.language for c in faults})
        trips = sum(results[c.id][0].get(check, ("", ""))[0] == "fail" for c in PASSING)
        total = len(faults) + len(misses)
        rows.append((check, f"{caught}/{total} ({100.0 * caught / total:.0f} %)",
                     f"{named}/{total} ({100.0 * named / total:.0f} %)", str(langs),
                     f"{trips}/{len(PASSING)} ({100.0 * trips / len(PASSING):.1f} %)"))
    return rows


def _replies(lines: list[str]) -> list[str]:
    """Consecutive sentences as replies of 1, 2, 3, 4, 5, 1, ... sentences."""
    out, i, size = [], 0, 1
    while i < len(lines):
        out.append(" ".join(lines[i:i + size]))
        i += size
        size = size % 5 + 1
    return out


def real_text_table(shared: Path) -> tuple[list[tuple[str, ...]], list[str]]:
    names = tuple(t["function"]["name"] for t in TOOLS)
    rows, tripped = [], []
    total = [0, 0, 0]
    for lang in LANGUAGE_NAMES:
        path = shared / "data" / "lang" / "sentences" / f"{lang}.txt"
        if not path.is_file():
            continue
        replies = _replies([line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()])
        plain = [r for r in replies if find_tool_markup(r) is not None]
        offered = [r for r in replies if find_tool_markup(r, names) is not None]
        tripped += plain + [r for r in offered if r not in plain]
        total[0] += len(replies)
        total[1] += len(plain)
        total[2] += len(offered)
        rows.append((lang, str(len(replies)), str(len(plain)), str(len(offered))))
    rows.append(("all", str(total[0]), f"{total[1]} ({100.0 * total[1] / max(1, total[0]):.3f} %)",
                 f"{total[2]} ({100.0 * total[2] / max(1, total[0]):.3f} %)"))
    return rows, tripped


def _uncached(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` with the token scan's caches emptied first (the markup check alone, not a cache hit)."""
    def run() -> object:
        tokens._find_tokens.cache_clear()
        tokens._token_view.cache_clear()
        return fn()
    return run


def _time(fn: Callable[[], object], runs: int) -> float:
    fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1000.0)
    return statistics.median(samples)


def _stream_lines(args: str) -> list[bytes]:
    def line(delta: dict) -> bytes:
        return b"data: " + json.dumps({"id": "gen-1", "provider": "Lab", "choices": [{"index": 0, "delta": delta}]},
                                      ensure_ascii=False).encode()
    lines = [line({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                         "function": {"name": "create_event", "arguments": ""}}]})]
    lines += [line({"tool_calls": [{"index": 0, "function": {"arguments": args[i:i + 6]}}]})
              for i in range(0, len(args), 6)]
    lines += [b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}', b"data: [DONE]"]
    return lines


def _text_lines(words: str) -> list[bytes]:
    lines = [b"data: " + json.dumps({"id": "gen-1", "provider": "Lab",
                                     "choices": [{"index": 0, "delta": {"content": words[i:i + 12]}}]}).encode()
             for i in range(0, len(words), 12)]
    return lines + [b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}', b"data: [DONE]"]


def cost_table(runs: int) -> list[tuple[str, ...]]:
    spec = build("tools", "ru", variant="call_stream").spec
    second = build("tools", "ru", variant="second_turn").spec
    args = json.dumps(spec.expected_arguments, ensure_ascii=False)
    call_lines = _stream_lines(args)
    words = "Mira tightens her grip on the brass lamp as the smugglers crowd the narrow stairs below her. " * 4
    text_lines = _text_lines(words)

    def read(lines: list[bytes]) -> Reply:
        reader = ChunkReader(reply_max_bytes=256 * 1024)
        for n, raw in enumerate(lines):
            reader.line(raw, float(n))
        return reader.reply(http_status=200)

    call_reply, text_reply = read(call_lines), read(text_lines)
    answer = Reply(text="Сейчас в Казани 31 °C, ясно и безветренно.", finish_reason="stop", http_status=200)
    rows = []
    for name, check in CHECKS.items():
        rows.append((f"{name} (streamed call)", f"{_time(lambda check=check: check(call_reply, spec), runs):.1f}"))
    plain = ProbeSpec(kind="refusal")
    rows.append(("check_tool_markup (300-token roleplay reply)",
                 f"{_time(_uncached(lambda: check_tool_markup(text_reply, plain)), runs):.1f}"))
    rows.append(("check_tool_markup (the same, tools offered)",
                 f"{_time(_uncached(lambda: check_tool_markup(text_reply, spec)), runs):.1f}"))
    rows.append(("evaluate (tools probe, a streamed call)", f"{_time(lambda: evaluate(call_reply, spec), runs):.1f}"))
    rows.append(("evaluate (tools probe, second-turn text)", f"{_time(lambda: evaluate(answer, second), runs):.1f}"))
    rows.append((f"ChunkReader: streamed call ({len(call_lines)} lines)", f"{_time(lambda: read(call_lines), runs):.1f}"))
    rows.append((f"ChunkReader: text stream ({len(text_lines)} lines)", f"{_time(lambda: read(text_lines), runs):.1f}"))
    return rows


def _print(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for i, row in enumerate(table):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400, help="timed calls per row (default 400)")
    parser.add_argument("--no-real-text", action="store_true", help="skip the markup check on real sentences")
    args = parser.parse_args(argv)
    print(f"synthetic set: {len(FAILING)} faults, {len(PASSING)} correct replies, {len(KNOWN_MISSES)} known misses, "
          f"{len({c.language for c in FAILING + PASSING})} languages\n")
    _print(("check", "caught (own result)", "named (probe's reason)", "languages", "false trips on correct"),
           catch_table())
    shared = Path(os.environ.get("CANARY_SHARED_DIR") or ROOT.parent / "shared")
    if not args.no_real_text and (shared / "data" / "lang" / "sentences").is_dir():
        rows, tripped = real_text_table(shared)
        print("\nthe markup check on real text (replies of 1-5 sentences):\n")
        _print(("language", "replies", "tripped, no tools offered", "tripped, tools offered"), rows)
        for reply in tripped[:10]:
            print("  tripped:", reply[:160])
    print("\ncost (median µs):\n")
    _print(("row", "median µs"), cost_table(args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
