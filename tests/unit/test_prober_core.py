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
