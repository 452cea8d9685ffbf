#!/usr/bin/env python
"""Median time of each check on a 300-token reply, beside baselines measured in the same run.

Usage::

    python benchmarks/checks_bench.py [--runs N]

The prober runs :func:`reverie_canary.client.checks.evaluate` on every reply, so
the non-language checks must stay well under 1 ms on a 300-token reply and
language detection at tens of µs per sentence.  Each row prints the median
and p95 in µs and the median as a ratio to two baselines timed on the same
text in the same process: ``json.loads`` of the reply serialised as a JSON
string, and ``str.split()`` of the reply.  Ratios travel between machines
better than microseconds do.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reverie_canary.client.checks import evaluate, tokens  # noqa: E402
from reverie_canary.client.checks.behaviour import (  # noqa: E402
    check_bytelevel,
    check_control_chars,
    check_control_tokens,
    check_echo,
    check_leading_junk,
    check_repetition,
    check_tool_calls,
)
from reverie_canary.client.checks.duplicate import check_duplicate  # noqa: E402
from reverie_canary.client.checks.encoding import check_encoding  # noqa: E402
from reverie_canary.client.checks.language import check_language, warm_up  # noqa: E402
from reverie_canary.client.checks.latency import check_ttft  # noqa: E402
from reverie_canary.client.checks.letters import check_foreign_letters  # noqa: E402
from reverie_canary.client.checks.refusal import (  # noqa: E402
    check_empty,
    check_finish,
    check_refusal_phrasing,
    check_truncation,
)
from reverie_canary.client.checks.salad import check_word_salad  # noqa: E402
from reverie_canary.client.checks.scripts import check_foreign_script  # noqa: E402
from reverie_canary.client.checks.structured import check_structured  # noqa: E402
from reverie_canary.client.checks.tokens import check_channel_leak, check_reserved_tokens  # noqa: E402
from reverie_canary.client.checks.tools import check_tool_markup  # noqa: E402
from reverie_canary.client.checks.transport import check_transport  # noqa: E402
from reverie_canary.client.reply import ProbeSpec, Reply, ToolCall  # noqa: E402
from reverie_canary.services.prober.prompts import SENTINEL, WEATHER_SCHEMA, build  # noqa: E402

EN = (
    "*Mira tightens her grip on the brass lamp as the smugglers crowd the narrow stairs below her.* "
    "The leader, a tall man with a salt-stained coat and a scar across his chin, draws a curved knife "
    "and lets the lantern light run along its edge. \"Give me the lamp, keeper, or I'll throw it into "
    "the sea myself,\" he growls, and two of his men laugh somewhere in the dark behind him. Mira does "
    "not answer at once. She listens to the wind pressing against the old windows, to the waves breaking "
    "on the rocks a hundred feet below, and to the slow creak of the iron railing under the weight of "
    "too many boots. Then she lifts the lamp higher, so that its beam swings across the water and catches "
    "the sails of a fishing boat that should not be out on a night like this. \"If I put this light out,\" "
    "she says quietly, \"that boat will break on the reef before midnight, and everyone in the harbour "
    "will know who did it.\" The leader hesitates. For a moment the only sound is the hiss of the rain on "
    "the glass and the distant bell of the buoy marking the channel. One of the younger smugglers glances "
    "back down the stairs, as if he is already counting the steps to the door. *Mira takes one careful "
    "step upward, never letting the beam leave the water,* and waits to see whether fear or greed will win "
    "the argument she can see written on the leader's face. "
)
PT = (
    "*Mira aperta a lanterna de latão enquanto os contrabandistas se amontoam na escada estreita.* "
    "O líder, um homem alto de casaco manchado de sal e com uma cicatriz no queixo, saca uma faca curva "
    "e deixa a luz escorrer pela lâmina. \"Entregue a lanterna, faroleira, ou eu mesmo a jogo no mar\", "
    "rosna ele, e dois dos seus homens riem em algum lugar no escuro. Mira não responde logo. Ela escuta "
    "o vento contra as janelas antigas, as ondas quebrando nas rochas lá embaixo e o rangido lento do "
    "corrimão de ferro sob o peso de tantas botas. Então ergue a lanterna, e o feixe varre a água até "
    "encontrar as velas de um barco de pesca que não deveria estar no mar numa noite assim. \"Se eu apagar "
    "esta luz\", diz ela baixinho, \"aquele barco vai se despedaçar no recife antes da meia-noite, e todo o "
    "porto vai saber quem foi.\" O líder hesita. Por um instante só se ouve a chuva no vidro e o sino "
    "distante da boia que marca o canal. Um dos contrabandistas mais jovens olha para trás, como se já "
    "contasse os degraus até a porta. *Mira sobe mais um degrau, sem tirar o feixe da água,* e espera para "
    "ver se o medo ou a ganância vai vencer a discussão que ela lê no rosto do líder. "
)
RU = (
    "*Мира крепче сжимает латунный фонарь, пока контрабандисты толпятся на узкой лестнице под ней.* "
    "Главарь, высокий мужчина в просоленном плаще со шрамом на подбородке, вынимает изогнутый нож и "
    "ведёт светом фонаря по его лезвию. «Отдай фонарь, смотритель, или я сам брошу его в море», — рычит "
    "он, и двое его людей смеются где-то в темноте. Мира не отвечает сразу. Она слушает ветер, который "
    "давит на старые окна, волны, что разбиваются о скалы далеко внизу, и медленный скрип железных перил "
    "под тяжестью сапог. Потом она поднимает фонарь выше, и луч скользит по воде, пока не находит парус "
    "рыбацкой лодки, которой не следовало выходить в море в такую ночь. «Если я погашу этот свет, — тихо "
    "говорит она, — лодка разобьётся о риф до полуночи, и вся гавань узнает, кто это сделал». Главарь "
    "колеблется. На мгновение слышен только шорох дождя по стеклу и далёкий колокол буя у фарватера. "
)
JSON_REPLY = json.dumps([{"city": f"Harbour {i}", "temp_c": 10 + i / 2, "summary": "light rain over the bay, wind "
                          "from the north-west, gusts near the cliffs"} for i in range(14)])


def _uncached(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` with the token scan's caches emptied first: a check alone on a reply, not a cache hit.

    The checks of one reply share one scan of its tokens (``checks/tokens.py``); the evaluate
    rows show that sharing, the rows of single token checks the cost of the scan itself.
    """
    def run() -> object:
        tokens._find_tokens.cache_clear()
        tokens._token_view.cache_clear()
        return fn()
    return run


def _time(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median and p95 in µs of ``runs`` calls (after a warm-up call)."""
    fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1000.0)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400, help="timed calls per check (default 400)")
    args = parser.parse_args(argv)
    runs = args.runs
    warm_up()

    en = Reply(text=EN + SENTINEL, finish_reason="stop", http_status=200, ttft_ms=640.0)
    pt = Reply(text=PT + SENTINEL, finish_reason="stop", http_status=200, ttft_ms=640.0)
    mixed = Reply(text=PT.replace(" e ", " 的 ", 20), finish_reason="stop")
    twice = Reply(text=EN + "\n\n" + EN, finish_reason="stop")
    ru = Reply(text=RU + SENTINEL, finish_reason="stop", http_status=200, ttft_ms=640.0)
    uk_mixed = Reply(text=RU.replace("Мира", "Міра").replace(" и ", " і "), finish_reason="stop")
    named = Reply(text=EN.replace("Mira", "Mirá Dvořák"), finish_reason="stop")
    tok = Reply(text=EN + "`<think>` " * 20 + "<｜tool▁call▁begin｜>lamp<|im_end|>" * 20, finish_reason="stop")
    js = Reply(text=JSON_REPLY, finish_reason="stop", http_status=200, ttft_ms=640.0)
    one = Reply(text='{"city": "Lisbon", "temp_c": 21.5, "summary": "clear sky over the harbour"}',
                finish_reason="stop", http_status=200, ttft_ms=640.0)
    weather = ProbeSpec(kind="structured", language="en", response_format="json_schema", schema=WEATHER_SCHEMA)
    refusal = ProbeSpec(kind="refusal", language="en", sentinel=SENTINEL, expected_prefix="*")
    refusal_pt = ProbeSpec(kind="refusal", language="pt", sentinel=SENTINEL, expected_prefix="*")
    refusal_ru = ProbeSpec(kind="refusal", language="ru", sentinel=SENTINEL, expected_prefix="*")
    language_en = ProbeSpec(kind="language", language="en")
    language_pt = ProbeSpec(kind="language", language="pt")
    structured = ProbeSpec(kind="structured", language="en", response_format="json_schema",
                           schema={"type": "array", "items": WEATHER_SCHEMA})
    echo_text = "The lighthouse keeper counted nine ships before the fog rolled in."
    echo = ProbeSpec(kind="echo", language="en", echo_text=echo_text)
    echo_ok = Reply(text=echo_text, finish_reason="stop")
    echo_bad = Reply(text="The lighthouse keeper counted nine REDACTED ships before the fog rolled in.", finish_reason="stop")
    tools = build("tools", "ru", variant="call_stream").spec
    arguments = json.dumps(tools.expected_arguments, ensure_ascii=False)
    tool_call = Reply(finish_reason="tool_calls", http_status=200, streamed=True, tool_calls=1,
                      calls=(ToolCall(index=0, id="call_1", name=tools.expected_tool, arguments=arguments,
                                      arguments_bytes=len(arguments.encode()), fragments=25),))

    serialized = json.dumps(EN)
    base_json, _ = _time(lambda: json.loads(serialized), runs)
    base_split, _ = _time(EN.split, runs)
    words = len(EN.split())
    print(f"reply: {len(EN)} characters, {words} words (about 300 tokens); pt reply {len(PT)} characters; "
          f"JSON reply {len(JSON_REPLY)} characters")
    print(f"baselines (same run): json.loads of the reply as a JSON string {base_json:.1f} µs, "
          f"str.split() {base_split:.1f} µs\n")

    rows: list[tuple[str, Callable[[], object], int]] = [
        ("transport", lambda: check_transport(en, refusal), runs),
        ("latency.ttft", lambda: check_ttft(en, refusal), runs),
        ("refusal.finish_reason", lambda: check_finish(en, refusal), runs),
        ("refusal.empty", lambda: check_empty(en, refusal), runs),
        ("refusal.truncation", lambda: check_truncation(en, refusal), runs),
        ("refusal.phrasing (en)", lambda: check_refusal_phrasing(en, refusal), runs),
        ("refusal.phrasing (pt + en)", lambda: check_refusal_phrasing(pt, refusal_pt), runs),
        ("structured (the probe's one object)", lambda: check_structured(one, weather), runs),
        ("structured (stress: 14 objects, 1.8 kB)", lambda: check_structured(js, structured), runs),
        ("encoding (en, ASCII)", lambda: check_encoding(en, language_en), runs),
        ("encoding (pt)", lambda: check_encoding(pt, language_pt), runs),
        ("corruption.leading_junk", lambda: check_leading_junk(en, refusal), runs),
        ("corruption.control_tokens", _uncached(lambda: check_control_tokens(en, refusal)), runs),
        ("corruption.reserved_tokens", _uncached(lambda: check_reserved_tokens(en, refusal)), runs),
        ("corruption.channel_leak", lambda: check_channel_leak(en, refusal), runs),
        ("corruption.control_tokens (stress: 40 tokens, code)", _uncached(lambda: check_control_tokens(tok, refusal)), runs),
        ("corruption.bytelevel_tokens", lambda: check_bytelevel(en, refusal), runs),
        ("corruption.word_salad (en)", lambda: check_word_salad(en, refusal), runs),
        ("corruption.word_salad (pt)", lambda: check_word_salad(pt, refusal_pt), runs),
        ("script.foreign_runs (en, ASCII)", lambda: check_foreign_script(en, refusal), runs),
        ("script.foreign_runs (pt)", lambda: check_foreign_script(pt, refusal_pt), runs),
        ("script.foreign_runs (stress: pt with 20 foreign runs)", lambda: check_foreign_script(mixed, refusal_pt), runs),
        ("script.foreign_letters (en, ASCII)", lambda: check_foreign_letters(en, refusal), runs),
        ("script.foreign_letters (pt)", lambda: check_foreign_letters(pt, refusal_pt), runs),
        ("script.foreign_letters (ru)", lambda: check_foreign_letters(ru, refusal_ru), runs),
        ("script.foreign_letters (en, names with diacritics)", lambda: check_foreign_letters(named, refusal), runs),
        ("script.foreign_letters (stress: ru with Ukrainian words)", lambda: check_foreign_letters(uk_mixed, refusal_ru),
         runs),
        ("corruption.control_chars", lambda: check_control_chars(pt, refusal), runs),
        ("corruption.repetition", lambda: check_repetition(en, refusal), runs),
        ("corruption.duplicate (en)", lambda: check_duplicate(en, refusal), runs),
        ("corruption.duplicate (pt)", lambda: check_duplicate(pt, refusal_pt), runs),
        ("corruption.duplicate (stress: the reply twice)", lambda: check_duplicate(twice, refusal), runs),
        ("corruption.echo (exact echo)", lambda: check_echo(echo_ok, echo), runs),
        ("corruption.echo (FC-17 diff)", lambda: check_echo(echo_bad, echo), runs),
        ("corruption.repetition (stress: 1.8 kB JSON)", lambda: check_repetition(js, structured), runs),
        ("corruption.tool_calls", lambda: check_tool_calls(en, refusal), runs),
        ("corruption.tool_markup (any reply)", _uncached(lambda: check_tool_markup(en, refusal)), runs),
        ("corruption.tool_markup (stress: 40 tokens, code)", _uncached(lambda: check_tool_markup(tok, refusal)), runs),
        ("evaluate(refusal probe, en)", lambda: evaluate(en, refusal), runs),
        ("evaluate(refusal probe, pt)", lambda: evaluate(pt, refusal_pt), runs),
        ("evaluate(refusal probe, ru)", lambda: evaluate(ru, refusal_ru), runs),
        ("evaluate(structured probe, one object)", lambda: evaluate(one, weather), runs),
        ("evaluate(structured, stress 1.8 kB JSON)", lambda: evaluate(js, structured), runs),
        ("evaluate(tools probe, a streamed call)", lambda: evaluate(tool_call, tools), runs),
        ("language (en)", lambda: check_language(en, language_en), max(50, runs // 4)),
        ("language (pt)", lambda: check_language(pt, language_pt), max(50, runs // 4)),
        ("evaluate(language probe, pt)", lambda: evaluate(pt, language_pt), max(50, runs // 4)),
    ]
    header = ("check", "median µs", "p95 µs", "× json.loads", "× str.split")
    table = [header]
    for name, fn, n in rows:
        median, p95 = _time(fn, n)
        table.append((name, f"{median:.1f}", f"{p95:.1f}", f"{median / base_json:.1f}", f"{median / base_split:.1f}"))
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for i, row in enumerate(table):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    sentences = len([s for s in PT.replace("!", ".").replace("?", ".").split(".") if s.strip()])
    lang_pt, _ = _time(lambda: check_language(pt, language_pt), max(50, runs // 4))
    print(f"\nlanguage (pt): {sentences} sentences, {lang_pt / sentences:.0f} µs per sentence")

    # The one use of py3langid internals (checks/language.py ``_Scorer``), beside the public API that it
    # replaces, on the same text in the same run (keep the private path only if it is needed).
    from reverie_canary.client.checks.language import DEFAULT_POLICY, _scorer
    scorer = _scorer(DEFAULT_POLICY.label_set)
    pieces = [s.strip() + "." for s in PT.split(".") if s.strip()]
    fast_reply, _ = _time(lambda: scorer.rank(PT), runs)
    public_reply, _ = _time(lambda: scorer.ident.rank(PT), runs)
    def one_by_one():
        parts = [scorer.features(p) for p in pieces]
        return [scorer.probabilities(*part) for part in parts], scorer.combined(parts)

    batch_parts, _ = _time(lambda: scorer.score_texts(pieces), max(50, runs // 4))
    fast_parts, _ = _time(one_by_one, max(50, runs // 4))
    public_parts, _ = _time(lambda: ([scorer.ident.rank(p) for p in pieces], scorer.ident.rank(PT)),
                            max(50, runs // 4))
    print("\nlanguage scorer, private fast path ÷ py3langid's public LanguageIdentifier.rank():")
    print(f"  whole pt reply:                  {fast_reply:.0f} µs vs {public_reply:.0f} µs "
          f"({fast_reply / public_reply:.2f}×)")
    print(f"  {len(pieces)} sentences + the whole reply:  {batch_parts:.0f} µs vs {public_parts:.0f} µs "
          f"({batch_parts / public_parts:.2f}×; the check needs both: score_texts walks every byte of every "
          f"sentence at once; one sentence at a time through the byte automaton {fast_parts:.0f} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
