"""The judge's state as Prometheus samples: what each provider's state is now, per model.

Pure: from the judge's :class:`~reverie_canary.services.judge.core.ModelState` per
model (the one the judge saved last) to ``(family key, labels, value)`` samples
of the ``state`` families in :data:`reverie_canary.shared.runtime.metrics.FAMILIES`.
The judge's service computes them at each scrape, so a gauge is never staler
than the state the judge holds, and nothing is computed per event.

Definitions (docs/concepts/judge.md):

* verdict: the provider's verdict in the last cycle that judged it;
* suspended: an enforced suspension is in the state (observe mode's shadow
  suspensions are ``observe_suspended``);
* floor held: the provider failed at least ``failed_cycles_to_suspend`` cycles
  in a row and is not suspended: the capacity floor keeps it in traffic;
* slow_vs_peers: the provider's first-token median over its last cycles is above
  its model's peer bar (median + k x MAD of the providers' medians, the judge's
  ``ttft_peer_bar_ms``): shown, never a suspension by itself;
* blind: the model, from its ``canary_blind`` to its ``canary_sees``; a
  provider, while its latest word is canary-side (docs/concepts/health.md); last cycle closed: the deadline of the last cycle the judge closed;
* only providers the gateway still lists (``present``) are exported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reverie_canary.services.judge.core import ModelState, Policy, mode_of
from reverie_canary.shared.contract.events import JUDGED_KINDS
from reverie_canary.shared.runtime.metrics import Sample

VERDICTS = ("passed", "failed", "frozen", "blind")


def samples(states: Mapping[str, ModelState], policy: Policy, *, cycle_interval_s: float,
            kinds: Iterable[str] = JUDGED_KINDS) -> Iterable[Sample]:
    """Every state sample of every model in ``states``.

    Args:
        states: model id -> its current state.
        policy: the judge's policy (the suspension threshold, default modes).
        cycle_interval_s: the configured cycle interval (exported for the staleness alert).
        kinds: the kinds whose mode is exported (the probe kinds and the fact kinds).
    """
    need = policy.failed_cycles_to_suspend
    for model in sorted(states):
        state = states[model]
        m = {"model": model}
        yield "cycle_interval", m, cycle_interval_s
        if state.last_closed_deadline is not None:
            yield "cycle_closed_at", m, state.last_closed_deadline.timestamp()
        yield "canary_blind", m, 1 if state.blind_since is not None else 0
        if state.last_cycle_no >= 0:
            yield "cycle_number", m, state.last_cycle_no
        if state.ttft_peer_bar_ms is not None:
            yield "model_ttft_peer_bar_ms", m, state.ttft_peer_bar_ms
        for kind in kinds:
            yield "mode_enforce", {**m, "kind": kind}, 1 if mode_of(state, policy, kind) == "enforce" else 0
        calls = {"pending": 0, "right": 0, "wrong": 0}
        for call in state.shadow_calls:
            calls[call.outcome] = calls.get(call.outcome, 0) + 1
        for outcome, count in calls.items():
            yield "observe_calls", {**m, "outcome": outcome}, count
        for name in sorted(state.providers):
            ps = state.providers[name]
            if not ps.present:
                continue
            p = {"model": model, "provider": name}
            if ps.history:
                last = ps.history[-1].verdict
                for verdict in VERDICTS:
                    yield "provider_verdict", {**p, "verdict": verdict}, 1 if verdict == last else 0
            s = ps.suspension
            enforced = s is not None and s.enforced
            yield "provider_suspended", p, 1 if enforced else 0
            yield "provider_observe_suspended", p, 1 if s is not None and not s.enforced else 0
            if enforced:
                yield "provider_suspended_until", p, s.until.timestamp()
            yield "provider_floor_held", p, 1 if ps.failed_streak >= need and s is None else 0
            yield "provider_blind", p, 1 if ps.blind_since is not None else 0
            yield "provider_suspension_held", p, 1 if s is not None and s.due is not None else 0
            yield "provider_streak", {**p, "streak": "failed"}, ps.failed_streak
            yield "provider_streak", {**p, "streak": "passed"}, ps.passed_streak
            yield "provider_streak", {**p, "streak": "frozen"}, ps.frozen_streak
            yield "provider_ladder_step", p, ps.ladder_level
            yield "provider_slow_vs_peers", p, 1 if ps.slow_vs_peers else 0
            if ps.ttft_median_ms is not None:
                yield "provider_ttft_median_ms", p, ps.ttft_median_ms
