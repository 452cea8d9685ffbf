"""Audits: fold the stored log again, compare with live state, backtest other thresholds.

``canary replay`` answers "why was provider X suspended at T?" and checks that
Redis agrees with the log (docs/concepts/messages.md, "Subjects"): it reads
``CANARY_LOG`` in stream order -- the order the judge read live -- folds it
through the same :func:`reverie_canary.services.judge.core.decide` into scratch state, and
reports any difference from the stored state.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import msgspec
from nats.js import JetStreamContext

from reverie_canary.services.judge.core import Effect, Folder, ModelState, Policy, fold_targets
from reverie_canary.services.judge.snapshots import FoldSnapshot
from reverie_canary.shared.contract import codec, inputs
from reverie_canary.shared.contract.errors import Undecodable
from reverie_canary.shared.contract.events import Decision, TimedDecision
from reverie_canary.shared.runtime import eventlog
from reverie_canary.shared.runtime.eventlog import LoggedEvent
from reverie_canary.shared.runtime.settings import SECRET_FIELDS, Settings

#: Subjects the judge folds (its durable consumer's filter): from :data:`reverie_canary.shared.contract.inputs.READS`.
JUDGE_SUBJECTS = inputs.prefixes("judge")


async def read_log(js: JetStreamContext, *, since: datetime | None = None, until_seq: int | None = None,
                   judge_only: bool = True, idle_s: float = 2.0) -> list[LoggedEvent]:
    """The log in stream order, by default only what the judge folds (:func:`reverie_canary.shared.runtime.eventlog.read_log`)."""
    return await eventlog.read_log(js, prefixes=JUDGE_SUBJECTS if judge_only else None, since=since,
                                   until_seq=until_seq, idle_s=idle_s, dense=True)


class Refold:
    """The judge's fold of the log, one event at a time, holding only the states (streamed replay).

    Feed it the log in stream order (:meth:`feed`, the ``on_event`` of
    :func:`reverie_canary.shared.runtime.eventlog.scan_log`); memory is the models' states and, when
    ``keep`` allows, the effects kept, never the log.  A 30-day log of a 2,000-endpoint fleet
    (about 17 M results) is folded with a bounded footprint (``benchmarks/replay_bench.py``).

    Args:
        policy: thresholds to fold with.
        positions: per model, the last sequence to include (the live record's position), so that
            the comparison is with the same prefix of the log; a model without one is folded to the end.
        keep: which effects to keep in :attr:`effects` (default: every one; a rebuild keeps none).
        states: model -> the state to start from (a snapshot's: :mod:`reverie_canary.services.judge.snapshots`);
            the log fed must then start after the snapshot's position.

    Events are folded into the models the live judge folds them into
    (:func:`reverie_canary.services.judge.core.fold_targets`, the watched models being
    ``policy.models``): an event of a model the judge does not watch -- a refused command
    for a typo -- makes no state and no decision, and is not counted in :attr:`events`.
    """

    def __init__(self, policy: Policy, *, positions: dict[str, int] | None = None,
                 keep: type | tuple[type, ...] | None = object, states: dict[str, ModelState] | None = None) -> None:
        self.policy = policy
        self.positions = positions
        self.keep = keep
        self.watched = frozenset(policy.models)
        self.folder = Folder(policy, states)
        #: model -> state: the fold so far (the folder's own; results are applied in place)
        self.states: dict[str, ModelState] = self.folder.states
        self.effects: list[tuple[int, Effect]] = []
        self.events = 0

    def feed(self, item: LoggedEvent) -> None:
        """Fold one logged event into the state of its model (of every model for a model-wide ``*``)."""
        model = getattr(item.event, "model", None)
        if model is None:
            return
        if model != "*" and self.positions is None:  # the common case, without the bookkeeping below
            if model not in self.watched:  # fold_targets' None: the judge skipped it
                return
            self.events += 1
            produced = self.folder.apply(model, item.event)
            if produced and self.keep is not None:
                self.effects.extend((item.seq, e) for e in produced if isinstance(e, self.keep))
            return
        targets = fold_targets(model, self.watched, self.states)
        if targets is None:
            return
        self.events += 1
        for target in targets:
            if self.positions is not None and target in self.positions and item.seq > self.positions[target]:
                continue
            produced = self.folder.apply(target, item.event)
            if produced and self.keep is not None:
                self.effects.extend((item.seq, e) for e in produced if isinstance(e, self.keep))


def refold(events: Iterable[LoggedEvent], policy: Policy, *, positions: dict[str, int] | None = None
           ) -> tuple[dict[str, ModelState], list[tuple[int, Effect]]]:
    """Fold logged events into scratch states (:class:`Refold` over an iterable).

    Args:
        events: in stream order.
        policy: thresholds to fold with.
        positions: per model, the last sequence to include (the live record's
            position), so that the comparison is with the same prefix of the log;
            a model without one (no live record) is folded to the end.

    Returns:
        States per model and every effect with the sequence that produced it.
    """
    fold = Refold(policy, positions=positions)
    for item in events:
        fold.feed(item)
    return fold.states, fold.effects


async def scan_refold(js: JetStreamContext, policy: Policy, *, positions: dict[str, int] | None = None,
                      until_seq: int | None = None, keep: type | tuple[type, ...] | None = Decision,
                      idle_s: float = 2.0, snapshot: FoldSnapshot | None = None) -> Refold:
    """Fold what the judge folds of ``CANARY_LOG`` as it streams by, never holding the log.

    Args:
        snapshot: start from this snapshot's states and read the log after its position
            (default: from the log's start).

    Returns:
        The :class:`Refold` after the last event up to ``until_seq`` (default: the log's end at start);
        by default it keeps only the decisions among the effects.
    """
    fold = Refold(policy, positions=positions, keep=keep, states=snapshot.states if snapshot is not None else None)
    # dense: results and listings are nearly all of the log, so one server filter and the rest dropped
    # here (a consumer of the four families' filters is delivered about 4x slower: eventlog.scan_log)
    await eventlog.scan_log(js, fold.feed, prefixes=JUDGE_SUBJECTS, until_seq=until_seq, idle_s=idle_s,
                            from_seq=snapshot.position + 1 if snapshot is not None else None, dense=True)
    return fold


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


def decision_key(d: Decision) -> tuple[str, str, str, str, str]:
    """What makes two decisions 'the same call': model, provider, action, time and end (a longer suspension differs)."""
    return (d.model, d.provider, d.action, d.at.isoformat(), d.until.isoformat() if isinstance(d, TimedDecision) else "")


def backtest(events: list[Any], current: Policy, other: Policy, *, watched: Iterable[str] | None = None
             ) -> dict[str, list[Decision]]:
    """Fold the same events under two policies and list the decisions that differ.

    Args:
        watched: the models the judge watched (:func:`reverie_canary.services.judge.core.fold`);
            ``None``: every model the events name.

    Returns:
        ``{"only_current": [...], "only_other": [...]}``.
    """
    from reverie_canary.services.judge.core import fold

    watched = None if watched is None else frozenset(watched)
    _, a = fold(events, current, watched=watched)
    _, b = fold(events, other, watched=watched)
    da = [e for e in a if isinstance(e, Decision)]
    db = [e for e in b if isinstance(e, Decision)]
    ka = {decision_key(d) for d in da}
    kb = {decision_key(d) for d in db}
    return {
        "only_current": [d for d in da if decision_key(d) not in kb],
        "only_other": [d for d in db if decision_key(d) not in ka],
    }


def watched_in_file(events: Iterable[Any], configured: Iterable[str] = ()) -> tuple[str, ...]:
    """The models a file of events shows the judge watching: ``configured`` and every model it has input of.

    Input is what discovery, the prober and the router publish for a model (listings, results,
    cycle closes, snapshots): they run on the same ``CANARY_MODELS`` as the judge.  An operator
    command alone does not make a model watched -- the judge refused one for a model it did
    not watch, and a refold of the file must not fold it (:func:`reverie_canary.services.judge.core.fold_targets`).
    """
    from reverie_canary.shared.contract.commands import Command

    named = {m for e in events if not isinstance(e, Command) and (m := getattr(e, "model", "*")) != "*"}
    return tuple(sorted(named | set(configured)))


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


#: The settings the judge's policy is made of (:meth:`Policy.from_settings`), but ``models``: a
#: backtest folds every model of the log under both configurations; ``cycle_interval_s`` sets the hold.
POLICY_SETTINGS: tuple[str, ...] = (*(
    f.name for f in msgspec.structs.fields(Policy)
    if f.name != "models" and f.name in {g.name for g in msgspec.structs.fields(Settings)}),
    "cycle_interval_s",  # the blind hold is two cycle intervals (Policy.blind_hold_s)
    "new_kind_default_modes",  # Policy.new_kind_modes: a new kind's mode until switched
)


class SettingDifference(msgspec.Struct, frozen=True, kw_only=True):
    """One setting whose value differs between the current and the other configuration.

    ``policy``: the judge's policy uses it (it can change the backtest's
    decisions); the sources say where each value came from (``default``,
    ``file <path>``, ``environment <VARIABLE>``).  Secrets are masked.
    """

    name: str
    current: Any
    current_source: str
    other: Any
    other_source: str
    policy: bool


def settings_differences(current: Settings, current_sources: dict[str, str], other: Settings,
                         other_sources: dict[str, str]) -> list[SettingDifference]:
    """Every setting whose value differs between two configurations, policy settings first, then by name."""
    a, b = msgspec.structs.asdict(current), msgspec.structs.asdict(other)
    out = []
    for name in sorted(a, key=lambda n: (n not in POLICY_SETTINGS, n)):
        if a[name] == b[name]:
            continue
        shown = ("***" if a[name] else "", "***" if b[name] else "") if name in SECRET_FIELDS else (a[name], b[name])
        out.append(SettingDifference(name=name, current=shown[0], current_source=current_sources.get(name, "default"),
                                     other=shown[1], other_source=other_sources.get(name, "default"),
                                     policy=name in POLICY_SETTINGS))
    return out


def policy_sources(settings: Settings, sources: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every policy setting (:data:`POLICY_SETTINGS`) of ``settings`` with its value and where it came from.

    Returns:
        name -> ``{"value": ..., "source": "default" | "file <path>" | "environment <VARIABLE>"}``,
        in :data:`POLICY_SETTINGS` order.
    """
    values = msgspec.structs.asdict(settings)
    return {name: {"value": values[name], "source": sources.get(name, "default")} for name in POLICY_SETTINGS}
