"""``canary replay``, ``canary explain``, ``canary report``: the judge's audits."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from reverie_canary.canary.cli import ConfigOpt, _settings, app, watched_model
from reverie_canary.shared.contract.errors import CanaryError, ConfigError
from reverie_canary.shared.contract.events import TimedDecision
from reverie_canary.shared.contract.timefmt import utc_text
from reverie_canary.shared.runtime.retry import NATS_FAULTS
from reverie_canary.shared.runtime.settings import Settings


def _decision_line(seq: int | None, d) -> str:
    """One decision of the timeline, with the mode it was made in (``[enforce]`` / ``[observe]``), printable."""
    from reverie_canary.shared.runtime.printable import printable_view

    d = printable_view(d)
    until = f" until {utc_text(d.until)}" if isinstance(d, TimedDecision) else ""
    where = f"#{seq} " if seq is not None else ""
    who = d.provider or "(model)"
    kind = f" ({d.kind})" if d.kind else ""
    return (f"{where}{utc_text(d.at)}  {d.action:<14} [{d.mode}] {d.model}  {who}{kind}{until}  "
            f"{d.reason}: {d.detail}")


@app.command()
def replay(
    events: Annotated[Path | None, typer.Option("--events", help="fold this JSON-lines file offline instead of the log")] = None,
    since: Annotated[str | None, typer.Option(help="show the decisions from this UTC time (ISO 8601) on; "
                                                     "the fold always starts at the beginning")] = None,
    other: Annotated[Path | None, typer.Option("--config", help="backtest: another configuration, this settings "
                                                                 "TOML alone on top of the defaults (the "
                                                                 "environment is not read for it)")] = None,
) -> None:
    """Fold the event log again: the decision timeline and any difference from the live Redis state.

    With ``--config OTHER`` it also backtests two fully stated configurations:
    "current" is what the services run with (defaults, the ``CANARY_CONFIG``
    file, the environment; each value's source is named), "other" is OTHER
    alone on top of the defaults, never the caller's environment.  Both are
    validated as a service validates its settings at start; every setting that
    differs is named.

    Exit status 1 when the live state differs from the log; 2 when OTHER is invalid.
    """
    from reverie_canary.services.judge.core import Policy, fold
    from reverie_canary.services.judge.replay import (
        backtest,
        policy_sources,
        read_events_file,
        settings_differences,
        watched_in_file,
    )
    from reverie_canary.shared.contract.errors import Undecodable
    from reverie_canary.shared.contract.events import Decision
    from reverie_canary.shared.runtime.settings import sources

    settings = _settings()
    policy = Policy.from_settings(settings)
    start = _since(since)
    differences = None
    other_policy = None
    current = None
    if other is not None:
        try:
            other_settings = Settings.load(env={}, config_path=other)
            other_sources = sources(env={}, config_path=other)
        except ConfigError as exc:
            typer.echo(f"error: --config {other}: {exc}", err=True)
            raise typer.Exit(2) from exc
        differences = settings_differences(settings, sources(), other_settings, other_sources)
        current = policy_sources(settings, sources())
        other_policy = Policy.from_settings(other_settings)

    if events is not None:
        try:
            evs = read_events_file(events.read_text(encoding="utf-8").splitlines())
        except (OSError, UnicodeDecodeError, Undecodable) as exc:
            typer.echo(f"error: {events}: {exc}", err=True)
            raise typer.Exit(2) from exc
        # the models the judge watched: a command for "*" applies to each, one for another model is skipped
        seen = watched_in_file(evs, policy.models)
        policy = msgspec.structs.replace(policy, models=seen)
        if other_policy is not None:
            other_policy = msgspec.structs.replace(other_policy, models=seen)
            diff = backtest(evs, policy, other_policy, watched=seen)
            doc = {k: [msgspec.to_builtins(d) for d in v if start is None or d.at >= start] for k, v in diff.items()}
            doc["settings"] = [msgspec.to_builtins(d) for d in differences]
            doc["current"] = current  # every policy setting the current side folds with, and its source
            if not any(d.policy for d in differences):
                doc["note"] = _NO_POLICY_DIFFERENCE
            print(json.dumps(doc, indent=2))
            raise typer.Exit(0)
        states, effects = fold(evs, policy, watched=seen)
        print(json.dumps({
            "states": {m: msgspec.to_builtins(s) for m, s in states.items()},
            "decisions": [msgspec.to_builtins(e) for e in effects
                          if isinstance(e, Decision) and (start is None or e.at >= start)],
        }, indent=2, sort_keys=True))
        raise typer.Exit(0)

    raise typer.Exit(asyncio.run(_replay_live(settings, policy, other_policy, other, since, start, differences,
                                              current)))


#: What a backtest says when the two configurations share every policy setting.
_NO_POLICY_DIFFERENCE = ("no policy setting differs between the current configuration and the other one: "
                         "the backtest compares a policy with itself, so it finds no difference by construction")


def _print_differences(other: Path, differences, current: dict | None = None) -> None:
    print(f"\nbacktest: current = what the services run with (defaults, CANARY_CONFIG file, environment); "
          f"other = {other} alone on top of the defaults (the environment is not read for it)")
    if current:
        print("current policy settings, each with its source:")
        for name, item in current.items():
            print(f"  {name:<26} {item['value']!r} ({item['source']})")
    policy = [d for d in differences if d.policy]
    rest = [d for d in differences if not d.policy]
    if policy:
        print("policy settings that differ (the log is folded under each):")
    else:
        print(_NO_POLICY_DIFFERENCE)
    for d in policy:
        print(f"  {d.name:<26} current {d.current!r} ({d.current_source})  other {d.other!r} ({d.other_source})")
    if rest:
        print("other settings that differ (the backtest does not use them):")
        for d in rest:
            print(f"  {d.name:<26} current {d.current!r} ({d.current_source})  other {d.other!r} ({d.other_source})")


def _since(since: str | None) -> datetime | None:
    """``--since`` as a UTC datetime (:func:`reverie_canary.canary.cli_ops.parse_when`: no zone means UTC).

    Raises:
        typer.BadParameter: when it is not an ISO 8601 time.
    """
    from reverie_canary.canary.cli_ops import parse_when

    if since is None:
        return None
    try:
        return parse_when(since)
    except ValueError as exc:
        raise typer.BadParameter(f"--since: {exc}") from exc


async def _replay_live(settings, policy, other_policy, other: Path | None, since: str | None,
                       start: datetime | None, differences=None, current: dict | None = None) -> int:
    from reverie_canary.services.judge.replay import JUDGE_SUBJECTS, Refold, diff_states
    from reverie_canary.services.judge.store import RedisJudgeStore
    from reverie_canary.services.router.store import RedisRouterStore
    from reverie_canary.shared.contract.events import Decision
    from reverie_canary.shared.runtime import eventlog
    from reverie_canary.shared.runtime.service import nats_connect, redis_client

    client = redis_client(settings)
    store = RedisJudgeStore(client, settings.namespace)
    try:
        # live positions first, so the log prefix folded is the one the judge (and the router) had applied
        stored = await store.models()
        records = {m: await store.load(m) for m in stored}
        router_record = await RedisRouterStore(client, settings.namespace).load()
    finally:
        await client.aclose()
    # a command for "*" reaches every watched model and every model the judge has stored, as it did live
    policy = msgspec.structs.replace(policy, models=tuple(sorted(set(policy.models) | set(records))))
    positions = {m: r.position for m, r in records.items()}
    live = Refold(policy, positions=positions, keep=Decision)
    # the backtest folds the whole log under both configurations
    both = None if other_policy is None else (
        Refold(policy, keep=Decision), Refold(msgspec.structs.replace(other_policy, models=policy.models), keep=Decision))
    router_prefixes = _router_prefixes()
    router_items: list = []
    logged: list = []  # the decisions the judge published: what the stored state followed

    def on_event(item) -> None:
        if isinstance(item.event, Decision):
            logged.append(item.event)
        if item.subject.startswith(JUDGE_SUBJECTS):
            live.feed(item)
            if both is not None:
                both[0].feed(item)
                both[1].feed(item)
        if item.subject.startswith(router_prefixes):
            router_items.append(_lean_for_router(item))

    nc = await nats_connect(settings)
    try:
        # always from the beginning, as a stream: a fold that starts mid-log has no earlier state and
        # would invent decisions; --since only chooses which part of the timeline is shown
        await eventlog.scan_log(nc.jetstream(), on_event)
    finally:
        await nc.close()
    states, effects = live.states, live.effects
    shown = [(seq, e) for seq, e in effects if isinstance(e, Decision) and (start is None or e.at >= start)]
    print(f"{live.events} events folded from the log" + (f"; decisions since {since}:" if since else ":"))
    for seq, e in shown:
        print(_decision_line(seq, e))
    if both is not None:
        diff = decision_difference([e for _, e in both[0].effects], [e for _, e in both[1].effects])
        _print_differences(other, differences or [], current)
        print(f"{len(diff['only_current'])} decision(s) only with the current configuration, "
              f"{len(diff['only_other'])} only with the other one")
        for d in diff["only_current"]:
            print("  - " + _decision_line(None, d))
        for d in diff["only_other"]:
            print("  + " + _decision_line(None, d))
    # a log judged under another rule (an older version, other settings) made other decisions than this
    # version's refold: say where, and read the state differences that follow from them as that, not corruption
    ruled = decision_difference([e for _, e in effects if isinstance(e, Decision) and e.model in records],
                                [d for d in logged if d.model in records])
    by_rule = {d.model for d in ruled["only_current"] + ruled["only_other"]}
    if by_rule:
        print(f"\n{len(ruled['only_other'])} decision(s) on the log and {len(ruled['only_current'])} of this refold "
              "differ: the log was judged under another rule or other settings (an older version of the judge); "
              "the stored state follows the log's decisions")
        for d in ruled["only_other"]:
            print("  log:    " + _decision_line(None, d))
        for d in ruled["only_current"]:
            print("  refold: " + _decision_line(None, d))
    differences = 0
    for model in sorted(set(states) - set(records)):
        if not states[model].providers and not states[model].open_cycles:
            continue  # nothing the judge would have stored
        print(f"\nlive state of {model}: NONE in Redis, but the log holds its events (Redis lost or flushed, "
              "or the judge has not run yet); the judge rebuilds it from the log before its next message")
        differences += 1
    for model, record in sorted(records.items()):
        replayed = states.get(model)
        if replayed is None:
            print(f"\n{model}: stored state but no events in the log")
            differences += 1
            continue
        problems = diff_states(replayed, record.state)
        if problems and model in by_rule:
            status = (f"differs from this refold in {len(problems)} place(s), as the decisions above that "
                      "differ explain (judged under another rule): not a corrupt state")
        else:
            differences += len(problems)
            status = "agrees with the log" if not problems else f"DIFFERS in {len(problems)} place(s)"
        print(f"\nlive state of {model} (position #{record.position}) {status}")
        for line in problems[:50]:
            print("  " + line)
    differences += _replay_router(settings, router_items, router_record)
    return 1 if differences else 0


def decision_difference(current: list, other: list) -> dict[str, list]:
    """The decisions only one of two folds made (:func:`reverie_canary.services.judge.replay.backtest`'s comparison)."""
    from reverie_canary.services.judge.replay import decision_key

    ka = {decision_key(d) for d in current}
    kb = {decision_key(d) for d in other}
    return {"only_current": [d for d in current if decision_key(d) not in kb],
            "only_other": [d for d in other if decision_key(d) not in ka]}


def _router_prefixes() -> tuple[str, ...]:
    from reverie_canary.shared.contract import inputs

    return (*inputs.prefixes("router"), "canary.answers.router.")


def _lean_for_router(item):
    """``item`` as the router's refold needs it: a listing keeps only its controls' planned probes (a month of them is GBs)."""
    from reverie_canary.shared.contract.events import EndpointsDiscovered
    from reverie_canary.shared.runtime.eventlog import LoggedEvent

    event = item.event
    if isinstance(event, EndpointsDiscovered) and event.planned:
        event = msgspec.structs.replace(event, planned=[p for p in event.planned if p.control])
        return LoggedEvent(seq=item.seq, subject=item.subject, event=event)
    return item


def _replay_router(settings, everything, record) -> int:
    """Fold the router's inputs up to its position and compare the layers with its live record.

    Prints the router's part of ``canary replay``; returns the number of differences.
    """
    from reverie_canary.services.router.core import RouterCommand, RouterPolicy, diff_layers, layers, refold
    from reverie_canary.shared.contract.events import Decision
    from reverie_canary.shared.runtime import clock

    prefixes = _router_prefixes()
    mine = [item for item in everything if item.subject.startswith(prefixes)]
    now = clock.now()
    if record.revision == 0:
        if not any(isinstance(item.event, RouterCommand) or (isinstance(item.event, Decision)
                                                             and item.event.action in ("suspend", "end"))
                   for item in mine):
            return 0  # nothing the router would have stored
        print("\nrouter state: NONE in Redis, but the log holds its decisions or commands (Redis lost or flushed, "
              "or the router has not run yet); the router rebuilds it from the log before its next input")
        return 1
    applied = [item.event for item in mine if item.seq <= record.position]
    answers = [item.event for item in mine if item.seq > record.position and item.subject.startswith(prefixes[-1])]
    replayed = refold([*applied, *answers], RouterPolicy.from_settings(settings), now)
    problems = diff_layers(replayed, record.state, now)
    live = layers(record.state, now)
    status = "agrees with the log" if not problems else f"DIFFERS in {len(problems)} place(s)"
    print(f"\nrouter state (position #{record.position}) {status}: {len(live['overrides'])} override(s), "
          f"{len(live['suspensions'])} suspension(s), {len(live['floors'])} quantization floor(s) in force")
    for line in problems[:50]:
        print("  " + line)
    return len(problems)


@app.command()
def explain(
    provider: Annotated[str, typer.Argument(help="provider (endpoint tag)")],
    model: Annotated[str | None, typer.Option(help="model id (default: the first configured)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the provider's view as JSON (the read model)")]
    = False,
    config: ConfigOpt = None,
) -> None:
    """Why a provider is in its current state: streaks, the cycles and results behind them, the ladder, decisions.

    The judge's state comes from Redis; the ignore list and the recent decisions
    (each with the mode it was made in) from the KV bucket and the log.  When
    those cannot be read, the judge's part is still printed, with a note.
    """
    from reverie_canary.services.dashboard.core import provider_detail, to_json
    from reverie_canary.services.dashboard.sources import FleetReader, SourceError
    from reverie_canary.services.judge.core import Policy
    from reverie_canary.services.judge.explain import explain_provider
    from reverie_canary.services.judge.store import RedisJudgeStore
    from reverie_canary.shared.runtime.printable import printable_view
    from reverie_canary.shared.runtime.service import redis_client

    settings = _settings(config)
    target = watched_model(settings, model) if model else settings.models[0]
    policy = Policy.from_settings(settings)

    async def load():
        client = redis_client(settings)
        try:
            record = await RedisJudgeStore(client, settings.namespace).load(target)
        finally:
            await client.aclose()
        try:
            async with FleetReader(settings) as reader:
                await reader.follow()
                status = (await reader.status([target])).models[0]
                return record, status, reader.window.models.get(target), None
        except SourceError as exc:
            return record, None, None, str(exc)

    record, status, window, problem = asyncio.run(load())
    if provider not in record.state.providers:
        kinds = sorted(kind for kind, tag in settings.controls.items() if tag == provider)
        if kinds:
            typer.echo(f"{provider} is the positive control for {', '.join(kinds)}: probed every cycle to prove "
                       "the probe can fail, never judged nor routed around")
            raise typer.Exit(0)
        known = ", ".join(sorted(record.state.providers)) or "none yet"
        typer.echo(f"{provider} is unknown to the judge for {target} (known: {known})", err=True)
        raise typer.Exit(1)
    if problem:
        typer.echo(f"note: {problem}; the ignore list and the decisions are left out", err=True)
    if as_json:
        if status is None:
            typer.echo("error: --json needs the read model (the log and the KV bucket)", err=True)
            raise typer.Exit(1)
        detail = provider_detail(status, provider, state=record.state, window=window, policy=policy)
        print(json.dumps(json.loads(to_json(detail)), indent=2))
        return
    decisions = []
    if window is not None and provider in window.providers:
        decisions = window.providers[provider].decisions
    print(explain_provider(printable_view(record.state), provider, policy, kinds=settings.kinds,
                           decisions=printable_view(decisions)))
    row = next((p for p in status.providers if p.provider == provider), None) if status is not None else None
    if row is not None:
        layers = ", ".join(row.layers) if row.layers else "none"
        print(f"  now: {row.state.replace('_', ' ')}; in the ignore list v{status.ignore_list.version}: "
              f"{'yes' if row.ignored else 'no'} (layers: {layers})")


@app.command()
def report(
    model: Annotated[str | None, typer.Option(help="model id (default: every configured)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    config: ConfigOpt = None,
) -> None:
    """Observe mode's record: how many would-be suspensions turned out right or wrong, folded from the log.

    Beside it, the log's cycle verdicts grouped by the quantization each endpoint
    declared (``undeclared`` when it declared none): passed, failed (and their share
    of judged cycles), frozen, blind.  The record is the fold of the event log (like ``canary replay``), not what
    Redis holds: after a Redis flush it is still right.  Exit status 1 when the
    log holds no events of a model (its source is gone: the stream was replaced,
    or the events expired), saying so.
    """
    from reverie_canary.services.judge.core import Policy
    from reverie_canary.services.judge.explain import QuantTally, shadow_report, shadow_scorecard
    from reverie_canary.services.judge.replay import JUDGE_SUBJECTS, Refold
    from reverie_canary.services.judge.store import RedisJudgeStore
    from reverie_canary.shared.contract.events import CycleVerdict, Decision, EndpointsDiscovered
    from reverie_canary.shared.runtime.eventlog import scan_log
    from reverie_canary.shared.runtime.printable import printable_view
    from reverie_canary.shared.runtime.service import nats_connect, redis_client

    async def scan_refold_into(js, on_event) -> None:
        await scan_log(js, on_event, prefixes=JUDGE_SUBJECTS, dense=True)  # the judge's inputs: most of the log

    settings = _settings(config)
    models = [model] if model else list(settings.models)
    policy = Policy.from_settings(settings)
    tally = QuantTally()

    async def load():
        client = redis_client(settings)
        try:
            store = RedisJudgeStore(client, settings.namespace)
            known = set(await store.models())
            stored = {m: ((await store.load(m)).state if m in known else None) for m in models}
        finally:
            await client.aclose()
        try:
            nc = await nats_connect(settings, allow_reconnect=False)
        except NATS_FAULTS as exc:
            raise _ReportError(f"cannot read the log: NATS at {settings.nats_url}: {exc!r}") from exc
        # a command for "*" reaches every watched model and every model the judge stored, as it did live
        folded = Refold(msgspec.structs.replace(policy, models=tuple(sorted(known | set(models)))),
                        keep=(Decision, CycleVerdict))
        counts: dict[str, int] = {}

        def on_event(item) -> None:
            model = getattr(item.event, "model", None)
            if model is not None:
                counts[model] = counts.get(model, 0) + 1
            if isinstance(item.event, EndpointsDiscovered):
                tally.see(item.event)
            kept = len(folded.effects)
            folded.feed(item)
            if len(folded.effects) > kept:  # verdicts are counted, never held: a month of cycles is not kept
                produced = folded.effects[kept:]
                del folded.effects[kept:]
                for seq, effect in produced:
                    if isinstance(effect, CycleVerdict):
                        tally.count(effect)
                    else:
                        folded.effects.append((seq, effect))

        try:
            js = nc.jetstream()
            try:
                await scan_refold_into(js, on_event)  # streamed: a month of results is never held
            except (*NATS_FAULTS, CanaryError) as exc:  # no stream (never initialised), a permission, a timeout
                raise _ReportError(f"cannot read the log: {exc!r}") from exc
            start = await _log_start(js)
        finally:
            await nc.close()
        return stored, folded, counts, start

    try:
        stored, folded, counts, log_start = asyncio.run(load())
    except _ReportError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    states, effects = folded.states, folded.effects
    modes = {e.decision_id: e.mode for _, e in effects if isinstance(e, Decision)}
    reports, gone = [], []
    for m in models:
        events = counts.get(m, 0)
        if not events:
            gone.append(m)
            continue
        reports.append(shadow_scorecard(states[m], policy, kinds=settings.kinds, modes_by_decision=modes,
                                        events=events, log_start=log_start[0] if log_start else None,
                                        stored=stored.get(m), by_quantization=tally.groups(m)))
    if as_json:
        print(json.dumps({"reports": [msgspec.to_builtins(r) for r in reports],
                          "gone": [{"model": m, "redis_calls": len(stored[m].shadow_calls) if stored.get(m) else None}
                                   for m in gone]}, indent=2))
    else:
        for r in reports:
            print(shadow_report(printable_view(states[r.model]), report=printable_view(r)))
            expired = log_start is not None and log_start[1] > 1
            print(f"  source: the log, {r.events} event(s) of this model folded"
                  + (f", from {utc_text(r.log_start)} on (older events expired: calls "
                     "before that are not counted)" if expired and r.log_start is not None else ""))
            if r.redis_calls is None:
                print("  Redis holds no state of this model (flushed or lost): the judge rebuilds it from the log")
            elif not r.redis_agrees:
                print(f"  Redis DIFFERS: it holds {r.redis_calls} call(s); canary replay shows where")
    for m in gone:
        held = stored.get(m)
        extra = (f"; Redis still holds {len(held.shadow_calls)} call(s), which cannot be checked against it"
                 if held is not None and held.shadow_calls else "")
        typer.echo(f"error: the log holds no events of {m}: the source of its record is gone (the stream was "
                   f"replaced or its events expired) or the canary has not run yet{extra}", err=True)
    if gone:
        raise typer.Exit(1)


class _ReportError(CanaryError):
    """The report's source cannot be read."""


async def _log_start(js):
    """``(time, sequence)`` of the log's oldest stored message (``None``: empty or unknown)."""
    from reverie_canary.shared.runtime.streams import LOG

    try:
        info = await js.stream_info(LOG)
        if not info.state.messages:
            return None
        return (await js.get_msg(LOG, info.state.first_seq)).time, info.state.first_seq
    except NATS_FAULTS:  # no stream, a deleted message, a permission: the start is not known
        return None
