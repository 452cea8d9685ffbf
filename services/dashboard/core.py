"""The operators' read model: the fleet's state now, per model and per provider.

What lives here: every derivation that ``canary status``, ``canary explain --json``
and ``canary override list --json`` show (and that the dashboard and ``canary
incident`` show), so that they cannot disagree.  It has **no
policy of its own**: every state is read from what the services stored or
announced --

- the judge's folded :class:`~reverie_canary.services.judge.core.ModelState`
  (Redis): streaks, ladder, suspensions, the last verdicts, the modes (through
  the judge's own :func:`~reverie_canary.services.judge.core.mode_of`);
- the router's :class:`~reverie_canary.shared.contract.snapshots.IgnoreSnapshot` (the KV
  bucket): what live traffic ignores now and which layer says so;
- facts of the log, folded into a bounded :class:`LogWindow`: the endpoints
  discovery listed (with their prices), the plan of each cycle, the probe
  results (time to first token, token usage), the cycle verdicts and the
  judge's decisions; the chat backends' content-free live counts
  (``canary.live.<model>``) and the judge's answers of confirmation probes
  (``LiveConfirmation``), shown beside the verdicts and never part of them.

It knows nothing of NATS, Redis or the wall clock: the reader in
:mod:`reverie_canary.services.dashboard.sources` fetches the inputs, and
``now`` is an argument.  Every view is a msgspec Struct with a JSON form
(:func:`to_json`), the same for every reader.

A provider's state is the first rule of :data:`STATE_RULES` that holds.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import msgspec
from msgspec import Struct, field

from reverie_canary.client.served import LiveCounts, ServedCounts
from reverie_canary.services.judge.core import ModelState, Policy, ProviderState, VerdictRecord, initial
from reverie_canary.services.judge.explain import modes_of as judge_modes_of
from reverie_canary.services.judge.explain import modes_text  # noqa: F401 (one header form for every reader)
from reverie_canary.shared.contract import quantization as quant
from reverie_canary.shared.contract.commands import AddOverride, LiftSuspension, RemoveOverride
from reverie_canary.shared.contract.events import (
    FACT_KINDS,
    KIND_VARIANTS,
    CycleClosed,
    CycleSized,
    CycleVerdict,
    Decision,
    DroppedEndpoint,
    Endpoint,
    EndpointsDiscovered,
    LiveConfirmation,
    Mode,
    Pricing,
    ProbeResult,
    ProviderVerdict,
    ReplyEvidence,
    ResultRef,
    TimedDecision,
)
from reverie_canary.shared.contract.listing import ListingFacts, listing_facts
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreSnapshot

#: The time window of the canary's own spend (s): "per day".
SPEND_WINDOW_S = 86400.0
#: The time to first token is the median over a provider's last this many cycles.
TTFT_CYCLES = 6
#: Cycles of a model the window keeps (their plans and prices).
CYCLE_MEMORY = 8
#: Decisions kept per provider (and model-wide) in the window.
DECISION_MEMORY = 8
#: Probe results kept for the spend, per model; beyond it the oldest go and the spend says it was cut.
SPEND_MEMORY = 50_000
#: Snapshots (version, time, entries) kept per model, for the look-back: what was ignored at a time.
SNAPSHOT_MEMORY = 256
#: Operator commands (overrides, lifts) kept per model.
COMMAND_MEMORY = 64
#: Failed probes kept per cycle of a model (their reply excerpts and evidence: the provider page).
FAILURE_MEMORY = 256
#: Characters of a failed probe's reply kept in the window (the wire keeps up to 4,000).
EXCERPT_CHARS = 600
#: Chat backends' ServedCounts kept per model (a backend publishing every minute: two weeks of one).
SERVED_MEMORY = 20_000
#: Chat backends' LiveCounts periods kept per model (a backend publishing every 10 s: a day and more of one).
LIVE_MEMORY = 10_000
#: The live counts a view sums: the periods that end in the last this many seconds (discovery's default
#: confirmation window, ``confirm_window_s``).
LIVE_WINDOW_S = 600.0
#: Reasons a live view names at most (the most frequent first).
LIVE_TOP_REASONS = 3

ProviderStateName = Literal[
    "active", "suspended", "excluded", "overridden", "floor_held", "blind", "would_suspend", "not_listed",
]

#: Outcomes of one probe kind in one cycle, worst first: the worst names the cell.
OUTCOME_ORDER: tuple[str, ...] = ("fail", "blind", "transport_error", "inconclusive", "missing",
                                  "not_applicable", "pass")


# -- the views (the JSON form is the same for every reader) ---------------------------------------------


class KindResult(Struct, frozen=True, kw_only=True):
    """One probe kind's results for one provider in one cycle.

    ``outcome`` is the worst of them (:data:`OUTCOME_ORDER`; ``missing``: planned,
    no result by the close); ``reasons`` the reason codes of the ones that did not
    pass (``language_switch (es)`` for a language probe); ``mode`` the
    mode the judge runs that kind in.
    """

    kind: str
    outcome: str
    reasons: list[str] = []
    probes: int = 0
    mode: Mode = "enforce"


class SuspensionView(Struct, frozen=True, kw_only=True):
    """A suspension the judge holds: ``enforced`` (routing) or observe mode's shadow; times UTC."""

    since: datetime
    until: datetime
    step: int
    enforced: bool
    decision_id: str
    cycles: list[str] = []


class DecisionView(Struct, frozen=True, kw_only=True):
    """One judge decision as the log has it, with the mode it was made in."""

    at: datetime
    action: str
    reason: str = ""
    detail: str = ""
    mode: Mode = "enforce"
    until: datetime | None = None
    kind: str | None = None
    decision_id: str = ""
    ladder_level: int = 0
    actor: str | None = None
    cycles: list[str] = []
    evidence: list[ResultRef] = []


class Spend(Struct, frozen=True, kw_only=True):
    """The canary's own spend over a window: requests, tokens, and USD at the listed prices.

    ``usd`` counts only priced tokens; ``unpriced_tokens`` are tokens of endpoints
    the listing gave no (or a variable, ``-1``) price for: never guessed.
    """

    probes: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0
    usd: float = 0.0
    unpriced_tokens: int = 0


class SpendView(Struct, frozen=True, kw_only=True):
    """Spend of the last ``window_s`` seconds (UTC ``since`` to ``at``).

    ``covered_s`` is how much of that window the log read actually covers (less
    after a fresh start, or when :data:`SPEND_MEMORY` cut it: ``cut``);
    ``usd_per_day`` is ``usd`` when the whole day is covered, else the
    projection of the covered part (``projected``), per real day: where time
    runs ``time_scale`` times faster than real time (the demo), the covered
    part stands for ``covered_s * time_scale`` real seconds.
    """

    since: datetime
    at: datetime
    window_s: float
    covered_s: float
    total: Spend
    usd_per_day: float
    projected: bool
    cut: bool = False
    time_scale: float = 1.0


class ProviderStatus(Struct, frozen=True, kw_only=True):
    """One provider of one model now.

    ``state`` is the first of :data:`STATE_RULES` that holds; ``until`` its end
    (suspension, override, exclusion; ``None`` for none or no end);
    ``layers`` every ignore-list layer that ignores it now (``ignored``: it is in
    ``provider.ignore``).  Streaks and ``ladder_step`` (suspensions since the
    ladder last reset) are the judge's; ``last`` the provider's last judged
    cycle (``last_verdict`` at ``last_judged``, UTC) with one
    :class:`KindResult` per probe kind; ``ttft_ms`` the median time to first
    token of its probes in its last :data:`TTFT_CYCLES` cycles
    (``ttft_samples`` replies; ``ttft_missing``: replies with no first token).
    ``gateway_status`` is the ``status`` the latest listing gave it (below 0:
    the gateway itself marks it degraded; ``None``: not listed or not said).
    ``quantization`` is what the latest listing declares for it (``fp8``;
    ``None``: not declared, or not listed); ``quant_left_out``: the snapshot's
    ``quantizations`` allow-list (an operator's quantization floor) does not
    admit it, so live traffic does not reach it although no layer ignores it --
    an endpoint that declares no quantization is always left out by a list.
    ``slow_vs_peers``: the judge found its first-token median over its last
    cycles' ttft probes (``ttft_peer_median_ms``, the judge's own, ms) above
    its model's peer bar (:attr:`ModelStatus.ttft_peer_bar_ms`) -- shown,
    never a suspension by itself.
    ``live``: the chat backends' live counts of it (:class:`LiveView`; ``None``:
    no backend published any in the window); ``confirmation`` the last answer of
    a confirmation probe sent to it (``None``: none in the log read).
    """

    provider: str
    state: ProviderStateName
    until: datetime | None = None
    state_detail: str = ""
    ignored: bool = False
    layers: list[str] = []
    listed: bool = True
    gateway_status: int | None = None
    quantization: str | None = None
    quant_left_out: bool = False
    failed_streak: int = 0
    passed_streak: int = 0
    frozen_streak: int = 0
    ladder_step: int = 0
    shadow_step: int = 0
    suspension: SuspensionView | None = None
    last_verdict: str | None = None
    last_reasons: list[str] = []
    last_cycle: str | None = None
    last_cycle_no: int | None = None
    last_judged: datetime | None = None
    results: list[KindResult] = []
    ttft_ms: float | None = None
    ttft_samples: int = 0
    ttft_missing: int = 0
    slow_vs_peers: bool = False
    ttft_peer_median_ms: float | None = None
    last_decision: DecisionView | None = None
    spend: Spend = Spend()
    live: LiveView | None = None
    confirmation: ConfirmationView | None = None


class LiveView(Struct, frozen=True, kw_only=True):
    """A provider's live counts from the chat backends' reply guards, summed over a window: counts only.

    ``replies`` judged from ``since`` to ``until`` (UTC; the periods that end in
    between), ``failing`` of them failed a check (``failing_share`` = failing /
    replies, 0..1), ``reasons`` the most frequent failure reasons (at most
    :data:`LIVE_TOP_REASONS`, most first), ``retried`` failing replies sent again
    with the provider ignored, ``ignore_not_applied`` replies it served although the
    request's ``provider.ignore`` excluded it (something between the backend and
    the gateway dropped the list).  Counts keyed by the provider's display name count for every endpoint the name covers.
    Live counts never suspend anyone (DESIGN, "The request in flight").
    """

    since: datetime
    until: datetime
    replies: int = 0
    failing: int = 0
    failing_share: float = 0.0
    reasons: dict[str, int] = {}
    retried: int = 0
    ignore_not_applied: int = 0


class ConfirmationView(Struct, frozen=True, kw_only=True):
    """The last answer of a pinned confirmation probe to a provider's live failures (a fact, never a verdict).

    ``outcome``: ``confirmed`` (the probe failed too), ``not_reproduced`` (it passed) or
    ``inconclusive``; ``reason`` the live reason that asked for it (``count`` of
    ``served`` replies); ``kind`` the probe's kind and its own ``probe_outcome`` /
    ``probe_reason``; ``at`` the probe result's time (UTC).
    """

    at: datetime
    outcome: str
    reason: str
    kind: str
    probe_outcome: str
    probe_reason: str = ""
    count: int = 0
    served: int = 0
    task_id: str = ""


class ControlStatus(Struct, frozen=True, kw_only=True):
    """A positive control (a host known to fail ``kind``) and its result in its last cycle.

    ``proves`` is ``True`` when it failed, as it should (the probe can fail),
    ``False`` when it passed (that cycle's results of the kind proved nothing),
    ``None`` when it had no result.
    """

    kind: str
    provider: str
    outcome: str | None = None
    reason: str = ""
    cycle_no: int | None = None
    proves: bool | None = None


class CycleSummary(Struct, frozen=True, kw_only=True):
    """One recent cycle of a model as the log tells it (oldest first in :attr:`ModelStatus.cycles`).

    ``planned`` probes, ``results`` received (redeliveries counted once),
    ``by_prober`` the results each prober published; ``verdicts`` each
    provider's verdict (``passed``, ``failed``, ``frozen`` ...), empty until the
    judge closed it; ``unproven``/``common_mode`` the kinds it could not judge.
    Times UTC.
    """

    cycle: str
    cycle_no: int
    opened_at: datetime
    closed_at: datetime | None = None
    planned: int = 0
    results: int = 0
    by_prober: dict[str, int] = {}
    verdicts: dict[str, str] = {}
    unproven: list[str] = []
    common_mode: list[str] = []


class CanaryHealth(Struct, frozen=True, kw_only=True):
    """Whether the canary itself can see, for one model.

    ``state``: ``sees``; ``blind`` (the judge announced ``canary_blind`` and not
    yet ``canary_sees``; ``cause`` its reason); ``stale`` (no cycle closed for
    more than two cycle intervals: discovery stopped or cannot plan);
    ``unknown`` (nothing closed yet).
    """

    state: Literal["sees", "blind", "stale", "unknown"]
    since: datetime | None = None
    cause: str = ""
    detail: str = ""


class IgnoreListView(Struct, frozen=True, kw_only=True):
    """The model's current IgnoreSnapshot: version, time, who is ignored now and by which layers, and the
    ``quantizations`` allow-list of an operator's quantization floor (empty: none)."""

    version: int = 0
    at: datetime | None = None
    ignored: list[str] = []
    layers: dict[str, list[str]] = {}
    entries: list[IgnoreEntry] = []
    quantizations: list[str] = []


class ModelStatus(Struct, frozen=True, kw_only=True):
    """One model now: its header (modes, last cycle, health, ignore list, spend) and its providers.

    ``modes`` is the mode per probe kind (``mode`` when they are all the same,
    else ``None``); ``last_cycle_closed`` (UTC) and ``last_cycle_age_s`` say how
    fresh it is; ``unproven`` and ``common_mode`` are the kinds the last cycle
    could not judge (a positive control passed; most providers failed at once);
    ``cycles`` the recent cycles the log read holds (:class:`CycleSummary`).
    ``language_coverage_cycles`` is the bound on the time to detect a
    one-language defect that discovery's last plan keeps (every language of
    every provider probed at least once in every that many cycles),
    ``languages_per_cycle`` its language probes per provider per cycle;
    ``None`` when no plan in the log said it.  ``listing`` what the latest
    listing said beyond its endpoints (entries dropped, tags derived, the
    endpoints the gateway itself marks degraded, provider names the pin check
    cannot tell apart; :class:`~reverie_canary.shared.contract.listing.ListingFacts`).
    ``ttft_peer_median_ms`` / ``ttft_peer_bar_ms``: the median of the providers'
    first-token medians and the bar above which one is ``slow_vs_peers``
    (median + k x MAD), as the judge computed them at its last close (``None``:
    too few providers measured).
    ``problems`` says what the read could not find (no judge state, no snapshot).
    """

    model: str
    at: datetime
    modes: dict[str, Mode]
    mode: Mode | None
    last_cycle: str | None = None
    last_cycle_no: int | None = None
    last_cycle_closed: datetime | None = None
    last_cycle_age_s: float | None = None
    cycle_interval_s: float = 1800.0
    health: CanaryHealth = CanaryHealth(state="unknown")
    ignore_list: IgnoreListView = IgnoreListView()
    spend: SpendView | None = None
    providers: list[ProviderStatus] = []
    controls: list[ControlStatus] = []
    unproven: list[str] = []
    common_mode: list[str] = []
    cycles: list[CycleSummary] = []
    language_coverage_cycles: int | None = None
    languages_per_cycle: int | None = None
    listing: ListingFacts = ListingFacts()
    ttft_peer_median_ms: float | None = None
    ttft_peer_bar_ms: float | None = None
    problems: list[str] = []


class FleetStatus(Struct, frozen=True, kw_only=True):
    """Every watched model now (``at``, UTC), and what the read covered.

    ``log_since`` is where the log read started; ``log_events`` how many events
    it folded; ``spend`` the sum over the models; ``sizing`` discovery's sizing
    of the latest cycle (``CycleSized``: probes in flight, the expected wall
    time, whether it fits its window), ``None`` before one.
    """

    at: datetime
    models: list[ModelStatus]
    spend: SpendView | None = None
    log_since: datetime | None = None
    log_events: int = 0
    sizing: CycleSized | None = None


class ProviderDetail(Struct, frozen=True, kw_only=True):
    """One provider in depth (``canary explain --json``; the dashboard's provider page).

    ``status`` is its row of :class:`ModelStatus`; ``history`` the judge's kept
    verdicts (their non-passing results); ``decisions`` its recent decisions from
    the log, each with the mode it was made in; ``next_suspension_s`` how long
    its next suspension would last (the ladder), ``ladder_reset_s`` the quiet
    time after which the ladder starts again, ``failed_cycles_to_suspend`` and
    ``passed_cycles_to_recover`` the judge's thresholds.
    """

    model: str
    modes: dict[str, Mode]
    status: ProviderStatus
    history: list[VerdictRecord] = []
    decisions: list[DecisionView] = []
    next_suspension_s: float = 0.0
    ladder_reset_s: float = 0.0
    failed_cycles_to_suspend: int = 0
    passed_cycles_to_recover: int = 0


def to_json(view: Any) -> bytes:
    """The JSON form of any view (UTC times as ``...Z``)."""
    return msgspec.json.encode(view)


def to_builtins(view: Any) -> Any:
    """The view as plain dicts and lists (the JSON form before encoding)."""
    return msgspec.to_builtins(view)


# -- the log window: a bounded fold of the log's facts ---------------------------------------------------


class FailedProbe(Struct, frozen=True, kw_only=True):
    """One probe that did not pass, with what the reply showed (the provider page).

    ``excerpt`` is the reply's first characters (at most :data:`EXCERPT_CHARS`);
    ``evidence`` the non-passing checks as ``{check, outcome, reason, evidence}``;
    ``ttft_ms``/``total_ms`` in ms; ``at`` UTC.
    """

    task_id: str
    cycle: str
    provider: str
    kind: str
    at: datetime
    outcome: str
    reason: str = ""
    language: str | None = None
    http_status: int | None = None
    finish_reason: str | None = None
    served_by: str | None = None
    ttft_ms: float | None = None
    total_ms: float | None = None
    excerpt: str = ""
    error: str | None = None
    evidence: list[dict[str, Any]] = []
    attempts: int = 1


class SnapshotMark(Struct, frozen=True, kw_only=True):
    """One IgnoreSnapshot of a model as the log (or the bucket's history) had it: version, time (UTC), entries,
    the ``quantizations`` allow-list."""

    version: int
    at: datetime
    entries: list[IgnoreEntry] = []
    quantizations: list[str] = []


class CommandView(Struct, frozen=True, kw_only=True):
    """An operator command about a provider (override added or removed, suspension lifted): who, when, why."""

    at: datetime
    command: str
    provider: str
    model: str
    actor: str
    reason: str = ""
    until: datetime | None = None
    command_id: str = ""


class CycleFacts(Struct, kw_only=True):
    """What the log said about one cycle of one model: the plan, the prices, the verdict."""

    cycle: str
    cycle_no: int
    opened_at: datetime
    planned: dict[str, tuple[str, str, str | None, bool]] = {}  # task id -> (provider, kind, language, control)
    prices: dict[str, Pricing | None] = {}
    quantizations: dict[str, str | None] = {}  # provider -> the quantization the cycle's listing declared
    results: int = 0
    by_prober: dict[str, int] = {}
    control_results: dict[str, ResultRef] = {}
    closed_at: datetime | None = None
    verdict: CycleVerdict | None = None
    seen: set[str] = field(default_factory=set)
    ttft: dict[str, list[float | None]] = {}  # provider -> time to first token (ms) of each probe, None: no text
    failures: list[FailedProbe] = []
    #: a memo of the dashboard's cells of this cycle (pages.model_matrix), valid while ``memo_key`` holds
    memo: dict[str, Any] = {}
    memo_key: tuple[Any, ...] = ()
    summary_memo: tuple[Any, ...] | None = None  # (key, CycleSummary): the summary while the facts are unchanged


class SpendEntry(Struct, frozen=True, array_like=True):
    """One probe's cost: time (UTC), provider, requests, prompt and completion tokens, USD (``None``: unpriced)."""

    at: datetime
    provider: str
    requests: int
    prompt_tokens: int
    completion_tokens: int
    usd: Decimal | None


class ProviderFacts(Struct, kw_only=True):
    """What the log said about one provider: its last verdict, its recent first-token times, its decisions,
    the time of its last probe result (UTC)."""

    verdict: ProviderVerdict | None = None
    verdict_cycle: str | None = None
    verdict_cycle_no: int | None = None
    verdict_at: datetime | None = None
    ttft: list[tuple[str, float | None]] = []  # (cycle, ms or None: no first token)
    decisions: list[DecisionView] = []
    last_probe_at: datetime | None = None


class ModelWindow(Struct, kw_only=True):
    """The log's facts about one model, bounded (the constants above)."""

    model: str
    cycle_memory: int = CYCLE_MEMORY
    decision_memory: int = DECISION_MEMORY
    snapshots: list[SnapshotMark] = []
    commands: list[CommandView] = []
    served: list[ServedCounts] = []  # chat backends' counts per provider, in log order
    live: list[LiveCounts] = []  # chat backends' live counts per provider and reason, in log order
    confirmations: dict[str, ConfirmationView] = {}  # provider -> the last answer of a confirmation probe
    listing: list[Endpoint] = []
    listing_at: datetime | None = None
    listing_cycle: str | None = None
    dropped: list[DroppedEndpoint] = []  # the latest listing's entries discovery could not use
    dropped_cut: int = 0
    coverage: tuple[int, int] | None = None  # (language_coverage_cycles, languages_per_cycle) discovery planned
    controls: dict[str, str] = {}
    cycles: dict[str, CycleFacts] = {}
    last_closed: CycleClosed | None = None
    last_verdict: CycleVerdict | None = None
    providers: dict[str, ProviderFacts] = {}
    decisions: list[DecisionView] = []  # model-wide ones (mode_changed, control_passed, canary_blind ...)
    spend: list[SpendEntry] = []
    spend_cut_at: datetime | None = None
    first_at: datetime | None = None


class LogWindow(Struct, kw_only=True):
    """A bounded fold of the log's facts per model; :meth:`add` is idempotent per event.

    ``since`` is where the read started (UTC), ``log_start`` the time of the
    log's first message (older facts are gone), ``last_seq`` the last stream
    sequence folded (so that a follower reads on from there), ``events`` how
    many events it folded; ``cycle_memory`` how many cycles per model it keeps
    (:data:`CYCLE_MEMORY`; a view over more cycles, the dashboard's, asks for more).
    """

    since: datetime | None = None
    log_start: datetime | None = None
    last_seq: int = 0
    events: int = 0
    cycle_memory: int = CYCLE_MEMORY
    decision_memory: int = DECISION_MEMORY
    models: dict[str, ModelWindow] = {}
    sized: CycleSized | None = None

    def model(self, model: str) -> ModelWindow:
        mw = self.models.get(model)
        if mw is None:
            mw = self.models[model] = ModelWindow(model=model, cycle_memory=self.cycle_memory,
                                                  decision_memory=self.decision_memory)
        return mw

    def add(self, event: Any, seq: int = 0) -> None:
        """Fold one log event (anything the window does not use is ignored)."""
        if seq and seq <= self.last_seq:
            return
        self.last_seq = max(self.last_seq, seq)
        if isinstance(event, (AddOverride, RemoveOverride, LiftSuspension)):
            self._command(event)
            return
        if isinstance(event, CycleSized):  # every model's cycle at once: the latest is kept
            self.events += 1
            if self.sized is None or event.cycle_no >= self.sized.cycle_no:
                self.sized = event
            return
        model = getattr(event, "model", None)
        if not isinstance(model, str) or model == "*":
            return
        self.events += 1
        mw = self.model(model)
        at = getattr(event, "at", None)
        if at is not None and (mw.first_at is None or at < mw.first_at):
            mw.first_at = at
        match event:
            case EndpointsDiscovered():
                _discovered(mw, event)
            case ProbeResult():
                _result(mw, event)
            case CycleClosed():
                _closed(mw, event)
            case CycleVerdict():
                _verdict(mw, event)
            case Decision():
                _decided(mw, event)
            case IgnoreSnapshot():
                add_snapshot(mw, SnapshotMark(version=event.version, at=event.at, entries=list(event.entries),
                                              quantizations=list(event.quantizations)))
            case ServedCounts():
                mw.served.append(event)
                if len(mw.served) > SERVED_MEMORY:
                    del mw.served[:-SERVED_MEMORY]
            case LiveCounts():
                mw.live.append(event)
                if len(mw.live) > LIVE_MEMORY:
                    del mw.live[:-LIVE_MEMORY]
            case LiveConfirmation():
                _confirmed(mw, event)
            case _:
                return

    def _command(self, event: AddOverride | RemoveOverride | LiftSuspension) -> None:
        """An operator command about a provider: kept per model (``*``: every model the window knows)."""
        self.events += 1
        name = {AddOverride: "override_add", RemoveOverride: "override_remove",
                LiftSuspension: "lift"}[type(event)]
        view = CommandView(at=event.at, command=name, provider=event.provider, model=event.model,
                           actor=event.actor, reason=event.reason,
                           until=getattr(event, "expires_at", None), command_id=event.command_id)
        for mw in ([self.model(event.model)] if event.model != "*" else list(self.models.values())):
            if any(c.command_id == view.command_id for c in mw.commands):
                continue
            mw.commands = sorted([*mw.commands, view], key=lambda c: c.at)[-COMMAND_MEMORY:]


def _confirmed(mw: ModelWindow, event: LiveConfirmation) -> None:
    """Keep the latest answer of a confirmation probe per provider (an older or repeated one changes nothing)."""
    seen = mw.confirmations.get(event.provider)
    if seen is not None and (event.at, event.task_id) <= (seen.at, seen.task_id):
        return
    mw.confirmations[event.provider] = ConfirmationView(
        at=event.at, outcome=event.outcome, reason=event.live.reason, kind=event.kind,
        probe_outcome=event.probe_outcome, probe_reason=event.probe_reason, count=event.live.count,
        served=event.live.served, task_id=event.task_id)


def live_totals(window: ModelWindow | None, since: datetime, until: datetime) -> dict[str, LiveView]:
    """The chat backends' live counts per key (an endpoint tag or a display name) of the periods that end in
    ``(since, until]`` (UTC), with every reason (not cut to the top ones); ``{}`` when none."""
    out: dict[str, dict[str, Any]] = {}
    for counts in (window.live if window is not None else []):
        if not since < counts.at <= until:
            continue
        for key, o in counts.providers.items():
            t = out.setdefault(key, {"replies": 0, "reasons": {}, "retried": 0, "ignore_not_applied": 0})
            t["replies"] += o.replies
            t["retried"] += o.retried
            t["ignore_not_applied"] += o.ignore_not_applied
            for reason, n in o.reasons.items():
                t["reasons"][reason] = t["reasons"].get(reason, 0) + n
    return {key: LiveView(since=since, until=until, failing=sum(t["reasons"].values()), **t)
            for key, t in out.items()}


def live_now(window: ModelWindow | None, now: datetime) -> dict[str, LiveView]:
    """The live totals a view shows at ``now`` (UTC): the :data:`LIVE_WINDOW_S` up to the newest period a backend
    reported by ``now`` -- not up to ``now``, so an unchanged log gives the same view (and the feed its ETag) --
    and none when that period ended more than :data:`LIVE_WINDOW_S` before ``now`` (no backend counts now)."""
    ends = [c.at for c in (window.live if window is not None else []) if c.at <= now]
    if not ends:
        return {}
    until = max(ends)
    if until < now - timedelta(seconds=LIVE_WINDOW_S):
        return {}
    return live_totals(window, until - timedelta(seconds=LIVE_WINDOW_S), until)


def live_view(totals: dict[str, LiveView], window: ModelWindow | None, tag: str) -> LiveView | None:
    """One endpoint's live view: the counts keyed by its tag and by its display name (the listing's), summed;
    the reasons cut to :data:`LIVE_TOP_REASONS`; ``None`` when no backend counted it."""
    names = {e.provider_name for e in (window.listing if window is not None else [])
             if e.provider == tag and e.provider_name}
    parts = [v for key, v in totals.items() if key == tag or key in names]
    if not parts:
        return None
    replies = sum(v.replies for v in parts)
    reasons: dict[str, int] = {}
    for v in parts:
        for reason, n in v.reasons.items():
            reasons[reason] = reasons.get(reason, 0) + n
    failing = sum(reasons.values())
    top = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:LIVE_TOP_REASONS])
    return LiveView(since=parts[0].since, until=parts[0].until, replies=replies, failing=failing,
                    failing_share=round(min(1.0, failing / replies), 4) if replies else 0.0, reasons=top,
                    retried=sum(v.retried for v in parts),
                    ignore_not_applied=sum(v.ignore_not_applied for v in parts))


def live_text(live: LiveView | None) -> str:
    """``120 replies, 8.3% failing (ttft_exceeded 9, leading_junk 1), 9 retried, ignore not applied 0``, or
    ``no live counts``: one wording for ``canary status``, the dashboard and ``canary incident``."""
    if live is None:
        return "no live counts"
    text = f"{live.replies} replies, {live.failing_share:.1%} failing"
    if live.reasons:
        text += " (" + ", ".join(f"{reason} {n}" for reason, n in live.reasons.items()) + ")"
    return text + f", {live.retried} retried, ignore not applied {live.ignore_not_applied}"


def confirmation_text(c: ConfirmationView | None) -> str:
    """``confirmed at 2026-06-11T12:34:56Z: live leading_junk 5 of 12, pinned ttft probe fail leading_junk``, or
    ``no confirmation probe``."""
    if c is None:
        return "no confirmation probe"
    from reverie_canary.shared.contract.timefmt import utc_text

    probe = f"{c.probe_outcome} {c.probe_reason}".strip()
    return (f"{c.outcome.replace('_', ' ')} at {utc_text(c.at)}: live {c.reason} {c.count} of {c.served}, "
            f"pinned {c.kind} probe {probe}")


def add_snapshot(mw: ModelWindow, mark: SnapshotMark) -> None:
    """Keep one snapshot of the model (by version; a repeated version changes nothing), bounded."""
    if any(m.version == mark.version for m in mw.snapshots):
        return
    mw.snapshots = sorted([*mw.snapshots, mark], key=lambda m: m.version)[-SNAPSHOT_MEMORY:]


def _cycle(mw: ModelWindow, cycle: str, cycle_no: int, at: datetime) -> CycleFacts:
    facts = mw.cycles.get(cycle)
    if facts is None:
        facts = mw.cycles[cycle] = CycleFacts(cycle=cycle, cycle_no=cycle_no, opened_at=at)
        for old, _ in sorted(mw.cycles.items(), key=lambda kv: kv[1].opened_at)[:-mw.cycle_memory]:
            del mw.cycles[old]
    return facts


def _discovered(mw: ModelWindow, event: EndpointsDiscovered) -> None:
    """A cycle's listing and plan; a large listing comes in parts, merged here (a repeated part changes nothing)."""
    facts = _cycle(mw, event.cycle, event.cycle_no, event.at)
    facts.planned = {**facts.planned, **{p.task_id: (p.provider, p.kind, p.language, p.control)
                                         for p in event.planned}}
    facts.prices = {**facts.prices, **{e.provider: e.pricing for e in event.endpoints}}
    facts.quantizations = {**facts.quantizations, **{e.provider: e.quantization for e in event.endpoints}}
    if mw.listing_cycle == event.cycle:
        merged = {e.provider: e for e in mw.listing} | {e.provider: e for e in event.endpoints}
        mw.listing = [merged[name] for name in sorted(merged)]
        mw.controls = {**mw.controls, **event.controls}
    elif mw.listing_at is None or event.at >= mw.listing_at:
        mw.listing, mw.listing_at, mw.listing_cycle = list(event.endpoints), event.at, event.cycle
        mw.controls = dict(event.controls)
        mw.dropped, mw.dropped_cut = list(event.dropped), event.dropped_cut  # every part repeats them
        mw.coverage = (event.language_coverage_cycles, event.languages_per_cycle) \
            if event.language_coverage_cycles else None


def _result(mw: ModelWindow, event: ProbeResult) -> None:
    facts = mw.cycles.get(event.cycle)
    if facts is not None:
        if event.task_id in facts.seen:
            return  # a redelivered result: JetStream's dedupe window may be shorter than the log
        facts.seen.add(event.task_id)
        facts.results += 1
        if event.prober:
            facts.by_prober[event.prober] = facts.by_prober.get(event.prober, 0) + 1
        if event.control:
            facts.control_results[event.task_id] = ResultRef(task_id=event.task_id, cycle=event.cycle,
                                                              kind=event.kind, outcome=event.outcome,
                                                              reason=event.reason, language=event.language)
    prices = facts.prices if facts is not None else {e.provider: e.pricing for e in mw.listing}
    mw.spend.append(spend_entry(event, prices.get(event.provider)))
    cutoff = event.at - timedelta(seconds=SPEND_WINDOW_S)
    if mw.spend[0].at < cutoff:  # older than any view's window: gone (entries come roughly in time order)
        k = 0
        while k < len(mw.spend) and mw.spend[k].at < cutoff:
            k += 1
        del mw.spend[:k]
    if len(mw.spend) > SPEND_MEMORY:
        mw.spend_cut_at = mw.spend[-SPEND_MEMORY - 1].at
        del mw.spend[:-SPEND_MEMORY]
    if facts is not None and not event.control and event.outcome != "not_applicable":
        facts.ttft.setdefault(event.provider, []).append(event.reply.ttft_ms)  # msgspec: a fresh {} per cycle
        if event.outcome != "pass" and len(facts.failures) < FAILURE_MEMORY:
            facts.failures.append(failed_probe(event))
    if not event.control and event.outcome != "not_applicable":
        pf = mw.providers.setdefault(event.provider, ProviderFacts())
        if pf.last_probe_at is None or event.at > pf.last_probe_at:
            pf.last_probe_at = event.at
        pf.ttft = [*pf.ttft, (event.cycle, event.reply.ttft_ms)]
        cycles = list(dict.fromkeys(c for c, _ in pf.ttft))[-TTFT_CYCLES:]
        pf.ttft = [(c, ms) for c, ms in pf.ttft if c in cycles]


def failed_probe(event: ProbeResult) -> FailedProbe:
    """What the provider page shows of a probe that did not pass (the reply's start, the failing checks)."""
    checks = [c for a in event.attempts for c in a.checks] if event.attempts else list(event.checks)
    evidence = [{"check": c.check, "outcome": c.outcome, "reason": c.reason, "evidence": c.evidence}
                for c in checks if c.outcome != "pass"][:8]
    r = event.reply
    return FailedProbe(task_id=event.task_id, cycle=event.cycle, provider=event.provider, kind=event.kind,
                       at=event.at, outcome=event.outcome, reason=event.reason, language=event.language,
                       http_status=r.http_status, finish_reason=r.finish_reason, served_by=r.served_by,
                       ttft_ms=r.ttft_ms, total_ms=r.total_ms, excerpt=r.first_bytes[:EXCERPT_CHARS],
                       error=r.error[:EXCERPT_CHARS] if r.error else None, evidence=evidence,
                       attempts=max(1, len(event.attempts)))


def _closed(mw: ModelWindow, event: CycleClosed) -> None:
    facts = mw.cycles.get(event.cycle)
    if facts is not None:
        facts.closed_at = event.at
    if mw.last_closed is None or event.at >= mw.last_closed.at:
        mw.last_closed = event


def _verdict(mw: ModelWindow, event: CycleVerdict) -> None:
    facts = mw.cycles.get(event.cycle)
    if facts is not None:
        facts.verdict = event
    if mw.last_verdict is None or event.at >= mw.last_verdict.at:
        mw.last_verdict = event
    for pv in event.verdicts:
        pf = mw.providers.setdefault(pv.provider, ProviderFacts())
        if pf.verdict_at is None or event.at >= pf.verdict_at:
            pf.verdict, pf.verdict_cycle, pf.verdict_cycle_no, pf.verdict_at = pv, event.cycle, event.cycle_no, event.at


def _decided(mw: ModelWindow, event: Decision) -> None:
    view = DecisionView(at=event.at, action=event.action, reason=event.reason, detail=event.detail,
                        mode=event.mode, until=event.until if isinstance(event, TimedDecision) else None,
                        kind=event.kind, decision_id=event.decision_id,
                        ladder_level=event.ladder_level, actor=event.actor, cycles=list(event.cycles),
                        evidence=list(event.evidence))
    if event.provider:
        pf = mw.providers.setdefault(event.provider, ProviderFacts())
        if any(d.decision_id == view.decision_id for d in pf.decisions):
            return
        pf.decisions = sorted([*pf.decisions, view], key=lambda d: d.at)[-mw.decision_memory:]
    elif not any(d.decision_id == view.decision_id for d in mw.decisions):
        mw.decisions = sorted([*mw.decisions, view], key=lambda d: d.at)[-mw.decision_memory:]


# -- spend -------------------------------------------------------------------------------------------------


def _tokens(reply: ReplyEvidence) -> tuple[int, int]:
    usage = reply.usage or {}
    values = []
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        values.append(value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0)
    return values[0], values[1]


def _price(text: str) -> Decimal | None:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value >= 0 else None  # "-1": a variable price, not a number to multiply


def spend_entry(result: ProbeResult, pricing: Pricing | None) -> SpendEntry:
    """What one probe cost: every request it sent (the language probe's confirmations too).

    USD = (prompt tokens x prompt price + completion tokens x completion price +
    the request price) x (1 - discount), per billed request (one whose usage
    names tokens), at the prices discovery listed for the probe's cycle
    (OpenRouter's endpoints listing API ``pricing``: USD per token).  No listed price, or a
    variable one (``-1``): ``usd`` is ``None``.
    """
    replies = [a.reply for a in result.attempts] if result.attempts else [result.reply]
    prompt = completion = requests = 0
    for reply in replies:
        p, c = _tokens(reply)
        prompt, completion = prompt + p, completion + c
        requests += 1 if (p or c) else 0
    usd: Decimal | None = None
    if pricing is not None:
        prices = [_price(pricing.prompt), _price(pricing.completion), _price(pricing.request)]
        pp, cp, rp = prices
        if pp is not None and cp is not None and rp is not None:
            usd = (pp * prompt + cp * completion + rp * requests) * (1 - Decimal(str(pricing.discount)))
    return SpendEntry(at=result.at, provider=result.provider, requests=requests, prompt_tokens=prompt,
                      completion_tokens=completion, usd=usd)


def sum_spend(entries: Iterable[SpendEntry]) -> Spend:
    """The sum of some probes' spend."""
    probes = requests = prompt = completion = unpriced = 0
    usd = Decimal(0)
    for e in entries:
        probes += 1
        requests += e.requests
        prompt += e.prompt_tokens
        completion += e.completion_tokens
        if e.usd is None:
            unpriced += e.prompt_tokens + e.completion_tokens
        else:
            usd += e.usd
    return Spend(probes=probes, requests=requests, prompt_tokens=prompt, completion_tokens=completion,
                 tokens=prompt + completion, usd=float(round(usd, 10)), unpriced_tokens=unpriced)


def spend_view(entries: list[SpendEntry], now: datetime, *, covered_from: datetime | None,
               cut_at: datetime | None = None, window_s: float = SPEND_WINDOW_S,
               time_scale: float = 1.0) -> SpendView:
    """The spend of the entries in the ``window_s`` before ``now`` (UTC), and how much of it the read covers.

    Args:
        entries: probes' spend (any order).
        covered_from: the earliest time the log still holds facts of (its
            first message, else the first event read); nothing before it is known.
        cut_at: entries before this were dropped by :data:`SPEND_MEMORY`.
        time_scale: how many times faster than real time the system runs (settings
            ``time_scale``: 1, or the demo's compression); the day projected is a real one.
    """
    since = now - timedelta(seconds=window_s)
    inside = [e for e in entries if since < e.at <= now]
    start = max(x for x in (since, covered_from, cut_at) if x is not None)
    covered = max(0.0, min(window_s, (now - start).total_seconds()))
    total = sum_spend(inside)
    projected = covered < window_s
    span = covered if projected and covered > 0 else window_s
    per_day = total.usd * 86400.0 / (span * max(1.0, time_scale))
    return SpendView(since=since, at=now, window_s=window_s, covered_s=round(covered, 3), total=total,
                     usd_per_day=round(per_day, 8), projected=projected,
                     cut=cut_at is not None and cut_at > since, time_scale=max(1.0, time_scale))


# -- the provider's state: a table, first match wins --------------------------------------------------------


class _Facts(Struct, frozen=True, kw_only=True):
    """What the state rules look at, for one provider (internal)."""

    layers: dict[str, datetime | None]
    ps: ProviderState | None
    pf: ProviderFacts | None
    listed: bool
    now: datetime


def _layer(name: str) -> Callable[[_Facts], tuple[bool, datetime | None, str]]:
    def rule(f: _Facts) -> tuple[bool, datetime | None, str]:
        return name in f.layers, f.layers.get(name), ""
    return rule


def _suspended(f: _Facts) -> tuple[bool, datetime | None, str]:
    if "suspension" in f.layers:
        return True, f.layers["suspension"], ""
    s = f.ps.suspension if f.ps is not None else None
    if s is not None and s.enforced and s.until > f.now:
        return True, s.until, "the judge's suspension is not in the ignore list yet (the router has not applied it)"
    return False, None, ""


def _blind(f: _Facts) -> tuple[bool, datetime | None, str]:
    last = f.ps.history[-1] if f.ps is not None and f.ps.history else None
    return (last is not None and last.verdict == "blind"), None, ", ".join(last.reasons) if last else ""


def _floor_held(f: _Facts) -> tuple[bool, datetime | None, str]:
    if f.ps is None or not f.ps.history or f.pf is None:
        return False, None, ""
    judged = f.ps.history[-1].at
    held = [d for d in f.pf.decisions if d.action == "floor_held" and d.at >= judged]
    return bool(held), None, held[-1].detail if held else ""


def _would_suspend(f: _Facts) -> tuple[bool, datetime | None, str]:
    s = f.ps.suspension if f.ps is not None else None
    if s is not None and not s.enforced and s.until > f.now:
        return True, s.until, "observe mode: routing untouched"
    return False, None, ""


def _not_listed(f: _Facts) -> tuple[bool, datetime | None, str]:
    return not f.listed, None, "not listed by the gateway in the latest discovery"


#: A provider's state, the first rule that holds (each reads only stored or announced facts).
STATE_RULES: tuple[tuple[ProviderStateName, str, Callable[[_Facts], tuple[bool, datetime | None, str]]], ...] = (
    ("excluded", "a reviewed exclusion ignores it now (ignore-list layer exclusion)", _layer("exclusion")),
    ("overridden", "an operator override ignores it now (ignore-list layer override)", _layer("override")),
    ("suspended", "a canary suspension ignores it now, or the judge holds an enforced one", _suspended),
    ("blind", "the judge's last verdict on it is blind: the canary could not see it", _blind),
    ("floor_held", "the judge's decision at its last judged cycle was floor_held", _floor_held),
    ("would_suspend", "observe mode: the judge holds a would-be suspension", _would_suspend),
    ("not_listed", "the gateway did not list it in the latest discovery", _not_listed),
    ("active", "none of the above: in traffic and judged", lambda f: (True, None, "")),
)


def _state(f: _Facts) -> tuple[ProviderStateName, datetime | None, str]:
    for name, _, rule in STATE_RULES:
        holds, until, detail = rule(f)
        if holds:
            return name, until, detail
    raise AssertionError("the last rule always holds")


# -- building the views ---------------------------------------------------------------------------------------


def modes_of(state: ModelState | None, policy: Policy, kinds: Iterable[str]) -> dict[str, Mode]:
    """The mode per probe kind, as the judge decides it (:func:`~reverie_canary.services.judge.core.mode_of`)."""
    return judge_modes_of(state or initial(""), policy, kinds)


def ignore_list_view(snapshot: IgnoreSnapshot | None, now: datetime) -> IgnoreListView:
    """The snapshot's entries live at ``now`` (UTC), grouped by layer."""
    if snapshot is None:
        return IgnoreListView()
    live = [e for e in (entry.active_at(now) for entry in snapshot.entries) if e is not None]
    layers: dict[str, list[str]] = {"exclusion": [], "override": [], "suspension": []}
    for entry in live:
        for layer in sorted({r.layer for r in entry.reasons}):
            layers.setdefault(layer, []).append(entry.provider)
    return IgnoreListView(version=snapshot.version, at=snapshot.at, ignored=sorted(e.provider for e in live),
                          layers=layers, entries=list(snapshot.entries), quantizations=list(snapshot.quantizations))


def _kind_results(pv: ProviderVerdict | None, facts: CycleFacts | None, kinds: list[str],
                  modes: dict[str, Mode]) -> list[KindResult]:
    if pv is None:
        return []
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for r in pv.results:
        reason = (r.reason or r.outcome) if r.outcome != "pass" else ""
        if reason and r.language and r.kind == "language":
            reason = f"{reason} ({r.language})"  # the language is the evidence of a language probe
        elif reason and r.kind in KIND_VARIANTS:
            variant = r.task_id.rsplit("|", 1)[-1]  # the task id ends with the variant (ids.task_id)
            if variant in KIND_VARIANTS[r.kind]:
                reason = f"{reason} ({variant})"
        by_kind.setdefault(r.kind, []).append((r.outcome, reason))
    for task_id in pv.missing:
        planned = facts.planned.get(task_id) if facts is not None else None
        kind = planned[1] if planned is not None else "unknown"
        by_kind.setdefault(kind, []).append(("missing", ""))
    out = []
    for kind in [*kinds, *sorted(set(by_kind) - set(kinds))]:
        items = by_kind.get(kind)
        if not items:
            continue
        worst = min((o for o, _ in items), key=lambda o: OUTCOME_ORDER.index(o) if o in OUTCOME_ORDER else 0)
        reasons = sorted({reason for outcome, reason in items if outcome != "pass" and reason})
        out.append(KindResult(kind=kind, outcome=worst, reasons=reasons, probes=len(items),
                              mode=modes.get(kind, "enforce")))
    return out


def _ttft(pf: ProviderFacts | None) -> tuple[float | None, int, int]:
    if pf is None:
        return None, 0, 0
    measured = [ms for _, ms in pf.ttft if ms is not None]
    missing = sum(1 for _, ms in pf.ttft if ms is None)
    return (round(statistics.median(measured), 1) if measured else None), len(measured), missing


def provider_status(provider: str, *, now: datetime, state: ModelState | None, snapshot: IgnoreSnapshot | None,
                    window: ModelWindow | None, modes: dict[str, Mode], kinds: list[str],
                    spend_entries: list[SpendEntry] | None = None,
                    live_totals_: dict[str, LiveView] | None = None) -> ProviderStatus:
    """One provider's row (see :class:`ProviderStatus`); ``now`` is UTC.

    ``spend_entries`` are its probes' spend in the spend window when the caller
    grouped them already (:func:`model_status` does, once per model); else the
    window's are scanned.  ``live_totals_``: the model's live totals when the caller summed
    them already; else :func:`live_now`'s.
    """
    ps = state.providers.get(provider) if state is not None else None
    pf = window.providers.get(provider) if window is not None else None
    entry = next((e for e in (snapshot.entries if snapshot else []) if e.provider == provider), None)
    live = entry.active_at(now) if entry is not None else None
    layers: dict[str, datetime | None] = {}  # layer -> when it lets go (None: no end)
    for layer in ("exclusion", "override", "suspension"):
        ends = [r.until for r in (live.reasons if live is not None else []) if r.layer == layer]
        if ends:
            layers[layer] = None if any(u is None for u in ends) else max(u for u in ends if u is not None)
    listed = ps.present if ps is not None else bool(
        window is not None and any(e.provider == provider for e in window.listing))
    listing = next((e for e in (window.listing if window is not None else []) if e.provider == provider), None)
    gateway_status = listing.status if listing is not None else None
    quantization = listing.quantization if listing is not None else None
    name, until, detail = _state(_Facts(layers=layers, ps=ps, pf=pf, listed=listed, now=now))
    last = ps.history[-1] if ps is not None and ps.history else None
    facts = window.cycles.get(pf.verdict_cycle) if window is not None and pf is not None and pf.verdict_cycle else None
    # the log's verdict of the cycle the judge last judged it in (its stored history keeps no passes)
    verdict = pf.verdict if pf is not None and (last is None or pf.verdict_cycle == last.cycle) else None
    ttft, samples, missing = _ttft(pf)
    if spend_entries is not None:
        spend = sum_spend(spend_entries)
    else:
        spend = sum_spend(e for e in window.spend if e.provider == provider
                          and now - timedelta(seconds=SPEND_WINDOW_S) < e.at <= now) if window is not None else Spend()
    s = ps.suspension if ps is not None else None
    if live_totals_ is None:
        live_totals_ = live_now(window, now)
    return ProviderStatus(
        provider=provider,
        state=name,
        until=until,
        state_detail=detail,
        ignored=live is not None,
        layers=list(layers),
        listed=listed,
        gateway_status=gateway_status,
        quantization=quantization,
        quant_left_out=bool(snapshot is not None and listing is not None
                            and not quant.admits(snapshot.quantizations, quantization)),
        failed_streak=ps.failed_streak if ps else 0,
        passed_streak=ps.passed_streak if ps else 0,
        frozen_streak=ps.frozen_streak if ps else 0,
        ladder_step=ps.ladder_level if ps else 0,
        shadow_step=ps.shadow_level if ps else 0,
        suspension=SuspensionView(since=s.since, until=s.until, step=s.level, enforced=s.enforced,
                                  decision_id=s.decision_id, cycles=list(s.cycles)) if s is not None else None,
        last_verdict=last.verdict if last else (verdict.verdict if verdict else None),
        last_reasons=list(last.reasons) if last else (list(verdict.reasons) if verdict else []),
        last_cycle=last.cycle if last else (pf.verdict_cycle if verdict and pf else None),
        last_cycle_no=last.cycle_no if last else (pf.verdict_cycle_no if verdict and pf else None),
        last_judged=last.at if last else (pf.verdict_at if verdict and pf else None),
        results=_kind_results(verdict, facts, kinds, modes),
        ttft_ms=ttft,
        ttft_samples=samples,
        ttft_missing=missing,
        slow_vs_peers=ps.slow_vs_peers if ps else False,
        ttft_peer_median_ms=ps.ttft_median_ms if ps else None,
        last_decision=pf.decisions[-1] if pf is not None and pf.decisions else None,
        spend=spend,
        live=live_view(live_totals_, window, provider),
        confirmation=window.confirmations.get(provider) if window is not None else None,
    )


def health_of(window: ModelWindow | None, last_closed: datetime | None, now: datetime,
              cycle_interval_s: float) -> CanaryHealth:
    """The canary's own health for one model (see :class:`CanaryHealth`)."""
    announced = [d for d in (window.decisions if window is not None else [])
                 if d.action in ("canary_blind", "canary_sees")]
    if announced and announced[-1].action == "canary_blind":
        d = announced[-1]
        return CanaryHealth(state="blind", since=d.at, cause=d.reason, detail=d.detail)
    if last_closed is None:
        return CanaryHealth(state="unknown", detail="no cycle has closed yet")
    age = (now - last_closed).total_seconds()
    if age > 2 * cycle_interval_s:
        return CanaryHealth(state="stale", since=last_closed,
                            detail=f"no cycle closed for {age:.0f} s (a cycle every {cycle_interval_s:g} s)")
    since = announced[-1].at if announced else None
    return CanaryHealth(state="sees", since=since)


def _cycles(window: ModelWindow | None) -> list[CycleSummary]:
    out = []
    for facts in sorted(window.cycles.values() if window is not None else [], key=lambda f: f.opened_at):
        v = facts.verdict
        key = (facts.results, facts.closed_at, v.at if v is not None else None, len(facts.planned))
        if facts.summary_memo is not None and facts.summary_memo[0] == key:  # a closed cycle's summary is final
            out.append(facts.summary_memo[1])
            continue
        summary = CycleSummary(cycle=facts.cycle, cycle_no=facts.cycle_no, opened_at=facts.opened_at,
                               closed_at=facts.closed_at, planned=len(facts.planned), results=facts.results,
                               by_prober=dict(sorted(facts.by_prober.items())),
                               verdicts={pv.provider: pv.verdict for pv in v.verdicts} if v is not None else {},
                               unproven=list(v.unproven) if v is not None else [],
                               common_mode=list(v.common_mode) if v is not None else [])
        facts.summary_memo = (key, summary)
        out.append(facts.summary_memo[1])
    return out


def _controls(window: ModelWindow | None, controls: dict[str, str]) -> list[ControlStatus]:
    out = []
    listed = dict(window.controls) if window is not None else {}
    for kind, provider in sorted({**controls, **listed}.items()):
        latest: tuple[int, ResultRef] | None = None
        for facts in (window.cycles.values() if window is not None else []):
            for ref in facts.control_results.values():
                if ref.kind == kind and facts.planned.get(ref.task_id, (provider,))[0] == provider:
                    # the latest cycle's result; of several in it (the tool probe's variants) a failed one
                    if latest is None or facts.cycle_no > latest[0] or (
                            facts.cycle_no == latest[0] and (ref.outcome == "fail" or latest[1].outcome != "fail")):
                        latest = (facts.cycle_no, ref)
        if latest is None:
            out.append(ControlStatus(kind=kind, provider=provider))
            continue
        cycle_no, ref = latest
        proves = True if ref.outcome == "fail" else False if ref.outcome == "pass" else None
        out.append(ControlStatus(kind=kind, provider=provider, outcome=ref.outcome, reason=ref.reason,
                                 cycle_no=cycle_no, proves=proves))
    return out


def model_status(model: str, *, now: datetime, policy: Policy, kinds: list[str], state: ModelState | None,
                 snapshot: IgnoreSnapshot | None, window: ModelWindow | None, cycle_interval_s: float,
                 controls: dict[str, str] | None = None, log_start: datetime | None = None,
                 time_scale: float = 1.0) -> ModelStatus:
    """One model now (see :class:`ModelStatus`).

    Args:
        model: the model id.
        now: the time of the view (UTC).
        policy: the judge's policy (its default modes).
        kinds: the probe kinds configured (the fact kinds, ``template``, are added: they have a mode too).
        state: the judge's stored state (``None``: none in Redis).
        snapshot: the router's current snapshot (``None``: none in the bucket).
        window: the log's facts (``None``: nothing read).
        cycle_interval_s: the configured cycle length, for staleness.
        controls: the configured positive controls (kind -> provider).
        log_start: the time of the log's first message (the spend covers nothing before it).
        time_scale: how many times faster than real time the system runs (the spend's day is a real one).
    """
    kinds = [*kinds, *(k for k in FACT_KINDS if k not in kinds)]
    modes = modes_of(state, policy, kinds)
    controls = dict(controls or {})
    control_tags = set(controls.values()) | set(window.controls.values() if window is not None else [])
    names = set(state.providers if state is not None else [])
    names |= {e.provider for e in (snapshot.entries if snapshot is not None else [])}
    names |= {e.provider for e in (window.listing if window is not None else [])}
    names -= control_tags
    since = now - timedelta(seconds=SPEND_WINDOW_S)
    spent: dict[str, list[SpendEntry]] = {}  # grouped once: a scan per provider is providers x probes
    for entry in (window.spend if window is not None else []):
        if since < entry.at <= now:
            spent.setdefault(entry.provider, []).append(entry)
    live = live_now(window, now)  # summed once per model
    providers = [provider_status(p, now=now, state=state, snapshot=snapshot, window=window, modes=modes,
                                 kinds=kinds, spend_entries=spent.get(p, []), live_totals_=live)
                 for p in sorted(names)]
    closed = window.last_closed if window is not None else None
    last_closed_at = closed.at if closed is not None else (state.last_closed_deadline if state is not None else None)
    last_cycle = closed.cycle if closed is not None else (state.closed[-1] if state is not None and state.closed
                                                          else None)
    problems = []
    if state is None:
        problems.append("no judge state in Redis for this model (not judged yet, or Redis lost: the judge "
                        "rebuilds it from the log before its next message)")
    if snapshot is None:
        problems.append("no ignore-list snapshot in the KV bucket for this model (the router has not written one)")
    lv = window.last_verdict if window is not None else None
    spend = spend_view(window.spend, now, covered_from=log_start or window.first_at, cut_at=window.spend_cut_at,
                       time_scale=time_scale) if window is not None else None
    return ModelStatus(
        model=model,
        at=now,
        modes=modes,
        mode=next(iter(modes.values())) if len(set(modes.values())) == 1 else None,
        last_cycle=last_cycle,
        last_cycle_no=closed.cycle_no if closed is not None else None,
        last_cycle_closed=last_closed_at,
        last_cycle_age_s=round((now - last_closed_at).total_seconds(), 3) if last_closed_at else None,
        cycle_interval_s=cycle_interval_s,
        health=health_of(window, last_closed_at, now, cycle_interval_s),
        ignore_list=ignore_list_view(snapshot, now),
        spend=spend,
        providers=providers,
        controls=_controls(window, controls),
        unproven=list(lv.unproven) if lv is not None else [],
        common_mode=list(lv.common_mode) if lv is not None else [],
        cycles=_cycles(window),
        language_coverage_cycles=window.coverage[0] if window is not None and window.coverage else None,
        languages_per_cycle=window.coverage[1] if window is not None and window.coverage else None,
        listing=listing_facts(window.listing, window.dropped, window.dropped_cut) if window is not None
        else ListingFacts(),
        ttft_peer_median_ms=state.ttft_peer_median_ms if state is not None else None,
        ttft_peer_bar_ms=state.ttft_peer_bar_ms if state is not None else None,
        problems=problems,
    )


def fleet_status(models: list[ModelStatus], *, now: datetime, window: LogWindow | None) -> FleetStatus:
    """Every model's view, with the spend summed over them."""
    spend = None
    views = [m.spend for m in models if m.spend is not None]
    if views:
        total = Spend(**{f: sum(getattr(v.total, f) for v in views) for f in
                         ("probes", "requests", "prompt_tokens", "completion_tokens", "tokens", "unpriced_tokens")},
                      usd=round(sum(v.total.usd for v in views), 10))
        covered = min(v.covered_s for v in views)
        spend = SpendView(since=views[0].since, at=now, window_s=views[0].window_s, covered_s=covered, total=total,
                          usd_per_day=round(sum(v.usd_per_day for v in views), 8),
                          projected=any(v.projected for v in views), cut=any(v.cut for v in views),
                          time_scale=views[0].time_scale)
    return FleetStatus(at=now, models=models, spend=spend, log_since=window.since if window is not None else None,
                       log_events=window.events if window is not None else 0,
                       sizing=window.sized if window is not None else None)


def provider_detail(status: ModelStatus, provider: str, *, state: ModelState | None, window: ModelWindow | None,
                    policy: Policy) -> ProviderDetail:
    """One provider of a model view in depth (see :class:`ProviderDetail`).

    Raises:
        KeyError: the provider has no row in ``status``.
    """
    row = next((p for p in status.providers if p.provider == provider), None)
    if row is None:
        raise KeyError(provider)
    ps = state.providers.get(provider) if state is not None else None
    pf = window.providers.get(provider) if window is not None else None
    step = min(ps.ladder_level if ps else 0, len(policy.ladder_s) - 1)
    return ProviderDetail(model=status.model, modes=status.modes, status=row,
                          history=list(ps.history) if ps else [], decisions=list(pf.decisions) if pf else [],
                          next_suspension_s=policy.ladder_s[step], ladder_reset_s=policy.ladder_reset_s,
                          failed_cycles_to_suspend=policy.failed_cycles_to_suspend,
                          passed_cycles_to_recover=policy.passed_cycles_to_recover)
