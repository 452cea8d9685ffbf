"""Start-time checks without servers: refusals told from hiccups, the key check, consumer differences."""

from __future__ import annotations

import asyncio

import nats
from nats.js.api import AckPolicy, ConsumerConfig
from typer.testing import CliRunner

from reverie_canary.canary.cli import app
from reverie_canary.shared.runtime import preflight, streams
from reverie_canary.shared.runtime.settings import Settings


def test_an_authorization_violation_is_permanent_and_a_refused_connection_is_not():
    """nats-py's wording of the server's -ERR is a refusal; connection refused, timeouts and no servers may heal."""
    assert preflight.refusal(nats.errors.Error("nats: 'Authorization Violation'")) == (
        "NATS refused the credential: Authorization Violation (wrong or missing user or password)")
    assert preflight.refusal(nats.errors.AuthorizationError()).startswith("NATS refused the credential")
    for healing in (ConnectionRefusedError(111, "Connect call failed"), nats.errors.TimeoutError(),
                    nats.errors.NoServersError(), TimeoutError()):
        assert preflight.refusal(healing) is None, healing


def test_violations_are_recorded_apart_from_other_errors_and_given_back_as_spelled():
    """nats-py lower-cases the subject; the spelling of a known candidate is given back."""
    seen = preflight.Violations()
    asyncio.run(seen.record(nats.errors.Error('nats: permissions violation for publish to '
                                              '"$js.api.stream.create.canary_log"')))
    asyncio.run(seen.record(nats.errors.Error("nats: stale connection")))
    assert seen.arrived.is_set() and len(seen.seen) == 1 and len(seen.errors) == 1
    assert seen.first_denied(["$JS.API.STREAM.CREATE.CANARY_LOG"]) == "$JS.API.STREAM.CREATE.CANARY_LOG"
    assert seen.denied("publish", "$JS.API.STREAM.CREATE.CANARY_LOG")
    assert not seen.denied("publish", "$JS.API.STREAM.CREATE.CANARY_TASKS")


def test_a_missing_permission_is_named_once_with_its_grant():
    """The judge's two decision subjects share one grant: one mention, with the first reason."""
    needs = preflight.needs("judge", Settings.load(env={}, models=["acme/chat-1"]))
    decisions = [n for n in needs if n.grant == "canary.decisions.>"]
    assert len(decisions) == 2
    text = preflight.missing_text("judge", "prober", decisions)
    assert text.count("canary.decisions.>") == 1
    assert text.startswith("judge: NATS user 'prober' lacks 1 permission(s) the judge needs: "
                           "publish canary.decisions.> (its decisions)")


def test_no_key_is_refused_only_for_a_gateway_service_pointed_at_the_real_gateway():
    """discovery and prober need the key at openrouter.ai; a simulator URL or the judge do not."""
    real = Settings.load(env={})
    assert "OPENROUTER_API_KEY is not set" in preflight.settings_problem(real, "prober")
    assert "OPENROUTER_API_KEY is not set" in preflight.settings_problem(real, "discovery")
    assert preflight.settings_problem(real, "judge") is None
    assert preflight.settings_problem(real.replace(openrouter_api_key="sk-or-v1-x"), "prober") is None
    assert preflight.settings_problem(real.replace(openrouter_base_url="http://127.0.0.1:8080/api/v1"),
                                      "prober") is None


def test_canary_run_without_a_key_against_the_real_gateway_exits_2_at_once_in_one_line():
    """No wait for NATS (none listens here): the setting is refused before anything else."""
    result = CliRunner().invoke(app, ["run", "discovery"], env={
        "CANARY_CONFIG": "", "OPENROUTER_API_KEY": "", "OPENROUTER_BASE_URL": "", "NATS_URL": "nats://127.0.0.1:9",
        "CANARY_METRICS_PORT": "-1"})
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "error: discovery: OPENROUTER_API_KEY is not set while OPENROUTER_BASE_URL is the real gateway "
        "(https://openrouter.ai/api/v1): every request would be refused (401); set the key, or point "
        "OPENROUTER_BASE_URL at the simulator (`canary simulator`)"]


def test_consumer_changes_names_the_stated_fields_that_differ_and_ignores_the_start_position():
    """ack_wait and max_deliver differ; filter_subject vs filter_subjects of one subject and deliver_policy do not."""
    spec = streams.judge_consumer(Settings.load(env={}))
    wanted = spec.config()
    live = ConsumerConfig(durable_name=spec.durable, ack_policy=AckPolicy.EXPLICIT, ack_wait=5.0, max_deliver=9,
                          max_ack_pending=spec.max_ack_pending, filter_subjects=list(reversed(spec.filter_subjects)),
                          deliver_policy=streams.DeliverPolicy.NEW)
    assert preflight.consumer_changes(live, wanted) == {"ack_wait": (5.0, spec.ack_wait_s),
                                                        "max_deliver": (9, spec.max_deliver)}
    single = streams.ConsumerSpec(stream="S", durable="d-v1", filter_subjects=["a.>"], max_ack_pending=1,
                                  ack_wait_s=30.0, max_deliver=5)
    as_server_has_it = ConsumerConfig(durable_name="d-v1", ack_policy=AckPolicy.EXPLICIT, ack_wait=30.0,
                                      max_deliver=5, max_ack_pending=1, filter_subject="a.>")
    assert preflight.consumer_changes(as_server_has_it, single.config()) == {}
