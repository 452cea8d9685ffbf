"""The judge's policy: a pure fold ``decide(state, event) -> (state, effects)``.

Every rule that changes a provider's state lives here (docs/concepts/judge.md; issue "Judge: the complete suspension policy").  This module
knows nothing of NATS, Redis, HTTP or the wall clock: time comes only from the
``at`` of events, so folding the same log again gives the same state and the
same decisions.  Unknown, stale or repeated input returns the same state and
no effects (redelivery is normal).

Inputs: ``EndpointsDiscovered`` (opens a cycle with its planned probes),
``ProbeResult`` (fills it), ``CycleClosed`` (judges it), ``CycleUnplanned``
(a cycle discovery could not plan: the canary was blind), ``IgnoreSnapshot``
(what routing already excludes, for the capacity floor), and the operator
commands ``LiftSuspension`` and ``SetMode``.

Effects: ``CycleVerdict``, ``Decision``, ``RetestRequested`` and ``LiveConfirmation`` events.

The rules, in the order :func:`_close_cycle` applies them:

1. Suspensions past their ``until`` end (``end``/``would_end``, reason
   ``expired``), stamped at ``until``.
2. A positive control that passes makes its probe kind *unproven* for the
   cycle (``control_passed``): those results count as inconclusive.  A control
   probed several times in a kind (the tool probe's variants) passes it when
   none of those results failed: a host known to break tool calls may break
   only one variant.
3. Common-mode guard: when more than ``common_mode_share`` of the probed
   providers (at least ``common_mode_min_providers``) fail one kind, that kind
   is frozen for everyone this cycle (``common_mode``).
4. Facts across the providers of a model (:func:`_template_facts`): a provider whose
   ``usage.prompt_tokens`` for a prompt differs from its peers' (at least
   ``template_min_providers`` reporting it, more than half of them agreeing), or whose
   ``completion_tokens`` exceed the request's ``max_tokens``, gets a failed result of the
   kind ``template`` (``prompt_tokens_differ``, ``max_tokens_ignored``), judged like any
   kind, with its own mode (observe until an operator switches it: ``new_kind_modes``).
   The numbers come from the open cycle's :class:`Measured`, never from a ``ResultRef``,
   and go with the cycle at its close.
   Verdict per provider: any quality ``fail`` -> failed; every planned probe
   ``pass`` (or ``not_applicable``) -> passed; otherwise frozen.
5. Streaks, by the table :data:`STREAK_TRANSITIONS`: failed grows the failed
   streak and resets the passed one, passed the reverse, frozen changes neither.
6. Suspended providers: ``passed_cycles_to_recover`` passed cycles in a row end
   the suspension early (``recovered``); the ladder position is kept.
7. ``failed_cycles_to_suspend`` failed cycles in a row: suspend for the next
   step of the ladder (1, 3, 7 days; reset after 14 days without a new
   suspension) -- unless fewer than ``min_hosts`` usable hosts would remain
   (``floor_held``, reconsidered every following failed cycle).  The mode
   decides the action, never the evidence: the streak counts every failed
   cycle whatever the mode was then, and when no kind that failed in the
   closing cycle is in enforce mode *at that close* (per model, or per probe
   kind) the same call is ``would_suspend`` and routing is untouched; the
   shadow call is scored right or wrong later.  A shadow call consumes no
   evidence: a provider under one that fails a cycle whose failed kinds are
   enforced by then is suspended at that close (a go-live suspends every
   provider that failed just before it and fails again just after).
8. A provider frozen for ``unjudgeable_after`` cycles in a row is reported
   ``unjudgeable`` once.
9. ``slow_vs_peers`` (:func:`_peer_latency`): a provider whose first-token median over its
   last ``slow_vs_peers_window_cycles`` is above the median + k x MAD of its model's probed
   providers (at least ``slow_vs_peers_min_providers``) is marked so in its state -- shown,
   never a verdict, a streak or a suspension: the first-token bar stays the contract.
10. ``pin_violated`` (the gateway served a pinned probe from another provider)
   is announced once a stretch: at the first cycle that shows it, again only
   after a cycle judged every probe of the provider served by it, or one that
   did not probe it (the notifier's held state counts the cycles between).
10. A result of a confirmation probe (``ProbeResult.confirms``: a pinned probe live
    counts asked for, planned in no cycle) is no cycle's evidence: it changes no
    state, no verdict and no streak, and gives one ``LiveConfirmation`` for
    operators (:func:`confirmation_of`).  Live counts never suspend anyone
    (DESIGN, "The request in flight").

The canary's own health (docs/concepts/health.md), folded into
the same rules:

- A probe result ``blind`` (401, 402, 403, gateway unreachable) says nothing
  about the provider: a provider with no quality ``fail`` and any ``blind``
  result is judged ``blind`` this cycle, and ``blind`` moves no streak
  (:data:`STREAK_TRANSITIONS`), scores no shadow call, does not count as
  frozen for ``unjudgeable`` and is left out of the common-mode count.  A
  ``CycleUnplanned`` judges every listed provider ``blind`` for that cycle
  (its ``CycleVerdict`` says so) and nothing else.
- A provider is *blind* while its latest word is ``blind``.  At each blind
  moment (a close that judged it blind, an unplanned cycle) a suspension of
  it that comes due before ``blind_hold_s`` from now is **held**: its
  ``until`` moves to ``blind_hold_s`` from now (``suspension_held``, which the
  router applies like a longer suspension), renewed at every blind moment.
  One that came due before the blindness began (a stretch with no cycles at
  all, the services stopped) expires as rule 1 says.  When a cycle judges the
  provider again (any other verdict), a held suspension whose own ``until``
  has passed ends then (``end``, reason ``expired``), before the streaks of
  that cycle apply; one held before its time ends at its hold's end.  An
  operator's lift ends a held suspension as any other.
- The model is blind from the first blind moment of any of its providers (or
  an unplanned cycle) to the first close that judged providers and none blind:
  one ``canary_blind`` decision when it starts (reason: the cause, ``held``:
  the suspensions held then), one ``canary_sees`` when it ends, both
  model-wide, stamped within the cycle they happen in.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar, Union

import msgspec
from msgspec import Struct, field

from reverie_canary.shared.contract import ids, inputs
from reverie_canary.shared.contract.commands import VERBS, LiftSuspension, SetMode
from reverie_canary.shared.contract.events import (
    ANSWER_MODELS_MAX,
    LANGUAGE_ANOMALIES,
    PROBE_KINDS,
    CanaryBlind,
    CanarySees,
    CommandApplied,
    CommandRefused,
    CommonMode,
    ControlPassed,
    CycleClosed,
    CycleUnplanned,
    CycleVerdict,
    CycleVerdictKind,
    Decision,
    DecisionMade,
    DecisionReason,
    EndpointsDiscovered,
    FloorHeld,
    HeldSuspension,
    LiveConfirmation,
    Mode,
    ModeChanged,
    PinViolated,
    PlannedProbe,
    ProbeResult,
    ProviderVerdict,
    ResultRef,
    RetestRequested,
    Suspended,
    SuspensionEnded,
    SuspensionHeld,
    TimedDecision,
    Unjudgeable,
    WouldEnd,
    WouldSuspend,
)
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot
from reverie_canary.shared.contract.timefmt import utc_text
from reverie_canary.shared.runtime.config import JudgeConfig, config_of
from reverie_canary.shared.runtime.settings import Settings

#: How many closed cycles a model remembers, to drop late or repeated input.
CLOSED_MEMORY = 64
#: Open cycles kept at most (a cycle whose close never came cannot be judged).
OPEN_MEMORY = 4
#: Verdicts kept per provider for ``canary explain`` (only their non-passing results are kept).
HISTORY = 12
#: Operator command ids remembered for idempotence.
COMMAND_MEMORY = 256
#: Shadow (observe-mode) calls kept for ``canary report``.
SHADOW_MEMORY = 500


class Policy(Struct, frozen=True, kw_only=True):
    """The thresholds of the policy (from :class:`reverie_canary.shared.runtime.settings.Settings`)."""

    failed_cycles_to_suspend: int = 2
    passed_cycles_to_recover: int = 2
    ladder_s: tuple[float, ...] = (86400.0, 3 * 86400.0, 7 * 86400.0)
    ladder_reset_s: float = 14 * 86400.0
    min_hosts: int = 2
    unjudgeable_after: int = 6
    common_mode_share: float = 0.5
    common_mode_min_providers: int = 3
    mode: Mode = "observe"
    kind_modes: dict[str, Mode] = {}
    #: A new kind's mode until an operator switches that kind, whatever the model's mode
    #: (``Settings.new_kind_default_modes``; :func:`mode_of`).
    new_kind_modes: dict[str, Mode] = field(default_factory=lambda: {"tools": "observe", "template": "observe"})
    #: The probe kinds judged (``Settings.kinds``): what a mode command's answer reads back.
    kinds: tuple[str, ...] = PROBE_KINDS
    #: The watched models: an operator command for ``*`` applies to each of them,
    #: even before the first cycle gave a model any state.
    models: tuple[str, ...] = ()
    #: How far ahead a blind moment holds a suspension that comes due (s): two cycle
    #: intervals, so that a hold renewed every cycle never lapses while cycles go on,
    #: and one lapses on its own once they stop (docs/concepts/health.md).
    blind_hold_s: float = 2 * 1800.0
    #: Facts across the providers of a model (``Settings``, same names): :func:`_template_facts`
    #: and :func:`_peer_latency`.
    template_tolerance_tokens: int = 2
    template_tolerance_share: float = 0.02
    template_min_providers: int = 3
    slow_vs_peers_k: float = 5.0
    slow_vs_peers_window_cycles: int = 6
    slow_vs_peers_min_providers: int = 4
    slow_vs_peers_min_spread_ms: float = 200.0

    @classmethod
    def from_config(cls, config: JudgeConfig) -> Policy:
        """The policy part of the judge's config."""
        return cls(
            failed_cycles_to_suspend=config.failed_cycles_to_suspend,
            passed_cycles_to_recover=config.passed_cycles_to_recover,
            ladder_s=tuple(config.ladder_s),
            ladder_reset_s=config.ladder_reset_s,
            min_hosts=config.min_hosts,
            unjudgeable_after=config.unjudgeable_after,
            common_mode_share=config.common_mode_share,
            mode=config.mode,
            kind_modes=dict(config.kind_modes),
            new_kind_modes=dict(config.new_kind_default_modes),
            kinds=tuple(config.kinds),
            models=tuple(config.models),
            blind_hold_s=2 * config.cycle_interval_s,
            template_tolerance_tokens=config.template_tolerance_tokens,
            template_tolerance_share=config.template_tolerance_share,
            template_min_providers=config.template_min_providers,
            slow_vs_peers_k=config.slow_vs_peers_k,
            slow_vs_peers_window_cycles=config.slow_vs_peers_window_cycles,
            slow_vs_peers_min_providers=config.slow_vs_peers_min_providers,
            slow_vs_peers_min_spread_ms=config.slow_vs_peers_min_spread_ms,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        """The policy part of the settings (through the judge's config)."""
        return cls.from_config(config_of(settings, JudgeConfig))


# -- state ---------------------------------------------------------------------


class Suspension(Struct, kw_only=True, gc=False):
    """An active suspension; ``enforced=False`` is observe mode's shadow."""

    decision_id: str
    since: datetime
    until: datetime
    level: int
    enforced: bool
    cycles: list[str] = []
    evidence: list[ResultRef] = []
    #: The ``until`` it had before blindness held it (``None``: not held).
    due: datetime | None = None


class VerdictRecord(Struct, kw_only=True, gc=False):
    """One cycle's verdict of one provider, kept for ``canary explain``."""

    cycle: str
    cycle_no: int
    at: datetime
    verdict: CycleVerdictKind
    reasons: list[str] = []
    results: list[ResultRef] = []


class ProviderState(Struct, kw_only=True, gc=False):
    """Everything the policy remembers about one provider of one model.

    ``ladder_level`` counts suspensions since the ladder last reset; the next
    suspension lasts ``ladder_s[min(ladder_level, len - 1)]``.  Observe mode's
    would-be suspensions count on ``shadow_level`` instead, so that running in
    shadow never lengthens the first real suspension.
    """

    provider: str
    present: bool = True
    failed_streak: int = 0
    passed_streak: int = 0
    frozen_streak: int = 0
    streak_cycles: list[str] = []
    streak_evidence: list[ResultRef] = []
    ladder_level: int = 0
    last_suspension_at: datetime | None = None
    shadow_level: int = 0
    last_shadow_at: datetime | None = None
    suspension: Suspension | None = None
    unjudgeable_reported: bool = False
    #: ``pin_violated`` was announced and every judged cycle since showed it again (told once a stretch).
    pin_reported: bool = False
    history: list[VerdictRecord] = []
    #: The latest word on it is canary-side (a blind verdict or an unplanned cycle), since when.
    blind_since: datetime | None = None
    #: Its ttft probes' time to first token (ms) in its last ``slow_vs_peers_window_cycles``
    #: judged cycles, one a cycle (``None``: measured nothing that cycle); :func:`_peer_latency`.
    ttft_recent_ms: list[float | None] = []
    #: The median of ``ttft_recent_ms`` at the last close that probed it (``None``: fewer than
    #: half the window measured).
    ttft_median_ms: float | None = None
    #: Its median is above the model's ``ttft_peer_bar_ms``: shown, never a suspension by itself.
    slow_vs_peers: bool = False


class Measured(Struct, frozen=True, kw_only=True, array_like=True, omit_defaults=True):
    """The numbers of one result that the facts across a model's providers read at the close.

    Kept beside the open cycle's :class:`ResultRef` (``OpenCycle.measured``, the judge store's
    short result form), never in a ``ResultRef``: references are copied into verdicts and
    decisions, and these numbers are needed only until the cycle closes, which drops them.
    ``prompt_tokens`` / ``completion_tokens`` are the reply's ``usage``; ``max_tokens`` the
    request's budget (0: not said); ``ttft_ms`` the time to first token; ``prompt_version``
    the prompts' version (results of different versions sent different prompts).
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    max_tokens: int = 0
    ttft_ms: float | None = None
    prompt_version: str = ""


class OpenCycle(Struct, kw_only=True, gc=False):
    """A cycle between discovery and close: what was planned, what came back.

    ``measured``: task id -> the numbers of its result (:class:`Measured`), for the results
    that reported any.
    """

    cycle: str
    cycle_no: int
    opened_at: datetime
    deadline: datetime
    planned: list[PlannedProbe]
    results: dict[str, ResultRef] = {}
    parts: list[int] = []
    measured: dict[str, Measured] = {}


class ShadowCall(Struct, kw_only=True, gc=False):
    """An observe-mode ``would_suspend`` and how it turned out.

    ``outcome``: ``pending``; ``right`` when the provider failed again before
    passing ``passed_cycles_to_recover`` cycles in a row; ``wrong`` otherwise.
    """

    decision_id: str
    provider: str
    at: datetime
    outcome: Literal["pending", "right", "wrong"] = "pending"
    resolved_at: datetime | None = None


class RoutingView(Struct, kw_only=True, gc=False):
    """What the latest IgnoreSnapshot says other layers (exclusions, overrides) ignore."""

    version: int = 0
    ignored: dict[str, datetime | None] = {}


class ModelState(Struct, kw_only=True, gc=False):
    """The judge's state of one model: the value folded over the log."""

    model: str
    mode: Mode | None = None
    kind_modes: dict[str, Mode] = {}
    #: New kinds (``Policy.new_kind_modes``) an operator switched on this model: they follow
    #: the model's mode from then on.
    switched_kinds: list[str] = []
    providers: dict[str, ProviderState] = {}
    open_cycles: dict[str, OpenCycle] = {}
    closed: list[str] = []
    last_closed_deadline: datetime | None = None
    last_cycle_no: int = -1
    routing: RoutingView = field(default_factory=RoutingView)
    commands: list[str] = []
    shadow_calls: list[ShadowCall] = []
    updated_at: datetime | None = None
    #: The canary announced ``canary_blind`` for this model at this time (UTC) and not yet
    #: ``canary_sees``; ``blind_cause`` the cause it gave.
    blind_since: datetime | None = None
    blind_cause: str = ""
    #: The median of the probed providers' ``ttft_median_ms`` and the bar above which one is
    #: ``slow_vs_peers`` (median + k x MAD), at the last close (``None``: too few providers measured).
    ttft_peer_median_ms: float | None = None
    ttft_peer_bar_ms: float | None = None


def initial(model: str) -> ModelState:
    """The state of a model the judge has never seen."""
    return ModelState(model=model)


Effect = CycleVerdict | Decision | RetestRequested | LiveConfirmation
#: What :func:`decide` folds: the judge's row of :data:`reverie_canary.shared.contract.inputs.READS` (one table).
JudgeInput = Union[inputs.folded("judge")]  # type: ignore[valid-type]  # noqa: UP007 (a tuple of types, from the table)

#: Streak transitions: verdict -> (failed, passed, frozen) updates.  ``+1``
#: grows, ``0`` resets, ``None`` keeps (docs/concepts/index.md: frozen neither grows nor resets).
STREAK_TRANSITIONS: dict[str, tuple[int | None, int | None, int | None]] = {
    "failed": (+1, 0, 0),
    "passed": (0, +1, 0),
    "frozen": (None, None, +1),
    "blind": (None, None, None),  # the canary could not see: says nothing about the provider
}


# -- the fold ------------------------------------------------------------------


def decide(state: ModelState, event: Any, policy: Policy) -> tuple[ModelState, list[Effect]]:
    """Apply one event to one model's state.

    Args:
        state: the model's state (not modified; a new state is returned).
        event: one of :data:`JudgeInput`; anything else is ignored.
        policy: the thresholds.

    Returns:
        ``(new_state, effects)``; for repeated, stale or foreign input the
        state is returned unchanged with no effects.
    """
    if isinstance(event, ProbeResult):
        if event.confirms is not None:  # rule 10: a fact for operators, never evidence
            return state, _confirmed(state, event)
        # the hot path: a result only touches one open cycle, so only that is copied
        return _result_fast(state, event)
    if not _concerns(state, event):
        return state, []
    new = _copy(state)
    effects = _apply(new, event, policy)
    if new == state:
        return state, []
    return new, effects


def _concerns(state: ModelState, event: Any) -> bool:
    """Whether :func:`_apply` does anything with ``event`` for this model (a result aside)."""
    if isinstance(event, EndpointsDiscovered | CycleClosed | CycleUnplanned | IgnoreSnapshot):
        return event.model == state.model
    if isinstance(event, LiftSuspension | SetMode):
        return event.model in (state.model, "*")
    return False


def _apply(state: ModelState, event: Any, policy: Policy) -> list[Effect]:
    """Apply an event (not a result) that :func:`_concerns` ``state`` to ``state`` itself; its effects.

    An event that changes nothing makes no effect (so :func:`decide` may drop both).
    """
    match event:
        case EndpointsDiscovered():
            return _routing_batch(_discovered(state, event, policy))
        case CycleClosed():
            return _routing_batch(_close_cycle(state, event, policy))
        case CycleUnplanned():
            return _routing_batch(_unplanned(state, event, policy))
        case IgnoreSnapshot():
            return _snapshot(state, event)
        case LiftSuspension():
            return _lift(state, event, policy)
        case SetMode():
            return _set_mode(state, event, policy)
    return []


def _routing_batch(effects: list[Effect]) -> list[Effect]:
    """Number the decisions of one judgement that change routing (``Decision.routing_follows``).

    A close that suspends twelve providers makes twelve decisions; each says how many of them
    follow it, so that the router makes one ignore-list version of the close -- one version for
    the clients to pick up, one ``ignore_list_changed`` for operators -- not twelve.
    """
    routing = [i for i, e in enumerate(effects) if isinstance(e, Decision) and e.changes_routing()]
    for n, i in enumerate(routing[:-1]):
        effects[i] = msgspec.structs.replace(effects[i], routing_follows=len(routing) - 1 - n)
    return effects


def fold(events: Iterable[Any], policy: Policy, states: dict[str, ModelState] | None = None, *,
         watched: Collection[str] | None = None) -> tuple[dict[str, ModelState], list[Effect]]:
    """Fold a log of events into states and the effects they produced.

    This is the audit: ``canary replay`` and the tests call it on the stored log.

    Args:
        watched: the models the judge watched (:func:`fold_targets`): an event of another
            model is skipped, as the live judge skips it.  ``None``: every model the events name
            is folded (a scenario, a hand-written file).
    """
    states = dict(states or {})
    out: list[Effect] = []
    for event in events:
        for model in _models_of(event, states, policy, watched):
            state = states.get(model) or initial(model)
            state, effects = decide(state, event, policy)
            states[model] = state
            out.extend(effects)
    return states, out


def _models_of(event: Any, states: dict[str, ModelState], policy: Policy,
               watched: Collection[str] | None = None) -> list[str]:
    """The models an event applies to: its own, or for ``*`` every watched or known one (:func:`fold_targets`)."""
    model = getattr(event, "model", None)
    if model is None:
        return []
    if watched is None:  # every model named is watched
        return sorted(set(states) | set(policy.models)) if model == "*" else [model]
    return fold_targets(model, watched, states) or []


def fold_targets(model: str, watched: Collection[str], known: Iterable[str]) -> list[str] | None:
    """The models the judge folds an event of ``model`` into: the one rule of the live judge and of every refold.

    The live judge (``services/judge/service.py``), ``canary replay``, ``report`` and the
    backtests (``services/judge/replay.py``) and the judge's rebuild all ask this, so a refold
    folds exactly what the judge folded: an event of a model the judge does not watch gives
    no state and no decision anywhere (guard rails: a typo must not look applied).

    Args:
        model: the event's ``model`` (``*``: every model).
        watched: the models the judge watches (``CANARY_MODELS``; a refold adds the models
            the judge stored, which it watched when it stored them).
        known: the models that have a state now.

    Returns:
        ``*``: every watched and known model, sorted; a watched model: ``[model]``; ``None``:
        not watched -- the judge skips the event, and refuses a lift or mode command for it
        (:func:`unknown_model`).
    """
    if model == "*":
        return sorted(set(watched) | set(known))
    if model in watched:
        return [model]
    return None


#: The confirmation's outcome for each probe outcome (a failed pinned probe confirms the live failures).
CONFIRMATION_OUTCOMES: dict[str, str] = {"fail": "confirmed", "pass": "not_reproduced"}


def confirmation_of(result: ProbeResult) -> LiveConfirmation | None:
    """What a confirmation probe's result says about the live failures that asked for it.

    Args:
        result: a probe result; only one with ``confirms`` set answers live counts.

    Returns:
        ``confirmed`` when the pinned probe failed, ``not_reproduced`` when it passed,
        ``inconclusive`` for any other outcome (a transport error, an inconclusive or
        not-applicable probe, the canary blind), stamped at the result's ``at``; ``None`` for
        a result of a planned probe.
    """
    live = result.confirms
    if live is None:
        return None
    return LiveConfirmation(
        at=result.at, model=result.model, provider=result.provider, task_id=result.task_id, kind=result.kind,
        variant=result.variant, cycle=result.cycle,
        outcome=CONFIRMATION_OUTCOMES.get(result.outcome, "inconclusive"),  # type: ignore[arg-type]
        probe_outcome=result.outcome, probe_reason=result.reason, live=live)


def _confirmed(state: ModelState, event: ProbeResult) -> list[Effect]:
    fact = confirmation_of(event) if event.model == state.model else None
    return [fact] if fact is not None else []


def _result_fast(state: ModelState, event: ProbeResult) -> tuple[ModelState, list[Effect]]:
    cycle = state.open_cycles.get(event.cycle) if event.model == state.model else None
    if cycle is None or event.task_id in cycle.results:
        return state, []
    probe = _planned_probe(event, {p.task_id: p for p in cycle.planned})
    if probe is None:
        return state, []
    new_cycle = msgspec.structs.replace(cycle, results=dict(cycle.results), measured=dict(cycle.measured))
    new = msgspec.structs.replace(state, open_cycles={**state.open_cycles, event.cycle: new_cycle})
    return new, _result(new, new_cycle, event, probe)


def _planned_probe(event: ProbeResult, planned: dict[str, PlannedProbe]) -> PlannedProbe | None:
    """The planned probe ``event`` answers (``None``: not planned in its cycle, or for another provider)."""
    probe = planned.get(event.task_id)
    return probe if probe is not None and probe.provider == event.provider else None


class Folder:
    """The fold of :func:`decide`, over states this object holds, without copying a state per result.

    :func:`decide` is pure: for each probe result it copies the open cycle's
    results and indexes its planned probes, which costs time in proportion to
    the providers of the model -- for every result.  A ``Folder`` applies a
    result in place instead, to a state it owns, and keeps one index of planned
    probes per open cycle, so a result costs the same whatever the model's size.
    Every other event goes through :func:`decide` (a deep copy of the state) the
    first time a model changes after :meth:`share`, and is applied to that copy
    in place after that: a replay, which never shares, copies a state once.
    The states, effects and their order are those of :func:`fold` over the same
    events (``tests/unit/test_judge_folder.py``).

    A state the ``Folder`` was given, or that it handed out since :meth:`share`,
    is never changed: the first result that changes it after that works on a
    copy (of the model's open cycles and of the one cycle's results), so a
    caller can keep the states of the last saved batch while the next one folds
    (the judge service), and a replay that never calls :meth:`share` copies nothing
    after the first result of each cycle.

    Args:
        policy: the thresholds.
        states: model -> state to start from (not changed).
    """

    def __init__(self, policy: Policy, states: dict[str, ModelState] | None = None) -> None:
        self.policy = policy
        self.states: dict[str, ModelState] = dict(states or {})
        self._owned: set[str] = set()  # models whose state object (and open-cycle dict) is this folder's
        self._whole: set[str] = set()  # ... and every part of it, providers and all (a deep copy, or new)
        self._owned_cycles: set[tuple[str, str]] = set()
        #: (model, cycle) -> (the cycle's planned list it was built from, task id -> probe)
        self._index: dict[tuple[str, str], tuple[list[PlannedProbe], dict[str, PlannedProbe]]] = {}

    def share(self) -> None:
        """From now on treat every held state as someone else's: the next change copies it first."""
        self._owned.clear()
        self._whole.clear()
        self._owned_cycles.clear()

    def state(self, model: str) -> ModelState:
        """The state of ``model`` now (its initial state if it has none)."""
        return self.states.get(model) or initial(model)

    def apply(self, model: str, event: Any) -> list[Effect]:
        """Fold ``event`` into ``model``'s state, like ``decide(state, event, policy)``; returns its effects."""
        state = self.states.get(model)
        if state is None:
            state = self.states[model] = initial(model)
            self._owned.add(model)
            self._whole.add(model)
        if isinstance(event, ProbeResult):
            if event.confirms is not None:  # rule 10: no state changes, one fact
                return _confirmed(state, event)
            return self._result(model, state, event)
        if model in self._whole:
            # every part of this state is this folder's: changed in place, as decide() changes its copy
            if not _concerns(state, event):
                return []
            effects = _apply(state, event, self.policy)
            self._forget_index(model)  # a further part of a listing extends a cycle's plan in place
            self._owned_cycles.update((model, c) for c in state.open_cycles)
            return effects
        new, effects = decide(state, event, self.policy)
        if new is not state:
            self.states[model] = new  # a deep copy (decide): every part of it is this folder's
            self._owned.add(model)
            self._whole.add(model)
            self._owned_cycles.difference_update([k for k in self._owned_cycles if k[0] == model])
            self._owned_cycles.update((model, c) for c in new.open_cycles)
            self._forget_index(model)
        return effects

    def _forget_index(self, model: str) -> None:
        for key in [k for k in self._index if k[0] == model]:
            del self._index[key]

    def _result(self, model: str, state: ModelState, event: ProbeResult) -> list[Effect]:
        cycle = state.open_cycles.get(event.cycle) if event.model == state.model else None
        if cycle is None or event.task_id in cycle.results:
            return []
        key = (model, event.cycle)
        entry = self._index.get(key)
        if entry is None or entry[0] is not cycle.planned:  # a cycle whose plan changed (another part) is new
            entry = self._index[key] = (cycle.planned, {p.task_id: p for p in cycle.planned})
        probe = _planned_probe(event, entry[1])
        if probe is None:
            return []
        if model not in self._owned:
            state = self.states[model] = msgspec.structs.replace(state, open_cycles=dict(state.open_cycles))
            self._owned.add(model)
        if key not in self._owned_cycles:
            cycle = state.open_cycles[event.cycle] = msgspec.structs.replace(cycle, results=dict(cycle.results),
                                                                             measured=dict(cycle.measured))
            self._owned_cycles.add(key)
        return _result(state, cycle, event, probe)


_STATE_JSON = msgspec.json.Encoder()
_STATE_DECODER = msgspec.json.Decoder(ModelState)


def _copy(state: ModelState) -> ModelState:
    """A deep copy of ``state``: nothing of it is shared with ``state`` but frozen, scalar-only Structs.

    Everything but the open cycles goes through a JSON round trip (msgspec's C code copies the
    providers, their histories and suspensions faster than a walk in Python).  The open cycles
    are the bulk of a large model's state (a result and a planned probe per provider and kind)
    and hold only frozen :class:`ResultRef` and :class:`PlannedProbe` objects, which nothing
    changes: each cycle is a new object with its own ``planned``, ``results`` and ``parts``
    containers around the same items, a quarter of the round trip's time at 250 providers
    (``benchmarks/judge_bench.py``).
    """
    new = _STATE_DECODER.decode(_STATE_JSON.encode(msgspec.structs.replace(state, open_cycles={})))
    new.open_cycles = {cid: msgspec.structs.replace(c, planned=list(c.planned), results=dict(c.results),
                                                    parts=list(c.parts), measured=dict(c.measured))
                       for cid, c in state.open_cycles.items()}
    return new


def mode_of(state: ModelState, policy: Policy, kind: str | None = None) -> Mode:
    """Observe or enforce, for one probe kind (or the model's own mode), first rule that holds:

    1. an operator's mode for this kind on this model (``canary mode --kind``; a model-wide
       command clears them);
    2. the configured per-kind mode (``kind_modes``), until an operator sets the model's mode;
    3. a new kind (``new_kind_modes``) keeps its default -- observe -- even on a model switched
       to enforce, until an operator switches that kind on this model or configures it in
       ``kind_modes`` (docs/concepts/probes.md, the tool-call contract: a new kind starts in observe);
    4. the model's mode set by an operator, else the configured ``mode``.
    """
    if kind is not None:
        if kind in state.kind_modes:
            return state.kind_modes[kind]
        if kind in policy.kind_modes and state.mode is None:
            return policy.kind_modes[kind]
        if kind in policy.new_kind_modes and kind not in state.switched_kinds and kind not in policy.kind_modes:
            return policy.new_kind_modes[kind]
    return state.mode or policy.mode


def kind_modes_now(state: ModelState, policy: Policy) -> dict[str, Mode]:
    """Every probe kind's mode on this model now (:func:`mode_of`): the judged kinds and the new ones."""
    kinds = sorted(set(policy.kinds) | set(policy.new_kind_modes) | set(policy.kind_modes) | set(state.kind_modes))
    return {kind: mode_of(state, policy, kind) for kind in kinds}


def modes_text(modes: Mapping[str, str]) -> str:
    """``enforce`` (every kind), or ``enforce but observe on tools`` (the most common mode first)."""
    if not modes:
        return "no probe kind"
    counts: dict[str, int] = {}
    for mode in modes.values():
        counts[mode] = counts.get(mode, 0) + 1
    main = min(counts, key=lambda m: (-counts[m], m))
    others = sorted({m for m in modes.values() if m != main})
    if not others:
        return main
    return main + " but " + "; ".join(f"{m} on {', '.join(k for k in sorted(modes) if modes[k] == m)}" for m in others)


def new_kind_note(state: ModelState, policy: Policy, modes: Mapping[str, str]) -> str:
    """What keeps a new kind at its default while the model's mode differs (empty: nothing does)."""
    held = [k for k in sorted(policy.new_kind_modes) if k in modes and k not in state.kind_modes
            and k not in state.switched_kinds and k not in policy.kind_modes
            and modes[k] != (state.mode or policy.mode)]
    return "; ".join(f"{k} stays {modes[k]}: a new probe kind keeps {modes[k]} until an operator switches it "
                     f"(canary mode {state.mode or policy.mode} --kind {k})" for k in held)


def _provider(state: ModelState, provider: str) -> ProviderState:
    ps = state.providers.get(provider)
    if ps is None:
        ps = state.providers[provider] = ProviderState(provider=provider)
    return ps


# -- discovery and results -------------------------------------------------------


def _is_stale(state: ModelState, event: EndpointsDiscovered) -> bool:
    """Already closed, or older than the last closed cycle.

    Compared by time, not by cycle number: the number depends on the cycle
    interval (``epoch // interval``) and drops when an operator lengthens it.
    """
    if event.cycle in state.closed:
        return True
    return state.last_closed_deadline is not None and event.deadline <= state.last_closed_deadline


def _discovered(state: ModelState, event: EndpointsDiscovered, policy: Policy) -> list[Effect]:
    open_cycle = state.open_cycles.get(event.cycle)
    if open_cycle is not None:
        return _another_part(state, open_cycle, event)
    if _is_stale(state, event):
        return []
    effects = _expire(state, event.at, policy)
    controls = {p.provider for p in event.planned if p.control} | set(event.controls.values())
    present = {e.provider for e in event.endpoints} - controls
    for name, ps in state.providers.items():
        ps.present = name in present
    for name in sorted(present):
        _provider(state, name).present = True
    state.open_cycles[event.cycle] = OpenCycle(
        cycle=event.cycle,
        cycle_no=event.cycle_no,
        opened_at=event.at,
        deadline=event.deadline,
        planned=list(event.planned),
        parts=[event.part] if event.parts > 1 else [],
    )
    # A cycle whose close never came cannot be judged; forget the oldest beyond a few.
    for cid, _ in sorted(state.open_cycles.items(), key=lambda kv: kv[1].deadline)[:-OPEN_MEMORY]:
        del state.open_cycles[cid]
    state.last_cycle_no = max(state.last_cycle_no, event.cycle_no)
    state.updated_at = event.at
    return effects


def _another_part(state: ModelState, cycle: OpenCycle, event: EndpointsDiscovered) -> list[Effect]:
    """Merge a further part of a large model's listing into its open cycle (once per part).

    The first part to arrive opened the cycle and marked the providers it
    listed present; each further part adds its planned probes and marks its
    providers present, so that once every part is folded the cycle is the
    one a single message would have opened (docs/concepts/messages.md, "Bounds").
    """
    if event.parts <= 1 or event.part in cycle.parts:
        return []
    cycle.parts.append(event.part)
    known = {p.task_id for p in cycle.planned}
    cycle.planned.extend(p for p in event.planned if p.task_id not in known)
    controls = {p.provider for p in event.planned if p.control} | set(event.controls.values())
    for name in sorted({e.provider for e in event.endpoints} - controls):
        _provider(state, name).present = True
    return []


def _result(state: ModelState, cycle: OpenCycle, event: ProbeResult, probe: PlannedProbe) -> list[Effect]:
    """Record ``event`` (a result ``probe`` planned, new to ``cycle``) in ``cycle``, which ``state`` owns."""
    cycle.results[event.task_id] = ResultRef(
        task_id=event.task_id,
        cycle=event.cycle,
        kind=event.kind,
        outcome=event.outcome,
        reason=event.reason,
        language=event.language,
    )
    measured = measured_of(event)
    if measured is not None:
        cycle.measured[event.task_id] = measured
    state.updated_at = event.at
    if (event.kind == "language" and event.outcome in ("fail", "inconclusive") and event.language
            and event.reason in LANGUAGE_ANOMALIES and not probe.control):
        return [
            RetestRequested(
                at=event.at,
                model=state.model,
                provider=event.provider,
                language=event.language,
                for_cycle_no=cycle.cycle_no + 1,
                reason=event.reason or event.outcome,
                source_task_id=event.task_id,
            )
        ]
    return []


def _snapshot(state: ModelState, event: IgnoreSnapshot) -> list[Effect]:
    if event.version <= state.routing.version:
        return []
    ignored: dict[str, datetime | None] = {}
    for entry in event.entries:
        others = [r for r in entry.reasons if r.layer != "suspension"]
        if others:
            ends = [r.until for r in others]
            ignored[entry.provider] = None if any(u is None for u in ends) else max(u for u in ends if u)
    state.routing = RoutingView(version=event.version, ignored=ignored)
    return []


# -- closing a cycle -------------------------------------------------------------


def _close_cycle(state: ModelState, event: CycleClosed, policy: Policy) -> list[Effect]:
    cycle = state.open_cycles.pop(event.cycle, None)
    if cycle is None:
        return []
    at = event.at

    by_provider: dict[str, list[PlannedProbe]] = {}
    control_results: dict[str, list[ResultRef]] = {}
    for p in cycle.planned:
        if p.control:
            if p.task_id in cycle.results:
                control_results.setdefault(p.kind, []).append(cycle.results[p.task_id])
        else:
            by_provider.setdefault(p.provider, []).append(p)
    # a control with several results of a kind (the tool probe's variants) proves the kind when one of them failed
    unproven = sorted(k for k, refs in control_results.items()
                      if any(r.outcome == "pass" for r in refs) and not any(r.outcome == "fail" for r in refs))
    common_mode = _common_mode(cycle, by_provider, set(unproven), policy)
    frozen_kinds = set(unproven) | set(common_mode)
    facts, notes = _template_facts(cycle, by_provider, policy)
    # the verdicts first (pure): who is blind this cycle decides whose suspensions are held
    verdicts = [_provider_verdict(provider, by_provider[provider], cycle, frozen_kinds, facts.get(provider, []), notes)
                for provider in sorted(by_provider)]
    blind_now = sorted(v.provider for v in verdicts if v.verdict == "blind")

    effects: list[Effect] = _expire(state, at, policy, keep=set(blind_now))
    held = _hold(state, blind_now, at, cycle.opened_at, cycle.cycle_no, policy)
    state.closed = [*[c for c in state.closed if c != cycle.cycle], cycle.cycle][-CLOSED_MEMORY:]
    if state.last_closed_deadline is None or cycle.deadline > state.last_closed_deadline:
        state.last_closed_deadline = cycle.deadline
    state.updated_at = at

    decisions: list[Decision] = []
    for kind in unproven:
        decisions.append(_decision(state, ControlPassed, "", at, anchor=f"{kind}|{cycle.cycle_no}",
                                   reason="control_passed", kind=kind, cycles=[cycle.cycle],
                                   detail=f"the positive control passed the {kind} probe: this cycle's {kind} results prove nothing",
                                   evidence=control_results[kind], policy=policy))
    for kind, (failing, probed) in sorted(common_mode.items()):
        decisions.append(_decision(state, CommonMode, "", at, anchor=f"{kind}|{cycle.cycle_no}",
                                   reason="common_mode", kind=kind, cycles=[cycle.cycle],
                                   detail=f"{failing} of {probed} probed providers failed {kind}: frozen for everyone this cycle",
                                   policy=policy))

    for name, ps in state.providers.items():
        if name not in by_provider:
            ps.pin_reported = False  # not probed this cycle: a violation when it is again is news
    for verdict in verdicts:
        provider = verdict.provider
        ps = _provider(state, provider)
        if verdict.verdict == "blind":
            ps.blind_since = ps.blind_since or cycle.opened_at
        elif ps.blind_since is not None:  # judged again: a suspension held past its end ends now
            ps.blind_since = None
            effects.extend(_release(state, provider, at, cycle.cycle_no, policy))
        _apply_streaks(ps, verdict, cycle)
        ps.history = [*ps.history, VerdictRecord(cycle=cycle.cycle, cycle_no=cycle.cycle_no, at=at,
                                                 verdict=verdict.verdict, reasons=verdict.reasons,
                                                 results=[r for r in verdict.results if r.outcome != "pass"])
                          ][-HISTORY:]
        _score_shadow_calls(state, ps, verdict.verdict, at, policy)
        violated = [r for r in verdict.results if r.reason == "pin_violated"]
        if not violated and verdict.verdict != "blind" and verdict.results:
            ps.pin_reported = False  # every probe served by the pinned provider: a later violation is news
        if violated and not ps.pin_reported:
            ps.pin_reported = True
            kinds = sorted({r.kind for r in violated})
            decisions.append(_decision(state, PinViolated, provider, at, anchor=f"{cycle.cycle_no}",
                                       reason="pin_violated", cycles=[cycle.cycle], evidence=violated,
                                       detail=(f"the gateway served {len(violated)} probe(s) pinned to this provider "
                                               f"from another provider ({', '.join(kinds)}): they prove nothing"),
                                       policy=policy))

    decisions.extend(_recoveries(state, cycle, at, policy))
    decisions.extend(_suspensions(state, cycle, at, policy))
    decisions.extend(_unjudgeable(state, cycle, at, policy))
    _peer_latency(state, cycle, by_provider, {v.provider for v in verdicts if v.verdict != "blind"}, policy)

    effects.insert(0, CycleVerdict(at=at, model=state.model, cycle=cycle.cycle, cycle_no=cycle.cycle_no,
                                   verdicts=verdicts, unproven=unproven, common_mode=sorted(common_mode)))
    if blind_now:
        causes = [r.reason or "blind" for pv in verdicts if pv.verdict == "blind" for r in pv.results
                  if r.outcome == "blind"]
        effects.extend(_went_blind(state, _most_common(causes), at, cycle.cycle_no, [cycle.cycle], held,
                                   f"{len(blind_now)} of {len(verdicts)} provider(s) could not be seen in cycle "
                                   f"{cycle.cycle} ({', '.join(sorted(set(causes)))})", policy))
    elif verdicts and state.blind_since is not None:
        effects.append(_sees(state, at, cycle, len(verdicts), policy))
    effects.extend(held)
    effects.extend(decisions)
    effects.extend(_missing_language_retests(state, cycle, by_provider, at))
    return effects


def _missing_language_retests(state: ModelState, cycle: OpenCycle, by_provider: dict[str, list[PlannedProbe]],
                              at: datetime) -> list[RetestRequested]:
    """A language probe whose result never came is probed again next cycle.

    Its language is unproven, like an anomaly's (docs/concepts/probes.md, the language contract); above
    all, when it was itself the retest of an anomaly, the chain of retests must
    not end on a late result, or a provider that drifts in one language only
    could pass the next cycles in other languages and recover while still
    broken.
    """
    return [
        RetestRequested(at=at, model=state.model, provider=p.provider, language=p.language,
                        for_cycle_no=cycle.cycle_no + 1, reason="missing", source_task_id=p.task_id)
        for provider in sorted(by_provider) for p in by_provider[provider]
        if p.kind == "language" and p.language and p.task_id not in cycle.results
    ]


def _common_mode(cycle: OpenCycle, by_provider: dict[str, list[PlannedProbe]], unproven: set[str],
                 policy: Policy) -> dict[str, tuple[int, int]]:
    """Per probe kind (but ``unproven``): (providers failing it, providers probed by it) where too many fail.

    One pass over the planned probes (each provider's results grouped by kind), not one per kind.
    """
    counts: dict[str, list[int]] = {}  # kind -> [failing, probed]
    results = cycle.results
    for plans in by_provider.values():
        failed: dict[str, bool] = {}  # kind -> any counted result of it failed
        for p in plans:
            ref = results.get(p.task_id)
            if ref is None or p.kind in unproven or ref.outcome in ("not_applicable", "blind"):
                continue
            failed[p.kind] = failed.get(p.kind, False) or ref.outcome == "fail"
        for kind, fail in failed.items():
            count = counts.setdefault(kind, [0, 0])
            count[0] += fail
            count[1] += 1
    return {kind: (failing, probed) for kind, (failing, probed) in counts.items()
            if probed >= policy.common_mode_min_providers and failing > policy.common_mode_share * probed}


def _provider_verdict(provider: str, plans: list[PlannedProbe], cycle: OpenCycle, frozen_kinds: set[str],
                      facts: Sequence[ResultRef] = (), notes: Mapping[tuple[str, str], str] | None = None
                      ) -> ProviderVerdict:
    """One provider's verdict from its planned probes' results and the facts across its peers (``facts``).

    ``notes``: (kind, task id) -> the text a fact's reason is shown with in the verdict's
    reasons (the peers' value and this one's).
    """
    results: list[ResultRef] = []
    missing: list[str] = []
    for p in plans:
        ref = cycle.results.get(p.task_id)
        if ref is None:
            missing.append(p.task_id)
        else:
            results.append(ref)
    results.extend(facts)
    counted = [r for r in results if r.kind not in frozen_kinds]
    fails = [r for r in counted if r.outcome == "fail"]
    if fails:
        noted = notes or {}
        reasons = sorted({noted.get((r.kind, r.task_id)) or f"{r.kind}:{r.reason or 'fail'}" for r in fails})
        return ProviderVerdict(provider=provider, verdict="failed", reasons=reasons, results=results, missing=missing)
    blind = [r for r in results if r.outcome == "blind"]
    if blind:  # the canary could not see it: no evidence either way
        reasons = sorted({f"{r.kind}:{r.reason or 'blind'}" for r in blind})
        return ProviderVerdict(provider=provider, verdict="blind", reasons=reasons, results=results, missing=missing)
    reasons = []
    for r in results:
        if r.kind in frozen_kinds:
            reasons.append(f"{r.kind}:frozen_kind")
        elif r.outcome in ("transport_error", "inconclusive"):
            reasons.append(f"{r.kind}:{r.reason or r.outcome}")
    if missing:
        reasons.append(f"missing:{len(missing)}")
    passes = [r for r in counted if r.outcome == "pass"]
    if not reasons and passes:
        return ProviderVerdict(provider=provider, verdict="passed", results=results)
    if not reasons:
        reasons.append("no_evidence")
    return ProviderVerdict(provider=provider, verdict="frozen", reasons=sorted(set(reasons)), results=results, missing=missing)


def _apply_streaks(ps: ProviderState, verdict: ProviderVerdict, cycle: OpenCycle) -> None:
    failed, passed, frozen = STREAK_TRANSITIONS[verdict.verdict]
    if failed is not None:
        ps.failed_streak = ps.failed_streak + 1 if failed > 0 else 0
    if passed is not None:
        ps.passed_streak = ps.passed_streak + 1 if passed > 0 else 0
    if frozen is not None:
        ps.frozen_streak = ps.frozen_streak + 1 if frozen > 0 else 0
    if verdict.verdict == "failed":
        ps.streak_cycles = [*ps.streak_cycles, cycle.cycle][-8:]
        ps.streak_evidence = [*ps.streak_evidence, *[r for r in verdict.results if r.outcome == "fail"]][-16:]
    elif verdict.verdict == "passed":
        ps.streak_cycles = []
        ps.streak_evidence = []
    if verdict.verdict not in ("frozen", "blind"):
        ps.unjudgeable_reported = False


# -- facts across the providers of a model ------------------------------------------
#
# Every provider of a model gets the same fixed prompt in a cycle, so some faults only show
# when its numbers are set beside its peers' (docs/concepts/probes.md, facts across the providers
# of a model): a prompt token count unlike theirs (another chat template or tokenizer), more
# completion tokens than the request allowed, a first-token median far above theirs.

#: The largest token count or time (ms) a result's numbers are read up to (beyond: not read).
_COUNT_MAX = 10_000_000
_MS_MAX = 3_600_000.0


def _count(value: Any) -> int | None:
    """A token count as the usage reported it: a whole number from 0 to :data:`_COUNT_MAX`, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not 0 <= value <= _COUNT_MAX or value != int(value):
        return None  # also NaN (fails both comparisons)
    return int(value)


def measured_of(event: ProbeResult) -> Measured | None:
    """The numbers of ``event`` the facts across its model's providers read (``None``: none to read).

    Read from the reply's evidence: ``usage.prompt_tokens`` and ``usage.completion_tokens``
    (whole, 0 to 10 million), the request's ``max_tokens``, the time to first token
    (``reply.ttft_ms``; for a ttft probe that failed with no first token at all, its bar
    ``ttft_threshold_ms``: it was at least that slow).  A result that says nothing of the
    pinned provider -- served by another (``pin_violated``), blind, a transport error, not
    applicable -- has none.
    """
    if event.outcome in ("transport_error", "blind", "not_applicable") or event.reason == "pin_violated":
        return None
    usage = event.reply.usage if isinstance(event.reply.usage, dict) else {}
    ttft = event.reply.ttft_ms
    if ttft is None and event.kind == "ttft" and event.outcome == "fail" and event.ttft_threshold_ms > 0:
        ttft = event.ttft_threshold_ms
    if ttft is not None and not 0 <= ttft <= _MS_MAX:
        ttft = None
    measured = Measured(prompt_tokens=_count(usage.get("prompt_tokens")),
                        completion_tokens=_count(usage.get("completion_tokens")), max_tokens=event.max_tokens,
                        ttft_ms=None if ttft is None else round(float(ttft), 1),
                        prompt_version=event.prompt_version)
    if measured.prompt_tokens is None and measured.completion_tokens is None and measured.ttft_ms is None:
        return None
    return measured


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _template_facts(cycle: OpenCycle, by_provider: Mapping[str, list[PlannedProbe]], policy: Policy
                    ) -> tuple[dict[str, list[ResultRef]], dict[tuple[str, str], str]]:
    """The ``template`` facts of a cycle: per provider, a failed result for each count unlike its peers'.

    - ``prompt_tokens_differ``: results of the same probe kind, language, variant and prompt
      version sent the same prompt, so each provider's ``usage.prompt_tokens`` for it should be
      its peers' (compared only within that key: languages rotate per provider).  With at least
      ``template_min_providers`` providers reporting a key, the peers' count is their median (the
      lower middle one); it counts only when more than half of them are within the tolerance
      (the larger of ``template_tolerance_tokens`` and ``template_tolerance_share`` of it), and
      then each provider outside it applies another chat template or tokenizer, or bills tokens
      it did not read (the vendors' verifiers compare exactly this).
    - ``max_tokens_ignored``: a reply with more ``completion_tokens`` than its request's
      ``max_tokens`` did not honour the parameter -- judged when at least
      ``template_min_providers`` providers reported completion tokens in the cycle and at most
      half of them exceeded it (when most do, the model or the gateway counts otherwise).

    One result per provider and key (its first planned); controls are not among ``by_provider``.

    Returns:
        ``(facts, notes)``: provider -> its failed ``template`` references (the task id is the
        probe result that showed it: its evidence), and (kind, task id) -> the verdict reason
        that names this provider's count and the peers'.
    """
    counts: dict[tuple[str, str, str, str], dict[str, tuple[int, str]]] = {}
    over: dict[str, tuple[int, int, str]] = {}  # provider -> (completion, max, task id): its first reply above max_tokens
    completing: set[str] = set()
    for provider in sorted(by_provider):
        for p in by_provider[provider]:
            m = cycle.measured.get(p.task_id)
            if m is None or p.task_id not in cycle.results:
                continue
            if m.prompt_tokens is not None:
                key = (p.kind, p.language or "", p.variant, m.prompt_version)
                counts.setdefault(key, {}).setdefault(provider, (m.prompt_tokens, p.task_id))
            if m.completion_tokens is not None and m.max_tokens > 0:
                completing.add(provider)
                if m.completion_tokens > m.max_tokens and provider not in over:
                    over[provider] = (m.completion_tokens, m.max_tokens, p.task_id)
    facts: dict[str, list[ResultRef]] = {}
    notes: dict[tuple[str, str], str] = {}

    def fact(provider: str, task_id: str, reason: str, note: str) -> None:
        facts.setdefault(provider, []).append(ResultRef(task_id=task_id, cycle=cycle.cycle, kind="template",
                                                        outcome="fail", reason=reason))
        notes[("template", task_id)] = f"template:{reason} ({note})"[:128]

    for prompt in sorted(counts):
        reported = counts[prompt]
        if len(reported) < policy.template_min_providers:
            continue
        values = sorted(v for v, _ in reported.values())
        peers = values[(len(values) - 1) // 2]
        tolerance = max(policy.template_tolerance_tokens, policy.template_tolerance_share * peers)
        if 2 * sum(1 for v in values if abs(v - peers) <= tolerance) <= len(values):
            continue  # no count most of them agree on: nothing to compare with
        kind, language, variant, _ = prompt
        what = "/".join(x for x in (kind, language, variant) if x)
        for provider, (value, task_id) in sorted(reported.items()):
            if abs(value - peers) > tolerance:
                fact(provider, task_id, "prompt_tokens_differ",
                     f"{what}: prompt_tokens {value}, peers {peers}")
    if len(completing) >= policy.template_min_providers and 2 * len(over) <= len(completing):
        for provider, (completion, budget, task_id) in sorted(over.items()):
            fact(provider, task_id, "max_tokens_ignored", f"completion_tokens {completion} > max_tokens {budget}")
    return facts, notes


def _peer_latency(state: ModelState, cycle: OpenCycle, by_provider: Mapping[str, list[PlannedProbe]],
                  judged: AbstractSet[str], policy: Policy) -> None:
    """Update each probed provider's first-token window and ``slow_vs_peers`` at a close.

    Each provider of ``judged`` (probed this cycle and not blind) adds this cycle's ttft
    probes' median time to first token (``None``: none measured) to its last
    ``slow_vs_peers_window_cycles``; its median over them counts once at least half the
    window is measured.  With at least ``slow_vs_peers_min_providers`` such medians among the
    providers probed this cycle, the bar is their median plus ``slow_vs_peers_k`` times their
    median absolute deviation (at least ``slow_vs_peers_min_spread_ms``), and a provider
    above it is ``slow_vs_peers``.  Shown, never a suspension: nothing here touches a
    streak or a verdict (the 10 s first-token bar stays the contract).
    """
    window = policy.slow_vs_peers_window_cycles
    medians: dict[str, float] = {}
    for provider in sorted(by_provider):
        ps = _provider(state, provider)
        if provider in judged:
            times = [m.ttft_ms for p in by_provider[provider] if p.kind == "ttft"
                     for m in [cycle.measured.get(p.task_id)] if m is not None and m.ttft_ms is not None]
            ps.ttft_recent_ms = [*ps.ttft_recent_ms, round(_median(times), 1) if times else None][-window:]
        measured = [t for t in ps.ttft_recent_ms if t is not None]
        ps.ttft_median_ms = round(_median(measured), 1) if measured and 2 * len(measured) >= window else None
        if ps.ttft_median_ms is not None:
            medians[provider] = ps.ttft_median_ms
    for name, ps in state.providers.items():
        if name not in by_provider:
            ps.slow_vs_peers = False  # not probed: nothing to compare now
    if len(medians) < policy.slow_vs_peers_min_providers:
        state.ttft_peer_median_ms = state.ttft_peer_bar_ms = None
        for provider in by_provider:
            state.providers[provider].slow_vs_peers = False
        return
    center = _median(list(medians.values()))
    spread = max(_median([abs(v - center) for v in medians.values()]), policy.slow_vs_peers_min_spread_ms)
    bar = round(center + policy.slow_vs_peers_k * spread, 1)
    state.ttft_peer_median_ms, state.ttft_peer_bar_ms = round(center, 1), bar
    for provider in by_provider:
        median = medians.get(provider)
        state.providers[provider].slow_vs_peers = median is not None and median > bar


# -- suspensions ---------------------------------------------------------------


def _expire(state: ModelState, at: datetime, policy: Policy, keep: AbstractSet[str] = frozenset()) -> list[Effect]:
    """End every suspension past its ``until`` at ``at`` (rule 1), but those of ``keep`` (blind now: see :func:`_hold`)."""
    out: list[Effect] = []
    for name in sorted(state.providers):
        ps = state.providers[name]
        s = ps.suspension
        if name in keep:
            continue  # blind now: :func:`_hold` decides
        if s is not None and s.until <= at:
            out.append(_end_expired(state, name, policy))
    return out


def _end_expired(state: ModelState, name: str, policy: Policy) -> Decision:
    """End ``name``'s suspension at its ``until`` (rule 1)."""
    ps = state.providers[name]
    s = ps.suspension
    assert s is not None
    ended = SuspensionEnded if s.enforced else WouldEnd
    decision = _decision(state, ended, name, s.until, anchor=s.decision_id, reason="expired",
                         detail=f"suspension ended at its expiry ({utc_text(s.until)})",
                         cycles=s.cycles, ladder_level=s.level, policy=policy)
    ps.suspension = None
    ps.failed_streak = 0
    ps.streak_cycles, ps.streak_evidence = [], []
    return decision


# -- the canary's own health ------------------------------------------------------


def _hold(state: ModelState, providers: list[str], at: datetime, since: datetime, cycle_no: int,
          policy: Policy) -> list[Decision]:
    """At a blind moment ``at``: hold each of ``providers``' suspensions that comes due, expire the lapsed.

    A suspension that comes due before ``at + blind_hold_s`` is held there
    (``suspension_held``; its first ``until`` kept as ``due``).  One whose
    ``until`` had passed before the blindness began -- ``since`` for a provider
    that was not blind yet, ``at`` for one already blind whose hold lapsed (no
    blind moment for ``blind_hold_s``: the services stopped) -- ends at its
    ``until`` as rule 1 says.
    """
    out: list[Decision] = []
    horizon = at + timedelta(seconds=policy.blind_hold_s)
    for name in providers:
        ps = state.providers.get(name)
        s = ps.suspension if ps is not None else None
        if ps is None or s is None:
            continue
        if s.until <= (at if ps.blind_since is not None else since):
            out.append(_end_expired(state, name, policy))
            continue
        if s.until >= horizon:
            continue
        s.due = s.due or s.until
        s.until = horizon
        out.append(_timed(state, SuspensionHeld, name, at, anchor=f"{cycle_no}", reason="canary_blind",
                             detail=(f"came due at {utc_text(s.due)} while the canary could not see it: held until "
                                     f"{utc_text(horizon)}, renewed while blind, until a cycle judges it again "
                                     "or an operator lifts it"),
                             until=horizon, ladder_level=s.level, cycles=s.cycles,
                             mode="enforce" if s.enforced else "observe", policy=policy))
    return out


def _release(state: ModelState, provider: str, at: datetime, cycle_no: int, policy: Policy) -> list[Decision]:
    """A cycle judged ``provider`` again: a held suspension whose own ``until`` passed ends now."""
    ps = state.providers[provider]
    s = ps.suspension
    if s is None or s.due is None or s.due > at:
        return []
    ended = SuspensionEnded if s.enforced else WouldEnd
    decision = _decision(state, ended, provider, at, anchor=s.decision_id, reason="expired",
                         detail=(f"due at {utc_text(s.due)}, held while the canary could not see it; "
                                 f"judged again in cycle {cycle_no}"),
                         cycles=s.cycles, ladder_level=s.level, policy=policy)
    ps.suspension = None
    ps.failed_streak = 0
    ps.streak_cycles, ps.streak_evidence = [], []
    return [decision]


def _held_list(state: ModelState, held: list[Decision]) -> list[HeldSuspension]:
    out = []
    for d in held:
        ps = state.providers.get(d.provider)
        s = ps.suspension if ps is not None else None
        if isinstance(d, SuspensionHeld) and s is not None:
            out.append(HeldSuspension(provider=d.provider, until=s.due or d.until, held_until=d.until,
                                      decision_id=s.decision_id))
    return out


def _went_blind(state: ModelState, cause: str, at: datetime, cycle_no: int, cycles: list[str],
                held: list[Decision], detail: str, policy: Policy) -> list[Decision]:
    """``canary_blind`` once, when the model goes blind (reason: the cause; ``held``: what it holds now)."""
    if state.blind_since is not None:
        return []
    state.blind_since, state.blind_cause = at, cause
    held_now = _held_list(state, held)
    # the reason is the cause another service reported (a blind probe's, an unplanned cycle's) or ``blind``
    fields = _fields(state, "canary_blind", "", at, anchor=f"{cycle_no}", reason=cause, cycles=cycles,
                     detail=detail + (f"; {len(held_now)} suspension(s) held while blind" if held_now else ""),
                     policy=policy)
    return [CanaryBlind(**fields, held=held_now)]


def _sees(state: ModelState, at: datetime, cycle: OpenCycle, judged: int, policy: Policy) -> Decision:
    """``canary_sees``: the first close after ``canary_blind`` that judged providers and none blind."""
    since, cause = state.blind_since, state.blind_cause
    state.blind_since, state.blind_cause = None, ""
    return _decision(state, CanarySees, "", at, anchor=f"{cycle.cycle_no}", reason="judged_again",
                     cycles=[cycle.cycle],
                     detail=(f"cycle {cycle.cycle} judged {judged} provider(s) again; blind since "
                             f"{utc_text(since)} ({cause})"), policy=policy)


def _most_common(causes: list[str]) -> str:
    if not causes:
        return "blind"
    counts: dict[str, int] = {}
    for c in causes:
        counts[c] = counts.get(c, 0) + 1
    return min(counts, key=lambda c: (-counts[c], c))


def _unplanned(state: ModelState, event: CycleUnplanned, policy: Policy) -> list[Effect]:
    """A cycle discovery could not plan: every listed provider blind for it, nothing else judged."""
    if event.cycle in state.closed:
        return []
    if state.last_closed_deadline is not None and event.deadline <= state.last_closed_deadline:
        return []
    at = event.at
    state.open_cycles.pop(event.cycle, None)  # a plan published in part before discovery gave up
    state.closed = [*state.closed, event.cycle][-CLOSED_MEMORY:]
    state.last_cycle_no = max(state.last_cycle_no, event.cycle_no)
    state.updated_at = at
    listed = sorted(name for name, ps in state.providers.items() if ps.present)
    effects: list[Effect] = list(_expire(state, at, policy, keep=set(listed)))
    held = _hold(state, listed, at, at, event.cycle_no, policy)
    reason = f"unplanned:{event.cause}"[:128]
    verdicts = []
    for name in listed:
        ps = state.providers[name]
        ps.blind_since = ps.blind_since or at
        ps.history = [*ps.history, VerdictRecord(cycle=event.cycle, cycle_no=event.cycle_no, at=at, verdict="blind",
                                                 reasons=[reason])][-HISTORY:]
        verdicts.append(ProviderVerdict(provider=name, verdict="blind", reasons=[reason]))
    status = f" (HTTP {event.http_status})" if event.http_status is not None else ""
    detail = (f"cycle {event.cycle} could not be planned: {event.cause}{status} after {event.attempts} "
              f"attempt(s); nothing was probed")
    out: list[Effect] = [CycleVerdict(at=at, model=state.model, cycle=event.cycle, cycle_no=event.cycle_no,
                                      verdicts=verdicts), *effects]
    out.extend(_went_blind(state, event.cause, at, event.cycle_no, [event.cycle], held, detail, policy))
    out.extend(held)
    return out


def _recoveries(state: ModelState, cycle: OpenCycle, at: datetime, policy: Policy) -> list[Decision]:
    out: list[Decision] = []
    for name in sorted(state.providers):
        ps = state.providers[name]
        s = ps.suspension
        if s is None or ps.passed_streak < policy.passed_cycles_to_recover:
            continue
        ended = SuspensionEnded if s.enforced else WouldEnd
        recent = [h.cycle for h in ps.history[-policy.passed_cycles_to_recover:]]
        out.append(_decision(state, ended, name, at, anchor=f"{cycle.cycle_no}", reason="recovered",
                             detail=f"{ps.passed_streak} passed cycles in a row during the suspension",
                             cycles=recent, ladder_level=s.level, policy=policy))
        ps.suspension = None
        ps.failed_streak = 0
    return out


def _usable_hosts(state: ModelState, at: datetime, *, count_shadow: bool) -> set[str]:
    usable = set()
    for name, ps in state.providers.items():
        if not ps.present:
            continue
        until = state.routing.ignored.get(name, at)
        if name in state.routing.ignored and (until is None or until > at):
            continue
        s = ps.suspension
        if s is not None and (s.enforced or count_shadow):
            continue
        usable.add(name)
    return usable


def enforced_at_close(state: ModelState, policy: Policy, record: VerdictRecord) -> bool:
    """Whether a failed cycle's close changes routing: a kind that failed in it is in enforce mode now.

    The mode decides the action, never the evidence (docs/concepts/judge.md, "Observe and enforce"): the streak
    counts every failed cycle whatever the mode was then; the mode, at this close, of the
    kinds that failed in this closing cycle decides ``suspend`` or ``would_suspend``.
    """
    return any(mode_of(state, policy, r.kind) == "enforce" for r in record.results if r.outcome == "fail")


def _suspensions(state: ModelState, cycle: OpenCycle, at: datetime, policy: Policy) -> list[Decision]:
    out: list[Decision] = []
    need = policy.failed_cycles_to_suspend
    enforced_now: dict[str, bool] = {}
    for ps in state.providers.values():
        if (ps.failed_streak >= need and ps.history and ps.history[-1].cycle == cycle.cycle
                and ps.history[-1].verdict == "failed"):
            enforced_now[ps.provider] = enforced_at_close(state, policy, ps.history[-1])
    # a shadow suspension gives way to a real one at a close whose failed kinds are enforced
    candidates = [ps for ps in state.providers.values() if ps.provider in enforced_now
                  and (ps.suspension is None or (not ps.suspension.enforced and enforced_now[ps.provider]))]
    candidates.sort(key=lambda ps: (-ps.failed_streak, ps.provider))
    for ps in candidates:
        enforced = enforced_now[ps.provider]
        usable = _usable_hosts(state, at, count_shadow=not enforced)
        remaining = usable - {ps.provider}
        cycles = ps.streak_cycles[-need:]
        evidence = [r for r in ps.streak_evidence if r.cycle in cycles]
        if len(remaining) < policy.min_hosts:
            out.append(_decision(state, FloorHeld, ps.provider, at, anchor=f"{cycle.cycle_no}",
                                 reason="capacity_floor", cycles=cycles, evidence=evidence,
                                 detail=(f"{ps.failed_streak} failed cycles in a row, but only {len(remaining)} usable "
                                         f"host(s) would remain (floor {policy.min_hosts}): not suspended"),
                                 mode="enforce" if enforced else "observe", policy=policy))
            continue
        # observe mode climbs a ladder of its own: shadow calls never lengthen real suspensions
        last = ps.last_suspension_at if enforced else ps.last_shadow_at
        if last is not None and (at - last).total_seconds() >= policy.ladder_reset_s:
            if enforced:
                ps.ladder_level = 0
            else:
                ps.shadow_level = 0
        level = ps.ladder_level if enforced else ps.shadow_level
        length = policy.ladder_s[min(level, len(policy.ladder_s) - 1)]
        until = at + timedelta(seconds=length)
        starts = Suspended if enforced else WouldSuspend
        decision = _timed(state, starts, ps.provider, at, anchor=f"{cycle.cycle_no}", reason="failed_cycles",
                             detail=(f"{ps.failed_streak} failed cycles in a row ({', '.join(sorted({r.kind + ':' + r.reason for r in evidence}))}); "
                                     f"ladder step {level + 1}: {human_duration(length)}"),
                             until=until, ladder_level=level + 1, cycles=cycles, evidence=evidence,
                             mode="enforce" if enforced else "observe", policy=policy)
        out.append(decision)
        ps.suspension = Suspension(decision_id=decision.decision_id, since=at, until=until, level=level + 1,
                                   enforced=enforced, cycles=cycles, evidence=evidence)
        if enforced:
            ps.ladder_level, ps.last_suspension_at = level + 1, at
            ps.failed_streak = ps.passed_streak = 0
            ps.streak_cycles, ps.streak_evidence = [], []
        else:
            # a shadow call consumes no evidence: the streak goes on, so that the first failed
            # cycle after a switch to enforce suspends at once (it is the streak's next cycle)
            ps.shadow_level, ps.last_shadow_at = level + 1, at
            ps.passed_streak = 0
        if not enforced:
            state.shadow_calls = [*state.shadow_calls, ShadowCall(decision_id=decision.decision_id,
                                                                   provider=ps.provider, at=at)][-SHADOW_MEMORY:]
    return out


def _score_shadow_calls(state: ModelState, ps: ProviderState, verdict: str, at: datetime, policy: Policy) -> None:
    for call in state.shadow_calls:
        if call.provider != ps.provider or call.outcome != "pending" or call.at >= at:
            continue
        if verdict == "failed":
            call.outcome, call.resolved_at = "right", at
        elif verdict == "passed" and ps.passed_streak >= policy.passed_cycles_to_recover:
            call.outcome, call.resolved_at = "wrong", at


def _unjudgeable(state: ModelState, cycle: OpenCycle, at: datetime, policy: Policy) -> list[Decision]:
    out: list[Decision] = []
    for name in sorted(state.providers):
        ps = state.providers[name]
        if ps.frozen_streak >= policy.unjudgeable_after and not ps.unjudgeable_reported:
            ps.unjudgeable_reported = True
            frozen = [h for h in ps.history if h.verdict == "frozen"][-ps.frozen_streak:]  # blind cycles say nothing
            reasons = sorted({r for h in frozen for r in h.reasons})
            out.append(_decision(state, Unjudgeable, name, at, anchor=f"{cycle.cycle_no}", reason="frozen_too_long",
                                 detail=f"frozen {ps.frozen_streak} cycles in a row ({', '.join(reasons)})",
                                 cycles=[h.cycle for h in frozen], policy=policy))
    return out


# -- operator commands ------------------------------------------------------------


def _remember(state: ModelState, command_id: str) -> bool:
    if command_id in state.commands:
        return False
    state.commands = [*state.commands, command_id][-COMMAND_MEMORY:]
    return True


def _lift(state: ModelState, cmd: LiftSuspension, policy: Policy) -> list[Effect]:
    if not _remember(state, cmd.command_id):
        return []
    ps = state.providers.get(cmd.provider)
    if ps is None or ps.suspension is None:
        return []
    s = ps.suspension
    ended = SuspensionEnded if s.enforced else WouldEnd
    decision = _decision(state, ended, cmd.provider, cmd.at, anchor=cmd.command_id, reason="lifted",
                         detail=f"lifted by {cmd.actor}: {cmd.reason}", cycles=s.cycles, ladder_level=s.level,
                         actor=cmd.actor, policy=policy)
    ps.suspension = None
    ps.failed_streak = ps.passed_streak = ps.frozen_streak = 0
    ps.streak_cycles, ps.streak_evidence = [], []
    state.updated_at = cmd.at
    return [decision]


def _set_mode(state: ModelState, cmd: SetMode, policy: Policy) -> list[Effect]:
    """An operator's mode: for one kind, or model-wide (which clears every per-kind mode of the model).

    ``mode_changed`` says what the state now holds, read back with :func:`mode_of`, never the
    request: the kinds' modes before and after, the per-kind modes a model-wide mode cleared,
    a new kind that stays at its default.  A command that changes no kind's mode is a no-op:
    remembered, no decision (its answer says it changed nothing).
    """
    if not _remember(state, cmd.command_id):
        return []
    before = kind_modes_now(state, policy)
    cleared = {}
    if cmd.kind is None:
        cleared = dict(state.kind_modes)
        state.mode = cmd.mode
        state.kind_modes = {}
    else:
        state.kind_modes = {**state.kind_modes, cmd.kind: cmd.mode}
        if cmd.kind in policy.new_kind_modes and before.get(cmd.kind) != cmd.mode:
            state.switched_kinds = sorted({*state.switched_kinds, cmd.kind})
    state.updated_at = cmd.at
    after = kind_modes_now(state, policy)
    if after == before:
        return []
    why = f" ({cmd.reason})" if cmd.reason else ""
    if cmd.kind is not None:
        detail = f"probe kind {cmd.kind}: {before.get(cmd.kind)} -> {after[cmd.kind]} by {cmd.actor}{why}"
    else:
        detail = f"all probe kinds: {modes_text(before)} -> {modes_text(after)} by {cmd.actor}{why}"
        changed_cleared = {k: m for k, m in cleared.items() if m != after.get(k)}
        if changed_cleared:
            detail += "; per-kind modes cleared: " + ", ".join(f"{k} was {m}" for k, m in sorted(changed_cleared.items()))
        note = new_kind_note(state, policy, after)
        if note:
            detail += "; " + note
    return [_decision(state, ModeChanged, "", cmd.at, anchor=cmd.command_id, reason="operator",
                      detail=detail, kind=cmd.kind, actor=cmd.actor, mode=cmd.mode, policy=policy)]


# -- answering operator commands ------------------------------------------------------------
#
# Every lift or mode command gets one answer on the log (docs/concepts/messages.md, "Operator commands are
# answered by events"), decided here from the states the command produced -- never composed from the
# request -- so that the shell only wires it: which models a command targets, whether it is new,
# what it changed.  Time comes from the command (``at`` of the answer = ``at`` of the command).

JudgeCommand = LiftSuspension | SetMode
Answer = CommandApplied | CommandRefused


def command_targets(event: Any, watched: Sequence[str], known: Iterable[str]
                    ) -> tuple[list[str] | None, CommandRefused | None]:
    """The models an event is folded into (:func:`fold_targets`), and the refusal of a command for none.

    Returns:
        ``(targets, None)``; ``(None, None)`` for an event of a model the judge does not watch
        (skipped); ``(None, refusal)`` for a lift or mode command of such a model: a typo must not
        look accepted.
    """
    model = getattr(event, "model", None)
    targets = fold_targets(model, watched, known) if model is not None else None
    if targets is None and isinstance(event, LiftSuspension | SetMode):
        return None, unknown_model(event, watched)
    return targets, None


def _answer_base(command: JudgeCommand) -> dict[str, Any]:
    return {"at": command.at, "answer_id": ids.answer_id(command.command_id), "command_id": command.command_id,
            "command": VERBS[type(command)], "service": "judge", "actor": command.actor, "model": command.model,
            "provider": getattr(command, "provider", "")}


def unknown_model(command: JudgeCommand, watched: Sequence[str]) -> CommandRefused:
    """The refusal of a command whose model the judge does not watch (``unknown_model``)."""
    return CommandRefused(**_answer_base(command), code="unknown_model",
                          reason=f"{command.model} is not a watched model (watched: {', '.join(watched) or 'none'}); "
                                 "use * for every model")


def fold_command(folder: Folder, command: JudgeCommand, targets: Sequence[str], pending: Sequence[str]
                 ) -> tuple[dict[str, list[Effect]], Answer | None]:
    """Fold a lift or mode command into the models it targets and answer it from what it produced.

    Args:
        folder: holds the states (changed in place, as :meth:`Folder.apply` does).
        targets: every model the command concerns (:func:`command_targets`).
        pending: those of ``targets`` that have not applied it yet (the shell's stream positions):
            the others applied it before, with its answer.

    Returns:
        Each pending model's effects, and the answer (:func:`answer`): ``None`` when the command
        was folded before (its first answer is on the log).
    """
    new = not targets or any(command.command_id not in folder.state(t).commands for t in pending)
    made = {t: folder.apply(t, command) for t in pending}
    if targets and not pending:
        return made, None
    effects = [e for t in pending for e in made[t]]
    return made, answer(command, {t: folder.state(t) for t in targets}, effects, folder.policy, new=new)


def answer(command: JudgeCommand, states: Mapping[str, ModelState], effects: Sequence[Effect], policy: Policy, *,
           new: bool) -> Answer | None:
    """The one answer to ``command`` once folded into every model it concerns, read back from their states.

    - A lift that ended a suspension (or observe mode's shadow of one) is applied, with its
      decision; one that ended none is refused (``not_suspended``).
    - A mode command is applied; its detail says, per model, every kind's mode *now*
      (:func:`kind_modes_now`), and which new kind stays at its default.  A switch to observe
      also names the suspensions in force, which stay until they end or are lifted
      (:func:`_still_in_force`).  One that changed no
      kind's mode on any model says it changed nothing (``changed`` false: the notifier tells nobody).
    - A command folded before (``new`` false) gets no second answer.

    Args:
        states: the state of each model it concerns, after it was folded.
        effects: every effect folding it produced, all models together.
    """
    if not new:
        return None
    decisions = [d for d in effects if isinstance(d, Decision)
                 and d.decision_id == ids.decision_id(d.model, d.provider, d.action, command.command_id)]
    made = [DecisionMade(decision_id=d.decision_id, model=d.model, provider=d.provider, action=d.action, at=d.at,
                         detail=d.detail) for d in decisions][:ANSWER_MODELS_MAX]
    if isinstance(command, LiftSuspension):
        if not made:
            scope = "any model" if command.model == "*" else command.model
            return CommandRefused(**_answer_base(command), code="not_suspended",
                                  reason=f"{command.provider} is not suspended on {scope}")
        return CommandApplied(**_answer_base(command), decisions=made, detail="; ".join(d.detail for d in made)[:4000])
    readback = []
    for model in sorted(states):
        modes = kind_modes_now(states[model], policy)
        if command.kind is not None:
            line = f"{model}: probe kind {command.kind} {modes.get(command.kind, mode_of(states[model], policy))}"
        else:
            line = f"{model}: {modes_text(modes)}"
            note = new_kind_note(states[model], policy, modes)
            if note:
                line += f" ({note})"
        readback.append(line + _still_in_force(states[model], command))
    if not states:
        readback.append("no model is watched")
    text = "; ".join(readback)
    if not made:
        return CommandApplied(**_answer_base(command), changed=False,
                              detail=f"nothing changed, the mode already was: {text}"[:4000])
    return CommandApplied(**_answer_base(command), decisions=made, detail=f"now {text}"[:4000])


#: Suspensions an answer names by provider at most (the rest are counted).
ANSWER_SUSPENSIONS_SHOWN = 8


def _still_in_force(state: ModelState, command: JudgeCommand) -> str:
    """For a switch to observe: the model's enforced suspensions in force at the command, which stay.

    The mode decides the action, never the evidence (docs/concepts/judge.md, "Observe and enforce"): read at each
    close, for what that close does; a suspension already in force was decided then and ends as
    any other (its expiry, two passed cycles, an operator's lift), so observe mode does not lift
    it.  An operator who switches to observe to take the canary out of routing must hear that
    (``canary lift`` ends one).  ``""`` for enforce, or when none is in force.
    """
    if not isinstance(command, SetMode) or command.mode != "observe":
        return ""
    held = sorted(suspended(state, command.at).items())
    if not held:
        return ""
    named = ", ".join(f"{p} until {utc_text(s.until)}" for p, s in held[:ANSWER_SUSPENSIONS_SHOWN])
    more = f" and {len(held) - ANSWER_SUSPENSIONS_SHOWN} more" if len(held) > ANSWER_SUSPENSIONS_SHOWN else ""
    return (f"; {len(held)} suspension(s) in force stay until they end or are lifted (canary lift), observe mode "
            f"changes what the next closes do: {named}{more}")


# -- helpers -------------------------------------------------------------------


#: A decision variant without an ``until`` (:func:`_decision`), and one with (:func:`_timed`).
D = TypeVar("D", bound=Decision)
T = TypeVar("T", bound=TimedDecision)


def _decision(state: ModelState, variant: type[D], provider: str, at: datetime, *, anchor: str,
              reason: DecisionReason, policy: Policy, detail: str = "", ladder_level: int = 0,
              cycles: list[str] | None = None, evidence: list[ResultRef] | None = None,
              mode: Mode | None = None, kind: str | None = None, actor: str | None = None) -> D:
    """A decision of ``variant`` (one without an ``until``: :func:`_timed` makes those), reason one of ours."""
    return variant(**_fields(state, variant.action, provider, at, anchor=anchor, reason=reason, policy=policy,
                             detail=detail, ladder_level=ladder_level, cycles=cycles, evidence=evidence,
                             mode=mode, kind=kind, actor=actor))


def _timed(state: ModelState, variant: type[T], provider: str, at: datetime, *, anchor: str,
           reason: DecisionReason, policy: Policy, until: datetime, detail: str = "", ladder_level: int = 0,
           cycles: list[str] | None = None, evidence: list[ResultRef] | None = None,
           mode: Mode | None = None) -> T:
    """A decision of ``variant`` about a suspension with an end: ``until`` (UTC) is required."""
    return variant(**_fields(state, variant.action, provider, at, anchor=anchor, reason=reason, policy=policy,
                             detail=detail, ladder_level=ladder_level, cycles=cycles, evidence=evidence,
                             mode=mode), until=until)


def _fields(state: ModelState, action: str, provider: str, at: datetime, *, anchor: str, reason: str,
            policy: Policy, detail: str = "", ladder_level: int = 0, cycles: list[str] | None = None,
            evidence: list[ResultRef] | None = None, mode: Mode | None = None, kind: str | None = None,
            actor: str | None = None) -> dict[str, Any]:
    """The fields every decision variant has, its id derived from the action and ``anchor``."""
    return {"at": at, "decision_id": ids.decision_id(state.model, provider, action, anchor), "model": state.model,
            "provider": provider, "reason": reason, "detail": detail, "ladder_level": ladder_level,
            "cycles": list(cycles or []), "evidence": list(evidence or []), "mode": mode or mode_of(state, policy, kind),
            "kind": kind, "actor": actor}


def human_duration(seconds: float) -> str:
    """``86400`` -> ``1 day``, ``7200`` -> ``2 h``, ``192`` -> ``192 s`` (for messages)."""
    if seconds >= 86400 and seconds % 86400 == 0:
        days = int(seconds // 86400)
        return f"{days} day" + ("s" if days != 1 else "")
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds:g} s"


def suspended(state: ModelState, at: datetime | None = None) -> dict[str, Suspension]:
    """Providers with an active enforced suspension (at ``at``, if given)."""
    return {name: ps.suspension for name, ps in state.providers.items()
            if ps.suspension is not None and ps.suspension.enforced
            and (at is None or ps.suspension.until > at)}
