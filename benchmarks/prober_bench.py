"""The prober's throughput and CPU per probe, and how honestly it times first tokens.

Two parts, each printed beside an anchor measured in the same run:

1. **Throughput** (``--probes``): one prober service (the real FastStream app:
   pull tasks from JetStream, send the pinned streaming request, run the
   checks, publish the result, ack) against a simulated provider that answers
   at once (time to first token 0, no pause between chunks), in this process;
   the anchor is the same streaming requests sent by a bare httpx loop that
   only reads the stream, with no checks and no bus -- the ratio is what the
   prober adds.
2. **Token timing** (``--inflight 1,16,64``): the prober in a process of its
   own (``canary run prober``, as deployed) against simulated providers that
   stream like real ones (first token after a known delay, 0.2-0.55 s, then a
   chunk every 20 ms), every probe kind, with 1, 16 and 64 probes in flight.
   Printed: the time-to-first-token error (the reply's ``ttft_ms`` minus the
   delay the simulator injects) p50/p99/max, and the prober's CPU per probe
   (its process's user + system time over the probes).  The anchor, side by
   side at the same concurrency against the same streams: bare httpx sending
   the same requests, its clock started just before ``client.stream`` and
   stopped at the first data line with visible content.  Each ``--repeat``
   runs both again; the spread is printed.  Goals: error p99 <= 5 ms at 64 in
   flight, CPU <= 3 ms a probe.  ``--loop asyncio,uvloop`` (the default) runs
   the prober on each event loop (``CANARY_EVENT_LOOP``, canary/loops.py)
   beside the same anchor and prints their ratios run by run.

The simulator and NATS run in their own processes.

    python benchmarks/prober_bench.py [--probes 600] [--concurrency 32]
                                      [--inflight 1,16,64] [--timing-probes 32] [--repeat 3]
                                      [--only throughput|timing] [--loop asyncio,uvloop]
                                      [--baseline OTHER/.venv/bin/canary] [--profile DIR [--profile-gil]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from reverie_canary.canary.embedded import free_port, start_nats  # noqa: E402
from reverie_canary.canary.runtime import running  # noqa: E402
from reverie_canary.services.prober.http import request_body  # noqa: E402
from reverie_canary.services.prober.prompts import build  # noqa: E402
from reverie_canary.shared.contract import codec, subjects  # noqa: E402
from reverie_canary.shared.contract.events import PROBE_KINDS, ProbeTask  # noqa: E402
from reverie_canary.shared.runtime import clock, streams  # noqa: E402
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect  # noqa: E402
from reverie_canary.shared.runtime.settings import LANGUAGES, Settings  # noqa: E402
from reverie_canary.shared.runtime.streams import TASKS  # noqa: E402
from reverie_canary.simulator import SIMULATED_KEY  # noqa: E402

MODEL = "bench/instant-1"
PROVIDER = "instant/fp8"
#: The simulated gateway refuses chat completions and /generation without a key.
AUTH = {"Authorization": f"Bearer {SIMULATED_KEY}"}
SCENARIO = f"""
seed = 1
keepalive_s = 0.2
chunk_interval_s = 0.0
[[models]]
id = "{MODEL}"
name = "Instant"
[[models.endpoints]]
tag = "{PROVIDER}"
provider_name = "Instant"
ttft_s = 0.0
chunk_interval_s = 0.0
"""


#: Token timing: the streaming providers (tag, display name, injected time to first token in s).
STREAMING = [(f"stream{i}/fp8", f"Stream{i}", 0.2 + 0.05 * i) for i in range(8)]
STREAM_MODEL = "bench/streaming-1"
STREAM_SCENARIO = f"""
seed = 2
keepalive_s = 0.2
chunk_interval_s = 0.02
[[models]]
id = "{STREAM_MODEL}"
name = "Streaming"
""" + "".join(f"""
[[models.endpoints]]
tag = "{tag}"
provider_name = "{name}"
ttft_s = {ttft}
""" for tag, name, ttft in STREAMING)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def proc_cpu_split_s(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def tasks(n: int) -> list[ProbeTask]:
    now = clock.now()
    out = []
    for i in range(n):
        kind = PROBE_KINDS[i % len(PROBE_KINDS)]
        language = LANGUAGES[i % len(LANGUAGES)] if kind in ("language", "ttft", "refusal") else "en"
        out.append(ProbeTask(at=now, task_id=f"bench-{i}", model=MODEL, provider=PROVIDER, provider_name="Instant",
                             kind=kind, language=language, cycle="bench", deadline=now + timedelta(hours=1),
                             supported_parameters=["max_tokens", "response_format", "structured_outputs"]))
    return out


async def bench_prober(settings: Settings, work: list[ProbeTask]) -> tuple[float, float, dict]:
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    done = asyncio.Event()
    outcomes: dict[str, int] = {}

    async def on_result(msg):
        result = codec.PROBE_RESULT.decode(msg.data)
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
        if sum(outcomes.values()) >= len(work):
            done.set()

    await nc.subscribe(subjects.ALL_RESULTS, cb=on_result)
    async with running(settings, ["prober"]):
        # warm up outside the measurement: the language models load on first use
        from reverie_canary.client.checks import evaluate
        from reverie_canary.client.reply import Reply

        warm = build("language", "pt")
        evaluate(Reply(text="O farol ergue-se sobre as rochas e a luz varre o mar.", finish_reason="stop",
                       http_status=200, ttft_ms=1.0), warm.spec)
        c0, t0 = cpu_s(), time.perf_counter()
        for t in work:  # publishing is part of the measured CPU: ~0.1 ms a task
            await js.publish(subjects.task(MODEL, PROVIDER), codec.encode(t), stream=TASKS,
                             headers={"Nats-Msg-Id": t.task_id})
        await asyncio.wait_for(done.wait(), timeout=600)
        wall = time.perf_counter() - t0
        cpu = cpu_s() - c0
    await nc.close()
    return len(work) / wall, cpu * 1000 / len(work), outcomes


async def bench_bare(url: str, work: list[ProbeTask], concurrency: int) -> tuple[float, float]:
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url + "/", timeout=30, headers=AUTH) as client:
        async def one(t: ProbeTask) -> None:
            body = request_body(MODEL, PROVIDER, build(t.kind, t.language), require_parameters=False)
            async with gate, client.stream("POST", "chat/completions", json=body) as response:
                async for _ in response.aiter_lines():
                    pass

        c0, t0 = cpu_s(), time.perf_counter()
        await asyncio.gather(*(one(t) for t in work))
        wall = time.perf_counter() - t0
    return len(work) / wall, (cpu_s() - c0) * 1000 / len(work)


def timing_tasks(n: int, salt: str) -> list[ProbeTask]:
    """``n`` tasks over the streaming providers, every kind in turn (17 languages)."""
    now = clock.now()
    out = []
    for i in range(n):
        tag, name, _ = STREAMING[i % len(STREAMING)]
        kind = PROBE_KINDS[(i // len(STREAMING)) % len(PROBE_KINDS)]
        language = LANGUAGES[i % len(LANGUAGES)] if kind in ("language", "ttft", "refusal") else "en"
        out.append(ProbeTask(at=now, task_id=f"t-{salt}-{i}", model=STREAM_MODEL, provider=tag, provider_name=name,
                             kind=kind, language=language, cycle=f"timing-{salt}", deadline=now + timedelta(hours=1),
                             supported_parameters=["max_tokens", "response_format", "structured_outputs"]))
    return out


async def timing_bare(url: str, work: list[ProbeTask], inflight: int) -> tuple[list[tuple], float]:
    """The anchor: bare httpx, ``inflight`` requests at once; ((provider, TTFT ms, generation id), CPU ms a request)."""
    gate = asyncio.Semaphore(inflight)
    timed: list[tuple[str, float, str | None]] = []
    limits = httpx.Limits(max_connections=inflight * 3, max_keepalive_connections=inflight * 3)
    async with httpx.AsyncClient(base_url=url + "/", timeout=30, limits=limits, headers=AUTH) as client:
        async def one(t: ProbeTask) -> None:
            body = request_body(t.model, t.provider, build(t.kind, t.language), require_parameters=False)
            async with gate:
                t0 = time.perf_counter()
                first, gen = None, None
                async with client.stream("POST", "chat/completions", json=body) as response:
                    async for line in response.aiter_lines():
                        if first is None and line.startswith("data: {"):
                            chunk = json.loads(line[6:])
                            delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                            if (delta.get("content") or delta.get("reasoning") or "").strip():
                                first, gen = (time.perf_counter() - t0) * 1000.0, chunk.get("id")
                if first is not None:
                    timed.append((t.provider, first, gen))

        c0 = cpu_s()
        await asyncio.gather(*(one(t) for t in work))
    return timed, (cpu_s() - c0) * 1000 / len(work)


async def timing_prober(settings: Settings, work: list[ProbeTask], profile: Path | None = None,
                        gil: bool = False, exe: Path | None = None) -> tuple[list[tuple], float, float, dict]:
    """The prober in its own process; ((provider, TTFT ms, generation id) of every reply, CPU ms a probe,
    the system (kernel) share of that CPU, outcomes).

    With ``profile`` (a file path), py-spy samples the prober process from its first task to its last
    result (``--format raw``: collapsed stacks, one line per stack with its sample count; its own CPU is
    not the prober's, but it shares the machine's cores: figures of a profiled run are not comparable);
    ``gil``: only the thread holding the GIL is sampled (``py-spy --gil``), so a thread waiting for it
    does not count as busy.  ``exe``: the ``canary`` to run (another checkout's, for a before/after).
    """
    await ensure_streams(settings)
    nc = await nats_connect(settings)
    js = nc.jetstream()
    done = asyncio.Event()
    timed: list[tuple[str, float, str | None]] = []
    outcomes: dict[str, int] = {}
    seen = 0

    async def on_result(msg):
        nonlocal seen
        try:
            result = codec.PROBE_RESULT.decode(msg.data)
        except Exception:  # noqa: BLE001 - the prober's start check writes a probe message there
            return
        seen += 1
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
        for reply in [a.reply for a in result.attempts] or [result.reply]:
            if reply.ttft_ms is not None:
                timed.append((result.provider, reply.ttft_ms, reply.generation_id))
        if seen >= len(work):
            done.set()

    await nc.subscribe(subjects.ALL_RESULTS, cb=on_result)
    env = {**os.environ, **settings.environment(with_secrets=True)}
    exe = exe or Path(sys.executable).with_name("canary")
    prober = subprocess.Popen([str(exe), "run", "prober"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        spec = streams.prober_consumer(settings)
        for _ in range(600):  # the prober pulls: it is up and warmed
            try:
                info = await js.consumer_info(spec.stream, spec.durable)
                if (info.num_waiting or 0) > 0:
                    break
            except Exception:  # noqa: BLE001 - not created yet
                pass
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError("the prober process did not pull within 60 s")
        spy = None
        if profile is not None:
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(prober.pid),
                                    "--rate", "250", "--format", "raw", "--nonblocking", "-o", str(profile),
                                    *(["--gil"] if gil else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await asyncio.sleep(1.0)  # attached
        u0, s0 = proc_cpu_split_s(prober.pid)
        for t in work:
            await js.publish(subjects.task(t.model, t.provider), codec.encode(t), stream=TASKS,
                             headers={"Nats-Msg-Id": t.task_id})
        await asyncio.wait_for(done.wait(), timeout=600)
        u1, s1 = proc_cpu_split_s(prober.pid)
        cpu_ms = (u1 - u0 + s1 - s0) * 1000 / len(work)
        sys_share = (s1 - s0) / max(1e-9, u1 - u0 + s1 - s0)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=30)
    finally:
        prober.send_signal(signal.SIGTERM)
        try:
            prober.wait(timeout=15)
        except subprocess.TimeoutExpired:
            prober.kill()
            prober.wait(timeout=5)
        await nc.close()
    return timed, cpu_ms, sys_share, outcomes


async def gateway_errors(url: str, timed: list[tuple]) -> tuple[list[float], list[float]]:
    """Each reply's TTFT minus the injected delay, and minus the simulator's own first-token time.

    The simulator's ``/generation`` record gives ``latency - generation_time``:
    its first token from the moment its handler took the request, so the second
    error is the client's own share (reading, and its loop), less the gateway's
    lateness under load.
    """
    injected = {tag: ttft * 1000.0 for tag, _, ttft in STREAMING}
    gate = asyncio.Semaphore(16)
    own: list[float] = []
    async with httpx.AsyncClient(timeout=10, headers=AUTH) as client:
        async def one(provider: str, ttft_ms: float, gen: str | None) -> None:
            if not gen:
                return
            async with gate:
                r = await client.get(url + "/generation", params={"id": gen})
            if r.status_code == 200:
                data = r.json()["data"]
                own.append(ttft_ms - (data["latency"] - data["generation_time"]))

        await asyncio.gather(*(one(*t) for t in timed))
    return [ttft_ms - injected[provider] for provider, ttft_ms, _ in timed], own


async def timing(args) -> None:
    """Part 2: TTFT error and CPU per probe at each concurrency, prober beside bare httpx."""
    levels = [int(x) for x in args.inflight.split(",")]
    loops = [x.strip() for x in args.loop.split(",") if x.strip()]
    if args.baseline:
        loops.insert(0, "base")  # another checkout's prober (say main before a change), on its own default loop
    rows: dict[int, list[dict]] = {c: [] for c in levels}
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "streaming.toml"
        scenario.write_text(STREAM_SCENARIO)
        port = free_port()
        sim = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario", str(scenario),
                                "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        nats = start_nats(Path(tmp) / "nats")
        url = f"http://127.0.0.1:{port}/api/v1"
        try:
            for _ in range(100):
                try:
                    httpx.get(url + "/models", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            for rep in range(args.repeat):
                for c in levels:
                    n = max(args.timing_probes, 4 * c)
                    salt = uuid.uuid4().hex[:6]
                    settings = Settings.load(env={}, nats_url=nats.url, openrouter_base_url=url, models=[STREAM_MODEL],
                                             openrouter_api_key=SIMULATED_KEY,
                                             prober_concurrency=c, log_level="WARNING", namespace=f"t{salt}",
                                             metrics_ports={"prober": 0})
                    bare_timed, bare_cpu = await timing_bare(url, timing_tasks(n, salt + "b"), c)
                    bare, bare_gw = await gateway_errors(url, bare_timed)
                    # each loop beside the same anchor, in the same run; the order turns each repetition
                    for loop in loops if rep % 2 == 0 else loops[::-1]:
                        profile = Path(args.profile) / f"prober-{loop}-{c}-{rep + 1}.txt" if args.profile else None
                        timed, cpu_ms, sys_share, outcomes = await timing_prober(
                            settings.replace(event_loop="auto" if loop == "base" else loop,
                                             namespace=f"t{salt}{loop[:2]}"),
                            timing_tasks(n, salt + loop[:2]), profile, args.profile_gil,
                            Path(args.baseline) if loop == "base" else None)
                        errors, gw = await gateway_errors(url, timed)
                        rows[c].append({"bare": bare, "bare_gw": bare_gw, "bare_cpu": bare_cpu, "prober": errors,
                                        "prober_gw": gw, "cpu": cpu_ms, "sys": sys_share, "loop": loop,
                                        "outcomes": outcomes, "n": n})
        finally:
            nats.stop()
            sim.terminate()
            sim.wait(timeout=10)

    print(f"\ntoken timing: {len(STREAMING)} streaming providers (first token after 0.20-0.55 s, then a chunk every "
          f"20 ms), every probe kind; prober in its own process; {args.repeat} runs; error = reported minus injected")
    print("error vs gateway: reported minus the simulator's own first-token time (its /generation record): "
          "the client's share")
    print(f"{'in flight':>9} {'run':>4} {'loop':>8} {'probes':>7} {'bare httpx err p50/p99/max':>27} "
          f"{'vs gateway p99':>15} "
          f"{'prober err p50/p99/max':>23} {'vs gateway p99':>15} {'bare CPU ms':>12} {'prober CPU ms/probe':>20} "
          f"{'kernel':>7}")
    for c in levels:
        for i, r in enumerate(rows[c]):
            b, e = r["bare"], r["prober"]
            print(f"{c:>9} {i // len(loops) + 1:>4} {r['loop']:>8} {r['n']:>7} "
                  f"{pct(b, .5):>11.1f}/{pct(b, .99):.1f}/{max(b, default=float('nan')):.1f} "
                  f"{pct(r['bare_gw'], .99):>15.1f} "
                  f"{pct(e, .5):>11.1f}/{pct(e, .99):.1f}/{max(e, default=float('nan')):.1f} "
                  f"{pct(r['prober_gw'], .99):>15.1f} {r['bare_cpu']:>12.2f} {r['cpu']:>20.2f} {r['sys']:>7.0%}")
    for c in levels:
        for loop in loops:
            mine = [r for r in rows[c] if r["loop"] == loop]
            bp = [pct(r["bare"], .99) for r in mine]
            pp = [pct(r["prober"], .99) for r in mine]
            bg = [pct(r["bare_gw"], .99) for r in mine]
            pg = [pct(r["prober_gw"], .99) for r in mine]
            cpu = [r["cpu"] for r in mine]
            print(f"spread at {c:>2} in flight, {loop:>7} loop: TTFT error p99 prober {min(pp):.1f}-{max(pp):.1f} ms "
                  f"(bare httpx {min(bp):.1f}-{max(bp):.1f}), vs gateway prober {min(pg):.1f}-{max(pg):.1f} "
                  f"(bare {min(bg):.1f}-{max(bg):.1f}); prober CPU {min(cpu):.2f}-{max(cpu):.2f} ms a probe")
        if len(loops) > 1:  # each loop's figures over the first's, run by run (the same anchor beside both)
            first = [r for r in rows[c] if r["loop"] == loops[0]]
            for loop in loops[1:]:
                mine = [r for r in rows[c] if r["loop"] == loop]
                p99 = [pct(m["prober"], .99) / pct(f["prober"], .99) for f, m in zip(first, mine, strict=False)]
                cpu = [m["cpu"] / f["cpu"] for f, m in zip(first, mine, strict=False)]
                print(f"  {loop} / {loops[0]} at {c:>2} in flight: TTFT error p99 x{min(p99):.2f}-{max(p99):.2f}, "
                      f"CPU a probe x{min(cpu):.2f}-{max(cpu):.2f}")
    print("goals: TTFT error p99 <= 5 ms at 64 in flight; prober CPU <= 3 ms a probe (streaming provider)")
    print(f"outcomes (last run at {levels[-1]}): {json.dumps(rows[levels[-1]][-1]['outcomes'], sort_keys=True)}")


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probes", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=32, help="probes in flight in the prober")
    parser.add_argument("--inflight", default="1,16,64", help="token timing: probes in flight, comma-separated")
    parser.add_argument("--timing-probes", type=int, default=32,
                        help="token timing: probes per level (at least 4 x in flight)")
    parser.add_argument("--repeat", type=int, default=3, help="token timing: repetitions")
    parser.add_argument("--only", choices=("throughput", "timing"), default=None)
    parser.add_argument("--loop", default="asyncio,uvloop",
                        help="token timing: the prober's event loops (CANARY_EVENT_LOOP), comma-separated, each run "
                             "beside the same bare httpx anchor: asyncio, uvloop, auto")
    parser.add_argument("--baseline", default=None, metavar="CANARY",
                        help="token timing: also run the prober of another checkout (the path of its venv's "
                             "`canary`, say main's before a change), as loop `base`, beside the same anchor")
    parser.add_argument("--profile", default=None, metavar="DIR",
                        help="token timing: py-spy (pip install py-spy) samples each prober run into "
                             "DIR/prober-LOOP-INFLIGHT-RUN.txt (collapsed stacks; benchmarks/top_frames.py reads them)")
    parser.add_argument("--profile-gil", action="store_true",
                        help="with --profile: sample only the thread holding the GIL (py-spy --gil)")
    args = parser.parse_args(argv)
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    if args.only != "timing":
        await throughput(args)
    if args.only != "throughput":
        await timing(args)
    return 0


async def throughput(args) -> None:
    """Part 1: throughput and CPU against the instant provider, beside bare httpx."""
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "instant.toml"
        scenario.write_text(SCENARIO)
        port = free_port()
        sim = subprocess.Popen([sys.executable, "-m", "reverie_canary.simulator", "--scenario", str(scenario), "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        nats = start_nats(Path(tmp) / "nats")
        url = f"http://127.0.0.1:{port}/api/v1"
        try:
            for _ in range(100):
                try:
                    httpx.get(url + "/models", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            settings = Settings.load(env={}, nats_url=nats.url, openrouter_base_url=url, models=[MODEL],
                                     openrouter_api_key=SIMULATED_KEY,
                                     prober_concurrency=args.concurrency, log_level="WARNING")
            work = tasks(args.probes)
            bare_rate, bare_cpu = await bench_bare(url, work, args.concurrency)
            rate, cpu_ms, outcomes = await bench_prober(settings, work)
        finally:
            nats.stop()
            sim.terminate()
            sim.wait(timeout=10)

    print(f"prober benchmark: {args.probes} probes (all 5 kinds, 17 languages) against one instant simulated "
          f"provider, {args.concurrency} in flight; simulator and NATS in their own processes")
    print(f"{'what':<58} {'per s':>8} {'CPU ms each':>12} {'ratio':>7}")
    print(f"{'bare httpx: same streaming requests, read and discarded':<58} {bare_rate:>8.0f} {bare_cpu:>12.2f} "
          f"{1.0:>6.2f}x")
    print(f"{'prober service: pull task, probe, check, publish, ack':<58} {rate:>8.0f} {cpu_ms:>12.2f} "
          f"{rate / bare_rate:>6.2f}x")
    print(f"outcomes: {json.dumps(outcomes, sort_keys=True)} (language probes with an anomaly are sent 3 times)")


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
