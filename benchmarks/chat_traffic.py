#!/usr/bin/env python
"""Chat traffic through the simulated gateway with and without the reply guard, side by side in one run.

Usage::

    python benchmarks/chat_traffic.py [--rpm 600] [--onset-s 8] [--run-s 50] [--defect first_bytes|end|both]
                                      [--provider deepinfra/fp8] [--stream-share 0.5]

The users, the guard's retry and what counts as delivered are ``canary demo``'s
(:mod:`reverie_canary.canary.traffic`); here they run in two arms.

What runs: the demo's pipeline (embedded NATS and Redis, the simulated gateway with the default
fleet, all five services, the positive controls kept out of live traffic by
``config/demo-exclusions.toml``) and simulated users that send unpinned chat requests at
``--rpm`` requests per minute, each with the canary's ignore list in ``provider.ignore``; the
gateway routes them by 1/price², as OpenRouter documents.  Every other request goes through a
:class:`~reverie_canary.client.ReplyGuard` (its verdict, one retry with the serving provider
ignored, the live counts its client publishes every 10 s); the others are delivered as they
come (judged afterwards by the same checks, only to count them).  ``--onset-s`` after the
traffic starts, ``--provider`` develops the defect (rate 1): ``first_bytes`` is a stray
``,`` before every reply (seen at the first chunk), ``end`` raw control tokens appended to
every reply (seen only at its end).  A streamed reply already shown to the user counts as
delivered: a defect at the end of a streamed reply reaches the user with or without the
guard (the guard's counts still bring the confirmation); unstreamed replies are judged
before they are shown.

Time: the chat traffic, the live counts and the confirmation probe run at wall speed (their
seconds are real); the canary's cycles are the demo's, compressed (one 30-minute cycle in a
few seconds), so time to suspension is given in cycles and in the minutes those cycles last
uncompressed.

The guard retries at most ``--budget-ratio`` of the requests (sustained; a burst of 10): a
provider that carries more of the traffic than that, broken from one moment to the next, gets
its surplus failures delivered (``failing replies not retried: budget``) until the canary
suspends it -- the bound that keeps a model-wide failure from doubling the traffic.

Printed per defect, guard beside no guard: broken replies delivered, extra requests and
completion tokens spent on retries, latency to the delivered reply (median, p99), time from
onset to the ``live_confirmed`` notice, time to suspension, the guard's CPU per reply (median,
p99), and the longest time the request path spent in the client's synchronous calls (it never
waits on the bus).  Goals: broken delivered with the guard <= 1 % of without it (where the
guard can see the defect before the user does); the confirmed notice within 5 minutes of onset.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from reverie_canary.canary.demo import REAL_CYCLE_S, pipeline  # noqa: E402
from reverie_canary.canary.traffic import TURNS, Arm, one_request, pct  # noqa: E402
from reverie_canary.client import IgnoreListClient, ReplyGuard  # noqa: E402
from reverie_canary.client.guard import GuardPolicy  # noqa: E402
from reverie_canary.simulator import SIMULATED_KEY  # noqa: E402

MODEL = "deepseek/deepseek-chat-v3.1"
DEFECTS: dict[str, dict[str, Any]] = {
    "first_bytes": {"kind": "leading_junk", "junk": ","},
    "end": {"kind": "control_tokens"},
}


async def run_one(defect: str, args: argparse.Namespace) -> dict[str, Any]:
    """One pipeline, one defect: the two arms' figures and the canary's times."""
    with tempfile.TemporaryDirectory(prefix="chat-traffic-") as tmp:
        async with pipeline(workdir=Path(tmp), scenario="default",
                            exclusions_file=str(ROOT / "config" / "demo-exclusions.toml")) as p:
            await p.observer.first_seen.wait()
            client = IgnoreListClient(p.settings.nats_url, MODEL, user="backend", password=p.passwords["backend"],
                                      publish_live_s=10.0, source="bench")
            await client.start()

            guard = ReplyGuard(client, policy=GuardPolicy(budget_ratio=args.budget_ratio))
            judge_only = ReplyGuard(model=MODEL)  # the raw arm's replies, judged only to count them
            arms = {"guard": Arm(), "none": Arm()}
            rng = random.Random(7)
            provider_sync_s = 0.0
            onset_at: float | None = None
            onset_epoch = 0.0
            headers = {"Authorization": f"Bearer {SIMULATED_KEY}"}
            async with httpx.AsyncClient(base_url=p.gateway_url, headers=headers, timeout=30.0) as http:
                pending: set[asyncio.Task] = set()
                started = time.perf_counter()
                interval = 60.0 / args.rpm
                n = 0
                while time.perf_counter() - started < args.run_s:
                    now = time.perf_counter() - started
                    if onset_at is None and now >= args.onset_s:
                        fault = await http.put(p.gateway_url.removesuffix("/api/v1")
                                               + f"/_sim/faults?provider={args.provider}",
                                               json={"faults": [DEFECTS[defect]]})
                        fault.raise_for_status()
                        onset_at, onset_epoch = time.perf_counter(), time.time()
                    guarded = n % 2 == 0
                    t = time.perf_counter()
                    prefs = client.provider({"allow_fallbacks": True})
                    provider_sync_s = max(provider_sync_s, time.perf_counter() - t)
                    body = {"model": MODEL, "stream": rng.random() < args.stream_share,
                            "messages": [{"role": "user", "content": rng.choice(TURNS)}], "provider": prefs}
                    task = asyncio.create_task(one_request(http, guard if guarded else judge_only, body,
                                                           arms["guard" if guarded else "none"], guarded,
                                                           onset_at is not None))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                    n += 1
                    await asyncio.sleep(max(0.0, started + n * interval - time.perf_counter()))
                await asyncio.gather(*pending, return_exceptions=True)
            await client.stop()

            from reverie_canary.shared.contract import ids

            confirmed = [x for x in p.observer.notices if x.action == "live_confirmed" and x.provider == args.provider]
            suspended = [d for d in p.observer.decisions if d.action == "suspend" and d.provider == args.provider]
            interval = p.settings.cycle_interval_s
            out: dict[str, Any] = {"defect": defect, "arms": arms, "requests": n}
            out["confirmed_after_s"] = confirmed[0].at.timestamp() - onset_epoch if confirmed else None
            out["suspend_cycles"] = (ids.cycle_no(suspended[0].at.timestamp(), interval)
                                     - ids.cycle_no(onset_epoch, interval)) if suspended else None
            out["provider_sync_ms"] = provider_sync_s * 1000
            return out


def report(r: dict[str, Any], args: argparse.Namespace) -> None:
    g, n = r["arms"]["guard"], r["arms"]["none"]
    print(f"\n== defect {r['defect']} ({DEFECTS[r['defect']]['kind']}) on {args.provider} at +{args.onset_s:g} s; "
          f"{args.rpm:g} requests/min, {args.stream_share:.0%} streamed, retry budget {args.budget_ratio:g} per "
          f"request, {r['requests']} requests in {args.run_s:g} s ==")
    print(f"{'':34}{'guard':>12}{'no guard':>12}")
    print(f"{'replies delivered':34}{g.replies:>12}{n.replies:>12}")
    print(f"{'broken replies delivered':34}{g.broken:>12}{n.broken:>12}")
    ratio = g.broken / n.broken if n.broken else float("nan")
    print(f"{'  ratio guard / no guard':34}{ratio:>12.2%}")
    print(f"{'  by reason':34}{'':>12}{'':>12}  guard {dict(sorted(g.reasons.items()))}; "
          f"no guard {dict(sorted(n.reasons.items()))}")
    print(f"{'failing replies not retried':34}{sum(g.held.values()):>12}{'':>12}  why: {dict(sorted(g.held.items()))}")
    print(f"{'transport errors (no reply)':34}{g.errors:>12}{n.errors:>12}")
    print(f"{'extra requests (retries)':34}{g.retries:>12}{0:>12}")
    print(f"{'completion tokens on retried':34}{g.retry_tokens:>12}{0:>12}")
    print(f"{'latency median (ms)':34}{statistics.median(g.latency_s) * 1000:>12.0f}"
          f"{statistics.median(n.latency_s) * 1000:>12.0f}")
    print(f"{'latency p99 (ms)':34}{pct(g.latency_s, 0.99) * 1000:>12.0f}{pct(n.latency_s, 0.99) * 1000:>12.0f}")
    print(f"{'guard CPU per reply median (ms)':34}{statistics.median(g.cpu_ms):>12.3f}")
    print(f"{'guard CPU per reply p99 (ms)':34}{pct(g.cpu_ms, 0.99):>12.3f}")
    conf = r["confirmed_after_s"]
    print(f"{'onset -> live_confirmed notice':34}{(f'{conf:.1f} s' if conf is not None else 'none'):>12}")
    sc = r["suspend_cycles"]
    print(f"{'onset -> suspension':34}{(f'{sc} cycles' if sc else 'none'):>12}"
          + (f"  (~{sc * REAL_CYCLE_S / 60:.0f} min uncompressed)" if sc else ""))
    print(f"{'longest client.provider() (ms)':34}{r['provider_sync_ms']:>12.3f}  (synchronous: never waits on the bus)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rpm", type=float, default=600.0, help="chat requests per minute (both arms together)")
    ap.add_argument("--onset-s", type=float, default=8.0, help="seconds of traffic before the defect starts")
    ap.add_argument("--run-s", type=float, default=50.0, help="seconds of traffic per defect")
    ap.add_argument("--defect", choices=[*DEFECTS, "both"], default="both")
    ap.add_argument("--provider", default="deepinfra/fp8", help="the endpoint that develops the defect")
    ap.add_argument("--budget-ratio", type=float, default=GuardPolicy().budget_ratio,
                    help="retries the guard earns per request (GuardPolicy.budget_ratio; default 0.5, its own)")
    ap.add_argument("--stream-share", type=float, default=0.5, help="share of requests streamed")
    args = ap.parse_args()
    from reverie_canary.shared.runtime.logging import configure as configure_logging

    configure_logging("console", "WARNING", stream=sys.stderr)
    for defect in (list(DEFECTS) if args.defect == "both" else [args.defect]):
        report(asyncio.run(run_one(defect, args)), args)


if __name__ == "__main__":
    main()
