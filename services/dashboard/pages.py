"""The dashboard's pages and ``canary incident``'s look-back, as views of the one read model.

What lives here: every derivation the web pages and ``canary incident`` show
beyond :mod:`reverie_canary.services.dashboard.core`'s per-model status -- the
provider x cycle matrix (one cell per closed cycle, its verdict, failing kinds
and reason codes), the provider page (timeline, failed probes with their reply
excerpt and evidence, ladder history, overrides and lifts), and the look-back
("model X around 21:40": who was eligible and who ignored, with the snapshot
version; what the canary saw around it; who failed since).  Each is built from
the same inputs as ``canary status`` (:class:`~reverie_canary.services.dashboard.core.ModelStatus`
and the log's :class:`~reverie_canary.services.dashboard.core.ModelWindow`), so the
dashboard, ``canary status`` and ``canary incident`` cannot disagree.

It has no policy of its own and knows nothing of NATS, Redis, HTTP or the wall
clock: ``now`` and ``at`` are arguments (UTC).  Every view is a msgspec Struct
whose JSON form (:func:`~reverie_canary.services.dashboard.core.to_json`) is what
``--json`` prints.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Literal

from msgspec import Struct

from reverie_canary.services.dashboard.core import (
    CommandView,
    ConfirmationView,
    CycleFacts,
    DecisionView,
    FailedProbe,
    LiveView,
    ModelStatus,
    ModelWindow,
    ProviderDetail,
    ProviderStatus,
    SnapshotMark,
    live_totals,
    live_view,
)
from reverie_canary.shared.contract import quantization as quant
from reverie_canary.shared.contract.snapshots import IgnoreReason
from reverie_canary.shared.contract.timefmt import utc_text

CellVerdict = Literal["passed", "failed", "frozen", "blind", "not_probed"]

#: The letter of each cell verdict (colour-blind safe: the letter says it without the colour).
LETTERS: dict[str, str] = {"passed": "P", "failed": "F", "frozen": "Z", "blind": "B", "not_probed": "N"}
#: What each letter means, for the legend and the accessible labels.
MEANINGS: dict[str, str] = {
    "passed": "passed: every probe passed",
    "failed": "failed: a quality failure (two in a row suspend)",
    "frozen": "frozen: transport errors, inconclusive or missing results (the streak neither grows nor resets)",
    "blind": "blind: the canary could not see (its own key or the gateway), not the provider's fault",
    "not_probed": "not probed: no verdict for this provider in this cycle",
}
#: The dashboard's default number of cycles per row (a day of 30-minute cycles).
DEFAULT_CYCLES = 48
#: The look-back's default half-window (s): "around 21:40" is 21:40 +- 45 min.
LOOKBACK_WINDOW_S = 45 * 60.0
#: The longest half-window a look-back accepts (s).
LOOKBACK_MAX_WINDOW_S = 7 * 86400.0
#: The failed cycles after the look-back's time listed per provider (the rest counted, the newest named).
FAILED_SINCE_SHOWN = 5
#: Decisions that move a provider on the suspension ladder (the provider page's ladder history).
LADDER_ACTIONS = ("suspend", "end", "would_suspend", "would_end", "floor_held")


class CellView(Struct, frozen=True, kw_only=True):
    """One provider in one closed cycle: the verdict, its letter, the failing kinds and reason codes.

    ``ttft_ms`` is the median time to first token of its probes in that cycle
    (ms; ``None``: no reply with text).
    """

    cycle: str
    cycle_no: int
    closed_at: datetime | None
    verdict: CellVerdict
    letter: str
    kinds: list[str] = []
    reasons: list[str] = []
    ttft_ms: float | None = None

    @property
    def label(self) -> str:
        """The cell's accessible label (and hover title): verdict, failing kinds, reason codes."""
        text = f"cycle #{self.cycle_no}: {self.verdict.replace('_', ' ')}"
        if self.kinds:
            text += f"; failing kinds: {', '.join(self.kinds)}"
        if self.reasons:
            text += f"; reasons: {', '.join(self.reasons)}"
        return text


class MatrixRow(Struct, frozen=True, kw_only=True):
    """One provider's row: its status (as ``canary status`` has it) and one cell per cycle, oldest first."""

    status: ProviderStatus
    cells: list[CellView]


class CycleColumn(Struct, frozen=True, kw_only=True):
    """One column of the matrix: a closed cycle (UTC times)."""

    cycle: str
    cycle_no: int
    opened_at: datetime
    closed_at: datetime | None


class ModelMatrix(Struct, frozen=True, kw_only=True):
    """The fleet page of one model: its status header and the provider x cycle matrix (oldest cycle first; the page shows the newest first)."""

    status: ModelStatus
    columns: list[CycleColumn]
    rows: list[MatrixRow]
    controls: list = []  # the positive controls per kind over the same cycles (feed.ControlRow)


class TimelineItem(Struct, frozen=True, kw_only=True):
    """One line of a provider's timeline: a verdict, a decision or an operator command (UTC ``at``)."""

    at: datetime
    what: Literal["verdict", "decision", "command"]
    title: str
    detail: str = ""
    verdict: str | None = None


class ProviderPage(Struct, frozen=True, kw_only=True):
    """The provider page: the detail ``canary explain`` shows, the row's cells, failed probes, ladder, commands.

    ``failures`` newest first, ``suspension_failures`` the ones in the cycles its
    current suspension rests on; ``ignore_reasons`` every live ignore-list layer
    of it now (who, why, until when).
    """

    model: str
    provider: str
    detail: ProviderDetail
    cells: list[CellView]
    failures: list[FailedProbe] = []
    suspension_failures: list[FailedProbe] = []
    ladder: list[DecisionView] = []
    commands: list[CommandView] = []
    timeline: list[TimelineItem] = []
    ignore_reasons: list[IgnoreReason] = []


class FailedSince(Struct, frozen=True, kw_only=True):
    """A cycle after the look-back's time in which the provider failed (the matching kinds, reason codes)."""

    cycle: str
    cycle_no: int
    closed_at: datetime | None
    kinds: list[str] = []
    reasons: list[str] = []


class LookbackProvider(Struct, frozen=True, kw_only=True):
    """One provider at the look-back's time: ``eligible``, ``ignored`` (by which layers, why) or
    ``left_out`` (not ignored, but the snapshot's ``quantizations`` allow-list did not admit its
    ``quantization``: an operator's quantization floor), or ``unknown`` when no ignore-list snapshot
    at that time is known; what the canary saw of it in the cycles around, which failures followed,
    and how many requests it served (``served``: from the chat backends' counts, ``None`` when none
    were published).  ``quantization``: what the listing of that time declared (``None``: nothing,
    or not listed).  ``live``: the chat backends' live counts of it in the window (``None``:
    none); ``confirmation`` the last answer of a pinned confirmation probe to its live failures
    that the log read holds (up to now, not only the window's).

    ``failed_since`` holds the first :data:`FAILED_SINCE_SHOWN` failed cycles after the look-back's
    time (the ones that tell what followed the report), ``failed_since_count`` all of them, and
    ``failed_since_last`` the newest when more were left out: a provider failing every cycle for a
    week would otherwise list 336 of them.
    """

    provider: str
    routing: Literal["eligible", "ignored", "left_out", "unknown"]
    quantization: str | None = None
    layers: list[str] = []
    reasons: list[IgnoreReason] = []
    cells: list[CellView] = []
    failed_since: list[FailedSince] = []
    failed_since_count: int = 0
    failed_since_last: FailedSince | None = None
    served: int | None = None
    live: LiveView | None = None
    confirmation: ConfirmationView | None = None


class Lookback(Struct, frozen=True, kw_only=True):
    """What ``canary incident`` and the look-back form answer for ``model`` at ``at`` +- ``window_s``.

    ``snapshot_version``/``snapshot_at`` name the IgnoreSnapshot in force at
    ``at`` (0/None: none known); ``next_version`` the first change after it
    within the window, if any.  ``eligible`` and ``ignored`` are provider
    tags; ``columns`` the cycles that opened inside the window; ``served`` the
    chat backends' request counts per provider in the window (``None``: none
    published).  ``quantizations`` is the allow-list the snapshot in force had
    (empty: no quantization floor) and ``left_out`` the providers it did not
    admit (neither eligible nor ignored).  ``kind``/``language`` narrow
    ``failed_since``.  ``problems`` says what the read could not find.  Times UTC.
    """

    model: str
    at: datetime
    window_s: float
    since: datetime
    until: datetime
    now: datetime
    snapshot_version: int = 0
    snapshot_at: datetime | None = None
    next_version: int | None = None
    next_at: datetime | None = None
    eligible: list[str] = []
    ignored: list[str] = []
    quantizations: list[str] = []
    left_out: list[str] = []
    columns: list[CycleColumn] = []
    providers: list[LookbackProvider] = []
    kind: str | None = None
    language: str | None = None
    served: dict[str, int] | None = None
    problems: list[str] = []


# -- cells ------------------------------------------------------------------------------------------------------


def _blind_spans(window: ModelWindow | None) -> list[tuple[datetime, datetime | None]]:
    """When the canary said it was blind for the model (``canary_blind`` to ``canary_sees``; ``None``: still)."""
    spans: list[tuple[datetime, datetime | None]] = []
    for d in sorted(window.decisions if window is not None else [], key=lambda d: d.at):
        if d.action == "canary_blind" and (not spans or spans[-1][1] is not None):
            spans.append((d.at, None))
        elif d.action == "canary_sees" and spans and spans[-1][1] is None:
            spans[-1] = (spans[-1][0], d.at)
    return spans


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return round(ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2, 1)


def cell(facts: CycleFacts, provider: str, blind: list[tuple[datetime, datetime | None]] = (),
         kind: str | None = None, language: str | None = None, index: dict | None = None,
         in_blind: bool | None = None) -> CellView:
    """One provider's cell in one closed cycle (see :class:`CellView`).

    A frozen (or missing) verdict in a cycle that closed while the canary said
    it was blind is ``blind``; a provider without a verdict is ``not_probed``.
    ``kind``/``language`` narrow the failing kinds and reasons to those.
    ``index`` (the cycle's verdicts by provider, :func:`verdict_index`) and
    ``in_blind`` (:func:`closed_blind`) are the per-cycle parts when the caller
    computed them once for every provider (the fleet matrix does).
    """
    if index is not None:
        pv = index.get(provider)
    else:
        pv = next((v for v in facts.verdict.verdicts if v.provider == provider), None) if facts.verdict else None
    closed = facts.closed_at or (facts.verdict.at if facts.verdict else None)
    if in_blind is None:
        in_blind = closed_blind(closed, blind)
    samples = facts.ttft.get(provider)
    ttft = _median([ms for ms in samples if ms is not None]) if samples else None
    if pv is None:
        verdict: str = "blind" if in_blind else "not_probed"
        return CellView(cycle=facts.cycle, cycle_no=facts.cycle_no, closed_at=closed, verdict=verdict,
                        letter=LETTERS[verdict], ttft_ms=ttft)
    verdict = pv.verdict if pv.verdict in LETTERS else "frozen"
    if verdict == "passed" and kind is None and language is None:  # the common case: nothing to name
        return CellView(cycle=facts.cycle, cycle_no=facts.cycle_no, closed_at=closed, verdict="passed",
                        letter="P", ttft_ms=ttft)
    if verdict == "frozen" and in_blind:
        verdict = "blind"
    failing = [r for r in pv.results if r.outcome == "fail"
               and (kind is None or r.kind == kind) and (language is None or r.language == language)]
    kinds = sorted({r.kind for r in failing})
    reasons = sorted({f"{r.reason or r.outcome}" + (f" ({r.language})" if r.kind == "language" and r.language
                                                      else "") for r in failing})
    if not reasons and verdict != "passed" and kind is None and language is None:
        reasons = sorted(set(pv.reasons))
    return CellView(cycle=facts.cycle, cycle_no=facts.cycle_no, closed_at=closed, verdict=verdict,
                    letter=LETTERS[verdict], kinds=kinds, reasons=reasons, ttft_ms=ttft)


def closed_blind(closed: datetime | None, blind: list[tuple[datetime, datetime | None]]) -> bool:
    """Whether a cycle that closed at ``closed`` closed inside one of the ``blind`` spans."""
    return closed is not None and any(start <= closed and (end is None or closed < end) for start, end in blind)


def verdict_index(facts: CycleFacts) -> dict:
    """A closed cycle's verdicts by provider (one lookup per cell instead of a scan)."""
    return {v.provider: v for v in facts.verdict.verdicts} if facts.verdict is not None else {}


def _closed_cycles(window: ModelWindow | None, n: int | None = None) -> list[CycleFacts]:
    cycles = sorted((f for f in (window.cycles.values() if window is not None else []) if f.verdict is not None),
                    key=lambda f: (f.cycle_no, f.opened_at))
    return cycles[-n:] if n else cycles


def _column(f: CycleFacts) -> CycleColumn:
    return CycleColumn(cycle=f.cycle, cycle_no=f.cycle_no, opened_at=f.opened_at,
                       closed_at=f.closed_at or (f.verdict.at if f.verdict else None))


def model_matrix(status: ModelStatus, window: ModelWindow | None, cycles: int = DEFAULT_CYCLES) -> ModelMatrix:
    """The fleet page of one model: every provider of ``status`` x its last ``cycles`` closed cycles."""
    closed = _closed_cycles(window, cycles)
    blind = _blind_spans(window)
    memos = []
    for f in closed:
        # a closed cycle's cells change only with a late result or a new blind span: memoised per cycle, so a
        # page costs the newest cycle's cells, not all of them (benchmarks/dashboard_bench.py)
        key = (f.results, f.verdict.at if f.verdict else None, tuple(blind))
        if f.memo_key != key:
            f.memo, f.memo_key = {}, key
        memos.append((f, f.memo, None, None))
    rows = []
    for p in status.providers:
        cells = []
        for i, (f, memo, index, in_blind) in enumerate(memos):
            c = memo.get(p.provider)
            if c is None:
                if index is None:
                    index = verdict_index(f)
                    in_blind = closed_blind(f.closed_at or (f.verdict.at if f.verdict else None), blind)
                    memos[i] = (f, memo, index, in_blind)
                c = memo[p.provider] = cell(f, p.provider, index=index, in_blind=in_blind)
            cells.append(c)
        rows.append(MatrixRow(status=p, cells=cells))
    return ModelMatrix(status=status, columns=[_column(f) for f in closed], rows=rows)


# -- the provider page -------------------------------------------------------------------------------------------


def provider_page(detail: ProviderDetail, window: ModelWindow | None, *, now: datetime,
                  snapshot_entries: list | None = None, cycles: int = DEFAULT_CYCLES) -> ProviderPage:
    """The provider page (see :class:`ProviderPage`) of ``detail.status.provider``; ``now`` UTC."""
    provider = detail.status.provider
    closed = _closed_cycles(window, cycles)
    blind = _blind_spans(window)
    cells = [cell(f, provider, blind) for f in closed]
    failures = sorted((fp for f in (window.cycles.values() if window is not None else []) for fp in f.failures
                       if fp.provider == provider), key=lambda fp: fp.at, reverse=True)
    suspension = detail.status.suspension
    behind = set(suspension.cycles) if suspension is not None else set()
    if not behind:  # the decision that suspended it names its cycles too
        last = next((d for d in reversed(detail.decisions) if d.action in ("suspend", "would_suspend")), None)
        behind = set(last.cycles) if last is not None and suspension is not None else set()
    commands = [c for c in (window.commands if window is not None else []) if c.provider == provider]
    timeline: list[TimelineItem] = []
    for c in cells:
        if c.closed_at is not None and c.verdict != "not_probed":
            timeline.append(TimelineItem(at=c.closed_at, what="verdict", verdict=c.verdict,
                                         title=f"cycle #{c.cycle_no} {c.verdict}", detail=", ".join(c.reasons)))
    for d in detail.decisions:
        until = f" until {d.until:%Y-%m-%dT%H:%M:%SZ}" if d.until else ""
        timeline.append(TimelineItem(at=d.at, what="decision", title=f"{d.action} [{d.mode}]{until}",
                                     detail="; ".join(x for x in (d.reason, d.detail) if x)))
    for c in commands:
        timeline.append(TimelineItem(at=c.at, what="command", title=f"{c.command.replace('_', ' ')} by {c.actor}",
                                     detail=c.reason))
    timeline.sort(key=lambda t: t.at, reverse=True)
    reasons: list[IgnoreReason] = []
    for entry in snapshot_entries or []:
        if entry.provider == provider:
            live = entry.active_at(now)
            reasons = list(live.reasons) if live is not None else []
    return ProviderPage(model=detail.model, provider=provider, detail=detail, cells=cells, failures=failures,
                        suspension_failures=[fp for fp in failures if fp.cycle in behind],
                        ladder=[d for d in detail.decisions if d.action in LADDER_ACTIONS], commands=commands,
                        timeline=timeline, ignore_reasons=reasons)


# -- the look-back ----------------------------------------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$")
_UNITS = {None: 60.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def parse_window(text: str) -> float:
    """``45m``, ``90s``, ``1.5h``, ``2d`` or a bare number of minutes -> seconds.

    Raises:
        ValueError: not a duration, zero, or above :data:`LOOKBACK_MAX_WINDOW_S`.
    """
    m = _DURATION.match(text or "")
    if not m:
        raise ValueError(f"not a duration: {text!r} (write 45m, 90s, 1.5h or 2d)")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not 0 < seconds <= LOOKBACK_MAX_WINDOW_S:
        raise ValueError(f"a window of {text!r} is outside (0, {LOOKBACK_MAX_WINDOW_S / 86400:g} d]")
    return seconds


def window_text(window_s: float) -> str:
    """The shortest text :func:`parse_window` reads back as exactly ``window_s``: ``30s``, ``90s``, ``45m``, ``2h``.

    Whole days, hours or minutes take that unit; anything else is written in seconds
    (to the millisecond), so a printed command never rounds a 30 s window to ``0m``.
    """
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if window_s >= size and window_s % size == 0:
            return f"{window_s / size:g}{unit}"
    return f"{round(window_s, 3):g}s"


def incident_command(view: Lookback) -> str:
    """The ``canary incident`` command that answers the same look-back, as a shell runs it (arguments quoted)."""
    import shlex

    args = ["canary", "incident", "--model", view.model, "--at", utc_text(view.at), "--window",
            window_text(view.window_s)]
    if view.kind:
        args += ["--kind", view.kind]
    if view.language:
        args += ["--language", view.language]
    return shlex.join(args)


def parse_at(text: str, now: datetime) -> datetime:
    """The look-back's time: ISO 8601 (``2026-12-01T21:40:00Z``; no zone means UTC) or ``HH:MM`` (UTC: the
    latest such time not after ``now``).

    Raises:
        ValueError: not a time, or after ``now``.
    """
    from datetime import timezone

    raw = (text or "").strip()
    clock = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?Z?", raw)
    if clock:
        h, mi, sec = int(clock.group(1)), int(clock.group(2)), int(clock.group(3) or 0)
        if h > 23 or mi > 59 or sec > 59:
            raise ValueError(f"not a time of day: {text!r}")
        at = now.replace(hour=h, minute=mi, second=sec, microsecond=0)
        return at - timedelta(days=1) if at > now else at
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {text!r} (write 2026-12-01T21:40:00Z or 21:40, UTC)") from None
    at = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
    if at > now + timedelta(minutes=1):
        raise ValueError(f"{text!r} is in the future (now is {now:%Y-%m-%dT%H:%M:%SZ})")
    return at


def snapshot_at(snapshots: list[SnapshotMark], at: datetime) -> tuple[SnapshotMark | None, SnapshotMark | None]:
    """The snapshot in force at ``at`` (the highest version written at or before it) and the next one."""
    ordered = sorted(snapshots, key=lambda m: m.version)
    before = [m for m in ordered if m.at <= at]
    current = before[-1] if before else None
    later = [m for m in ordered if m.at > at and (current is None or m.version > current.version)]
    return current, (later[0] if later else None)


def served_in(window: ModelWindow | None, since: datetime, until: datetime) -> dict[str, int] | None:
    """The chat backends' request counts per provider whose period ends inside ``since`` .. ``until`` (UTC);
    ``None`` when no backend published any for the model (not zero: unknown)."""
    if window is None or not window.served:
        return None
    out: dict[str, int] = {}
    for counts in window.served:
        if since <= counts.at <= until or counts.since <= until <= counts.at:
            for provider, n in counts.counts.items():
                out[provider] = out.get(provider, 0) + n
    return dict(sorted(out.items()))


def _served_by_tag(served: dict[str, int], window: ModelWindow | None, tag: str) -> int:
    """What a tag served: counts under the tag itself, or under its provider name (the gateway names the
    provider, ``DeepInfra``, not the endpoint: every endpoint of that name gets the name's count)."""
    names = {e.provider_name for e in (window.listing if window is not None else []) if e.provider == tag
             and e.provider_name}
    return served.get(tag, 0) + sum(n for name, n in served.items() if name in names and name != tag)


def lookback(model: str, *, at: datetime, window_s: float, now: datetime, window: ModelWindow | None,
             control_tags: set[str] | None = None, kind: str | None = None, language: str | None = None,
             served: dict[str, int] | None = None, log_since: datetime | None = None) -> Lookback:
    """Which providers served ``model`` at ``at`` (UTC), what the canary saw of them around it, who failed since.

    Args:
        model: the model id.
        at: the time the user reported (UTC).
        window_s: the half-window (s): cycles that opened in ``at`` +- it.
        now: the time of the view (UTC); ``failed_since`` runs from ``at`` to it.
        window: the log's facts read for the look-back (cycles from before
            ``at - window_s`` up to now, the snapshots of the log and the bucket's history).
        control_tags: positive controls (never production hosts: left out).
        kind, language: narrow ``failed_since`` to failures of that probe kind / language.
        served: the chat backends' request counts per provider in the window (default: from the
            window's ServedCounts, :func:`served_in`; ``None`` there: none published).
        log_since: where the log read started (UTC), for the problems.

    Returns:
        :class:`Lookback`.
    """
    since, until = at - timedelta(seconds=window_s), at + timedelta(seconds=window_s)
    if served is None:
        served = served_in(window, since, until)
    problems: list[str] = []
    current, nxt = snapshot_at(window.snapshots if window is not None else [], at)
    if current is None:
        problems.append("no ignore-list snapshot at or before that time is known (the log read"
                        + (f" starts {log_since:%Y-%m-%dT%H:%M:%SZ}" if log_since else "")
                        + " and the KV bucket keeps only the last versions): the routing is unknown, "
                          "not 'nothing ignored'")
    entries = [e for e in (e.active_at(at) for e in (current.entries if current else [])) if e is not None]
    ignored = {e.provider: e for e in entries}
    cycles = _closed_cycles(window)
    around = [f for f in cycles if since <= f.opened_at <= until]
    before = [f for f in (window.cycles.values() if window is not None else []) if f.opened_at <= at]
    listing = max(before, key=lambda f: f.opened_at) if before else (around[0] if around else None)
    controls = set(control_tags or set()) | set(window.controls.values() if window is not None else [])
    listed = set(listing.prices) if listing is not None else set()
    listed |= {p for f in around for p in (v.provider for v in (f.verdict.verdicts if f.verdict else []))}
    if listing is None:
        problems.append("no cycle of the log read opened at or before that time: who was listed is unknown")
    names = sorted((listed | set(ignored)) - controls)
    blind = _blind_spans(window)
    live = live_totals(window, since, until)
    after = [f for f in cycles if (f.closed_at or f.opened_at) > at]
    providers = []
    for name in names:
        failed = []
        for f in after:
            c = cell(f, name, blind, kind=kind, language=language)
            if c.verdict == "failed" and (c.kinds or (kind is None and language is None)):
                failed.append(FailedSince(cycle=f.cycle, cycle_no=f.cycle_no, closed_at=c.closed_at, kinds=c.kinds,
                                          reasons=c.reasons))
        entry = ignored.get(name)
        q = listing.quantizations.get(name) if listing is not None else None
        known = listing is not None and name in listing.quantizations  # its quantization that time is known
        admitted = current is None or not known or quant.admits(current.quantizations, q)
        routing: Literal["eligible", "ignored", "left_out", "unknown"] = (
            "unknown" if current is None else "ignored" if entry is not None else "eligible" if admitted
            else "left_out")
        providers.append(LookbackProvider(
            provider=name, routing=routing,
            quantization=q,
            layers=sorted({r.layer for r in entry.reasons}) if entry is not None else [],
            reasons=list(entry.reasons) if entry is not None else [],
            cells=[cell(f, name, blind) for f in around], failed_since=failed[:FAILED_SINCE_SHOWN],
            failed_since_count=len(failed),
            failed_since_last=failed[-1] if len(failed) > FAILED_SINCE_SHOWN else None,
            served=_served_by_tag(served, window, name) if served is not None else None,
            live=live_view(live, window, name),
            confirmation=window.confirmations.get(name) if window is not None else None))
    if not around:
        problems.append("no closed cycle of the log read opened inside the window")
    return Lookback(model=model, at=at, window_s=window_s, since=since, until=until, now=now,
                    snapshot_version=current.version if current else 0, snapshot_at=current.at if current else None,
                    next_version=nxt.version if nxt and nxt.at <= until else None,
                    next_at=nxt.at if nxt and nxt.at <= until else None,
                    eligible=[p.provider for p in providers if p.routing == "eligible"],
                    ignored=[p.provider for p in providers if p.routing == "ignored"],
                    quantizations=list(current.quantizations) if current else [],
                    left_out=[p.provider for p in providers if p.routing == "left_out"],
                    columns=[_column(f) for f in around], providers=providers, kind=kind, language=language,
                    served=served, problems=problems)
