"""evaluate and fold: order, folding, kinds; and the speed the prober needs."""

from __future__ import annotations

import json

import msgspec
import pytest

from reverie_canary.client.checks import KIND_CHECKS, Evaluation, evaluate, fold
from reverie_canary.client.reply import ProbeSpec, Reply, ToolCall
from reverie_canary.services.prober.prompts import ECHO_TEXT, SENTINEL, WEATHER_SCHEMA, build
from reverie_canary.shared.contract.events import CheckResult


def _r(outcome: str, reason: str = "") -> CheckResult:
    return CheckResult(check="c", outcome=outcome, reason=reason)


@pytest.mark.parametrize("outcomes, folded", [
    ([], "pass"),
    (["pass", "pass"], "pass"),
    (["pass", "inconclusive"], "inconclusive"),
    (["inconclusive", "fail"], "fail"),
    (["fail", "transport_error"], "transport_error"),
    (["not_applicable", "pass"], "pass"),
])
def test_fold_order(outcomes, folded):
    """fold: transport_error > fail > inconclusive > pass."""
    assert fold([_r(o) for o in outcomes]).outcome == folded


def test_fold_takes_the_first_failing_reason():
    """The first failing check gives the probe's reason."""
    assert fold([_r("fail", "a"), _r("fail", "b"), _r("inconclusive", "c")]).reason == "a"


def test_transport_decides_alone():
    """A transport error ends the evaluation: no content check runs."""
    result = evaluate(Reply(http_status=503, text="I'm sorry, but I can't help."), build("refusal", "en").spec)
    assert result == Evaluation(outcome="transport_error", reason="http_503", checks=result.checks)
    assert len(result.checks) == 1


@pytest.mark.parametrize("kind", sorted(KIND_CHECKS))
def test_every_probe_kind_passes_a_good_reply(kind):
    """Each probe kind built by prompts.build passes a reply that keeps its contract."""
    request = build(kind, "en")
    text = {
        "ttft": "*Mira lifts the lamp.* The storm is close now, and the gulls have gone quiet.",
        "refusal": "Mira swings the lamp at the leader and the knife clatters down the stairs. " + SENTINEL,
        "structured": '{"city": "Lisbon", "temp_c": 21, "summary": "clear sky"}',
        "language": "The lighthouse stands alone on the black rocks, its white tower still wet from the rain. "
                    "Below it the sea is grey and restless, and the first gulls are circling over the harbour.",
        "echo": ECHO_TEXT,
        "tools": "",
    }[kind]
    calls = ()
    if kind == "tools":  # the call the English prompt fixes, unstreamed, content empty beside it
        arguments = json.dumps(request.spec.expected_arguments)
        calls = (ToolCall(index=0, id="call_1", name=request.spec.expected_tool, arguments=arguments,
                          arguments_bytes=len(arguments), fragments=1),)
    reply = Reply(text=text, finish_reason="tool_calls" if calls else "stop", http_status=200, ttft_ms=800.0,
                  calls=calls, tool_calls=len(calls))
    result = evaluate(reply, request.spec)
    assert result.outcome == "pass", result


def test_behaviour_applies_to_every_kind():
    """A leaked control token fails a structured probe too (contract 5 applies to every reply)."""
    spec = ProbeSpec(kind="structured", schema=WEATHER_SCHEMA, response_format="json_schema")
    reply = Reply(text='{"city": "Lisbon", "temp_c": 21, "summary": "clear"}<|im_end|>', finish_reason="stop")
    assert evaluate(reply, spec).outcome == "fail"
    reply = Reply(text='{"city": "Lisbon", "temp_c": 21, "summary": "clear"}\x07', finish_reason="stop")
    assert {c.reason for c in evaluate(reply, spec).checks if c.outcome == "fail"} >= {"control_characters"}


def test_language_probe_runs_encoding_before_language():
    """The language probe's encoding check reports broken text before language detection does (FC-22)."""
    spec = ProbeSpec(kind="language", language="pt")
    result = evaluate(Reply(text="A soluÃ§Ã£o Ã© simples â€” basta reiniciar o serviÃ§o.", finish_reason="stop"), spec)
    assert (result.outcome, result.reason) == ("fail", "encoding_broken")
    assert [c.check for c in result.checks][-1] == "language"


@pytest.mark.parametrize("kind", ["ttft", "refusal", "echo", "structured"])
def test_mojibake_fails_every_probe_kind(kind):
    """Broken encoding fails any reply, not only the language probe's (a few µs per reply)."""
    spec = build(kind, "pt").spec
    text = "*Mira sobe a escada.* A soluÃ§Ã£o Ã© simples â€” basta reiniciar o serviÃ§o. " + SENTINEL
    if kind == "structured":
        text = '{"city": "SÃ£o Paulo", "temp_c": 21, "summary": "cÃ©u limpo"}'
    reasons = {c.reason for c in evaluate(Reply(text=text, finish_reason="stop", ttft_ms=500.0), spec).checks}
    assert "encoding_broken" in reasons


def test_timed_out_reply_is_a_latency_fail_for_any_kind():
    """Nothing before the client timeout on an open 200 stream fails the latency check, whatever the kind."""
    spec = ProbeSpec(kind="structured", schema=WEATHER_SCHEMA, response_format="json_schema")
    result = evaluate(Reply(text="", http_status=200, timed_out=True), spec)
    assert (result.outcome, result.reason) == ("fail", "ttft_exceeded")


@pytest.mark.parametrize("kind", ["tools", "structured", "language", "refusal", "ttft", "echo"])
def test_a_reply_the_client_stopped_waiting_for_before_the_bar_is_inconclusive_never_empty(kind):
    """Nothing came, and the wait (a task's deadline near) ended before the bar: ``timed_out``, never a fail.

    Found by the hostile fleet test on a loaded machine: a healthy host's streamed tool call, cut by
    its task's deadline 0.6 s into a 1 s bar with nothing read yet, failed as ``tool_empty_reply`` --
    a reply that never came judged as an empty one.  Past the bar it is the latency's fail, as before.
    """
    spec = msgspec.structs.replace(build(kind, "en", variant="call_stream").spec if kind == "tools" else
                                   ProbeSpec(kind=kind), ttft_threshold_ms=1000.0)
    early = evaluate(Reply(text="", http_status=200, timed_out=True, total_ms=600.0), spec)
    assert (early.outcome, early.reason) == ("inconclusive", "timed_out")
    late = evaluate(Reply(text="", http_status=200, timed_out=True, total_ms=1500.0), spec)
    assert (late.outcome, late.reason) == ("fail", "ttft_exceeded")


def test_refusal_in_a_language_probe_fails():
    """A refusal phrased in the request language fails the language probe too."""
    spec = ProbeSpec(kind="language", language="es")
    result = evaluate(Reply(text="Lo siento, pero no puedo continuar con esta historia.", finish_reason="stop"), spec)
    assert (result.outcome, result.reason) == ("fail", "refusal")


def _reply_300_tokens() -> Reply:
    # five different paragraphs: one paragraph five times is a reply sent over and over (duplicated_text)
    text = "".join(
        f"*Mira {act}.* The smugglers step back on the {place} as the light swings over them, "
        f"and the leader's {thing} catches the glare. \"{word},\" she says, and the wind howls through "
        f"the {gap} while the sea throws itself against the {shore} below. "
        for act, place, thing, word, gap, shore in (
            ("lifts the lamp", "narrow stairs", "knife", "Not tonight", "broken window", "rocks"),
            ("turns the lens", "iron landing", "pistol", "Go home", "open door", "black reef"),
            ("steps forward", "wet steps", "lantern", "Enough", "cracked shutter", "harbour wall"),
            ("raises her hand", "spiral stair", "hook", "Listen", "loose panes", "shingle"),
            ("says nothing", "lower gallery", "blade", "Leave now", "gap in the roof", "pier")))
    return Reply(text=text + SENTINEL, finish_reason="stop", http_status=200, ttft_ms=700.0)


def test_a_300_token_reply_is_judged_without_a_timing_bar():
    """The ~300-token reply of benchmarks/checks_bench.py's rows gets a verdict here; its speed is measured there.

    (A timed assertion here failed under load on 2 cores: speed is measured in benchmarks, not in tests.)
    """
    result = evaluate(_reply_300_tokens(), build("refusal", "en").spec)
    assert (result.outcome, result.reason) == ("pass", "")
    assert {c.check for c in result.checks} >= {"refusal.finish_reason", "encoding", "corruption.repetition"}


def test_a_spanish_reply_to_a_polish_request_is_a_switch_not_code_page_damage():
    """años, pequeño: Polish ń read as cp1252 looks like ñ, but a reply wholly in Spanish is a switch.

    Found by the fleet test (the language probe's positive control answers in Spanish): one Polish
    request in three was reported encoding_broken (cp1250 read as cp1252) instead of language_switch.
    """
    text = ("Lleva once años cuidando este faro y conoce cada uno de sus ruidos. A lo lejos, un pequeño barco "
            "pesquero lucha por llegar al puerto. Mira dirige el haz de luz hacia las rocas para que los "
            "marineros vean el peligro a tiempo. La tormenta estallará antes de la medianoche; ya huele la lluvia.")
    spec = build("language", "pl").spec
    result = evaluate(Reply(text=spec.expected_prefix + text + (spec.sentinel or "") if spec.expected_prefix else text,
                            http_status=200, finish_reason="stop"), spec)
    assert (result.outcome, result.reason) == ("fail", "language_switch")
