"""A compressed-time soak with faults drawn from a seed: the harness of ``benchmarks/soak.py`` and the suite's short soak.

Every service runs as its own ``canary run <service>`` process (two probers), the
dashboard as ``canary dashboard``, the simulated gateway as a process with
``benchmarks/soak_fleet.toml`` (one endpoint per quality defect, four healthy hosts,
the refusal probe's positive control), NATS and Redis as embedded servers on fixed
ports (so that a restart comes back where the services look).  The notifier posts to
a signed webhook receiver in this process, which counts every notice it gets.

Time is compressed as in ``canary demo``: one 30-minute cycle takes ``cycle_s``
seconds, and every duration of the policy and of retention is scaled by the same
factor ``cycle_s / 1800``: the suspension ladder and its reset, the notifier's
reminder and give-up times, and the age limit of every stream (``log_max_age_s``:
``CANARY_LOG``, ``CANARY_DEADLETTER`` and ``CANARY_NOTICES`` keep 35 scaled days).
Not scaled, and why: the duplicate window (120 s, as the demo: it must cover a
redelivery, which takes real seconds), the byte limits of the streams and buckets
and the KV bucket's history (64 versions a key: a count, not a time), which bound
what a 2,000-endpoint fleet writes (``benchmarks/README.md``, "soak").

Faults come from :func:`plan_faults`, a pure function of the seed and the run's
length: the same seed gives the same faults in the same cycles at the same share
of the cycle.  A run prints the plan, applies each fault at its time, and every
``report_every`` cycles (and at the end) prints what :class:`Figures` holds.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec

from reverie_canary.canary.embedded import RunningServer, free_port, start_nats, start_redis
from reverie_canary.shared.contract import subjects
from reverie_canary.shared.contract.events import (
    CycleVerdict,
    Decision,
    EndpointsDiscovered,
    Notice,
    ProbeResult,
    TimedDecision,
)
from reverie_canary.shared.runtime import eventlog, streams
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect, redis_client
from reverie_canary.shared.runtime.settings import DAY_S, Settings
from reverie_canary.simulator import SIMULATED_KEY

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "benchmarks" / "soak_fleet.toml"
REAL_CYCLE_S = 1800.0
#: The services, each its own process: two probers, the four other services and the dashboard.
SERVICES: tuple[str, ...] = ("prober-a", "prober-b", "judge", "router", "notifier", "discovery", "dashboard")
#: Healthy hosts of the fleet: the hostile answers and the overrides go to them.
HEALTHY = ("deepinfra/fp8", "novita/fp8", "together", "fireworks")
#: Hostile gateway answers switched on for a healthy host for a cycle or two (simulator/scenario.py).
HOSTILE: tuple[dict[str, Any], ...] = (
    {"kind": "keepalive_forever"},
    {"kind": "tokens_forever", "chunk_chars": 8192},
    {"kind": "silent_after_headers"},
    {"kind": "html_200"},
    {"kind": "bad_utf8", "mode": "invalid", "piece_bytes": 61},
    {"kind": "no_done", "mode": "hold"},
    {"kind": "huge_reply", "megabytes": 20.0, "piece_kb": 64},
    {"kind": "huge_reply", "megabytes": 20.0, "piece_kb": 64, "body": True},
)
#: The live traffic the harness counts as a chat backend's client would (per cycle, per provider): the four
#: healthy hosts pass, three defect providers fail a third of their replies with their defect's reason (live
#: counts that stand out get a pinned confirmation probe: three keep that extra work small).
LIVE_REPLIES = 12
LIVE_REASONS: dict[str, str] = {"lambda/fp8": "ttft_exceeded", "brightwave/fp8": "leading_junk",
                                "echoloop/fp8": "repetition"}
#: Subject families a service reads (a consumer's filter or a subscription): junk goes to each.
JUNK_FAMILIES: tuple[str, ...] = ("tasks", "results", "discovery", "ops", "routing", "decisions", "verdicts",
                                  "answers", "cycles", "retest", "served", "live", "notices")
#: The fault kinds and their weights in the draw (a kill takes the services in turn).
FAULT_WEIGHTS: dict[str, float] = {
    "kill": 6, "nats_restart": 1, "redis_restart": 1, "redis_empty": 1, "gateway_down": 1, "blind": 1,
    "hostile": 2, "junk": 3, "override": 1, "lift": 1, "mode": 1, "exclusions": 1, "clock_jump": 0.5,
}


@dataclass(frozen=True)
class Fault:
    """One fault: in the run's cycle ``cycle`` (1-based) at ``share`` of it, lasting ``cycles`` cycles."""

    cycle: int
    share: float
    kind: str
    target: str = ""
    cycles: int = 1

    def __str__(self) -> str:
        target = f" {self.target}" if self.target else ""
        lasting = f" for {self.cycles} cycles" if self.cycles > 1 else ""
        return f"cycle {self.cycle} (+{self.share:.2f}): {self.kind}{target}{lasting}"


def plan_faults(seed: int, cycles: int, *, rate: float = 0.3, quiet_tail: int = 4, first: int = 3,
                kinds: tuple[str, ...] | None = None, kills_until: int | None = None) -> list[Fault]:
    """The faults of a run: a pure function of ``seed`` and ``cycles`` (the same seed replays the same faults).

    Args:
        rate: chance of a fault starting in a cycle with none running.
        quiet_tail: the last cycles get none (the run settles before its last figures).
        first: the first cycle that may get one (the services start in cycle 1).
        kinds: draw only these kinds (default: every kind of :data:`FAULT_WEIGHTS`).
        kills_until: the last cycle a service may be killed in (``None``: any cycle).  A kill
            drawn later is dropped (its cycle gets no fault), so that the other faults of the
            plan stay those of the same seed without the limit, and each service runs as one
            process from then on: its RSS is then one process's over the rest of the run.

    Returns:
        Faults in cycle order, none overlapping another (a fault that lasts two
        cycles keeps the next one free); a kill takes the services in turn.
    """
    rng = random.Random(seed)
    kinds = [k for k in FAULT_WEIGHTS if k in (kinds or FAULT_WEIGHTS)]
    weights = [FAULT_WEIGHTS[k] for k in kinds]
    out: list[Fault] = []
    kill_turn = 0
    busy_until = first - 1
    for cycle in range(first, max(first, cycles - quiet_tail + 1)):
        draw = rng.random()
        kind = rng.choices(kinds, weights)[0]
        share = round(rng.uniform(0.05, 0.7), 2)
        lasting = rng.choice((1, 2))
        target_draw = rng.random()
        if cycle <= busy_until or draw >= rate:
            continue
        if kind == "kill" and kills_until is not None and cycle > kills_until:
            busy_until = cycle + 1  # as the kill would have: the rest of the plan is the same seed's
            continue
        target = ""
        if kind == "kill":
            target = SERVICES[kill_turn % len(SERVICES)]
            kill_turn += 1
            lasting = 1
        elif kind == "hostile":
            target = f"{HEALTHY[int(target_draw * len(HEALTHY))]}={int(target_draw * 97) % len(HOSTILE)}"
        elif kind == "junk":
            target = JUNK_FAMILIES[int(target_draw * len(JUNK_FAMILIES))]
            lasting = 1
        elif kind == "blind":
            target = str((401, 402, 403)[int(target_draw * 3)])
        elif kind in ("override", "lift"):
            target = HEALTHY[int(target_draw * len(HEALTHY))] if kind == "override" else "lambda/fp8"
        elif kind == "mode":
            target = "observe"
        elif kind in ("nats_restart", "redis_restart", "redis_empty", "exclusions", "clock_jump"):
            lasting = 1
        out.append(Fault(cycle=cycle, share=share, kind=kind, target=target, cycles=lasting))
        busy_until = cycle + lasting
    return out


def soak_settings(*, nats_url: str, redis_url: str, gateway_url: str, namespace: str, cycle_s: float,
                  exclusions_file: str, webhook_url: str, webhook_secret: str, model: str,
                  retention_days: float = 35.0) -> Settings:
    """The soak's settings: the demo's compression, with every retention age scaled by the same factor."""
    scale = cycle_s / REAL_CYCLE_S
    return Settings.load(
        env={}, nats_url=nats_url, redis_url=redis_url, namespace=namespace, models=[model],
        openrouter_base_url=gateway_url, openrouter_api_key=SIMULATED_KEY, cycle_interval_s=cycle_s,
        probe_window_s=cycle_s * 0.8, ttft_threshold_s=1.0, request_timeout_s=cycle_s * 0.65,
        ladder_s=[x * DAY_S * scale for x in (1, 3, 7)], ladder_reset_s=14 * DAY_S * scale, mode="enforce",
        controls={"refusal": "control-filter/strict"}, prober_concurrency=16, languages_per_cycle=1,
        language_coverage_cycles=17, duplicate_window_s=120.0, log_max_age_s=retention_days * DAY_S * scale,
        judge_snapshot_events=2000, exclusions_file=exclusions_file, log_level="WARNING",
        notify_urls={"soak": webhook_url}, notify_secrets={"soak": webhook_secret},
        notify_remind_s=6 * 3600.0 * scale, notify_retry_base_s=0.05, notify_retry_max_s=1.0,
        notify_give_up_s=DAY_S * scale, notify_timeout_s=2.0, notify_poll_s=0.25)


# --- processes --------------------------------------------------------------------------------------------

#: Runs ``canary`` with the wall clock shifted by ``CANARY_SOAK_CLOCK_OFFSET_S`` seconds (the clock jump):
#: ``time.time`` and the services' clock (shared/runtime/clock.py); the event loop's monotonic clock is left alone.
_SHIM = """
import os, sys, time, runpy
from datetime import datetime, timezone
offset = float(os.environ.get("CANARY_SOAK_CLOCK_OFFSET_S") or 0)
if offset:
    real = time.time
    time.time = lambda: real() + offset
    from reverie_canary.shared.runtime import clock
    clock.now = lambda: datetime.fromtimestamp(time.time(), timezone.utc)
sys.argv = ["canary", *sys.argv[1:]]
runpy.run_module("reverie_canary.canary", run_name="__main__")
"""


def _stop(proc: subprocess.Popen | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def proc_rss_mb(pid: int) -> float:
    """``VmRSS`` of ``pid`` in MB (0: gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def proc_fds(pid: int) -> int:
    """Open file descriptors of ``pid`` (0: gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


@dataclass
class Process:
    """A service process the soak started: how to start it again, its current ``Popen``, its starts."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen | None = None
    started_cycle: int = 0
    starts: int = 0

    def start(self, cycle: int, extra_env: dict[str, str] | None = None) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-c", _SHIM, *self.argv], stdout=out,
                                         stderr=subprocess.STDOUT, env={**self.env, **(extra_env or {})},
                                         cwd=ROOT)
        self.started_cycle = cycle
        self.starts += 1

    def kill(self) -> None:
        _stop(self.proc, signal.SIGKILL)

    def stop(self) -> None:
        _stop(self.proc)


# --- what the log says ------------------------------------------------------------------------------------

@dataclass
class Books:
    """Counts kept while reading the log: what was planned, stored, decided, and what the receiver got."""

    last_seq: int = 0
    planned: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # cycle -> task ids planned
    controls: set[str] = field(default_factory=set)  # task ids of positive-control probes (no provider verdict)
    results: Counter[str] = field(default_factory=Counter)  # task id -> results stored in the log
    verdicts: Counter[str] = field(default_factory=Counter)  # cycle -> verdicts stored
    verdict_missing: dict[str, set[str]] = field(default_factory=dict)  # cycle -> task ids its verdict names missing
    verdict_cut: dict[str, int] = field(default_factory=dict)  # cycle -> missing task ids its verdict left unnamed
    decisions: Counter[str] = field(default_factory=Counter)  # decision id -> stored
    decision_keys: Counter[tuple] = field(default_factory=Counter)  # (model, provider, action, at, until) -> stored
    notices: Counter[str] = field(default_factory=Counter)  # notice id -> times the receiver got it
    told: dict[str, float] = field(default_factory=dict)  # notice id the notifier's fold gives -> when read
    remind_every_s: float = 6 * 3600.0
    events: int = 0

    def __post_init__(self) -> None:
        from reverie_canary.services.notifier.core import FoldPolicy, FoldState
        from reverie_canary.shared.contract import inputs

        self._notifier_prefixes = inputs.prefixes("notifier")
        self._notifier_state = FoldState()
        self._notifier_policy = FoldPolicy(remind_every_s=self.remind_every_s)

    def feed(self, item: eventlog.LoggedEvent) -> None:
        self.events += 1
        self.last_seq = max(self.last_seq, item.seq)
        event = item.event
        if item.subject.startswith(self._notifier_prefixes):
            from reverie_canary.services.notifier.core import fold

            self._notifier_state, notices = fold(self._notifier_state, event, self._notifier_policy)
            for n in notices:
                self.told.setdefault(n.notice_id, time.monotonic())
        if isinstance(event, EndpointsDiscovered):
            self.planned[event.cycle].update(p.task_id for p in event.planned)
            self.controls.update(p.task_id for p in event.planned if p.control)
        elif isinstance(event, ProbeResult):
            self.results[event.task_id] += 1
        elif isinstance(event, CycleVerdict):
            self.verdicts[event.cycle] += 1
            self.verdict_missing[event.cycle] = {t for v in event.verdicts for t in v.missing}
            self.verdict_cut[event.cycle] = sum(v.missing_cut for v in event.verdicts)
        elif isinstance(event, Decision):
            self.decisions[event.decision_id] += 1
            self.decision_keys[(event.model, event.provider, event.action, event.at.isoformat(),
                                event.until.isoformat() if isinstance(event, TimedDecision) else "")] += 1

    def details(self, settle_s: float) -> list[str]:
        """Where the losses are: cycles with results lost, notices due and never received, received twice
        or never due (a few of each)."""
        out = []
        for c in [c for c in self.planned if c in self.verdicts][-200:]:
            lost = [t for t in self.planned[c] if self.results[t] == 0]
            if lost:
                named = sum(1 for t in lost if t in self.verdict_missing.get(c, ()))
                out.append(f"cycle {c}: {len(lost)} of {len(self.planned[c])} results absent, {named} named "
                           f"missing by its verdict (e.g. {lost[0]})")
        now = time.monotonic()
        missing = [n for n, at in self.told.items() if now - at >= settle_s and self.notices[n] == 0]
        out += [f"notice {n} due and never received" for n in missing[:10]]
        out += [f"notice {n} received {k} times" for n, k in self.notices.items() if k > 1][:10]
        out += [f"notice {n} received, never due by the notifier's own fold of the log"
                for n in self.notices if n not in self.told][:10]
        return out[:30]

    def accounting(self, settle_s: float) -> dict[str, int]:
        """Planned vs folded: results lost, doubled; verdicts, decisions doubled; notices lost, twice.

        Only cycles with a verdict count (a cycle still open has results to come).  The notices
        due are those the notifier's own fold (services/notifier/core.py) gives for the log's
        events, once ``settle_s`` has passed since this process read the event.
        """
        closed = [c for c in self.planned if c in self.verdicts]
        planned = sum(len(self.planned[c]) for c in closed)
        absent = sum(1 for c in closed for t in self.planned[c] if self.results[t] == 0)
        named = sum(min(len(self.verdict_missing.get(c, ()) - self.controls) + self.verdict_cut.get(c, 0)
                        + sum(1 for t in self.planned[c] if t in self.controls and self.results[t] == 0),
                        sum(1 for t in self.planned[c] if self.results[t] == 0)) for c in closed)
        now = time.monotonic()
        due = [n for n, at in self.told.items() if now - at >= settle_s]
        return {
            "cycles_closed": len(closed),
            "results_planned": planned,
            "results_folded": planned - absent,
            # absent results their cycle's verdict names missing (the provider's cycle frozen), and absent
            # positive-control results (the control has no verdict of its own): a fault's real seconds (a
            # NATS restart, a prober's restart) cover most of a compressed cycle, so a task can expire unprobed
            "results_missing": named,
            # absent results no verdict names: lost without a trace
            "results_lost": absent - named,
            "results_doubled": sum(1 for n in self.results.values() if n > 1),
            "verdicts_doubled": sum(1 for n in self.verdicts.values() if n > 1),
            "decisions": len(self.decisions),
            "decisions_doubled": sum(1 for n in self.decisions.values() if n > 1)
            + sum(1 for n in self.decision_keys.values() if n > 1),
            "notices_told": len(self.told),
            "notices_received": sum(self.notices.values()),
            "notices_unexpected": sum(1 for n in self.notices if n not in self.told),
            "notices_lost": sum(1 for d in due if self.notices[d] == 0),
            "notices_twice": sum(1 for n in self.notices.values() if n > 1),
        }


async def replay_against_live(settings: Settings, js) -> tuple[int, list[str]]:
    """``canary replay``'s comparison: fold the log up to each live position and diff it with Redis.

    The fold starts at the judge's newest snapshot when retention has dropped the log's
    first messages (a fold from the log's start would then lack them), else at the start.

    Returns:
        (events folded, the differences: judge states and the router's layers, one line each).
    """
    from reverie_canary.canary.cli_judge import _lean_for_router, _router_prefixes
    from reverie_canary.services.judge import snapshots
    from reverie_canary.services.judge.core import Policy
    from reverie_canary.services.judge.replay import JUDGE_SUBJECTS, Refold, diff_states
    from reverie_canary.services.judge.store import RedisJudgeStore
    from reverie_canary.services.router.core import RouterCommand, RouterPolicy, diff_layers, refold
    from reverie_canary.services.router.store import RedisRouterStore
    from reverie_canary.shared.runtime import clock

    client = redis_client(settings)
    try:
        store = RedisJudgeStore(client, settings.namespace)
        records = {m: await store.load(m) for m in await store.models()}
        router_record = await RedisRouterStore(client, settings.namespace).load()
    finally:
        await client.aclose()
    policy = Policy.from_settings(settings)
    policy = msgspec.structs.replace(policy, models=tuple(sorted(set(policy.models) | set(records))))
    positions = {m: r.position for m, r in records.items()}
    info = await js.stream_info(streams.LOG)
    snapshot = None
    if info.state.first_seq > 1 and positions:
        snapshot = await snapshots.latest(js, min(positions.values()))
    live = Refold(policy, positions=positions, keep=Decision,
                  states=snapshot.states if snapshot is not None else None)
    router_prefixes = _router_prefixes()
    router_items: list = []

    def on_event(item) -> None:
        if item.subject.startswith(JUDGE_SUBJECTS):
            live.feed(item)
        if item.subject.startswith(router_prefixes):
            router_items.append(_lean_for_router(item))

    await eventlog.scan_log(js, on_event, from_seq=snapshot.position + 1 if snapshot is not None else None)
    problems: list[str] = []
    for model, record in sorted(records.items()):
        replayed = live.states.get(model)
        if replayed is None:
            problems.append(f"{model}: stored state but no events in the log")
            continue
        problems += [f"{model}: {line}" for line in diff_states(replayed, record.state)]
    for model in sorted(set(live.states) - set(records)):
        if live.states[model].providers or live.states[model].open_cycles:
            problems.append(f"{model}: in the log but not in Redis")
    now = clock.now()
    if record_revision := router_record.revision:
        applied = [i.event for i in router_items if i.seq <= router_record.position]
        answers = [i.event for i in router_items
                   if i.seq > router_record.position and i.subject.startswith(router_prefixes[-1])]
        replayed_router = refold([*applied, *answers], RouterPolicy.from_settings(settings), now)
        problems += [f"router: {line}" for line in diff_layers(replayed_router, router_record.state, now)]
    elif any(isinstance(i.event, RouterCommand) or (isinstance(i.event, Decision)
                                                   and i.event.action in ("suspend", "end")) for i in router_items):
        problems.append("router: no state in Redis, but the log holds its inputs")
    del record_revision
    return live.events, problems


# --- figures ----------------------------------------------------------------------------------------------

@dataclass
class Figures:
    """One report's figures."""

    cycle: int
    wall_s: float
    services: dict[str, tuple[float, int, int]]  # name -> (RSS MB, open fds, cycle the process started)
    servers: dict[str, float]  # nats / redis / gateway -> RSS MB
    redis_mb: float
    redis_keys: dict[str, int]
    streams: dict[str, tuple[int, int, int, float]]  # name -> (bytes, messages, max_bytes, max_age_s)
    kv_history: dict[str, int]
    book: dict[str, int]
    accounting: dict[str, int]
    replay_events: int
    replay_problems: list[str]
    details: list[str] = field(default_factory=list)
    slopes: dict[str, float] = field(default_factory=dict)  # service -> RSS MB per 100 cycles of its process

    def lines(self) -> list[str]:
        out = [f"== cycle {self.cycle} ({self.wall_s:.0f} s) =="]
        out.append("  service      RSS MB  fds  since cycle")
        for name, (rss, fds, since) in self.services.items():
            out.append(f"  {name:<11} {rss:7.1f} {fds:4d}  {since}")
        if self.slopes:
            out.append("  RSS growth of each process since its 20th cycle, MB per 100 cycles: "
                       + ", ".join(f"{k} {v:+.2f}" for k, v in self.slopes.items()))
        out.append("  servers: " + ", ".join(f"{k} {v:.1f} MB" for k, v in self.servers.items()))
        out.append(f"  redis: used_memory {self.redis_mb:.2f} MB; keys by prefix: "
                   + ", ".join(f"{k} {v}" for k, v in sorted(self.redis_keys.items())))
        for name, (b, m, mb, age) in self.streams.items():
            out.append(f"  stream {name:<28} {b / 1e6:9.3f} MB {m:8d} msgs (limits {mb / 2**20:.0f} MiB, "
                       f"{age:.0f} s)")
        out.append("  KV history per model: " + ", ".join(f"{k} {v}" for k, v in self.kv_history.items()))
        out.append("  notifier book: " + ", ".join(f"{k} {v}" for k, v in self.book.items()))
        out.append("  accounting: " + ", ".join(f"{k} {v}" for k, v in self.accounting.items()))
        out += [f"    {line}" for line in self.details]
        status = "agrees" if not self.replay_problems else f"DIFFERS in {len(self.replay_problems)} place(s)"
        out.append(f"  replay of {self.replay_events} events vs live state: {status}")
        out += [f"    {p}" for p in self.replay_problems[:10]]
        return out


def _key_prefix(key: str, namespace: str) -> str:
    """A Redis key's family: the namespace's first two names (``judge:model``, ``notifier:entry``)."""
    parts = key.removeprefix(namespace + ":").split(":")
    return ":".join(parts[:2]) if len(parts) > 1 else parts[0]


# --- the run ----------------------------------------------------------------------------------------------

@dataclass
class SoakResult:
    """A run's plan, its reports and the goals it met or missed."""

    seed: int
    cycles: int
    faults: list[Fault]
    applied: list[str] = field(default_factory=list)
    reports: list[Figures] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class Soak:
    """A soak run (:meth:`run`); ``say`` prints a line."""

    def __init__(self, *, seed: int, cycles: int, cycle_s: float, workdir: Path, report_every: int = 100,
                 rate: float = 0.3, warmup: int = 200, say: Callable[[str], None] = print,
                 retention_days: float = 35.0, kinds: tuple[str, ...] | None = None,
                 faults: list[Fault] | None = None, settle_cycles: int = 3,
                 kills_until: int | None = None) -> None:
        self.seed, self.cycles, self.cycle_s, self.workdir = seed, cycles, cycle_s, workdir
        self.report_every, self.warmup, self.say, self.retention_days = report_every, warmup, say, retention_days
        self.settle_cycles = settle_cycles
        self.faults = faults if faults is not None else plan_faults(seed, cycles, rate=rate, kinds=kinds,
                                                                              kills_until=kills_until)
        self.result = SoakResult(seed=seed, cycles=cycles, faults=self.faults)
        self.books = Books(remind_every_s=6 * 3600.0 * cycle_s / REAL_CYCLE_S)
        self.procs: dict[str, Process] = {}
        self.clock_offset_s = 0.0
        self.nats: RunningServer | None = None
        self.redis: RunningServer | None = None
        self.gateway: subprocess.Popen | None = None
        self.gateway_port = free_port()
        self.restore: dict[int, list[Callable[[], Any]]] = defaultdict(list)
        self.background: set[asyncio.Task] = set()
        self.rss_samples: dict[str, list[tuple[int, int, int, float]]] = defaultdict(list)
        self.live: Any = None

    # servers -------------------------------------------------------------------------------------

    def _start_gateway(self) -> None:
        with open(self.workdir / "gateway.log", "ab") as out:
            self.gateway = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario",
                                             str(FLEET), "--port", str(self.gateway_port)], stdout=out,
                                            stderr=subprocess.STDOUT)

    async def _gateway_ready(self, http: httpx.AsyncClient) -> None:
        for _ in range(300):
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{self.gateway_url}/models")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
        raise RuntimeError("the simulated gateway did not answer within 30 s")

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}/api/v1"

    # the run -------------------------------------------------------------------------------------

    async def run(self) -> SoakResult:
        """Start everything, run ``cycles`` cycles with the faults, report, stop everything."""
        from reverie_canary.canary.demo import notice_receiver
        from reverie_canary.simulator.scenario import load_scenario
        from reverie_canary.simulator.server import serve

        self.say(f"soak: seed {self.seed}, {self.cycles} cycles of {self.cycle_s:g} s "
                 f"(x{REAL_CYCLE_S / self.cycle_s:.0f}: {self.cycles * 0.5 / 24:.1f} days of 30-minute cycles), "
                 f"{len(self.faults)} faults; rerun with --seed {self.seed} to replay them")
        for f in self.faults:
            self.say(f"  fault {f}")
        [model] = load_scenario(str(FLEET)).models
        self.model = model.id
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()

        async def on_notice(notice: Notice) -> None:
            self.books.notices[notice.notice_id] += 1

        self.nats = start_nats(self.workdir / "nats")
        self.redis = start_redis(self.workdir / "redis")
        self._start_gateway()
        exclusions = self.workdir / "exclusions.toml"
        exclusions.write_text("# the soak's reviewed exclusions (rewritten by its exclusion faults)\n")
        started = time.monotonic()
        try:
            async with httpx.AsyncClient(timeout=5.0) as http, \
                    serve(notice_receiver(secret, on_notice)) as receiver:
                self.http = http
                await self._gateway_ready(http)
                settings = soak_settings(
                    nats_url=self.nats.url, redis_url=self.redis.url, gateway_url=self.gateway_url,
                    namespace="soak", cycle_s=self.cycle_s, exclusions_file=str(exclusions),
                    webhook_url=receiver.removesuffix("/api/v1") + "/notices", webhook_secret=secret,
                    model=model.id, retention_days=self.retention_days)
                self.settings = settings
                await ensure_streams(settings)
                env = {**{k: v for k, v in os.environ.items() if not k.startswith(("CANARY_", "NATS_", "REDIS_"))},
                       **settings.environment(with_secrets=True)}
                for name in SERVICES:
                    svc = name.split("-")[0]
                    argv = ["dashboard", "--port", str(free_port())] if svc == "dashboard" else ["run", svc]
                    extra = {"CANARY_METRICS_PORT": str(free_port())}
                    if svc == "prober":
                        extra["CANARY_PROBER_ID"] = f"soak-{name}"
                    self.procs[name] = Process(name, argv, {**env, **extra}, self.workdir / f"{name}.log")
                self.nc = await nats_connect(settings, max_reconnect_attempts=-1)
                self.js = self.nc.jetstream()
                # the notifier first: its durable starts with new messages, so it must exist before the
                # router's first snapshot (the first version of a model's ignore list is told)
                self.procs["notifier"].start(0)
                await self._durable_exists(streams.notifier_consumer(settings))
                for name in SERVICES:
                    if name != "notifier":
                        self.procs[name].start(0)
                await self._cycles(started)
        finally:
            for task in self.background:
                task.cancel()
            for p in self.procs.values():
                p.stop()
            _stop(self.gateway)
            with contextlib.suppress(Exception):
                await self.nc.close()
            if self.redis:
                self.redis.stop()
            if self.nats:
                self.nats.stop()
        return self.result

    async def _durable_exists(self, spec: streams.ConsumerSpec) -> None:
        for _ in range(600):
            with contextlib.suppress(Exception):
                await self.js.consumer_info(spec.stream, spec.durable)
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"the durable {spec.durable} did not appear within 60 s")

    async def _cycles(self, started: float) -> None:
        first = math.floor(time.time() / self.cycle_s) + 1
        by_cycle: dict[int, list[Fault]] = defaultdict(list)
        for f in sorted(self.faults, key=lambda f: (f.cycle, f.share)):
            by_cycle[f.cycle].append(f)
        for n in range(1, self.cycles + 1):
            begin = (first + n - 1) * self.cycle_s
            for action in self.restore.pop(n, []):
                await self._safely(f"cycle {n}: restore", action)
            for fault in by_cycle.get(n, []):
                await asyncio.sleep(max(0.0, begin + fault.share * self.cycle_s - time.time()))
                self.result.applied.append(str(fault))
                await self._safely(str(fault), lambda f=fault, c=n: self._apply(f, c))
            await asyncio.sleep(max(0.0, begin + self.cycle_s - time.time()))
            await self._live(n)
            await self._read_log()
            self._sample(n)
            if n % self.report_every == 0 and n < self.cycles:
                await self._report(n, started)
        for _ in range(self.settle_cycles):  # settle: the last cycles close, their notices are sent
            await asyncio.sleep(self.cycle_s)
        await self._read_log()
        await self._report(self.cycles, started, final=True)

    async def _live(self, cycle: int) -> None:
        """Count a cycle of simulated chat traffic and publish it as the chat backend's client does.

        The client's own recorder (:class:`reverie_canary.client.served.LiveRecorder`) publishes
        ``LiveCounts`` on ``canary.live.<model>``, counts only; a publication that fails (NATS
        restarting) is dropped and counted in the next one, as in a backend.
        """
        from reverie_canary.client.served import LiveRecorder

        if self.live is None:
            self.live = LiveRecorder(self.model, source="soak")
        rng = random.Random(f"{self.seed}-live-{cycle}")
        for tag in (*HEALTHY, *LIVE_REASONS):
            for _ in range(LIVE_REPLIES):
                reason = LIVE_REASONS.get(tag, "") if rng.random() < 1 / 3 else ""
                self.live.record(tag, reason)
        if cycle % max(1, math.ceil(10.0 / self.cycle_s)) == 0:  # the client publishes every 10 s at most
            with contextlib.suppress(Exception):
                await self.live.publish(self.nc, timeout_s=2.0)

    def _sample(self, cycle: int) -> None:
        """Every service's RSS this cycle, under its current process (a restart starts a new series)."""
        for name, p in self.procs.items():
            pid = p.proc.pid if p.proc else 0
            if pid:
                self.rss_samples[name].append((cycle, pid, p.started_cycle, proc_rss_mb(pid)))

    def slopes(self, settle: int = 20, least: int = 50) -> dict[str, float]:
        """Per service, the RSS slope (MB per 100 cycles, least squares) of its current process.

        Only cycles from the ``settle``-th of the process's life count, and only a process that
        has run ``least`` cycles past that is measured: a restart starts a new series.
        """
        out: dict[str, float] = {}
        for name, samples in self.rss_samples.items():
            if not samples:
                continue
            pid, started = samples[-1][1], samples[-1][2]
            xs = [(c, r) for c, p, _, r in samples if p == pid and c >= started + settle]
            if len(xs) < 2 or xs[-1][0] - xs[0][0] < least:
                continue
            mx = sum(c for c, _ in xs) / len(xs)
            my = sum(r for _, r in xs) / len(xs)
            var = sum((c - mx) ** 2 for c, _ in xs)
            out[name] = round(100 * sum((c - mx) * (r - my) for c, r in xs) / var, 2) if var else 0.0
        return out

    async def _safely(self, what: str, action: Callable[[], Any]) -> None:
        try:
            result = action()
            if asyncio.iscoroutine(result):
                await result
        except Exception as exc:  # a fault that could not be applied is reported, never ends the run
            self.say(f"  {what}: not applied: {exc!r}")

    async def _read_log(self) -> None:
        for _ in range(3):
            try:
                self.books.last_seq = await eventlog.scan_log(self.js, self.books.feed,
                                                              from_seq=self.books.last_seq + 1, idle_s=2.0)
                return
            except Exception as exc:  # NATS restarting: read again next cycle
                self.say(f"  log read failed ({exc!r}); again")
                await asyncio.sleep(1.0)

    # faults --------------------------------------------------------------------------------------

    def _later(self, cycle: int, action: Callable[[], Any]) -> None:
        self.restore[cycle].append(action)

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def _apply(self, f: Fault, cycle: int) -> None:
        end = cycle + f.cycles
        if f.kind == "kill":
            p = self.procs[f.target]
            p.kill()
            await asyncio.sleep(0.3)
            p.start(cycle, self._clock_env(p.name))
        elif f.kind == "nats_restart":
            assert self.nats is not None
            self.nats.stop()
            self.nats = start_nats(self.workdir / "nats", port=self.nats.port)
        elif f.kind == "redis_restart":
            assert self.redis is not None
            _stop(self.redis.process, signal.SIGKILL)
            self.redis = start_redis(self.workdir / "redis", port=self.redis.port)
        elif f.kind == "redis_empty":
            client = redis_client(self.settings)
            try:
                await client.flushall()
            finally:
                await client.aclose()
        elif f.kind == "gateway_down":
            _stop(self.gateway, signal.SIGKILL)
            self._later(end, self._gateway_up)
        elif f.kind == "blind":
            await self.http.put(self._sim("outage"), json={"status": int(f.target), "scope": "all"})
            self._later(end, lambda: self.http.put(self._sim("outage"), json={"status": None, "scope": "all"}))
        elif f.kind == "hostile":
            tag, index = f.target.split("=")
            await self.http.put(self._sim("faults"), params={"provider": tag},
                                json={"faults": [HOSTILE[int(index)]]})
            self._later(end, lambda: self.http.put(self._sim("faults"), params={"provider": tag},
                                                   json={"faults": []}))
        elif f.kind == "junk":
            await self._junk(f.target)
        elif f.kind == "override":
            self._spawn(self._canary("override", "add", f.target, "--model", self.model, "--reason", "soak",
                                     "--for", f"{max(1, int(self.cycle_s * 3))}s"))
            self._later(end, lambda: self._spawn(self._canary("override", "remove", f.target, "--model",
                                                              self.model, "--reason", "soak over")))
        elif f.kind == "lift":
            self._spawn(self._canary("lift", f.target, "--model", self.model, "--reason", "soak"))
        elif f.kind == "mode":
            self._spawn(self._canary("mode", "observe", "--model", self.model, "--reason", "soak"))
            self._later(end, lambda: self._spawn(self._canary("mode", "enforce", "--model", self.model,
                                                              "--reason", "soak over")))
        elif f.kind == "exclusions":
            path = Path(self.settings.exclusions_file)
            text = path.read_text()
            if "[[exclusion]]" in text:
                path.write_text("# the soak's reviewed exclusions (emptied)\n")
            else:
                path.write_text(text + '\n[[exclusion]]\nprovider = "bytecove/bf16"\nmodel = "*"\n'
                                'reason = "soak: byte-level tokens"\nreference = "soak"\ndate = 2026-12-04\n')
            self._spawn(self._canary("exclusions", "reload", "--reason", "soak"))
        elif f.kind == "clock_jump":
            self.clock_offset_s += self.cycle_s
            p = self.procs["discovery"]
            p.kill()
            p.start(cycle, self._clock_env("discovery"))
        else:
            raise ValueError(f"unknown fault {f.kind}")

    def _clock_env(self, name: str) -> dict[str, str]:
        return {"CANARY_SOAK_CLOCK_OFFSET_S": str(self.clock_offset_s)} if name == "discovery" else {}

    def _sim(self, hook: str) -> str:
        return f"http://127.0.0.1:{self.gateway_port}/_sim/{hook}"

    async def _gateway_up(self) -> None:
        self._start_gateway()
        await self._gateway_ready(self.http)

    async def _canary(self, *args: str) -> None:
        env = {**self.procs["judge"].env, "CANARY_ACTOR": "soak"}
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "reverie_canary.canary", *args,
                                                    "--timeout", str(max(10.0, self.cycle_s * 3)), env=env,
                                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = await proc.communicate()
        last = out.decode(errors="replace").strip().splitlines()[-1:] or [""]
        self.result.applied.append(f"  canary {' '.join(args)}: exit {proc.returncode}: {last[0][:160]}")

    async def _junk(self, family: str) -> None:
        """Malformed and oversized messages on one subject family a service reads."""
        subject = f"{subjects.PREFIX}.{family}.soak-junk" if family != "notices" else subjects.NOTICES_RESEND
        rng = random.Random(f"{self.seed}-{family}-{self.books.last_seq}")
        bodies = [b"\xff\xfe not json", b'{"type": "probe_result", "schema": 1}', b"[]",
                  b'{"type": "decision", "model": ' + b'"' + b"x" * 300_000 + b'"}',
                  bytes(rng.getrandbits(8) for _ in range(512)), b"{" * 10_000]
        for body in bodies:
            with contextlib.suppress(Exception):
                await self.js.publish(subject, body, timeout=2.0)
            with contextlib.suppress(Exception):
                await self.nc.publish(subject, body)

    # reports -------------------------------------------------------------------------------------

    async def _report(self, cycle: int, started: float, final: bool = False) -> None:
        figures = await self._figures(cycle, started)
        self.result.reports.append(figures)
        for line in figures.lines():
            self.say(line)
        if final:
            self._goals()

    async def _figures(self, cycle: int, started: float) -> Figures:
        services = {}
        for name, p in self.procs.items():
            pid = p.proc.pid if p.proc else 0
            services[name] = (proc_rss_mb(pid), proc_fds(pid), p.started_cycle)
        servers = {"nats": proc_rss_mb(self.nats.process.pid) if self.nats else 0.0,
                   "redis": proc_rss_mb(self.redis.process.pid) if self.redis else 0.0,
                   "gateway": proc_rss_mb(self.gateway.pid) if self.gateway else 0.0}
        client = redis_client(self.settings)
        keys: Counter[str] = Counter()
        book: dict[str, int] = {}
        try:
            redis_mb = (await client.info("memory"))["used_memory"] / 1e6
            async for key in client.scan_iter(count=1000):
                keys[_key_prefix(key.decode() if isinstance(key, bytes) else key, self.settings.namespace)] += 1
            prefix = f"{self.settings.namespace}:notifier:"
            book["keys"] = sum(v for k, v in keys.items() if k.startswith("notifier"))
            book["state_bytes"] = int(await client.hstrlen(prefix + "state", "doc") or 0)
            book["recent"] = int(await client.llen(prefix + "recent") or 0)
            book["pending"] = sum([int(await client.zcard(k) or 0)
                                   async for k in client.scan_iter(match=prefix + "due:*")])
            book["dead"] = sum([int(await client.zcard(k) or 0)
                                async for k in client.scan_iter(match=prefix + "dead:*")])
        finally:
            await client.aclose()
        stream_figures = {}
        for name in (streams.LOG, streams.TASKS, streams.DEADLETTER, streams.NOTICES,
                     f"KV_{streams.ROUTING_BUCKET}", f"OBJ_{streams.JUDGE_SNAPSHOTS}"):
            with contextlib.suppress(Exception):
                info = await self.js.stream_info(name)
                stream_figures[name] = (info.state.bytes, info.state.messages, info.config.max_bytes or 0,
                                        info.config.max_age or 0.0)
        kv_history: dict[str, int] = {}
        with contextlib.suppress(Exception):
            kv = await self.js.key_value(streams.ROUTING_BUCKET)
            for key in await kv.keys():
                kv_history[key] = len(await kv.history(key))
        try:
            replay_events, problems = await replay_against_live(self.settings, self.js)
        except Exception as exc:  # reported as a difference: the comparison could not be made
            replay_events, problems = 0, [f"replay failed: {exc!r}"]
        return Figures(cycle=cycle, wall_s=time.monotonic() - started, services=services, servers=servers,
                       redis_mb=redis_mb, redis_keys=dict(keys), streams=stream_figures, kv_history=kv_history,
                       book=book, accounting=self.books.accounting(settle_s=self.cycle_s * 3),
                       replay_events=replay_events, replay_problems=problems,
                       details=self.books.details(settle_s=self.cycle_s * 3), slopes=self.slopes())

    def _goals(self) -> None:
        """The issue's goals, checked on the reports; each miss is a line of ``result.failures``."""
        last = self.result.reports[-1]
        acc = last.accounting
        fails = self.result.failures
        for key in ("results_lost", "results_doubled", "verdicts_doubled", "decisions_doubled", "notices_lost",
                    "notices_twice"):
            if acc.get(key):
                fails.append(f"{key} = {acc[key]}")
        if last.replay_problems:
            fails.append(f"replay differs from the live state in {len(last.replay_problems)} place(s)")
        for name, (b, _m, max_bytes, _) in last.streams.items():
            if max_bytes and max_bytes > 0 and b > max_bytes:
                fails.append(f"stream {name} holds {b} bytes over its limit {max_bytes}")
        for key, n in last.kv_history.items():
            if n > streams.ROUTING_HISTORY:
                fails.append(f"KV history of {key}: {n} > {streams.ROUTING_HISTORY}")
        base = next((r for r in self.result.reports if r.cycle >= self.warmup), None)
        if base is not None and base is not last:
            for name, (rss, _, since) in last.services.items():
                rss0, _, since0 = base.services[name]
                if since == since0 and rss0 and rss > rss0 * 1.05:
                    fails.append(f"{name} RSS grew {rss0:.1f} -> {rss:.1f} MB from cycle {base.cycle} "
                                 f"(+{(rss / rss0 - 1) * 100:.1f} %)")
            if base.redis_mb and last.redis_mb > base.redis_mb * 1.05:
                fails.append(f"Redis memory grew {base.redis_mb:.2f} -> {last.redis_mb:.2f} MB from cycle "
                             f"{base.cycle}")
        # a process killed by a fault restarts its series: its slope, carried over the run's length past
        # the warm-up, stands for the growth of a process that would have run all along
        span = self.cycles - self.warmup
        for name, slope in (last.slopes if span > 0 else {}).items():
            rss = last.services[name][0]
            if rss and slope * span / 100 > 0.05 * rss:
                fails.append(f"{name} RSS grows {slope:+.2f} MB per 100 cycles: {slope * span / 100:+.1f} MB over "
                             f"the {span} cycles after warm-up, over 5 % of {rss:.1f} MB")
        self.say("goals: " + ("all met" if not fails else "MISSED: " + "; ".join(fails)))
        self.say(f"seed {self.seed}: rerun with the same seed to replay the same faults")
