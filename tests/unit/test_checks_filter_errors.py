"""A content filter speaking through an HTTP 4xx is a refusal; other 4xx stay transport errors."""

from __future__ import annotations

import json

import pytest

from reverie_canary.client.checks import evaluate
from reverie_canary.client.checks.transport import FILTER_SCAN_CHARS, check_transport, filter_evidence
from reverie_canary.client.reply import ProbeSpec, Reply
from tests.family_cases import CAUGHT, TRAPS

SPEC = ProbeSpec(kind="refusal", language="en")


def _cases(cases):
    return [(json.loads(text)["status"], json.loads(text)["body"]) for _, text in cases]


@pytest.mark.parametrize("status, body", _cases(CAUGHT["filter"]))
def test_a_4xx_saying_a_content_filter_blocked_it_is_a_refusal(status, body):
    """Azure, Anthropic, OpenAI, DashScope, DeepSeek, Zhipu, Moonshot bodies, raw or typed: content_filter."""
    result = check_transport(Reply(http_status=status, error=body), SPEC)
    assert (result.outcome, result.reason) == ("fail", "content_filter"), result
    assert result.evidence["http_status"] == status


@pytest.mark.parametrize("status, body", _cases(TRAPS["filter"]))
def test_other_4xx_stay_as_they_are(status, body):
    """Too long, context length, data policy, the key's guardrail, payload, parameters, rate limits."""
    result = check_transport(Reply(http_status=status, error=body), SPEC)
    assert result.outcome in ("transport_error", "blind") and result.reason != "content_filter"
    expected = {401: "gateway_auth", 402: "gateway_credit", 403: "gateway_forbidden"}.get(status, f"http_{status}")
    assert result.reason == expected


def test_the_evidence_says_what_said_filter():
    """The code or the words that matched travel as evidence."""
    body = {"type": "error", "error": {"type": "invalid_request_error",
                                       "message": "Output blocked by content filtering policy"}}
    result = check_transport(Reply(http_status=400, error=body), SPEC)
    assert result.evidence["filter"] == "Output blocked" and result.evidence["error"] == body
    assert filter_evidence({"error": {"code": "content_filter", "message": "x"}}) == "content_filter"
    assert filter_evidence({"error": {"code": 400, "message": "temperature out of range"}}) is None
    assert filter_evidence(None) is None and filter_evidence({"error": "content filter"}) == "content filter"


def test_a_rate_limit_or_timeout_is_never_a_filter():
    """408 and 429 are cleared by a retry, whatever their message says; 401 and 402 are the canary's own."""
    body = {"error": {"code": "content_filter", "message": "content filter busy"}}
    for status, outcome in ((408, "transport_error"), (429, "transport_error"), (401, "blind"), (402, "blind")):
        assert check_transport(Reply(http_status=status, error=body), SPEC).outcome == outcome


def test_a_routing_answer_is_never_a_filter():
    """An availability error (routing, data policy) is not a filter even if its text mentions one."""
    body = {"error": {"code": 404, "message": "No endpoints found: content filter settings exclude all",
                      "availability": {"code": "constraint_filtered"}}}
    assert check_transport(Reply(http_status=404, error=body), SPEC).reason == "http_404"


def test_only_the_start_of_a_long_raw_error_is_read():
    """Bounded work: an upstream's raw error is read for FILTER_SCAN_CHARS characters."""
    far = {"error": {"code": 400, "message": "Provider returned error",
                     "metadata": {"raw": "x" * FILTER_SCAN_CHARS + " content filter"}}}
    near = {"error": {"code": 400, "message": "Provider returned error",
                      "metadata": {"raw": "content filter " + "x" * FILTER_SCAN_CHARS}}}
    assert filter_evidence(far) is None and filter_evidence(near) == "content filter"


def test_the_filter_ends_the_evaluation_as_a_quality_fail():
    """Through evaluate: the probe fails content_filter, which ranks before everything but a late first token."""
    body = {"error": {"message": "Your request was rejected as a result of our safety system.",
                      "code": "content_policy_violation"}}
    result = evaluate(Reply(http_status=400, error=body), SPEC)
    assert (result.outcome, result.reason) == ("fail", "content_filter") and len(result.checks) == 1
