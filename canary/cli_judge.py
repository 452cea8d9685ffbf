"""``canary replay``, ``canary explain``, ``canary report``: the judge's audits."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

import msgspec
import typer

from reverie_canary.canary.cli import ConfigOpt, _settings, app


def _decision_line(seq: int | None, d) -> str:
    until = f" until {d.until.strftime('%Y-%m-%dT%H:%M:%SZ')}" if d.until else ""
    where = f"#{seq} " if seq is not None else ""
    who = d.provider or "(model)"
    return f"{where}{d.at.strftime('%Y-%m-%dT%H:%M:%SZ')}  {d.action:<14} {d.model}  {who}{until}  {d.reason}: {d.detail}"


@app.command()
def replay(
    events: Annotated[Optional[Path], typer.Option("--events", help="fold this JSON-lines file offline instead of the log")] = None,
    since: Annotated[Optional[str], typer.Option(help="show the decisions from this UTC time (ISO 8601) on; "
                                                     "the fold always starts at the beginning")] = None,
    other: Annotated[Optional[Path], typer.Option("--config", help="backtest: other thresholds (settings TOML)")] = None,
) -> None:
    """Fold the event log again: the decision timeline and any difference from the live Redis state.

    Exit status 1 when the live state differs from the log.
    """
    from reverie_canary.services.judge.core import Policy, fold
    from reverie_canary.services.judge.replay import backtest, read_events_file
    from reverie_canary.shared.errors import Undecodable
    from reverie_canary.shared.events import Decision

    settings = _settings()
    policy = Policy.from_settings(settings)
    other_policy = Policy.from_settings(_settings(other)) if other else None
    start = _since(since)

    if events is not None:
        try:
            evs = read_events_file(events.read_text(encoding="utf-8").splitlines())
        except (OSError, UnicodeDecodeError, Undecodable) as exc:
            typer.echo(f"error: {events}: {exc}", err=True)
            raise typer.Exit(2) from exc
        # a command for "*" applies to every model of the file, as it did to every watched model live
        seen = tuple(sorted({m for e in evs if (m := getattr(e, "model", "*")) != "*"} | set(policy.models)))
        policy = msgspec.structs.replace(policy, models=seen)
        if other_policy is not None:
            other_policy = msgspec.structs.replace(other_policy, models=seen)
            diff = backtest(evs, policy, other_policy)
            print(json.dumps({k: [msgspec.to_builtins(d) for d in v if start is None or d.at >= start]
                              for k, v in diff.items()}, indent=2))
            raise typer.Exit(0)
        states, effects = fold(evs, policy)
        print(json.dumps({
            "states": {m: msgspec.to_builtins(s) for m, s in states.items()},
            "decisions": [msgspec.to_builtins(e) for e in effects
                          if isinstance(e, Decision) and (start is None or e.at >= start)],
        }, indent=2, sort_keys=True))
        raise typer.Exit(0)

    raise typer.Exit(asyncio.run(_replay_live(settings, policy, other_policy, other, since, start)))


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
                       start: datetime | None) -> int:
    import nats

    from reverie_canary.services.judge.replay import backtest, diff_states, read_log, refold
    from reverie_canary.services.judge.store import RedisJudgeStore
    from reverie_canary.shared.events import Decision
    from reverie_canary.shared.service import redis_client

    from reverie_canary.services.judge.replay import JUDGE_SUBJECTS
    from reverie_canary.services.router.store import RedisRouterStore

    kwargs = {"user": settings.nats_user, "password": settings.nats_password} if settings.nats_user else {}
    client = redis_client(settings)
    store = RedisJudgeStore(client, settings.namespace)
    try:
        # live positions first, so the log prefix folded is the one the judge (and the router) had applied
        stored = await store.models()
        records = {m: await store.load(m) for m in stored}
        router_record = await RedisRouterStore(client, settings.namespace).load()
        nc = await nats.connect(settings.nats_url, **kwargs)
        try:
            # always from the beginning: a fold that starts mid-log has no earlier state and
            # would invent decisions; --since only chooses which part of the timeline is shown
            everything = await read_log(nc.jetstream(), judge_only=False)
        finally:
            await nc.close()
    finally:
        await client.aclose()
    logged = [item for item in everything if item.subject.startswith(JUDGE_SUBJECTS)]
    models = {m for e in logged if (m := getattr(e.event, "model", "*")) != "*"}
    policy = msgspec.structs.replace(policy, models=tuple(sorted(models | set(policy.models) | set(records))))
    positions = {m: r.position for m, r in records.items()}
    states, effects = refold(logged, policy, positions=positions)
    shown = [(seq, e) for seq, e in effects if isinstance(e, Decision) and (start is None or e.at >= start)]
    print(f"{len(logged)} events folded from the log" + (f"; decisions since {since}:" if since else ":"))
    for seq, e in shown:
        print(_decision_line(seq, e))
    if other_policy is not None:
        other_policy = msgspec.structs.replace(other_policy, models=policy.models)
        diff = backtest([e.event for e in logged], policy, other_policy)
        print(f"\nbacktest against {other}: {len(diff['only_current'])} decision(s) only with the current "
              f"thresholds, {len(diff['only_other'])} only with the other ones")
        for d in diff["only_current"]:
            print("  - " + _decision_line(None, d))
        for d in diff["only_other"]:
            print("  + " + _decision_line(None, d))
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
        differences += len(problems)
        status = "agrees with the log" if not problems else f"DIFFERS in {len(problems)} place(s)"
        print(f"\nlive state of {model} (position #{record.position}) {status}")
        for line in problems[:50]:
            print("  " + line)
    differences += _replay_router(settings, everything, router_record)
    return 1 if differences else 0


def _replay_router(settings, everything, record) -> int:
    """Fold the router's inputs up to its position and compare the layers with its live record.

    Prints the router's part of ``canary replay``; returns the number of differences.
    """
    from reverie_canary.services.router.core import RouterCommand, RouterPolicy, diff_layers, layers, refold
    from reverie_canary.shared import clock, inputs
    from reverie_canary.shared.events import Decision

    prefixes = (*inputs.prefixes("router"), "canary.answers.router.")
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
          f"{len(live['suspensions'])} suspension(s) in force")
    for line in problems[:50]:
        print("  " + line)
    return len(problems)


@app.command()
def explain(
    provider: Annotated[str, typer.Argument(help="provider (endpoint tag)")],
    model: Annotated[Optional[str], typer.Option(help="model id (default: the first configured)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Why a provider is in its current state: streaks, the cycles and results behind them, the ladder."""
    from reverie_canary.services.judge.core import Policy
    from reverie_canary.services.judge.explain import explain_provider
    from reverie_canary.services.judge.store import RedisJudgeStore
    from reverie_canary.shared.service import redis_client

    settings = _settings(config)
    target = model or settings.models[0]

    async def load():
        client = redis_client(settings)
        try:
            return await RedisJudgeStore(client, settings.namespace).load(target)
        finally:
            await client.aclose()

    record = asyncio.run(load())
    if provider not in record.state.providers:
        kinds = sorted(kind for kind, tag in settings.controls.items() if tag == provider)
        if kinds:
            typer.echo(f"{provider} is the positive control for {', '.join(kinds)}: probed every cycle to prove "
                       "the probe can fail, never judged nor routed around")
            raise typer.Exit(0)
        known = ", ".join(sorted(record.state.providers)) or "none yet"
        typer.echo(f"{provider} is unknown to the judge for {target} (known: {known})", err=True)
        raise typer.Exit(1)
    print(explain_provider(record.state, provider, Policy.from_settings(settings)))


@app.command()
def report(
    model: Annotated[Optional[str], typer.Option(help="model id (default: every configured)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Observe mode's record: how many would-be suspensions turned out right or wrong."""
    from reverie_canary.services.judge.explain import shadow_report
    from reverie_canary.services.judge.store import RedisJudgeStore
    from reverie_canary.shared.service import redis_client

    settings = _settings(config)
    models = [model] if model else settings.models

    async def load():
        client = redis_client(settings)
        try:
            store = RedisJudgeStore(client, settings.namespace)
            return [(await store.load(m)).state for m in models]
        finally:
            await client.aclose()

    for state in asyncio.run(load()):
        print(shadow_report(state))
