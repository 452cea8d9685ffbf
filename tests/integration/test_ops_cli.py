"""Operator commands (``canary override|lift|mode|exclusions``) against real NATS, Redis and services.

The commands run as a subprocess (``python -m reverie_canary.canary``) with the operator's
credential, as an operator would run them; the router and judge run in-process
with their own credentials (``shared/nats/server.conf``).
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timedelta, timezone

import nats
import pytest

from reverie_canary.canary.runtime import running
from reverie_canary.shared.contract import codec, subjects
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.streams import LOG, ROUTING_BUCKET
from tests import waits
from tests.judge_events import cycle_events, healthy, publish_events
from tests.operator_cli import run_canary

MODEL = "acme/chat-1"
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def settings_for(infra, user: str = "admin", **changes) -> Settings:
    return Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                         models=[MODEL], mode="enforce", cycle_interval_s=3600, probe_window_s=600,
                         nats_user=user, nats_password=infra.passwords[user], retry_delay_s=0.2,
                         openrouter_base_url="http://127.0.0.1:9/api/v1", **changes)


async def canary(infra, *args: str, user: str = "operator") -> tuple[int, str, str]:
    """Run ``canary ARGS`` as ``user`` on this module's model (:func:`tests.operator_cli.run_canary`)."""
    return await run_canary(infra, *args, model=MODEL, user=user)


async def admin_js(infra):
    nc = await nats.connect(infra.nats_url, user="admin", password=infra.passwords["admin"])
    return nc, nc.jetstream()


async def snapshot_version(infra) -> int:
    nc, js = await admin_js(infra)
    try:
        entry = await (await js.key_value(ROUTING_BUCKET)).get(subjects.kv_key(MODEL))
        return codec.SNAPSHOT.decode(entry.value).version
    finally:
        await nc.close()


async def snapshot_ignore(infra) -> list[str]:
    nc, js = await admin_js(infra)
    try:
        entry = await (await js.key_value(ROUTING_BUCKET)).get(subjects.kv_key(MODEL))
        return codec.SNAPSHOT.decode(entry.value).ignore_at(datetime.now(timezone.utc))
    finally:
        await nc.close()


# -- override add | list | remove -----------------------------------------------------------------


@pytest.mark.integration
async def test_override_add_then_list_shows_it_with_the_new_version(secured):
    """add prints the change and the new snapshot version; list shows the entry with layer, actor and expiry."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        await waits.until(lambda: _has_snapshot(infra), timeout_s=10, what="the router's first snapshot")
        before = await snapshot_version(infra)
        code, out, err = await canary(infra, "override", "add", "lambda/fp8", "--reason", "incident 42",
                                      "--model", MODEL, "--for", "2h", "--reference", "INC-7")
        assert code == 0, err
        version = await snapshot_version(infra)
        assert version == before + 1
        match = re.fullmatch(rf"override added: lambda/fp8 on {MODEL}: incident 42 \(alice\) until ({STAMP}) "
                             rf"— snapshot v{version}: ignore \[\"lambda/fp8\"\]\n", out)
        assert match, out
        until = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        assert abs(until - (datetime.now(timezone.utc) + timedelta(hours=2))) < timedelta(seconds=30)

        # the command went into the log with Nats-Msg-Id = its command id, a uuid4
        nc, js = await admin_js(infra)
        stored = await js.get_last_msg(LOG, subjects.ops("override-add"))
        await nc.close()
        command = codec.COMMAND.decode(stored.data)
        assert stored.headers["Nats-Msg-Id"] == command.command_id
        assert uuid.UUID(command.command_id).version == 4
        assert (command.actor, command.provider, command.model, command.reference) == (
            "alice", "lambda/fp8", MODEL, "INC-7")

        code, out, err = await canary(infra, "override", "list")
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith(f"{MODEL}: snapshot v{version} at ") and lines[0].endswith(
            '1 ignored now: ["lambda/fp8"]')
        assert lines[1] == "  lambda/fp8"
        assert re.fullmatch(rf"    override    incident 42  actor alice  since {STAMP}  until {match.group(1)}"
                            rf"  ref INC-7", lines[2]), lines[2]


async def _has_snapshot(infra) -> bool:
    try:
        await snapshot_version(infra)
        return True
    except nats.js.errors.KeyNotFoundError:
        return False


@pytest.mark.integration
async def test_override_remove_prints_the_new_version_and_a_missing_one_the_routers_reason(secured):
    """remove takes the override out (new version); removing it again exits 1 with the router's dead-letter reason."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        code, out, err = await canary(infra, "override", "add", "lambda/fp8", "--reason", "incident 42")
        assert code == 0, err
        assert re.match(rf"override added: lambda/fp8 on every model \(\*\): incident 42 \(alice\) until ({STAMP}) "
                        r"\(the longest an override lasts, 365 d; --for or --expires for less\) — snapshot v", out), out
        version = await snapshot_version(infra)

        code, out, err = await canary(infra, "override", "remove", "lambda/fp8", "--reason", "fixed upstream")
        assert code == 0, err
        assert out == (f"override removed: lambda/fp8 on every model (*): fixed upstream (alice) — "
                       f"snapshot v{version + 1}: ignore [] ({MODEL})\n")
        assert await snapshot_version(infra) == version + 1

        code, out, err = await canary(infra, "override", "remove", "lambda/fp8")
        assert code == 1
        assert "the router refused command" in err
        assert "rejected: no override of lambda/fp8 for * to remove" in err
        assert await snapshot_version(infra) == version + 1


@pytest.mark.integration
async def test_a_command_without_the_operator_credential_is_not_stored(secured):
    """As the backend user NATS refuses the command's requests: exit 1 naming the credential, nothing in the log."""
    infra = secured
    await ensure_streams(settings_for(infra))
    code, out, err = await canary(infra, "override", "add", "x/fp8", "--reason", "r", "--timeout", "2",
                                  user="backend")
    assert code == 1 and out == ""
    assert err.startswith("error: ") and "NATS_USER is backend" in err and "Traceback" not in err
    nc, js = await admin_js(infra)
    info = await js.stream_info(LOG, subjects_filter=subjects.ALL_OPS)
    await nc.close()
    assert not info.state.subjects


@pytest.mark.integration
async def test_without_a_router_the_command_times_out_with_exit_1(secured):
    """No router running: the command is stored, the CLI says nobody answered in time and exits 1."""
    infra = secured
    await ensure_streams(settings_for(infra))
    started = time.monotonic()
    code, out, err = await canary(infra, "override", "add", "x/fp8", "--reason", "r", "--timeout", "1.5")
    assert code == 1 and out == ""
    assert "no answer from the router within 1.5 s" in err and "is in the log at #1" in err
    assert time.monotonic() - started < 15


# -- lift, mode -------------------------------------------------------------------------------------


@pytest.mark.integration
async def test_lift_ends_a_suspension_and_prints_the_judges_decision(secured):
    """After two failed cycles the judge suspends; canary lift prints its end decision and routing drops it."""
    infra = secured
    settings = settings_for(infra)
    await ensure_streams(settings)
    async with running(settings, ["router", "judge"], passwords=infra.passwords):
        await _two_failed_cycles(infra, "bad/fp8")
        await waits.until(lambda: _ignored(infra, "bad/fp8"), timeout_s=15, what="bad/fp8 suspended in the snapshot")

        code, out, err = await canary(infra, "lift", "bad/fp8", "--reason", "false alarm", "--model", MODEL)
        assert code == 0, err
        first, second = out.splitlines()
        assert first.startswith(f"lift published: bad/fp8 on {MODEL}: false alarm (alice), command ")
        assert re.fullmatch(rf"suspension lifted: bad/fp8 on {MODEL} — decision end at {STAMP}: "
                            r"lifted by alice: false alarm", second), second
        await waits.until(lambda: _not_ignored(infra, "bad/fp8"), timeout_s=10, what="bad/fp8 lifted from the snapshot")

        code, out, err = await canary(infra, "lift", "bad/fp8", "--reason", "again", "--model", MODEL)
        assert code == 1
        assert f"lifted nothing: bad/fp8 is not suspended on {MODEL}" in err


async def _ignored(infra, provider: str) -> bool:
    return await _has_snapshot(infra) and provider in await snapshot_ignore(infra)


async def _not_ignored(infra, provider: str) -> bool:
    return provider not in await snapshot_ignore(infra)


async def _two_failed_cycles(infra, bad: str) -> None:
    """Publish (as admin) two cycles in which ``bad`` fails time to first token and three others pass."""
    outcomes = healthy(bad, "a/fp8", "b/fp8", "c/fp8")
    outcomes[bad]["ttft"] = ("fail", "ttft_exceeded")
    start = datetime.now(timezone.utc) - timedelta(hours=2)
    nc, js = await admin_js(infra)
    try:
        for n in range(2):
            await publish_events(js, cycle_events(n, outcomes, model=MODEL, start=start + timedelta(minutes=30 * n)))
    finally:
        await nc.close()


@pytest.mark.integration
async def test_mode_publishes_the_command_and_the_judge_applies_it(secured):
    """canary mode prints the published SetMode; the judge answers with a mode_changed decision."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["judge"], passwords=infra.passwords):
        code, out, err = await canary(infra, "mode", "observe", "--kind", "ttft", "--model", MODEL,
                                      "--reason", "new threshold")
        assert code == 0, err
        published, changed, now = out.splitlines()
        assert re.fullmatch(rf"mode published: observe for probe kind ttft on {MODEL}: new threshold \(alice\), "
                            r"command [0-9a-f-]{36}, log #1", published), out
        # the judge's answer: what changed, in the judge's words
        assert changed == f"mode changed on {MODEL}: probe kind ttft: enforce -> observe by alice (new threshold)"
        assert now == f"modes now {MODEL}: probe kind ttft observe"  # read back from the judge's state
        nc, js = await admin_js(infra)
        try:
            command = codec.COMMAND.decode((await js.get_last_msg(LOG, subjects.ops("mode"))).data)
            assert (command.mode, command.kind, command.model) == ("observe", "ttft", MODEL)

            async def decided() -> bool:
                try:
                    msg = await js.get_last_msg(LOG, subjects.decision(MODEL, None))
                except nats.js.errors.NotFoundError:
                    return False
                d = codec.DECISION.decode(msg.data)
                return d.action == "mode_changed" and d.decision_id.endswith(command.command_id)

            await waits.until(decided, timeout_s=10, what="the judge's mode_changed decision for the command")
        finally:
            await nc.close()
        # the same command again changes nothing, and says so
        code, out, err = await canary(infra, "mode", "observe", "--kind", "ttft", "--model", MODEL)
        assert code == 0, err
        assert out.splitlines()[1:] == [f"nothing changed, the mode already was: {MODEL}: probe kind ttft observe"]

        code, _, err = await canary(infra, "mode", "sideways")
        assert code == 2 and "mode must be observe or enforce" in err


# -- exclusions ------------------------------------------------------------------------------------------

ENTRY = ('[[exclusion]]\nprovider = "{p}"\nmodel = "*"\nreason = "measured defect"\nreference = "T-1"\n'
         'date = 2026-01-01\n')


@pytest.mark.integration
async def test_exclusions_reload_refuses_a_bad_file_naming_its_line_and_applies_a_good_one(secured, tmp_path):
    """reload of an invalid file exits 1 with the router's reason (file and line); a valid one is applied."""
    infra = secured
    path = tmp_path / "exclusions.toml"
    path.write_text(ENTRY.format(p="parasail/fp8"))
    settings = settings_for(infra, exclusions_file=str(path))
    await ensure_streams(settings)
    async with running(settings, ["router"], passwords=infra.passwords):
        await waits.until(lambda: _ignored(infra, "parasail/fp8"), timeout_s=10, what="parasail/fp8 in the snapshot")
        version = await snapshot_version(infra)
        path.write_text(ENTRY.format(p="parasail/fp8") + "\n" + ENTRY.replace("reason", "colour").format(p="x"))
        code, out, err = await canary(infra, "exclusions", "reload", "--reason", "review 12")
        assert code == 1, out
        assert f"exclusions not reloaded, the old ones stay: {path}:8: exclusion is missing ['reason']" in err
        assert await snapshot_version(infra) == version

        path.write_text(ENTRY.format(p="parasail/fp8") + "\n" + ENTRY.format(p="novita/bf16"))
        code, out, err = await canary(infra, "exclusions", "reload")
        assert code == 0, err
        # the router's own file watch may have been first: then the command changes nothing
        assert re.fullmatch(rf"exclusions reloaded \(alice\) — (snapshot v{version + 1}: ignore "
                            rf"\[\"novita/bf16\", \"parasail/fp8\"\] \({re.escape(MODEL)}\)|no snapshot changed "
                            rf"\(current: {re.escape(MODEL)} v{version + 1}\))\n", out), out
        assert await snapshot_ignore(infra) == ["novita/bf16", "parasail/fp8"]


async def test_explain_names_a_positive_control_and_refuses_an_unknown_provider(secured):
    """explain of the configured control says what it is (exit 0); of an unknown provider, exit 1 with the known."""
    infra = secured
    config = infra.workdir / "ctl.toml"
    config.write_text('controls = {refusal = "ctl/strict"}\n')
    code, out, err = await canary(infra, "explain", "ctl/strict", "--config", str(config))
    assert code == 0, err
    assert "positive control for refusal" in out
    code, out, err = await canary(infra, "explain", "nosuch/fp8")
    assert code == 1 and "nosuch/fp8 is unknown to the judge" in err


# -- answers and guard rails -------------------------------------------------------------------------------


async def _answers_of(infra, command_id: str) -> list:
    """Every answer the log holds for ``command_id``, with its Nats-Msg-Id."""
    nc, js = await admin_js(infra)
    try:
        sub = await js.subscribe(subjects.answers_to(command_id), stream=LOG, ordered_consumer=True)
        out = []
        while True:
            try:
                msg = await sub.next_msg(timeout=1.0)
            except nats.errors.TimeoutError:
                break
            out.append((msg.headers.get("Nats-Msg-Id"), msg.subject, codec.ANSWER.decode(msg.data)))
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()


async def _list_endpoints(infra, *providers: str) -> None:
    """Publish (as admin) discovery's listing of ``providers`` for MODEL, and wait until the router took it.

    The router republishes the snapshot when it takes a listing (the endpoints' display names
    travel with it); a test that reads the version before that reads the one before it.
    """
    from tests.judge_events import cycle_events

    discovered = cycle_events(0, healthy(*providers), model=MODEL, start=datetime.now(timezone.utc))[0]
    nc, js = await admin_js(infra)
    try:
        await publish_events(js, [discovered])
    finally:
        await nc.close()

    async def taken() -> bool:
        nc, js = await admin_js(infra)
        try:
            entry = await (await js.key_value(ROUTING_BUCKET)).get(subjects.kv_key(MODEL))
            return set(providers) <= set(codec.SNAPSHOT.decode(entry.value).names)
        finally:
            await nc.close()

    await waits.until(taken, timeout_s=10, what="the router's snapshot with the listing's names")


def _command_id(out: str) -> str:
    nc_log = re.search(r"command ([0-9a-f-]{36})", out)
    assert nc_log, out
    return nc_log.group(1)


@pytest.mark.integration
async def test_each_command_is_answered_by_one_event_on_its_owners_subject(secured):
    """override add: one CommandApplied on canary.answers.router.<id>, id answer|<id>, naming the version made."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        await waits.until(lambda: _has_snapshot(infra), timeout_s=10, what="the router's first snapshot")
        code, out, err = await canary(infra, "override", "add", "lambda/fp8", "--reason", "incident 42",
                                      "--model", MODEL)
        assert code == 0, err
        nc, js = await admin_js(infra)
        command = codec.COMMAND.decode((await js.get_last_msg(LOG, subjects.ops("override-add"))).data)
        await nc.close()
        [(msg_id, subject, answer)] = await _answers_of(infra, command.command_id)
    assert (msg_id, subject) == (f"answer|{command.command_id}", subjects.answer("router", command.command_id))
    assert (type(answer).__name__, answer.service, answer.actor, answer.command) == (
        "CommandApplied", "router", "alice", "override-add")
    [made] = answer.snapshots
    assert (made.model, made.version, made.ignore) == (MODEL, await snapshot_version(infra), ["lambda/fp8"])
    # before any discovery the router could not check the provider: the operator is told
    assert f"warning: no endpoint listing known yet for {MODEL} (discovery has not run)" in err


@pytest.mark.integration
async def test_guard_rails_refuse_an_unlisted_provider_and_a_broken_floor_unless_forced(secured):
    """Against the listed endpoints: a typo is refused, a forced one warned; the floor holds unless --force."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["router"], passwords=infra.passwords):
        await waits.until(lambda: _has_snapshot(infra), timeout_s=10, what="the router's first snapshot")
        await _list_endpoints(infra, "a/fp8", "b/fp8", "c/fp8")
        version = await snapshot_version(infra)

        code, out, err = await canary(infra, "override", "add", "nosuch/fp8", "--reason", "typo", "--model", MODEL)
        assert code == 1 and out == ""
        assert (f"rejected: nosuch/fp8 is not listed by the gateway for {MODEL} (it lists a/fp8, b/fp8, c/fp8); "
                "check the name; add --force to apply it anyway") in err
        assert await snapshot_version(infra) == version

        code, out, err = await canary(infra, "override", "add", "nosuch/fp8", "--reason", "really", "--model", MODEL,
                                      "--force")
        assert code == 0, err
        assert f"warning: forced past a guard rail: nosuch/fp8 is not listed by the gateway for {MODEL}" in err

        code, out, err = await canary(infra, "override", "add", "a/fp8", "--reason", "incident 1", "--model", MODEL)
        assert code == 0 and err == "", err
        code, out, err = await canary(infra, "override", "add", "b/fp8", "--reason", "incident 2", "--model", MODEL)
        assert code == 1
        assert (f"rejected: overriding b/fp8 would leave 1 usable host(s) for {MODEL} (c/fp8), below the capacity "
                "floor of 2; add --force to apply it anyway") in err
        code, out, err = await canary(infra, "override", "add", "b/fp8", "--reason", "incident 2", "--model", MODEL,
                                      "--force")
        assert code == 0, err
        assert (f"warning: the capacity floor is broken by this command: {MODEL} keeps 1 usable host(s) (c/fp8), "
                "below the floor of 2") in err
        assert await snapshot_ignore(infra) == ["a/fp8", "b/fp8", "nosuch/fp8"]
        nc, js = await admin_js(infra)
        forced = codec.COMMAND.decode((await js.get_last_msg(LOG, subjects.ops("override-add"))).data)
        await nc.close()
        [(_, _, answer)] = await _answers_of(infra, forced.command_id)
    assert answer.forced and [(b.model, b.min_hosts, b.usable) for b in answer.floor_broken] == [
        (MODEL, 2, ["c/fp8"])]


@pytest.mark.integration
async def test_a_mode_or_lift_for_a_model_the_judge_does_not_watch_is_refused(secured):
    """mode enforce --model nosuch/model: the judge refuses it by name (exit 1), and no mode changes."""
    infra = secured
    await ensure_streams(settings_for(infra))
    async with running(settings_for(infra), ["judge"], passwords=infra.passwords):
        code, out, err = await canary(infra, "mode", "enforce", "--model", "nosuch/model")
        assert code == 1
        assert out.startswith("mode published: enforce for all probe kinds on nosuch/model")
        assert re.search(rf"error: the judge refused command [0-9a-f-]{{36}} \(log #1\): nosuch/model is not a "
                         rf"watched model \(watched: {re.escape(MODEL)}\); use \* for every model", err), err
        code, out, err = await canary(infra, "lift", "a/fp8", "--reason", "r", "--model", "nosuch/model")
        assert code == 1 and "lifted nothing: nosuch/model is not a watched model" in err
        [(_, subject, answer)] = await _answers_of(infra, _command_id(out))
    assert subject.startswith("canary.answers.judge.") and answer.code == "unknown_model"
