"""The notifier's core: what operators are told about a decision or a routing change.

Pure formatting: one short human line and a structured payload per message,
naming the provider, the action, why (reason and evidence) and until when.
"""

from __future__ import annotations

from typing import Any

from reverie_canary.shared.commands import AddOverride, Command, LiftSuspension, ReloadExclusions, RemoveOverride, SetMode
from reverie_canary.shared.events import Decision
from reverie_canary.shared.snapshots import IgnoreSnapshot

SEVERITY = {
    "suspend": "critical",
    "floor_held": "critical",
    "common_mode": "warning",
    "control_passed": "warning",
    "pin_violated": "warning",
    "unjudgeable": "warning",
    "would_suspend": "info",
    "end": "info",
    "would_end": "info",
    "mode_changed": "info",
}


def _fmt(dt) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ") if dt else "-"


def describe_decision(d: Decision) -> tuple[str, dict[str, Any]]:
    """A one-line message and a structured payload for a decision."""
    who = d.provider or "(all providers)"
    head = f"[{d.model}] {who}: {d.action}"
    if d.kind:
        head += f" ({d.kind})"
    if d.action in ("suspend", "would_suspend"):
        head += f" until {_fmt(d.until)} (ladder step {d.ladder_level})"
    if d.reason:
        head += f" - {d.reason}"
    if d.detail:
        head += f": {d.detail}"
    payload = {
        "id": d.decision_id,
        "severity": SEVERITY.get(d.action, "info"),
        "model": d.model,
        "provider": d.provider,
        "action": d.action,
        "reason": d.reason,
        "detail": d.detail,
        "until": _fmt(d.until) if d.until else None,
        "mode": d.mode,
        "cycles": d.cycles,
        "evidence": [f"{r.kind}:{r.outcome}:{r.reason}" for r in d.evidence][:10],
        "at": _fmt(d.at),
    }
    return head, payload


def describe_snapshot(s: IgnoreSnapshot) -> tuple[str, dict[str, Any]]:
    """A one-line message and a structured payload for a new ignore list."""
    ignore = s.ignore_at(s.at)
    line = f"[{s.model}] ignore list v{s.version}: {', '.join(ignore) if ignore else '(empty)'}"
    payload = {
        "id": f"snap|{s.model}|{s.version}",
        "severity": "info",
        "model": s.model,
        "version": s.version,
        "ignore": ignore,
        "entries": {e.provider: [f"{r.layer}: {r.reason}" for r in e.reasons] for e in s.entries},
        "at": _fmt(s.at),
    }
    return line, payload


def describe_command(c: Command) -> tuple[str, dict[str, Any]]:
    """A one-line message and a structured payload for an operator command (who did what, why)."""
    match c:
        case AddOverride():
            until = f" until {_fmt(c.expires_at)}" if c.expires_at else ""
            what = f"override added: ignore {c.provider} on {c.model}{until}: {c.reason}"
        case RemoveOverride():
            what = f"override removed: {c.provider} on {c.model}" + (f": {c.reason}" if c.reason else "")
        case LiftSuspension():
            what = f"suspension lift asked: {c.provider} on {c.model}: {c.reason}"
        case SetMode():
            scope = f"kind {c.kind}" if c.kind else "all kinds"
            what = f"mode set to {c.mode} for {c.model} ({scope})" + (f": {c.reason}" if c.reason else "")
        case ReloadExclusions():
            what = "reviewed exclusions reload asked" + (f": {c.reason}" if c.reason else "")
        case _:
            what = type(c).__name__
    payload = {"id": f"cmd|{c.command_id}", "severity": "info", "actor": c.actor, "command_id": c.command_id,
               "at": _fmt(c.at)}
    return f"{c.actor}: {what}", payload
