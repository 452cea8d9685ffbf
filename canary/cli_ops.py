"""Operator commands: ``canary override|lift|mode|exclusions``.

Each command is published on ``canary.ops.<verb>`` through JetStream with
``Nats-Msg-Id`` = its ``command_id`` (a fresh uuid4), so a retried publish is
stored once (DESIGN.md, "The router: three layers into provider.ignore").
The credential is the settings' one (``NATS_USER`` / ``NATS_PASSWORD``):
operators use the ``operator`` user, the only one allowed to publish there
(``shared/nats/server.conf``).  The actor is ``$CANARY_ACTOR``, else the login
name.

After publishing, ``override add``, ``override remove`` and ``exclusions
reload`` wait (``--timeout``, 10 s) until the router has taken the command:

- the router's durable consumer acknowledged the command's log position (it
  acknowledges after writing the new snapshot), or, when that cannot be read,
  the model's snapshot version in the KV bucket moved past the one read before
  publishing: print what changed and the new version, exit 0;
- a dead letter naming the command id appeared on
  ``canary.deadletter.router``: print the router's reason, exit 1;
- neither in time: say so, exit 1.

``lift`` waits the same way for the judge's ``end`` decision (reason
``lifted``); ``mode`` prints the published command.  ``override list`` reads
the current snapshots; ``exclusions check`` validates a file offline.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from reverie_canary.canary.cli import ConfigOpt, _settings, app
from reverie_canary.shared.errors import ConfigError

override_app = typer.Typer(no_args_is_help=True, help="Runtime incident overrides (layer 2 of the ignore list).")
exclusions_app = typer.Typer(no_args_is_help=True, help="The reviewed exclusions file (layer 1 of the ignore list).")
app.add_typer(override_app, name="override")
app.add_typer(exclusions_app, name="exclusions")

#: How long the waiting commands wait for the router or the judge (seconds).
WAIT_S = 10.0
#: Time between two looks at the router's progress (seconds).
POLL_S = 0.1

TimeoutOpt = Annotated[float, typer.Option("--timeout", help="seconds to wait for the router or the judge")]
ActorOpt = Annotated[Optional[str],
                     typer.Option("--actor", help="who asks (default: $CANARY_ACTOR, else the login name)")]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


# -- pure helpers (no I/O) ---------------------------------------------------------------


def parse_duration(text: str) -> timedelta:
    """Parse a duration such as ``90s``, ``30m``, ``2h``, ``1d`` or ``1h30m``.

    Returns:
        A positive timedelta.

    Raises:
        ValueError: when the text is not such a duration or is zero.
    """
    compact = text.strip().lower().replace(" ", "")
    parts = _DURATION.findall(compact)
    if not compact or "".join(f"{n}{u}" for n, u in parts) != compact:
        raise ValueError(f"not a duration: {text!r} (examples: 90s, 30m, 2h, 1d, 1h30m)")
    seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    return timedelta(seconds=seconds)


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


def fmt_time(at: datetime | None) -> str:
    """``2026-06-11T18:00:00Z`` (UTC, to the second), or ``never``."""
    return "never" if at is None else at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quoted(items: list[str]) -> str:
    return "[" + ", ".join(f'"{p}"' for p in items) + "]"


def fmt_ignore(snapshot, now: datetime) -> str:
    """``ignore ["a/fp8", "b"]``: the providers a snapshot ignores at ``now`` (UTC)."""
    return "ignore " + _quoted(snapshot.ignore_at(now) if snapshot is not None else [])


def snapshot_lines(model: str, snapshot, now: datetime) -> list[str]:
    """Lines describing one model's snapshot: each entry with its layers, reasons, actor and expiry."""
    if snapshot is None:
        return [f"{model}: no snapshot yet"]
    live = snapshot.ignore_at(now)
    lines = [f"{model}: snapshot v{snapshot.version} at {fmt_time(snapshot.at)}, "
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
                bits.append(f"since {fmt_time(r.since)}")
            expired = r.until is not None and r.until <= now
            bits.append(f"until {fmt_time(r.until)}" + (" (expired)" if expired else ""))
            if r.reference:
                bits.append(f"ref {r.reference}")
            lines.append("  ".join(bits))
    return lines


def exclusion_line(e) -> str:
    """One reviewed exclusion, for ``canary exclusions check``."""
    until = f", expires {fmt_time(e.until)}" if e.until else ""
    scope = "every model (*)" if e.model == "*" else e.model
    return f"line {e.line}: {e.provider} on {scope}: {e.reason} ({e.reference}); reviewed {fmt_time(e.since)}{until}"


def _scope(model: str) -> str:
    return "every model (*)" if model == "*" else model


# -- talking to the bus ----------------------------------------------------------------------


@dataclass
class Answer:
    """What came back for one command: its log position, and the outcome."""

    seq: int
    status: str  # "applied" | "unchanged" | "refused" | "timeout"
    detail: str = ""
    snapshots: dict[str, Any] | None = None
    before: dict[str, int] | None = None


class Bus:
    """A short-lived connection for one operator command (the settings' credential)."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.nc: Any = None
        self.js: Any = None
        self._kv: Any = None

    async def __aenter__(self) -> Bus:
        from reverie_canary.shared.service import nats_connect

        async def quiet(_exc: Exception) -> None:
            return None

        try:
            self.nc = await nats_connect(self.settings, allow_reconnect=False, error_cb=quiet)
        except Exception as exc:  # NoServersError, OSError, authorization
            raise OpsError(f"cannot connect to NATS at {self.settings.nats_url} as "
                           f"{self.settings.nats_user or '(no user)'}: {exc!r}") from exc
        self.js = self.nc.jetstream(timeout=5.0)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.nc is not None:
            try:
                await self.nc.close()
            except Exception:
                pass

    async def kv(self):
        """The ``canary-routing`` bucket."""
        from nats.js.errors import BucketNotFoundError, NotFoundError

        from reverie_canary.shared.streams import ROUTING_BUCKET

        if self._kv is None:
            try:
                self._kv = await self.js.key_value(ROUTING_BUCKET)
            except (BucketNotFoundError, NotFoundError) as exc:
                raise OpsError(f"no KV bucket {ROUTING_BUCKET} (run canary init)") from exc
        return self._kv

    async def snapshot(self, model: str):
        """The current IgnoreSnapshot of ``model`` (``None`` when there is none)."""
        from nats.js.errors import KeyNotFoundError

        from reverie_canary.shared import codec, subjects

        kv = await self.kv()
        try:
            entry = await kv.get(subjects.kv_key(model))
        except KeyNotFoundError:
            return None
        return codec.SNAPSHOT.decode(entry.value) if entry.value else None

    async def models(self) -> list[str]:
        """Model ids that have a snapshot in the bucket."""
        from nats.js.errors import NoKeysError

        from reverie_canary.shared.subjects import SubjectError, decode_token

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

    async def versions(self, models: list[str]) -> dict[str, int]:
        """Model -> current snapshot version (0: none)."""
        out = {}
        for m in models:
            s = await self.snapshot(m)
            out[m] = s.version if s is not None else 0
        return out

    async def last_seq(self, stream: str) -> int:
        """Last sequence of ``stream`` (0 when empty)."""
        info = await self.js.stream_info(stream)
        return info.state.last_seq or 0

    async def publish(self, command) -> int:
        """Publish ``command`` on ``canary.ops.<verb>`` with ``Nats-Msg-Id`` = its id.

        Returns:
            The command's sequence in the log stream.

        Raises:
            OpsError: not stored (no permission: wrong credential; or NATS down).
        """
        from reverie_canary.shared import codec, subjects
        from reverie_canary.shared.commands import VERBS
        from reverie_canary.shared.streams import LOG

        subject = subjects.ops(VERBS[type(command)])
        try:
            ack = await self.js.publish(subject, codec.encode(command), stream=LOG, timeout=5.0,
                                        headers={"Nats-Msg-Id": command.command_id})
        except Exception as exc:
            raise OpsError(f"the command was not stored on {subject}: {exc!r} "
                           f"(only the operator credential may publish there; NATS_USER is "
                           f"{self.settings.nats_user or 'unset'})") from exc
        return ack.seq

    async def dead_letters(self, service: str, after: int, command_id: str) -> tuple[int, str | None]:
        """Scan ``canary.deadletter.<service>`` past sequence ``after`` for ``command_id``.

        Returns:
            ``(last sequence scanned, the dead letter's reason or None)``.
        """
        from nats.js.errors import NotFoundError

        from reverie_canary.shared import codec, subjects
        from reverie_canary.shared.errors import Undecodable
        from reverie_canary.shared.streams import DEADLETTER

        last = await self.last_seq(DEADLETTER)
        subject = subjects.deadletter(service)
        for seq in range(after + 1, last + 1):
            try:
                msg = await self.js.get_msg(DEADLETTER, seq)
            except NotFoundError:
                continue
            if msg.subject != subject or not msg.data:
                continue
            try:
                letter = codec.DEAD_LETTER.decode(msg.data)
            except Undecodable:
                continue
            if command_id in letter.payload:
                return last, f"{letter.reason}: {letter.error}"
        return max(after, last), None

    async def acked(self, durable: str, seq: int) -> bool | None:
        """Whether the durable consumer ``durable`` of the log acknowledged position ``seq``.

        Returns:
            ``None`` when the consumer's state cannot be read.
        """
        from reverie_canary.shared.streams import LOG

        try:
            info = await self.js.consumer_info(LOG, durable)
        except Exception:
            return None
        floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
        return (floor or 0) >= seq


class OpsError(Exception):
    """An operator command could not be carried out; the message says why."""


async def _send_to_router(settings, command, models: list[str] | None, timeout_s: float) -> Answer:
    """Publish a router command and wait for its outcome (see the module docstring).

    Args:
        models: the models whose snapshots the command may change; ``None``:
            every model with a snapshot plus the configured ones.
    """
    from reverie_canary.shared.streams import DEADLETTER, router_consumer

    durable = router_consumer(settings).durable
    async with Bus(settings) as bus:
        targets = models if models is not None else sorted(set(await bus.models()) | set(settings.models))
        before = await bus.versions(targets)
        dl_seen = await bus.last_seq(DEADLETTER)
        seq = await bus.publish(command)
        deadline = time.monotonic() + timeout_s
        while True:
            dl_seen, refused = await bus.dead_letters("router", dl_seen, command.command_id)
            if refused:
                return Answer(seq, "refused", refused)
            processed = await bus.acked(durable, seq)
            now_versions = await bus.versions(targets)
            moved = [m for m in targets if now_versions[m] > before[m]]
            if processed or (processed is None and moved):
                if processed:  # dead-lettered before the ack: look once more
                    dl_seen, refused = await bus.dead_letters("router", dl_seen, command.command_id)
                    if refused:
                        return Answer(seq, "refused", refused)
                snaps = {m: await bus.snapshot(m) for m in moved}
                return Answer(seq, "applied" if moved else "unchanged", snapshots=snaps, before=before)
            if time.monotonic() >= deadline:
                return Answer(seq, "timeout", before=before)
            await asyncio.sleep(POLL_S)


def _report(answer: Answer, headline: str, timeout_s: float, command_id: str) -> None:
    """Print a router command's outcome; exit 1 unless it was applied or changed nothing."""
    now = datetime.now(timezone.utc)
    if answer.status == "refused":
        typer.echo(f"error: the router refused command {command_id} (log #{answer.seq}): {answer.detail}", err=True)
        raise typer.Exit(1)
    if answer.status == "timeout":
        typer.echo(f"error: no answer from the router within {timeout_s:g} s; command {command_id} is in the "
                   f"log at #{answer.seq} and will be applied when the router runs", err=True)
        raise typer.Exit(1)
    snaps = answer.snapshots or {}
    if not snaps:
        versions = ", ".join(f"{m} v{v}" for m, v in sorted((answer.before or {}).items())) or "none"
        typer.echo(f"{headline} — no snapshot changed (current: {versions})")
        return
    if len(snaps) == 1:
        (model, snap), = snaps.items()
        typer.echo(f"{headline} — snapshot v{snap.version}: {fmt_ignore(snap, now)}"
                   + ("" if f" on {model}" in headline else f" ({model})"))
        return
    typer.echo(headline)
    for model, snap in sorted(snaps.items()):
        typer.echo(f"  {model}: snapshot v{snap.version}: {fmt_ignore(snap, now)}")


def _run(coro, settings=None):
    """Run ``coro``; turn an :class:`OpsError` or a NATS failure into ``error: ...`` and exit status 1."""
    import nats.errors

    try:
        return asyncio.run(coro)
    except OpsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    except (nats.errors.Error, asyncio.TimeoutError) as exc:
        user = (settings.nats_user if settings is not None else "") or "unset"
        typer.echo(f"error: a NATS request failed: {exc!r} (a permission the credential lacks? "
                   f"operators use the operator user; NATS_USER is {user})", err=True)
        raise typer.Exit(1) from exc


def _command_fields(actor: str | None) -> dict[str, Any]:
    return {"command_id": str(uuid.uuid4()), "actor": actor or default_actor(),
            "at": datetime.now(timezone.utc)}


def _validated(cls, **fields):
    """Build a command Struct through the strict decoder, so that the CLI refuses what the router would."""
    import msgspec

    try:
        return msgspec.convert(fields, cls)
    except msgspec.ValidationError as exc:
        typer.echo(f"error: invalid command: {_plain(str(exc))}", err=True)
        raise typer.Exit(2) from exc


#: What the wire's constraints mean, in the words of the command line.
_PLAIN = {
    "$.reason": "--reason must say why (not empty, not only spaces)",
    "$.provider": "the provider must be one endpoint tag without spaces (e.g. deepinfra/fp8)",
    "$.actor": "the actor must be one word without spaces (--actor or $CANARY_ACTOR)",
    "$.model": "--model must be one model id without spaces, or *",
}


def _plain(message: str) -> str:
    """msgspec's ``Expected ... - at $.field`` as the option it concerns (keeps the original too)."""
    field = message.rpartition(" - at ")[2].strip("`")
    hint = _PLAIN.get(field)
    return f"{hint} [{message}]" if hint else message


# -- override add | remove | list --------------------------------------------------------------


@override_app.command("add")
def override_add(
    provider: Annotated[str, typer.Argument(help="provider (endpoint tag such as lambda/fp8, or base slug)")],
    reason: Annotated[str, typer.Option("--reason", help="why (an incident, a ticket); required")],
    model: Annotated[str, typer.Option("--model", help="model id, or * for every model")] = "*",
    expires: Annotated[Optional[str],
                       typer.Option("--expires", help="end, ISO 8601 UTC (2026-06-11T18:00:00Z)")] = None,
    for_: Annotated[Optional[str], typer.Option("--for", help="end after this long (30m, 2h, 1d)")] = None,
    reference: Annotated[str, typer.Option("--reference", help="URL or ticket")] = "",
    actor: ActorOpt = None,
    timeout: TimeoutOpt = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """Ignore PROVIDER now (for one model or every model), until removed or until it expires."""
    from reverie_canary.shared.commands import AddOverride

    if expires and for_:
        typer.echo("error: give --expires or --for, not both", err=True)
        raise typer.Exit(2)
    fields = _command_fields(actor)
    expires_at = None
    try:
        if expires:
            expires_at = parse_when(expires)
        elif for_:
            expires_at = fields["at"] + parse_duration(for_)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if expires_at is not None and expires_at <= fields["at"]:
        typer.echo(f"error: --expires {fmt_time(expires_at)} is not in the future", err=True)
        raise typer.Exit(2)
    settings = _settings(config)
    command = _validated(AddOverride, **fields, provider=provider, model=model, reason=reason,
                         expires_at=expires_at, reference=reference)
    answer = _run(_send_to_router(settings, command, None if model == "*" else [model], timeout), settings)
    until = f" until {fmt_time(expires_at)}" if expires_at else ""
    _report(answer, f"override added: {provider} on {_scope(model)}: {reason} ({command.actor}){until}",
            timeout, command.command_id)


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
    from reverie_canary.shared.commands import RemoveOverride

    settings = _settings(config)
    command = _validated(RemoveOverride, **_command_fields(actor), provider=provider, model=model, reason=reason)
    answer = _run(_send_to_router(settings, command, None if model == "*" else [model], timeout), settings)
    why = f": {reason}" if reason else ""
    _report(answer, f"override removed: {provider} on {_scope(model)}{why} ({command.actor})", timeout,
            command.command_id)


@override_app.command("list")
def override_list(
    model: Annotated[Optional[str],
                     typer.Option("--model", help="one model (default: every model with a snapshot)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Print the current ignore list(s): each entry with its layers, reasons, actor and expiry."""
    settings = _settings(config)

    async def main() -> list[str]:
        async with Bus(settings) as bus:
            models = [model] if model else (await bus.models() or list(settings.models))
            now = datetime.now(timezone.utc)
            lines: list[str] = []
            for m in models:
                lines += snapshot_lines(m, await bus.snapshot(m), now)
            return lines

    for line in _run(main(), settings):
        typer.echo(line)


# -- lift, mode ----------------------------------------------------------------------------------


@app.command()
def lift(
    provider: Annotated[str, typer.Argument(help="provider whose canary suspension ends")],
    reason: Annotated[str, typer.Option("--reason", help="why; required")],
    model: Annotated[Optional[str],
                     typer.Option("--model", help="model id or * (default: the first configured)")] = None,
    actor: ActorOpt = None,
    timeout: TimeoutOpt = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """End PROVIDER's canary suspension at once; wait for the judge's decision."""
    from reverie_canary.shared.commands import LiftSuspension

    settings = _settings(config)
    target = model or settings.models[0]
    command = _validated(LiftSuspension, **_command_fields(actor), provider=provider, model=target, reason=reason)
    status, detail, seq = _run(_lift_and_wait(settings, command, timeout), settings)
    typer.echo(f"lift published: {provider} on {_scope(target)}: {reason} ({command.actor}), "
               f"command {command.command_id} (log #{seq})")
    if status == "lifted":
        typer.echo(detail)
        return
    if status == "refused":
        typer.echo(f"error: the judge refused command {command.command_id} (log #{seq}): {detail}", err=True)
    elif status == "nothing":
        typer.echo(f"error: the judge applied the command (log #{seq}) but lifted nothing: "
                   f"{provider} is not suspended on {_scope(target)}", err=True)
    else:
        typer.echo(f"error: no decision from the judge within {timeout:g} s; command {command.command_id} is in "
                   f"the log at #{seq} and will be applied when the judge runs", err=True)
    raise typer.Exit(1)


async def _lift_and_wait(settings, command, timeout_s: float) -> tuple[str, str, int]:
    from nats.js.api import ConsumerConfig, DeliverPolicy

    from reverie_canary.shared import codec, subjects
    from reverie_canary.shared.errors import Undecodable
    from reverie_canary.shared.streams import DEADLETTER, LOG, judge_consumer

    durable = judge_consumer(settings).durable
    model_token = "*" if command.model == "*" else subjects.encode_token(command.model)
    filter_subject = f"{subjects.PREFIX}.decisions.{model_token}.{subjects.encode_token(command.provider)}"
    async with Bus(settings) as bus:
        dl_seen = await bus.last_seq(DEADLETTER)
        seq = await bus.publish(command)
        sub = await bus.js.subscribe(filter_subject, stream=LOG, ordered_consumer=True,
                                     deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                     config=ConsumerConfig(opt_start_seq=seq))
        deadline = time.monotonic() + timeout_s
        processed_at: float | None = None
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=POLL_S)
                except Exception:  # nats TimeoutError: nothing yet
                    msg = None
                if msg is not None:
                    try:
                        d = codec.DECISION.decode(msg.data)
                    except Undecodable:
                        d = None
                    if (d is not None and d.reason == "lifted" and d.provider == command.provider
                            and d.decision_id.endswith(f"|{command.command_id}")):
                        verb = "lifted" if d.action == "end" else "would be lifted (observe mode)"
                        return ("lifted", f"suspension {verb}: {d.provider} on {d.model} — decision {d.action} "
                                f"at {fmt_time(d.at)}: {d.detail}", seq)
                    continue
                dl_seen, refused = await bus.dead_letters("judge", dl_seen, command.command_id)
                if refused:
                    return "refused", refused, seq
                if processed_at is None and await bus.acked(durable, seq):
                    processed_at = time.monotonic()  # decisions are published before the ack
                if processed_at is not None and time.monotonic() - processed_at > 1.0:
                    return "nothing", "", seq
                if time.monotonic() >= deadline:
                    return "timeout", "", seq
        finally:
            try:
                await sub.unsubscribe()
            except Exception:
                pass


@app.command()
def mode(
    new_mode: Annotated[str, typer.Argument(metavar="observe|enforce",
                                            help="observe: announce only; enforce: change routing")],
    kind: Annotated[Optional[str],
                    typer.Option("--kind", help="one probe kind (ttft, refusal, structured, language, echo)")] = None,
    model: Annotated[str, typer.Option("--model", help="model id, or * for every model")] = "*",
    reason: Annotated[str, typer.Option("--reason", help="why")] = "",
    actor: ActorOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Switch the judge to observe or enforce, for one probe kind or all."""
    from reverie_canary.shared.commands import SetMode
    from reverie_canary.shared.events import PROBE_KINDS

    if new_mode not in ("observe", "enforce"):
        typer.echo(f"error: mode must be observe or enforce, not {new_mode!r}", err=True)
        raise typer.Exit(2)
    if kind is not None and kind not in PROBE_KINDS:
        typer.echo(f"error: unknown probe kind {kind!r}; one of {', '.join(PROBE_KINDS)}", err=True)
        raise typer.Exit(2)
    settings = _settings(config)
    command = _validated(SetMode, **_command_fields(actor), mode=new_mode, model=model, kind=kind, reason=reason)

    async def main() -> int:
        async with Bus(settings) as bus:
            return await bus.publish(command)

    seq = _run(main(), settings)
    scope = f"probe kind {kind}" if kind else "all probe kinds"
    why = f": {reason}" if reason else ""
    typer.echo(f"mode published: {new_mode} for {scope} on {_scope(model)}{why} ({command.actor}), "
               f"command {command.command_id}, log #{seq}")


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
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    for e in entries:
        typer.echo(exclusion_line(e))
    typer.echo(f"{file}: {len(entries)} exclusion(s), valid")


@exclusions_app.command("reload")
def exclusions_reload(
    reason: Annotated[str, typer.Option("--reason", help="why")] = "",
    actor: ActorOpt = None,
    timeout: TimeoutOpt = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """Ask the router to read its exclusions file again (an invalid file is refused; the old one stays)."""
    from reverie_canary.shared.commands import ReloadExclusions

    settings = _settings(config)
    command = _validated(ReloadExclusions, **_command_fields(actor), reason=reason)
    answer = _run(_send_to_router(settings, command, None, timeout), settings)
    _report(answer, f"exclusions reloaded ({command.actor})", timeout, command.command_id)
