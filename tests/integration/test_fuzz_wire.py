"""Every subscribed subject of every service, fuzzed with hypothesis on real NATS and Redis.

Random bytes, truncated JSON, wrong types, huge fields, unknown types, other
schema versions and valid messages on the wrong subject, on each subject a
service consumes (derived from ``shared/contract/inputs.py`` and the consumers of
``shared/runtime/streams.py``, so a new subscription is fuzzed without a list to keep):
each message is refused by each service that reads the subject, with the reason
its own strict decoder gives (a dead letter in ``CANARY_DEADLETTER`` and the
``canary_dead_letters_total`` counter), the services keep consuming, and nothing
else changes: no Redis key, no KV revision, no message on any output subject.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections import Counter
from dataclasses import dataclass

import msgspec
import nats
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats.js.api import DeliverPolicy

from reverie_canary.canary.runtime import running
from reverie_canary.services.judge.service import JUDGE_INPUT
from reverie_canary.services.notifier.service import NOTIFIER_INPUT
from reverie_canary.services.router.service import ROUTER_INPUT
from reverie_canary.shared.contract import codec, inputs, subjects
from reverie_canary.shared.contract.commands import VERBS, AddOverride
from reverie_canary.shared.contract.errors import Oversize, Rejected, TooLarge, Undecodable, UnsupportedVersion
from reverie_canary.shared.contract.events import ProbeTask, RetestRequested
from reverie_canary.shared.runtime import metrics, streams
from reverie_canary.shared.runtime.clock import now
from reverie_canary.shared.runtime.service import ensure_streams
from reverie_canary.shared.runtime.settings import Settings
from tests import waits
from tests.judge_events import cycle_events, healthy, publish_events
from tests.wire_samples import smallest

pytestmark = pytest.mark.integration

MODEL = "a"  # what the smallest valid messages name: model "a", provider "a"
DECODERS = {"judge": JUDGE_INPUT, "router": ROUTER_INPUT, "notifier": NOTIFIER_INPUT, "prober": codec.PROBE_TASK,
            "discovery": codec.RETEST, "notifier-resend": codec.RESEND}
#: Which service a dead letter names for each consumer above.
SERVICE = {"notifier-resend": "notifier"}


@dataclass(frozen=True)
class Target:
    """One subscribed subject: who consumes it and which message types belong there."""

    subject: str
    consumers: tuple[str, ...]
    types: tuple[type, ...]


def _family_subject(family: str, type_: type) -> str:
    return {
        "discovery": subjects.discovery(MODEL), "results": subjects.result(MODEL, "a"),
        "routing": subjects.routing(MODEL), "decisions": subjects.decision(MODEL, "a"),
        "verdicts": subjects.verdicts(MODEL), "answers": subjects.answer("a", "a"),
        "tasks": subjects.task(MODEL, "a"), "retest": subjects.retest(MODEL),
        "ops": subjects.ops(VERBS.get(type_, "lift")), "notices": subjects.NOTICES_RESEND,
        "cycles": subjects.CYCLES_SIZED, "confirmations": subjects.confirmation(MODEL, "a"),
    }[family]


def targets() -> list[Target]:
    """Every subject some service consumes, with its consumers (from the services' own tables)."""
    families: dict[str, set[str]] = {}
    for service, reads in inputs.READS.items():
        for family in reads:
            families.setdefault(family, set()).add(service)
    families.setdefault("tasks", set()).add("prober")
    families.setdefault("retest", set()).add("discovery")
    families.setdefault("notices", set()).add("notifier-resend")
    out = []
    for family, consumers in sorted(families.items()):
        arriving = (codec.NOTICE_ORIGINS["resend"],) if family == "notices" else codec.ORIGINS[family]
        by_subject: dict[str, list[type]] = {}
        for t in arriving:
            by_subject.setdefault(_family_subject(family, t), []).append(t)
        out.extend(Target(subject, tuple(sorted(consumers)), tuple(types)) for subject, types in by_subject.items())
    return out


TARGETS = targets()


def refusal(target: Target, body: bytes) -> dict[str, str] | None:
    """The dead-letter reason each consumer of ``target`` gives ``body`` (as the settle table says); ``None``
    when some consumer accepts it (then it is not garbage for this subject)."""
    out = {}
    for consumer in target.consumers:
        try:
            event = DECODERS[consumer].decode(body)
            codec.check_origin(target.subject, event)
        except UnsupportedVersion:
            out[SERVICE.get(consumer, consumer)] = "unsupported_version"
        except Oversize:
            out[SERVICE.get(consumer, consumer)] = "oversize"
        except Undecodable:
            out[SERVICE.get(consumer, consumer)] = "undecodable"
        except TooLarge:
            out[SERVICE.get(consumer, consumer)] = "too_large"
        except Rejected:
            out[SERVICE.get(consumer, consumer)] = "rejected"
        else:
            return None
    return out


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                      max_size=3), max_leaves=6)


def _as_dict(message) -> dict:
    return msgspec.json.decode(codec.encode(message))


@st.composite
def garbage(draw, target: Target) -> tuple[str, bytes]:
    """One payload of one kind for ``target``: (kind, bytes)."""
    own = [_as_dict(smallest(t)) for t in target.types]
    kind = draw(st.sampled_from(["bytes", "truncated", "wrong_type", "huge_field", "unknown_type", "version",
                                 "wrong_subject"]))
    base = draw(st.sampled_from(own))
    match kind:
        case "bytes":
            body = draw(st.binary(min_size=0, max_size=300))
        case "truncated":
            whole = msgspec.json.encode(base)
            body = whole[:draw(st.integers(0, len(whole) - 1))]
        case "wrong_type":
            key = draw(st.sampled_from(sorted(k for k in base if k != "type")))
            body = msgspec.json.encode({**base, key: draw(JSON_VALUES)})
        case "huge_field":
            key = draw(st.sampled_from(sorted(k for k, v in base.items() if isinstance(v, str) and k != "type")))
            size = draw(st.sampled_from([300, 5_000, 70_000, 600_000, 1_000_000]))  # bytes of JSON, at most
            char = draw(st.sampled_from("x\x01é\""))
            body = msgspec.json.encode({**base, key: char * (size // len(msgspec.json.encode(char)[1:-1]))})
        case "unknown_type":
            body = msgspec.json.encode({**base, "type": draw(st.text(max_size=20))})
        case "version":
            body = msgspec.json.encode({**base, "v": draw(st.integers(-2**40, 2**40).filter(lambda v: v != 1))})
        case _:
            elsewhere = [t for t in codec.WIRE_TYPES if t not in target.types]
            body = codec.encode(smallest(draw(st.sampled_from(elsewhere))))
    return kind, body


def one_of_each_kind(target: Target) -> dict[str, bytes]:
    """One payload of each kind for ``target``, chosen without hypothesis (the same every run)."""
    base = _as_dict(smallest(target.types[0]))
    text = next(k for k, v in base.items() if isinstance(v, str) and k != "type")
    field = next(k for k in base if k not in ("type", "v"))
    elsewhere = next(t for t in codec.WIRE_TYPES if t not in target.types)
    whole = msgspec.json.encode(base)
    return {
        "bytes": b"\xff\xfe not json",
        "truncated": whole[: len(whole) // 2],
        "wrong_type": msgspec.json.encode({**base, field: {"x": [[[[[1]]]]]}}),
        "huge_field": msgspec.json.encode({**base, text: "x" * 600_000}),
        "unknown_type": msgspec.json.encode({**base, "type": "no_such_type"}),
        "version": msgspec.json.encode({**base, "v": 99}),
        "wrong_subject": codec.encode(smallest(elsewhere)),
    }


@st.composite
def batches(draw) -> list[tuple[Target, str, bytes, dict[str, str]]]:
    """A few garbage payloads, each on a subscribed subject, with the refusal each consumer must give."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        target = draw(st.sampled_from(TARGETS))
        kind, body = draw(garbage(target))
        reasons = refusal(target, body)
        if reasons is None:  # valid after all (a wrong type that is a right type): not garbage
            continue
        out.append((target, kind, body, reasons))
    return out


def fuzz_settings(infra) -> Settings:
    """Services that only consume: no cycle within the test (a 115-day interval), no gateway."""
    return Settings.load(env={}, nats_url=infra.nats_url, redis_url=infra.redis_url, namespace=infra.namespace,
                         models=[MODEL], mode="enforce", cycle_interval_s=10**7, probe_window_s=600,
                         openrouter_base_url="http://127.0.0.1:9/api/v1", retry_delay_s=0.2,
                         prober_concurrency=2)


OUTPUT_FAMILIES = ("discovery", "results", "verdicts", "decisions", "retest", "routing", "answers", "router")


@dataclass(repr=False)
class Bus:
    """The running services and what the test reads: NATS, Redis, the dead letters."""

    settings: Settings
    nc: nats.NATS
    js: object
    redis: aioredis.Redis
    letters: list

    async def state(self) -> dict:
        """Everything the services keep: every Redis key's value, the KV bucket, the log by subject family."""
        out: dict = {}
        async for key in self.redis.scan_iter(f"{self.settings.namespace}*"):
            kind = (await self.redis.type(key)).decode()
            value = {"string": self.redis.get, "hash": self.redis.hgetall, "set": self.redis.smembers,
                     "zset": lambda k: self.redis.zrange(k, 0, -1, withscores=True),
                     "list": lambda k: self.redis.lrange(k, 0, -1)}[kind](key)
            value = await value
            out[key.decode()] = hashlib.sha256(repr(sorted(value.items()) if isinstance(value, dict)
                                                    else sorted(value) if isinstance(value, set)
                                                    else value).encode()).hexdigest()
        kv = await self.js.stream_info(f"KV_{streams.ROUTING_BUCKET}")
        out["kv"] = (kv.state.messages, kv.state.last_seq)
        log = await self.js.stream_info(streams.LOG, subjects_filter=f"{subjects.PREFIX}.>")
        families = Counter()
        for subject, count in (log.state.subjects or {}).items():
            families[subject.split(".")[1]] += count
        out["log"] = dict(families)
        out["tasks"] = (await self.js.stream_info(streams.TASKS)).state.messages
        return out


@pytest.fixture
async def bus(infra):
    settings = fuzz_settings(infra)
    await ensure_streams(settings)
    nc = await nats.connect(infra.nats_url)
    js = nc.jetstream()
    letters: list = []

    async def on_letter(msg):
        letters.append(codec.DEAD_LETTER.decode(msg.data))
        await msg.ack()

    sub = await js.subscribe(subjects.ALL_DEADLETTER, stream=streams.DEADLETTER, cb=on_letter,
                             deliver_policy=DeliverPolicy.NEW, manual_ack=True)
    client = aioredis.from_url(infra.redis_url)
    try:
        async with running(settings):
            yield Bus(settings, nc, js, client, letters)
    finally:
        await sub.unsubscribe()
        await client.aclose()
        await nc.close()


def _counted(service: str, reason: str) -> float:
    return (metrics.of(service).sample_value("canary_dead_letters_total", service=service, reason=reason) or 0.0)


def _acks(service: str) -> float:
    return metrics.of(service).sample_value("canary_messages_total", service=service, outcome="ack") or 0.0


def _terms(service: str) -> float:
    return (metrics.of(service).sample_value("canary_messages_total", service=service, outcome="term") or 0.0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=batches())
async def test_garbage_on_every_subscribed_subject_is_refused_counted_and_changes_nothing(bus, batch):
    """Each payload: one dead letter per consumer with its reason, counted; the services go on; no state moves."""
    before = await bus.state()
    counted = {(s, r): _counted(s, r) for _, _, _, reasons in batch for s, r in reasons.items()}
    terms = {s: _terms(s) for _, _, _, reasons in batch for s in reasons}
    expected: dict[tuple[str, int], str] = {}
    published = Counter()
    for target, _kind, body, reasons in batch:
        ack = await bus.js.publish(target.subject, body, headers={"Nats-Msg-Id": uuid.uuid4().hex})
        published[target.subject.split(".")[1]] += ack.stream == streams.LOG
        for service, reason in reasons.items():
            expected[(service, ack.seq, target.subject)] = reason

    def refused() -> dict:
        return {(dl.service, dl.stream_seq, dl.subject): dl.reason for dl in bus.letters
                if (dl.service, dl.stream_seq, dl.subject) in expected}

    await waits.until(lambda: len(refused()) == len(expected), timeout_s=30,
                      what=f"{len(expected)} dead letters for {[(t.subject, k) for t, k, _, _ in batch]}")
    assert refused() == expected
    letters = Counter((s, r) for (s, _, _), r in expected.items())
    for (service, reason), n in letters.items():
        assert _counted(service, reason) - counted[(service, reason)] == n, (service, reason)
    for service in terms:  # each consumer terminated what it refused, and so kept consuming
        refused_here = sum(1 for (s, _, _) in expected if s == service)
        await waits.until(lambda s=service, n=refused_here: _terms(s) - terms[s] >= n, timeout_s=10,
                          what=f"the {service} to terminate the {refused_here} messages it refused")
        assert _terms(service) - terms[service] == refused_here

    after = await bus.state()
    for family, n in published.items():
        before["log"][family] = before["log"].get(family, 0) + n
    logged = {f: (before["log"].get(f, 0), after["log"].get(f, 0))
              for f in set(before["log"]) | set(after["log"]) if before["log"].get(f, 0) != after["log"].get(f, 0)}
    assert logged == {}  # messages by subject family: the garbage itself, nothing more
    changed = {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
               if k != "log" and before.get(k) != after.get(k)}
    assert changed == {}


async def test_services_still_work_after_every_kind_of_garbage(bus):
    """One payload of each kind on every subject, then real work: a cycle judged, an override routed, a task
    probed, a retest remembered, a decision read by the notifier."""
    for target in TARGETS:
        for kind, body in one_of_each_kind(target).items():
            assert refusal(target, body) is not None, (target.subject, kind)
            await bus.js.publish(target.subject, body, headers={"Nats-Msg-Id": uuid.uuid4().hex})
    total = sum(len(t.consumers) for t in TARGETS) * 7
    await waits.until(lambda: len(bus.letters) >= total, timeout_s=60, what=f"{total} dead letters")

    acks = {s: _acks(s) for s in ("judge", "router", "notifier", "prober",
                                                                         "discovery")}
    verdicts = asyncio.Event()

    async def on_verdict(msg):
        verdicts.set()

    await bus.nc.subscribe(subjects.ALL_VERDICTS, cb=on_verdict)
    await publish_events(bus.js, cycle_events(0, healthy("a", "b/fp8", "c/fp8"), model=MODEL))
    await waits.within(verdicts.wait(), timeout_s=20, what="the judge's verdict of a valid cycle after the garbage")

    command = AddOverride(command_id="c-after", actor="alice", at=now(), provider="b/fp8", model=MODEL,
                          reason="after the garbage", force=True)
    await bus.js.publish(subjects.ops("override-add"), codec.encode(command), headers={"Nats-Msg-Id": "c-after"})
    retest = RetestRequested(at=now(), model=MODEL, provider="a", language="pt", for_cycle_no=9)
    await bus.js.publish(subjects.retest(MODEL), codec.encode(retest), headers={"Nats-Msg-Id": "r-after"})
    task = msgspec.structs.replace(smallest(ProbeTask), deadline=now().replace(year=now().year + 1))
    await bus.js.publish(subjects.task(MODEL, "a"), codec.encode(task), headers={"Nats-Msg-Id": "t-after"})
    for service in acks:
        await waits.until(lambda s=service: _acks(s) > acks[s], timeout_s=20,
                          what=f"the {service} to apply a valid message after the garbage")


async def test_a_version_99_decision_no_longer_suspends_anyone(bus):
    """The field report: a ``v: 99`` suspend decision reached the router as version 1. Now it is refused by the
    router and the notifier as unsupported_version, and the ignore list stays empty; the same decision as v 1
    suspends."""
    from datetime import timedelta

    from reverie_canary.canary.demo import current_snapshot
    from reverie_canary.shared.contract.events import make_decision

    decision = make_decision(at=now(), decision_id="dec-v99", model=MODEL, provider="a", action="suspend",
                        until=now() + timedelta(days=1), reason="failed_cycles")
    raw = _as_dict(decision)
    ack = await bus.js.publish(subjects.decision(MODEL, "a"), msgspec.json.encode({**raw, "v": 99}),
                               headers={"Nats-Msg-Id": "dec-v99-as-99"})
    await waits.until(lambda: {dl.service for dl in bus.letters if dl.stream_seq == ack.seq} == {"router", "notifier"},
                      timeout_s=15, what="the router and the notifier to refuse the v 99 decision")
    assert {dl.reason for dl in bus.letters if dl.stream_seq == ack.seq} == {"unsupported_version"}
    assert all("unsupported schema version 99 of 'decision'" in dl.error for dl in bus.letters
               if dl.stream_seq == ack.seq)

    async def ignored() -> list[str] | None:
        snap = await current_snapshot(bus.settings, MODEL)
        return None if snap is None else snap.ignore_at(now())

    await waits.holds(lambda: _not_ignoring(ignored), for_s=1.0, what="nobody ignored after the v 99 decision")
    await bus.js.publish(subjects.decision(MODEL, "a"), codec.encode(decision), headers={"Nats-Msg-Id": "dec-v1"})

    async def suspended() -> bool:
        return await ignored() == ["a"]

    await waits.until(suspended, timeout_s=15, what="the v 1 decision to suspend provider a")


async def _not_ignoring(ignored) -> bool:
    return not (await ignored())
