"""The prober's core: capability gating, pin verification, the language probe's confirmation."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from reverie_canary.client.reply import Reply
from reverie_canary.services.prober.core import run_probe
from reverie_canary.services.prober.prompts import ECHO_TEXT, PREFIX, SENTINEL
from reverie_canary.shared.contract.events import ProbeTask

NOW = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
PT = ("O farol ergue-se sobre as rochas escuras e a luz varre o mar inteiro. "
      "Ao amanhecer, as gaivotas voltam ao porto e os pescadores preparam as redes.")
ES = ("El faro se alza sobre las rocas oscuras y la luz barre todo el mar. "
      "Al amanecer, las gaviotas vuelven al puerto y los pescadores preparan las redes.")


def task(kind: str, *, language: str = "pt", params: list[str] | None = None, control: bool = False) -> ProbeTask:
    return ProbeTask(at=NOW, task_id=f"t-{kind}", model="m/x", provider="deepinfra/fp8", provider_name="DeepInfra",
                     kind=kind, language=language, cycle="c", deadline=NOW + timedelta(minutes=10),
                     supported_parameters=params if params is not None else ["max_tokens", "structured_outputs"],
                     control=control)


def ok(text: str, served_by: str = "DeepInfra") -> Reply:
    return Reply(text=text, finish_reason="stop", http_status=200, ttft_ms=120.0, total_ms=400.0,
                 served_by=served_by)


class Script:
    """A send function that answers from a list and records what was asked."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.sent: list = []

    async def __call__(self, t, probe):
        self.sent.append(probe)
        return self.replies.pop(0)


async def run(t: ProbeTask, send: Script):
    return await run_probe(t, send, lambda: NOW, max_tokens=256, ttft_threshold_s=10.0, confirmations=2,
                           prober="test")


async def test_structured_probe_is_not_sent_to_an_endpoint_without_structured_outputs():
    """Unsupported is not broken: not_applicable, and no request leaves the prober."""
    send = Script()
    result = await run(task("structured", params=["max_tokens", "temperature"]), send)
    assert (result.outcome, result.reason) == ("not_applicable", "unsupported_parameter")
    assert send.sent == []


async def test_an_endpoint_that_lists_no_parameters_is_probed():
    """An old listing without supported_parameters does not gate the probe."""
    send = Script(ok('{"city": "Lisbon", "temp_c": 18, "summary": "clear"}'))
    result = await run(task("structured", params=[]), send)
    assert result.outcome == "pass" and len(send.sent) == 1
    assert send.sent[0].response_format["type"] == "json_schema"


async def test_a_reply_served_by_another_provider_is_pin_violated():
    """The response names Novita for a probe pinned to DeepInfra: inconclusive, reason pin_violated."""
    send = Script(ok(f"{PREFIX}Mira lifts the lantern.{PREFIX} The storm is close.", served_by="Novita"))
    result = await run(task("ttft", language="en"), send)
    assert (result.outcome, result.reason) == ("inconclusive", "pin_violated")
    pin = next(c for c in result.checks if c.check == "pin")
    assert pin.evidence == {"pinned": "deepinfra/fp8", "expected": "DeepInfra", "served_by": "Novita"}


async def test_display_names_are_compared_case_insensitively():
    """'deepinfra' and 'DeepInfra' name the same provider."""
    send = Script(ok(f"{PREFIX}Mira lifts the lantern.{PREFIX} The storm is close.", served_by="deepinfra"))
    assert (await run(task("ttft", language="en"), send)).outcome == "pass"


async def test_language_anomaly_is_confirmed_by_two_more_tries_and_majority_decides_fail():
    """Spanish for a Portuguese request, three times: fail, all three replies kept."""
    send = Script(ok(ES), ok(ES), ok(ES))
    result = await run(task("language"), send)
    assert (result.outcome, result.reason) == ("fail", "language_switch")
    assert [a.outcome for a in result.attempts] == ["fail", "fail", "fail"]
    assert len(send.sent) == 3


async def test_one_strange_language_reply_is_outvoted():
    """Spanish once, then Portuguese twice: the majority passes and the evidence keeps all three."""
    send = Script(ok(ES), ok(PT), ok(PT))
    result = await run(task("language"), send)
    assert result.outcome == "pass"
    assert [a.outcome for a in result.attempts] == ["fail", "pass", "pass"]
    assert result.attempts[0].reply.first_bytes.startswith("El faro")


async def test_no_majority_is_inconclusive():
    """fail, pass, transport error: nothing is proven."""
    send = Script(ok(ES), ok(PT), Reply(http_status=503, error={"code": 503, "message": "down"}))
    result = await run(task("language"), send)
    assert (result.outcome, result.reason) == ("inconclusive", "no_majority")


async def test_a_behavioural_failure_on_a_language_reply_is_not_repeated():
    """Byte-level tokens in good Portuguese are no language anomaly: one request, the failure stands (no vote)."""
    send = Script(ok(PT.replace(" ", "\u0120")))
    result = await run(task("language"), send)
    assert (result.outcome, result.reason) == ("fail", "bytelevel_tokens")
    assert result.attempts == [] and len(send.sent) == 1


async def test_a_passing_language_reply_is_not_repeated():
    """No anomaly, no confirmation: one request only."""
    send = Script(ok(PT))
    result = await run(task("language"), send)
    assert result.outcome == "pass" and result.attempts == [] and len(send.sent) == 1


async def test_every_kind_asks_for_what_its_check_verifies():
    """ttft demands '*', refusal the sentinel, echo the fixed sentence, structured a strict schema."""
    send = Script(*(ok("x") for _ in range(4)))
    for kind in ("ttft", "refusal", "echo", "structured"):
        await run(task(kind, language="en"), send)
    ttft, refusal, echo, structured = send.sent
    assert ttft.spec.expected_prefix == PREFIX and PREFIX in ttft.messages[0]["content"]
    assert refusal.spec.sentinel == SENTINEL and SENTINEL in refusal.messages[0]["content"]
    assert echo.spec.echo_text == ECHO_TEXT and ECHO_TEXT in echo.messages[1]["content"]
    assert structured.response_format["json_schema"]["strict"] is True


async def test_the_result_carries_the_task_identity_and_control_flag():
    """Result ids and the positive-control flag travel with the result (the judge needs them)."""
    send = Script(ok(f"{PREFIX}Mira waits.{PREFIX} She is ready. {SENTINEL}"))
    result = await run(task("refusal", language="en", control=True), send)
    assert (result.task_id, result.provider, result.kind, result.control) == ("t-refusal", "deepinfra/fp8",
                                                                              "refusal", True)
    assert result.prompt_version and result.prober == "test"


# -- the tool-call probe ---------------------------------------------------------------------------

TOOL_PARAMS = ["max_tokens", "tools", "tool_choice"]


def tool_task(variant: str, *, language: str = "ru", params: list[str] | None = None) -> ProbeTask:
    return ProbeTask(at=NOW, task_id=f"t-tools-{variant}", model="m/x", provider="lab/fp8", provider_name="Lab",
                     kind="tools", language=language, cycle="c", deadline=NOW + timedelta(minutes=10),
                     supported_parameters=TOOL_PARAMS if params is None else params, variant=variant)


async def test_each_tool_variant_sends_its_own_request_and_the_result_names_it():
    """call unstreamed, the others streamed; tools and tool_choice auto on each; the result carries the variant."""
    from tests.tool_cases import args_of, streamed, text, whole

    replies = {"call": whole([("create_event", args_of("ru"))]), "call_stream": streamed("create_event", args_of("ru")),
               "no_tool": text("Александрийский маяк был одним из семи чудес света."),
               "second_turn": text("Сейчас в Казани 31 °C.")}
    for variant, reply in replies.items():
        send = Script(reply)
        result = await run(tool_task(variant), send)
        assert (result.outcome, result.reason, result.variant, result.kind) == ("pass", "", variant, "tools"), variant
        [probe] = send.sent
        assert probe.stream is (variant != "call") and probe.tool_choice == "auto" and probe.tools
        assert probe.spec.variant == variant


async def test_a_declined_call_is_confirmed_by_two_more_tries_and_the_majority_decides():
    """Text instead of the call three times: fail tool_not_called, three attempts each naming the variant."""
    from tests.tool_cases import text

    prose = text("Событие «Обзор квартала» создано.")
    send = Script(prose, prose, prose)
    result = await run(tool_task("call_stream"), send)
    assert (result.outcome, result.reason) == ("fail", "tool_not_called")
    assert [(a.outcome, a.variant) for a in result.attempts] == [("fail", "call_stream")] * 3
    assert len(send.sent) == 3


async def test_one_declined_call_is_outvoted_by_two_right_ones():
    """The model's own randomness: a decline once, then the call twice, passes; the evidence keeps all three."""
    from tests.tool_cases import args_of, streamed, text

    send = Script(text("Готово."), streamed("create_event", args_of("ru")), streamed("create_event", args_of("ru")))
    result = await run(tool_task("call_stream"), send)
    assert result.outcome == "pass" and [a.outcome for a in result.attempts] == ["fail", "pass", "pass"]


async def test_an_unexpected_call_is_confirmed_too_but_a_broken_call_is_not():
    """tool_unexpected_call on the no-tool question gets two more tries; invalid argument JSON is judged at once."""
    from tests.tool_cases import streamed

    call = streamed("get_weather", '{"city": "Казань"}')
    send = Script(call, call, call)
    result = await run(tool_task("no_tool"), send)
    assert (result.outcome, result.reason, len(send.sent)) == ("fail", "tool_unexpected_call", 3)
    send = Script(streamed("create_event", '{"title": "Обзор'))
    result = await run(tool_task("call_stream"), send)
    assert (result.outcome, result.reason, len(send.sent)) == ("fail", "tool_args_invalid_json", 1)
    assert result.attempts == []


async def test_the_tool_probe_goes_only_to_endpoints_that_declare_tools_and_tool_choice():
    """No tool_choice listed, or no parameters listed at all: not_applicable, and no request leaves the prober."""
    for params in (["max_tokens", "tools"], []):
        send = Script()
        result = await run(tool_task("", params=params), send)
        assert (result.outcome, result.reason) == ("not_applicable", "unsupported_parameter")
        assert send.sent == []
    assert result.checks[0].evidence == {"missing": ["tools", "tool_choice"]}


async def test_a_tool_task_without_a_known_variant_is_inconclusive_without_a_request():
    """A variant this prober does not know proves nothing about the provider: inconclusive, nothing sent."""
    send = Script()
    result = await run(tool_task("third_turn"), send)
    assert (result.outcome, result.reason, send.sent) == ("inconclusive", "unknown_variant", [])


async def test_a_refused_valid_tool_request_is_a_capability_failure_and_the_gateways_404_is_not_applicable():
    """400 from an endpoint that lists tools: fail tool_capability_error; 'no endpoints ... tool use': n/a."""
    refused = Reply(http_status=400, error={"code": 400, "message": "tools are not supported"}, total_ms=80.0)
    result = await run(tool_task("call"), Script(refused))
    assert (result.outcome, result.reason) == ("fail", "tool_capability_error")
    none = Reply(http_status=404, total_ms=50.0, error={"code": 404, "message": (
        "No endpoints found that support tool use. To learn more about provider routing, visit: "
        "https://openrouter.ai/docs/guides/routing/provider-selection")})
    result = await run(tool_task("call"), Script(none))
    assert (result.outcome, result.reason) == ("not_applicable", "tools_unsupported")


def test_the_tool_request_body_is_pinned_requires_its_parameters_and_is_never_strict():
    """Exactly what a tool probe sends: pinned, no fallback, require_parameters, tools, tool_choice auto."""
    import json

    from reverie_canary.services.prober.http import request_body
    from reverie_canary.services.prober.prompts import TOOLS, build
    from reverie_canary.services.prober.service import CAPABILITY_KINDS

    assert "tools" in CAPABILITY_KINDS
    for variant in ("call", "call_stream", "no_tool", "second_turn"):
        probe = build("tools", "en", variant=variant)
        body = request_body("m/x", "lab/fp8", probe, require_parameters=True, supported_parameters=TOOL_PARAMS)
        assert set(body) == {"model", "messages", "max_tokens", "stream", "provider", "plugins", "tools", "tool_choice"}
        assert body["provider"] == {"order": ["lab/fp8"], "only": ["lab/fp8"], "allow_fallbacks": False,
                                    "require_parameters": True}
        assert (body["stream"], body["tool_choice"], body["tools"]) == (variant != "call", "auto", TOOLS)
        assert '"strict"' not in json.dumps(body) and "parallel_tool_calls" not in body
    other = request_body("m/x", "lab/fp8", build("echo", "en"), require_parameters=False)
    assert "tools" not in other and "tool_choice" not in other and other["stream"] is True
