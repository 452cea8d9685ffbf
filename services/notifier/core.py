"""The notifier's core: what operators are told, how urgently, how often, and when to try again.

Every rule that decides a notice lives here, in the order they apply:

1. **Severity.** Every judge decision action, router fact and operator-command
   notice has one severity in :data:`SEVERITY` (``info`` < ``warning`` <
   ``critical``).  A channel gets the notices at or above its minimum
   (:func:`wants`).  Reminders and ends carry the severity of the state they
   belong to, so a channel that heard a start also hears its end.
2. **Identity.** One notice per change: a ``mode_changed`` decision is told by
   its command's answer (:data:`TOLD_BY_ANSWER`), and an answer that changed
   nothing (``changed`` false) is told to nobody.
   A notice is keyed by the fact behind it: the decision id, the
   command id (``cmd|<id>``), the ignore-list version with its time
   (``snap|<model>|<v>|<at>``: a redeploy whose versions start at 1 again makes
   new ids); never by the schema version or the stream position.  A decision
   redelivered or re-published with another schema version is the same notice,
   and the delivery book sends each notice to each channel once.  The
   ``webhook-id`` a receiver dedupes on is the notice id *within the
   deployment's namespace* (:func:`webhook_id`): prod and staging never share one.
3. **Folding.** A state that persists (:data:`PERSISTING`: floor held, pin
   violated, unjudgeable, positive control passed, common mode, canary blind,
   a suspension held while blind)
   gives one ``start`` notice, a ``reminder`` each time another
   ``remind_every_s`` has passed since the start (with the count of cycles it
   has lasted), and one ``end`` notice.  Each state's row says which cycle
   verdicts keep it alive, which end it, and which decisions end it.  A state
   is renewed at most once per cycle.  One state is discovery's, not the
   judge's: a cycle whose sizing (``CycleSized``) says it cannot fit its window
   starts ``cycle_does_not_fit`` (fleet-wide, before that cycle's probes run),
   each further such cycle renews it, and the first cycle that fits ends it.  Time comes only from the ``at`` of the
   decisions and verdicts: folding the same log gives the same notices.
4. **Schedule.** One notice on one channel is tried again after each failure
   at :func:`next_attempt`: exponential backoff with full jitter (the jitter
   drawn by the caller), up to a maximum delay, and dead-lettered once its
   first attempt is ``give_up_s`` old.

This module knows nothing of NATS, Redis, HTTP, apprise or the wall clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

import msgspec
from msgspec import Struct

from reverie_canary.shared.contract.commands import (
    VERBS,
    AddOverride,
    LiftSuspension,
    ReloadExclusions,
    RemoveOverride,
    SetMode,
    SetQuantizationFloor,
)
from reverie_canary.shared.contract.events import (
    CanaryBlind,
    CommandApplied,
    CommandRefused,
    CycleSized,
    CycleVerdict,
    Decision,
    DecisionAction,
    LiveConfirmation,
    Notice,
    ProviderVerdict,
    Severity,
    Suspended,
    TimedDecision,
    WouldSuspend,
)
from reverie_canary.shared.contract.snapshots import IgnoreSnapshot
from reverie_canary.shared.contract.timefmt import utc_text

#: Severities in rising order of urgency.
SEVERITIES: tuple[str, ...] = get_args(Severity)
RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}

#: The one table of severities: every decision action (shared/contract/events.py, DecisionAction),
#: every router fact and every operator-command notice.  Why each is what it is:
SEVERITY: dict[str, Severity] = {
    # judge decisions
    "suspend": "critical",          # a provider leaves live traffic
    "floor_held": "critical",       # a proven-bad provider stays in live traffic (capacity floor)
    "canary_blind": "critical",     # the canary cannot see: nothing is being judged
    "canary_sees": "critical",      # ends canary_blind on every channel that heard it
    "suspension_held": "warning",   # a suspension came due while blind: kept until judged again
    "end": "info",                  # a suspension ended (recovered, expired, lifted)
    "would_suspend": "info",        # observe mode: routing untouched
    "would_end": "info",
    "common_mode": "warning",       # a probe kind frozen for everyone: probably not the providers
    "control_passed": "warning",    # the positive control passed: that kind proves nothing
    "pin_violated": "warning",      # the gateway served a pinned probe elsewhere
    "unjudgeable": "warning",       # frozen for too many cycles: no verdict possible
    "mode_changed": "warning",      # observe/enforce switched (told by the command's answer, `mode_set`)
    # router facts
    "ignore_list_changed": "info",
    # operator commands, told by the owning service's answer (CommandApplied / CommandRefused)
    "override_added": "warning",    # a provider leaves live traffic by hand
    "override_removed": "warning",  # ... and comes back
    "exclusions_reloaded": "warning",
    "suspension_lifted": "info",    # the judge's `end` decision (lifted, by whom) is told too
    "mode_set": "warning",          # one notice per mode change: the answer (its decisions are not told apart)
    "quant_floor_set": "warning",   # live traffic avoids (or comes back to) some quantizations of a model
    "command_refused": "warning",   # a typo or a guard rail: nothing changed
    "floor_broken_by_operator": "critical",  # an operator forced fewer than min_hosts usable hosts
    # discovery facts
    "cycle_does_not_fit": "warning",
    # confirmation probes of live failures (the judge's LiveConfirmation): a fact, never a suspension
    "live_confirmed": "warning",      # a pinned probe reproduced the live failures: the next cycles will judge it
    "live_not_reproduced": "info",    # the pinned probe passed: the failures may be the backend's or the prompt's
    "live_inconclusive": "info",      # the pinned probe proved nothing (transport error, blind ...)  # the plan cannot end in its window: results will be missing, cycles frozen
}
#: The notice action of each applied command, by its verb (``shared/contract/commands.py``, VERBS).
APPLIED_ACTIONS: dict[str, str] = {
    VERBS[AddOverride]: "override_added",
    VERBS[RemoveOverride]: "override_removed",
    VERBS[ReloadExclusions]: "exclusions_reloaded",
    VERBS[LiftSuspension]: "suspension_lifted",
    VERBS[SetMode]: "mode_set",
    VERBS[SetQuantizationFloor]: "quant_floor_set",
}
#: Decisions only an operator command makes, whose answer is their notice: one notice per mode
#: change (the answer names every model it changed, read back from the judge's state), not one
#: per model plus the answer.
TOLD_BY_ANSWER: frozenset[str] = frozenset({"mode_changed"})
#: Every decision action the judge can publish (derived from the wire type, not repeated).
DECISION_ACTIONS: tuple[str, ...] = get_args(DecisionAction)

Scope = Literal["provider", "kind"]
#: What a cycle verdict says about a held state: it goes on (``renew``), it ended
#: (``end`` with why), or the verdict says nothing about it (``none``).
Verdict = tuple[Literal["renew", "end", "none"], str]


@dataclass(frozen=True)
class Persisting:
    """How one persisting state is folded.

    Attributes:
        scope: ``provider`` (one per model and provider) or ``kind`` (one per
            model and probe kind, model-wide decisions).
        on_verdict: what a cycle verdict of the state's model says about it.
        ended_by: decision actions (same model and scope) that end it; with
            ``own_end`` that decision's own notice is the end notice
            (``canary_sees`` ends ``canary_blind``), else a separate end notice
            follows it (a ``suspend`` ends a ``floor_held``).
        noun: how the state reads in a sentence.
    """

    scope: Scope
    on_verdict: Callable[[Held, CycleVerdict], Verdict]
    ended_by: frozenset[str] = frozenset()
    own_end: bool = False
    noun: str = ""


def _provider_verdict(held: Held, verdict: CycleVerdict) -> ProviderVerdict | None:
    return next((pv for pv in verdict.verdicts if pv.provider == held.provider), None)


def _blind_cycle(verdict: CycleVerdict) -> bool:
    """A cycle the canary could not see at all (every verdict blind, as an unplanned cycle's): it says nothing."""
    return all(pv.verdict == "blind" for pv in verdict.verdicts)


def _floor_held(held: Held, verdict: CycleVerdict) -> Verdict:
    pv = _provider_verdict(held, verdict)
    if pv is None:
        return "end", "no longer probed (not listed this cycle)"
    if pv.verdict == "blind":
        return "none", ""  # the canary could not see it: the streak is kept, nothing to count
    if pv.verdict == "passed":
        return "end", "passed a cycle: no longer to be suspended"
    return "renew", ""  # failed again, or frozen (the streak is kept)


def _pin_violated(held: Held, verdict: CycleVerdict) -> Verdict:
    pv = _provider_verdict(held, verdict)
    if pv is None:
        return "end", "no longer probed (not listed this cycle)"
    if pv.verdict == "blind":
        return "none", ""
    if any(r.reason == "pin_violated" for r in pv.results):
        return "renew", ""
    if pv.results:
        return "end", "every probe this cycle was served by the pinned provider"
    return "none", ""


def _unjudgeable(held: Held, verdict: CycleVerdict) -> Verdict:
    pv = _provider_verdict(held, verdict)
    if pv is None:
        return "end", "no longer probed (not listed this cycle)"
    if pv.verdict == "frozen":
        return "renew", ""
    if pv.verdict == "blind":
        return "none", ""  # the canary could not see: says nothing about the provider
    return "end", f"judged again: {pv.verdict}"


def _control_passed(held: Held, verdict: CycleVerdict) -> Verdict:
    if _blind_cycle(verdict):
        return "none", ""
    if held.kind in verdict.unproven:
        return "renew", ""
    return "end", f"the positive control no longer passes: {held.kind} results count again"


def _common_mode(held: Held, verdict: CycleVerdict) -> Verdict:
    if _blind_cycle(verdict):
        return "none", ""
    if held.kind in verdict.common_mode:
        return "renew", ""
    return "end", f"{held.kind} is no longer failing for most providers"


def _blind(held: Held, verdict: CycleVerdict) -> Verdict:
    return "renew", ""  # a cycle closed while blind: still blind until canary_sees


def _suspension_held(held: Held, verdict: CycleVerdict) -> Verdict:
    pv = _provider_verdict(held, verdict)
    if pv is not None and pv.verdict == "blind":
        return "renew", ""  # still held; the judge's end decision ends it
    return "none", ""


#: The persisting states, by the decision action that starts them.
PERSISTING: dict[str, Persisting] = {
    "floor_held": Persisting("provider", _floor_held, frozenset({"suspend", "would_suspend"}),
                             noun="capacity floor holding back a suspension"),
    "pin_violated": Persisting("provider", _pin_violated, noun="pinned probes served by another provider"),
    "unjudgeable": Persisting("provider", _unjudgeable, noun="no verdict possible (frozen cycles)"),
    "control_passed": Persisting("kind", _control_passed, noun="positive control passing"),
    "common_mode": Persisting("kind", _common_mode, noun="common-mode failure"),
    "canary_blind": Persisting("provider", _blind, frozenset({"canary_sees"}), own_end=True,
                               noun="the canary blind"),
    # renewed every blind cycle by the judge (its until moves on): told once, ended by the suspension's end
    "suspension_held": Persisting("provider", _suspension_held, frozenset({"end", "would_end"}), own_end=True,
                                  noun="a suspension held while the canary is blind"),
    # started, renewed and ended by discovery's CycleSized (fleet-wide: model "*"), never by a verdict
    "cycle_does_not_fit": Persisting("kind", lambda held, verdict: ("none", ""),
                                     noun="cycles planned past what the probers can run in the window"),
}
#: The model of fleet-wide states (every model's cycle is sized together).
FLEET = "*"


# -- state -------------------------------------------------------------------------------------


class Held(Struct, kw_only=True):
    """One persisting state being folded: since when, how often seen, when last told."""

    key: str
    action: str
    model: str
    provider: str = ""
    kind: str | None = None
    severity: str
    start_id: str
    since: datetime
    last_at: datetime
    last_cycle: str = ""
    count: int = 1
    reminders: int = 0
    title: str = ""
    detail: str = ""
    mode: str = ""


class FoldState(Struct, kw_only=True):
    """The notifier's folded state: held states, each model's latest closed cycle (UTC), and each model's
    ignored providers as last told (:func:`ignored_layers`)."""

    held: dict[str, Held] = {}
    closed_at: dict[str, datetime] = {}
    ignored: dict[str, list[str]] = {}
    #: ``model|provider|live reason`` -> the confirmation outcome last told and when (:func:`_confirmation`).
    confirmations: dict[str, ConfirmationTold] = {}


class ConfirmationTold(Struct, kw_only=True):
    """The last confirmation answer told for one provider's live failures of one reason."""

    outcome: str
    at: datetime


#: The most confirmation answers remembered (the oldest go first); each is about 100 bytes.
MAX_CONFIRMATIONS_TOLD = 4096


@dataclass(frozen=True)
class FoldPolicy:
    """The folding thresholds (from settings)."""

    remind_every_s: float = 6 * 3600.0


# -- notices -----------------------------------------------------------------------------------


def webhook_id(namespace: str, notice_id: str) -> str:
    """The ``webhook-id`` of a notice: ``msg_`` + 32 hex digits of the SHA-256 of ``[namespace, notice_id]``.

    Unique over deployments (the namespace: ``CANARY_NAMESPACE``, which also
    keys the deployment's streams' subjects and Redis keys) and over time within
    one (notice ids are decision ids anchored on time-numbered cycles, command
    uuids, and ignore-list versions with their time).  Stable across retries,
    resends, redeliveries and restarts of the same deployment (the receiver's
    idempotency key); no ``.`` in it, as the Standard Webhooks signature scheme
    requires.

    Args:
        namespace: the deployment's namespace (``Settings.namespace``).
        notice_id: the notice's id (:class:`Notice` ``notice_id``).
    """
    return "msg_" + hashlib.sha256(msgspec.json.encode([namespace, notice_id])).hexdigest()[:32]


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _decision_title(d: Decision) -> str:
    who = d.provider or "(all providers)"
    head = f"[{d.model}] {who}: {d.action}"
    if d.kind:
        head += f" ({d.kind})"
    match d:
        case Suspended() | WouldSuspend():
            head += f" until {utc_text(d.until, missing='-')} (ladder step {d.ladder_level})"
    return head


def _decision_text(d: Decision) -> str:
    text = _decision_title(d)
    if d.reason:
        text += f" - {d.reason}"
    if d.detail:
        text += f": {d.detail}"
    if d.actor:
        text += f" (by {d.actor})"
    held = d.held if isinstance(d, CanaryBlind) else []  # the suspensions blindness holds
    if held:
        text += "; suspensions held until judged again: " + ", ".join(
            f"{h.provider} (due {utc_text(h.until, missing='-')})" for h in held[:20])
    return text


def decision_notice(d: Decision, *, phase: str = "notice", notice_id: str | None = None, severity: str | None = None,
                    count: int = 1, since: datetime | None = None) -> Notice:
    """The notice of one decision (its own id unless ``notice_id`` is given)."""
    return Notice(
        notice_id=notice_id or d.decision_id,
        source_id=d.decision_id,
        at=d.at,
        severity=severity or SEVERITY[d.action],  # type: ignore[arg-type]
        action=d.action,
        phase=phase,  # type: ignore[arg-type]
        model=d.model,
        provider=d.provider,
        kind=d.kind,
        title=_decision_title(d)[:400],
        text=_decision_text(d)[:4000],
        reason=d.reason,
        detail=d.detail,
        until=d.until if isinstance(d, TimedDecision) else None,
        mode=d.mode,
        actor=d.actor or "",
        count=count,
        since=since,
        cycle=(d.cycles[-1] if d.cycles else "")[:300],
        evidence=[f"{r.kind}:{r.outcome}:{r.reason}"[:200] for r in d.evidence][:16],
    )


def snapshot_notice_id(s: IgnoreSnapshot) -> str:
    """``snap|<model>|<version>|<at, UTC to the microsecond>``: one ignore-list version of one deployment.

    The version alone repeats when a redeploy's router starts again at 1; the
    router's ``at`` of that version does not (the KV bucket holds one value per
    version and a re-announce after a crash publishes that same value), so the id
    is stable across redeliveries and new across redeploys.
    """
    return f"snap|{s.model}|{s.version}|{utc_text(s.at, precision='us')}"


def snapshot_notice(s: IgnoreSnapshot) -> Notice:
    """The notice of a new ignore-list version."""
    ignore = s.ignore_at(s.at)
    layers = "; ".join(f"{e.provider} ({', '.join(f'{r.layer}: {r.reason}' for r in e.reasons)})" for e in s.entries)
    title = f"[{s.model}] ignore list v{s.version}: {', '.join(ignore) if ignore else '(empty)'}"
    if s.quantizations:
        title += f"; quantizations {', '.join(s.quantizations)}"
    nid = snapshot_notice_id(s)
    return Notice(notice_id=nid, source_id=nid, at=s.at,
                  severity=SEVERITY["ignore_list_changed"], action="ignore_list_changed", model=s.model,
                  title=title[:400], text=(title + (f" - {layers}" if layers else ""))[:4000])


def answer_notice(a: CommandApplied | CommandRefused) -> Notice:
    """The notice of an operator command, from the owning service's answer (keyed ``cmd|<command id>``).

    An applied command that left a model below the capacity floor (``--force``)
    is ``floor_broken_by_operator``, critical, naming the hosts still usable.
    """
    scope = " ".join(x for x in (a.provider, f"on {a.model}" if a.model else "") if x)
    if isinstance(a, CommandRefused):
        action = "command_refused"
        what = f"{a.command} {scope} refused by the {a.service} ({a.code}): {a.reason}"
        if a.force_applies:
            what += " (--force would apply it)"
        reason = a.code
    else:
        action = "floor_broken_by_operator" if a.floor_broken else APPLIED_ACTIONS.get(a.command, "command_applied")
        what = f"{a.command} {scope} applied by the {a.service}" + (f": {a.detail}" if a.detail else "")
        for snap in a.snapshots:
            what += f"; {snap.model} ignore list v{snap.version}: {', '.join(snap.ignore) or '(empty)'}"
            if snap.quantizations:
                what += f", quantizations {', '.join(snap.quantizations)}"
        for breach in a.floor_broken:
            what += (f"; CAPACITY FLOOR BROKEN by an operator on {breach.model}: {len(breach.usable)} usable host(s) "
                     f"({', '.join(breach.usable) or 'none'}), floor {breach.min_hosts}")
        if a.warnings:
            what += ("; forced past: " if a.forced else "; warnings: ") + "; ".join(a.warnings)
        reason = "forced" if a.forced else "applied"
    text = f"{a.actor}: {what}"
    return Notice(notice_id=f"cmd|{a.command_id}", source_id=a.command_id, at=a.at,
                  severity=SEVERITY.get(action, "warning"), action=action, model=a.model,
                  provider=a.provider, title=text[:400], text=text[:4000], reason=reason[:64], actor=a.actor)


#: The notice action of each confirmation outcome (:class:`LiveConfirmation`).
CONFIRMATION_ACTIONS: dict[str, str] = {"confirmed": "live_confirmed", "not_reproduced": "live_not_reproduced",
                                        "inconclusive": "live_inconclusive"}


def confirmation_notice(c: LiveConfirmation) -> Notice:
    """The one notice of a confirmation probe's answer to live failures, keyed ``confirmation|<task id>``.

    "live failures on P confirmed by a pinned probe", "... not reproduced by a pinned probe",
    or "... inconclusive": with the live share against its peers' and what the probe said.
    It is a fact: suspension still takes two failed cycles of the canary's own probes.
    """
    live = c.live
    said = {"confirmed": "confirmed by a pinned probe", "not_reproduced": "not reproduced by a pinned probe",
            "inconclusive": "a pinned probe was inconclusive"}[c.outcome]
    kind = f"{c.kind}/{c.variant}" if c.variant else c.kind
    title = f"[{c.model}] live failures on {c.provider} ({live.reason}) {said}"
    text = (f"{title}: {live.count} of {live.served} live replies ({live.share:.1%}) against a median of "
            f"{live.median:.1%} over {live.peers} providers (threshold {live.threshold:.1%}, last "
            f"{live.window_s / 60:g} min); the {kind} probe: {c.probe_outcome}"
            + (f" ({c.probe_reason})" if c.probe_reason else "")
            + ". Live counts never suspend: the next cycles judge the provider.")
    action = CONFIRMATION_ACTIONS[c.outcome]
    nid = f"confirmation|{c.task_id}"
    return Notice(notice_id=nid[:600], source_id=c.task_id[:512], at=c.at, severity=SEVERITY[action],
                  action=action, model=c.model, provider=c.provider, kind=c.kind, title=title[:400],
                  text=text[:4000], reason=live.reason, detail=f"probe {c.probe_outcome} {c.probe_reason}".strip(),
                  cycle=c.cycle[:300], evidence=[f"{c.kind}:{c.probe_outcome}:{c.probe_reason}"[:200]])


def _held_notice(held: Held, *, phase: str, notice_id: str, at: datetime, why: str = "") -> Notice:
    spec = PERSISTING[held.action]
    who = held.provider or "(all providers)"
    kind = f" ({held.kind})" if held.kind else ""
    lasted = _duration((at - held.since).total_seconds())
    if phase == "reminder":
        title = f"[{held.model}] {who}: still {held.action}{kind}: {held.count} cycles since {utc_text(held.since, missing='-')}"
        text = f"{title} ({lasted}); reminder {held.reminders}. {spec.noun}: {held.detail}"
    else:
        title = f"[{held.model}] {who}: {held.action}{kind} ended after {held.count} cycles ({lasted})"
        text = f"{title}: {why}" if why else title
    return Notice(notice_id=notice_id, source_id=held.start_id, at=at, severity=held.severity,  # type: ignore[arg-type]
                  action=held.action, phase=phase, model=held.model, provider=held.provider,  # type: ignore[arg-type]
                  kind=held.kind, title=title[:400], text=text[:4000], reason=why[:64], detail=held.detail[:4000],
                  mode=held.mode, count=held.count, since=held.since, cycle=held.last_cycle[:300])


# -- the fold --------------------------------------------------------------------------------


def held_key(action: str, model: str, provider: str, kind: str | None) -> str:
    """The key of one persisting state (its row's scope decides what counts)."""
    if PERSISTING[action].scope == "kind":
        return f"{action}|{model}|*|{kind or ''}"
    return f"{action}|{model}|{provider}|"


def fold(state: FoldState, event: Any, policy: FoldPolicy) -> tuple[FoldState, list[Notice]]:
    """Apply one event: the new state and the notices it gives.

    Args:
        state: the folded state (not modified).
        event: a ``Decision``, ``CycleVerdict``, ``IgnoreSnapshot`` (told only when
            the ignored providers or their layers changed),
            ``CommandApplied`` or ``CommandRefused``; anything else changes nothing.
        policy: the reminder interval.

    Returns:
        ``(state, notices)``; the same state object and no notices when the
        event changes nothing (a redelivery, a late decision of a state that
        already ended, a verdict of a model with nothing held).
    """
    match event:
        case Decision() if event.action in TOLD_BY_ANSWER:
            return state, []  # the command's answer tells it, once for every model (rule 2)
        case Decision():
            return _decision(state, event, policy)
        case CycleVerdict():
            return _verdict(state, event, policy)
        case IgnoreSnapshot():
            return _snapshot(state, event)
        case CommandApplied() if not event.changed:
            return state, []  # a no-op: it changed nothing, and nobody is told
        case CommandApplied() | CommandRefused():
            return state, [answer_notice(event)]
        case CycleSized():
            return _sized(state, event, policy)
        case LiveConfirmation():
            return _confirmation(state, event, policy)
    return state, []


def _confirmation(state: FoldState, c: LiveConfirmation, policy: FoldPolicy) -> tuple[FoldState, list[Notice]]:
    """One notice per answer that changed: the same outcome for the same provider and live reason is
    told again only after the reminder interval.

    Discovery asks again while the live counts still point at a provider (every cycle of a
    lasting defect); an operator needs the answer once, and again only when it changes
    (``confirmed`` -> ``not_reproduced``) or as a reminder.
    """
    key = f"{c.model}|{c.provider}|{c.live.reason}"
    told = state.confirmations.get(key)
    if told is not None and told.outcome == c.outcome and \
            (c.at - told.at).total_seconds() < policy.remind_every_s:
        return state, []
    new = _copy(state)
    new.confirmations[key] = ConfirmationTold(outcome=c.outcome, at=c.at)
    if len(new.confirmations) > MAX_CONFIRMATIONS_TOLD:
        oldest = sorted(new.confirmations, key=lambda k: new.confirmations[k].at)
        for k in oldest[:len(new.confirmations) - MAX_CONFIRMATIONS_TOLD]:
            del new.confirmations[k]
    return new, [confirmation_notice(c)]


def _copy(state: FoldState) -> FoldState:
    return msgspec.json.decode(msgspec.json.encode(state), type=FoldState)


def _cycle_of(d: Decision) -> str:
    return d.cycles[-1] if d.cycles else d.decision_id


def _renew(held: Held, at: datetime, cycle: str, policy: FoldPolicy) -> list[Notice]:
    """Count a new cycle of a held state; a reminder once another interval has passed since the start."""
    if cycle == held.last_cycle or at < held.last_at:
        return []
    held.count += 1
    held.last_cycle = cycle
    held.last_at = at
    due = int((at - held.since).total_seconds() // policy.remind_every_s)
    if due <= held.reminders:
        return []
    held.reminders = due  # a long pause gives one reminder, not a burst
    return [_held_notice(held, phase="reminder", notice_id=f"remind|{held.start_id}|{due}", at=at)]


def _decision(state: FoldState, d: Decision, policy: FoldPolicy) -> tuple[FoldState, list[Notice]]:
    new = _copy(state)
    notices: list[Notice] = []
    own: Notice | None = None
    for action, spec in PERSISTING.items():  # does this decision end a held state?
        if d.action not in spec.ended_by:
            continue
        key = held_key(action, d.model, d.provider, d.kind)
        held = new.held.pop(key, None)
        if held is None:
            continue
        if spec.own_end:
            own = decision_notice(d, phase="end", severity=held.severity, count=held.count, since=held.since)
        else:
            notices.append(_held_notice(held, phase="end", notice_id=f"end|{held.start_id}", at=d.at,
                                        why=f"{d.action}: {d.reason}" if d.reason else d.action))
    if d.action in PERSISTING:
        key = held_key(d.action, d.model, d.provider, d.kind)
        held = new.held.get(key)
        if held is not None:
            notices += _renew(held, d.at, _cycle_of(d), policy)
        elif d.model in new.closed_at and d.at < new.closed_at[d.model]:
            return state, []  # a late copy of a state that has ended since: nothing new
        else:
            new.held[key] = Held(key=key, action=d.action, model=d.model, provider=d.provider, kind=d.kind,
                                 severity=SEVERITY[d.action], start_id=d.decision_id, since=d.at, last_at=d.at,
                                 last_cycle=_cycle_of(d), title=_decision_title(d)[:400], detail=d.detail[:1000],
                                 mode=d.mode)
            notices.append(decision_notice(d, phase="start"))
    else:
        notices.insert(0, own or decision_notice(d))
    if new == state and not notices:
        return state, []
    return new, notices


def ignored_layers(s: IgnoreSnapshot) -> list[str]:
    """What an ignore-list notice is about: ``<provider> <layer>,<layer>`` per ignored provider, sorted.

    Expiries, reasons and actors are left out: a blind cycle moves a held
    suspension's end in every snapshot, and that alone is no news.  A
    quantization floor's allow-list is news (``quantizations fp8,bf16``): the
    hosts live traffic reaches change with it.
    """
    out = [f"{e.provider} {','.join(sorted({r.layer for r in e.reasons}))}" for e in s.entries]
    if s.quantizations:
        out.append(f"quantizations {','.join(s.quantizations)}")
    return sorted(out)


def _snapshot(state: FoldState, s: IgnoreSnapshot) -> tuple[FoldState, list[Notice]]:
    """An ignore-list version: ``ignore_list_changed`` when the ignored providers or their layers changed.

    A version that only moved an expiry (or a reason's text) changes nothing and
    gives no notice; the first version the notifier sees of a model is told.
    """
    now = ignored_layers(s)
    if state.ignored.get(s.model) == now:
        return state, []
    new = _copy(state)
    new.ignored[s.model] = now
    return new, [snapshot_notice(s)]


def _sized_text(e: CycleSized) -> str:
    return (f"cycle {e.cycle_no}: {e.probes} probes of {e.models} model(s) need {e.needed} in flight to end within "
            f"{e.target_s:g} s; {e.probers} prober(s) at most {e.ceiling} each end them in about "
            f"{e.expected_wall_s:g} s, past the {e.window_s:g} s window (probe times {e.basis}: "
            + ", ".join(f"{k} {v:g} s" for k, v in e.probe_s.items())
            + "). Results will be missing and those providers' cycles frozen: start more probers or raise "
              "CANARY_PROBER_CONCURRENCY")


def _sized(state: FoldState, e: CycleSized, policy: FoldPolicy) -> tuple[FoldState, list[Notice]]:
    """A cycle's sizing: one that cannot fit starts (or renews) ``cycle_does_not_fit``; one that fits ends it."""
    key = held_key("cycle_does_not_fit", FLEET, "", None)
    held = state.held.get(key)
    cycle = f"sized|{e.cycle_no}"
    if e.fits:
        if held is None or e.at < held.last_at:
            return state, []
        new = _copy(state)
        del new.held[key]
        return new, [_held_notice(held, phase="end", notice_id=f"end|{held.start_id}", at=e.at,
                                  why=f"cycle {e.cycle_no} fits: about {e.expected_wall_s:g} s of {e.window_s:g} s "
                                      f"with {e.in_flight} probes in flight")]
    new = _copy(state)
    if held is not None:
        notices = _renew(new.held[key], e.at, cycle, policy)
        return (new, notices) if new != state else (state, [])
    title = (f"[{FLEET}] cycle {e.cycle_no} does not fit: about {e.expected_wall_s:g} s of probes "
             f"for a {e.window_s:g} s window")
    text = _sized_text(e)
    new.held[key] = Held(key=key, action="cycle_does_not_fit", model=FLEET, severity=SEVERITY["cycle_does_not_fit"],
                         start_id=cycle, since=e.at, last_at=e.at, last_cycle=cycle, title=title[:400],
                         detail=text[:1000])
    return new, [Notice(notice_id=cycle, source_id=cycle, at=e.at, severity=SEVERITY["cycle_does_not_fit"],
                        action="cycle_does_not_fit", phase="start", model=FLEET, title=title[:400], text=text[:4000],
                        reason="cycle_does_not_fit", detail=text[:4000], cycle=cycle)]


def _verdict(state: FoldState, v: CycleVerdict, policy: FoldPolicy) -> tuple[FoldState, list[Notice]]:
    last = state.closed_at.get(v.model)
    if last is not None and v.at < last:
        return state, []  # an older cycle, redelivered late
    new = _copy(state)
    new.closed_at[v.model] = v.at
    notices: list[Notice] = []
    for key in sorted(new.held):
        held = new.held[key]
        if held.model != v.model or v.at < held.since:
            continue
        outcome, why = PERSISTING[held.action].on_verdict(held, v)
        if outcome == "renew":
            notices += _renew(held, v.at, v.cycle, policy)
        elif outcome == "end":
            del new.held[key]
            notices.append(_held_notice(held, phase="end", notice_id=f"end|{held.start_id}", at=v.at, why=why))
    if new == state:
        return state, []
    return new, notices


# -- channels and the delivery schedule ----------------------------------------------------------


def wants(min_severity: str, severity: str) -> bool:
    """Whether a channel whose minimum is ``min_severity`` gets a notice of ``severity``."""
    return RANK[severity] >= RANK[min_severity]


@dataclass(frozen=True)
class Schedule:
    """The delivery schedule of one notice on one channel (seconds).

    Attributes:
        base_s: the ceiling of the first retry delay.
        max_delay_s: the largest ceiling (the backoff stops doubling there).
        give_up_s: dead-letter once the first attempt is this old.
    """

    base_s: float = 5.0
    max_delay_s: float = 600.0
    give_up_s: float = 86400.0


def next_attempt(schedule: Schedule, failures: int, first_at_s: float, now_s: float, jitter: float) -> float | None:
    """When to try a notice again after its ``failures``-th failed attempt, or ``None``: dead-letter it.

    Exponential backoff with full jitter: the delay is ``jitter`` (uniform in
    [0, 1), drawn by the caller) times ``min(max_delay_s, base_s * 2**(failures-1))``
    (M. Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog, 2015).
    The last attempt is made at ``first_at_s + give_up_s``, not after it.

    Args:
        failures: failed attempts so far (>= 1).
        first_at_s, now_s: epoch seconds of the first attempt and of now.
        jitter: a number in [0, 1).

    Returns:
        Epoch seconds of the next attempt, or ``None`` once ``give_up_s`` has passed.
    """
    horizon = first_at_s + schedule.give_up_s
    if now_s >= horizon:
        return None
    ceiling = min(schedule.max_delay_s, schedule.base_s * 2.0 ** min(max(failures, 1) - 1, 60))
    return min(now_s + max(0.0, min(jitter, 1.0)) * ceiling, horizon)


def payload(notice: Notice, namespace: str) -> dict[str, Any]:
    """The JSON body of the signed webhook (Standard Webhooks' ``type`` / ``timestamp`` / ``data`` shape).

    ``data.namespace`` names the deployment; ``data.webhook_id`` is the header's id.
    ``type`` is ``canary.notice`` for a one-off notice and ``canary.notice.<phase>``
    (``start``, ``reminder``, ``end``) for a persisting state's; ``data.phase`` says the
    phase in both (a one-off notice's is ``notice``: its type was ``canary.notice.notice``
    before, which read as a stutter; a receiver that matched it should match the prefix).
    """
    data = msgspec.to_builtins(notice)
    data["id"] = data.pop("notice_id")
    data["namespace"] = namespace
    data["webhook_id"] = webhook_id(namespace, notice.notice_id)
    kind = "canary.notice" if notice.phase == "notice" else f"canary.notice.{notice.phase}"
    return {"type": kind, "timestamp": utc_text(notice.at, missing='-'), "data": data}


def label(notice: Notice) -> str:
    """The action as one word, phase included: ``floor_held``, ``floor_held_reminder``, ``floor_held_ended``.

    An end that is a decision of its own keeps that decision's action (``canary_sees``).
    """
    if notice.phase == "reminder":
        return f"{notice.action}_reminder"
    if notice.phase == "end" and notice.action in PERSISTING:
        return f"{notice.action}_ended"
    return notice.action
