"""Services refuse a wrong setup at start in one line, reconcile their durables, and say what they do.

Real NATS (with the project's authorization where credentials matter) and Redis;
``canary run`` and ``canary up`` run as the processes an operator starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from structlog.testing import capture_logs

from reverie_canary.canary.demo import demo_settings
from reverie_canary.canary.runtime import running
from reverie_canary.shared.contract import subjects
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime import preflight, streams
from reverie_canary.shared.runtime.auth import SERVICE_USERS
from reverie_canary.shared.runtime.service import ensure_streams, nats_connect
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.simulator.gateway import create_app as create_gateway
from reverie_canary.simulator.scenario import load_scenario
from reverie_canary.simulator.server import serve
from tests import waits

pytestmark = pytest.mark.integration

MODEL = "acme/chat-1"
CANARY = str(Path(sys.executable).parent / "canary")
#: Every service's durable consumers, as its create_app subscribes them.
CONSUMERS = {
    "discovery": [streams.discovery_consumer],
    "prober": [streams.prober_consumer],
    "judge": [streams.judge_consumer],
    "router": [streams.router_consumer],
    "notifier": [streams.notifier_consumer, streams.notifier_resend_consumer],
}


def settings_for(infra, user: str | None = None, **overrides) -> Settings:
    password = infra.passwords[user] if user else ""
    return Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                         models=[MODEL], nats_user=user or "", nats_password=password, metrics_port=-1,
                         openrouter_base_url="http://127.0.0.1:9/api/v1", **overrides)


def run_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment a ``canary`` process reads ``settings`` back from (no inherited CANARY_* setting)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANARY_", "NATS_", "REDIS_", "OPENROUTER_"))}
    return {**env, **settings.environment(with_secrets=True), **extra}


async def test_a_prober_with_the_judges_credential_exits_naming_the_permission_and_takes_no_task(secured):
    """``NATS_USER=judge canary run prober``: exit 2, one line naming canary.results.>; the queued task stays."""
    admin = settings_for(secured, "admin")
    await ensure_streams(admin, strict=True)
    nc = await nats.connect(secured.nats_url, user="discovery", password=secured.passwords["discovery"])
    try:
        await nc.jetstream().publish(subjects.task(MODEL, "acme/fp8"), b"{}")
    finally:
        await nc.close()

    proc = await asyncio.create_subprocess_exec(CANARY, "run", "prober", env=run_env(settings_for(secured, "judge")),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await waits.within(proc.communicate(), timeout_s=60, what="canary run prober to exit")
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 2, (out, err)
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: prober: NATS user 'judge' lacks 2 permission(s) the prober needs: "
                               "publish canary.results.> (the results of the probes it takes); "
                               "publish canary.deadletter.prober"), lines
    assert secured.passwords["judge"] not in err.decode()

    nc = await nats_connect(admin)
    try:
        js = nc.jetstream()
        assert (await js.stream_info(streams.TASKS)).state.messages == 1
        consumers = await js.consumers_info(streams.TASKS)
        assert [c.delivered.stream_seq for c in consumers] in ([], [0])  # nothing was ever delivered
    finally:
        await nc.close()


async def test_each_service_user_has_what_its_service_needs_and_no_other_user_does(secured):
    """The shipped server.conf against preflight.needs: own user passes; the backend user lacks each service's outputs."""
    await ensure_streams(settings_for(secured, "admin"), strict=True)
    for service in SERVICE_USERS:
        own = settings_for(secured, service)
        await preflight.check_permissions(own, service, [c(own) for c in CONSUMERS[service]])
        backend = settings_for(secured, "backend")
        with pytest.raises(preflight.PermissionMissing) as refused:
            await preflight.check_permissions(backend, service, [c(backend) for c in CONSUMERS[service]])
        text = str(refused.value)
        assert text.startswith(f"{service}: NATS user 'backend' lacks "), text
        assert f"publish {subjects.deadletter(service)} " in text and "publish $JS.API.CONSUMER.> " in text
    with pytest.raises(preflight.NatsRefused, match="Authorization Violation"):
        await preflight.check_permissions(settings_for(secured, "prober").replace(nats_password="wrong"), "prober")


async def test_the_permission_probes_store_nothing(secured):
    """Probing every service's outputs as admin (all permitted) leaves the log and the task queue as they were."""
    admin = settings_for(secured, "admin")
    await ensure_streams(admin, strict=True)
    for service in SERVICE_USERS:
        await preflight.check_permissions(admin, service, [c(admin) for c in CONSUMERS[service]])
    nc = await nats_connect(admin)
    try:
        js = nc.jetstream()
        for name in (streams.LOG, streams.TASKS, streams.DEADLETTER, streams.NOTICES):
            assert (await js.stream_info(name)).state.messages == 0, name
        kv = await js.key_value(subjects.ROUTING_BUCKET)
        with pytest.raises(nats.js.errors.NoKeysError):  # the probe of the router's KV put stored no key
            await kv.keys()
    finally:
        await nc.close()


async def test_a_live_durable_that_differs_from_the_code_is_updated_in_place_and_the_change_logged(infra):
    """prober-v2 made with ack_wait 5 s, max_deliver 9: the prober brings it to the code's values, same durable."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    spec = streams.prober_consumer(settings)
    nc = await nats_connect(settings)
    try:
        js = nc.jetstream()
        await js.add_consumer(streams.TASKS, ConsumerConfig(durable_name=spec.durable, ack_policy=AckPolicy.EXPLICIT,
                                                            filter_subjects=spec.filter_subjects, ack_wait=5,
                                                            max_deliver=9, max_ack_pending=3))
        created = (await js.consumer_info(streams.TASKS, spec.durable)).created
        with capture_logs() as logs:
            async with running(settings, ["prober"]):
                info = await js.consumer_info(streams.TASKS, spec.durable)
    finally:
        await nc.close()
    assert (info.config.ack_wait, info.config.max_deliver, info.config.max_ack_pending) == (
        spec.ack_wait_s, spec.max_deliver, spec.max_ack_pending)
    assert info.created == created  # updated, not replaced: the durable keeps its position
    said = [e for e in logs if e["event"] == "consumer_reconciled"]
    assert len(said) == 1 and said[0]["durable"] == spec.durable, said
    assert said[0]["changes"] == {"ack_wait": {"was": 5.0, "now": spec.ack_wait_s},
                                  "max_deliver": {"was": 9, "now": spec.max_deliver},
                                  "max_ack_pending": {"was": 3, "now": spec.max_ack_pending}}


async def test_a_live_durable_the_server_cannot_change_is_refused_with_why(infra):
    """judge-v1 made with ack_policy none: the judge refuses to start, naming the durable, the field and the fix."""
    settings = settings_for(infra)
    await ensure_streams(settings)
    spec = streams.judge_consumer(settings)
    nc = await nats_connect(settings)
    try:
        await nc.jetstream().add_consumer(streams.LOG, ConsumerConfig(
            durable_name=spec.durable, ack_policy=AckPolicy.NONE, filter_subjects=spec.filter_subjects))
    finally:
        await nc.close()
    with pytest.raises(ConfigError) as refused:
        async with running(settings, ["judge"]):
            pass
    text = str(refused.value)
    assert text.startswith(f"durable consumer {spec.durable} on {streams.LOG} differs from the code in ack_policy"), text
    assert "'none' -> 'explicit'" in text and "new -vN in shared/runtime/streams.py" in text


async def test_canary_up_says_a_start_line_and_one_line_per_closed_cycle(infra, tmp_path):
    """``canary up`` on compressed time: ``started`` (services, user, models, mode, next cycle), then ``cycle_closed``."""
    async with serve(create_gateway(load_scenario("default"))) as gateway:
        settings = demo_settings(settings_for(infra), nats_url=infra.nats_url, redis_url=infra.redis_url,
                                 gateway_url=gateway, model=load_scenario("default").models[0].id, controls={})
        settings = settings.replace(namespace=infra.namespace, mode="observe", kind_modes={"ttft": "enforce"},
                                    log_format="json", log_level="INFO")
        await ensure_streams(settings)  # `canary init`
        proc = await asyncio.create_subprocess_exec(CANARY, "up", env=run_env(settings), stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        seen: list[dict] = []

        async def line_of(event: str) -> dict:
            async def read() -> dict:
                while True:
                    raw = await proc.stderr.readline()
                    assert raw, f"canary up ended before saying {event}: {seen[-5:]}"
                    try:
                        doc = json.loads(raw)
                    except ValueError:
                        continue
                    seen.append(doc)
                    if doc.get("event") == event:
                        return doc
            return await waits.within(read(), timeout_s=90, what=f"canary up to say {event}")

        try:
            started = await line_of("started")
            closed = await line_of("cycle_closed")
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGINT)
            await waits.within(proc.wait(), timeout_s=60, what="canary up to stop on SIGINT")
    assert proc.returncode == 0
    assert started["services"] == "discovery, prober, judge, router, notifier"
    assert started["nats_user"] == "(none)" and started["models"] == settings.models[0]
    assert started["mode"] == "modes: enforce for ttft; observe for " + ", ".join(k for k in settings.kinds
                                                                                 if k != "ttft")
    assert started["next_cycle_at"].endswith("Z")
    assert started["language_coverage"] == "every language of every provider at least once every 4 cycles, 5 a cycle"
    assert closed["model"] == settings.models[0] and closed["cycle_no"] > 0
    assert closed["providers"] == sum(closed.get(k, 0) for k in ("passed", "failed", "frozen")) > 0
    assert closed["next_cycle_at"] > started["next_cycle_at"]  # the start line's next cycle is the one that closed


async def test_a_durable_that_took_over_an_older_ones_position_is_reconciled_without_moving_it(infra):
    """router-v2 as its migration made it (deliver by start sequence), max_deliver 9: updated, start position kept."""
    from structlog import get_logger

    from reverie_canary.shared.runtime import preflight

    settings = settings_for(infra)
    await ensure_streams(settings)
    spec = streams.router_consumer(settings)
    nc = await nats_connect(settings)
    try:
        js = nc.jetstream()
        migrated = spec.config()
        migrated.deliver_policy, migrated.opt_start_seq, migrated.max_deliver = DeliverPolicy.BY_START_SEQUENCE, 7, 9
        await js.add_consumer(streams.LOG, migrated)
        with capture_logs() as logs:
            changed = await preflight.reconcile_consumers(js, [spec], get_logger("router"))
        info = await js.consumer_info(streams.LOG, spec.durable)
    finally:
        await nc.close()
    assert changed == [spec.durable]
    assert info.config.max_deliver == spec.max_deliver
    assert (info.config.deliver_policy, info.config.opt_start_seq) == (DeliverPolicy.BY_START_SEQUENCE, 7)
    assert [e["changes"] for e in logs if e["event"] == "consumer_reconciled"] == [
        {"max_deliver": {"was": 9, "now": spec.max_deliver}}]


async def test_a_service_with_a_wrong_password_exits_at_once_instead_of_waiting_for_nats(secured):
    """``canary run judge`` with a wrong password: exit 2 naming the Authorization Violation (it used to wait forever)."""
    await ensure_streams(settings_for(secured, "admin"), strict=True)
    wrong = settings_for(secured, "judge").replace(nats_password="not-the-judges-password")
    proc = await asyncio.create_subprocess_exec(CANARY, "run", "judge", env=run_env(wrong),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await waits.within(proc.communicate(), timeout_s=60, what="canary run judge to exit")
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 2, lines
    assert lines == ["error: NATS refused the credential: Authorization Violation (wrong or missing user or "
                     f"password) (NATS user judge at {secured.nats_url})"], lines
