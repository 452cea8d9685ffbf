"""``canary dashboard`` (the read-only web pages) and ``canary incident`` (the look-back as a command).

Both read what ``canary status`` reads -- the judge's state (Redis), the ignore
list (KV bucket ``canary-routing``, with its history) and the log -- through
the one read model (:mod:`reverie_canary.services.dashboard.core` and
:mod:`~reverie_canary.services.dashboard.pages`), so the pages, ``status`` and
``incident`` cannot disagree.  Run them with the read-only ``dashboard`` NATS
user (``NATS_USER=dashboard``, ``NATS_PASSWORD=$CANARY_DASHBOARD_PASSWORD``):
it may read the log and the bucket and publish nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from typing import Annotated, Optional

import typer

from reverie_canary.canary.cli import ConfigOpt, _logging, _settings, app, watched_model
from reverie_canary.shared.contract.timefmt import age_text, utc_text


@app.command()
def dashboard(
    host: Annotated[str, typer.Option(help="address to bind (loopback by default: put an authenticating proxy "
                                           "in front to show the pages further)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: a free one)")] = 8477,
    cycles: Annotated[int, typer.Option(min=1, max=200, help="cycles per row of the fleet matrix")] = 48,
    config: ConfigOpt = None,
) -> None:
    """Serve the read-only operator dashboard (fleet, provider, notices, look-back) until Ctrl-C.

    Reads the judge's state (Redis), the ignore list (KV bucket) and the log; new
    cycles appear without a reload (server-sent events).  Exit status 1 when a
    source cannot be read at start (the message says which), 2 for bad settings.
    """
    from reverie_canary.services.dashboard.sources import SourceError
    from reverie_canary.services.dashboard.web import serve_dashboard

    settings = _settings(config)
    _logging(settings)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
        async with serve_dashboard(settings, host=host, port=port, cycles=cycles) as url:
            print(f"canary dashboard: {url} (read-only, as NATS user {settings.nats_user or '(none)'}); "
                  "Ctrl-C stops", flush=True)
            await stop.wait()

    try:
        asyncio.run(main())
    except SourceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    except OSError as exc:
        typer.echo(f"error: cannot serve on {host}:{port}: {exc}", err=True)
        raise typer.Exit(1) from exc
    except KeyboardInterrupt:
        pass


def _cells_text(cells) -> str:
    return " ".join(c.letter for c in cells) or "-"


def print_lookback(view) -> None:
    """The look-back for people: the snapshot in force, then one line per provider."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from reverie_canary.shared.runtime.printable import printable_view

    view = printable_view(view)  # operators' reasons and providers' text: no control character reaches the terminal
    console = Console(width=200, soft_wrap=False)
    head = (f"{view.model} at {utc_text(view.at)} ± {age_text(view.window_s)}: ignore list v{view.snapshot_version}"
            + (f" (written {utc_text(view.snapshot_at)})" if view.snapshot_at else ""))
    if view.next_version:
        head += f"; changed to v{view.next_version} at {utc_text(view.next_at)}, inside the window"
    console.print(head)
    console.print(f"eligible {len(view.eligible)}: {', '.join(view.eligible) or '-'}")
    console.print(f"ignored {len(view.ignored)}: {', '.join(view.ignored) or '-'}")
    for problem in view.problems:
        console.print(f"[yellow]{escape(problem)}[/yellow]")
    cycles = " ".join(f"#{c.cycle_no}" for c in view.columns)
    table = Table(show_edge=False, pad_edge=False, header_style="bold",
                  title=f"cycles around it: {cycles or 'none'} (P passed, F failed, Z frozen, B blind, N not probed)",
                  title_justify="left")
    for col in ("provider", "at that time", "why", "cycles around", "failed since"):
        table.add_column(col)
    if view.served is not None:
        table.add_column("requests served", justify="right")
    for p in view.providers:
        why = "; ".join(f"{r.layer}: {r.reason}" + (f" by {r.actor}" if r.actor else "")
                        + (f" until {utc_text(r.until)}" if r.until else "") for r in p.reasons)
        since = "; ".join(f"#{f.cycle_no} {','.join(f.kinds)} {', '.join(f.reasons)}".strip()
                          for f in p.failed_since) or "-"
        row = [p.provider, p.routing + (f" ({', '.join(p.layers)})" if p.layers else ""), escape(why) or "-",
               _cells_text(p.cells), since]
        if view.served is not None:
            row.append(str(p.served))
        table.add_row(*row)
    console.print(table)


@app.command()
def incident(
    model: Annotated[str, typer.Option("--model", help="the model the user talked to")],
    at: Annotated[str, typer.Option("--at", help="when (UTC): 2026-12-01T21:40:00Z, or 21:40 for the latest such "
                                                 "time")],
    window: Annotated[str, typer.Option("--window", help="half-window around --at: 45m, 90s, 1.5h, 2d")] = "45m",
    kind: Annotated[Optional[str], typer.Option(help="'failed since' only for this probe kind (e.g. language)")]
    = None,
    language: Annotated[Optional[str], typer.Option(help="'failed since' only for probes in this language "
                                                         "(e.g. es)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the answer as one JSON document")] = False,
    config: ConfigOpt = None,
) -> None:
    """Which providers served MODEL at a time, what the canary saw of them around it, and who failed since.

    For a user's report ("model X, around 21:40, the character started speaking
    Spanish"): the providers eligible and ignored at that moment with the
    ignore-list snapshot version, each one's verdicts in the cycles of the
    window, the cycles in which each failed since (``--kind``/``--language``
    narrow them), and the chat backends' request counts when they publish them.
    Exit status 1 when a source cannot be read, 2 for a bad time, window or model.
    """
    from reverie_canary.services.dashboard import pages
    from reverie_canary.services.dashboard.core import to_json
    from reverie_canary.services.dashboard.sources import SourceError
    from reverie_canary.services.dashboard.web import read_lookback
    from reverie_canary.shared.runtime import clock

    settings = _settings(config)
    try:
        when = pages.parse_at(at, clock.now())
        window_s = pages.parse_window(window)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    watched_model(settings, model)
    try:
        view = asyncio.run(read_lookback(settings, model, when, window_s, kind=kind, language=language))
    except SourceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if as_json:
        print(json.dumps(json.loads(to_json(view)), indent=2))
    else:
        print_lookback(view)
