"""A client across router stores: a rollback within one store refused and said; a new store accepted and said.

Versions restart at 1 when the router's store is new (a fresh deployment, another
cluster); the epoch in the snapshot tells a chat backend that version 4 of the new
store follows version 7 of the old one.  Without it the client kept the cached v7
forever while saying it was healthy.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from reverie_canary.client import IgnoreListClient, snapshot_bytes
from reverie_canary.client.wire import IgnoreEntry, IgnoreReason, IgnoreSnapshot

MODEL = "deepseek/deepseek-chat-v3.1"
AT = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def snap(version: int, *providers: str, epoch: str = "") -> bytes:
    entries = [IgnoreEntry(provider=p, reasons=[IgnoreReason(layer="suspension", reason="failed cycles")])
               for p in providers]
    return snapshot_bytes(IgnoreSnapshot(at=AT, model=MODEL, version=version, entries=entries, epoch=epoch))


def client(tmp_path=None) -> IgnoreListClient:
    return IgnoreListClient("nats://127.0.0.1:1", MODEL, cache_path=None if tmp_path is None else tmp_path / "c.json",
                            now=lambda: AT)


def test_a_cached_v7_of_an_old_store_gives_way_to_v4_of_the_new_one(tmp_path, caplog):
    """The reported case: cache v7 [baseten, lambda], live v4 [lambda] of a new store: v4 is served, and said."""
    (tmp_path / "c.json").write_bytes(snap(7, "baseten/fp8", "lambda/fp8", epoch="20261001T000000Z-aaaaaaaaaaaa"))
    c = client(tmp_path)
    c._load_cache()
    assert (c.version, c.ignore()) == (7, ["baseten/fp8", "lambda/fp8"])
    with caplog.at_level(logging.WARNING, logger="reverie_canary.client"):
        assert c.apply(snap(4, "lambda/fp8", epoch="20261101T000000Z-bbbbbbbbbbbb")) is True
    assert (c.version, c.epoch, c.ignore()) == (4, "20261101T000000Z-bbbbbbbbbbbb", ["lambda/fp8"])
    health = c.health()
    assert (health.problem, health.epoch_changes, health.refused) == (None, 1, 0)
    assert [r.canary["event"] for r in caplog.records] == ["snapshot_epoch_changed"]
    assert b"20261101T000000Z-bbbbbbbbbbbb" in (tmp_path / "c.json").read_bytes()  # the cache follows


def test_a_cache_from_a_router_without_epochs_gives_way_to_a_new_store(tmp_path):
    """A v7 written before epochs existed ("") and v4 of a store with an epoch: another store, v4 served."""
    (tmp_path / "c.json").write_bytes(snap(7, "baseten/fp8", "lambda/fp8"))
    c = client(tmp_path)
    c._load_cache()
    assert c.apply(snap(4, "lambda/fp8", epoch="20261101T000000Z-bbbbbbbbbbbb")) is True
    assert c.ignore() == ["lambda/fp8"]


def test_a_rollback_within_one_store_is_refused_and_said_until_a_newer_version_comes(caplog):
    """v4 after v7 of the same epoch: refused, in problem, in the counter and the log (once per version)."""
    c = client()
    epoch = "20261101T000000Z-bbbbbbbbbbbb"
    assert c.apply(snap(7, "baseten/fp8", epoch=epoch))
    with caplog.at_level(logging.WARNING, logger="reverie_canary.client"):
        for _ in range(3):  # the watch, then the periodic reads, deliver the same old value again
            assert c.apply(snap(4, "lambda/fp8", epoch=epoch)) is False
    assert (c.version, c.ignore()) == (7, ["baseten/fp8"])
    health = c.health()
    assert (health.refused_rollbacks, health.refused, health.epoch_changes) == (3, 3, 0)
    assert health.problem is not None and health.problem.startswith("refusing v4 from the bus: v7 of the same store")
    assert [r.canary["event"] for r in caplog.records] == ["snapshot_refused"]
    assert c.apply(snap(8, "lambda/fp8", epoch=epoch)) is True
    assert (c.problem, c.version) == (None, 8)


def test_the_same_version_again_changes_nothing_and_is_not_a_refusal():
    """Equal version, same epoch: not applied, not counted (a redelivery of what is served)."""
    c = client()
    assert c.apply(snap(3, "a/fp8", epoch="e1"))
    assert c.apply(snap(3, "a/fp8", epoch="e1")) is False
    assert (c.refused, c.problem) == (0, None)
