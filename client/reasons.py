"""What every probe reason code means: the one table of them.

A check's :class:`~reverie_canary.client.reply.CheckResult` carries an outcome and a machine-readable
reason code; a probe's result carries the reason its fold picked (the precedence table in
:mod:`reverie_canary.client.checks`).  The codes are stable: dashboards, alerts, evidence bundles and
the chat backends' live counts key on them.  This module says, once, what each one means; the
documentation's reason reference is generated from it (``canary docs --write``) and a test fails
when a check emits a code that is not here.

Each entry is a :class:`Reason`: the outcome the code goes with, where it comes from (``every
reply``, a probe kind, the transport, the pin check) and what the reply showed.  Codes with a
variable part are in :data:`REASON_PATTERNS`.
"""

from __future__ import annotations

from typing import NamedTuple


class Reason(NamedTuple):
    """One reason code: its outcome, where it comes from and what it means.

    Attributes:
        outcome: ``fail``, ``inconclusive``, ``transport_error``, ``blind`` or ``not_applicable``
            (several joined by ``/`` when the code goes with more than one).
        source: ``every reply``, a probe kind (``ttft``, ``refusal``, ``structured``, ``language``,
            ``echo``, ``tools``), ``template`` (a fact the judge reads across a model's providers),
            ``transport`` (the HTTP layer and the status) or ``pin``.
        meaning: what the reply (or its absence) showed, in a sentence or two.
    """

    outcome: str
    source: str
    meaning: str


#: Every fixed reason code, grouped as the reference shows them.
REASONS: dict[str, Reason] = {
    # -- the kinds' own contracts ---------------------------------------------------------------
    "ttft_exceeded": Reason("fail", "ttft", "No visible text within the time-to-first-token bar (10 s by default) "
                            "on a stream the client kept open up to it."),
    "no_timing": Reason("inconclusive", "ttft", "The reply carries no first-token time to judge."),
    "content_filter": Reason("fail", "every reply", "A filter stopped the benign canary traffic: "
                             "`finish_reason: content_filter`, or a 4xx whose error body says a content filter "
                             "blocked the prompt or the output (a 403 moderation flag, Azure's `content_filter`, "
                             "`content_policy_violation`, `DataInspectionFailed` ...). No retry clears it."),
    "refusal": Reason("fail", "every reply", "High-confidence refusal phrasing in the request's language."),
    "empty_output": Reason("fail", "every reply", "No visible text on a clean stop (also when reasoning came but "
                           "no answer)."),
    "reasoning_budget": Reason("inconclusive", "every reply", "Reasoning spent the output budget before the "
                               "answer: nothing to judge."),
    "budget_exhausted": Reason("inconclusive", "every reply", "The budget ran out (`finish_reason: length`) "
                               "before any visible text, without reasoning."),
    "timed_out": Reason("inconclusive", "every reply", "The client gave up waiting; the latency check judges "
                        "the wait."),
    "truncated": Reason("fail", "refusal / structured", "The reply stopped before its closing marker or its "
                        "JSON value ended (text cut off)."),
    "truncated_at_length": Reason("inconclusive", "refusal", "The closing marker is missing because the output "
                                  "budget ran out (`finish_reason: length`)."),
    "schema_invalid": Reason("fail", "structured", "The JSON object does not validate against the probe's "
                             "fixed JSON Schema."),
    "not_json": Reason("fail", "structured", "The structured reply is not JSON."),
    "fenced": Reason("fail", "structured", "The JSON came wrapped in a Markdown code fence."),
    "bad_schema": Reason("inconclusive", "structured", "The probe's own schema could not be used (a canary "
                         "fault, never the provider's)."),
    "validator_missing": Reason("not_applicable", "structured / tools", "The JSON Schema validator is not "
                                "installed here, so the schema was not checked."),
    "echo_mismatch": Reason("fail", "echo", "The reply did not repeat the text it was asked to echo."),
    "unexpected_tool_calls": Reason("fail", "every reply", "A tool call instead of an answer, on a probe that "
                                    "offered no tools."),
    # -- language -------------------------------------------------------------------------------
    "language_switch": Reason("fail", "language", "The whole reply is in another language; also a reply too "
                              "short to detect that is all in a script the language never uses (`好的` to a "
                              "Portuguese request)."),
    "language_mix": Reason("fail", "language", "Persistent mixing of another language into the reply."),
    "too_short": Reason("inconclusive", "language", "Too little text to tell the language."),
    "neighbour": Reason("inconclusive", "language", "A close neighbour of the language (Spanish for "
                        "Portuguese ...) that the detector cannot tell apart with confidence."),
    "ambiguous": Reason("inconclusive", "language", "The detector's answer is not confident."),
    "detectors_disagree": Reason("inconclusive", "language", "The two language detectors disagree."),
    "unsupported_language": Reason("inconclusive", "language", "The detector does not know the requested "
                                   "language."),
    "foreign_script": Reason("fail", "every reply but structured and tools", "One letter to a few words of a "
                             "script the requested language never uses (`Mira ergue a 灯 lanterna`); names in "
                             "Latin, quoted foreign words, glosses in brackets, emoji and code pass."),
    "foreign_letters": Reason("fail", "every reply but structured and tools", "Words of another language of the "
                              "same script (Ukrainian `і ї є` in Russian, `ñ` in Portuguese, kana in Chinese ...), "
                              "two distinct words at least."),
    # -- behaviour: every reply -----------------------------------------------------------------
    "leading_junk": Reason("fail", "every reply", "Junk before the first expected character: a role word, a lost "
                           "first token, a stray mark before the Markdown."),
    "control_tokens": Reason("fail", "every reply", "Template, end-of-turn or reasoning tokens in the text "
                             "(`<|im_end|>`, `[INST]`, `<think>`), with any bar or spacer."),
    "reserved_tokens": Reason("fail", "every reply", "Reserved and placeholder tokens (`<unused123>`, "
                              "`<extra_id_7>`, `[PAD]`, `<|endoftext|>` ...)."),
    "channel_leak": Reason("fail", "every reply", "Reasoning or channel text whose Harmony markers a parser "
                           "stripped (`analysisThe user wants…assistantfinal…`)."),
    "tool_markup_in_content": Reason("fail", "every reply", "A tool call left in the visible text: tool-call "
                                     "tokens of any serving stack, tags (`<tool_call>`, `<function=…>`), a "
                                     "tool-call JSON object as prose, pythonic calls; never code the reply shows "
                                     "as code."),
    "bytelevel_tokens": Reason("fail", "every reply", "Byte-level or SentencePiece markers (`Ġ`, `Ċ`, `▁`) "
                               "instead of spaces and newlines."),
    "control_characters": Reason("fail", "every reply", "Control characters in the text."),
    "encoding_broken": Reason("fail", "every reply", "U+FFFD replacement characters or mojibake (UTF-8 read as "
                              "cp1252, an old code page)."),
    "repetition": Reason("fail", "every reply", "A runaway loop (repeated output in a code block passes)."),
    "duplicated_text": Reason("fail", "every reply", "The reply, or a prose passage of it, sent twice."),
    "word_salad": Reason("fail", "every reply but structured", "A collapsed generation: word fragments between "
                         "backslashes, doubled separators, or 60+ words without a sentence mark."),
    "reply_too_large": Reason("fail", "every reply", "Text past every budget: the prober's cap on what it keeps "
                              "(`CANARY_REPLY_MAX_BYTES`), or a tool call's arguments past theirs."),
    "no_text": Reason("not_applicable", "every reply", "No visible text: a check that needs text did not run "
                      "(the empty-output check judges it)."),
    "reply_cut": Reason("not_applicable", "every reply", "The prober stopped reading at a cap: the checks that "
                        "need the whole reply did not run."),
    # -- tool calls -----------------------------------------------------------------------------
    "tool_not_called": Reason("fail", "tools", "A call was required and none was made (confirmed by two more "
                              "tries: it can be the model's randomness)."),
    "tool_unexpected_call": Reason("fail", "tools", "No tool fitted and a call was made (confirmed by two more "
                                   "tries)."),
    "tool_wrong_tool": Reason("fail", "tools", "A call to another offered tool than the one the prompt asks for."),
    "tool_too_many_calls": Reason("fail", "tools", "More calls than the request allows."),
    "tool_empty_reply": Reason("fail", "tools", "No text and no call on a clean stop."),
    "tool_unknown_name": Reason("fail", "tools", "A call names no offered tool (exact match)."),
    "tool_args_invalid_json": Reason("fail", "tools", "The arguments are not JSON as `JSON.parse` reads it, "
                                     "nothing repaired (empty, truncated, fenced, double-encoded)."),
    "tool_args_schema_mismatch": Reason("fail", "tools", "The arguments do not validate against the tool's "
                                        "schema (JSON Schema draft 7, as the gateway validates)."),
    "tool_args_wrong_value": Reason("fail", "tools", "A value the prompt fixed differs (compared as a value: "
                                    "`250.0` equals `250`, strings after NFC and case folding)."),
    "tool_stream_assembly": Reason("fail", "tools", "Streamed calls did not assemble as unstreamed ones would (a "
                                   "new id at a used index, a name in pieces, fragments after the finish)."),
    "tool_call_malformed": Reason("fail", "tools", "A call is malformed on the wire (missing or repeated ids, "
                                  "values back to back)."),
    "tool_result_ignored": Reason("fail", "tools", "The second turn does not use the tool's result."),
    "tool_capability_error": Reason("fail", "tools", "400 or 422 to a valid tool request from an endpoint that "
                                    "lists `tools`: it fails the capability it advertises."),
    "tools_unsupported": Reason("not_applicable", "tools", "The gateway's own 404: no endpoint of the model "
                                "supports tool use."),
    "no_call": Reason("not_applicable", "tools", "No call was made, so the call's checks did not run."),
    "no_output": Reason("not_applicable", "tools", "Neither text nor a call to check."),
    "no_arguments": Reason("not_applicable", "tools", "The call has no arguments to check."),
    "no_tools": Reason("not_applicable", "tools", "The probe offered no tools."),
    "unknown_name": Reason("not_applicable", "tools", "The call names an unknown tool: there is no schema to "
                           "check its arguments against."),
    "schema_unusable": Reason("not_applicable", "tools", "The tool's schema could not be used to validate (a "
                              "canary fault)."),
    # -- facts across the providers of a model (the judge, kind template) ------------------------
    "prompt_tokens_differ": Reason("fail", "template", "Across the providers of a model in one cycle: for the same "
                                   "prompt (probe kind, language, variant, prompt version) this provider's "
                                   "`usage.prompt_tokens` is outside the tolerance of the count most of its peers "
                                   "report (at least 3 reporting): another chat template or tokenizer, or tokens "
                                   "billed that were not read. The verdict's reason names both counts."),
    "max_tokens_ignored": Reason("fail", "template", "The reply's `usage.completion_tokens` is above the request's "
                                 "`max_tokens`: the parameter was not honoured (judged where at most half of the "
                                 "model's reporting providers, at least 3, exceed it)."),
    # -- the capability and the pin -------------------------------------------------------------
    "unsupported_parameter": Reason("not_applicable", "capability", "The endpoint does not list a parameter the "
                                    "probe needs (`response_format`, `tools`): it is not probed for that kind."),
    "checks_overdue": Reason("inconclusive", "every reply", "The prober's checks did not finish before the task's "
                             "deadline (the canary's machine overloaded): the result is published in time "
                             "and proves nothing about the provider."),
    "unknown_variant": Reason("inconclusive", "tools", "The task names a variant of its kind the prober does not "
                              "know (a newer discovery than the prober): nothing was sent."),
    "pin_violated": Reason("inconclusive", "pin", "The reply names another provider than the one the probe "
                           "pinned: it proves nothing about the pinned one."),
    "pin_endpoint_unproven": Reason("not_applicable", "pin", "The name matches, but the model lists several "
                                    "endpoints under it: the provider is proven, not the endpoint."),
    "pin_unverifiable": Reason("not_applicable", "pin", "The reply names no provider (or the endpoint is listed "
                               "without a name): nothing to prove or disprove."),
    # -- transport ------------------------------------------------------------------------------
    "in_band_error": Reason("transport_error", "transport", "An error chunk inside a 200 stream."),
    "finish_reason_error": Reason("transport_error", "transport", "`finish_reason: error`."),
    "native_finish_reason_error": Reason("transport_error", "transport", "The upstream's native finish reason "
                                         "names an error, a timeout or an abort."),
    "stream_cut": Reason("transport_error", "transport", "A stream that ended without a finish reason (no "
                         "`[DONE]`)."),
    "stream_stalled": Reason("transport_error", "transport", "Output started, then the stream stalled until the "
                             "client gave up."),
    "stream_timeout": Reason("transport_error", "transport", "The stream started and then stopped sending "
                             "within the request's limit."),
    "headers_timeout": Reason("transport_error", "transport", "No response headers within the request's limit."),
    "connection_lost": Reason("transport_error", "transport", "The connection closed before the response "
                              "headers."),
    "body_parse": Reason("transport_error", "transport", "A body or chunk that is not the chat-completion JSON."),
    "response_too_large": Reason("transport_error", "transport", "More bytes on the wire than "
                                 "`CANARY_RESPONSE_MAX_BYTES`."),
    "line_too_long": Reason("transport_error", "transport", "One SSE line longer than "
                            "`CANARY_SSE_LINE_MAX_BYTES`."),
    "task_deadline": Reason("transport_error", "transport", "The task's cycle deadline left no time for the "
                            "request: nothing was sent."),
    "connect_error": Reason("blind", "transport", "The gateway refused the connection or could not be resolved "
                            "(reported as `gateway_unreachable`)."),
    "connect_timeout": Reason("blind", "transport", "The connection to the gateway timed out (reported as "
                              "`gateway_unreachable`)."),
    # -- the canary's own health ----------------------------------------------------------------
    "gateway_auth": Reason("blind", "transport", "401: the canary's key is missing or revoked. The canary is "
                           "blind; no provider's streak moves."),
    "gateway_credit": Reason("blind", "transport", "402: the canary's account has no credit left."),
    "gateway_forbidden": Reason("blind", "transport", "A 403 that is neither a moderation refusal nor a content "
                                "filter: the key may not do this."),
    "gateway_unreachable": Reason("blind", "transport", "No connection to the gateway at all (refused, "
                                  "unresolvable, connect timeout)."),
}

#: Reason codes with a variable part: the pattern as the reference writes it, and its meaning.
REASON_PATTERNS: dict[str, Reason] = {
    "http_<status>": Reason("transport_error", "transport", "Any other status than 200 that is not a content "
                            "filter or a canary-side answer: 408, 429, 5xx, and 4xx the provider gave."),
    "http_error:<exception>": Reason("transport_error", "transport", "Another failure of the HTTP client, named "
                                     "by its exception type."),
}


class DecisionReason(NamedTuple):
    """One reason code of the judge's decisions: the actions it goes with and what it means.

    Attributes:
        actions: the decision actions that carry it, joined by `` / ``.
        meaning: why the judge decided so, in a sentence.
    """

    actions: str
    meaning: str


#: Every reason code the judge gives a decision (``Decision.reason``).  ``canary_blind`` also
#: carries, instead of one of these, the cause another service reported (:data:`DECISION_EXTERNAL`).
#: Like the probe codes, stable: the notices, the dashboard and ``canary explain`` show them.
DECISION_REASONS: dict[str, DecisionReason] = {
    "failed_cycles": DecisionReason("suspend / would_suspend", "The provider failed the cycles in a row that "
                                    "suspend it (two by default); `would_suspend` in observe mode."),
    "expired": DecisionReason("end / would_end", "The suspension reached its `until` (or came due while the canary "
                              "was blind and its provider was judged again)."),
    "recovered": DecisionReason("end / would_end", "Passed cycles in a row during the suspension (two by default) "
                                "ended it early; the ladder step is kept."),
    "lifted": DecisionReason("end / would_end", "An operator lifted the suspension (`actor` says who)."),
    "capacity_floor": DecisionReason("floor_held", "The provider would be suspended, but fewer than the capacity "
                                     "floor's usable hosts would remain: not suspended."),
    "canary_blind": DecisionReason("suspension_held", "The suspension came due while the canary could not see its "
                                   "provider: held until a cycle judges it again or an operator lifts it."),
    "blind": DecisionReason("canary_blind", "The canary went blind on probe results that named no cause."),
    "judged_again": DecisionReason("canary_sees", "A cycle judged the model's providers again after `canary_blind`."),
    "frozen_too_long": DecisionReason("unjudgeable", "The provider's cycles were frozen (transport errors, "
                                      "inconclusive, missing results) too many in a row to judge it."),
    "operator": DecisionReason("mode_changed", "An operator switched observe or enforce mode."),
    "common_mode": DecisionReason("common_mode", "One probe kind failed for most providers of the model at once: "
                                  "a cause they share, frozen for everyone that cycle."),
    "control_passed": DecisionReason("control_passed", "The positive control passed a probe kind: that cycle's "
                                     "results of the kind prove nothing."),
    "pin_violated": DecisionReason("pin_violated", "The gateway served probes pinned to the provider from another "
                                   "provider: they prove nothing about it."),
}

#: Decision reasons the judge carries from another service rather than gives: per action, where they come from.
DECISION_EXTERNAL: dict[str, str] = {
    "canary_blind": "the cause the canary went blind of: a blind probe's reason (`gateway_auth`, `gateway_credit`, "
                    "`gateway_forbidden`, `gateway_unreachable`) or an unplanned cycle's cause (the causes table "
                    "below)",
}


def meaning(code: str) -> Reason | None:
    """The :class:`Reason` of ``code`` (a fixed code or one of :data:`REASON_PATTERNS`), or ``None`` when unknown."""
    if code in REASONS:
        return REASONS[code]
    if code.startswith("http_error:"):
        return REASON_PATTERNS["http_error:<exception>"]
    if code.startswith("http_") and code[5:].isdigit():
        return REASON_PATTERNS["http_<status>"]
    return None
