"""How long the dashboard's fleet page takes for 2,000 endpoints: 100 models x 20 providers x 48 cycles.

``python benchmarks/dashboard_bench.py [--models 100] [--providers 20] [--cycles 48] [--repeat 3]``

Folds a synthetic log (per cycle: a listing with two planned probes per
provider, their results with a time to first token, the close and the judge's
verdict, one provider failing every fifth cycle) into the dashboard's
:class:`~reverie_canary.services.dashboard.core.LogWindow`, then times ``GET /``
through the real Starlette app (httpx's ASGI transport: the read model's views
for every model, the Jinja2 templates, the response), the page the browser
gets.  The judge's state and the bucket are left out (``None``: the page says
so per model); they are one Redis and one KV read per model, not rendering.
Goal: under 2 s on this machine.  Prints the fold time, the render
time (best of ``--repeat``), the page's size and its cell count.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import datetime, timedelta, timezone

from reverie_canary.services.dashboard import pages
from reverie_canary.services.dashboard.core import LogWindow, model_status
from reverie_canary.services.judge.core import Policy
from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract.events import (
    CycleClosed,
    CycleVerdict,
    Endpoint,
    EndpointsDiscovered,
    PlannedProbe,
    ProbeResult,
    ProviderVerdict,
    ReplyEvidence,
    ResultRef,
)

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
#: The page's goal (s): the fleet page renders 2,000 endpoints in under 2 s on this machine.
GOAL_S = 2.0
CYCLE = timedelta(minutes=30)
KINDS = ("ttft", "structured")


def synthetic_log(models: int, providers: int, cycles: int):
    """Yield the events of the synthetic fleet, in log order."""
    for m in range(models):
        model = f"vendor{m:03d}/model-{m}"
        tags = [f"host{p:02d}/fp8" for p in range(providers)]
        for n in range(cycles):
            start = T0 + n * CYCLE
            cycle = ids.cycle_id(model, start)
            planned = [PlannedProbe(task_id=ids.task_id(model, n, tag, kind, "en"), provider=tag, kind=kind,
                                    language="en") for tag in tags for kind in KINDS]
            yield EndpointsDiscovered(at=start, model=model, cycle=cycle, cycle_no=n, deadline=start + CYCLE / 3,
                                      endpoints=[Endpoint(provider=tag) for tag in tags], planned=planned)
            verdicts = []
            for i, probe in enumerate(planned):
                bad = probe.provider == tags[n % providers] and n % 5 == 0 and probe.kind == "ttft"
                outcome, reason = ("fail", "ttft_exceeded") if bad else ("pass", "")
                yield ProbeResult(at=start + timedelta(seconds=10 + i), task_id=probe.task_id, model=model,
                                  provider=probe.provider, kind=probe.kind, language="en", cycle=cycle,
                                  outcome=outcome, reason=reason,
                                  reply=ReplyEvidence(ttft_ms=300.0 + (i * 37 + n * 11) % 900,
                                                      first_bytes="Olá! Tudo bem?"))
            for tag in tags:
                bad = tag == tags[n % providers] and n % 5 == 0
                refs = [ResultRef(task_id=ids.task_id(model, n, tag, kind, "en"), cycle=cycle, kind=kind,
                                  outcome="fail" if bad and kind == "ttft" else "pass",
                                  reason="ttft_exceeded" if bad and kind == "ttft" else "") for kind in KINDS]
                verdicts.append(ProviderVerdict(provider=tag, verdict="failed" if bad else "passed",
                                                reasons=["ttft:ttft_exceeded"] if bad else [], results=refs))
            yield CycleClosed(at=start + CYCLE / 3, model=model, cycle=cycle, cycle_no=n)
            yield CycleVerdict(at=start + CYCLE / 3, model=model, cycle=cycle, cycle_no=n, verdicts=verdicts)


class BenchDashboard:
    """What the app asks of a dashboard, over a folded window (no NATS, Redis or bucket)."""

    def __init__(self, window: LogWindow, models: list[str], cycles: int) -> None:
        self.window = window
        self.cycles = cycles
        self.version = 0
        self.problem = None
        self.streams = 0
        self.closing = False
        self.settings = type("S", (), {"models": models, "controls": {}})()

    async def fleet(self, models=None, cycles=None):
        now = T0 + self.cycles * CYCLE
        policy = Policy(mode="enforce", models=tuple(self.settings.models))
        out = []
        for model in models or self.settings.models:
            status = model_status(model, now=now, policy=policy, kinds=list(KINDS), state=None, snapshot=None,
                                  window=self.window.models.get(model), cycle_interval_s=1800.0)
            out.append(pages.model_matrix(status, self.window.models.get(model), cycles or self.cycles))
        return out


async def render(app) -> tuple[float, int, str]:
    import httpx

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
        started = time.perf_counter()
        response = await client.get("/")
        elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed, len(response.content), response.text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--providers", type=int, default=20)
    parser.add_argument("--cycles", type=int, default=48)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from reverie_canary.services.dashboard.web import create_app

    window = LogWindow(cycle_memory=args.cycles + 2, decision_memory=64)
    started = time.perf_counter()
    events = 0
    for seq, event in enumerate(synthetic_log(args.models, args.providers, args.cycles), 1):
        window.add(event, seq)
        events += 1
    fold_s = time.perf_counter() - started
    models = sorted(window.models)
    app = create_app(BenchDashboard(window, models, args.cycles))  # type: ignore[arg-type]
    times, cpu = [], []
    for _ in range(args.repeat):
        started_cpu = time.process_time()
        elapsed, size, text = asyncio.run(render(app))
        times.append(elapsed)
        cpu.append(time.process_time() - started_cpu)
    cells = text.count('<td class="cell ')
    endpoints = args.models * args.providers
    _best, first = min(times), times[0]
    print(f"fleet page: {endpoints} endpoints ({args.models} models x {args.providers} providers) x "
          f"{args.cycles} cycles = {cells} cells, {size / 1e6:.1f} MB of HTML")
    print(f"  fold of the log window: {events} events in {fold_s:.2f} s ({events / fold_s:,.0f} events/s; "
          "done as they arrive, not per page)")
    print(f"  GET / (views + templates + response), wall: first {first:.2f} s (templates compiled, every cell "
          f"built: the dashboard does this once at start), then {', '.join(f'{t:.2f}' for t in times[1:]) or '-'} s (closed cycles' cells memoised); "
          f"CPU {', '.join(f'{t:.2f}' for t in cpu)} s")
    warm = times[1:] or times
    median = sorted(warm)[len(warm) // 2]
    ok = median < GOAL_S
    print(f"  {'PASS' if ok else 'FAIL'}: a page after the start's warm-up takes {median:.2f} s (median; goal "
          f"< {GOAL_S:g} s); the cold first one {first:.2f} s ({first / GOAL_S:.2f} of the goal)")
    assert cells == endpoints * args.cycles, (cells, endpoints * args.cycles)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
