"""Evidence bundles: the probes behind a decision as field cases; ``canary check`` on them gives
the verdicts the prober gave, check by check."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from reverie_canary.client.checks import CHECKS_VERSION
from reverie_canary.client.reply import Reply
from reverie_canary.services.prober.core import run_probe
from reverie_canary.services.prober.evidence import EvidenceError, cases_of, probe_verdict
from reverie_canary.services.prober.prompts import ECHO_TEXT, SENTINEL
from reverie_canary.services.prober.recorded import check_lines
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.events import EVIDENCE_TEXT_CHARS, Endpoint, ProbeResult, ProbeTask

NOW = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
ENDPOINT = Endpoint(provider="tidewater/fp8", provider_name="Tidewater", quantization="fp8")
PT = ("O farol ergue-se sobre as rochas escuras e a luz varre o mar inteiro. "
      "Ao amanhecer, as gaivotas voltam ao porto e os pescadores preparam as redes. ")
ES = ("El faro se alza sobre las rocas oscuras y la luz barre todo el mar. "
      "Al amanecer, las gaviotas vuelven al puerto y los pescadores preparan las redes. ")
#: Second paragraphs: a paragraph twice is a reply sent twice (duplicated_text), not a language's text.
PT2 = ("A guardiã sobe a escada de ferro e limpa o vidro da lanterna com um pano velho. "
       "Lá fora, o vento muda de direção e os barcos pequenos voltam devagar para o cais. ")
ES2 = ("La guardiana sube la escalera de hierro y limpia el cristal de la linterna con un trapo viejo. "
       "Fuera, el viento cambia de dirección y las barcas pequeñas vuelven despacio al muelle. ")
ES3 = ("Nadie habla en el muelle cuando cae la noche sobre la costa. "
       "Solo se oye el ruido del agua contra las piedras y el grito lejano de un pájaro. ")


def task(kind: str, language: str) -> ProbeTask:
    return ProbeTask(at=NOW, task_id=f"t|m/x|7|tidewater/fp8|{kind}|{language}", model="m/x",
                     provider=ENDPOINT.provider, provider_name=ENDPOINT.provider_name, kind=kind, language=language,
                     cycle="m/x@2026-11-30T12:00:00Z", deadline=NOW + timedelta(minutes=10))


def reply(text: str, **kw) -> Reply:
    base = dict(text=text, finish_reason="stop", http_status=200, ttft_ms=212.345678, first_content_ms=212.345678,
                total_ms=901.5, served_by="Tidewater", generation_id="gen-1", done=True, keepalives=1,
                usage={"prompt_tokens": 40, "completion_tokens": 60, "completion_tokens_details": {"reasoning_tokens": 0}})
    base.update(kw)
    return Reply(**base)


#: (kind, language, the replies the provider sends, one per try): every family of verdict.
SCENES = {
    "language passes": ("language", "pt", [reply(PT + PT2)]),
    "Spanish mixed into Portuguese, confirmed twice": ("language", "pt", [reply(PT + ES + PT2 + ES2)] * 3),
    "one strange reply outvoted": ("language", "pt", [reply(ES + ES2 + ES3), reply(PT + PT2), reply(PT + PT2)]),
    "leading junk before the asterisk": ("ttft", "es", [reply(", *La luz gira.* " + ES)]),
    "slow first token": ("ttft", "en", [reply("*The lamp turns.* The storm is here, and I climb.", ttft_ms=11_500.0,
                                                first_content_ms=11_500.0)]),
    "cut without the closing marker": ("refusal", "fr", [reply("La mer monte et je descends vers la jet")]),
    "closing marker, prose in French": ("refusal", "fr", [reply("La mer monte. Je descends vers la jetée, la "
                                                                  "lanterne à la main. " + SENTINEL)]),
    "schema broken": ("structured", "en", [reply('{"city": "Porto", "summary": "windy"}')]),
    "schema kept": ("structured", "en", [reply('{"city": "Porto", "temp_c": 14.5, "summary": "windy"}')]),
    "echo exact": ("echo", "en", [reply(ECHO_TEXT)]),
    "echo with a reserved token": ("echo", "en", [reply(ECHO_TEXT + "<|endoftext|>")]),
    "served by another provider": ("language", "pt", [reply(PT + PT2, served_by="Novita")]),
    "transport: 503": ("ttft", "en", [Reply(http_status=503, error={"code": 503, "message": "no capacity"},
                                             total_ms=30.0)]),
    "stream cut": ("refusal", "de", [reply("Das Meer steigt", finish_reason=None, done=False,
                                           transport_error="stream_cut")]),
    "reasoning spent the budget": ("language", "ja", [reply("", finish_reason="length", reasoning_text="考え中" * 300,
                                                            first_content_ms=None, ttft_ms=300.0,
                                                            first_reasoning_ms=300.0,
                                                            usage={"completion_tokens": 320,
                                                                   "completion_tokens_details":
                                                                       {"reasoning_tokens": 320}})]),
}


async def probe(kind: str, language: str, replies: list[Reply]) -> ProbeResult:
    queue = list(replies)

    async def send(t, request):
        return queue.pop(0)

    result = await run_probe(task(kind, language), send, lambda: NOW, max_tokens=320, ttft_threshold_s=10.0,
                             confirmations=2, prober="p-1")
    assert not queue, "every scripted try was sent"
    return codec.PROBE_RESULT.decode(codec.encode(result))  # as the log holds it


def rerun(cases: list[dict]) -> list[dict]:
    return list(check_lines(json.dumps(c, ensure_ascii=False) for c in cases))


@pytest.mark.parametrize("scene", sorted(SCENES))
async def test_the_bundle_rerun_gives_the_probes_verdict_check_by_check(scene):
    """Every try's rerun matches its recorded verdict and checks; the tries fold to the probe's verdict."""
    kind, language, replies = SCENES[scene]
    result = await probe(kind, language, replies)
    cases = cases_of(result, ENDPOINT, source="test")
    assert len(cases) == len(replies)
    verdicts = rerun(cases)
    recorded = list(result.attempts) or [result]
    for case, verdict, logged in zip(cases, verdicts, recorded, strict=False):
        assert verdict["ok"] is True, (scene, verdict, logged.outcome, logged.reason)
        assert (verdict["outcome"], verdict["reason"]) == (logged.outcome, logged.reason)
        assert [(c["check"], c["outcome"], c["reason"]) for c in verdict["checks"]] == \
            [(c.check, c.outcome, c.reason) for c in logged.checks]
        assert case["meta"]["probe"]["checks_version"] == CHECKS_VERSION
        assert case["meta"]["probe"]["quantization"] == "fp8"
        assert case["meta"]["probe"]["generation_id"] in ("gen-1", None)
    assert probe_verdict((v["outcome"], v["reason"]) for v in verdicts) == (result.outcome, result.reason)


async def test_the_verdicts_cover_every_family():
    """The scenes are not all passes: fails, inconclusive and transport errors are reproduced too."""
    outcomes = {(await probe(*SCENES[s])).outcome for s in SCENES}
    assert outcomes >= {"pass", "fail", "inconclusive", "transport_error"}


async def test_a_reply_longer_than_the_evidence_keeps_says_what_was_cut():
    """Past 8,192 characters the evidence keeps the start and counts the rest; the case says the rerun may differ."""
    result = await probe("language", "pt", [reply(PT * 80)])
    assert result.reply.text_cut == len(PT * 80) - EVIDENCE_TEXT_CHARS
    (case,) = cases_of(result, ENDPOINT)
    assert len(case["output_text"]) == EVIDENCE_TEXT_CHARS and "may differ" in case["note"]


async def test_the_result_says_the_request_and_the_checks_that_judged_it():
    """Prompt version, output budget, latency bar and checks version travel with the result."""
    result = await probe("ttft", "en", SCENES["slow first token"][2])
    assert (result.prompt_version, result.max_tokens, result.ttft_threshold_ms) == ("p1", 320, 10_000.0)
    assert result.checks_version == CHECKS_VERSION and CHECKS_VERSION.startswith("c-")
    old = msgspec.structs.replace(result, prompt_version="p0")
    with pytest.raises(EvidenceError, match="prompt version p0"):
        cases_of(old, ENDPOINT)


def test_probe_verdict_is_the_probers_majority():
    """One try is itself; three tries: the majority with its first reason; no majority: inconclusive."""
    assert probe_verdict([("fail", "language_mix")]) == ("fail", "language_mix")
    assert probe_verdict([("fail", "language_mix"), ("pass", ""), ("fail", "language_switch")]) == \
        ("fail", "language_mix")
    assert probe_verdict([("fail", "x"), ("pass", ""), ("transport_error", "http_503")]) == \
        ("inconclusive", "no_majority")
