"""The router's core: three layers merged into one ``provider.ignore`` list.

What lives here (DESIGN.md, "The router: three layers into provider.ignore"):
the layers' records, the reviewed-exclusions file format and its validation,
and :func:`merge`, a pure function -- the same inputs give the same entries.
It knows nothing of NATS, Redis or the wall clock (``now`` is an argument).

Layers, in the order an entry lists them:

1. ``exclusion``: reviewed exclusions in the repository (TOML), for measured
   defects and policy mismatches; may carry an ``expires`` date.
2. ``override``: runtime incident overrides from operators (reason, actor,
   optional expiry), effective in the next snapshot.
3. ``suspension``: the judge's time-limited canary suspensions.

Layers combine by union: a provider is ignored while any layer ignores it, and
each entry names every layer that does.  An entry past its expiry never appears.
"""

from __future__ import annotations

import re
import tomllib
from datetime import date, datetime, time, timezone
from pathlib import Path
from typing import Any

from msgspec import Struct

from reverie_canary.shared.errors import ConfigError
from reverie_canary.shared.snapshots import IgnoreEntry, IgnoreReason

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


def _reason_key(r: IgnoreReason) -> tuple:
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
    ends = [r.until for r in [*exclusions, *overrides, *suspensions] if r.until is not None and r.until > now]
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
        since = _as_datetime(entry["date"], "date", line, path)
        until = _as_datetime(entry["expires"], "expires", line, path) if "expires" in entry else None
        if until is not None and until <= since:
            raise ConfigError(f"{path}:{line}: expires must be after date")
        key = (entry["provider"].strip(), entry["model"].strip())
        if key in seen:
            raise ConfigError(f"{path}:{line}: duplicate of the exclusion at line {seen[key]} "
                              f"(provider {key[0]!r}, model {key[1]!r})")
        seen[key] = line
        out.append(Exclusion(provider=entry["provider"].strip(), model=entry["model"].strip(),
                             reason=entry["reason"].strip(), reference=entry["reference"].strip(),
                             since=since, until=until, line=line))
    return out


def load_exclusions(path: str | Path | None) -> list[Exclusion]:
    """Read the reviewed exclusions from ``path`` (no path: none).

    Raises:
        ConfigError: unreadable or invalid file.
    """
    if not path:
        return []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read exclusions file {path}: {exc}") from exc
    return parse_exclusions(text, str(path))
