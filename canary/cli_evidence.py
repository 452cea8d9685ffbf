"""``canary evidence``: every probe behind a decision, as field cases that ``canary check`` reads.

``canary evidence DECISION_ID`` finds the decision in the log and writes the
probes it rests on (its ``evidence``; a decision without any: every probe of
its provider in its cycles); ``canary evidence --provider P --cycle C`` writes
every probe of provider ``P`` in cycle ``C`` (its number or its id).  One JSON
object per request sent (:mod:`reverie_canary.services.prober.evidence`), to
standard output or ``--out FILE``; ``canary check`` on it reruns the checks
and says ``ok`` for each request whose verdict it reproduced.  A summary line
goes to standard error.  Reads the log as the ``operator`` NATS user.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from reverie_canary.canary.cli import ConfigOpt, _settings, app
from reverie_canary.shared.contract.errors import CanaryError
from reverie_canary.shared.contract.events import Decision, Endpoint, EndpointsDiscovered, ProbeResult


class EvidenceNotFound(CanaryError, LookupError):
    """The decision, or the provider's cycle, is not in the log."""


@dataclass
class Wanted:
    """What to collect from the log: a provider's results in some cycles, or only some task ids."""

    model: str | None
    provider: str
    cycles: set[str] = field(default_factory=set)
    cycle_no: int | None = None
    task_ids: set[str] = field(default_factory=set)
    source: str = ""


#: The results of a cycle are read from a little before its start (UTC clocks of the services differ).
READ_MARGIN = timedelta(minutes=5)


def cycle_start_of(cycle: str) -> datetime | None:
    """The UTC start a cycle id names (``<model>@<start ISO 8601>``, :func:`reverie_canary.shared.contract.ids.cycle_id`)."""
    _, sep, when = cycle.rpartition("@")
    try:
        return datetime.fromisoformat(when.replace("Z", "+00:00")) if sep else None
    except ValueError:
        return None


async def _find_decision(js, decision_id: str, since: datetime | None) -> Decision:
    from reverie_canary.shared.runtime.eventlog import scan_log

    found: list[Decision] = []

    def on_event(item) -> None:
        if isinstance(item.event, Decision) and item.event.decision_id == decision_id and not found:
            found.append(item.event)

    await scan_log(js, on_event, prefixes=("canary.decisions.",), since=since)
    if not found:
        raise EvidenceNotFound(f"no decision {decision_id!r} in the log (canary replay lists them)")
    return found[0]


async def collect(settings, *, decision_id: str | None = None, provider: str | None = None,
                  cycle: str | None = None, model: str | None = None,
                  since: datetime | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The bundle's cases and a summary, read from the log.

    The decision is looked for from ``since`` on (default: the log's start);
    the results from a little before the earliest start its cycle ids name.

    Raises:
        EvidenceNotFound: the decision or the cycle is not in the log.
    """
    from reverie_canary.services.discovery.core import same_names
    from reverie_canary.services.prober.evidence import EvidenceError, cases_of
    from reverie_canary.shared.contract import subjects
    from reverie_canary.shared.runtime.eventlog import scan_log
    from reverie_canary.shared.runtime.service import nats_connect

    nc = await nats_connect(settings)
    try:
        js = nc.jetstream()
        if decision_id is not None:
            decision = await _find_decision(js, decision_id, since)
            if not decision.provider:
                raise EvidenceNotFound(f"decision {decision_id} is model-wide ({decision.action}): no provider's "
                                       "probes behind it; use --provider and --cycle")
            wanted = Wanted(model=decision.model, provider=decision.provider, cycles=set(decision.cycles),
                            task_ids={r.task_id for r in decision.evidence}, source=f"canary evidence {decision_id}")
        else:
            assert provider is not None and cycle is not None
            wanted = Wanted(model=model, provider=provider, source=f"canary evidence --provider {provider} "
                                                                   f"--cycle {cycle}")
            if cycle.lstrip("-").isdigit():
                wanted.cycle_no = int(cycle)
            else:
                wanted.cycles = {cycle}
        listings: dict[str, dict[str, Endpoint]] = {}
        results: dict[str, ProbeResult] = {}

        def on_event(item) -> None:
            event = item.event
            if wanted.model is not None and getattr(event, "model", None) != wanted.model:
                return
            if isinstance(event, EndpointsDiscovered):
                if wanted.cycle_no is not None and event.cycle_no == wanted.cycle_no:
                    wanted.cycles.add(event.cycle)
                if event.cycle in wanted.cycles:  # the whole listing: its names say what the pin proves
                    listings.setdefault(event.cycle, {}).update({e.provider: e for e in event.endpoints})
            elif isinstance(event, ProbeResult) and event.provider == wanted.provider and event.cycle in wanted.cycles:
                if not wanted.task_ids or event.task_id in wanted.task_ids:
                    results.setdefault(event.task_id, event)  # a redelivered result counts once

        starts = [t for t in (cycle_start_of(c) for c in wanted.cycles) if t is not None]
        start = min(starts) - READ_MARGIN if starts and len(starts) == len(wanted.cycles) else since
        prefixes = ("canary.discovery.", subjects.PREFIX + ".results.")
        await scan_log(js, on_event, prefixes=prefixes, since=start)
    finally:
        await nc.close()
    if not wanted.cycles:
        raise EvidenceNotFound(f"no cycle {cycle!r} of {wanted.model or 'any model'} in the log")
    cases: list[dict[str, Any]] = []
    skipped: list[str] = []
    for task_id in sorted(results):
        result = results[task_id]
        try:
            listing = listings.get(result.cycle, {})
            cases.extend(cases_of(result, listing.get(result.provider), source=wanted.source,
                                  same_name=same_names(listing.values()).get(result.provider, [])))
        except EvidenceError as exc:
            skipped.append(str(exc))
    missing = sorted(wanted.task_ids - set(results))
    summary = {"provider": wanted.provider, "model": wanted.model, "cycles": sorted(wanted.cycles),
               "probes": len(results), "cases": len(cases), "missing": missing, "skipped": skipped,
               "cut": sum(1 for c in cases if c["meta"]["probe"]["text_cut"])}
    return cases, summary


@app.command()
def evidence(
    decision_id: Annotated[str | None, typer.Argument(help="a decision id (canary replay, canary explain)")] = None,
    provider: Annotated[str | None, typer.Option(help="with --cycle: every probe of this provider")] = None,
    cycle: Annotated[str | None, typer.Option(help="with --provider: the cycle's number or id")] = None,
    model: Annotated[str | None, typer.Option(help="with --provider: the model (default: any)")] = None,
    since: Annotated[str | None, typer.Option(help="look for the decision or the cycle from this UTC time "
                                                      "(ISO 8601) on, not the whole log")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="write the cases here (default: standard output)")]
    = None,
    config: ConfigOpt = None,
) -> None:
    """Write every probe behind a decision as JSONL for ``canary check``: the request, the reply, the verdicts.

    Exit status: 0 when written, 1 when the decision or the cycle is not in the
    log (or the log cannot be read), 2 for bad arguments.
    """
    if (decision_id is None) == (provider is None or cycle is None):
        typer.echo("error: give a DECISION_ID, or --provider P and --cycle C", err=True)
        raise typer.Exit(2)
    from reverie_canary.canary.cli_ops import parse_when

    try:
        start = parse_when(since) if since else None
    except ValueError as exc:
        typer.echo(f"error: --since: {exc}", err=True)
        raise typer.Exit(2) from exc
    settings = _settings(config)
    try:
        cases, summary = asyncio.run(collect(settings, decision_id=decision_id, provider=provider, cycle=cycle,
                                             model=model, since=start))
    except EvidenceNotFound as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    where = f" to {out}" if out is not None else ""
    note = f"; {len(summary['missing'])} probe(s) not in the log: {', '.join(summary['missing'])}" \
        if summary["missing"] else ""
    if summary["skipped"]:
        note += f"; {len(summary['skipped'])} skipped: {'; '.join(summary['skipped'])}"
    if summary["cut"]:
        note += f"; {summary['cut']} reply(ies) longer than the evidence keeps: their rerun may differ"
    typer.echo(f"{summary['probes']} probe(s) of {summary['provider']} in {len(summary['cycles'])} cycle(s), "
               f"{summary['cases']} request(s){where}; rerun with: canary check {out or 'FILE'}{note}", err=True)
