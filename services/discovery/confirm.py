"""Which live failures deserve a pinned confirmation probe now: the pure rule.

Chat backends that run the reply guard publish content-free counts: per
provider, replies served and replies failed per reason code, for a period.
Summed over a recent window they can point at a provider long before two
failed cycles suspend it, but they are not evidence the canary vouches for: a
backend may be buggy or hostile, and a prompt of its own may make every
provider fail.  So counts only ever *ask* for a probe; the probe's result is a
fact shown to operators and never enters a cycle's verdict or a streak
(docs/concepts/in-flight.md).

Rules:

- Only providers with traffic take part: at least ``min_served`` replies in
  the window.
- A reason singles out a provider when its count is at least
  ``min_failures`` and its share of the provider's replies is well above the
  other providers': above ``median + k * max(1.4826 * MAD, min_spread)`` of
  the shares of that reason over every provider with traffic (the median and
  the median absolute deviation, scaled to the normal's sigma, as OpenRouter
  ranks tool-call error rates).  With fewer than ``min_providers`` providers
  with traffic there are no peers to compare with, and nobody is singled out:
  a failure every provider shows is the model's or the prompt's.
- Each reason is confirmed by the probe kind whose contract sees it best
  (:data:`CONFIRMING_KIND`); a reason no probe can reproduce (the gateway's
  transport, an unknown code) asks for nothing.
- At most ``max_per_provider`` confirmations per provider per cycle
  (:func:`take_budget`), so a flood of forged counts costs a bounded number of
  probes and suspends no one.

Nothing here knows NATS, a clock or the store: the shell sums the counts and
keeps the budget.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

from msgspec import Struct

#: The probe kind that confirms a live failure reason.  Reasons any reply can show go to the kind
#: whose prompt and contract read them most surely: junk before the first character to the
#: Markdown-prefix probe (``ttft``, whose reply must start with ``*``), damaged bytes and leaked
#: tokens to the verbatim echo, empty, refused, filtered or runaway prose to the refusal probe's long
#: answer, tool-call reasons to the tool probe.
CONFIRMING_KIND: dict[str, str] = {
    "ttft_exceeded": "ttft",
    "leading_junk": "ttft",
    "encoding_broken": "echo",
    "bytelevel_tokens": "echo",
    "control_tokens": "echo",
    "reserved_tokens": "echo",
    "channel_leak": "echo",
    "control_characters": "echo",
    "tool_markup_in_content": "tools",
    "refusal": "refusal",
    "content_filter": "refusal",
    "empty_output": "refusal",
    "repetition": "refusal",
    "duplicated_text": "refusal",
    "word_salad": "refusal",
    "truncated": "refusal",
    "language_switch": "language",
    "language_mix": "language",
    "foreign_script": "language",
    "foreign_letters": "language",
    "schema_invalid": "structured",
    "not_json": "structured",
    "fenced": "structured",
    "tool_not_called": "tools",
    "tool_unexpected_call": "tools",
    "tool_wrong_tool": "tools",
    "tool_too_many_calls": "tools",
    "tool_empty_reply": "tools",
    "tool_unknown_name": "tools",
    "tool_args_invalid_json": "tools",
    "tool_args_schema_mismatch": "tools",
    "tool_args_wrong_value": "tools",
    "tool_stream_assembly": "tools",
    "tool_call_malformed": "tools",
    "tool_result_ignored": "tools",
}

#: The consistency constant that makes the MAD estimate the standard deviation of a normal sample.
MAD_TO_SIGMA = 1.4826


class Tally(Struct, frozen=True, kw_only=True):
    """One provider's live outcomes over the window: replies served and failures per reason."""

    provider: str
    served: int
    failures: dict[str, int] = {}


class Suspect(Struct, frozen=True, kw_only=True):
    """A provider whose live share of one reason stands out from its peers'.

    ``share`` and ``median`` are fractions of replies (0..1); ``threshold`` the
    share it had to exceed; ``peers`` the providers with traffic compared.
    """

    provider: str
    reason: str
    kind: str
    count: int
    served: int
    share: float
    median: float
    threshold: float
    peers: int


class Thresholds(Struct, frozen=True, kw_only=True):
    """The rule's settings: see the module's rules.  Shares are fractions of replies."""

    min_served: int = 20
    min_failures: int = 5
    min_providers: int = 3
    k: float = 3.0
    min_spread: float = 0.02


#: The rule's defaults.
DEFAULT_THRESHOLDS = Thresholds()


def suspects(tallies: Iterable[Tally], limits: Thresholds = DEFAULT_THRESHOLDS) -> list[Suspect]:
    """The (provider, reason) pairs whose live share stands out, most striking first.

    Args:
        tallies: one per provider (a provider given twice: the counts add up).
        limits: the rule's settings.

    Returns:
        Suspects ordered by how far their share exceeds the threshold (largest first), then by
        provider and reason; empty when fewer than ``limits.min_providers`` providers had traffic.
    """
    merged: dict[str, Tally] = {}
    for t in tallies:
        if t.served < 0 or any(n < 0 for n in t.failures.values()):
            continue  # negative counts are no counts
        seen = merged.get(t.provider)
        if seen is None:
            merged[t.provider] = t
        else:
            failures = dict(seen.failures)
            for reason, n in t.failures.items():
                failures[reason] = failures.get(reason, 0) + n
            merged[t.provider] = Tally(provider=t.provider, served=seen.served + t.served, failures=failures)
    live = [t for t in merged.values() if t.served >= limits.min_served]
    if len(live) < limits.min_providers:
        return []
    found: list[tuple[float, Suspect]] = []
    reasons = sorted({r for t in live for r in t.failures if r in CONFIRMING_KIND})
    for reason in reasons:
        shares = {t.provider: min(1.0, t.failures.get(reason, 0) / t.served) for t in live}
        median = statistics.median(shares.values())
        mad = statistics.median(abs(s - median) for s in shares.values())
        threshold = median + limits.k * max(MAD_TO_SIGMA * mad, limits.min_spread)
        for t in live:
            count = t.failures.get(reason, 0)
            share = shares[t.provider]
            if count >= limits.min_failures and share > threshold:
                found.append((share - threshold, Suspect(
                    provider=t.provider, reason=reason, kind=CONFIRMING_KIND[reason], count=count,
                    served=t.served, share=round(share, 4), median=round(median, 4),
                    threshold=round(threshold, 4), peers=len(live))))
    found.sort(key=lambda pair: (-pair[0], pair[1].provider, pair[1].reason))
    return [s for _, s in found]


def take_budget(wanted: Iterable[Suspect], spent: Mapping[str, int], *, max_per_provider: int,
                pending: Iterable[tuple[str, str]] = ()) -> list[Suspect]:
    """The suspects to probe now: one probe per (provider, kind), within each provider's budget.

    Args:
        wanted: suspects, most striking first (:func:`suspects`).
        spent: confirmations already sent this cycle, per provider.
        max_per_provider: the most confirmations a provider gets in one cycle.
        pending: (provider, kind) pairs already asked for and not yet answered: not asked again.

    Returns:
        The suspects to send a pinned probe for, in the order given.
    """
    left = {p: max(0, max_per_provider - n) for p, n in spent.items()}
    asked = set(pending)
    chosen: list[Suspect] = []
    for s in wanted:
        if (s.provider, s.kind) in asked:
            continue
        budget = left.get(s.provider, max_per_provider)
        if budget <= 0:
            continue
        left[s.provider] = budget - 1
        asked.add((s.provider, s.kind))
        chosen.append(s)
    return chosen
