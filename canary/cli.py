"""The ``canary`` command line (typer).

Settings come from the environment and ``--config`` (see
:mod:`reverie_canary.shared.runtime.settings`); secrets are never printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from reverie_canary.canary.help import CanaryGroup
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime.logging import error_line, scrub
from reverie_canary.shared.runtime.settings import Settings

app = typer.Typer(cls=CanaryGroup, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="reverie-canary: probe every provider alone, judge it with code, quarantine proven-bad routes.")

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="settings TOML file (else $CANARY_CONFIG)")]


def _settings(config: Path | None = None, **overrides) -> Settings:
    try:
        return Settings.load(config_path=config, **overrides)
    except ConfigError as exc:
        typer.echo(error_line(str(exc)), err=True)
        raise typer.Exit(2) from exc


def watched_model(settings: Settings, model: str) -> str:
    """``model`` when the settings watch it (``CANARY_MODELS``); else say so on stderr and exit 2.

    The one check of every read command that names a model (``status``, ``incident``,
    ``explain``, ``report``): an unwatched model (a typo) must not get a plausible
    picture with exit 0 (guard rails).

    Raises:
        typer.Exit: status 2 for a model the settings do not watch.
    """
    if model not in settings.models:
        typer.echo(f"error: {model!r} is not a watched model (CANARY_MODELS: {', '.join(settings.models)})", err=True)
        raise typer.Exit(2)
    return model


def _logging(settings: Settings) -> None:
    from reverie_canary.shared.runtime.logging import configure

    configure(settings.log_format, settings.log_level)


@app.command()
def demo(
    cycles: Annotated[int, typer.Option(min=1, help="stop after this many cycles")] = 5,  # demo.DEFAULT_CYCLES
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON summary on stdout (progress on stderr)")] = False,
    scenario: Annotated[str, typer.Option(help="simulated fleet: 'default', 'full' or a scenario TOML file")] = "default",
    sentences: Annotated[Path | None, typer.Option(exists=True, file_okay=False, dir_okay=True,
                                                      help="directory of <lang>.txt real sentences for healthy "
                                                           "replies")] = None,
    probers: Annotated[int, typer.Option(min=1, help="prober replicas sharing one durable consumer")] = 1,
    keep: Annotated[bool, typer.Option(help="after the cycles keep running until Ctrl-C, for the operator "
                                            "commands in another terminal")] = False,
    gateway_fault: Annotated[list[str] | None, typer.Option(
        "--gateway-fault", metavar="KIND:N[-M]",
        help="make the simulated gateway refuse the canary from cycle N (to M): auth (401), credit (402), "
             "forbidden (403), or down (connections refused), e.g. auth:3, down:2-3; repeatable")] = None,
    rpm: Annotated[float | None, typer.Option(min=0, help="simulated chat requests per minute through the reply "
                                                          "guard (default 120; 0: no chat traffic)")] = None,
) -> None:
    """Run everything on embedded NATS and Redis against the simulated gateway, time compressed."""
    from reverie_canary.canary.demo import run_demo
    from reverie_canary.canary.embedded import ServerUnavailable
    from reverie_canary.simulator.faults import parse_fault

    try:
        faults = tuple(parse_fault(text) for text in gateway_fault or ())
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--gateway-fault") from exc
    try:
        code = asyncio.run(run_demo(cycles, as_json, scenario, str(sentences) if sentences else None, probers,
                                    keep=keep, gateway_faults=faults, rpm=rpm))
    except ServerUnavailable as exc:
        typer.echo(f"error: {scrub(str(exc))}", err=True)
        raise typer.Exit(3) from exc
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


@app.command()
def run(
    service: Annotated[str, typer.Argument(help="discovery | prober | judge | router | notifier")],
    config: ConfigOpt = None,
) -> None:
    """Run one service until SIGINT/SIGTERM."""
    from reverie_canary.canary import loops
    from reverie_canary.canary.runtime import SERVICES, serve_forever

    if service not in SERVICES:
        typer.echo(f"error: unknown service {service!r}; one of {', '.join(SERVICES)}", err=True)
        raise typer.Exit(2)
    settings = _settings(config)
    _logging(settings)
    try:
        loops.run(serve_forever(settings, [service]), settings.event_loop, [service])
    except ConfigError as exc:
        typer.echo(error_line(str(exc)), err=True)
        raise typer.Exit(2) from exc


@app.command()
def up(
    config: ConfigOpt = None,
    probers: Annotated[int, typer.Option(help="prober replicas in this process")] = 1,
) -> None:
    """Run all five services in this process until SIGINT/SIGTERM (each with its own metrics port)."""
    from reverie_canary.canary import loops
    from reverie_canary.canary.runtime import SERVICES, serve_forever

    settings = _settings(config)
    _logging(settings)
    try:
        loops.run(serve_forever(settings, list(SERVICES), probers=probers), settings.event_loop, SERVICES)
    except ConfigError as exc:
        typer.echo(error_line(str(exc)), err=True)
        raise typer.Exit(2) from exc


@app.command()
def init(
    config: ConfigOpt = None,
    wait_s: Annotated[float, typer.Option("--wait", help="seconds to wait for NATS to answer")] = 60.0,
) -> None:
    """Create or update the streams and the KV bucket (idempotent; run as the admin NATS user).

    Waits up to ``--wait`` seconds for NATS while it refuses connections or
    times out; a refusal no wait heals (a wrong or missing password, a user
    that may not manage streams, a configuration the server refuses) ends it at
    once, in one line.  Exit status: 0 done, 1 NATS did not answer in time, 2 refused.
    """
    from reverie_canary.canary.runtime import NatsUnanswered, initialise

    settings = _settings(config)
    try:
        asyncio.run(initialise(settings, wait_s))
    except ConfigError as exc:
        typer.echo(error_line(str(exc)), err=True)
        raise typer.Exit(2) from exc
    except NatsUnanswered as exc:
        typer.echo(error_line(str(exc)), err=True)
        raise typer.Exit(1) from exc
    typer.echo("streams and KV bucket are in place")


@app.command()
def watch(
    model: Annotated[str | None, typer.Option(help="model id (default: the first configured)")] = None,
    config: ConfigOpt = None,
    cache: Annotated[Path | None, typer.Option(help="keep the last good snapshot in this file")] = None,
    once: Annotated[bool, typer.Option(help="print the current provider object and exit (1: the bus did not "
                                            "confirm it within 10 s)")] = False,
) -> None:
    """Print the provider object each time the model's ignore list changes (a minimal chat backend)."""
    from reverie_canary.client import IgnoreListClient
    from reverie_canary.shared.runtime.logging import configure as configure_logging

    settings = _settings(config)
    target = model or settings.models[0]
    configure_logging("console", "ERROR")  # the client's problems are said below, in one line each

    async def report_problems() -> None:
        said: str | None = None
        while True:
            if client.problem != said:
                if client.problem:
                    print(f"canary watch: {client.problem} (serving version {client.version})", file=sys.stderr,
                          flush=True)
                elif said:
                    print("canary watch: the ignore list is current again", file=sys.stderr, flush=True)
                said = client.problem
            await asyncio.sleep(0.5)

    def show(snapshot) -> None:
        print(json.dumps({"version": snapshot.version, "provider": client.provider()}), flush=True)

    from reverie_canary.shared.runtime.tls import nats_tls

    try:
        tls = nats_tls(settings)
    except ConfigError as exc:
        typer.echo(error_line(str(exc)), err=True)
        raise typer.Exit(2) from exc
    client = IgnoreListClient(settings.nats_url, target, user=settings.nats_user,
                              password=settings.nats_password, cache_path=cache, on_change=show, tls=tls)

    async def main() -> int:
        await client.start()
        reporter = asyncio.create_task(report_problems())
        try:
            if once:
                confirmed = await client.wait_ready(10.0) and client.age_s is not None
                if client.snapshot is None and confirmed:  # the bus says: no snapshot yet, nothing ignored
                    print(json.dumps({"version": 0, "provider": client.provider()}), flush=True)
                if not confirmed:  # stdout holds only a real snapshot (from --cache), never a made-up empty one
                    print(f"canary watch: not confirmed by the bus within 10 s: {client.problem or 'no answer'}",
                          file=sys.stderr, flush=True)
                    return 1
                if client.problem:
                    print(f"canary watch: {client.problem}", file=sys.stderr, flush=True)
                return 0
            await asyncio.Event().wait()
            return 0
        finally:
            reporter.cancel()
            await client.stop()

    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)


@app.command()
def simulator(
    scenario: Annotated[str, typer.Option(help="'default', 'full', 'hostile' or a scenario TOML file")] = "default",
    port: Annotated[int, typer.Option(help="TCP port (0: a free one)")] = 8080,
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    sentences: Annotated[Path | None, typer.Option(help="directory of <lang>.txt real sentences")] = None,
) -> None:
    """Serve the simulated OpenRouter gateway (for compose and manual tests)."""
    from reverie_canary.shared.runtime.logging import configure as configure_logging
    from reverie_canary.simulator.__main__ import main as sim_main

    settings = _settings()
    configure_logging(settings.log_format, settings.log_level)
    argv = ["--scenario", scenario, "--port", str(port), "--host", host]
    if sentences:
        argv += ["--sentences", str(sentences)]
    raise typer.Exit(sim_main(argv) or 0)


@app.command()
def check(file: Annotated[Path, typer.Argument(help="recorded replies, one JSON object per line (the field cases' format, services/prober/recorded.py); - reads stdin")]) -> None:
    """Evaluate recorded replies with the probe checks; print one JSON verdict per line."""
    from reverie_canary.services.prober.recorded import check_file

    worst = 0
    try:
        for verdict in check_file(file):
            print(json.dumps(verdict, ensure_ascii=False), flush=True)
            if verdict.get("outcome") == "error":
                worst = 1
    except (OSError, UnicodeDecodeError) as exc:
        typer.echo(f"error: cannot read {file}: {exc}", err=True)
        raise typer.Exit(2) from exc
    raise typer.Exit(worst)


def wire_schema() -> dict:
    """JSON Schema (draft 2020-12) of every wire message, from the msgspec Structs themselves.

    FastStream's AsyncAPI generation cannot see our payload types (handlers take
    the raw message and decode strictly with msgspec), so the schema of the wire
    is exported here instead (FastStream's and nats-py's documentation).
    """
    import msgspec

    from reverie_canary.shared.contract.codec import WIRE_TYPES

    (refs, components) = msgspec.json.schema_components(WIRE_TYPES, ref_template="#/$defs/{name}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "reverie-canary wire messages",
        "oneOf": list(refs),
        "$defs": components,
    }


@app.command()
def schema() -> None:
    """Print the JSON Schema of every wire message (events, tasks, commands, snapshots)."""
    print(json.dumps(wire_schema(), indent=2, sort_keys=True))


@app.command()
def asyncapi(
    write: Annotated[bool, typer.Option("--write", help="write the repository's docs/asyncapi.json instead of printing")] = False,
    check: Annotated[bool, typer.Option("--check", help="exit 1 when docs/asyncapi.json differs from the code")] = False,
) -> None:
    """Print the message contract as one AsyncAPI 3.0 document, generated from the code's tables.

    Channels, payload schemas, who sends and who receives each, the streams, the durable consumers,
    the KV bucket and every NATS user's permissions (canary/asyncapi.py).
    """
    from pathlib import Path

    from reverie_canary.canary.asyncapi import DOCUMENT_PATH, render

    text = render()
    if not (write or check):
        sys.stdout.write(text)
        return
    path = Path(__file__).resolve().parents[1] / DOCUMENT_PATH
    if check:
        kept = path.read_text(encoding="utf-8") if path.exists() else ""
        if kept != text:
            typer.echo(f"{DOCUMENT_PATH} differs from what the code generates: run `canary asyncapi --write`", err=True)
            raise typer.Exit(1)
        typer.echo(f"{DOCUMENT_PATH} is what the code generates")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {path}")


@app.command("redis-acl")
def redis_acl(
    out: Annotated[Path | None, typer.Option("--out", help="write the file (mode 0600) instead of printing it")] = None,
    config: ConfigOpt = None,
) -> None:
    """Write the ACL file redis-server loads (--aclfile): a Redis user per service, a reader and an admin.

    Rules from shared/redis/users.acl; the key patterns under CANARY_NAMESPACE; each user's password
    from CANARY_REDIS_<USER>_PASSWORD (or CANARY_REDIS_<USER>_PASSWORD_FILE), written as its SHA-256
    (the file holds no password). Exit 2 when a password is missing.
    """
    from reverie_canary.shared.runtime.auth import redis_passwords_from, render_redis_acl

    settings = _settings(config)
    try:
        text = render_redis_acl(redis_passwords_from(os.environ), settings.namespace)
    except ConfigError as exc:
        typer.echo(error_line(str(exc)), err=True)
        raise typer.Exit(2) from exc
    if out is None:
        sys.stdout.write(text)
        return
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(out, 0o600)
    typer.echo(f"wrote {out}")


def main() -> None:
    """Console-script entry point: errors become one line on stderr, not a traceback.

    Exit status: 0 ok, 1 failure, 2 bad input or settings.  Usage errors are
    typer's own.  ``CANARY_DEBUG=1`` re-raises unexpected errors with their traceback.
    """
    from reverie_canary.canary.embedded import ServerUnavailable
    from reverie_canary.shared.contract.errors import CanaryError
    from reverie_canary.shared.runtime.logging import scrub_standard_streams

    scrub_standard_streams()  # no secret reaches the terminal, whatever prints it
    try:
        app()
    except ConfigError as exc:
        print(error_line(str(exc)), file=sys.stderr)
        sys.exit(2)
    except (CanaryError, ServerUnavailable) as exc:
        print(error_line(str(exc)), file=sys.stderr)
        sys.exit(1)
    except Exception as exc:
        if os.environ.get("CANARY_DEBUG"):
            raise
        print(error_line(f"{type(exc).__name__}: {exc} (set CANARY_DEBUG=1 for the traceback)"), file=sys.stderr)
        sys.exit(1)



# Commands defined in other modules register themselves on ``app`` (imported last: they import ``app``).
from reverie_canary.canary import (  # noqa: E402
    cli_dashboard,  # noqa: F401
    cli_evidence,  # noqa: F401
    cli_judge,  # noqa: F401
    cli_notices,  # noqa: F401
    cli_ops,  # noqa: F401
    cli_probe,  # noqa: F401
    cli_status,  # noqa: F401
)


@app.command()
def docs(
    write: Annotated[bool, typer.Option("--write", help="write the checkout's docs/reference/ pages")] = False,
    check: Annotated[bool, typer.Option("--check", help="exit 1 when a committed page differs from the code")] = False,
) -> None:
    """Generate the documentation's reference pages from the code: settings, metrics, alerts, reasons, CLI, messages.

    Without an option, list the pages and whether each is current.  Works in a checkout only (the
    pages and the alert rules live in the repository, not in the package).
    """
    from reverie_canary.canary import reference

    if not (reference.ROOT / "docs").is_dir():
        typer.echo(f"error: no docs/ under {reference.ROOT}: run from a checkout (pip install -e .)", err=True)
        raise typer.Exit(2)
    if write:
        for path in reference.write():
            typer.echo(f"wrote {path.relative_to(reference.ROOT)}")
        return
    behind = reference.stale()
    for rel in reference.PAGES:
        typer.echo(f"{'STALE' if rel in behind else 'current'}  docs/{rel}")
    if behind and check:
        typer.echo(f"{len(behind)} reference page(s) differ from the code: run `{reference.FIX}`", err=True)
        raise typer.Exit(1)


#: The help's command groups, in the order ``canary --help`` shows them, with what each is for.
GROUPS: dict[str, str] = {
    "Operate": "Day-to-day work on a running deployment: the fleet's state, overrides, lifts, modes, quantization "
               "floors, notices.",
    "Investigate": "Why a provider is where it is, what served a user at a time, and reproducing a fault.",
    "Audit": "Folding the log again: the decision timeline, observe mode's record, backtests.",
    "Deploy": "Setting a deployment up and running its services.",
    "Develop": "The demo, the simulated gateway, the wire contract and the documentation.",
}
#: Which group each top-level command belongs to (a command missing here fails tests/unit/test_cli_help.py).
COMMAND_GROUPS: dict[str, str] = {
    "status": "Operate", "override": "Operate", "lift": "Operate", "mode": "Operate", "quant-floor": "Operate",
    "exclusions": "Operate",
    "notices": "Operate", "dashboard": "Operate",
    "explain": "Investigate", "incident": "Investigate", "evidence": "Investigate", "probe": "Investigate",
    "check": "Investigate", "watch": "Investigate",
    "replay": "Audit", "report": "Audit",
    "init": "Deploy", "run": "Deploy", "up": "Deploy", "redis-acl": "Deploy", "web-user": "Deploy",
    "web-token": "Deploy",
    "demo": "Develop", "simulator": "Develop", "schema": "Develop", "asyncapi": "Develop", "docs": "Develop",
}


def _command_name(info) -> str:
    return info.name or info.callback.__name__.replace("_", "-")


def _group_commands() -> None:
    """Put every registered command (and sub-app) in its help group; sort them by group, then as registered."""
    order = list(GROUPS)
    for info in app.registered_commands:
        info.rich_help_panel = COMMAND_GROUPS.get(_command_name(info), info.rich_help_panel)
    for info in app.registered_groups:
        info.rich_help_panel = COMMAND_GROUPS.get(info.name or "", info.rich_help_panel)
    app.registered_commands.sort(key=lambda i: order.index(i.rich_help_panel) if i.rich_help_panel in order else 99)
    app.registered_groups.sort(key=lambda i: order.index(i.rich_help_panel) if i.rich_help_panel in order else 99)


_group_commands()
