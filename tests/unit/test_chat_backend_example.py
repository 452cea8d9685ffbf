"""examples/chat_backend.py's reply guard: what it prints for a retry, and for a reply the ignore list excluded."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timezone
from pathlib import Path

from reverie_canary.client import IgnoreListClient, ReplyGuard, snapshot_bytes
from reverie_canary.client.wire import IgnoreEntry, IgnoreReason, IgnoreSnapshot

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chat_backend.py"
MODEL = "deepseek/deepseek-chat-v3.1"
AT = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
NAMES = {"deepinfra/fp8": "DeepInfra", "deepinfra/fp4": "DeepInfra", "lambda/fp8": "Lambda"}


def example():
    spec = importlib.util.spec_from_file_location("chat_backend_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def client_ignoring(*tags: str) -> IgnoreListClient:
    """A client (never started: the bus is down) holding a snapshot that ignores ``tags``."""
    client = IgnoreListClient("nats://127.0.0.1:1", MODEL, now=lambda: AT)
    entries = [IgnoreEntry(provider=t, reasons=[IgnoreReason(layer="suspension", reason="failed cycles")]) for t in tags]
    assert client.apply(snapshot_bytes(IgnoreSnapshot(at=AT, model=MODEL, version=2, entries=entries, epoch="e1",
                                                      names=NAMES)))
    return client


def test_the_example_says_when_a_reply_came_from_a_provider_the_ignore_list_excludes(capsys):
    """lambda/fp8 suspended, something on the way drops provider.ignore, Lambda serves the retry: a line says so."""
    ex = example()
    honest = ex.gateway_stand_in

    def dropping(body):  # something on the way drops the canary's entry: lambda/fp8 leaves provider.ignore
        prefs = dict(body.get("provider") or {})
        prefs["ignore"] = [p for p in prefs.get("ignore") or [] if p != "lambda/fp8"]
        return honest({**body, "provider": prefs})

    ex.gateway_stand_in = dropping
    client = client_ignoring("lambda/fp8")
    guard = ReplyGuard(client)
    verdict = ex.guarded_reply(guard, ex.request_body(client, MODEL, "Mira hears a knock."))
    lines = capsys.readouterr().out.splitlines()
    assert verdict.outcome == "pass" and verdict.provider == "Lambda"
    assert lines[-1] == ("  ignore list NOT applied: Lambda served although provider.ignore excludes it "
                         "(something on the way to the gateway dropped the list)")
    assert lines[-2] == "  attempt 2: served by Lambda, pass"
    assert guard.live.take().providers["lambda/fp8"].ignore_not_applied == 1


def test_the_example_says_nothing_of_the_ignore_list_when_it_was_applied(capsys):
    """Nothing ignored but DeepInfra by the retry, and Lambda served: no such line."""
    ex = example()
    client = client_ignoring()
    ex.guarded_reply(ReplyGuard(client), ex.request_body(client, MODEL, "Mira hears a knock."))
    out = capsys.readouterr().out
    assert "attempt 2: served by Lambda, pass" in out and "NOT applied" not in out
