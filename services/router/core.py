"""The router's core: the three layers, their merge into ``provider.ignore``, and the fold that keeps them.

What lives here (docs/concepts/routing.md):
every rule that changes what the router ignores or answers.  :func:`decide`
is ``decide(state, input, now, policy) -> (state, effects)`` in the judge's
style: total and deterministic; time comes only from its ``now`` argument
(the shell's clock when it applies the input, or an event's own ``at`` when
the log is folded again), never from the wall clock.  This module knows nothing
of NATS, Redis, files or the clock; the shell (``service.py``) reads the
exclusions file, loads and saves the state with the stream position, and
carries out the effects.

Layers, in the order an entry lists them:

1. ``exclusion``: reviewed exclusions in the repository (TOML), for measured
   defects and policy mismatches; may carry an ``expires`` date.
2. ``override``: runtime incident overrides from operators (reason, actor,
   an expiry: the one given, else the longest an override lasts, 365 days from the
   command, MAX_OVERRIDE_S), effective in the next snapshot.
3. ``suspension``: the judge's time-limited canary suspensions.

Layers combine by union: a provider is ignored while any layer ignores it, and
each entry names every layer that does.  An entry past its expiry never appears.

The rules, in the order :func:`decide` applies them:

1. A command already answered (its id is remembered) changes nothing and is not
   answered again: its first answer is on the log.
2. Overrides past their ``until`` leave the state, whatever the input (nothing
   expired is kept, not even by a rebuild from the log).  A suspension past its
   ``until`` leaves every merge at once, but the state keeps it, lapsed, for
   :data:`LAPSED_SUSPENSION_S` more: the judge's decisions about a suspension (a
   hold while the canary is blind, an end) are decided at their own time, and
   reach the router seconds or an outage later; what they do must not depend on
   when they arrive, so that a replay of the log, which applies each decision at
   its own time, gives the state the live router has.
3. The input:

   - a decision of a close that more routing decisions of the same close follow
     (``routing_follows`` > 0) changes the state but makes no version yet: the
     last one of the close makes one version of them all (a lost last one is
     published by the next input of the model, or the timer's :class:`Tick`);
   - a ``suspend`` decision adds a suspension (it must have an ``until``; one
     that lapsed before it arrived is kept lapsed, rule 2); an ``end`` removes it,
     unless it is older than the suspension it would end; a ``suspension_held``
     (enforce mode: the canary is blind, docs/concepts/health.md) moves its
     ``until`` to the decision's, the suspension kept as it was (its reason, its
     start, the decision that made it) whether or not it had lapsed here first;
     observe mode's ``would_*`` and the other actions never touch routing;
   - ``AddOverride`` is refused for a model that is not watched, or when it
     expires before it starts or before it arrives; the guard rails
     refuse it, unless ``force``, when the gateway does not list the provider
     for the model (the last ``EndpointsDiscovered`` known) or when fewer than
     ``min_hosts`` usable hosts would remain -- a model whose endpoints are not
     known yet is not checked, and the answer says so;
   - ``RemoveOverride`` is refused when there is no such override;
   - a read of the exclusions file (at start, on a change, or for
     ``ReloadExclusions``): an invalid file is refused and the old exclusions
     stay; one that leaves fewer than ``min_hosts`` usable hosts is refused
     unless the reload was forced;
   - ``SetQuantizationFloor`` is refused for a model that is not watched, for a
     floor that no allow-list can say (:func:`~reverie_canary.shared.contract.quantization.deny_problem`),
     and for clearing a floor that does not exist; otherwise it replaces the
     model's floor (an empty ``deny`` clears it) -- never refused for capacity:
     rule 4 keeps the capacity floor;
   - ``EndpointsDiscovered`` of a watched model is remembered for the guard rails
     (with each host's quantization, for the quantization floor), and its hosts'
     display names travel with the snapshot (``names``: a reply names its
     provider by display name, ``provider.ignore`` takes tags);
   - :class:`KvSeen` (what the KV bucket holds, at start) keeps versions from
     ever going back, and gives a store without an epoch its identity (the
     shell draws one; the versions of a new store start again at 1, and the
     epoch tells a chat backend that 4 of the new store follows 7 of the old);
     :class:`Tick` (the timer) only lets rule 2 and 4 run.
4. Every model whose merge (entries, names or allow-list) changed gets a new
   snapshot, version + 1, in the epoch its sequence started in.  Its
   ``quantizations`` allow-list comes from the model's quantization floor
   (:func:`quant_plan`): every quantization the floor does not deny, among the
   hosts the ignore list leaves usable.  The capacity floor wins over the
   quantization floor: while the allow-list would leave fewer than ``min_hosts``
   of those hosts (or fewer than all of them, when fewer are usable), denied
   quantizations come back, most bits first; when even that is not enough (hosts
   that declare no quantization are needed) no allow-list is published, and both
   are said (a log line, the command's answer).  A floor on a model whose
   endpoints are not known yet publishes no allow-list until they are.
5. A command gets one answer: ``CommandApplied`` (the versions it made, the
   guard rails it passed with ``force``, a capacity floor broken by an operator)
   or ``CommandRefused`` (a code and the reason).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Literal

import msgspec
from msgspec import Struct

from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract import quantization as quant
from reverie_canary.shared.contract.commands import (
    MAX_OVERRIDE_S,
    VERBS,
    AddOverride,
    ReloadExclusions,
    RemoveOverride,
    SetQuantizationFloor,
)
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.contract.events import (
    ANSWER_IGNORE_MAX,
    ANSWER_MODELS_MAX,
    CommandApplied,
    CommandRefused,
    Decision,
    EndpointsDiscovered,
    FloorBreach,
    SnapshotVersion,
    Suspended,
    SuspensionEnded,
    SuspensionHeld,
)
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot
from reverie_canary.shared.contract.timefmt import utc_text
from reverie_canary.shared.runtime.config import RouterConfig, config_of
from reverie_canary.shared.runtime.printable import control_at
from reverie_canary.shared.runtime.settings import Settings

LAYER_ORDER = {"exclusion": 0, "override": 1, "suspension": 2}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class Exclusion(Struct, frozen=True, kw_only=True):
    """A reviewed exclusion: ``provider`` for ``model`` (or ``*``) since ``since``."""

    provider: str
    model: str
    reason: str
    reference: str
    since: datetime
    until: datetime | None = None
    line: int = 0


class Override(Struct, frozen=True, kw_only=True):
    """An operator's runtime override (AddOverride), until removed or expired."""

    provider: str
    model: str
    reason: str
    actor: str
    since: datetime
    until: datetime | None = None
    reference: str = ""
    command_id: str = ""


class Suspension(Struct, frozen=True, kw_only=True):
    """A canary suspension from a judge ``suspend`` decision."""

    provider: str
    model: str
    reason: str
    since: datetime
    until: datetime
    decision_id: str


def _applies(scope: str, model: str) -> bool:
    return scope == "*" or scope == model


def _live(until: datetime | None, now: datetime) -> bool:
    return until is None or until > now


def merge(
    model: str,
    exclusions: list[Exclusion],
    overrides: list[Override],
    suspensions: list[Suspension],
    now: datetime,
) -> list[IgnoreEntry]:
    """The ignore entries of ``model`` at ``now`` (UTC), sorted by provider.

    Args:
        model: the model id the snapshot is for.
        exclusions, overrides, suspensions: the three layers (any models; the
            ones for ``model`` or ``*`` are used).
        now: the time of the merge; records with ``until <= now`` are dropped.

    Returns:
        One :class:`IgnoreEntry` per ignored provider; each lists its reasons in
        layer order (exclusion, override, suspension), then by reason text,
        reference, actor, since and until, so the result does not depend on
        the order of the inputs.
    """
    reasons: dict[str, list[IgnoreReason]] = {}
    for e in exclusions:
        if _applies(e.model, model) and _live(e.until, now) and e.since <= now:
            reasons.setdefault(e.provider, []).append(
                IgnoreReason(layer="exclusion", reason=e.reason, reference=e.reference, since=e.since, until=e.until))
    for o in overrides:
        if _applies(o.model, model) and _live(o.until, now):
            reasons.setdefault(o.provider, []).append(
                IgnoreReason(layer="override", reason=o.reason, reference=o.reference, actor=o.actor,
                             since=o.since, until=o.until))
    for s in suspensions:
        if s.model == model and _live(s.until, now):
            reasons.setdefault(s.provider, []).append(
                IgnoreReason(layer="suspension", reason=s.reason, reference=s.decision_id, since=s.since,
                             until=s.until))
    return [IgnoreEntry(provider=provider, reasons=sorted(rs, key=_reason_key))
            for provider, rs in sorted(reasons.items())]


def _reason_key(r: IgnoreReason) -> tuple[Any, ...]:
    # Every field takes part, so that two reasons of one layer with the same text
    # (a ``*`` override and a model override, say) sort the same whatever the
    # order of the inputs: the merge must not depend on Redis' hash order.
    return (LAYER_ORDER[r.layer], r.reason, r.reference, r.actor, r.since or _EPOCH,
            r.until is None, r.until or _EPOCH)


def next_expiry(exclusions: list[Exclusion], overrides: list[Override], suspensions: list[Suspension],
                now: datetime) -> datetime | None:
    """The earliest time after ``now`` (UTC) at which :func:`merge` can change on its own.

    That is the earliest ``until`` after ``now`` of any record, or the ``date``
    of a reviewed exclusion that is still in the future (it starts then).

    Returns:
        That time, or ``None`` when no record will change by itself.
    """
    records: list[Exclusion | Override | Suspension] = [*exclusions, *overrides, *suspensions]
    ends = [r.until for r in records if r.until is not None and r.until > now]
    ends += [e.since for e in exclusions if e.since > now]
    return min(ends) if ends else None


# -- the reviewed exclusions file ----------------------------------------------------

_REQUIRED = ("provider", "model", "reason", "reference", "date")
_TABLE_HEADER = re.compile(r"^\s*\[\[\s*exclusion\s*\]\]")
_ALLOWED = set(_REQUIRED) | {"expires"}


def _as_datetime(value: Any, field: str, line: int, path: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, date):
        return datetime.combine(value, time(0, 0), tzinfo=timezone.utc)
    raise ConfigError(f"{path}:{line}: {field} must be a TOML date (2026-06-11) or UTC datetime, got {value!r}")


#: An endpoint tag or model id as the wire carries it (``Slug``, shared/contract/events.py).
_IDENTIFIER = re.compile(r"^[!#-\[\]-~]{1,256}$")


def parse_exclusions(text: str, path: str = "<exclusions>") -> list[Exclusion]:
    """Parse and validate a reviewed-exclusions file.

    Format: one ``[[exclusion]]`` table per entry with ``provider`` (endpoint
    tag or base slug), ``model`` (model id or ``*``), ``reason``,
    ``reference`` (URL or ticket), ``date`` (when it was reviewed) and an
    optional ``expires`` date.

    Raises:
        ConfigError: naming the file and line of the first bad entry.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    unknown_top = sorted(set(data) - {"exclusion"})
    if unknown_top:
        raise ConfigError(f"{path}: unknown top-level keys {unknown_top}; entries are [[exclusion]] tables")
    lines = [i + 1 for i, raw in enumerate(text.splitlines()) if _TABLE_HEADER.match(raw)]
    entries = data.get("exclusion", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: 'exclusion' must be an array of tables ([[exclusion]])")
    out: list[Exclusion] = []
    seen: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(entries):
        line = lines[index] if index < len(lines) else 0
        missing = [k for k in _REQUIRED if k not in entry]
        if missing:
            raise ConfigError(f"{path}:{line}: exclusion is missing {missing}")
        unknown = sorted(set(entry) - _ALLOWED)
        if unknown:
            raise ConfigError(f"{path}:{line}: unknown keys {unknown}")
        for key in ("provider", "model", "reason", "reference"):
            if not isinstance(entry[key], str) or not entry[key].strip():
                raise ConfigError(f"{path}:{line}: {key} must be a non-empty string")
        for key in ("provider", "model"):
            if any(c.isspace() for c in entry[key].strip()):
                raise ConfigError(f"{path}:{line}: {key} {entry[key]!r} has whitespace: an endpoint tag or "
                                  "model id has none")
            if not _IDENTIFIER.match(entry[key].strip()):
                raise ConfigError(f"{path}:{line}: {key} {entry[key]!r} is not an identifier: at most 256 "
                                  "visible ASCII characters without quotes or backslashes (docs/concepts/messages.md, Bounds)")
        for key, bound in (("reason", 4000), ("reference", 256)):
            if len(entry[key].strip()) > bound:
                raise ConfigError(f"{path}:{line}: {key} has {len(entry[key].strip())} characters, at most {bound}")
            if (at := control_at(entry[key].strip())) is not None:  # it reaches operators' terminals and snapshots
                raise ConfigError(f"{path}:{line}: {key} holds a control character (U+{ord(entry[key].strip()[at]):04X} "
                                  f"at character {at + 1}); control characters, tabs and newlines included, are refused")
        since = _as_datetime(entry["date"], "date", line, path)
        until = _as_datetime(entry["expires"], "expires", line, path) if "expires" in entry else None
        if until is not None and until <= since:
            raise ConfigError(f"{path}:{line}: expires must be after date")
        pair = (entry["provider"].strip(), entry["model"].strip())
        if pair in seen:
            raise ConfigError(f"{path}:{line}: duplicate of the exclusion at line {seen[pair]} "
                              f"(provider {pair[0]!r}, model {pair[1]!r})")
        seen[pair] = line
        out.append(Exclusion(provider=entry["provider"].strip(), model=entry["model"].strip(),
                             reason=entry["reason"].strip(), reference=entry["reference"].strip(),
                             since=since, until=until, line=line))
    return out


# -- the state the router folds ------------------------------------------------------

#: Operator command ids remembered, so that a command published again is answered once.
COMMAND_MEMORY = 256
#: Providers a refusal names when it lists what the gateway does list.
LISTED_SHOWN = 12


class RouterPolicy(Struct, frozen=True, kw_only=True):
    """What the router's rules need from the settings.

    ``models``: the watched models (an override names one of them or ``*``);
    ``min_hosts``: the capacity floor (docs/concepts/judge.md: never fewer than
    2 production hosts), which operator commands may break only with ``force``.
    """

    models: tuple[str, ...] = ()
    min_hosts: int = 2

    @classmethod
    def from_settings(cls, settings: Settings) -> RouterPolicy:
        """The router's part of the settings (through the router's config)."""
        config = config_of(settings, RouterConfig)
        return cls(models=tuple(config.models), min_hosts=config.min_hosts)


class Host(Struct, frozen=True, kw_only=True):
    """One endpoint the gateway lists: its tag (``deepinfra/fp8``), display name (``DeepInfra``) and
    quantization as listed (``fp8``; ``None``: undeclared)."""

    tag: str
    name: str = ""
    quantization: str | None = None


class QuantFloor(Struct, frozen=True, kw_only=True):
    """An operator's quantization floor for ``model``: the quantizations it denies (``SetQuantizationFloor``)."""

    model: str
    deny: list[str]
    reason: str
    actor: str
    since: datetime
    command_id: str = ""


class KnownEndpoints(Struct, frozen=True, kw_only=True):
    """A model's endpoints as its latest ``EndpointsDiscovered`` listed them.

    ``hosts`` are the production hosts (positive controls left out: they are
    probed, never routed to); ``controls`` the control tags.
    """

    cycle: str
    at: datetime
    hosts: list[Host] = []
    controls: list[str] = []


class Published(Struct, frozen=True, kw_only=True):
    """The last snapshot version of a model, a digest of its entries (:func:`entries_digest`) and its epoch.

    An empty digest matches no merge: the next merge publishes a new version.
    ``epoch``: the store identity the version counts in (``IgnoreSnapshot.epoch``).
    """

    version: int
    digest: str = ""
    at: datetime | None = None
    epoch: str = ""


class RouterState(Struct, kw_only=True):
    """Everything the router keeps: the two runtime layers, the reviewed exclusions in force,
    what the gateway lists, and the versions published.

    ``overrides`` is keyed by :func:`override_key`, ``suspensions`` by
    :func:`suspension_key`; ``models`` are the models met in inputs beyond the
    watched ones; ``commands`` the latest command ids answered; ``floors`` the
    quantization floors by model.
    """

    overrides: dict[str, Override] = {}
    suspensions: dict[str, Suspension] = {}
    exclusions: list[Exclusion] = []
    exclusions_digest: str = ""
    models: list[str] = []
    endpoints: dict[str, KnownEndpoints] = {}
    published: dict[str, Published] = {}
    commands: list[str] = []
    updated_at: datetime | None = None
    epoch: str = ""
    floors: dict[str, QuantFloor] = {}


#: How long a lapsed suspension stays in the router's state, out of every merge (s): seven days, longer
#: than any lag of the router behind the judge's log that a deployment lives through without a rebuild.
LAPSED_SUSPENSION_S = 7 * 86400.0


def active_suspensions(state: RouterState, now: datetime) -> dict[str, Suspension]:
    """The suspensions of ``state`` in force at ``now`` (UTC), by key: the lapsed ones left out (rule 2)."""
    return {k: s for k, s in state.suspensions.items() if s.until > now}


def initial() -> RouterState:
    """The state of a router that has seen nothing."""
    return RouterState()


def override_key(provider: str, model: str) -> str:
    """Key of an override in :attr:`RouterState.overrides`: ``provider``, newline, ``model`` (or ``*``)."""
    return f"{provider}\n{model}"


def suspension_key(model: str, provider: str) -> str:
    """Key of a suspension in :attr:`RouterState.suspensions`: ``model``, newline, ``provider``."""
    return f"{model}\n{provider}"


# -- the router's own inputs and its effects -------------------------------------------------


class Tick(Struct, frozen=True, kw_only=True):
    """The timer: time passed (entries may have expired, an exclusion's date may have come)."""


class ExclusionsRead(Struct, frozen=True, kw_only=True):
    """The reviewed exclusions file as the shell read it.

    ``exclusions`` and ``digest`` (of the raw bytes) when it is valid, else
    ``error`` naming the file and line.  ``trigger``: ``start``,
    ``file_changed``, ``file_missing`` or ``command`` (then ``command`` is the
    ``ReloadExclusions`` that asked for it).
    """

    path: str
    exclusions: list[Exclusion] | None = None
    digest: str = ""
    error: str = ""
    trigger: str = "file_changed"
    command: ReloadExclusions | None = None


class KvSeen(Struct, frozen=True, kw_only=True):
    """The versions the KV bucket holds, per model (at start and after a rebuild); a model absent has none.

    ``new_epoch``: an identity the shell drew for this store, taken only when the
    state has none yet (a new store: the first start, or Redis and the log both
    lost); a model's version sequence keeps the epoch it started in.
    """

    versions: dict[str, Published] = {}
    new_epoch: str = ""


class SnapshotMade(Struct, frozen=True, kw_only=True, tag_field="type", tag="snapshot_made"):
    """Write this snapshot to the KV bucket and publish it on ``canary.routing.<model>``."""

    snapshot: IgnoreSnapshot


class Note(Struct, frozen=True, kw_only=True):
    """A log line for the shell to write: ``event`` and its fields, at ``level``."""

    level: Literal["info", "warning"]
    event: str
    fields: dict[str, Any] = {}


#: What the shell must carry out after saving, kept in the record's outbox until done.
Outbound = SnapshotMade | CommandApplied | CommandRefused
Effect = SnapshotMade | CommandApplied | CommandRefused | Note
#: Operator commands the router owns (shared/contract/commands.py OWNERS).
RouterCommand = AddOverride | RemoveOverride | ReloadExclusions | SetQuantizationFloor
RouterInput = (Decision | AddOverride | RemoveOverride | SetQuantizationFloor | EndpointsDiscovered | ExclusionsRead
               | KvSeen | Tick)

_encoder = msgspec.json.Encoder()


def entries_digest(entries: list[IgnoreEntry], names: dict[str, str] | None = None, *,
                   quantizations: list[str] | None = None) -> str:
    """A digest of a snapshot's entries, names and allow-list: equal ones, equal digest (the ``at``, version and
    epoch play no part; without names or an allow-list, the digest of what there is, as before they existed)."""
    data: Any = [entries, names] if names else entries
    if quantizations:
        data = [data, {"quantizations": quantizations}]
    return hashlib.blake2b(_encoder.encode(data), digest_size=16).hexdigest()


# -- the quantization floor ------------------------------------------------------------------


class QuantPlan(Struct, frozen=True, kw_only=True):
    """What a model's quantization floor makes of its usable hosts (:func:`quant_plan`).

    ``allow``: the snapshot's ``quantizations`` (empty: no allow-list); ``kept``
    the usable hosts it admits, ``left_out`` those it drops (``tag (fp4)``,
    ``tag (undeclared)``), ``undeclared`` the tags of the dropped ones that
    declare no quantization (an allow-list drops them); ``relaxed`` the denied
    quantizations allowed back to keep the capacity floor, ``dropped``: even that
    was not enough and no allow-list is published; ``held``: the model's endpoints
    are not known yet, so no allow-list is published; ``need`` the hosts the
    capacity floor asks for (``min_hosts``, or every usable host when fewer).
    """

    allow: list[str] = []
    kept: list[str] = []
    left_out: list[str] = []
    undeclared: list[str] = []
    relaxed: list[str] = []
    dropped: bool = False
    held: bool = False
    need: int = 0


def quant_plan(deny: list[str], hosts: list[Host], usable: list[str] | None, min_hosts: int) -> QuantPlan:
    """The allow-list a floor denying ``deny`` makes, kept at or above the capacity floor.

    Args:
        deny: the quantizations the floor denies (empty: no floor).
        hosts: the model's production hosts as listed (tag and quantization).
        usable: the tags of those the ignore list leaves usable; ``None``: the
            endpoints are not known (no allow-list until they are).
        min_hosts: the capacity floor (docs/concepts/judge.md).

    Returns:
        The :class:`QuantPlan`.  Denied quantizations come back most bits first
        (at equal bits the later in :data:`~reverie_canary.shared.contract.quantization.QUANTIZATIONS`,
        fp4 before int4; a family name with its members) until ``min(min_hosts, len(usable))`` hosts are
        admitted; when the declared ones are not enough, no allow-list.
    """
    if not deny:
        return QuantPlan()
    if usable is None:
        return QuantPlan(held=True)
    by_tag = {h.tag: quant.normalise(h.quantization) for h in hosts}
    need = min(min_hosts, len(usable))
    allow = quant.allowed(deny)

    def admitted(names: list[str]) -> list[str]:
        return [t for t in usable if quant.admits(names, by_tag.get(t))]

    kept, relaxed = admitted(allow), []
    waiting = sorted({q for t in usable if (q := by_tag.get(t)) in quant.BITS and q not in quant.expand(allow)},
                     key=lambda q: (-quant.BITS[q], -quant.QUANTIZATIONS.index(q)))
    for q in waiting:
        if len(kept) >= need:
            break
        if quant.admits(allow, q):
            continue  # its family came back with an earlier one
        back = [x for x in (q, *quant.FAMILIES.get(q, ())) if x not in allow]
        allow = [x for x in quant.QUANTIZATIONS if x in allow or x in back]
        relaxed += back
        kept = admitted(allow)
    dropped = len(kept) < need
    if dropped:
        allow, kept = [], list(usable)
    left = [t for t in usable if t not in kept]
    return QuantPlan(allow=allow, kept=kept, left_out=[f"{t} ({by_tag.get(t) or 'undeclared'})" for t in left],
                     undeclared=[t for t in left if by_tag.get(t) is None or by_tag.get(t) not in quant.BITS],
                     relaxed=relaxed, dropped=dropped, need=need)


def model_quant_plan(state: RouterState, model: str, now: datetime, policy: RouterPolicy) -> QuantPlan:
    """The :class:`QuantPlan` of ``model`` at ``now``: its floor over the hosts its merge leaves usable."""
    floor = state.floors.get(model)
    if floor is None or not floor.deny:
        return QuantPlan()
    if model not in state.endpoints:
        return quant_plan(floor.deny, [], None, policy.min_hosts)
    return quant_plan(floor.deny, state.endpoints[model].hosts, _usable(state, model, now), policy.min_hosts)


#: Hosts a plan's text names before it counts the rest.
PLAN_NAMED = 16


def plan_text(model: str, plan: QuantPlan) -> tuple[str, list[str]]:
    """A plan in the operator's words: ``(detail, warnings)`` for a command's answer and the log.

    The detail gives the allow-list and the hosts it keeps; the warnings name the
    hosts it leaves out (those declaring no quantization counted apart) and say
    when the capacity floor relaxed the floor or brought the list down.
    """
    if plan.held:
        return (f"{model}: no allow-list yet: the gateway's endpoints of {model} are not known (discovery has "
                "not run); the floor applies from the first listing, within the capacity floor"), []
    if not plan.allow and not plan.dropped:
        return f"{model}: no quantization floor: every quantization is routed", []
    warnings = []
    if plan.dropped:
        detail = (f"{model}: NO allow-list published: the capacity floor needs {plan.need} usable host(s) and the "
                  f"declared quantizations, every denied one allowed back, admit fewer")
        warnings.append(f"capacity floor: the quantization floor of {model} is not applied at all (it would leave "
                        f"fewer than {plan.need} usable hosts); hosts that declare no quantization are needed")
    else:
        detail = (f"{model}: quantizations {', '.join(plan.allow)}: {len(plan.kept)} usable host(s) kept"
                  + (f" ({_named(plan.kept)})" if plan.kept else ""))
    if plan.relaxed:
        warnings.append(f"capacity floor: {', '.join(plan.relaxed)} allowed back on {model} to keep {plan.need} "
                        "usable host(s)")
    if plan.left_out:
        warnings.append(f"the allow-list leaves out {len(plan.left_out)} usable host(s) of {model}: "
                        f"{_named(plan.left_out)}")
    if plan.undeclared:
        warnings.append(f"{len(plan.undeclared)} of them declare no quantization ({_named(plan.undeclared)}): an "
                        "allow-list drops every endpoint that declares none")
    return detail, warnings


def _named(items: list[str]) -> str:
    more = len(items) - PLAN_NAMED
    return ", ".join(items[:PLAN_NAMED]) + (f" and {more} more" if more > 0 else "")



def covers(entry: str, host: Host) -> bool:
    """Whether the ignore entry ``entry`` removes ``host`` from routing.

    As the gateway's ``provider.ignore`` matches (OpenRouter's provider routing documentation, read
    the way the simulated gateway reads it): the endpoint's tag itself, a base
    slug of it (``lambda`` covers ``lambda/fp8``) or its display name,
    case-insensitively.
    """
    e, tag = entry.casefold(), host.tag.casefold()
    return e == tag or tag.startswith(e + "/") or (bool(host.name) and e == host.name.casefold())


def watched_and_known(state: RouterState, policy: RouterPolicy) -> list[str]:
    """Every model the router publishes a snapshot for: the watched ones and those met in inputs."""
    return sorted(set(policy.models) | set(state.models))


def next_change(state: RouterState, now: datetime) -> datetime | None:
    """The earliest time after ``now`` (UTC) at which the merge can change by itself (:func:`next_expiry`)."""
    return next_expiry(state.exclusions, list(state.overrides.values()), list(state.suspensions.values()), now)


def snapshot_names(state: RouterState, model: str) -> dict[str, str]:
    """Endpoint tag -> display name of ``model``'s hosts, as its latest listing gave them (names it lacks left out)."""
    known = state.endpoints.get(model)
    return {} if known is None else {h.tag: h.name for h in known.hosts if h.name}


def snapshot_entries(state: RouterState, model: str, now: datetime) -> list[IgnoreEntry]:
    """The merged ignore entries of ``model`` at ``now``."""
    return merge(model, state.exclusions, list(state.overrides.values()), list(state.suspensions.values()), now)


# -- the fold ------------------------------------------------------------------------------


class _Refusal(Struct, frozen=True, kw_only=True):
    code: str
    reason: str
    force_applies: bool = False


class _Applied(Struct, frozen=True, kw_only=True):
    models: list[str]
    detail: str = ""
    warnings: list[str] = []
    forced: bool = False
    floor_broken: list[FloorBreach] = []


Follow = Literal["applied", "refused"] | None


def decide(state: RouterState, event: Any, now: datetime, policy: RouterPolicy, *,
           follow: Follow = None) -> tuple[RouterState, list[Effect]]:
    """Apply one input to the router's state.

    Args:
        state: the state (not modified; a new state is returned).
        event: one of :data:`RouterInput`; anything else is ignored.
        now: the time the input is applied at (UTC): expiry, the merge and the
            answer's ``at`` use it.
        policy: the watched models and the capacity floor.
        follow: when folding the log again, the outcome its answer recorded for
            this command (``applied``: apply it without the guard rails,
            ``refused``: only remember it); ``None`` decides afresh.

    Returns:
        ``(new_state, effects)``: :class:`SnapshotMade` for every changed
        model, then the command's answer, and :class:`Note` lines to log.
        Repeated or foreign input returns the same state and no effects.  (A
        decision that breaks its type -- a suspension without ``until`` -- never
        gets here: decoding refuses it.)
    """
    command = event.command if isinstance(event, ExclusionsRead) else event
    command_id = command.command_id if isinstance(command, RouterCommand) else None
    if command_id is not None and command_id in state.commands:
        return state, []
    new = _copy(state)
    notes: list[Effect] = []
    touched = _prune(new, now, policy)
    outcome: _Refusal | _Applied | None = None
    if follow == "refused" and command_id is not None:
        pass  # the log says it was refused: it changed nothing but the memory of the command
    else:
        match event:
            case Decision():
                _decision(new, event, now, touched)
                if event.routing_follows > 0:
                    touched.discard(event.model)  # more of the same close follow: one version after the last
            case AddOverride():
                outcome = _add_override(new, event, now, policy, follow)
            case RemoveOverride():
                outcome = _remove_override(new, event, policy, follow)
            case SetQuantizationFloor():
                outcome = _set_floor(new, event, now, policy, follow)
            case ExclusionsRead():
                outcome = _exclusions(new, event, now, policy, follow, notes)
            case EndpointsDiscovered():
                if _discovered(new, event, policy):
                    touched.add(event.model)  # its names (tag -> display name) travel with the snapshot
            case KvSeen():
                _kv_seen(new, event)
                touched.update(watched_and_known(new, policy))
            case Tick():
                touched.update(watched_and_known(new, policy))
            case _:
                return state, []
    if isinstance(outcome, _Applied):
        touched.update(outcome.models)
    made = _publish(new, touched, now, policy, notes)
    effects: list[Effect] = [*made]
    if command_id is not None:
        new.commands = [*new.commands, command_id][-COMMAND_MEMORY:]
        if outcome is not None:
            assert command is not None  # an outcome is a command's
            effects.append(_answer(command, outcome, made, new, now))
    effects.extend(notes)
    if new == state:
        return state, effects
    new.updated_at = now
    return new, effects


def _copy(state: RouterState) -> RouterState:
    """A copy whose containers can be changed; their values are frozen Structs and are shared."""
    return msgspec.structs.replace(
        state, overrides=dict(state.overrides), suspensions=dict(state.suspensions),
        exclusions=list(state.exclusions), models=list(state.models), endpoints=dict(state.endpoints),
        published=dict(state.published), commands=list(state.commands), floors=dict(state.floors))


def _prune(state: RouterState, now: datetime, policy: RouterPolicy) -> set[str]:
    """Drop overrides and suspensions past their ``until``; return the models whose merge that changes."""
    touched: set[str] = set()
    for key, o in list(state.overrides.items()):
        if o.until is not None and o.until <= now:
            del state.overrides[key]
            touched.update(watched_and_known(state, policy) if o.model == "*" else [o.model])
    for key, s in list(state.suspensions.items()):
        if s.until > now:
            continue
        last = state.published.get(s.model)
        if last is None or last.at is None or last.at < s.until:
            touched.add(s.model)  # lapsed since the model's last version: its merge changed
        if s.until <= now - timedelta(seconds=LAPSED_SUSPENSION_S):
            del state.suspensions[key]
    return touched


def _know_model(state: RouterState, model: str) -> None:
    if model != "*" and model not in state.models:
        state.models = sorted([*state.models, model])


def _decision(state: RouterState, event: Decision, now: datetime, touched: set[str]) -> None:
    """Apply a judge decision that changes routing: an enforced suspension starts, is held, or ends.

    A suspension's ``until`` is its type's (:class:`Suspended`, :class:`SuspensionHeld`); one
    that lapsed more than ``LAPSED_SUSPENSION_S`` ago is not kept.  An end stamped before the
    suspension it would end started belongs to an earlier one.  Every other decision (observe
    mode's shadows among them) leaves routing as it is.
    """
    key = suspension_key(event.model, event.provider)
    match event:
        case Suspended():
            _know_model(state, event.model)
            if event.until > now - timedelta(seconds=LAPSED_SUSPENSION_S):
                state.suspensions[key] = Suspension(provider=event.provider, model=event.model,
                                                    reason=event.detail or event.reason, since=event.at,
                                                    until=event.until, decision_id=event.decision_id)
                if event.until > now:
                    touched.add(event.model)
        case SuspensionHeld(mode="enforce"):
            _know_model(state, event.model)
            current = state.suspensions.get(key)
            if (event.until > now - timedelta(seconds=LAPSED_SUSPENSION_S)
                    and (current is None or current.until < event.until)):
                state.suspensions[key] = (msgspec.structs.replace(current, until=event.until) if current is not None
                                          else Suspension(provider=event.provider, model=event.model,
                                                          reason=event.detail or event.reason, since=event.at,
                                                          until=event.until, decision_id=event.decision_id))
                if event.until > now:
                    touched.add(event.model)
        case SuspensionEnded():
            current = state.suspensions.get(key)
            if current is not None and event.at >= current.since:
                del state.suspensions[key]
                touched.add(event.model)
        case _:
            pass


def _usable(state: RouterState, model: str, now: datetime, *, overrides: dict[str, Override] | None = None,
            exclusions: list[Exclusion] | None = None) -> list[str]:
    """The production hosts of ``model`` that no entry of the merge covers (its endpoints must be known).

    What the capacity floor counts: every listed host that routing leaves to the gateway, after the
    reviewed exclusions, the overrides and the suspensions (the judge's floor counts the same).  A
    host the judge reports ``unjudgeable`` (frozen for many cycles: transport errors, inconclusive
    results) counts: no verdict is no evidence against it, the gateway still routes to it, and the
    router would never hear that it is judged again.  An operator who finds it down overrides it.
    """
    known = state.endpoints[model]
    entries = merge(model, state.exclusions if exclusions is None else exclusions,
                    list((state.overrides if overrides is None else overrides).values()),
                    list(state.suspensions.values()), now)
    ignored = [e.provider for e in entries]
    return [h.tag for h in known.hosts if not any(covers(i, h) for i in ignored)]


def _breaches(state: RouterState, models: Iterable[str], now: datetime, policy: RouterPolicy, **change: Any
              ) -> list[FloorBreach]:
    """Models where ``change`` removes a usable host and leaves fewer than ``min_hosts``."""
    out = []
    for model in models:
        before = _usable(state, model, now)
        after = _usable(state, model, now, **change)
        if len(after) < len(before) and len(after) < policy.min_hosts:
            out.append(FloorBreach(model=model, min_hosts=policy.min_hosts, usable=after[:ANSWER_IGNORE_MAX]))
    return out


def _floor_text(what: str, breach: FloorBreach) -> str:
    left = ", ".join(breach.usable) or "none"
    return (f"{what} would leave {len(breach.usable)} usable host(s) for {breach.model} ({left}), "
            f"below the capacity floor of {breach.min_hosts}")


def _listed(known: KnownEndpoints) -> list[str]:
    return sorted({h.tag for h in known.hosts} | set(known.controls))


def _add_override(state: RouterState, cmd: AddOverride, now: datetime, policy: RouterPolicy,
                  follow: Follow) -> _Refusal | _Applied:
    scope = cmd.model
    models = watched_and_known(state, policy) if scope == "*" else [scope]
    # An override without an expiry lasts the longest an override may (MAX_OVERRIDE_S, 365 days from its
    # command's time), never forever: the README's bound holds whatever client sent the command.
    until = cmd.expires_at or cmd.at + timedelta(seconds=MAX_OVERRIDE_S)
    record = Override(provider=cmd.provider, model=scope, reason=cmd.reason, actor=cmd.actor, since=cmd.at,
                      until=until, reference=cmd.reference, command_id=cmd.command_id)
    overrides = {**state.overrides, override_key(cmd.provider, scope): record}
    if follow == "applied":
        state.overrides = overrides
        _know_model(state, scope)
        return _Applied(models=models)
    if scope != "*" and scope not in policy.models:
        return _Refusal(code="not_watched", reason=f"override of {cmd.provider} for {scope}: not a watched model "
                                                   f"({', '.join(policy.models)}); use * for every model")
    if cmd.expires_at is not None and cmd.expires_at <= cmd.at:
        return _Refusal(code="expired", reason=f"override of {cmd.provider} by {cmd.actor} expires before it starts")
    if cmd.expires_at is not None and cmd.expires_at <= now:
        return _Refusal(code="expired", reason=f"override of {cmd.provider} expired at {utc_text(cmd.expires_at)}, "
                                               "before the router received it")
    checked = [m for m in models if m in state.endpoints]
    warnings: list[str] = []
    problems: list[tuple[str, str]] = []
    unchecked = [m for m in models if m not in state.endpoints]
    if unchecked:
        shown = "every model" if scope == "*" and not checked else ", ".join(unchecked)
        warnings.append(f"no endpoint listing known yet for {shown} (discovery has not run): "
                        f"{cmd.provider} was not checked against it")
    listing = [m for m in checked if any(covers(cmd.provider, h) for h in
                                         [*state.endpoints[m].hosts, *(Host(tag=t) for t in state.endpoints[m].controls)])]
    unknown = [m for m in checked if m not in listing] if scope != "*" else (checked if not listing else [])
    for model in unknown:
        listed = _listed(state.endpoints[model])
        more = f" and {len(listed) - LISTED_SHOWN} more" if len(listed) > LISTED_SHOWN else ""
        problems.append(("unknown_provider", f"{cmd.provider} is not listed by the gateway for {model} "
                                             f"(it lists {', '.join(listed[:LISTED_SHOWN]) or 'nothing'}{more}); "
                                             "check the name"))
    breaches = _breaches(state, checked, now, policy, overrides=overrides)
    problems += [("capacity_floor", _floor_text(f"overriding {cmd.provider}", b)) for b in breaches]
    if problems and not cmd.force:
        return _Refusal(code=problems[0][0], force_applies=True,
                        reason="; ".join(text for _, text in problems) + "; add --force to apply it anyway")
    state.overrides = overrides
    _know_model(state, scope)
    warnings += [f"forced past a guard rail: {text}" for _, text in problems]
    return _Applied(models=models, warnings=warnings, forced=bool(problems), floor_broken=breaches)


def scope_of(model: str) -> str:
    """An override's model as an operator reads it (``*``: every model)."""
    return "every model (*)" if model == "*" else model


def _remove_override(state: RouterState, cmd: RemoveOverride, policy: RouterPolicy,
                     follow: Follow) -> _Refusal | _Applied:
    key = override_key(cmd.provider, cmd.model)
    models = watched_and_known(state, policy) if cmd.model == "*" else [cmd.model]
    if key not in state.overrides:
        if follow == "applied":
            return _Applied(models=models)
        others = sorted(o.model for o in state.overrides.values() if o.provider == cmd.provider)
        hint = ""
        if others:  # the operator forgot --model (or gave another): say which exist and how to remove them
            hint = ("; it has one for " + ", ".join(scope_of(m) for m in others[:8])
                    + f": `canary override remove {cmd.provider} --model {others[0]}`")
        return _Refusal(code="no_such_override",
                        reason=f"no override of {cmd.provider} for {cmd.model} to remove{hint}")
    del state.overrides[key]
    return _Applied(models=models)


def _set_floor(state: RouterState, cmd: SetQuantizationFloor, now: datetime, policy: RouterPolicy,
               follow: Follow) -> _Refusal | _Applied:
    """Set (or clear, ``deny`` empty) the quantization floor of one watched model; the answer says what it keeps."""
    model, deny = cmd.model, sorted(set(cmd.deny), key=lambda q: quant.QUANTIZATIONS.index(q) if q in quant.BITS else 99)
    if follow == "applied":
        _put_floor(state, cmd, deny)
        return _Applied(models=[model])
    if model not in policy.models:
        return _Refusal(code="not_watched", reason=f"quantization floor for {model}: not a watched model "
                                                   f"({', '.join(policy.models)})")
    if deny:
        problem = quant.deny_problem(deny)
        if problem is not None:
            return _Refusal(code="invalid_floor", reason=f"quantization floor for {model}: {problem}")
    elif model not in state.floors:
        return _Refusal(code="no_such_floor", reason=f"no quantization floor on {model} to clear")
    _put_floor(state, cmd, deny)
    plan = model_quant_plan(state, model, now, policy)
    detail, warnings = plan_text(model, plan)
    if deny:
        # read back from what is in force, not from the request: the capacity floor may take some back
        if plan.dropped:
            detail = f"asked to deny {', '.join(deny)}: NOT in force (the capacity floor); {detail}"
        elif plan.relaxed:
            detail = (f"asked to deny {', '.join(deny)}: in force with {', '.join(plan.relaxed)} allowed back by the "
                      f"capacity floor; {detail}")
        else:
            detail = f"denies {', '.join(deny)}; {detail}"
    return _Applied(models=[model], detail=detail, warnings=warnings)


def _put_floor(state: RouterState, cmd: SetQuantizationFloor, deny: list[str]) -> None:
    if deny:
        state.floors[cmd.model] = QuantFloor(model=cmd.model, deny=deny, reason=cmd.reason, actor=cmd.actor,
                                             since=cmd.at, command_id=cmd.command_id)
    else:
        state.floors.pop(cmd.model, None)


def _exclusions(state: RouterState, read: ExclusionsRead, now: datetime, policy: RouterPolicy, follow: Follow,
                notes: list[Effect]) -> _Refusal | _Applied | None:
    command = read.command
    kept = {"path": read.path, "kept": len(state.exclusions)}
    if read.exclusions is None:
        if command is not None:
            return _Refusal(code="invalid_exclusions", reason=f"exclusions not reloaded, the old ones stay: {read.error}")
        event = "exclusions_file_missing" if read.trigger == "file_missing" else "exclusions_refused"
        notes.append(Note(level="warning", event=event, fields={**kept, "error": read.error}))
        return None
    if read.digest == state.exclusions_digest and follow is None:
        if command is None:
            return None
        return _Applied(models=watched_and_known(state, policy), detail="the file holds the exclusions already in force")
    models = [m for m in sorted(state.endpoints) if m in policy.models]
    breaches = [] if follow == "applied" else _breaches(state, models, now, policy, exclusions=read.exclusions)
    forced = command is not None and command.force
    if breaches and not forced:
        text = "; ".join(_floor_text("the new exclusions", b) for b in breaches)
        if command is not None:
            return _Refusal(code="capacity_floor", force_applies=True,
                            reason=f"exclusions not reloaded, the old ones stay: {text}; add --force to apply them anyway")
        notes.append(Note(level="warning", event="exclusions_refused",
                          fields={**kept, "error": f"{text}; `canary exclusions reload --force` applies them"}))
        return None
    state.exclusions = list(read.exclusions)
    state.exclusions_digest = read.digest
    notes.append(Note(level="info", event="exclusions_reloaded",
                      fields={"count": len(state.exclusions), "path": read.path, "trigger": read.trigger,
                              **({"actor": command.actor} if command is not None else {})}))
    warnings = [f"forced past a guard rail: {_floor_text('the new exclusions', b)}" for b in breaches]
    return _Applied(models=watched_and_known(state, policy), warnings=warnings, forced=bool(breaches),
                    floor_broken=breaches)


def _discovered(state: RouterState, event: EndpointsDiscovered, policy: RouterPolicy) -> bool:
    """Remember a watched model's endpoints; ``True`` when they were taken."""
    if event.model not in policy.models:
        return False  # any model name on the bus must not grow state
    known = state.endpoints.get(event.model)
    if known is not None and event.at < known.at:
        return False
    controls = {p.provider for p in event.planned if p.control} | set(event.controls.values())
    hosts = [Host(tag=e.provider, name=e.provider_name, quantization=e.quantization) for e in event.endpoints
             if e.provider not in controls]
    if known is not None and known.cycle == event.cycle and event.parts > 1:
        # a further part of a large model's listing (docs/concepts/messages.md, "Bounds"): the cycle's endpoints are the union
        controls |= set(known.controls)
        hosts = [h for h in {h.tag: h for h in [*known.hosts, *hosts]}.values() if h.tag not in controls]
    state.endpoints[event.model] = KnownEndpoints(cycle=event.cycle, at=event.at, controls=sorted(controls),
                                                  hosts=sorted(hosts, key=lambda h: h.tag))
    return True


def _kv_seen(state: RouterState, event: KvSeen) -> None:
    """Versions never go back: the KV bucket's word wins when it is ahead; when it is behind
    (a write that never landed) or empty, the next merge publishes a version above both."""
    for model in sorted(set(state.published) | set(event.versions)):
        ours, theirs = state.published.get(model), event.versions.get(model)
        if theirs is not None and (ours is None or theirs.version >= ours.version):
            state.published[model] = theirs
        elif ours is not None:
            state.published[model] = Published(version=ours.version, at=ours.at, epoch=ours.epoch)
    if not state.epoch and event.new_epoch:
        state.epoch = event.new_epoch


def _publish(state: RouterState, models: Iterable[str], now: datetime, policy: RouterPolicy,
             notes: list[Effect] | None = None) -> list[SnapshotMade]:
    out = []
    for model in sorted(set(models)):
        if model == "*":
            continue
        entries = snapshot_entries(state, model, now)
        names = snapshot_names(state, model)
        plan = model_quant_plan(state, model, now, policy)
        digest = entries_digest(entries, names, quantizations=plan.allow)
        last = state.published.get(model)
        if last is not None and last.digest == digest:
            continue
        version = (last.version if last is not None else 0) + 1
        epoch = last.epoch if last is not None else state.epoch  # a sequence keeps the epoch it started in
        state.published[model] = Published(version=version, digest=digest, at=now, epoch=epoch)
        out.append(SnapshotMade(snapshot=IgnoreSnapshot(at=now, model=model, version=version, entries=entries,
                                                        epoch=epoch, names=names, quantizations=plan.allow)))
        if notes is not None and (plan.relaxed or plan.dropped):
            detail, warnings = plan_text(model, plan)
            notes.append(Note(level="warning", event="quantization_floor_relaxed",
                              fields={"model": model, "version": version, "detail": detail, "warnings": warnings}))
    return out


def _answer(command: RouterCommand, outcome: _Refusal | _Applied, made: list[SnapshotMade], state: RouterState,
            now: datetime) -> CommandApplied | CommandRefused:
    base: dict[str, Any] = {
        "at": now, "answer_id": ids.answer_id(command.command_id), "command_id": command.command_id,
        "command": VERBS[type(command)], "service": "router", "actor": command.actor,
        "model": getattr(command, "model", ""), "provider": getattr(command, "provider", ""),
    }
    if isinstance(outcome, _Refusal):
        return CommandRefused(**base, code=outcome.code, reason=outcome.reason, force_applies=outcome.force_applies)
    mine = set(outcome.models)
    snapshots = [_version(m.snapshot, now) for m in made if m.snapshot.model in mine]
    changed = {s.model for s in snapshots}
    unchanged = [SnapshotVersion(model=m, version=state.published[m].version)
                 for m in sorted(mine - changed) if m in state.published]
    return CommandApplied(**base, detail=outcome.detail, snapshots=snapshots[:ANSWER_MODELS_MAX],
                          unchanged=unchanged[:ANSWER_MODELS_MAX], warnings=outcome.warnings[:16],
                          forced=outcome.forced, floor_broken=outcome.floor_broken[:ANSWER_MODELS_MAX])


def _version(snapshot: IgnoreSnapshot, now: datetime) -> SnapshotVersion:
    ignore = snapshot.ignore_at(now)
    return SnapshotVersion(model=snapshot.model, version=snapshot.version, ignore=ignore[:ANSWER_IGNORE_MAX],
                           ignored=len(ignore), quantizations=list(snapshot.quantizations))


# -- folding the log again (rebuild, replay) ------------------------------------------------


def lean(event: Any) -> Any:
    """``event`` as the router's fold needs it: a listing keeps only its positive controls' planned probes.

    The router reads a listing's endpoints, controls and the control probes among
    ``planned`` (:func:`decide`); every other planned probe is a cycle's task list,
    which a month of listings makes gigabytes.  A rebuild or a replay folds lean
    events to the same state as the full ones.
    """
    if isinstance(event, EndpointsDiscovered) and event.planned:
        return msgspec.structs.replace(event, planned=[p for p in event.planned if p.control])
    return event


class Refolder:
    """The router's state folded from its inputs on the log, one event at a time, in stream order.

    The streaming form of :func:`refold`: a rebuild hands each event as the log scan
    reads it, so that its memory is the state's, never the log's (holding the inputs of
    a month of a large fleet's log at once is what made a rebuilt router grow with the
    log).  ``answers`` maps a command id to the router's answer on the log
    (``"applied"`` / ``"refused"``): a command with one follows it, as it was live,
    whatever the guard rails would say today; one without (a log older than the answers)
    is decided again.  Each input is applied at its own ``at``; :meth:`result` applies the
    time of the result.
    """

    def __init__(self, policy: RouterPolicy, answers: Mapping[str, Follow], *,
                 exclusions: list[Exclusion] | None = None, exclusions_digest: str = "") -> None:
        self.policy = policy
        self.answers = answers
        self.state = initial()
        self.state.exclusions = list(exclusions or [])
        self.state.exclusions_digest = exclusions_digest

    def feed(self, event: Any) -> None:
        """Fold one event of the log (anything but the router's inputs is skipped)."""
        if isinstance(event, ReloadExclusions):
            self.state.commands = [*self.state.commands, event.command_id][-COMMAND_MEMORY:]
        elif isinstance(event, AddOverride | RemoveOverride | SetQuantizationFloor):
            self.state, _ = decide(self.state, event, event.at, self.policy, follow=self.answers.get(event.command_id))
        elif isinstance(event, Decision | EndpointsDiscovered):
            self.state, _ = decide(self.state, event, event.at, self.policy)

    def result(self, now: datetime) -> RouterState:
        """The state as of ``now`` (UTC): everything expired by then is dropped."""
        self.state, _ = decide(self.state, Tick(), now, self.policy)
        return self.state


def answers_of(events: Iterable[Any]) -> dict[str, Follow]:
    """Command id -> ``"applied"`` / ``"refused"``, from the router's answers among ``events``."""
    return {e.command_id: ("applied" if isinstance(e, CommandApplied) else "refused") for e in events
            if isinstance(e, CommandApplied | CommandRefused) and e.service == "router"}


def refold(events: Iterable[Any], policy: RouterPolicy, now: datetime, *, exclusions: list[Exclusion] | None = None,
           exclusions_digest: str = "") -> RouterState:
    """The router's state from its inputs on the log, as of ``now`` (UTC).

    Args:
        events: the log in stream order: decisions, operator commands,
            ``EndpointsDiscovered`` and the router's answers (others are skipped).
        policy: the watched models and the floor.
        now: the time of the result: everything expired by then is dropped.
        exclusions, exclusions_digest: the reviewed exclusions now in force (the
            file is not on the log).

    The rules of :class:`Refolder` (which a rebuild uses to stream the log); here the
    events are held at once, for the answers that come after their commands.  The
    published versions are not the log's to say: the caller takes them from the KV
    bucket (:class:`KvSeen`).
    """
    items = list(events)
    folder = Refolder(policy, answers_of(items), exclusions=exclusions, exclusions_digest=exclusions_digest)
    for event in items:
        folder.feed(event)
    return folder.result(now)


def layers(state: RouterState, now: datetime) -> dict[str, Any]:
    """The runtime layers live at ``now`` (UTC), as plain data: what a replay compares.

    Returns:
        ``{"overrides": {key: {...}}, "suspensions": {key: {...}}, "floors": {model: {...}}}``,
        entries past their ``until`` left out.
    """
    return {
        "overrides": {k: msgspec.to_builtins(o) for k, o in sorted(state.overrides.items())
                      if o.until is None or o.until > now},
        "suspensions": {k: msgspec.to_builtins(s) for k, s in sorted(state.suspensions.items()) if s.until > now},
        "floors": {k: msgspec.to_builtins(f) for k, f in sorted(state.floors.items())},
    }


def diff_layers(replayed: RouterState, live: RouterState, now: datetime) -> list[str]:
    """Differences between the runtime layers of two states at ``now`` (empty: they agree)."""
    a, b = layers(replayed, now), layers(live, now)
    out = []
    for layer in ("overrides", "suspensions", "floors"):
        for key in sorted(set(a[layer]) | set(b[layer])):
            if a[layer].get(key) != b[layer].get(key):
                name = key.replace("\n", " on ") if layer == "overrides" else " ".join(reversed(key.split("\n", 1)))
                name = f"quantization {key}" if layer == "floors" else name
                out.append(f"{layer[:-1]} {name}: replay={_short(a[layer].get(key))} live={_short(b[layer].get(key))}")
    return out


def _short(value: Any) -> str:
    text = "none" if value is None else repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
