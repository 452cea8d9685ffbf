"""The message contract as AsyncAPI 3.0: valid, complete, and the committed file is current."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from reverie_canary.canary.asyncapi import DOCUMENT_PATH, document, nats_permissions, overlaps, render
from reverie_canary.shared.contract.codec import WIRE_TYPES

ROOT = Path(__file__).resolve().parents[2]
#: The AsyncAPI 3.0.0 JSON Schema, from the @asyncapi/specs package (6.11.1, schemas/3.0.0-without-$id.json,
#: Apache-2.0: LICENSE beside it).
SCHEMA = Path(__file__).resolve().parents[1] / "data" / "asyncapi" / "asyncapi-3.0.0.schema.json"


@pytest.fixture(scope="module")
def doc() -> dict:
    return document()


def test_the_document_is_valid_asyncapi_3(doc):
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(doc)


def test_a_broken_document_is_caught_by_the_same_schema(doc):
    """The validation can fail: a channel without its address object shape is refused."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    broken = json.loads(json.dumps(doc))
    broken["channels"]["results"]["address"] = 42
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(broken)


def test_the_committed_document_is_what_the_code_generates():
    kept = (ROOT / DOCUMENT_PATH).read_text(encoding="utf-8")
    assert kept == render(), f"{DOCUMENT_PATH} is stale: run `canary asyncapi --write` and commit it"


def test_every_wire_type_is_a_message_on_some_channel(doc):
    on_channels = {name for ch in doc["channels"].values() for name in ch["messages"]}
    assert on_channels == set(doc["components"]["messages"]) == {t.__name__ for t in WIRE_TYPES}


def test_senders_are_who_nats_lets_publish(doc):
    ops = doc["operations"]
    senders = {(op["x-canary-user"], op["channel"]["$ref"].rsplit("/", 1)[1]) for op in ops.values()
               if op["action"] == "send"}
    assert ("judge", "decisions") in senders and ("prober", "results") in senders
    assert ("router", "routing-kv") in senders and ("operator", "ops") in senders
    assert not {s for s in senders if s[1] == "decisions" and s[0] != "judge"}  # only the judge decides
    # a chat backend publishes its counts (served-by, and its guard's live outcomes) and nothing else; the dashboard
    # nothing at all
    assert {s for s in senders if s[0] == "backend"} == {("backend", "served"), ("backend", "live")}
    assert not {s for s in senders if s[0] == "dashboard"}
    receives = {(op["x-canary-user"], op["channel"]["$ref"].rsplit("/", 1)[1]) for op in ops.values()
                if op["action"] == "receive"}
    assert {("judge", "results"), ("router", "decisions"), ("prober", "tasks"), ("backend", "routing-kv"),
            ("dashboard", "served"), ("dashboard", "verdicts")} <= receives
    judge_ops = ops["judge-receives-ops"]["messages"]
    assert {m["$ref"].rsplit("/", 1)[1] for m in judge_ops} == {"LiftSuspension", "SetMode"}


def test_streams_consumers_and_permissions_are_carried(doc):
    assert {"CANARY_LOG", "CANARY_TASKS", "CANARY_DEADLETTER"} <= set(doc["x-canary-streams"])
    assert doc["x-canary-streams"]["CANARY_TASKS"]["retention"] == "workqueue"
    assert doc["x-canary-consumers"]["judge-v1"]["maxAckPending"] == 256  # one batch
    assert doc["x-canary-permissions"]["prober"]["publish"][-2:] == ["canary.results.>", "canary.deadletter.prober"]
    assert doc["x-canary-permissions"]["admin"] == {"publish": [">"], "subscribe": [">"]}


@pytest.mark.parametrize("a, b, expected", [
    ("canary.results.>", "canary.results.*.*", True),
    ("canary.deadletter.prober", "canary.deadletter.*", True),
    ("canary.deadletter.prober", "canary.decisions.*.*", False),
    ("canary.notices.dead.>", "canary.notices.resent", False),
    ("canary.notices.resent", "canary.notices.resent", True),
    ("$KV.canary-routing.>", "$KV.canary-routing.*", True),
    ("canary.tasks.*", "canary.tasks.*.*", False),
    (">", "canary.ops.*", True),
])
def test_overlaps(a, b, expected):
    assert overlaps(a, b) is expected and overlaps(b, a) is expected


def test_permissions_reader_refuses_a_deny_list():
    with pytest.raises(ValueError, match="deny"):
        nats_permissions('{ user: x, permissions: { publish: { deny: ["a"] } } }')


def test_canary_asyncapi_check_says_whether_the_file_is_current():
    out = subprocess.run([sys.executable, "-m", "reverie_canary.canary", "asyncapi", "--check"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "is what the code generates" in out.stdout
