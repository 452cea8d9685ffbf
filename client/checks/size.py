"""Runaway output: a reply past the cap on text the prober reads.

The prober keeps at most ``reply_max_bytes`` of text and reasoning
(:class:`reverie_canary.services.prober.http.ReadLimits`, 256 KiB by default:
over 800 bytes per token of the 320-token budget, more than any tokenizer's
longest token) and stops reading there.  A reply that reached it ignored its
output budget (tokens forever, a 20 MB reply): ``fail`` / ``reply_too_large``.
A runaway that repeats itself says so first (``repetition`` ranks above it in
:data:`reverie_canary.client.checks.FAIL_PRECEDENCE`).
"""

from __future__ import annotations

from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

CHECK = "bounds.reply_size"


def check_reply_size(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail a reply whose text and reasoning reached the prober's cap.

    Returns:
        ``pass``; or ``fail`` / ``reply_too_large`` with evidence
        ``output_bytes`` (received, including the part of the last chunk past
        the cap; the rest was never read), ``kept_chars`` (text and reasoning
        kept), ``max_tokens`` (the budget asked for), ``finish_reason``.
    """
    if reply.cut != "reply_max_bytes":
        return CheckResult(check=CHECK, outcome="pass")
    return CheckResult(check=CHECK, outcome="fail", reason="reply_too_large",
                       evidence={"output_bytes": reply.output_bytes,
                                 "kept_chars": len(reply.text) + len(reply.reasoning_text),
                                 "max_tokens": spec.max_tokens, "finish_reason": reply.finish_reason})
