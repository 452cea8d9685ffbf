"""The checks: pure functions from a finished reply to an outcome.

``evaluate(reply, spec)`` runs every check that applies to the probe kind plus
behavioural integrity, and folds them into one :class:`Evaluation`
(docs/concepts/probes.md).  No network, no clock.

Order in which the checks run:

1. transport (:mod:`.transport`) decides alone: a transport error, a 403
   moderation filter or a canary-side answer (``blind``: 401, 402, 403, no
   connection to the gateway) ends the evaluation;
2. the kind's checks (:data:`KIND_CHECKS`), the finish-reason filter and the
   empty-output check first; the encoding check (a few µs) runs on every
   reply, not only the language probe's: mojibake breaks any reply; the
   prose checks (:data:`PROSE_CHECKS`: foreign script, :mod:`.scripts`; word
   salad, :mod:`.salad`; letters of another language of a shared script,
   :mod:`.letters`) on every reply but the structured and tool probes'
   (a JSON value may name a place in its own script, and JSON is all marks;
   a tool call is not prose); the tool probe's checks (:mod:`.tools`:
   trigger, empty reply, names, arguments JSON, schema, fixed values,
   assembly, the second turn's result) in place of ``empty_output`` (empty
   content beside a call is normal);
3. behavioural integrity (:mod:`.behaviour`, tool-call markup in the text
   among it), a reply sent twice (:mod:`.duplicate`) and the size bound
   (:mod:`.size`) on every reply;
4. late checks (:data:`LATE_CHECKS`): language detection for the language
   probe (it only means something on intact text) and truncation for the
   filtering probe.

Folding rule: any ``fail`` makes the probe ``fail``, else any
``inconclusive`` makes it ``inconclusive``, else ``pass``
(``not_applicable`` checks count for nothing).  When several checks fail, the
reason reported is the one that names the cause, by this table of precedence
(:data:`FAIL_PRECEDENCE`; within a row, and among inconclusive checks, the
first check in running order gives the reason):

====  ===============================================  ==========================================
rank  failing reason                                   why it comes first
====  ===============================================  ==========================================
1     ``ttft_exceeded``                                the latency probe's own contract, measured
                                                       before any text exists
2     ``content_filter``                               a filter stop explains empty, short, cut
                                                       or refused text (FC-02)
3     ``refusal``                                      a refusal explains a missing closing
                                                       marker, a short reply, a switch to English
4     ``encoding_broken``, ``bytelevel_tokens``,       damaged bytes, tokens or templates explain
      ``tool_markup_in_content``,                      failed parsing, language detection, echo
      ``control_tokens``, ``reserved_tokens``,         and truncation, and a ``tool_calls`` finish
      ``channel_leak``, ``control_characters``,        whose call leaked into the text (FC-11),
      ``leading_junk``                                 and a call the tool probe missed (TC-01)
5     ``unexpected_tool_calls``                        a tool call instead of an answer explains
                                                       empty or cut text
6     ``repetition``, ``duplicated_text``              a runaway, or the reply (or a passage) sent
                                                       twice, explains a cut, a broken JSON value,
                                                       a failed echo, a reply too large
7     ``word_salad``                                   a collapsed generation explains the same
                                                       (a repeated unit says more: row 6 first)
8     ``reply_too_large``                              output past every budget (the prober's
                                                       cap; a call's arguments past theirs)
                                                       explains what the kind finds in it
9     ``empty_output``, ``tool_empty_reply``           nothing visible, and nothing more specific
                                                       says why
10    ``tool_stream_assembly``,                        calls that did not assemble explain a bad
      ``tool_call_malformed``                          name, broken JSON, a lost value (TC-15)
11    ``tool_not_called``, ``tool_unexpected_call``,   the wrong decision to call explains what
      ``tool_wrong_tool``, ``tool_too_many_calls``     the calls' contents show
12    ``tool_unknown_name``                            an unknown tool has no schema to check
13    ``tool_args_invalid_json``                       no object, no schema to validate
14    ``tool_args_schema_mismatch``                    a wrong type or a lost required field
                                                       explains a value that differs (TC-14)
15    ``tool_args_wrong_value``, ``tool_result_ignored``  the tool contract's last word
16    the kind's contract: ``schema_invalid``,         what the probe was sent to find; a reason
      ``not_json``, ``fenced``, ``language_switch``,   not in this table ranks here
      ``language_mix`` ... (any other reason)
17    ``foreign_script``, ``foreign_letters``          a few letters of a foreign script, or words
                                                       of another language of a shared script: a
                                                       mix or a switch the language check proves
                                                       says more
18    ``truncated``, ``echo_mismatch``                 consequences of many defects: last
====  ===============================================  ==========================================

A reply the prober stopped reading at a cap (``Reply.cut``) is not whole:
the checks that need the whole reply (:data:`NEEDS_WHOLE_REPLY`: structure,
echo, truncation, language) say ``not_applicable`` / ``reply_cut`` without
running (what they would find ranks below ``reply_too_large`` anyway, and the
language check alone took 5 s of CPU on a capped 256 KiB reply).

No check turns what another calls inconclusive into a counted failure: a
check that needs the whole reply says ``not_applicable`` / ``no_text`` on a
reply without visible text (``refusal.empty`` judges it) and
``inconclusive`` / ``reasoning_budget`` when reasoning spent the output
budget (FP-07, FP-08); the latency check fails a reply without text only when
the client waited on an open stream up to the bar (FC-25).

Reason codes (stable): ``ttft_exceeded``, ``no_timing``, ``content_filter``,
``empty_output``, ``reasoning_budget``, ``budget_exhausted``, ``timed_out``,
``truncated``, ``truncated_at_length``, ``refusal``, ``schema_invalid``,
``not_json``, ``fenced``, ``language_switch``, ``language_mix``,
``too_short``, ``foreign_script``, ``foreign_letters``, ``neighbour``, ``ambiguous``, ``detectors_disagree``,
``unsupported_language``, ``encoding_broken``, ``leading_junk``,
``control_tokens``, ``reserved_tokens``, ``channel_leak``, ``bytelevel_tokens``, ``control_characters``,
``repetition``, ``duplicated_text``, ``word_salad``, ``echo_mismatch``, ``unexpected_tool_calls``,
``reply_too_large``,
the tool-call probe's (:data:`.tools.TOOL_REASONS`: ``tool_not_called``, ``tool_unexpected_call``,
``tool_wrong_tool``, ``tool_too_many_calls``, ``tool_empty_reply``, ``tool_unknown_name``,
``tool_args_invalid_json``, ``tool_args_schema_mismatch``, ``tool_args_wrong_value``,
``tool_stream_assembly``, ``tool_call_malformed``, ``tool_result_ignored``,
``tool_markup_in_content``; :data:`TOOL_TRIGGER_REASONS` are confirmed by two more tries),
``no_text`` and ``reply_cut`` (``not_applicable``); transport:
``http_<status>``, ``in_band_error``, ``finish_reason_error``,
``native_finish_reason_error``, ``stream_cut``, ``stream_stalled`` and the
HTTP layer's own (``headers_timeout``, ``stream_timeout``,
``body_parse``, ``response_too_large``, ``line_too_long`` ...), and for the tool probe
``tool_capability_error`` (``fail``: 400/422 to a valid tool request) and ``tools_unsupported``
(``not_applicable``: the gateway found no endpoint that supports tool use); ``blind``:
``gateway_auth``, ``gateway_credit``, ``gateway_forbidden``,
``gateway_unreachable`` (the canary's own health, never a provider's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import msgspec
from msgspec import Struct

from reverie_canary.client.bounds import clamp
from reverie_canary.client.checks.behaviour import BEHAVIOUR_CHECKS, check_echo
from reverie_canary.client.checks.duplicate import check_duplicate
from reverie_canary.client.checks.encoding import check_encoding
from reverie_canary.client.checks.latency import check_ttft
from reverie_canary.client.checks.letters import check_foreign_letters
from reverie_canary.client.checks.refusal import (
    check_empty,
    check_finish,
    check_refusal_phrasing,
    check_truncation,
)
from reverie_canary.client.checks.salad import check_word_salad
from reverie_canary.client.checks.scripts import check_foreign_script
from reverie_canary.client.checks.size import check_reply_size
from reverie_canary.client.checks.structured import check_structured
from reverie_canary.client.checks.tools import (  # noqa: F401  (TOOL_TRIGGER_REASONS re-exported)
    TOOL_CHECKS,
    TOOL_TRIGGER_REASONS,
    check_tool_result,
)
from reverie_canary.client.checks.transport import check_transport
from reverie_canary.client.reply import CheckResult, Outcome, ProbeSpec, Reply

Check = Callable[[Reply, ProbeSpec], CheckResult]


def check_language(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """The language probe's check (:func:`.language.check_language`), imported on its first use.

    The language check needs numpy and the detectors (the ``language`` extra); every other
    check, the ones any reply gets among them, is pure Python on msgspec, so that a chat
    backend's light install imports this package without them (docs/chat-backend.md).

    Raises:
        ImportError: the ``language`` extra is not installed (only a language probe calls this).
    """
    from reverie_canary.client.checks.language import check_language as run

    return run(reply, spec)


def _fingerprint() -> str:
    """``c-`` and 12 hex digits of SHA-256 over the checks' sources and the detector's version.

    Every file of this package, the reply and bounds modules they read, and the
    installed ``py3langid`` (its model decides the language): a change to any
    of them gives another version, so a recorded verdict names the code that
    made it (``ProbeResult.checks_version``; ``canary evidence``).
    """
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in [*sorted(here.glob("*.py")), here.parent / "reply.py", here.parent / "bounds.py"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    try:
        digest.update(("py3langid " + metadata.version("py3langid")).encode())
    except metadata.PackageNotFoundError:
        digest.update(b"py3langid ?")
    return "c-" + digest.hexdigest()[:12]


#: The version of the checks in this process (:func:`_fingerprint`).
CHECKS_VERSION = _fingerprint()

#: Kind-specific checks, in reporting order; behavioural checks follow.
#: The prose checks (foreign script, word salad, letters of another language
#: of a shared script) run on every kind but the structured probe's: a JSON
#: reply is all marks and may name a place in its own script and letters.
PROSE_CHECKS: tuple[Check, ...] = (check_foreign_script, check_word_salad, check_foreign_letters)
KIND_CHECKS: dict[str, tuple[Check, ...]] = {
    "ttft": (check_ttft, check_finish, check_empty, check_encoding, check_refusal_phrasing, *PROSE_CHECKS),
    "refusal": (check_finish, check_empty, check_refusal_phrasing, check_encoding, *PROSE_CHECKS),
    "structured": (check_finish, check_empty, check_structured, check_encoding),
    "language": (check_finish, check_empty, check_encoding, check_refusal_phrasing, *PROSE_CHECKS),
    "echo": (check_finish, check_empty, check_encoding, *PROSE_CHECKS),
    # a tool call is not prose (and the text is often empty): no prose checks, no empty_output
    "tools": (check_finish, check_encoding, *TOOL_CHECKS),
}
#: Checks for a kind not listed above (``transport`` in recorded cases ...).
DEFAULT_CHECKS: tuple[Check, ...] = (check_finish, check_empty, check_encoding, *PROSE_CHECKS)
#: Checks that run after the behavioural ones, per kind.  A missing closing
#: marker is the consequence of many defects (a refusal, runaway repetition,
#: leaked tokens): truncation comes last so that the reason names the cause.
LATE_CHECKS: dict[str, tuple[Check, ...]] = {"language": (check_language,), "refusal": (check_truncation,)}


class Evaluation(Struct, frozen=True, kw_only=True):
    """The probe's outcome, its reason code and every check's result."""

    outcome: Outcome
    reason: str = ""
    checks: list[CheckResult] = []


def evaluate(reply: Reply, spec: ProbeSpec) -> Evaluation:
    """Run the checks for ``spec.kind`` on ``reply`` and fold them.

    Args:
        reply: the finished reply.
        spec: what the probe asked for (``kind``: ``ttft``, ``refusal``,
            ``structured``, ``language``, ``echo``, ``tools``; other kinds get
            the generic checks).

    Returns:
        The folded :class:`Evaluation` (see the module docstring for order and
        folding); every check's evidence is bounded
        (:func:`reverie_canary.client.bounds.clamp`: a reply of any size
        gives a result of bounded size).
    """
    transport = check_transport(reply, spec)
    if transport.outcome != "pass":
        transport = _bounded(transport)
        return Evaluation(outcome=transport.outcome, reason=transport.reason, checks=[transport])
    if reply.timed_out and not (reply.text or reply.reasoning_text or reply.calls or reply.tool_calls):
        # nothing came before the client stopped waiting: the wait is the only evidence.  A reply that
        # never came is not an empty one (no empty_output, no tool_empty_reply): the latency check says
        # ttft_exceeded when the wait reached the bar, timed_out (inconclusive) when it ended before it
        latency = _bounded(check_ttft(reply, spec))
        return Evaluation(outcome=latency.outcome, reason=latency.reason, checks=[latency])
    kind_checks = KIND_CHECKS.get(spec.kind, DEFAULT_CHECKS)
    if reply.timed_out and check_ttft not in kind_checks:
        kind_checks = (check_ttft, *kind_checks)
    run = _run if reply.cut is None else _run_cut
    checks = [run(check, reply, spec) for check in kind_checks]
    checks.extend(run(check, reply, spec) for check in (*BEHAVIOUR_CHECKS, check_duplicate))
    checks.append(check_reply_size(reply, spec))
    checks.extend(run(check, reply, spec) for check in LATE_CHECKS.get(spec.kind, ()))
    return fold([_bounded(c) for c in checks])


def _bounded(result: CheckResult) -> CheckResult:
    """``result`` with its evidence cut to :func:`reverie_canary.client.bounds.clamp`'s limits."""
    if not result.evidence:
        return result
    return msgspec.structs.replace(result, evidence=clamp(result.evidence))


def _run(check: Check, reply: Reply, spec: ProbeSpec) -> CheckResult:
    return check(reply, spec)


def _run_cut(check: Check, reply: Reply, spec: ProbeSpec) -> CheckResult:
    name = NEEDS_WHOLE_REPLY.get(check)
    if name is None:
        return check(reply, spec)
    return CheckResult(check=name, outcome="not_applicable", reason="reply_cut", evidence={"cut": reply.cut})


#: Checks that need the whole reply, with the ``check`` name they report: on a
#: reply whose read stopped at a cap they are not run and say ``not_applicable``
#: / ``reply_cut``.  A new check family that parses or compares the whole reply
#: adds itself here.
NEEDS_WHOLE_REPLY: dict[Check, str] = {check_structured: "structured", check_echo: "corruption.echo",
                                       check_truncation: "refusal.truncation", check_language: "language",
                                       check_tool_result: "tools.result"}

#: Failing reasons in order of precedence (module docstring): the first row
#: that holds a failing check's reason gives the probe's reason.  Reasons not
#: listed rank with the kind's contract (:data:`DEFAULT_RANK`).
FAIL_PRECEDENCE: tuple[tuple[str, ...], ...] = (
    ("ttft_exceeded",),
    ("content_filter",),
    ("refusal",),
    ("encoding_broken", "bytelevel_tokens", "tool_markup_in_content", "control_tokens", "reserved_tokens",
     "channel_leak", "control_characters", "leading_junk"),
    ("unexpected_tool_calls",),
    ("repetition", "duplicated_text"),
    ("word_salad",),
    ("reply_too_large",),
    ("empty_output", "tool_empty_reply"),
    ("tool_stream_assembly", "tool_call_malformed"),
    ("tool_not_called", "tool_unexpected_call", "tool_wrong_tool", "tool_too_many_calls"),
    ("tool_unknown_name",),
    ("tool_args_invalid_json",),
    ("tool_args_schema_mismatch",),
    ("tool_args_wrong_value", "tool_result_ignored"),
    (),  # the kind's contract: schema_invalid, not_json, fenced, language_* ... and any unlisted reason
    ("foreign_script", "foreign_letters"),
    ("truncated", "echo_mismatch"),
)
DEFAULT_RANK = FAIL_PRECEDENCE.index(())
_RANK: dict[str, int] = {reason: rank for rank, row in enumerate(FAIL_PRECEDENCE) for reason in row}


def fail_rank(reason: str) -> int:
    """The row of ``reason`` in :data:`FAIL_PRECEDENCE` (0 = names the cause first)."""
    return _RANK.get(reason, DEFAULT_RANK)


def fold(checks: list[CheckResult]) -> Evaluation:
    """Combine check results: blind / transport_error > fail > inconclusive > pass.

    A ``blind`` or ``transport_error`` among them decides like in :func:`evaluate`.  Among
    failing checks the reason comes from :data:`FAIL_PRECEDENCE` (ties: the
    first in running order); among inconclusive ones, from the first.
    """
    for c in checks:
        if c.outcome in ("blind", "transport_error"):
            return Evaluation(outcome=c.outcome, reason=c.reason, checks=checks)
    failing = [c for c in checks if c.outcome == "fail"]
    if any(c.reason == "language_switch" for c in failing):
        # code-page damage is inferred from the expected language's letters (Polish ń read as cp1252 is ñ);
        # a reply written wholly in another language (Spanish, whose ñ is its own) is a switch, not damage
        failing = [c for c in failing if not (c.reason == "encoding_broken"
                                              and (c.evidence or {}).get("defect") == "codepage")] or failing
    if failing:
        first = min(failing, key=lambda c: fail_rank(c.reason))  # min keeps the first of equals
        return Evaluation(outcome="fail", reason=first.reason, checks=checks)
    for c in checks:
        if c.outcome == "inconclusive":
            return Evaluation(outcome="inconclusive", reason=c.reason, checks=checks)
    return Evaluation(outcome="pass", reason="", checks=checks)
