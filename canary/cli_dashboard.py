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
from pathlib import Path
from typing import Annotated

import typer

from reverie_canary.canary.cli import ConfigOpt, _logging, _settings, app, watched_model
from reverie_canary.shared.contract.timefmt import age_text, utc_text


@app.command()
def dashboard(
    host: Annotated[str, typer.Option(help="address to bind (loopback by default; beyond loopback only with TLS "
                                           "and readers in --web-config)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: a free one)")] = 8477,
    cycles: Annotated[int, typer.Option(min=1, max=200, help="cycles per row of the fleet matrix")] = 48,
    web_config: Annotated[Path | None, typer.Option(
        "--web-config", envvar="CANARY_WEB_CONFIG",
        help="TLS and readers: Prometheus's web configuration file (tls_server_config, basic_auth_users with "
             "bcrypt hashes) plus bearer_tokens (reader: sha256 of its token); read again when it changes")] = None,
    insecure_beyond_loopback: Annotated[bool, typer.Option(
        "--insecure-beyond-loopback",
        help="serve beyond loopback without TLS or without readers: anyone who reaches the port reads every "
             "provider, reason and operator")] = False,
    config: ConfigOpt = None,
) -> None:
    """Serve the read-only operator dashboard (fleet, provider, notices, look-back) and the quality feed until Ctrl-C.

    Reads the judge's state (Redis), the ignore list (KV bucket) and the log; new
    cycles appear without a reload (server-sent events).  The quality feed is
    ``/api/v1/quality`` (OpenAPI document at ``/api/v1/openapi.json``), the
    positive controls' series ``/metrics``.  With ``--web-config`` every page
    and API needs a user's password or a reader's token (``canary web-user``,
    ``canary web-token`` make them) and, with ``tls_server_config``, HTTPS.
    Exit status 1 when a source cannot be read at start (the message says
    which), 2 for bad settings or a web configuration that cannot be used
    (among them: beyond loopback without TLS and readers).
    """
    from reverie_canary.services.dashboard.auth import WebConfigError, WebConfigSource
    from reverie_canary.services.dashboard.sources import SourceError
    from reverie_canary.services.dashboard.web import serve_dashboard

    settings = _settings(config)
    _logging(settings)
    try:
        web = WebConfigSource(web_config)
    except WebConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
        async with serve_dashboard(settings, host=host, port=port, cycles=cycles, web=web,
                                   insecure_beyond_loopback=insecure_beyond_loopback) as url:
            current = web.current()
            who = (f"{len(current.users)} user(s), {len(current.tokens)} token(s) from {web_config}"
                   if current.authenticates else "no authentication: loopback only" if not insecure_beyond_loopback
                   else "NO AUTHENTICATION (--insecure-beyond-loopback)")
            print(f"canary dashboard: {url} (read-only, as NATS user {settings.nats_user or '(none)'}; {who}); "
                  "Ctrl-C stops", flush=True)
            await stop.wait()

    try:
        asyncio.run(main())
    except WebConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    except SourceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    except OSError as exc:
        typer.echo(f"error: cannot serve on {host}:{port}: {exc}", err=True)
        raise typer.Exit(1) from exc
    except KeyboardInterrupt:
        pass


@app.command("web-user")
def web_user(
    name: Annotated[str, typer.Argument(help="the user name (no ':')")],
    password_file: Annotated[Path | None, typer.Option(
        "--password-file", help="read the password from this file (its first line) instead of asking")] = None,
) -> None:
    """Print a ``basic_auth_users`` line for the dashboard's web configuration: NAME and the bcrypt hash of a password.

    Asks for the password twice (nothing is echoed), or reads it from
    ``--password-file``; prints ``  NAME: $2b$10$...`` to paste under
    ``basic_auth_users:``.  The password itself is printed nowhere.  Exit
    status 2 for an empty password, one over 72 bytes (bcrypt reads no more),
    two entries that differ, or a name with ``:``.
    """
    from reverie_canary.services.dashboard.auth import READER_NAME, hash_password

    if not READER_NAME.match(name):
        typer.echo("error: a user name has 1..256 characters, no ':' and no control character", err=True)
        raise typer.Exit(2)
    if password_file is not None:
        try:
            password = password_file.read_text("utf-8").splitlines()[0] if password_file.stat().st_size else ""
        except OSError as exc:
            typer.echo(f"error: cannot read {password_file}: {exc}", err=True)
            raise typer.Exit(2) from exc
    else:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True, err=True)
    try:
        hashed = hash_password(password)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    print(f"  {json.dumps(name)}: {json.dumps(hashed)}")


@app.command("web-token")
def web_token(
    reader: Annotated[str, typer.Argument(help="who holds the token (a system reading the quality feed)")],
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", help="the token exists already in this file (its first line): print its line only")] = None,
) -> None:
    """Make a bearer token for a reader of the dashboard or the quality feed.

    Prints the ``bearer_tokens`` line (``  READER: sha256:...``) on standard
    output, for the web configuration, and a new token itself once on
    standard error, for the reader (``Authorization: Bearer <token>``): the
    file keeps only its SHA-256, so a lost token is replaced, never
    recovered.  With ``--token-file`` the token is read, not made, and
    printed nowhere.  Exit status 2 for a bad name or an unreadable or
    short (under 32 characters) token file.
    """
    from reverie_canary.services.dashboard.auth import READER_NAME, new_token, token_digest

    if not READER_NAME.match(reader):
        typer.echo("error: a reader name has 1..256 characters, no ':' and no control character", err=True)
        raise typer.Exit(2)
    if token_file is not None:
        try:
            lines = token_file.read_text("utf-8").splitlines()
        except OSError as exc:
            typer.echo(f"error: cannot read {token_file}: {exc}", err=True)
            raise typer.Exit(2) from exc
        token = lines[0].strip() if lines else ""
        if len(token) < 32:
            typer.echo(f"error: the token in {token_file} is shorter than 32 characters (make one with "
                       "canary web-token)", err=True)
            raise typer.Exit(2)
        digest = token_digest(token)
    else:
        token, digest = new_token()
        typer.echo(f"token for {reader} (shown once; give it to the reader): {token}", err=True)
    print(f"  {json.dumps(reader)}: {json.dumps(digest)}")


def _cells_text(cells) -> str:
    return " ".join(c.letter for c in cells) or "-"


def _failed_text(f) -> str:
    return f"#{f.cycle_no} {','.join(f.kinds)} {', '.join(f.reasons)}".strip()


def print_lookback(view) -> None:
    """The look-back for people: the snapshot in force, then one line per provider."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from reverie_canary.shared.runtime.printable import printable_view

    view = printable_view(view)  # operators' reasons and providers' text: no control character reaches the terminal
    console = Console(width=200, soft_wrap=False)
    known = view.snapshot_version > 0  # no snapshot at that time: who was eligible is unknown, not "all of them"
    head = (f"{view.model} at {utc_text(view.at)} ± {age_text(view.window_s)}: "
            + (f"ignore list v{view.snapshot_version}" if known else "ignore list unknown")
            + (f" (written {utc_text(view.snapshot_at)})" if view.snapshot_at else ""))
    if view.next_version:
        head += f"; changed to v{view.next_version} at {utc_text(view.next_at)}, inside the window"
    console.print(head)
    if known:
        console.print(f"eligible {len(view.eligible)}: {', '.join(view.eligible) or '-'}")
        console.print(f"ignored {len(view.ignored)}: {', '.join(view.ignored) or '-'}")
    if view.quantizations:
        left = [p for p in view.providers if p.routing == "left_out"]
        console.print(f"quantization floor: quantizations {', '.join(view.quantizations)} allowed; left out "
                      f"{len(left)}: " + (", ".join(f"{p.provider} ({p.quantization or 'undeclared'})" for p in left)
                                          or "-"))
    for problem in view.problems:
        console.print(f"[yellow]{escape(problem)}[/yellow]")
    cycles = " ".join(f"#{c.cycle_no}" for c in view.columns)
    table = Table(show_edge=False, pad_edge=False, header_style="bold",
                  title=f"cycles around it: {cycles or 'none'} (P passed, F failed, Z frozen, B blind, N not probed)",
                  title_justify="left")
    for col in ("provider", "quant", "at that time", "why", "cycles around", "failed since"):
        table.add_column(col)
    if view.served is not None:
        table.add_column("requests served", justify="right")
    for p in view.providers:
        why = "; ".join(f"{r.layer}: {r.reason}" + (f" by {r.actor}" if r.actor else "")
                        + (f" until {utc_text(r.until)}" if r.until else "") for r in p.reasons)
        since = "; ".join(_failed_text(f) for f in p.failed_since) or "-"
        if p.failed_since_last is not None:
            more = p.failed_since_count - len(p.failed_since) - 1
            since += (f"; … {more} more; latest {_failed_text(p.failed_since_last)} "
                      f"({p.failed_since_count} failed cycles in all)")
        routing = p.routing.replace("_", " ") + (f" ({', '.join(p.layers)})" if p.layers else "")
        if p.routing == "left_out":
            why = f"{p.quantization or 'declares no quantization'}: not in the quantizations allow-list"
        row = [p.provider, p.quantization or "-", routing, escape(why) or "-",
               _cells_text(p.cells), since]
        if view.served is not None:
            row.append(str(p.served))
        table.add_row(*row)
    console.print(table)
    for line in lookback_live_lines(view):
        console.print(escape(line))


def lookback_live_lines(view) -> list[str]:
    """The chat backends' live counts in the look-back's window and the last confirmation probe, one line per
    provider that has either (none: no line at all)."""
    from reverie_canary.services.dashboard.core import confirmation_text, live_text

    rows = [p for p in view.providers if p.live is not None or p.confirmation is not None]
    if not rows:
        return []
    width = max(len(p.provider) for p in rows)
    return ["live counts in the window (the chat backends' reply guards; they never suspend anyone) "
            "and the last confirmation probe:",
            *(f"  {p.provider:<{width}}  {live_text(p.live)}; {confirmation_text(p.confirmation)}" for p in rows)]


@app.command()
def incident(
    model: Annotated[str, typer.Option("--model", help="the model the user talked to")],
    at: Annotated[str, typer.Option("--at", help="when (UTC): 2026-12-01T21:40:00Z, or 21:40 for the latest such "
                                                 "time")],
    window: Annotated[str, typer.Option("--window", help="half-window around --at: 45m, 90s, 1.5h, 2d")] = "45m",
    kind: Annotated[str | None, typer.Option(help="'failed since' only for this probe kind (e.g. language)")]
    = None,
    language: Annotated[str | None, typer.Option(help="'failed since' only for probes in this language "
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
