"""Audits: fold the stored log again, compare with live state, backtest other thresholds.

``canary replay`` answers "why was provider X suspended at T?" and checks that
Redis agrees with the log (DESIGN.md, "Subjects and streams"): it reads
``CANARY_LOG`` in stream order -- the order the judge read live -- folds it
through the same :func:`services.judge.core.decide` into scratch state, and
reports any difference from the stored state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy

from services.judge.core import Effect, ModelState, Policy, decide, initial
from shared import codec, subjects
from shared.errors import Undecodable
from shared.events import Decision
from shared.streams import LOG

#: Subjects the judge folds (its durable consumer's filter).
JUDGE_SUBJECTS = (
    subjects.ALL_DISCOVERY.removesuffix(">"),
    subjects.ALL_RESULTS.removesuffix(">"),
    subjects.ALL_OPS.removesuffix(">"),
    subjects.ALL_ROUTING.removesuffix(">"),
)


@dataclass(frozen=True)
class LoggedEvent:
    """One decoded event of the log and its stream sequence."""

    seq: int
    subject: str
    event: Any


async def read_log(js: JetStreamContext, *, since: datetime | None = None, until_seq: int | None = None,
                   judge_only: bool = True, idle_s: float = 2.0) -> list[LoggedEvent]:
    """Read ``CANARY_LOG`` in order with an ordered consumer.

    Args:
        js: a JetStream context.
        since: start at this UTC time (default: the beginning).
        until_seq: stop after this stream sequence (default: the last at start).
        judge_only: keep only the subjects the judge folds.
        idle_s: give up waiting for more after this many seconds of silence.

    Returns:
        Decoded events in stream order; undecodable ones are skipped (the judge
        dead-lettered them too).
    """
    info = await js.stream_info(LOG)
    last = info.state.last_seq if until_seq is None else min(until_seq, info.state.last_seq)
    out: list[LoggedEvent] = []
    if last == 0 or info.state.messages == 0:
        return out
    done = asyncio.Event()
    config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since.isoformat()) if since \
        else ConsumerConfig(deliver_policy=DeliverPolicy.ALL)

    async def on_message(msg) -> None:
        seq = msg.metadata.sequence.stream
        if seq > last:
            done.set()
            return
        if not judge_only or msg.subject.startswith(JUDGE_SUBJECTS):
            try:
                out.append(LoggedEvent(seq=seq, subject=msg.subject, event=codec.LOG_EVENT.decode(msg.data)))
            except Undecodable:
                pass
        if seq >= last or msg.metadata.num_pending == 0:
            done.set()

    sub = await js.subscribe(f"{subjects.PREFIX}.>", stream=LOG, cb=on_message, ordered_consumer=True,
                             config=config)
    try:
        while True:
            count = len(out)
            try:
                await asyncio.wait_for(done.wait(), timeout=idle_s)
                break
            except TimeoutError:
                if len(out) == count:
                    break
    finally:
        await sub.unsubscribe()
    return out


def refold(events: Iterable[LoggedEvent], policy: Policy, *, positions: dict[str, int] | None = None
           ) -> tuple[dict[str, ModelState], list[tuple[int, Effect]]]:
    """Fold logged events into scratch states.

    Args:
        events: in stream order.
        policy: thresholds to fold with.
        positions: per model, the last sequence to include (the live record's
            position), so that the comparison is with the same prefix of the log.

    Returns:
        States per model and every effect with the sequence that produced it.
    """
    states: dict[str, ModelState] = {}
    effects: list[tuple[int, Effect]] = []
    for item in events:
        model = getattr(item.event, "model", None)
        if model is None:
            continue
        targets = sorted(states) if model == "*" else [model]
        for target in targets:
            if positions is not None and item.seq > positions.get(target, 0):
                continue
            state = states.get(target) or initial(target)
            state, produced = decide(state, item.event, policy)
            states[target] = state
            effects.extend((item.seq, e) for e in produced)
    return states, effects


def diff_states(replayed: ModelState, live: ModelState) -> list[str]:
    """Human-readable differences between two states of one model (empty: they agree)."""
    a = msgspec.to_builtins(replayed)
    b = msgspec.to_builtins(live)
    out: list[str] = []
    _diff("", a, b, out)
    return out


def _diff(path: str, a: Any, b: Any, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            _diff(f"{path}.{key}" if path else str(key), a.get(key), b.get(key), out)
    elif a != b:
        out.append(f"{path}: replay={_short(a)} live={_short(b)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def decision_key(d: Decision) -> tuple[str, str, str, str]:
    """What makes two decisions 'the same call': model, provider, action, time."""
    return (d.model, d.provider, d.action, d.at.isoformat())


def backtest(events: list[Any], current: Policy, other: Policy) -> dict[str, list[Decision]]:
    """Fold the same events under two policies and list the decisions that differ.

    Returns:
        ``{"only_current": [...], "only_other": [...]}``.
    """
    from services.judge.core import fold

    _, a = fold(events, current)
    _, b = fold(events, other)
    da = [e for e in a if isinstance(e, Decision)]
    db = [e for e in b if isinstance(e, Decision)]
    ka = {decision_key(d) for d in da}
    kb = {decision_key(d) for d in db}
    return {
        "only_current": [d for d in da if decision_key(d) not in kb],
        "only_other": [d for d in db if decision_key(d) not in ka],
    }


def read_events_file(lines: Iterable[str]) -> list[Any]:
    """Decode a JSON-lines file of wire events (blank lines and ``#`` comments skipped).

    Raises:
        Undecodable: naming the line number of the first bad line.
    """
    out = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            out.append(codec.LOG_EVENT.decode(text))
        except Undecodable as exc:
            raise Undecodable(f"line {number}: {exc}") from exc
    return out
