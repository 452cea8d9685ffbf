"""Operator commands: ``canary override|lift|mode|quant-floor|exclusions``.

Each command is published on ``canary.ops.<verb>`` through JetStream with
``Nats-Msg-Id`` = its ``command_id`` (a fresh uuid4), so a retried publish is
stored once (docs/concepts/routing.md).
The credential is the settings' one (``NATS_USER`` / ``NATS_PASSWORD``):
operators use the ``operator`` user, the only one allowed to publish there
(``shared/nats/server.conf``).  The actor is ``$CANARY_ACTOR``, else the login
name.

After publishing, every command waits (``--timeout``, 10 s) for its one answer
(docs/concepts/messages.md, "Operator commands are answered by events"): the service that owns
it (the router for overrides, exclusions and quantization floors, the judge for lift and mode)
publishes ``CommandApplied`` or ``CommandRefused`` on the log, and the command
reads it with an ordered consumer filtered to its command id, from the
command's own log position on:

- applied: print what changed (the snapshot versions made, the judge's
  decision), warnings on stderr (a guard rail passed with ``--force``, a
  capacity floor broken by this command), exit 0;
- refused: print the service's reason on stderr, exit 1;
- no answer in time: say so, exit 1 (the command stays in the log and is
  applied when the service runs).

``override list`` reads the current snapshots; ``exclusions check`` validates a
file offline.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any

import typer

from reverie_canary.canary.cli import ConfigOpt, _settings, app
from reverie_canary.canary.help import CanaryGroup
from reverie_canary.shared.contract.commands import MAX_OVERRIDE_S
from reverie_canary.shared.contract.errors import CanaryError, ConfigError
from reverie_canary.shared.contract.timefmt import utc_text
from reverie_canary.shared.runtime.logging import scrub
from reverie_canary.shared.runtime.retry import NATS_FAULTS

override_app = typer.Typer(cls=CanaryGroup, no_args_is_help=True, help="Runtime incident overrides (layer 2 of the ignore list).")
exclusions_app = typer.Typer(cls=CanaryGroup, no_args_is_help=True, help="The reviewed exclusions file (layer 1 of the ignore list).")
app.add_typer(override_app, name="override")
app.add_typer(exclusions_app, name="exclusions")

#: How long the waiting commands wait for the router or the judge (seconds).
WAIT_S = 10.0

TimeoutOpt = Annotated[float, typer.Option("--timeout", help="seconds to wait for the router or the judge")]
ForceOpt = Annotated[bool, typer.Option("--force", help="apply it past the guard rails (a provider the gateway "
                                                        "does not list, fewer than min_hosts usable hosts)")]
ActorOpt = Annotated[str | None,
                     typer.Option("--actor", help="who asks (default: $CANARY_ACTOR, else the login name)")]

#: The longest an operator override may last, from now to its end (``--for`` or ``--expires``):
#: the wire's bound, :data:`reverie_canary.shared.contract.commands.MAX_OVERRIDE_S` (365 days; its reason is there).
MAX_OVERRIDE = timedelta(seconds=MAX_OVERRIDE_S)

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


# -- pure helpers (no I/O) ---------------------------------------------------------------


def parse_duration(text: str, longest: timedelta | None = None) -> timedelta:
    """Parse a duration such as ``90s``, ``30m``, ``2h``, ``1d`` or ``1h30m``.

    Args:
        longest: the longest duration accepted (default: any that a ``timedelta`` holds).

    Returns:
        A positive timedelta.

    Raises:
        ValueError: when the text is not such a duration, is zero, or is longer than ``longest``
            (or than a ``timedelta`` holds).
    """
    compact = text.strip().lower().replace(" ", "")
    parts = _DURATION.findall(compact)
    if not compact or "".join(f"{n}{u}" for n, u in parts) != compact:
        raise ValueError(f"not a duration: {text!r} (examples: 90s, 30m, 2h, 1d, 1h30m)")
    seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    limit = longest.total_seconds() if longest is not None else timedelta.max.total_seconds()
    if not seconds <= limit:  # also inf (a number too long for a float)
        raise ValueError(f"duration too long: {text!r} (at most {_days(limit)})")
    return timedelta(seconds=seconds)


def _days(seconds: float) -> str:
    """``365 d`` (whole days) or ``90 s``: a bound in the words of ``--for``."""
    return f"{seconds / 86400:g} d" if seconds >= 86400 else f"{seconds:g} s"


def parse_when(text: str) -> datetime:
    """Parse an ISO 8601 time (``2026-06-11T18:00:00Z``, ``2026-06-11T20:00+02:00``) as UTC.

    A time without a zone is taken as UTC.

    Raises:
        ValueError: when the text is not an ISO 8601 date or time.
    """
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"not an ISO 8601 time: {text!r} (example: 2026-06-11T18:00:00Z)") from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def default_actor(env: dict[str, str] | None = None) -> str:
    """``$CANARY_ACTOR``, else the login name, else ``operator``."""
    env = dict(os.environ) if env is None else env
    actor = (env.get("CANARY_ACTOR") or "").strip()
    if actor:
        return actor
    try:
        return getpass.getuser() or "operator"
    except (KeyError, OSError):  # no login name (a container without passwd entry)
        return "operator"


def _quoted(items: list[str]) -> str:
    return "[" + ", ".join(f'"{p}"' for p in items) + "]"


def fmt_ignore(snapshot, now: datetime) -> str:
    """``ignore ["a/fp8", "b"]``: the providers a snapshot ignores at ``now`` (UTC)."""
    return "ignore " + _quoted(snapshot.ignore_at(now) if snapshot is not None else [])


def snapshot_lines(model: str, snapshot, now: datetime) -> list[str]:
    """Lines describing one model's snapshot: each entry with its layers, reasons, actor and expiry.

    Every text is shown with its control characters escaped (:mod:`reverie_canary.shared.runtime.printable`).
    """
    from reverie_canary.shared.runtime.printable import printable, printable_view

    model, snapshot = printable(model), printable_view(snapshot)
    if snapshot is None:
        return [f"{model}: no snapshot yet"]
    live = snapshot.ignore_at(now)
    lines = [f"{model}: snapshot v{snapshot.version} at {utc_text(snapshot.at)}, "
             f"{len(live)} ignored now: {_quoted(live)}"]
    if not snapshot.entries:
        lines.append("  (no entries)")
    for entry in snapshot.entries:
        gone = "" if entry.active_at(now) is not None else "  (expired; the router drops it at its next merge)"
        lines.append(f"  {entry.provider}{gone}")
        for r in entry.reasons:
            bits = [f"    {r.layer:<10}", r.reason]
            if r.actor:
                bits.append(f"actor {r.actor}")
            if r.since is not None:
                bits.append(f"since {utc_text(r.since)}")
            expired = r.until is not None and r.until <= now
            bits.append(f"until {utc_text(r.until)}" + (" (expired)" if expired else ""))
            if r.reference:
                bits.append(f"ref {r.reference}")
            lines.append("  ".join(bits))
    return lines


def exclusion_line(e) -> str:
    """One reviewed exclusion, for ``canary exclusions check`` (its texts printable)."""
    from reverie_canary.shared.runtime.printable import printable_view

    e = printable_view(e)
    until = f", expires {utc_text(e.until)}" if e.until else ""
    scope = "every model (*)" if e.model == "*" else e.model
    return f"line {e.line}: {e.provider} on {scope}: {e.reason} ({e.reference}); reviewed {utc_text(e.since)}{until}"


def _scope(model: str) -> str:
    return "every model (*)" if model == "*" else model


# -- talking to the bus ----------------------------------------------------------------------


class Bus:
    """A short-lived connection for one operator command (the settings' credential)."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.nc: Any = None
        self.js: Any = None
        self._kv: Any = None

    async def __aenter__(self) -> Bus:
        from reverie_canary.shared.runtime.service import nats_connect_once

        try:
            self.nc = await nats_connect_once(self.settings)
        except ConnectionError as exc:
            raise OpsError(str(exc)) from exc
        self.js = self.nc.jetstream(timeout=5.0)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.nc is not None:
            try:
                await self.nc.close()
            except NATS_FAULTS:  # closing a connection that already failed: nothing left to release
                pass

    async def kv(self):
        """The ``canary-routing`` bucket."""
        from nats.js.errors import BucketNotFoundError, NotFoundError

        from reverie_canary.shared.runtime.streams import ROUTING_BUCKET

        if self._kv is None:
            try:
                self._kv = await self.js.key_value(ROUTING_BUCKET)
            except (BucketNotFoundError, NotFoundError) as exc:
                raise OpsError(f"no KV bucket {ROUTING_BUCKET} (run canary init)") from exc
        return self._kv

    async def snapshot(self, model: str):
        """The current IgnoreSnapshot of ``model`` (``None`` when there is none)."""
        from nats.js.errors import KeyNotFoundError

        from reverie_canary.shared.contract import codec, subjects

        kv = await self.kv()
        try:
            entry = await kv.get(subjects.kv_key(model))
        except KeyNotFoundError:
            return None
        return codec.SNAPSHOT.decode(entry.value) if entry.value else None

    async def models(self) -> list[str]:
        """Model ids that have a snapshot in the bucket."""
        from nats.js.errors import NoKeysError

        from reverie_canary.shared.contract.subjects import SubjectError, decode_token

        kv = await self.kv()
        try:
            keys = await kv.keys()
        except NoKeysError:
            return []
        out = []
        for key in keys:
            try:
                out.append(decode_token(key))
            except SubjectError:
                continue
        return sorted(out)

    async def publish(self, command) -> int:
        """Publish ``command`` on ``canary.ops.<verb>`` with ``Nats-Msg-Id`` = its id.

        Returns:
            The command's sequence in the log stream.

        Raises:
            OpsError: not stored (no permission: wrong credential; or NATS down).
        """
        from reverie_canary.shared.contract import codec, subjects
        from reverie_canary.shared.contract.commands import VERBS
        from reverie_canary.shared.runtime.streams import LOG

        subject = subjects.ops(VERBS[type(command)])
        try:
            ack = await self.js.publish(subject, codec.encode(command), stream=LOG, timeout=5.0,
                                        headers={"Nats-Msg-Id": command.command_id})
        except NATS_FAULTS as exc:
            raise OpsError(f"the command was not stored on {subject}: {exc!r} "
                           f"(only the operator credential may publish there; NATS_USER is "
                           f"{self.settings.nats_user or 'unset'})") from exc
        return ack.seq

    async def answer(self, command, after_seq: int, timeout_s: float):
        """Wait for the one answer to ``command`` on the log, from position ``after_seq`` on.

        An ordered consumer filtered to the command's answer subject
        (:func:`reverie_canary.shared.contract.subjects.answers_to`), so nothing else is read.

        Returns:
            ``CommandApplied`` or ``CommandRefused``; ``None`` when none came within ``timeout_s``.
        """
        from nats.js.api import ConsumerConfig, DeliverPolicy

        from reverie_canary.shared.contract import codec, subjects
        from reverie_canary.shared.contract.errors import Rejected, Undecodable
        from reverie_canary.shared.runtime.streams import LOG

        sub = await self.js.subscribe(subjects.answers_to(command.command_id), stream=LOG, ordered_consumer=True,
                                      deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                      config=ConsumerConfig(opt_start_seq=after_seq))
        deadline = time.monotonic() + timeout_s
        try:
            while (left := deadline - time.monotonic()) > 0:
                try:
                    msg = await sub.next_msg(timeout=left)
                except NATS_FAULTS:  # nats TimeoutError: nothing within the time left
                    return None
                try:
                    reply = codec.ANSWER.decode(msg.data)
                    codec.check_origin(msg.subject, reply)
                except (Undecodable, Rejected):
                    continue  # not a well-formed answer from its owner: keep waiting for the real one
                if reply.command_id == command.command_id:
                    return reply
            return None
        finally:
            try:
                await sub.unsubscribe()
            except NATS_FAULTS:  # the connection went meanwhile: the subscription went with it
                pass


class OpsError(CanaryError):
    """An operator command could not be carried out; the message says why."""


async def _send(settings, command, timeout_s: float):
    """Publish ``command`` and wait for its answer; returns ``(log position, answer or None)``.

    The answer's texts (a reason, warnings, decisions' details) come with their control
    characters escaped (:func:`reverie_canary.shared.runtime.printable.printable_view`): they are printed.
    """
    from reverie_canary.shared.runtime.printable import printable_view

    async with Bus(settings) as bus:
        seq = await bus.publish(command)
        return seq, printable_view(await bus.answer(command, seq, timeout_s))


def _owner(command) -> str:
    from reverie_canary.shared.contract.commands import OWNERS

    return OWNERS[type(command)]


def _refused_or_late(command, seq: int, answer, timeout_s: float, *, prefix: str = "rejected: ") -> None:
    """Print a refusal or a missing answer on stderr and exit 1 (returns when the command was applied)."""
    from reverie_canary.shared.contract.events import CommandRefused

    owner = _owner(command)
    if answer is None:
        typer.echo(f"error: no answer from the {owner} within {timeout_s:g} s; command {command.command_id} is in "
                   f"the log at #{seq} and will be applied when the {owner} runs", err=True)
        raise typer.Exit(1)
    if isinstance(answer, CommandRefused):
        typer.echo(f"error: the {owner} refused command {command.command_id} (log #{seq}): {prefix}{answer.reason}",
                   err=True)
        raise typer.Exit(1)


def _warnings(answer) -> None:
    """An applied answer's warnings, and a capacity floor broken by this command, on stderr."""
    for text in answer.warnings:
        typer.echo(f"warning: {text}", err=True)
    for breach in answer.floor_broken:
        left = ", ".join(breach.usable) or "none"
        typer.echo(f"warning: the capacity floor is broken by this command: {breach.model} keeps "
                   f"{len(breach.usable)} usable host(s) ({left}), below the floor of {breach.min_hosts}", err=True)


def _report(command, seq: int, answer, headline: str, timeout_s: float) -> None:
    """Print a router command's outcome; exit 1 unless it was applied."""
    _refused_or_late(command, seq, answer, timeout_s)
    _warnings(answer)
    if not answer.snapshots:
        versions = ", ".join(f"{v.model} v{v.version}" for v in answer.unchanged) or "none"
        typer.echo(f"{headline} — no snapshot changed (current: {versions})")
        return
    if len(answer.snapshots) == 1:
        (made,) = answer.snapshots
        typer.echo(f"{headline} — snapshot v{made.version}: {_ignored(made)}"
                   + ("" if f" on {made.model}" in headline else f" ({made.model})"))
        return
    typer.echo(headline)
    for made in answer.snapshots:
        typer.echo(f"  {made.model}: snapshot v{made.version}: {_ignored(made)}")


def _ignored(made) -> str:
    """``ignore ["a/fp8", "b"]`` of a snapshot version an answer reports (``+ N more`` past its bound)."""
    more = made.ignored - len(made.ignore)
    return "ignore " + _quoted(made.ignore) + (f" + {more} more" if more > 0 else "")


def _run(coro, settings=None):
    """Run ``coro``; turn an :class:`OpsError` or a NATS failure into ``error: ...`` and exit status 1."""
    import nats.errors

    try:
        return asyncio.run(coro)
    except OpsError as exc:
        typer.echo(f"error: {scrub(str(exc))}", err=True)
        raise typer.Exit(1) from exc
    except (TimeoutError, nats.errors.Error) as exc:
        user = (settings.nats_user if settings is not None else "") or "unset"
        typer.echo(f"error: a NATS request failed: {exc!r} (a permission the credential lacks? "
                   f"operators use the operator user; NATS_USER is {user})", err=True)
        raise typer.Exit(1) from exc


def _command_fields(actor: str | None) -> dict[str, Any]:
    return {"command_id": str(uuid.uuid4()), "actor": actor or default_actor(),
            "at": datetime.now(timezone.utc)}


def _validated(cls, **fields):
    """Build a command Struct through the strict decoder, so that the CLI refuses what the router would.

    A text field with a control character is refused first, naming the option and the character.
    """
    import msgspec

    from reverie_canary.shared.runtime.printable import control_at

    for name, value in fields.items():
        if isinstance(value, str) and (at := control_at(value)) is not None:
            typer.echo(f"error: invalid command: {_OPTION.get('$.' + name, name)} holds a control character "
                       f"(U+{ord(value[at]):04X} at character {at + 1}); control characters, tabs and newlines "
                       "included, are refused: they would drive other operators' terminals", err=True)
            raise typer.Exit(2)
    try:
        return msgspec.convert(fields, cls)
    except msgspec.ValidationError as exc:
        typer.echo(f"error: invalid command: {_plain(str(exc), fields)}", err=True)
        raise typer.Exit(2) from exc


#: What the wire's constraints mean, in the words of the command line (a value that breaks a pattern).
_PLAIN = {
    "$.reason": "--reason must say why (not empty, not only spaces)",
    "$.provider": "the provider must be one endpoint tag without spaces (e.g. deepinfra/fp8)",
    "$.actor": "the actor must be one word without spaces (--actor or $CANARY_ACTOR)",
    "$.model": "--model must be one model id without spaces, or *",
}
#: The option (or argument) each command field comes from.
_OPTION = {"$.reason": "--reason", "$.reference": "--reference", "$.provider": "the provider",
           "$.actor": "the actor (--actor or $CANARY_ACTOR)", "$.model": "--model"}
_TOO_LONG = re.compile(r"of length <= (\d+)")


def _plain(message: str, fields: dict[str, Any] | None = None) -> str:
    """msgspec's ``Expected ... - at $.field`` as the option it concerns (keeps the original too).

    A value over its length bound is said to be too long, with the bound and its length.
    """
    field = message.rpartition(" - at ")[2].strip("`")
    too_long = _TOO_LONG.search(message)
    if too_long and field in _OPTION:
        value = (fields or {}).get(field[2:])
        given = f", {len(value)} given" if isinstance(value, str) else ""
        return f"{_OPTION[field]} is too long: at most {too_long.group(1)} characters{given} [{message}]"
    hint = _PLAIN.get(field)
    return f"{hint} [{message}]" if hint else message


# -- override add | remove | list --------------------------------------------------------------


@override_app.command("add")
def override_add(
    provider: Annotated[str, typer.Argument(help="provider (endpoint tag such as lambda/fp8, or base slug)")],
    reason: Annotated[str, typer.Option("--reason", help="why (an incident, a ticket); required")],
    model: Annotated[str, typer.Option("--model", help="model id, or * for every model")] = "*",
    expires: Annotated[str | None,
                       typer.Option("--expires", help="end, ISO 8601 UTC (2026-06-11T18:00:00Z)")] = None,
    for_: Annotated[str | None, typer.Option("--for", help="end after this long (30m, 2h, 1d)")] = None,
    reference: Annotated[str, typer.Option("--reference", help="URL or ticket")] = "",
    force: ForceOpt = False,
    actor: ActorOpt = None,
    timeout: TimeoutOpt = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """Ignore PROVIDER now (for one model or every model), until removed or until it expires.

    An override lasts at most 365 days: without --expires or --for it expires 365 days
    from now, and a later end is refused (a longer one belongs in the reviewed exclusions).

    The router refuses a provider the gateway does not list for the model, and an
    override that would leave fewer than min_hosts usable hosts, unless --force.
    """
    from reverie_canary.shared.contract.commands import AddOverride

    if expires and for_:
        typer.echo("error: give --expires or --for, not both", err=True)
        raise typer.Exit(2)
    fields = _command_fields(actor)
    expires_at = None
    try:
        if expires:
            expires_at = parse_when(expires)
        elif for_:
            expires_at = fields["at"] + parse_duration(for_, MAX_OVERRIDE)
    except ValueError as exc:
        typer.echo(f"error: --{'expires' if expires else 'for'}: {scrub(str(exc))}", err=True)
        raise typer.Exit(2) from exc
    if expires_at is not None and expires_at <= fields["at"]:
        typer.echo(f"error: --expires {utc_text(expires_at)} is not in the future", err=True)
        raise typer.Exit(2)
    if expires_at is not None and expires_at - fields["at"] > MAX_OVERRIDE:
        typer.echo(f"error: --expires {utc_text(expires_at)} is more than {_days(MAX_OVERRIDE.total_seconds())} "
                   "ahead, the longest an override lasts (a longer one belongs in the reviewed exclusions file)",
                   err=True)
        raise typer.Exit(2)
    longest = expires_at is None
    if longest:  # the router gives it the same end; the command says it, so the answer below can print it
        expires_at = fields["at"] + MAX_OVERRIDE
    settings = _settings(config)
    command = _validated(AddOverride, **fields, provider=provider, model=model, reason=reason,
                         expires_at=expires_at, reference=reference, force=force)
    seq, answer = _run(_send(settings, command, timeout), settings)
    until = f" until {utc_text(expires_at)}" + (f" (the longest an override lasts, {_days(MAX_OVERRIDE.total_seconds())};"
                                                " --for or --expires for less)" if longest else "")
    _report(command, seq, answer, f"override added: {provider} on {_scope(model)}: {reason} ({command.actor}){until}",
            timeout)


@override_app.command("remove")
def override_remove(
    provider: Annotated[str, typer.Argument(help="provider of the override")],
    model: Annotated[str, typer.Option("--model", help="model id, or * (the scope the override was added with)")] = "*",
    reason: Annotated[str, typer.Option("--reason", help="why it is removed")] = "",
    actor: ActorOpt = None,
    timeout: TimeoutOpt = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """Remove the operator override of PROVIDER (suspensions and reviewed exclusions stay)."""
    from reverie_canary.shared.contract.commands import RemoveOverride

    settings = _settings(config)
    command = _validated(RemoveOverride, **_command_fields(actor), provider=provider, model=model, reason=reason)
    seq, answer = _run(_send(settings, command, timeout), settings)
    why = f": {reason}" if reason else ""
    _report(command, seq, answer, f"override removed: {provider} on {_scope(model)}{why} ({command.actor})", timeout)


@override_app.command("list")
def override_list(
    model: Annotated[str | None,
                     typer.Option("--model", help="one model (default: every model with a snapshot)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document (the read model's ignore-list "
                                                         "view per model)")] = False,
    config: ConfigOpt = None,
) -> None:
    """Print the current ignore list(s): each entry with its layers, reasons, actor and expiry.

    With ``--json``: ``{"at": ..., "models": [{"model", "version", "at", "ignored", "layers", "entries"}]}``,
    ``ignored`` and ``layers`` as of ``at`` (expired layers left out), ``entries`` as the snapshot has them.
    """
    settings = _settings(config)

    async def main() -> tuple[datetime, list[tuple[str, Any]]]:
        async with Bus(settings) as bus:
            models = [model] if model else (await bus.models() or list(settings.models))
            now = datetime.now(timezone.utc)
            return now, [(m, await bus.snapshot(m)) for m in models]

    now, snapshots = _run(main(), settings)
    if as_json:
        import json

        import msgspec

        from reverie_canary.services.dashboard.core import ignore_list_view

        doc = {"at": now, "models": [{"model": m, **msgspec.to_builtins(ignore_list_view(snap, now))}
                                     for m, snap in snapshots]}
        typer.echo(json.dumps(msgspec.to_builtins(doc), indent=2))
        return
    for m, snap in snapshots:
        for line in snapshot_lines(m, snap, now):
            typer.echo(line)


# -- lift, mode ----------------------------------------------------------------------------------


@app.command()
def lift(
    provider: Annotated[str, typer.Argument(help="provider whose canary suspension ends")],
    reason: Annotated[str, typer.Option("--reason", help="why; required")],
    model: Annotated[str | None,
                     typer.Option("--model", help="model id or * (default: the first configured)")] = None,
    actor: ActorOpt = None,
    timeout: TimeoutOpt = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """End PROVIDER's canary suspension at once; wait for the judge's decision."""
    from reverie_canary.shared.contract.commands import LiftSuspension

    settings = _settings(config)
    target = model or settings.models[0]
    command = _validated(LiftSuspension, **_command_fields(actor), provider=provider, model=target, reason=reason)
    seq, answer = _run(_send(settings, command, timeout), settings)
    typer.echo(f"lift published: {provider} on {_scope(target)}: {reason} ({command.actor}), "
               f"command {command.command_id} (log #{seq})")
    _refused_or_late(command, seq, answer, timeout, prefix="lifted nothing: ")
    for d in answer.decisions:
        verb = "lifted" if d.action == "end" else "would be lifted (observe mode)"
        typer.echo(f"suspension {verb}: {d.provider} on {d.model} — decision {d.action} at {utc_text(d.at)}: "
                   f"{d.detail}")


@app.command()
def mode(
    new_mode: Annotated[str, typer.Argument(metavar="observe|enforce",
                                            help="observe: announce only; enforce: change routing")],
    kind: Annotated[str | None,
                    typer.Option("--kind", help="one probe kind (ttft, refusal, structured, language, echo, tools) or fact kind (template)")] = None,
    model: Annotated[str, typer.Option("--model", help="model id, or * for every model")] = "*",
    reason: Annotated[str, typer.Option("--reason", help="why")] = "",
    actor: ActorOpt = None,
    timeout: TimeoutOpt = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """Switch the judge to observe or enforce, for one probe kind or all; wait for the judge's answer.

    A model the judge does not watch is refused.
    """
    from reverie_canary.shared.contract.commands import SetMode
    from reverie_canary.shared.contract.events import JUDGED_KINDS

    if new_mode not in ("observe", "enforce"):
        typer.echo(f"error: mode must be observe or enforce, not {new_mode!r}", err=True)
        raise typer.Exit(2)
    kinds = JUDGED_KINDS  # the probe kinds and the fact kinds (template) each have a mode
    if kind is not None and kind not in kinds:
        typer.echo(f"error: unknown probe kind {kind!r}; one of {', '.join(kinds)}", err=True)
        raise typer.Exit(2)
    settings = _settings(config)
    command = _validated(SetMode, **_command_fields(actor), mode=new_mode, model=model, kind=kind, reason=reason)
    seq, answer = _run(_send(settings, command, timeout), settings)
    scope = f"probe kind {kind}" if kind else "all probe kinds"
    why = f": {reason}" if reason else ""
    typer.echo(f"mode published: {new_mode} for {scope} on {_scope(model)}{why} ({command.actor}), "
               f"command {command.command_id}, log #{seq}")
    _refused_or_late(command, seq, answer, timeout, prefix="")
    for d in answer.decisions:
        typer.echo(f"mode changed on {d.model}: {d.detail}")
    # read back from the judge's state, never from the request: what each model's kinds are in now
    typer.echo(answer.detail if not answer.changed else f"modes {answer.detail}")


@app.command("quant-floor")
def quant_floor(
    model: Annotated[str, typer.Argument(help="the model whose endpoints the floor filters")],
    reason: Annotated[str, typer.Option("--reason", help="why (an incident, a measurement); required")],
    deny: Annotated[str | None, typer.Option("--deny", help="quantizations to keep off, comma-separated "
                                                          "(fp4,int4); fp4 also denies mxfp4 and nvfp4")] = None,
    minimum: Annotated[str | None, typer.Option("--min", help="deny every quantization with fewer bits than this "
                                                             "one (fp8 denies int4, fp4, mxfp4, nvfp4, fp6)")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="remove the model's floor: every quantization routed")]
    = False,
    actor: ActorOpt = None,
    timeout: TimeoutOpt = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """Keep MODEL off some quantizations: the router publishes the rest as the ``quantizations`` allow-list.

    Give one of --deny, --min or --clear.  The chat backends' client sends the
    list as ``provider.quantizations`` with the ignore list.  An allow-list drops
    every endpoint that declares no quantization: the answer counts and names
    them, with every usable host the list leaves out.  The capacity floor wins:
    when fewer than min_hosts usable hosts would be left, denied quantizations
    come back (most bits first), or no list is published, and the answer says so.
    """
    from reverie_canary.shared.contract import quantization as quant
    from reverie_canary.shared.contract.commands import SetQuantizationFloor

    if sum(x is not None and x is not False for x in (deny, minimum, clear or None)) != 1:
        typer.echo("error: give one of --deny, --min or --clear", err=True)
        raise typer.Exit(2)
    denied: list[str] = []
    if deny is not None:
        denied = [q.strip().lower() for q in deny.split(",") if q.strip()]
        if not denied:
            typer.echo("error: --deny names no quantization (use --clear to remove a floor)", err=True)
            raise typer.Exit(2)
    elif minimum is not None:
        try:
            denied = quant.below(minimum.strip().lower())
        except ValueError as exc:
            typer.echo(f"error: --min: {exc}", err=True)
            raise typer.Exit(2) from exc
        if not denied:
            typer.echo(f"error: --min {minimum} denies nothing (no quantization has fewer bits); use --clear",
                       err=True)
            raise typer.Exit(2)
    problem = quant.deny_problem(denied) if denied else None
    if problem is not None:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    settings = _settings(config)
    command = _validated(SetQuantizationFloor, **_command_fields(actor), model=model, deny=denied, reason=reason)
    seq, answer = _run(_send(settings, command, timeout), settings)
    what = f"denies {', '.join(denied)}" if denied else "cleared"
    _refused_or_late(command, seq, answer, timeout)
    typer.echo(f"quantization floor on {model} {what}: {reason} ({command.actor})")
    if answer.detail:
        typer.echo(f"  {answer.detail}")
    for made in answer.snapshots:
        allow = ", ".join(made.quantizations) if made.quantizations else "none (every quantization routed)"
        typer.echo(f"  snapshot v{made.version}: quantizations {allow}; {_ignored(made)}")
    for kept in answer.unchanged:  # the same floor again: the allow-list in force did not change
        typer.echo(f"  snapshot v{kept.version} unchanged")
    _warnings(answer)


# -- exclusions check | reload ---------------------------------------------------------------------


@exclusions_app.command("check")
def exclusions_check(
    file: Annotated[Path, typer.Argument(help="a reviewed-exclusions TOML file")],
) -> None:
    """Validate a reviewed-exclusions file offline: print each entry, or the error naming the line (exit 1)."""
    from reverie_canary.services.router.core import parse_exclusions

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        typer.echo(f"error: cannot read {file}: {exc}", err=True)
        raise typer.Exit(1) from exc
    try:
        entries = parse_exclusions(text, str(file))
    except ConfigError as exc:
        typer.echo(f"error: {scrub(str(exc))}", err=True)
        raise typer.Exit(1) from exc
    for e in entries:
        typer.echo(exclusion_line(e))
    typer.echo(f"{file}: {len(entries)} exclusion(s), valid")


@exclusions_app.command("reload")
def exclusions_reload(
    reason: Annotated[str, typer.Option("--reason", help="why")] = "",
    force: ForceOpt = False,
    actor: ActorOpt = None,
    timeout: TimeoutOpt = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """Ask the router to read its exclusions file again (an invalid file is refused; the old one stays).

    A file that would leave fewer than min_hosts usable hosts is refused too, unless --force.
    """
    from reverie_canary.shared.contract.commands import ReloadExclusions

    settings = _settings(config)
    command = _validated(ReloadExclusions, **_command_fields(actor), reason=reason, force=force)
    seq, answer = _run(_send(settings, command, timeout), settings)
    _report(command, seq, answer, f"exclusions reloaded ({command.actor})", timeout)
