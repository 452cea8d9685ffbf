"""The quality feed and the positive controls per cycle: views of the one read model, for other systems.

What lives here: the JSON feed the dashboard serves at ``/api/v1/quality``
(per model and provider: the state and the ignore-list layer behind it, the
last result of every probe kind with its reason codes, the streaks, the
quantization the gateway lists, the time of the last probe, the chat backends'
served counts and live counts, the last answer of a confirmation probe), and each positive control's result per closed cycle (the
dashboard's controls table, its ``canary_control_*`` series and the alert on
them).  Both are built from what ``canary status`` reads
(:class:`~reverie_canary.services.dashboard.core.ModelStatus` and the log's
:class:`~reverie_canary.services.dashboard.core.ModelWindow`), so the feed, the
pages and ``canary status`` cannot disagree.

The rules of a control's cycle (the judge's, docs/concepts/probes.md,
contract 2): a positive control is a host known to fail its kind's probe.  In
one closed cycle, per kind:

- ``failed``: its probe failed, as it should -- the probe is strong enough;
- ``passed``: its probe passed -- the probe was too weak, so every result of
  that kind in that cycle proves nothing (the judge marks the kind *unproven*);
  a pass wins over a failure when the kind had several control probes;
- ``not_probed``: no control probe of the kind was planned, or none came back
  with a pass or a failure (a transport error, inconclusive, missing): the
  cycle says nothing about the probe's strength.

``cycles_without_failure`` counts the closed cycles, newest first, since the
kind's control last failed: the alert ``CanaryPositiveControlNotFailing``
fires when it reaches its threshold.

Pure: no NATS, Redis, HTTP or clock; the time of a view is the status's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from msgspec import Struct

from reverie_canary.services.dashboard.core import (
    OUTCOME_ORDER,
    ConfirmationView,
    CycleFacts,
    LiveView,
    ModelStatus,
    ModelWindow,
    ProviderStateName,
    ProviderStatus,
    _kind_results,
)
from reverie_canary.shared.contract.events import Mode, ProviderVerdict

ControlResult = Literal["failed", "passed", "not_probed"]
#: The letter of each control result on the dashboard (not the matrix's letters: a control should fail).
CONTROL_LETTERS: dict[str, str] = {"failed": "F", "passed": "P", "not_probed": "N"}
#: What each control result means, for the legend and the accessible labels.
CONTROL_MEANINGS: dict[str, str] = {
    "failed": "failed, as it should: the probe is strong",
    "passed": "passed: the probe was too weak, that kind's results proved nothing this cycle",
    "not_probed": "not probed: no control result this cycle (not planned, transport error, missing)",
}
#: The served counts the feed sums: those of the chat backends' periods that end in the last this many seconds.
SERVED_WINDOW_S = 3600.0
#: The state a layer of the ignore list gives a provider (the other states come from the judge or the gateway).
STATE_LAYERS: dict[str, str] = {"excluded": "exclusion", "overridden": "override", "suspended": "suspension"}


# -- the positive controls per cycle ------------------------------------------------------------------------


class ControlCell(Struct, frozen=True, kw_only=True):
    """One kind's positive control in one closed cycle.

    ``result`` per the module's rules; ``outcome`` the control probe's own
    outcome (``pass``, ``fail``, ``transport_error`` ...; ``missing``: planned,
    no result; ``not_planned``: no control probe of the kind in the cycle);
    ``reason`` its reason code.  ``closed_at`` UTC.
    """

    cycle: str
    cycle_no: int
    closed_at: datetime | None
    result: ControlResult
    letter: str
    outcome: str
    reason: str = ""

    @property
    def label(self) -> str:
        """The cell's accessible label (and hover title)."""
        text = f"cycle #{self.cycle_no}: {CONTROL_MEANINGS[self.result]}"
        if self.outcome not in ("pass", "fail"):
            text += f" ({self.outcome.replace('_', ' ')})"
        if self.reason:
            text += f"; reason {self.reason}"
        return text


class ControlRow(Struct, frozen=True, kw_only=True):
    """One kind's positive control over the closed cycles the window holds (``cells`` oldest first).

    ``last`` is the newest cell's result (``None``: no closed cycle);
    ``cycles_without_failure`` the closed cycles since the control last failed
    (all of them when it never failed in the window: a lower bound then).
    """

    kind: str
    provider: str
    cells: list[ControlCell]
    last: ControlResult | None = None
    last_cycle_no: int | None = None
    cycles_without_failure: int = 0

    def cell(self, cycle: str) -> ControlCell | None:
        """The cell of ``cycle`` (``None``: not among the row's cycles)."""
        return next((c for c in self.cells if c.cycle == cycle), None)


def _closed(window: ModelWindow | None) -> list[CycleFacts]:
    return sorted((f for f in (window.cycles.values() if window is not None else []) if f.verdict is not None),
                  key=lambda f: (f.cycle_no, f.opened_at))


def control_cell(facts: CycleFacts, kind: str) -> ControlCell:
    """The control of ``kind`` in one closed cycle (the module's rules)."""
    planned = [task for task, (_, k, _, control) in facts.planned.items() if control and k == kind]
    closed = facts.closed_at or (facts.verdict.at if facts.verdict is not None else None)
    refs = [facts.control_results[t] for t in planned if t in facts.control_results]
    # a failed result first: a control probed several times in a kind (the tool probe's variants) proves it
    # when one of them failed, as the judge counts it
    for outcome, result in (("fail", "failed"), ("pass", "passed")):
        hit = next((r for r in refs if r.outcome == outcome), None)
        if hit is not None:
            return ControlCell(cycle=facts.cycle, cycle_no=facts.cycle_no, closed_at=closed, result=result,
                               letter=CONTROL_LETTERS[result], outcome=outcome, reason=hit.reason)
    if not planned:
        outcome, reason = "not_planned", ""
    elif not refs:
        outcome, reason = "missing", ""
    else:
        worst = min(refs, key=lambda r: OUTCOME_ORDER.index(r.outcome) if r.outcome in OUTCOME_ORDER else 0)
        outcome, reason = worst.outcome, worst.reason
    return ControlCell(cycle=facts.cycle, cycle_no=facts.cycle_no, closed_at=closed, result="not_probed",
                       letter=CONTROL_LETTERS["not_probed"], outcome=outcome, reason=reason)


def control_rows(window: ModelWindow | None, controls: dict[str, str], cycles: int | None = None) -> list[ControlRow]:
    """Every configured or listed positive control of a model, per closed cycle (the last ``cycles``).

    Args:
        window: the log's facts of the model (``None``: nothing read).
        controls: the configured controls (kind -> provider); discovery's listed ones are added.
        cycles: the cells kept per row (``None``: every closed cycle of the window);
            ``cycles_without_failure`` counts over the whole window either way.
    """
    by_kind = {**controls, **(window.controls if window is not None else {})}
    closed = _closed(window)
    for facts in closed:  # a kind probed by a control the settings do not name (discovery's plan names it)
        for provider, kind, _, control in facts.planned.values():
            if control:
                by_kind.setdefault(kind, provider)
    rows = []
    for kind in sorted(by_kind):
        cells = [control_cell(f, kind) for f in closed]
        since = 0
        for c in reversed(cells):
            if c.result == "failed":
                break
            since += 1
        rows.append(ControlRow(kind=kind, provider=by_kind[kind], cells=cells[-cycles:] if cycles else cells,
                               last=cells[-1].result if cells else None,
                               last_cycle_no=cells[-1].cycle_no if cells else None, cycles_without_failure=since))
    return rows


def control_samples(model: str, rows: list[ControlRow]):
    """The ``canary_control_*`` samples of one model: ``(family key, labels, value)``.

    ``control_result{model, kind, result}`` is 1 for the result of the kind's
    last closed cycle and 0 for the other two; ``control_cycles_without_failure
    {model, kind}`` is :attr:`ControlRow.cycles_without_failure`.
    """
    for row in rows:
        labels = {"model": model, "kind": row.kind}
        yield "control_cycles_without_failure", labels, float(row.cycles_without_failure)
        if row.last is not None:
            for result in CONTROL_LETTERS:
                yield "control_result", {**labels, "result": result}, 1.0 if row.last == result else 0.0


# -- the quality feed --------------------------------------------------------------------------------------


class KindVerdict(Struct, frozen=True, kw_only=True):
    """The last result of one probe kind for one provider: the newest closed cycle that judged that kind.

    ``outcome`` is the worst of its probes in that cycle (``pass``, ``fail``,
    ``blind``, ``transport_error``, ``inconclusive``, ``missing``,
    ``not_applicable``); ``reasons`` their reason codes (a language probe's
    with its language, ``language_switch (es)``); ``mode`` the mode the judge
    runs the kind in now; ``probes`` how many probes of the kind that cycle had;
    ``at`` when the cycle was judged (UTC).
    """

    kind: str
    outcome: str
    reasons: list[str] = []
    mode: Mode = "enforce"
    probes: int = 0
    cycle: str
    cycle_no: int
    at: datetime


class Streaks(Struct, frozen=True, kw_only=True):
    """Consecutive cycles of the provider that failed, passed or were frozen (the judge's)."""

    failed: int = 0
    passed: int = 0
    frozen: int = 0


class ServedView(Struct, frozen=True, kw_only=True):
    """Requests the chat backends reported serving through the provider, in their periods ending in
    ``since`` .. ``until`` (UTC: the :data:`SERVED_WINDOW_S` before the newest period reported); counts under the
    provider's display name count for each of its endpoints."""

    requests: int
    since: datetime
    until: datetime


class FeedProvider(Struct, frozen=True, kw_only=True):
    """One provider of one model in the quality feed.

    ``state`` is the dashboard's state (the first rule of
    :data:`~reverie_canary.services.dashboard.core.STATE_RULES` that holds) and
    ``layer`` the ignore-list layer behind it (``exclusion``, ``override``,
    ``suspension``; ``None`` for a state the judge or the gateway gives);
    ``layers`` every layer that ignores the provider now and ``ignored``
    whether live traffic ignores it (``provider.ignore``); ``until`` when the
    state ends (UTC; ``None``: no end or none).  ``last_verdict`` is the
    verdict of its last judged cycle (``passed``, ``failed``, ``frozen``,
    ``blind``) with its ``last_reasons``, judged at ``last_judged``;
    ``kinds`` the last result of every probe kind (:class:`KindVerdict`);
    ``last_probe_at`` the time of its last probe result the dashboard read
    (UTC); ``quantization`` what the gateway lists for the endpoint
    (``fp8``, ``int4`` ...; ``None``: not declared); ``ttft_ms`` the median
    time to first token of its recent probes (ms); ``served`` the chat
    backends' counts (``None``: no backend published counts for the model).

    ``live``: the chat backends' content-free live counts of the provider
    (``canary.live.<model>``: replies, the failing share, the top reasons,
    ``ignore_not_applied``; :class:`~reverie_canary.services.dashboard.core.LiveView`),
    ``null`` when no backend counted it in the window; ``confirmation`` the last
    answer of a pinned confirmation probe to its live failures (``null``: none).
    Both are shown beside the verdicts: live counts never suspend anyone.
    """

    provider: str
    state: ProviderStateName
    layer: str | None = None
    layers: list[str] = []
    ignored: bool = False
    until: datetime | None = None
    state_detail: str = ""
    listed: bool = True
    quantization: str | None = None
    streaks: Streaks = Streaks()
    ladder_step: int = 0
    last_verdict: str | None = None
    last_reasons: list[str] = []
    last_cycle_no: int | None = None
    last_judged: datetime | None = None
    last_probe_at: datetime | None = None
    kinds: list[KindVerdict] = []
    ttft_ms: float | None = None
    served: ServedView | None = None
    live: LiveView | None = None
    confirmation: ConfirmationView | None = None


class FeedControl(Struct, frozen=True, kw_only=True):
    """One kind's positive control: its last closed cycle's result and the cycles since it last failed.

    ``last`` per the module's rules (``None``: no closed cycle); while it is
    not ``failed``, that kind's results prove less than they seem.
    """

    kind: str
    provider: str
    last: ControlResult | None = None
    last_cycle_no: int | None = None
    cycles_without_failure: int = 0


class FeedHealth(Struct, frozen=True, kw_only=True):
    """Whether the canary itself can see the model: ``sees``, ``blind`` (with its ``cause``), ``stale``
    (no cycle closed for two intervals) or ``unknown``; ``since`` UTC."""

    state: Literal["sees", "blind", "stale", "unknown"]
    since: datetime | None = None
    cause: str = ""


class FeedModel(Struct, frozen=True, kw_only=True):
    """One model in the quality feed: the canary's view of it, then every provider.

    ``modes`` is the mode per probe kind (``observe``: verdicts are recorded,
    routing untouched); ``last_cycle_no`` / ``last_cycle_closed`` (UTC) the
    newest closed cycle; ``unproven`` the kinds whose control passed in the
    last cycle, ``common_mode`` the kinds most providers failed at once (both
    prove nothing that cycle); ``ignore_list_version`` the router's snapshot
    version the states come from; ``problems`` what the read could not find.
    """

    model: str
    modes: dict[str, Mode]
    health: FeedHealth
    cycle_interval_s: float
    last_cycle_no: int | None = None
    last_cycle_closed: datetime | None = None
    ignore_list_version: int = 0
    unproven: list[str] = []
    common_mode: list[str] = []
    controls: list[FeedControl] = []
    providers: list[FeedProvider] = []
    problems: list[str] = []


class Feed(Struct, frozen=True, kw_only=True):
    """The quality feed (``GET /api/v1/quality``): every model asked for.

    No field holds the time of the answer, so an unchanged view has the same
    bytes and the same ETag; ``served_window_s`` is the span the served
    counts cover (s).
    """

    models: list[FeedModel]
    served_window_s: float = SERVED_WINDOW_S


def kind_verdicts(provider: str, closed: list[tuple[CycleFacts, dict[str, ProviderVerdict]]], kinds: list[str],
                  modes: dict[str, Mode]) -> list[KindVerdict]:
    """The last result of every kind for ``provider``, newest closed cycle first (``closed`` newest first, each
    with its verdicts by provider)."""
    found: dict[str, KindVerdict] = {}
    for facts, index in closed:
        pv = index.get(provider)
        if pv is None:
            continue
        for r in _kind_results(pv, facts, kinds, modes):
            if r.kind not in found:
                found[r.kind] = KindVerdict(kind=r.kind, outcome=r.outcome, reasons=list(r.reasons), mode=r.mode,
                                            probes=r.probes, cycle=facts.cycle, cycle_no=facts.cycle_no,
                                            at=facts.verdict.at if facts.verdict is not None else facts.opened_at)
        if len(found) >= len(kinds) and all(k in found for k in kinds):
            break
    order = {k: i for i, k in enumerate(kinds)}
    return sorted(found.values(), key=lambda v: (order.get(v.kind, len(order)), v.kind))


def _served(window: ModelWindow | None) -> dict[str, ServedView] | None:
    """Each provider's served counts in the :data:`SERVED_WINDOW_S` up to the newest period a backend reported
    (not up to now: an unchanged log gives an unchanged feed, and its ETag holds)."""
    from reverie_canary.services.dashboard.pages import _served_by_tag, served_in

    if window is None or not window.served:
        return None
    until = max(c.at for c in window.served)
    since = until - timedelta(seconds=SERVED_WINDOW_S)
    served = served_in(window, since, until)
    if served is None:
        return None
    tags = {e.provider for e in window.listing} | set(served)
    return {tag: ServedView(requests=_served_by_tag(served, window, tag), since=since, until=until) for tag in tags}


def feed_provider(p: ProviderStatus, *, window: ModelWindow | None, kinds: list[KindVerdict],
                  served: dict[str, ServedView] | None) -> FeedProvider:
    """One provider's feed entry (see :class:`FeedProvider`) from its ``canary status`` row."""
    listing = {e.provider: e for e in (window.listing if window is not None else [])}
    pf = window.providers.get(p.provider) if window is not None else None
    endpoint = listing.get(p.provider)
    return FeedProvider(
        provider=p.provider, state=p.state, layer=STATE_LAYERS.get(p.state), layers=list(p.layers),
        ignored=p.ignored, until=p.until, state_detail=p.state_detail, listed=p.listed,
        quantization=endpoint.quantization if endpoint is not None else None,
        streaks=Streaks(failed=p.failed_streak, passed=p.passed_streak, frozen=p.frozen_streak),
        ladder_step=p.ladder_step, last_verdict=p.last_verdict, last_reasons=list(p.last_reasons),
        last_cycle_no=p.last_cycle_no, last_judged=p.last_judged,
        last_probe_at=pf.last_probe_at if pf is not None else None, kinds=kinds, ttft_ms=p.ttft_ms,
        served=served.get(p.provider) if served is not None else None, live=p.live, confirmation=p.confirmation)


def feed_model(status: ModelStatus, window: ModelWindow | None, *, kinds: list[str],
               controls: dict[str, str]) -> FeedModel:
    """One model's feed entry (see :class:`FeedModel`): its status, each provider, each control.

    Args:
        status: the model's ``canary status`` view (its time decides states that end, such as a suspension).
        window: the log's facts of the model.
        kinds: the probe kinds configured (their order is the order of each provider's ``kinds``).
        controls: the configured positive controls (kind -> provider).
    """
    closed = [(f, {v.provider: v for v in f.verdict.verdicts} if f.verdict is not None else {})
              for f in reversed(_closed(window))]
    served = _served(window)
    providers = [feed_provider(p, window=window, kinds=kind_verdicts(p.provider, closed, kinds, status.modes),
                               served=served) for p in status.providers]
    rows = control_rows(window, controls, cycles=1)
    h = status.health
    return FeedModel(
        model=status.model, modes=dict(status.modes), health=FeedHealth(state=h.state, since=h.since, cause=h.cause),
        cycle_interval_s=status.cycle_interval_s, last_cycle_no=status.last_cycle_no,
        last_cycle_closed=status.last_cycle_closed, ignore_list_version=status.ignore_list.version,
        unproven=list(status.unproven), common_mode=list(status.common_mode),
        controls=[FeedControl(kind=r.kind, provider=r.provider, last=r.last, last_cycle_no=r.last_cycle_no,
                              cycles_without_failure=r.cycles_without_failure) for r in rows],
        providers=providers, problems=list(status.problems))
