"""Field cases (shared/cases/*.jsonl, tools/*.jsonl): every recorded case gets its expected verdict, plus variants."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reverie_canary.services.prober.recorded import check_file, check_lines, parse_case

SHARED = Path(os.environ.get("CANARY_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared")
CASES_DIR = SHARED / "cases"
#: The cases of every kind, and the tool-call cases in their folder.
CASE_FILES = sorted([*CASES_DIR.glob("*.jsonl"), *CASES_DIR.glob("tools/*.jsonl")]) if CASES_DIR.is_dir() else []


def _load() -> list[tuple[str, dict]]:
    out = []
    for path in CASE_FILES:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                case = json.loads(line)
                out.append((case["id"], case))
    return out


FIELD = _load()
needs_cases = pytest.mark.skipif(
    not FIELD, reason=f"no field cases at {CASES_DIR} (set CANARY_SHARED_DIR to the shared folder)")


@needs_cases
@pytest.mark.parametrize("case_id, case", FIELD, ids=[cid for cid, _ in FIELD])
def test_field_case(case_id, case):
    """The recorded reply gets a verdict its case accepts."""
    [verdict] = list(check_lines([json.dumps(case)]))
    assert verdict["id"] == case_id
    assert verdict["outcome"] in case["accept"], verdict


TOOL_CASES = [(cid, case) for cid, case in FIELD if case.get("kind") == "tools"]


@needs_cases
@pytest.mark.parametrize("case_id, case", TOOL_CASES, ids=[cid for cid, _ in TOOL_CASES])
def test_a_tool_case_names_the_reason_it_expects(case_id, case):
    """A tool-call case fails with the reason it names (a pass gives none; a transport error its own kind)."""
    [verdict] = list(check_lines([json.dumps(case)]))
    if case["expected"] == "pass":
        assert verdict["reason"] == "", verdict
    elif case["expected"] != "transport_error":
        assert verdict["reason"] == case["reason"], verdict


@needs_cases
def test_the_tool_cases_are_read():
    """The tool-call folder is part of the case files (its cases are judged with the others)."""
    assert len(TOOL_CASES) >= 20 and any(p.parent.name == "tools" for p in CASE_FILES)


@needs_cases
def test_check_file_reads_every_case():
    """check_file yields one verdict per case, all accepted."""
    verdicts = [v for path in CASE_FILES for v in check_file(path)]
    assert len(verdicts) == len(FIELD)
    assert all(v["ok"] for v in verdicts), [v["id"] for v in verdicts if not v["ok"]]


@needs_cases
def test_canary_check_reads_standard_input_as_dash():
    """``canary check -`` judges the cases piped in, as ``canary check FILE`` does."""
    from typer.testing import CliRunner

    from reverie_canary.canary.cli import app

    text = CASE_FILES[0].read_text(encoding="utf-8")
    piped = CliRunner().invoke(app, ["check", "-"], input=text)
    named = CliRunner().invoke(app, ["check", str(CASE_FILES[0])])
    assert piped.exit_code == named.exit_code == 0, piped.output
    assert piped.stdout == named.stdout and piped.stdout.count("\n") == text.strip().count("\n") + 1


# -- variants: the whole kind of each fault, in other languages, positions, shapes --------


def _case(cid: str, kind: str, text: str, *, accept: list[str], lang: str | None = "en", finish: str | None = "stop",
          schema: dict | None = None, meta: dict | None = None) -> dict:
    return {"id": cid, "kind": kind, "request_language": lang, "schema": schema, "output_text": text,
            "finish_reason": finish, "expected": accept[0], "accept": accept, "meta": meta or {}}


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"},
                                            "summary": {"type": "string"}},
           "required": ["city", "temp_c", "summary"], "additionalProperties": False}

VARIANTS = [
    # FC-01: byte-level markers, other language, newline markers only
    _case("FC-01-es", "encoding", "ElĠfaroĠseĠalzaĠsobreĠlasĠrocasĠnegras.ĊLaĠmareaĠsube.", accept=["fail"], lang="es"),
    _case("FC-01-nl", "corruption", "Line one.ĊLine two.ĊLine three.ĊLine four.", accept=["fail"]),
    # FC-02: filter finish reason, native spelling
    _case("FC-02-native", "refusal", "", finish="stop", accept=["fail"], meta={"native_finish_reason": "SAFETY"}),
    # FC-04: whitespace only
    _case("FC-04-ws", "refusal", "  \n  ", accept=["fail"], lang="de"),
    # FC-06: cut mid-word in another language
    _case("FC-06-pt", "refusal", "Mira ergue a lanterna e os contrabandistas recuam devagar pela escada estr",
          accept=["fail"], lang="pt"),
    # FC-07 / FC-10 / FC-12: structured under json_schema
    _case("FC-07-prose-before", "structured", 'Here you go: {"city": "Porto", "temp_c": 18, "summary": "rain"}',
          schema=WEATHER, accept=["fail"], meta={"response_format": "json_schema"}),
    _case("FC-10-bare-fence", "structured", '```\n{"city": "Porto", "temp_c": 18, "summary": "rain"}\n```',
          schema=WEATHER, accept=["fail"], meta={"response_format": "json_schema"}),
    _case("FC-12-extra", "structured", '{"city": "Porto", "temp_c": 18, "summary": "rain", "wind_kmh": 20}',
          schema=WEATHER, accept=["fail"]),
    _case("FC-length", "structured", '{"city": "Porto", "temp_c": 18, "summary": "rain rain rain rain rain',
          finish="length", schema=WEATHER, accept=["fail"]),
    # FC-11: other template tokens
    _case("FC-11-chatml", "corruption", "The lamp is lit.<|im_end|>\n<|im_start|>user", accept=["fail"]),
    _case("FC-11-deepseek", "corruption", "The lamp is lit.<｜end▁of▁sentence｜>", accept=["fail"]),
    # FC-14 / FC-15: other junk, other language
    _case("FC-14-colon", "corruption", "Assistant: *La lanterne vacille.*", accept=["fail"], lang="fr",
          meta={"expected_prefix": "*"}),
    _case("FC-15-es", "corruption", "ira alza la lámpara y frunce el ceño.*", accept=["fail"], lang="es",
          meta={"expected_prefix": "*"}),
    _case("FC-16-stray", "corruption", ") *The lantern flickers.*", accept=["fail"], meta={"expected_prefix": "*"}),
    # FC-17: injected word elsewhere
    _case("FC-17-start", "corruption", "[REDACTED] Lisbon is the capital of Portugal. It lies on the Tagus estuary.",
          accept=["fail"], meta={"prompt": "Repeat exactly: Lisbon is the capital of Portugal. It lies on the Tagus estuary."}),
    # FC-19 / FC-20: switch and mix, other pairs
    _case("FC-19-uk", "language", "Маяк одиноко стоит на чёрных скалах, его белая башня ещё мокрая от ночного дождя. "
          "Внизу море серое и беспокойное.", accept=["fail"], lang="uk"),
    _case("FC-20-es-en", "language", "Voy a aplicar la corrección and then restart the server para validarlo.",
          accept=["fail"], lang="es"),
    _case("FC-20b-es-pt", "language", "Claro, el faro abre a las nueve de la mañana, mas não temos ingressos para você "
          "hoje nem amanhã.", accept=["fail"], lang="es"),
    # FC-22: mojibake in another language
    _case("FC-22-fr", "encoding", "Le phare a Ã©tÃ© repeint avant lâ€™Ã©tÃ©.", accept=["fail"], lang="fr"),
    # FC-24 / FC-25 / FC-26 / FC-28
    _case("FC-24-custom-bar", "latency", "Hi!", accept=["fail"], meta={"ttft_s": 3.0, "ttft_threshold_s": 2.5}),
    _case("FC-25-keepalives", "latency", "", finish=None, accept=["fail"],
          meta={"http_status": 200, "client_timeout_s": 30,
                "events": [{"t_s": 5.0, "line": ": OPENROUTER PROCESSING"}, {"t_s": 15.0, "line": ": OPENROUTER PROCESSING"}]}),
    _case("FC-26-valid-body", "transport", '{"choices":[{"message":{"content":"Paris."},"finish_reason":"stop"}]}',
          finish=None, accept=["pass"], meta={"http_status": 200, "raw_body": True}),
    _case("FC-27-in-band", "transport", "The lamp", finish="error", accept=["transport_error"],
          meta={"http_status": 200, "error": {"code": 502, "message": "Provider disconnected unexpectedly"}}),
    _case("FC-28-error", "transport", "", accept=["transport_error"],
          meta={"http_status": 200, "native_finish_reason": "error"}),
    _case("FC-5xx", "transport", "", finish=None, accept=["transport_error"], meta={"http_status": 503}),
    # traps
    _case("FP-01-json-events", "transport", "Paris.", accept=["pass"], meta={"events": [
        {"t_s": 0.3, "line": ": OPENROUTER PROCESSING"},
        {"t_s": 0.9, "line": 'data: {"choices":[{"delta":{"content":""}}]}'},
        {"t_s": 2.0, "line": 'data: {"choices":[{"delta":{"content":"Paris."}}]}'},
        {"t_s": 2.1, "line": "data: [DONE]"}]}),
    _case("FP-01-slow-after-keepalives", "transport", "Paris.", accept=["fail"], meta={"events": [
        {"t_s": 0.3, "line": ": OPENROUTER PROCESSING"},
        {"t_s": 12.0, "line": 'data: {"choices":[{"delta":{"content":"Paris."}}]}'}]}),
    _case("FP-06-fr", "corruption", "« Tu viens avec moi ? » demanda-t-elle sans lever les yeux.", accept=["pass"], lang="fr"),
    _case("FP-09-reasoning-event", "transport", "Use a hash map.", accept=["pass"], meta={"events": [
        {"t_s": 1.1, "line": 'data: {"choices":[{"delta":{"reasoning":"Thinking"}}]}'},
        {"t_s": 13.4, "line": 'data: {"choices":[{"delta":{"content":"Use a hash map."}}]}'}]}),
    _case("FP-11-es", "corruption", "sí sí sí sí sí", accept=["pass", "inconclusive"], lang="es"),
    _case("FP-sorry", "refusal", "\"Sorry I'm late,\" she said, and set the lamp on the table.", accept=["pass"]),
]


@pytest.mark.parametrize("case", VARIANTS, ids=[c["id"] for c in VARIANTS])
def test_variant(case):
    """Each fault's kind, in other languages, positions and shapes, gets the verdict its kind implies."""
    [verdict] = list(check_lines([json.dumps(case)]))
    assert verdict["outcome"] in case["accept"], verdict


# -- the reader -------------------------------------------------------------------------


@pytest.mark.parametrize("line, fragment", [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"id": "X-1", "kind": "language", "output_text": 7}', "output_text"),
    ('{"id": "X-2", "kind": "weather", "output_text": ""}', "unknown kind"),
    ('{"id": "X-3", "kind": "latency", "output_text": "", "meta": {"ttft_s": "fast"}}', "ttft_s"),
    ('{"id": "X-4", "kind": "latency", "output_text": "", "meta": {"events": "lots"}}', "events"),
    ('{"kind": "latency", "output_text": ""}', "'id'"),
    ('{"id": "X-5", "kind": "latency", "output_text": "", "meta": {"ttft_s": -1}}', "meta.ttft_s"),
    ('{"id": "X-6", "kind": "latency", "output_text": "", "meta": {"http_status": true}}', "meta.http_status"),
    ('{"id": "X-7", "kind": "latency", "output_text": "", "meta": {"reply": {"colour": "red"}}}', "colour"),
    ('{"id": "X-8", "kind": "tools", "output_text": "", "meta": {"variant": "twice"}}', "meta.variant"),
    ('{"id": "X-9", "kind": "tools", "output_text": "", "tool_calls": [{"arguments": {"a": 1}}]}',
     "tool_calls[0].arguments"),
    ('{"id": "X-10", "kind": "refusal", "output_text": "", "meta": {"pinned": {"provider": "a/b"}}}',
     "provider_name"),
])
def test_malformed_lines_become_error_verdicts(line, fragment):
    """A malformed line yields an outcome 'error' verdict with the reason; it never raises."""
    [verdict] = list(check_lines([line]))
    assert verdict["outcome"] == "error" and verdict["checks"] == []
    assert verdict["reason"].startswith("malformed_case:") and fragment in verdict["reason"]


def test_bad_line_does_not_stop_the_file(tmp_path):
    """Lines after a bad one are still judged; blank lines are skipped."""
    good = json.dumps(_case("OK-1", "corruption", "*The lamp is lit.*", accept=["pass"]))
    path = tmp_path / "cases.jsonl"
    path.write_text(f"{{oops\n\n{good}\n", encoding="utf-8")
    verdicts = list(check_file(path))
    assert [v["outcome"] for v in verdicts] == ["error", "pass"]
    assert verdicts[0]["id"] == "line-1"


def test_case_mapping():
    """Case kinds and meta fields map onto the probe spec and the reply."""
    case = parse_case(_case("M-1", "corruption", "x", accept=["fail"],
                            meta={"prompt": "Repeat exactly: The sea is calm.", "expected_prefix": "*"}))
    assert (case.spec.kind, case.spec.echo_text, case.spec.expected_prefix) == ("echo", "The sea is calm.", "*")
    case = parse_case(_case("M-2", "encoding", "x", accept=["fail"], lang="pt"))
    assert (case.spec.kind, case.spec.language) == ("language", "pt")
    case = parse_case(_case("M-3", "structured", "{}", accept=["fail"], schema=WEATHER))
    assert case.spec.response_format == "json_schema"
    case = parse_case(_case("M-4", "latency", "", accept=["fail"], finish=None,
                            meta={"client_timeout_s": 100, "http_status": 200, "usage": {"completion_tokens": 0}}))
    assert case.reply.timed_out and case.reply.total_ms == 100_000.0
    case = parse_case(_case("M-5", "transport", "Paris.", accept=["pass"], meta={"events": [
        {"t_s": 0.3, "line": ": OPENROUTER PROCESSING"}, {"t_s": 2.0, "line": "data: {delta.content:'Paris.'}"}]}))
    assert (case.spec.kind, case.reply.ttft_ms, case.reply.keepalives) == ("ttft", 2000.0, 1)
