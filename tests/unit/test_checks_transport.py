"""Transport (docs/concepts/probes.md, the latency contract): breakage below the content level is never a quality failure."""

from __future__ import annotations

import pytest

from reverie_canary.client.checks.transport import check_transport
from reverie_canary.client.reply import ProbeSpec, Reply

SPEC = ProbeSpec(kind="ttft", language="en")


@pytest.mark.parametrize("reply, reason", [
    (Reply(transport_error="headers_timeout"), "headers_timeout"),
    (Reply(transport_error="body_parse", http_status=200), "body_parse"),               # FC-26
    (Reply(http_status=408), "http_408"),
    (Reply(http_status=429, error={"error": {"code": 429, "message": "rate limited"}}), "http_429"),
    (Reply(http_status=500), "http_500"),
    (Reply(http_status=502), "http_502"),
    (Reply(http_status=503), "http_503"),
    (Reply(http_status=524), "http_524"),
    (Reply(http_status=529), "http_529"),
    (Reply(transport_error="connection_lost"), "connection_lost"),                      # no headers: upstream
    (Reply(http_status=200, text="The lamp", error={"code": 502, "message": "Provider disconnected"},
           finish_reason="error"), "in_band_error"),                                    # mid-stream error chunk
    (Reply(http_status=200, text="The lamp", finish_reason="error"), "finish_reason_error"),
    (Reply(http_status=200, text="", finish_reason="stop", native_finish_reason="network_error"),
     "native_finish_reason_error"),                                                     # FC-28
    (Reply(http_status=200, text="", finish_reason="stop", native_finish_reason="error"), "native_finish_reason_error"),
    (Reply(http_status=200, text="The lamp is li", finish_reason=None), "stream_cut"),
    (Reply(http_status=200, text="The lamp is li", ttft_ms=900.0, timed_out=True), "stream_stalled"),
])
def test_transport_errors(reply, reason):
    """Each way the exchange can break is a transport_error with its own reason."""
    result = check_transport(reply, SPEC)
    assert (result.outcome, result.reason) == ("transport_error", reason)


@pytest.mark.parametrize("reply", [
    Reply(http_status=200, text="Paris.", finish_reason="stop", keepalives=2),        # FP-01
    Reply(http_status=200, text="", finish_reason="content_filter"),                   # a filter is a quality fail
    Reply(http_status=200, text="", finish_reason="stop"),                             # FC-04: empty is judged later
    Reply(http_status=200, text="", timed_out=True),                                    # FC-25: a latency fail
    Reply(http_status=None, text="Paris.", finish_reason="stop"),                      # recorded without status
    Reply(http_status=200, text="x", finish_reason="stop", native_finish_reason="end_turn"),
    Reply(http_status=200, text="x", finish_reason="length", native_finish_reason="MAX_TOKENS"),
])
def test_judgeable_replies_pass_transport(reply):
    """Keep-alives, filters, empty replies and silent streams are for the quality checks to judge."""
    assert check_transport(reply, SPEC).outcome == "pass"


def test_late_first_token_then_stall_is_left_to_latency():
    """A stream whose first token was already over the threshold is a latency fail, not a transport error."""
    reply = Reply(http_status=200, text="The lamp", ttft_ms=12_000.0, timed_out=True)
    assert check_transport(reply, SPEC).outcome == "pass"


def test_moderation_403_is_a_filter_fail():
    """A 403 moderation refusal of the benign canary prompt is a content_filter fail (OpenRouter's error documentation)."""
    error = {"error": {"code": 403, "message": "flagged", "metadata": {"reasons": ["violence"], "flagged_input": "..."}}}
    result = check_transport(Reply(http_status=403, error=error), SPEC)
    assert (result.outcome, result.reason) == ("fail", "content_filter")
    assert check_transport(Reply(http_status=403, error={"error": {"code": 403}}), SPEC).reason == "gateway_forbidden"


@pytest.mark.parametrize("reply, reason", [
    (Reply(http_status=401, error={"error": {"code": 401, "message": "No auth credentials found"}}), "gateway_auth"),
    (Reply(http_status=402, error={"error": {"code": 402, "message": "Insufficient credits"}}), "gateway_credit"),
    (Reply(http_status=403, error={"error": {"code": 403, "message": "Key disabled"}}), "gateway_forbidden"),
    (Reply(transport_error="connect_error"), "gateway_unreachable"),
    (Reply(transport_error="connect_timeout"), "gateway_unreachable"),
])
def test_canary_side_answers_are_blind(reply, reason):
    """401, 402, a 403 for the key and no connection to the gateway are the canary's own blindness, not a provider's."""
    result = check_transport(reply, SPEC)
    assert (result.outcome, result.reason) == ("blind", reason)


def test_blind_ends_the_evaluation():
    """A blind exchange is not judged further: one transport check, outcome blind, for every kind."""
    from reverie_canary.client.checks import evaluate

    for kind in ("ttft", "refusal", "structured", "language", "echo"):
        evaluation = evaluate(Reply(http_status=401), ProbeSpec(kind=kind, language="en"))
        assert (evaluation.outcome, evaluation.reason) == ("blind", "gateway_auth")
        assert [c.check for c in evaluation.checks] == ["transport"]
