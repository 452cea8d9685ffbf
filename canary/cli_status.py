"""``canary status``: the fleet at a glance, one rich table per model.

Everything shown comes from the read model
(:mod:`reverie_canary.services.dashboard.core`, read by
:mod:`reverie_canary.services.dashboard.sources`); ``--json`` prints the same
view as one JSON document, so that a script and an operator see the same.
``--watch`` follows the log and prints again on every closed cycle, decision
and new snapshot (at least every ``--interval`` seconds, so that the ages stay
true), ``--count N`` times at most; Ctrl-C stops it cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from datetime import datetime
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from reverie_canary.canary.cli import ConfigOpt, _settings, app, watched_model
from reverie_canary.services.dashboard.core import (
    FleetStatus,
    KindResult,
    ModelStatus,
    ProviderStatus,
    SpendView,
    confirmation_text,
    live_text,
    modes_text,
    to_json,
)
from reverie_canary.services.discovery.core import facts_lines
from reverie_canary.shared.contract.events import FACT_KINDS, CycleSized
from reverie_canary.shared.contract.timefmt import age_text, utc_text

#: How often ``--watch`` looks for new events in the log (s).
WATCH_POLL_S = 1.0

_STATE_STYLE = {
    "active": "green", "suspended": "bold red", "excluded": "magenta", "overridden": "yellow",
    "floor_held": "bold yellow", "blind": "bold red", "would_suspend": "yellow", "not_listed": "dim",
}
_OUTCOME_TEXT = {
    "pass": ("pass", "green"), "fail": ("FAIL", "bold red"), "transport_error": ("transport", "yellow"),
    "inconclusive": ("inconclusive", "yellow"), "missing": ("missing", "yellow"),
    "not_applicable": ("n/a", "dim"), "blind": ("BLIND", "bold red"),
}


#: ``2026-06-11T18:00:00Z`` (UTC, to the second), or ``never``: the one UTC formatter.
fmt_time = utc_text


#: ``4 s``, ``12 min``, ``3.5 h``, ``2.0 d`` (``-`` for none): one formatter for the CLI and the dashboard.
fmt_age = age_text


def fmt_usd(usd: float) -> str:
    """``$0.0123`` with four significant digits for small sums."""
    if usd == 0:
        return "$0"
    if usd >= 1:
        return f"${usd:,.2f}"
    return f"${usd:.4g}"


def state_text(p: ProviderStatus, now: datetime, *, short: bool = False) -> Text:
    """``suspended until 12:34:56Z (3.2 h)``, ``floor held``, ``active`` ... coloured by state.

    ``short``: the narrow layouts' form, the time left without the UTC end (``suspended 3.2 h``).
    """
    label = p.state.replace("_", " ")
    if p.until is not None:
        left = fmt_age((p.until - now).total_seconds())
        label += f" {left}" if short else f" until {fmt_time(p.until)} ({left})"
    elif p.state in ("excluded", "overridden") and not short:
        label += " (no end)"
    own = {"excluded": "exclusion", "overridden": "override", "suspended": "suspension"}.get(p.state)
    extra = [layer for layer in p.layers if layer != own]
    if p.state in ("excluded", "overridden", "suspended") and extra:
        label += f" + {', '.join(extra)}"
    return Text(label, style=_STATE_STYLE.get(p.state, ""))


def kind_cell(result: KindResult | None) -> Text:
    """One probe kind's last-cycle result: ``pass``, ``FAIL ttft_exceeded`` ..."""
    if result is None:
        return Text("-", style="dim")
    word, style = _OUTCOME_TEXT.get(result.outcome, (result.outcome, ""))
    text = Text(word, style=style)
    if result.reasons:
        text.append(" " + ", ".join(result.reasons[:3]) + (" …" if len(result.reasons) > 3 else ""))
    return text


def kinds_summary(p: ProviderStatus, kinds: list[str]) -> Text:
    """Every kind's last-cycle result in one cell, for the narrow layouts: ``pass``, or what did not pass.

    ``pass`` when every kind with a result passed; else each kind that did not, with its outcome
    and up to two reason codes, then how many more (``structured FAIL schema_invalid; ttft transport http_503``).
    """
    by_kind = {r.kind: r for r in p.results}
    seen = [by_kind[k] for k in kinds if k in by_kind]
    if not seen:
        return Text("-", style="dim")
    odd = [r for r in seen if r.outcome not in ("pass", "not_applicable")]
    if not odd:
        return Text("pass", style="green")
    text = Text()
    for i, r in enumerate(odd):
        word, style = _OUTCOME_TEXT.get(r.outcome, (r.outcome, ""))
        if i:
            text.append("; ")
        text.append(f"{r.kind} ")
        text.append(word, style=style)
        if r.reasons:  # "+N more", never "…": an ellipsis is what a cut cell shows
            text.append(" " + ", ".join(r.reasons[:2]) + (f" +{len(r.reasons) - 2} more" if len(r.reasons) > 2 else ""))
    return text


def spend_text(spend: SpendView | None) -> str:
    """``41 probes, 12,345 tokens, $0.0123 in the last 24 h`` with the coverage and the per-day figure."""
    if spend is None:
        return "spend: nothing read from the log"
    t = spend.total
    text = (f"spend (last {fmt_age(spend.window_s)}): {t.probes} probes, {t.requests} requests, "
            f"{t.tokens:,} tokens, {fmt_usd(t.usd)}")
    if t.unpriced_tokens:
        text += f" (+{t.unpriced_tokens:,} tokens without a listed price)"
    real = spend.time_scale > 1  # the demo: a second here stands for time_scale real seconds
    if spend.projected:
        text += f"; the log covers {fmt_age(spend.covered_s)} of it"
        if real:
            text += f" ({fmt_age(spend.covered_s * spend.time_scale)} of real time: time runs x{spend.time_scale:.0f})"
        text += f": about {fmt_usd(spend.usd_per_day)} a {'real ' if real else ''}day projected"
    else:
        text += f" = {fmt_usd(spend.usd_per_day)} a {'real ' if real else ''}day"
    if spend.cut:
        text += " (the read was cut: the oldest probes are not counted)"
    return text


def coverage_text(m: ModelStatus) -> str:
    """``language coverage: every language of every provider probed at least once every 4 cycles (2 h); ...``."""
    cycles = m.language_coverage_cycles or 0
    return (f"language coverage: every language of every provider probed at least once every {cycles} "
            f"cycle{'s' if cycles != 1 else ''} ({fmt_age(cycles * m.cycle_interval_s)}); "
            f"{m.languages_per_cycle} language probes per provider a cycle, retests on top")


def model_header(m: ModelStatus) -> list[Text]:
    """The header lines of one model: modes, last cycle, health, ignore list, spend, controls."""
    lines = [Text.assemble((m.model, "bold"), "   ", modes_text(m.modes))]
    if m.last_cycle_closed is not None:
        number = f" #{m.last_cycle_no}" if m.last_cycle_no is not None else ""
        cycle = (f"last cycle{number} closed {fmt_time(m.last_cycle_closed)} ({fmt_age(m.last_cycle_age_s)} ago; "
                 f"a cycle every {fmt_age(m.cycle_interval_s)})")
    else:
        cycle = "no cycle closed yet"
    health = {"sees": ("sees", "green"), "blind": ("BLIND", "bold red"), "stale": ("STALE", "bold yellow"),
              "unknown": ("unknown", "dim")}[m.health.state]
    health_line = Text.assemble(cycle, "   canary: ", (health[0], health[1]))
    if m.health.cause or m.health.detail:
        health_line.append(f" ({'; '.join(x for x in (m.health.cause, m.health.detail) if x)})")
    lines.append(health_line)
    il = m.ignore_list
    layers = ", ".join(f"{layer} {len(names)}" for layer, names in il.layers.items())
    lines.append(Text(f"ignore list v{il.version}: {len(il.ignored)} ignored now"
                      + (f" ({layers})" if layers else "") + (f": {', '.join(il.ignored)}" if il.ignored else "")))
    if il.quantizations:
        lines.append(Text(quant_floor_text(m), style="yellow" if any(p.quant_left_out for p in m.providers) else ""))
    lines.append(Text(spend_text(m.spend)))
    if m.language_coverage_cycles:
        lines.append(Text(coverage_text(m)))
    if m.controls:
        bits = []
        for c in m.controls:
            what = "no result yet" if c.outcome is None else f"{c.outcome} {c.reason}".strip()
            verdict = {True: "the probe can fail", False: "PASSED: that kind proved nothing",
                       None: ""}[c.proves]
            bits.append(f"{c.provider} ({c.kind}): {what}" + (f", {verdict}" if verdict else ""))
        lines.append(Text("positive controls: " + "; ".join(bits)))
    slow = [p.provider for p in m.providers if p.slow_vs_peers]
    if slow:
        lines.append(Text(f"slow_vs_peers: {', '.join(slow)} (first-token median over the last cycles above "
                          f"{m.ttft_peer_bar_ms or 0:.0f} ms = the providers' median {m.ttft_peer_median_ms or 0:.0f} ms "
                          "+ k x MAD; shown, never a suspension)", style="yellow"))
    if m.unproven or m.common_mode:
        lines.append(Text(f"last cycle could not judge: unproven {m.unproven or '-'}, "
                          f"common-mode {m.common_mode or '-'}", style="yellow"))
    for line in facts_lines(m.listing):  # what the latest listing said beyond its endpoints
        lines.append(Text(line, style="yellow"))
    for problem in m.problems:
        lines.append(Text(problem, style="yellow"))
    return lines


def quant_text(p: ProviderStatus) -> Text:
    """An endpoint's quantization (``fp8``; ``-`` when it declares none), and ``left out`` when the allow-list drops it."""
    if p.quant_left_out:
        return Text(f"{p.quantization or 'undeclared'} left out", style="yellow")
    return Text(p.quantization or "-")


def quant_floor_text(m: ModelStatus) -> str:
    """``quantization floor: quantizations fp8, bf16 allowed; left out 2: c/fp4 (fp4), e (undeclared)``."""
    out = [p for p in m.providers if p.quant_left_out]
    text = f"quantization floor: quantizations {', '.join(m.ignore_list.quantizations)} allowed"
    if out:
        text += f"; left out {len(out)}: " + ", ".join(f"{p.provider} ({p.quantization or 'undeclared'})" for p in out)
        undeclared = sum(1 for p in out if p.quantization is None)
        if undeclared:
            text += f" ({undeclared} declare no quantization: an allow-list drops them)"
    return text


#: The layouts of a model's table, widest first: ``canary status`` shows the first that fits the terminal
#: (``--wide``: the first, whatever the width).  ``kinds``: a column per probe kind, else one summary column.
LAYOUTS: tuple[dict[str, bool], ...] = (
    {"kinds": True, "quant": True, "long_state": True, "ttft": True, "ladder": True, "judged": True},
    {"kinds": False, "quant": True, "long_state": True, "ttft": True, "ladder": True, "judged": True},
    {"kinds": False, "quant": True, "long_state": False, "ttft": True, "ladder": True, "judged": True},
    {"kinds": False, "quant": True, "long_state": False, "ttft": True, "ladder": False, "judged": False},
    {"kinds": False, "quant": False, "long_state": False, "ttft": False, "ladder": False, "judged": False},
)
#: What the streak column counts, printed under each table.
STREAKS_LEGEND = ("F/P/Z: failed / passed / frozen cycles in a row, as the judge counts them to suspend; "
                  "a suspension, its end and a lift start the count again")


def model_table(m: ModelStatus, kinds: list[str], layout: dict[str, bool] | None = None) -> Table:
    """One row per provider: quantization, state, streaks, the last cycle per kind (or summed up), first token,
    ladder, last judged.

    Args:
        layout: one of :data:`LAYOUTS` (default: the widest).
    """
    layout = layout or LAYOUTS[0]
    mixed = len(set(m.modes.values())) > 1
    table = Table(show_edge=False, pad_edge=False, header_style="bold", expand=False)
    table.add_column("provider", no_wrap=True)
    if layout["quant"]:
        table.add_column("quant", no_wrap=True)
    table.add_column("state", no_wrap=not layout["long_state"])
    table.add_column("F/P/Z", justify="right", no_wrap=True)
    if layout["kinds"]:
        for kind in kinds:
            table.add_column(f"{kind} ({m.modes.get(kind, '?')})" if mixed else kind)
    else:
        table.add_column("last cycle", ratio=1)
    if layout["ttft"]:
        table.add_column("ttft p50", justify="right", no_wrap=True)
    if layout["ladder"]:
        table.add_column("ladder", justify="right", no_wrap=True)
    if layout["judged"]:
        table.add_column("last judged", no_wrap=True)
    for p in m.providers:
        by_kind = {r.kind: r for r in p.results}
        ttft = f"{p.ttft_ms:.0f} ms" if p.ttft_ms is not None else "-"
        if p.ttft_missing:
            ttft += f", {p.ttft_missing} no text"
        ttft_cell = Text(ttft)
        if p.slow_vs_peers:  # shown beside the 10 s bar, never a suspension by itself
            ttft_cell.append(" slow_vs_peers", style="bold yellow")
        judged = "never" if p.last_judged is None else \
            f"{fmt_age((m.at - p.last_judged).total_seconds())} ago ({p.last_verdict})"
        row: list[Text | str] = [p.provider, *([quant_text(p)] if layout["quant"] else []),
                                 state_text(p, m.at, short=not layout["long_state"]),
                                 f"{p.failed_streak}/{p.passed_streak}/{p.frozen_streak}"]
        row += [kind_cell(by_kind.get(k)) for k in kinds] if layout["kinds"] else [kinds_summary(p, kinds)]
        row += [ttft_cell] * layout["ttft"] + [str(p.ladder_step)] * layout["ladder"] + [judged] * layout["judged"]
        table.add_row(*row)
    return table


def fitting_table(console: Console, m: ModelStatus, kinds: list[str], *, wide: bool = False) -> Table:
    """The widest layout of :data:`LAYOUTS` whose table fits ``console``'s width unwrapped (``wide``: the widest)."""
    from rich.measure import Measurement

    if wide:
        return model_table(m, kinds, LAYOUTS[0])
    unbounded = console.options.update_width(10_000)
    for layout in LAYOUTS[:-1]:
        table = model_table(m, kinds, layout)
        if Measurement.get(console, unbounded, table).maximum <= console.width:
            return table
    return model_table(m, kinds, LAYOUTS[-1])


def live_lines(m: ModelStatus) -> list[Text]:
    """The chat backends' live counts and the last confirmation probe per provider, shown beside the verdicts
    (none when no provider has either): ``  brightwave/fp8  12 replies, 41.7% failing (leading_junk 5) ...``."""
    rows = [p for p in m.providers if p.live is not None or p.confirmation is not None]
    if not rows:
        return []
    first = next((p.live for p in rows if p.live is not None), None)
    span = f", {fmt_age((first.until - first.since).total_seconds())} to {fmt_time(first.until)}" if first else ""
    lines = [Text(f"live counts (the chat backends' reply guards{span}; they never suspend anyone) "
                  "and the last confirmation probe:", style="bold")]
    width = max(len(p.provider) for p in rows)
    for p in rows:
        failing = p.live is not None and p.live.failing > 0
        line = Text(f"  {p.provider:<{width}}  ")
        line.append(live_text(p.live), style="yellow" if failing else "")
        if p.live is not None and p.live.ignore_not_applied:
            line.append("  (the ignore list was dropped on the way to the gateway)", style="bold red")
        c = p.confirmation
        line.append("; ")
        line.append(confirmation_text(c), style="bold red" if c is not None and c.outcome == "confirmed" else "")
        lines.append(line)
    return lines


def sizing_text(s: CycleSized) -> Text:
    """``probe window: cycle 123 sized on measured times: 12000 probes, ...``; red when it does not fit."""
    text = (f"probe window: cycle {s.cycle_no} sized on {s.basis} times: {s.probes} probes of {s.models} model(s), "
            f"{s.probers} prober(s) x {s.per_prober} = {s.in_flight} in flight, about {s.expected_wall_s:g} s of the "
            f"{s.window_s:g} s window")
    if s.fits:
        return Text(text)
    return Text(text + f": DOES NOT FIT (needs {s.needed} in flight, ceiling {s.ceiling} a prober): start more "
                       "probers or raise CANARY_PROBER_CONCURRENCY", style="bold red")


def render(console: Console, fleet: FleetStatus, kinds: list[str], *, wide: bool = False) -> None:
    """Print every model's header and table, then the fleet's spend (several models) and the last cycle's sizing.

    Each table takes the widest layout that fits ``console``'s width (:func:`fitting_table`;
    ``wide``: every column).  Every text of the view is shown with its control characters
    escaped (:func:`reverie_canary.shared.runtime.printable.printable_view`).
    """
    from reverie_canary.shared.runtime.printable import printable_view

    fleet = printable_view(fleet)
    for m in fleet.models:
        console.print(Group(*model_header(m)))
        table = fitting_table(console, m, kinds, wide=wide)
        if wide:  # every column at its natural width, however wide that is: the terminal scrolls, nothing is cut
            from rich.measure import Measurement

            console.width = max(console.width, Measurement.get(console, console.options.update_width(10_000),
                                                               table).maximum)
        console.print(table)
        console.print(Text(STREAKS_LEGEND, style="dim"))
        live = live_lines(m)
        if live:
            console.print(Group(*live))
        console.print()
    if len(fleet.models) > 1:
        console.print(Text("all models: " + spend_text(fleet.spend)))
    if fleet.sizing is not None:
        console.print(sizing_text(fleet.sizing))


def _console(wide: bool = False) -> Console:
    """The terminal's console, its width the terminal's; piped or captured (or ``wide``), wide enough for every column."""
    console = Console(soft_wrap=False)
    if not console.is_terminal or wide:
        console = Console(width=max(220, console.width if console.is_terminal else 0), soft_wrap=False,
                          force_terminal=console.is_terminal or None)
    return console


def _quiet_logging(settings) -> None:
    """Every log line of a read command on standard error (structlog's default writes to standard output), from
    WARNING up unless the settings ask for DEBUG: the table is the answer, the log only says what went wrong."""
    from reverie_canary.shared.runtime.logging import configure

    level = settings.log_level if settings.log_level.upper() == "DEBUG" else "WARNING"
    configure(settings.log_format, level, sys.stderr)


@app.command()
def status(
    model: Annotated[str | None, typer.Option(help="one model (default: every configured)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the view as JSON (with --watch: one line each)")]
    = False,
    watch: Annotated[bool, typer.Option(help="print again on every closed cycle, decision and new snapshot; "
                                             "Ctrl-C stops")] = False,
    interval: Annotated[float, typer.Option(min=1.0, help="with --watch: print again at least this often (s)")]
    = 30.0,
    count: Annotated[int | None, typer.Option(min=1, help="with --watch: stop after this many prints")] = None,
    wide: Annotated[bool, typer.Option("--wide", help="every column (a column per probe kind, the UTC ends), "
                                                      "whatever the terminal's width")] = False,
    config: ConfigOpt = None,
) -> None:
    """The fleet at a glance: per model its modes, last cycle, health, ignore list and spend; per provider its state.

    Reads the judge's state (Redis), the ignore list (KV bucket) and the last day
    of the log, as the ``operator`` NATS user.  The table takes the terminal's width:
    narrower, it sums up the probe kinds in one column and leaves out the ladder and
    the last judged time (--wide shows every column).  Logs go to standard error.
    Exit status 1 when a source cannot be read (the message says which), 2 for a
    model the settings do not watch.
    """
    from reverie_canary.services.dashboard.sources import FleetReader, SourceError

    settings = _settings(config)
    _quiet_logging(settings)
    models = [watched_model(settings, model)] if model else None
    kinds = [*settings.kinds, *FACT_KINDS]  # a column for each probe kind, and for template
    console = _console(wide)

    def show(fleet: FleetStatus) -> None:
        if as_json:
            text = to_json(fleet).decode()
            if watch:
                print(text, flush=True)
            else:
                import json

                print(json.dumps(json.loads(text), indent=2))
            return
        if watch and console.is_terminal:
            console.clear()
        elif watch:
            console.rule(f"canary status at {fmt_time(fleet.at)}")
        render(console, fleet, kinds, wide=wide)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            # not in the main thread (a test runs the command in one): Ctrl-C then ends asyncio.run
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
        async with FleetReader(settings) as reader:
            await reader.follow()
            show(await reader.status(models))
            printed = 1
            while watch and not stop.is_set() and (count is None or printed < count):
                due = loop.time() + interval
                while not stop.is_set() and loop.time() < due:
                    events = await reader.follow()
                    if any(type(e).__name__ in REFRESH_ON for e in events):
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=min(WATCH_POLL_S, max(0.0, due - loop.time())))
                if stop.is_set():
                    break
                show(await reader.status(models))
                printed += 1

    from reverie_canary.services.dashboard.sources import REFRESH_ON

    try:
        asyncio.run(main())
    except SourceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    except KeyboardInterrupt:
        pass
    sys.stdout.flush()
