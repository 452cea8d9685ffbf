"""``canary notices list|resend``: what the notifier could not deliver, what it is retrying, what it delivered.

``list`` reads the notifier's delivery book (Redis, ``REDIS_URL``): dead
letters (the error, the attempts), pending deliveries (attempts so far, next
attempt) and the latest deliveries, per channel.  Channels appear by name,
kind and minimum severity; their URLs and secrets are never printed.

``resend`` publishes a ``ResendNotices`` on ``canary.notices.resend`` (the
operator credential) and waits for the notifier's ``NoticesResent`` answer:
the dead letters it queued again go through the notifier, so they are signed
and reach each channel once.  Exit status 0 when something was queued again,
1 when nothing matched or no answer came within ``--timeout``, 2 when the
notifier refused it (a ``--channel`` it does not know: the answer names the
known ones).
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timezone
from typing import Annotated, Any

import typer

from reverie_canary.canary.cli import ConfigOpt, _settings, app
from reverie_canary.canary.cli_ops import WAIT_S, ActorOpt, Bus, OpsError, _command_fields, _run, _validated
from reverie_canary.canary.help import CanaryGroup
from reverie_canary.shared.contract.timefmt import utc_text
from reverie_canary.shared.runtime.retry import NATS_FAULTS

notices_app = typer.Typer(cls=CanaryGroup, no_args_is_help=True,
                          help="Notices: dead letters, pending and recent deliveries (list); resend dead letters.")
app.add_typer(notices_app, name="notices")


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return utc_text(datetime.fromtimestamp(epoch, timezone.utc))


def _row(entry, notice, mask, namespace: str) -> dict[str, Any]:
    from reverie_canary.services.notifier.core import webhook_id

    return {
        "ref": webhook_id(namespace, entry.notice_id),
        "notice_id": entry.notice_id,
        "channel": entry.channel,
        "status": entry.status,
        "attempts": entry.attempts,
        "resends": entry.generation,
        "first_attempt_at": _iso(entry.first_at),
        "last_attempt_at": _iso(entry.last_at),
        "next_attempt_at": _iso(entry.due_at) if entry.status == "pending" else None,
        "delivered_at": _iso(entry.delivered_at),
        "dead_at": _iso(entry.dead_at),
        "error": mask(entry.last_error) or None,
        "severity": notice.severity if notice else None,
        "action": notice.action if notice else None,
        "phase": notice.phase if notice else None,
        "model": notice.model if notice else None,
        "provider": (notice.provider or None) if notice else None,
        "title": mask(notice.title) if notice else None,
    }


async def read_book(settings, channel: str | None, limit: int) -> dict[str, Any]:
    """The delivery book as plain data: configured channels, dead letters, pending, recent deliveries."""
    from reverie_canary.services.notifier.channels import channel_specs, mask_all
    from reverie_canary.services.notifier.store import RedisDeliveryBook
    from reverie_canary.shared.contract.errors import ConfigError
    from reverie_canary.shared.runtime.service import redis_client

    try:
        specs = channel_specs(settings)
        configured: Any = [{"name": c.name, "kind": c.kind, "min_severity": c.min_severity} for c in specs]
    except ConfigError as exc:
        specs, configured = [], f"not readable from these settings: {exc}"

    def mask(text: str) -> str:
        return mask_all(specs, text or "")

    client = redis_client(settings)
    try:
        book = RedisDeliveryBook(client, settings.namespace, keep_s=settings.log_max_age_s)
        sections: dict[str, Any] = {"channels": configured, "channels_with_deliveries": await book.channels()}
        for name, entries in (("dead", await book.entries("dead", channel, limit)),
                              ("pending", await book.entries("pending", channel, limit)),
                              ("recent", [e for e in await book.recent(200) if channel is None
                                          or e.channel == channel][:limit])):
            sections[name] = [_row(e, await book.notice(e.notice_id), mask, settings.namespace) for e in entries]
        return sections
    finally:
        await client.aclose()


def _print_tables(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from reverie_canary.shared.runtime.printable import printable

    console = Console(width=200)
    channels = data["channels"]
    if isinstance(channels, str):
        console.print(f"channels: {channels}")
    elif channels:
        console.print("channels: " + ", ".join(f"{c['name']} ({c['kind']}, >= {c['min_severity']})" for c in channels))
    else:
        console.print("channels: none configured here (CANARY_NOTIFY_URLS / CANARY_WEBHOOK_URL)")
    columns = {
        "dead": ("dead letters (canary notices resend REF|--all)",
                 ["ref", "channel", "severity", "action", "provider", "attempts", "dead_at", "error"]),
        "pending": ("being retried", ["ref", "channel", "severity", "action", "provider", "attempts",
                                      "next_attempt_at", "error"]),
        "recent": ("recent deliveries", ["ref", "channel", "severity", "action", "provider", "attempts",
                                         "delivered_at"]),
    }
    for key, (title, cols) in columns.items():
        rows = data[key]
        table = Table(title=f"{title}: {len(rows)}", title_justify="left")
        for col in cols:
            table.add_column(col, overflow="fold")
        for row in rows:
            # a receiver's error text and a notice's fields come from outside: no control character, no markup
            table.add_row(*["" if row[c] is None else escape(printable(str(row[c]))) for c in cols])
        console.print(table)


@notices_app.command("list")
def notices_list(
    channel: Annotated[str | None, typer.Option("--channel", help="one channel only")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="rows per section")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object on stdout")] = False,
    config: ConfigOpt = None,
) -> None:
    """Show dead-lettered notices (with their error), notices being retried, and recent deliveries."""
    from redis.exceptions import RedisError

    from reverie_canary.shared.contract.errors import Transient

    settings = _settings(config)
    try:
        data = asyncio.run(read_book(settings, channel, limit))
    except (Transient, RedisError, OSError) as exc:
        typer.echo(f"error: cannot read the notifier's delivery book in Redis: {exc}", err=True)
        raise typer.Exit(1) from exc
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        _print_tables(data)


async def _resend_and_wait(settings, command, timeout_s: float):
    from nats.js.api import ConsumerConfig, DeliverPolicy

    from reverie_canary.shared.contract import codec, subjects
    from reverie_canary.shared.contract.errors import Undecodable
    from reverie_canary.shared.runtime.streams import NOTICES

    async with Bus(settings) as bus:
        try:
            ack = await bus.js.publish(subjects.NOTICES_RESEND, codec.encode(command), stream=NOTICES, timeout=5.0,
                                       headers={"Nats-Msg-Id": command.command_id})
        except NATS_FAULTS as exc:
            raise OpsError(f"the resend request was not stored on {subjects.NOTICES_RESEND}: {exc!r} (only the "
                           f"operator credential may publish there; NATS_USER is "
                           f"{settings.nats_user or 'unset'})") from exc
        sub = await bus.js.subscribe(subjects.NOTICES_RESENT, stream=NOTICES, ordered_consumer=True,
                                     deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                     config=ConsumerConfig(opt_start_seq=ack.seq))
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                try:
                    msg = await sub.next_msg(timeout=min(0.5, max(0.05, deadline - time.monotonic())))
                except NATS_FAULTS:  # nats TimeoutError: nothing yet
                    continue
                try:
                    answer = codec.RESENT.decode(msg.data)
                except Undecodable:
                    continue
                if answer.command_id == command.command_id:
                    return ack.seq, answer
            return ack.seq, None
        finally:
            try:
                await sub.unsubscribe()
            except NATS_FAULTS:  # the connection went meanwhile: the subscription went with it
                pass


@notices_app.command("resend")
def notices_resend(
    ids: Annotated[list[str] | None, typer.Argument(help="notice ids or refs (msg_...) from `canary notices list`")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every dead letter (of --channel, if given)")] = False,
    channel: Annotated[str | None, typer.Option("--channel", help="one channel only")] = None,
    reason: Annotated[str, typer.Option("--reason", help="why")] = "",
    actor: ActorOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for the notifier's answer")] = WAIT_S,
    config: ConfigOpt = None,
) -> None:
    """Deliver dead-lettered notices again, through the notifier (signed, once per channel)."""
    from reverie_canary.shared.contract.commands import ResendNotices

    if not ids and not all_:
        typer.echo("error: name the notices to resend (refs or notice ids from `canary notices list`) or --all",
                   err=True)
        raise typer.Exit(2)
    settings = _settings(config)
    command = _validated(ResendNotices, **_command_fields(actor), notice_ids=list(ids or []), all=all_,
                         channel=channel, reason=reason)
    seq, answer = _run(_resend_and_wait(settings, command, timeout), settings)
    if answer is None:
        typer.echo(f"error: no answer from the notifier within {timeout:g} s; request {command.command_id} is stored "
                   f"(#{seq}) and will be applied when the notifier runs", err=True)
        raise typer.Exit(1)
    if answer.refused:
        typer.echo(f"error: the notifier refused the request: {answer.refused}", err=True)
        raise typer.Exit(2)
    for ref in answer.requeued:
        typer.echo(f"queued again: {ref.notice_id} on {ref.channel}")
    for ref in answer.skipped:
        typer.echo(f"not resent: {ref.notice_id} on {ref.channel}: {ref.why}")
    typer.echo(f"{len(answer.requeued)} notice(s) queued again, {len(answer.skipped)} skipped "
               f"(request {command.command_id})")
    if not answer.requeued:
        raise typer.Exit(1)
