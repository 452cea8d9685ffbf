"""What many readers of the quality feed cost: one build per change, then cached bodies and 304s.

Builds a synthetic log (``--models`` x ``--providers`` x ``--cycles``, the
dashboard benchmark's), serves the feed through the real app (auth included:
one bearer token) over httpx's ASGI transport, and prints the time of a build
(a cache miss), of a cached 200 and of a 304, and how many builds ``--readers``
concurrent readers caused.

    python benchmarks/feed_bench.py --models 20 --providers 20 --cycles 48 --readers 200
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repository's benchmarks package

from benchmarks.dashboard_bench import CYCLE, KINDS, T0, BenchDashboard, synthetic_log
from reverie_canary.services.dashboard import feed as feeds
from reverie_canary.services.dashboard.auth import WebConfig, WebConfigSource, token_digest
from reverie_canary.services.dashboard.core import LogWindow, model_status, to_json
from reverie_canary.services.dashboard.web import FEED_MAX_AGE_S, FeedCache, create_app
from reverie_canary.services.judge.core import Policy


async def run(args) -> None:
    import httpx

    window = LogWindow(cycle_memory=args.cycles + 2, decision_memory=64)
    for seq, event in enumerate(synthetic_log(args.models, args.providers, args.cycles), 1):
        window.add(event, seq)
    models = sorted(window.models)
    dash = BenchDashboard(window, models, args.cycles)

    async def feed(selected):
        async def build():
            now = T0 + args.cycles * CYCLE
            policy = Policy(mode="enforce", models=tuple(models))
            views = []
            for model in selected:
                status = model_status(model, now=now, policy=policy, kinds=list(KINDS), state=None, snapshot=None,
                                      window=window.models.get(model), cycle_interval_s=1800.0)
                views.append(feeds.feed_model(status, window.models.get(model), kinds=list(KINDS), controls={}))
            return to_json(feeds.Feed(models=views))
        return await cache.get(tuple(selected), 0, build)

    cache = FeedCache(FEED_MAX_AGE_S)
    dash.feed = feed
    token = "bench-token-" + "x" * 40
    web = WebConfigSource(fixed=WebConfig(tokens={"bench": bytes.fromhex(token_digest(token)[7:])}))
    app = create_app(dash, web)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench",
                                 headers=headers) as client:
        started = time.perf_counter()
        first = await client.get("/api/v1/quality")
        build_s = time.perf_counter() - started
        first.raise_for_status()
        started = time.perf_counter()
        for _ in range(args.repeat):
            (await client.get("/api/v1/quality")).raise_for_status()
        cached_s = (time.perf_counter() - started) / args.repeat
        started = time.perf_counter()
        for _ in range(args.repeat):
            r = await client.get("/api/v1/quality", headers={"If-None-Match": first.headers["etag"]})
            assert r.status_code == 304
        not_modified_s = (time.perf_counter() - started) / args.repeat
        cache._done.clear()
        builds = cache.builds
        started = time.perf_counter()
        answers = await asyncio.gather(*[client.get("/api/v1/quality") for _ in range(args.readers)])
        burst_s = time.perf_counter() - started
        assert all(a.status_code == 200 for a in answers)
    print(f"quality feed: {args.models} models x {args.providers} providers x {args.cycles} cycles, "
          f"{len(first.content) / 1e6:.2f} MB of JSON")
    print(f"  a build (cache miss): {build_s * 1000:.0f} ms; a cached 200: {cached_s * 1000:.1f} ms; "
          f"a 304: {not_modified_s * 1000:.1f} ms (means of {args.repeat})")
    print(f"  {args.readers} readers at once on a cold cache: {cache.builds - builds} build(s), "
          f"{burst_s * 1000:.0f} ms for all")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--providers", type=int, default=20)
    parser.add_argument("--cycles", type=int, default=48)
    parser.add_argument("--readers", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=50)
    asyncio.run(run(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
