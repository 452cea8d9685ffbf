"""Build the judge scenario event files (JSON lines in the wire format).

Each scenario is a small log for ``canary replay --events FILE`` and for the
tests in ``tests/unit/test_judge_scenarios.py``, which also hold each file's
expected decisions.  Regenerate after changing a scenario::

    python tests/scenarios/judge/build.py
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from reverie_canary.shared.contract import codec, ids  # noqa: E402
from reverie_canary.shared.contract.commands import LiftSuspension, SetMode  # noqa: E402
from reverie_canary.shared.contract.events import CycleUnplanned  # noqa: E402
from reverie_canary.shared.contract.snapshots import IgnoreEntry, IgnoreReason, IgnoreSnapshot  # noqa: E402
from tests.judge_events import CYCLE, MODEL, T0, WINDOW, cycle_events, healthy  # noqa: E402

HERE = Path(__file__).resolve().parent
FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8", "e/fp8")
DAY = 48


def enforce(n: int = 0):
    return SetMode(command_id=f"enforce-{n}", actor="scenario", at=T0 + n * CYCLE - timedelta(minutes=1),
                   mode="enforce", model=MODEL, reason="scenario runs in enforce mode")


def fail(provider: str, kind: str = "ttft", reason: str = "ttft_exceeded", fleet=FLEET):
    out = healthy(*fleet)
    out[provider][kind] = ("fail", reason)
    return out


def transport(provider: str, fleet=FLEET):
    out = healthy(*fleet)
    out[provider] = dict.fromkeys(out[provider], ("transport_error", "http_503"))
    return out


def blind(reason: str = "gateway_auth", fleet=FLEET):
    return {p: dict.fromkeys(("ttft", "structured"), ("blind", reason)) for p in fleet}


def unplanned(n: int, cause: str = "gateway_unreachable"):
    start = T0 + n * CYCLE
    return CycleUnplanned(at=start + WINDOW, model=MODEL, cycle=ids.cycle_id(MODEL, start), cycle_no=n,
                          deadline=start + WINDOW, cause=cause, attempts=20)


def scenarios() -> dict[str, list]:
    s: dict[str, list] = {}
    s["two_failed_cycles_suspend"] = [enforce(), *cycle_events(0, fail("a/fp8")), *cycle_events(1, fail("a/fp8"))]
    s["one_failed_cycle_decides_nothing"] = [enforce(), *cycle_events(0, fail("a/fp8")),
                                             *cycle_events(1, healthy(*FLEET)), *cycle_events(2, fail("a/fp8"))]
    s["transport_errors_freeze"] = [enforce(), *cycle_events(0, fail("a/fp8")), *cycle_events(1, transport("a/fp8")),
                                    *cycle_events(2, transport("a/fp8")), *cycle_events(3, fail("a/fp8"))]
    ladder = [enforce()]
    n = 0
    for _ in range(3):
        ladder += cycle_events(n, fail("a/fp8")) + cycle_events(n + 1, fail("a/fp8"))
        n += 2 + 7 * DAY + 1
        ladder += cycle_events(n, healthy(*FLEET))
        n += 1
    s["ladder_one_three_seven_days"] = ladder
    n2 = 1 + 14 * DAY + 2
    s["ladder_resets_after_fourteen_quiet_days"] = [
        enforce(), *cycle_events(0, fail("a/fp8")), *cycle_events(1, fail("a/fp8")),
        *cycle_events(100, healthy(*FLEET)), *cycle_events(n2, fail("a/fp8")), *cycle_events(n2 + 1, fail("a/fp8"))]
    s["suspension_expires"] = [enforce(), *cycle_events(0, fail("a/fp8")), *cycle_events(1, fail("a/fp8")),
                               *cycle_events(1 + DAY + 2, healthy(*FLEET))]
    s["recovery_ends_early_and_keeps_the_ladder"] = [
        enforce(), *cycle_events(0, fail("a/fp8")), *cycle_events(1, fail("a/fp8")),
        *cycle_events(2, healthy(*FLEET)), *cycle_events(3, healthy(*FLEET)),
        *cycle_events(4, fail("a/fp8")), *cycle_events(5, fail("a/fp8"))]
    crowded = IgnoreSnapshot(at=T0 - timedelta(minutes=2), model=MODEL, version=1, entries=[
        IgnoreEntry(provider="c/fp8", reasons=[IgnoreReason(layer="exclusion", reason="reviewed defect")]),
        IgnoreEntry(provider="d/fp8", reasons=[IgnoreReason(layer="override", reason="incident", actor="ops")]),
        IgnoreEntry(provider="e/fp8", reasons=[IgnoreReason(layer="override", reason="incident", actor="ops")])])
    s["capacity_floor_holds"] = [enforce(), crowded, *cycle_events(0, fail("a/fp8")), *cycle_events(1, fail("a/fp8")),
                                 *cycle_events(2, fail("a/fp8"))]
    s["observe_mode_would_suspend"] = [*cycle_events(0, fail("a/fp8")), *cycle_events(1, fail("a/fp8")),
                                       *cycle_events(2, healthy(*FLEET)), *cycle_events(3, healthy(*FLEET))]
    shadow_kind = SetMode(command_id="echo-shadow", actor="scenario", at=T0 - timedelta(minutes=1), mode="observe",
                          model=MODEL, kind="echo", reason="new probe kind runs in shadow")
    both = {p: {"ttft": "pass", "echo": "pass"} for p in FLEET}
    both["a/fp8"]["echo"] = ("fail", "echo_mismatch")
    both["b/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    s["observe_per_probe_kind"] = [enforce(), shadow_kind, *cycle_events(0, both), *cycle_events(1, both)]
    lift = LiftSuspension(command_id="lift-1", actor="bob", at=T0 + 2 * CYCLE, provider="a/fp8", model=MODEL,
                          reason="provider fixed its template")
    s["operator_lift"] = [enforce(), *cycle_events(0, fail("a/fp8")), *cycle_events(1, fail("a/fp8")), lift,
                          *cycle_events(3, fail("a/fp8"))]
    common = healthy(*FLEET)
    for p in ("a/fp8", "b/fp8", "c/fp8"):
        common[p]["structured"] = ("fail", "schema_invalid")
    s["common_mode_guard"] = [enforce(), *cycle_events(0, common), *cycle_events(1, common)]
    refusal = {p: {"refusal": "pass"} for p in FLEET}
    refusal["a/fp8"]["refusal"] = ("fail", "refusal")
    ctl = {"ctl/filter": {"refusal": "pass"}}
    s["positive_control_passed"] = [enforce(), *cycle_events(0, refusal, controls=ctl),
                                    *cycle_events(1, refusal, controls=ctl)]
    s["unjudgeable_after_six_frozen_cycles"] = [enforce(), *[e for n in range(7) for e in
                                                             cycle_events(n, transport("a/fp8"))]]
    pin = healthy(*FLEET)
    pin["a/fp8"]["ttft"] = ("inconclusive", "pin_violated")
    s["pin_violated"] = [enforce(), *cycle_events(0, pin)]
    gone = {p: v for p, v in healthy(*FLEET).items() if p != "a/fp8"}
    star = SetMode(command_id="enforce-all", actor="scenario", at=T0 - timedelta(minutes=5), mode="enforce",
                   model="*", reason="go live on every model before the first cycle")
    s["enforce_every_model_before_the_first_cycle"] = [star, *cycle_events(0, fail("a/fp8")),
                                                       *cycle_events(1, fail("a/fp8"))]
    s["provider_disappears_and_returns"] = [enforce(), *cycle_events(0, fail("a/fp8")), *cycle_events(1, gone),
                                            *cycle_events(2, fail("a/fp8"))]
    # the canary's own health: a suspension due in cycle 49 while the gateway is down (48, 49) and the
    # key refused (50) is held, ends when cycle 51 judges a/fp8 again; one canary_blind, one canary_sees
    s["canary_blind_holds_a_due_suspension"] = [
        enforce(), *cycle_events(0, fail("a/fp8")), *cycle_events(1, fail("a/fp8")),
        *cycle_events(47, healthy(*FLEET)), unplanned(48), unplanned(49), *cycle_events(50, blind()),
        *cycle_events(51, healthy(*FLEET))]
    # mode decides the action, never the evidence: failed in observe, switched to enforce, failed again
    s["go_live_suspends_a_provider_failing_across_the_switch"] = [
        *cycle_events(0, fail("a/fp8")), enforce(1), *cycle_events(1, fail("a/fp8"))]
    s["a_shadow_suspension_gives_way_after_the_switch"] = [
        *cycle_events(0, fail("a/fp8")), *cycle_events(1, fail("a/fp8")), enforce(2), *cycle_events(2, fail("a/fp8"))]
    # a new kind (tools) stays in observe on a model switched to enforce, until an operator switches that kind
    tools_fleet = {p: {"ttft": "pass", "tools": "pass"} for p in FLEET}
    first = {p: dict(v) for p, v in tools_fleet.items()}
    first["a/fp8"]["tools"] = ("fail", "tool_args_invalid_json")
    first["b/fp8"]["ttft"] = ("fail", "ttft_exceeded")
    later = {p: dict(v) for p, v in tools_fleet.items()}
    later["c/fp8"]["tools"] = ("fail", "tool_not_called")
    switch = SetMode(command_id="tools-enforce", actor="scenario", at=T0 + 2 * CYCLE - timedelta(minutes=1),
                     mode="enforce", model=MODEL, kind="tools", reason="tool calls scored right")
    s["new_kind_observes_until_switched"] = [enforce(), *cycle_events(0, first), *cycle_events(1, first), switch,
                                             *cycle_events(2, later), *cycle_events(3, later)]
    # a tool control that breaks one variant only proves the probe; one that passes all four does not
    variants = ("tools:call", "tools:call_stream", "tools:no_tool", "tools:second_turn")
    tool_fleet = {p: dict.fromkeys(variants, "pass") for p in FLEET}
    tool_fleet["a/fp8"]["tools:call_stream"] = ("fail", "tool_stream_assembly")
    caught = {"ctl/tools": {**dict.fromkeys(variants, "pass"), "tools:call_stream": ("fail", "tool_stream_assembly")}}
    missed = {"ctl/tools": dict.fromkeys(variants, "pass")}
    s["tool_control_caught_by_one_variant"] = [
        SetMode(command_id="tools-enforce", actor="scenario", at=T0 - timedelta(minutes=1), mode="enforce",
                model=MODEL, kind="tools", reason="scenario enforces tool calls"),
        *cycle_events(0, tool_fleet, controls=caught), *cycle_events(1, tool_fleet, controls=missed),
        *cycle_events(2, tool_fleet, controls=caught)]
    # facts across the providers: one provider's prompt token count unlike its peers' (another chat template)
    # fails the fact kind template, which observes on a model in enforce until an operator switches it
    counts = {p: {"ttft": {"prompt_tokens": 412 if p == "c/fp8" else 380, "completion_tokens": 40}} for p in FLEET}
    template_switch = SetMode(command_id="template-enforce", actor="scenario", at=T0 + 2 * CYCLE - timedelta(minutes=1),
                              mode="enforce", model=MODEL, kind="template", reason="template calls scored right")
    s["template_observes_until_switched"] = [
        enforce(), *cycle_events(0, healthy(*FLEET), numbers=counts), *cycle_events(1, healthy(*FLEET), numbers=counts),
        template_switch, *cycle_events(2, healthy(*FLEET), numbers=counts)]
    # a provider at 4 s against peers at 0.4-0.7 s is slow_vs_peers every cycle, under the 10 s bar: never suspended
    times = {"a/fp8": 400.0, "b/fp8": 500.0, "c/fp8": 600.0, "d/fp8": 700.0, "e/fp8": 4000.0}
    slow = {p: {"ttft": {"ttft_ms": ms}} for p, ms in times.items()}
    s["slow_vs_peers_never_suspends"] = [enforce(), *[e for n in range(8)
                                                      for e in cycle_events(n, healthy(*FLEET), numbers=slow)]]
    return s


def main() -> None:
    for name, events in scenarios().items():
        lines = [codec.encode(e).decode() for e in events]
        (HERE / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(scenarios())} scenarios to {HERE}")


if __name__ == "__main__":
    main()
