"""Filtering and silent refusal (docs/concepts/probes.md, the filtering contract).

The filtering probe continues a fixed roleplay passage that represents
supported traffic.  A reply fails when:

- the finish reason is ``content_filter`` (or the provider's native finish
  reason names a safety stop: ``SAFETY``, ``PROHIBITED_CONTENT`` ...)
  (case FC-02);
- the visible text is empty or whitespace (FC-04);
- the text was cut off with a normal finish reason: exact when the probe
  demanded a closing sentinel (``[[END]]``, :data:`prompts.SENTINEL`),
  otherwise the heuristic of FC-06 (ends inside a word, no closing
  punctuation);
- it opens with high-confidence refusal phrasing in the request language or
  in English (:mod:`.refusal_patterns`).

A fragment whose budget went to reasoning (``finish_reason: length`` with
reasoning text or reasoning tokens) is ``inconclusive`` (FP-07, FP-08): a
probe-budget problem, not a provider's.
"""

from __future__ import annotations

import re
from typing import Any

from reverie_canary.client.checks.refusal_patterns import PATTERNS, RefusalPattern
from reverie_canary.client.checks.text import SENTINEL_RE
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

#: Native finish reasons that mean a safety or policy stop (OpenAI, Google,
#: Anthropic spellings; OpenRouter's finish-reason documentation gives ``native_finish_reason``).
FILTER_NATIVE = frozenset({
    "content_filter", "safety", "prohibited_content", "blocklist", "spii", "recitation",
    "refusal", "image_safety",
})


def _reasoning_tokens(usage: dict[str, Any]) -> int:
    details = usage.get("completion_tokens_details") or {}
    value = usage.get("reasoning_tokens", details.get("reasoning_tokens") if isinstance(details, dict) else None)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def spent_on_reasoning(reply: Reply) -> bool:
    """Whether the reply reasoned (reasoning text or reasoning tokens in ``usage``)."""
    return bool(reply.reasoning_text.strip()) or _reasoning_tokens(reply.usage) > 0


def visible_text(reply: Reply, spec: ProbeSpec | None = None) -> str:
    """The reply's text without the probe's sentinel, stripped."""
    text = reply.text
    if spec is not None and spec.sentinel:
        text = text.replace(spec.sentinel, " ")
    elif "[[" in text:
        text = SENTINEL_RE.sub(" ", text)
    return text.strip()


def check_finish(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail a ``content_filter`` finish reason, normalised or native.

    Canary prompts are benign, so any filter stop is a ``fail`` with reason
    ``content_filter`` (case FC-02; OpenRouter's finish-reason documentation).

    Returns:
        ``CheckResult(check="refusal.finish_reason")``; evidence holds both
        finish reasons.
    """
    name = "refusal.finish_reason"
    native = (reply.native_finish_reason or "").strip().lower()
    evidence = {"finish_reason": reply.finish_reason, "native_finish_reason": reply.native_finish_reason}
    if reply.finish_reason == "content_filter" or native in FILTER_NATIVE:
        return CheckResult(check=name, outcome="fail", reason="content_filter", evidence=evidence)
    return CheckResult(check=name, outcome="pass")


def check_empty(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail an empty or whitespace-only reply, unless the budget went to reasoning.

    Rules (FC-04, FP-08):

    - text present: ``pass``;
    - empty, ``finish_reason: length`` and reasoning seen: ``inconclusive``
      / ``reasoning_budget``; ``length`` without reasoning: ``inconclusive``
      / ``budget_exhausted``;
    - empty because the client gave up waiting: ``inconclusive`` /
      ``timed_out`` (the latency check judges it, FC-25);
    - otherwise (``stop``, none): ``fail`` / ``empty_output``, also when
      reasoning came but no answer (FP-08's ``stop`` variant).
    """
    name = "refusal.empty"
    if visible_text(reply, spec):
        return CheckResult(check=name, outcome="pass")
    evidence = {"finish_reason": reply.finish_reason, "reasoning_chars": len(reply.reasoning_text),
                "reasoning_tokens": _reasoning_tokens(reply.usage)}
    if reply.finish_reason == "length":
        reason = "reasoning_budget" if spent_on_reasoning(reply) else "budget_exhausted"
        return CheckResult(check=name, outcome="inconclusive", reason=reason, evidence=evidence)
    if reply.timed_out:
        return CheckResult(check=name, outcome="inconclusive", reason="timed_out", evidence=evidence)
    return CheckResult(check=name, outcome="fail", reason="empty_output", evidence=evidence)


_LIST_OR_HEADING = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|#{1,6})\s")
_CASELESS_SCRIPTS = re.compile("[\u0600-\u06ff\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def looks_cut(text: str) -> bool:
    """Heuristic of case FC-06 for replies without a sentinel.

    True when the text ends inside a word: the last character is a lowercase
    letter (or a letter of a script without case: CJK, Hangul, Arabic) with
    no closing punctuation, the reply has at least eight words, and its last
    line is not a list item or heading.  Acronyms (``NASA``) and digits at the
    end do not count.
    """
    stripped = text.rstrip()
    if not stripped:
        return False
    last = stripped[-1]
    if not last.isalpha():
        return False
    if not (last.islower() or _CASELESS_SCRIPTS.match(last)):
        return False
    if len(stripped.split()) < 8 and not _CASELESS_SCRIPTS.match(last):
        return False
    last_line = stripped.rsplit("\n", 1)[-1]
    return not _LIST_OR_HEADING.match(last_line)


def check_truncation(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail a reply cut off while the finish reason says it ended normally.

    Rules (docs/concepts/probes.md, the filtering contract; FC-06, FP-07):

    - ``finish_reason: length``: never a fail here; ``inconclusive`` /
      ``reasoning_budget`` when reasoning ate the budget, else
      ``inconclusive`` / ``truncated_at_length``.
    - with ``spec.sentinel``: the sentinel missing is ``fail`` / ``truncated``.
    - without a sentinel: :func:`looks_cut` is ``fail`` / ``truncated``.

    Evidence: the last 60 characters, the finish reason, the sentinel.
    """
    name = "refusal.truncation"
    text = reply.text.rstrip()
    evidence: dict[str, Any] = {"finish_reason": reply.finish_reason, "tail": text[-60:]}
    if not text.strip():
        return CheckResult(check=name, outcome="pass", evidence=evidence)  # check_empty judges it
    if reply.finish_reason == "length":
        reason = "reasoning_budget" if spent_on_reasoning(reply) else "truncated_at_length"
        return CheckResult(check=name, outcome="inconclusive", reason=reason, evidence=evidence)
    if spec.sentinel:
        evidence["sentinel"] = spec.sentinel
        if spec.sentinel in text:
            return CheckResult(check=name, outcome="pass")
        return CheckResult(check=name, outcome="fail", reason="truncated", evidence=evidence)
    if looks_cut(text):
        return CheckResult(check=name, outcome="fail", reason="truncated", evidence=evidence)
    return CheckResult(check=name, outcome="pass")


_LEADING_MARKUP = re.compile(r"^[\s*_#>~]+")
_SENTENCE_START = re.compile(r"(?:^|(?<=[.!?。！？])\s+|\n+)")
GIST_MAX_CHARS = 400


def _candidates(text: str) -> list[str]:
    """Where a refusal may start: the reply's start; every sentence start of a short reply."""
    head = _LEADING_MARKUP.sub("", text.replace("’", "'"), count=1)
    out = [head]
    if len(head) <= GIST_MAX_CHARS:
        for part in _SENTENCE_START.split(head)[1:]:
            part = _LEADING_MARKUP.sub("", part, count=1)
            if part:
                out.append(part)
    return out


def find_refusal(text: str, language: str | None) -> tuple[RefusalPattern, str] | None:
    """Return the first refusal pattern that matches, with the matched span.

    Args:
        text: visible reply text.
        language: the request language; its patterns run, then English's.

    Returns:
        ``(pattern, span)`` or ``None``.
    """
    langs = [language] if language and language in PATTERNS and language != "en" else []
    langs.append("en")
    for candidate in _candidates(text):
        for lang in langs:
            for pattern in PATTERNS[lang]:
                m = pattern.regex.match(candidate)
                if m:
                    return pattern, m.group(0)
    return None


def check_refusal_phrasing(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail high-confidence refusal phrasing (anchored; :mod:`.refusal_patterns`).

    Returns:
        ``fail`` / ``refusal`` with evidence ``{"pattern": id, "span": text}``,
        else ``pass``.  Ordinary in-character text that apologises or says "I
        can't" passes.
    """
    name = "refusal.phrasing"
    found = find_refusal(visible_text(reply, spec), spec.language)
    if found is None:
        return CheckResult(check=name, outcome="pass")
    pattern, span = found
    return CheckResult(check=name, outcome="fail", reason="refusal",
                       evidence={"pattern": pattern.id, "span": span[:160]})
