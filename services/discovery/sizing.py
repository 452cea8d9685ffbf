"""How many probes a cycle runs at once: derived from the plan, the measured probe times and the window.

Pure functions: discovery's shell passes
the cycle's plan (how many probes of each kind), the probe times it measured
(:class:`ProbeTimes`, folded from the probers' results) and the settings, and
publishes the :class:`reverie_canary.shared.contract.events.CycleSized` this returns
before the cycle's tasks; each task carries ``concurrency``, the probes each
prober runs at once that cycle.

A cycle is latency-bound: with ``n`` probes in flight its wall time is about

    work_s / n + tail_s

where ``work_s`` is the sum of the planned probes' expected times (per kind: the
measured mean time a prober held one task, the language probe's confirmations
included) and ``tail_s`` the longest kind's mean (the last probes to start end
about one probe after the queue empties).  Discovery takes the least ``n`` that
ends the cycle within :data:`HEADROOM` of ``target_s = probe_window_s x
probe_fill_share`` (0.25: 150 s of the default 600 s window, room for
retries, slow providers and a lost prober), split evenly over the probers
seen in the last cycle's results and capped per prober by
``prober_concurrency`` (the ceiling).  When even the ceiling cannot end it
within the window, the cycle *does not fit*: the event says so before any
probe runs, and operators are told.

Without a measurement of any kind yet (a new deployment) every probe counts
:data:`PRIOR_PROBE_S` and every prober runs at its ceiling, as before sizing
existed; such a cycle is not judged (``fits`` stays true: the prior and the
prober count are guesses).  Once some kinds are measured (``basis``
``partial``) the others count the prior, and the cycle is sized and judged.

A result counts only when its probe ran: not one the prober answered
``task_deadline`` without a request (its cycle was over), nor a ``blind`` one
(the canary's own key or gateway, not a provider's time).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

import msgspec

from reverie_canary.shared.contract.events import CycleSized, SizingBasis

#: Seconds a probe of a kind is assumed to take before one was measured: a streamed reply of a few
#: hundred tokens after a time to first token of 0.3-2 s (realistic gateway), rounded up.
PRIOR_PROBE_S = 3.0
#: Weight of the newest cycle in the running mean of a kind's probe time (the rest: the cycles before).
NEWEST_WEIGHT = 0.5
#: Results below this count in a cycle leave a kind's running mean as it was (too few to say).
MIN_SAMPLES = 5
#: A cycle is sized to end within this share of its target: one cycle's work differs from the last
#: one's measure by a few percent (other languages of the rotation, other replies), and a prober's
#: slot loses a few percent between two tasks (publish the result, ack, fetch the next).  Measured
#: with benchmarks/fleet_bench.py at 2,000 endpoints: the work 2.4 % above the last cycle's
#: measure and the cycle 1.04 x its latency-bound ideal, 154.9 s for a 150 s target sized without it.
HEADROOM = 0.9


class KindTime(msgspec.Struct, kw_only=True):
    """The running mean of one kind's probe time: ``mean_s`` seconds, from ``samples`` results in all."""

    mean_s: float
    samples: int = 0


class ProbeTimes(msgspec.Struct, kw_only=True):
    """What discovery measured of the probers: per kind the mean seconds a probe holds a prober, and how many probers.

    Attributes:
        kinds: kind -> :class:`KindTime`.
        probers: distinct probers whose results came in during the last cycle
            measured (0: none seen yet).
        at: when it was last folded (UTC), ``None`` before.
    """

    kinds: dict[str, KindTime] = {}
    probers: int = 0
    at: datetime | None = None


class Tally:
    """Results of the current cycle, counted as they come in (discovery's subscription to the results).

    A probe's time is ``at - started_at`` of its ``ProbeResult``: how long the
    prober held its task, the language probe's two confirmations included.
    """

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.total_s: dict[str, float] = {}
        self.probers: set[str] = set()

    def add(self, kind: str, seconds: float, prober: str, *, outcome: str = "", reason: str = "") -> None:
        """Count one result of ``kind`` that held its prober ``seconds``.

        Skipped: a negative or infinite time (clock skew), a probe that made no
        request (``task_deadline``) and a ``blind`` one (the canary's key or gateway).
        """
        if seconds < 0 or not math.isfinite(seconds) or reason == "task_deadline" or outcome == "blind":
            return
        self.count[kind] = self.count.get(kind, 0) + 1
        self.total_s[kind] = self.total_s.get(kind, 0.0) + seconds
        if prober:
            self.probers.add(prober)

    def __len__(self) -> int:
        return sum(self.count.values())

    def leftover(self) -> Tally:
        """The kinds :func:`fold` left out (fewer than :data:`MIN_SAMPLES` results), kept for the next cycle."""
        out = Tally()
        for kind, n in self.count.items():
            if n < MIN_SAMPLES:
                out.count[kind] = n
                out.total_s[kind] = self.total_s[kind]
        return out


def fold(times: ProbeTimes, tally: Tally, at: datetime) -> ProbeTimes:
    """``times`` with the cycle in ``tally`` folded in (``tally`` itself is left as it is).

    Each kind with at least :data:`MIN_SAMPLES` results moves its running mean
    :data:`NEWEST_WEIGHT` of the way to this cycle's mean (the first
    measurement replaces the prior outright); the prober count becomes this
    cycle's when any result named its prober.
    """
    kinds = {k: KindTime(mean_s=v.mean_s, samples=v.samples) for k, v in times.kinds.items()}
    for kind, n in tally.count.items():
        if n < MIN_SAMPLES:
            continue
        mean = tally.total_s[kind] / n
        old = kinds.get(kind)
        if old is None or old.samples == 0:
            kinds[kind] = KindTime(mean_s=mean, samples=n)
        else:
            kinds[kind] = KindTime(mean_s=old.mean_s + NEWEST_WEIGHT * (mean - old.mean_s), samples=old.samples + n)
    return ProbeTimes(kinds=kinds, probers=len(tally.probers) or times.probers, at=at)


def size(*, cycle_no: int, start: datetime, deadline: datetime, models: int, counts: Mapping[str, int],
         times: ProbeTimes, window_s: float, fill_share: float, ceiling: int) -> CycleSized:
    """Size one cycle: the probes in flight that end ``counts`` within ``window_s x fill_share``.

    Args:
        cycle_no, start, deadline: the cycle (``start`` is the event's ``at``).
        models: models planned this cycle.
        counts: planned probes by kind (every model together).
        times: the measured probe times and prober count.
        window_s: the probe window (s); ``fill_share`` the share of it the probes should take.
        ceiling: the most probes one prober runs at once (``prober_concurrency``).

    Returns:
        The :class:`CycleSized` fact: ``per_prober`` is what every task of the
        cycle carries as ``concurrency``; ``fits`` is false when, on measured
        probe times, even every prober at the ceiling is expected to end after
        ``window_s``.
    """
    kinds = {k: n for k, n in counts.items() if n > 0}
    probe_s = {k: (times.kinds[k].mean_s if k in times.kinds and times.kinds[k].samples else PRIOR_PROBE_S)
               for k in kinds}
    known = [k for k in kinds if k in times.kinds and times.kinds[k].samples]
    basis: SizingBasis = "measured" if kinds and len(known) == len(kinds) else ("partial" if known else "prior")
    measured = basis != "prior"
    probes = sum(kinds.values())
    work_s = sum(kinds[k] * probe_s[k] for k in kinds)
    tail_s = max(probe_s.values(), default=0.0)
    target_s = window_s * fill_share
    probers = max(1, times.probers)
    capacity = probers * ceiling
    if not probes:
        needed = 0
    elif target_s * HEADROOM > tail_s:
        needed = max(1, math.ceil(work_s / (target_s * HEADROOM - tail_s)))
    else:  # not even one probe fits the target: as many as the ceiling allows
        needed = capacity
    if not probes:
        per_prober = 0
    elif measured:
        per_prober = min(ceiling, max(1, math.ceil(needed / probers)))
    else:
        per_prober = ceiling  # nothing measured yet: every prober at its ceiling, as before sizing
    in_flight = per_prober * probers
    expected_wall_s = (work_s / in_flight + tail_s) if in_flight and probes else 0.0
    return CycleSized(
        at=start, cycle_no=cycle_no, deadline=deadline, models=models, probes=probes,
        probe_s={k: round(v, 3) for k, v in sorted(probe_s.items())}, basis=basis,
        work_s=round(work_s, 1), tail_s=round(tail_s, 3), window_s=window_s, target_s=round(target_s, 1),
        probers=probers, ceiling=ceiling, needed=needed, per_prober=per_prober, in_flight=in_flight,
        expected_wall_s=round(expected_wall_s, 1), fits=expected_wall_s <= window_s or not measured,
    )


class HasKind(Protocol):
    """Anything with a probe ``kind`` (a ProbeTask, a planned probe)."""

    @property
    def kind(self) -> str: ...


def counts_of(tasks: Iterable[HasKind]) -> dict[str, int]:
    """Planned probes by kind, from ProbeTasks (or anything with a ``kind``)."""
    out: dict[str, int] = {}
    for t in tasks:
        out[t.kind] = out.get(t.kind, 0) + 1
    return out
