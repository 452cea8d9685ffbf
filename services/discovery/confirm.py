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

The window (:class:`LiveWindow`) and the plan of the probes
(:func:`plan_confirmations`) live here too, as pure code: the window sums the
counts of the periods that end within ``window_s`` of the time the shell gives
it, counts a message id once (redelivery is normal) and keeps at most
:data:`MAX_PERIODS` periods (a flood drops the oldest, counted).  Counts are keyed by
what a reply can tell: an endpoint tag, or a display name (``DeepInfra``) that the
listing maps to every endpoint it covers (:func:`tags_for`); a key the listing
does not know is never probed.

Nothing here knows NATS, a clock or the store: the shell reads the counts, gives
the time and keeps the budget.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

import msgspec
from msgspec import Struct

from reverie_canary.client.served import LiveCounts
from reverie_canary.shared.contract import ids
from reverie_canary.shared.contract.events import (
    MAX_SAME_NAME,
    PROMPT_VERSION,
    Endpoint,
    LiveEvidence,
    ProbeTask,
    variants_of,
)

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

#: The tool probe's variant that confirms a tool reason best (the others: the plain call): a streamed
#: call that assembles differently, a second turn that ignores the tool's result, a call made where
#: none was asked for.
CONFIRMING_VARIANT: dict[str, str] = {
    "tool_stream_assembly": "call_stream",
    "tool_result_ignored": "second_turn",
    "tool_unexpected_call": "no_tool",
}
#: The variant of a tool confirmation whose reason names no better one.
DEFAULT_TOOL_VARIANT = "call"
#: Periods of live counts one model's window keeps at most (a flood of messages drops the oldest).
MAX_PERIODS = 20_000

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


def variant_for(reason: str, kind: str, supported_parameters: Sequence[str]) -> str:
    """The variant of a confirmation of ``reason`` by ``kind`` on an endpoint (``""``: a kind without variants).

    A tool reason gets the tool probe's variant that shows it (:data:`CONFIRMING_VARIANT`, else
    ``call``); an endpoint that does not declare the tool parameters gets ``""`` (the prober
    answers it ``not_applicable``: an inconclusive confirmation).
    """
    offered = variants_of(kind, supported_parameters)
    if offered == ("",):
        return ""
    wanted = CONFIRMING_VARIANT.get(reason, DEFAULT_TOOL_VARIANT)
    return wanted if wanted in offered else offered[0]


def tallies_of(counts: LiveCounts) -> list[Tally]:
    """One :class:`Tally` per provider key of one period's counts (replies judged, failures per reason)."""
    return [Tally(provider=key, served=o.replies, failures=dict(o.reasons)) for key, o in counts.providers.items()]


def _name_key(name: str) -> str:
    return " ".join(name.split()).casefold()


def tags_for(key: str, endpoints: Iterable[Endpoint]) -> list[str]:
    """The endpoint tags a live-counts key stands for: the tag itself, or every endpoint its display name covers.

    A reply names its provider by display name only (OpenRouter's streaming documentation), and one name
    may cover several endpoints (``DeepInfra``: ``deepinfra/fp8`` and ``deepinfra/fp4``); matched as the
    pin check matches (case and spaces aside).  ``[]``: the listing knows no such endpoint.
    """
    listed = list(endpoints)
    if any(e.provider == key for e in listed):
        return [key]
    wanted = _name_key(key)
    return sorted(e.provider for e in listed if e.provider_name and _name_key(e.provider_name) == wanted)


class LiveWindow:
    """One model's live counts over the last ``window_s`` seconds: each message once, at most ``max_periods``.

    Pure: the shell passes the time (``now``, UTC).  A period is kept while its end (``at``) is
    within the window; one that ends in the future by more than the window is refused (a clock
    that far off, or a forged time, must not stay in the sums forever).

    Args:
        window_s: the window (s).
        max_periods: the periods kept at most; past it the oldest go (:attr:`dropped` counts them).
    """

    def __init__(self, window_s: float, max_periods: int = MAX_PERIODS) -> None:
        self.window = timedelta(seconds=window_s)
        self.max_periods = max_periods
        self._periods: deque[tuple[datetime, str, list[Tally]]] = deque()
        self._seen: set[str] = set()
        #: periods dropped to keep the bound
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._periods)

    def add(self, msg_id: str, at: datetime, tallies: list[Tally], now: datetime) -> bool:
        """Count one period's tallies, ending at ``at``; ``False`` when ``msg_id`` was counted already or the
        period is outside the window (too old, or too far ahead of ``now``)."""
        self._expire(now)
        if msg_id in self._seen or at < now - self.window or at > now + self.window:
            return False
        if len(self._periods) >= self.max_periods:
            _, old, _ = self._periods.popleft()
            self._seen.discard(old)
            self.dropped += 1
        self._periods.append((at, msg_id, tallies))
        self._seen.add(msg_id)
        return True

    def tallies(self, now: datetime) -> list[Tally]:
        """The window's counts, summed per provider key: the periods that end within ``window_s`` before ``now``."""
        self._expire(now)
        cutoff = now - self.window
        served: dict[str, int] = {}
        failures: dict[str, dict[str, int]] = {}
        for at, _, tallies in self._periods:
            if at < cutoff:  # came in after a newer one: out of the window, gone when it reaches the front
                continue
            for t in tallies:
                served[t.provider] = served.get(t.provider, 0) + t.served
                into = failures.setdefault(t.provider, {})
                for reason, n in t.failures.items():
                    into[reason] = into.get(reason, 0) + n
        return [Tally(provider=p, served=n, failures=failures[p]) for p, n in sorted(served.items())]

    def _expire(self, now: datetime) -> None:
        """Forget the periods at the front (the first counted) that ended before the window."""
        cutoff = now - self.window
        while self._periods and self._periods[0][0] < cutoff:
            _, msg_id, _ = self._periods.popleft()
            self._seen.discard(msg_id)


class Budget(Struct, kw_only=True):
    """What one cycle spent on confirmations: probes per provider tag and the (tag, kind) pairs asked."""

    cycle_no: int
    spent: dict[str, int] = {}
    asked: list[tuple[str, str]] = []


def plan_confirmations(tallies: Iterable[Tally], *, model: str, endpoints: Sequence[Endpoint], budget: Budget,
                       limits: Thresholds, max_per_provider: int, at: datetime, deadline: datetime,
                       window_s: float, language: str = "en") -> list[ProbeTask]:
    """The confirmation probes to send now, each pinned to one endpoint, and ``budget`` updated with them.

    Args:
        tallies: the window's counts (:meth:`LiveWindow.tallies`).
        model: the model id.
        endpoints: the model's latest listing (keys are mapped to its tags, :func:`tags_for`;
            ``provider_name``, the supported parameters and the reply budget come from it).
        budget: this cycle's confirmations so far (changed in place: the new ones added).
        limits: the rule's settings (:func:`suspects`).
        max_per_provider: confirmations per endpoint per cycle at most (:func:`take_budget`).
        at: the tasks' time (UTC); ``deadline``: when their probes must be done.
        window_s: the window the counts cover (said in the evidence).
        language: the language of the probes whose prompt has one.

    Returns:
        One :class:`ProbeTask` per (endpoint, kind) chosen, most striking first; its ``confirms``
        says why, its task id is ``confirm|<model>|<cycle_no>|<tag>|<kind>|<n>`` and its cycle
        ``confirm|<model>|<cycle_no>`` (planned in no cycle: its result enters no verdict).
    """
    if max_per_provider <= 0:
        return []
    by_tag = {e.provider: e for e in endpoints}
    expanded: list[Suspect] = []
    keys: dict[tuple[str, str], Suspect] = {}
    for s in suspects(tallies, limits):
        for tag in tags_for(s.provider, endpoints):
            one = msgspec.structs.replace(s, provider=tag)
            keys.setdefault((tag, s.reason), s)
            expanded.append(one)
    chosen = take_budget(expanded, budget.spent, max_per_provider=max_per_provider, pending=budget.asked)
    tasks = []
    for s in chosen:
        endpoint = by_tag[s.provider]
        number = budget.spent.get(s.provider, 0) + 1
        budget.spent[s.provider] = number
        budget.asked.append((s.provider, s.kind))
        key = keys[(s.provider, s.reason)].provider
        evidence = LiveEvidence(reason=s.reason, key=key[:128], count=s.count, served=s.served, share=s.share,
                                median=s.median, threshold=s.threshold, peers=s.peers, window_s=window_s,
                                number=number)
        same = sorted(e.provider for e in endpoints if e.provider != s.provider and e.provider_name and
                      _name_key(e.provider_name) == _name_key(endpoint.provider_name))[:MAX_SAME_NAME]
        tasks.append(ProbeTask(
            at=at, task_id=ids.confirm_task_id(model, budget.cycle_no, s.provider, s.kind, number), model=model,
            provider=s.provider, provider_name=endpoint.provider_name, kind=s.kind,  # type: ignore[arg-type]
            language=language if s.kind in ("ttft", "refusal", "language") else "en",
            cycle=ids.confirm_cycle(model, budget.cycle_no), deadline=deadline,
            supported_parameters=list(endpoint.supported_parameters),
            max_completion_tokens=endpoint.max_completion_tokens, prompt_version=PROMPT_VERSION,
            same_name=same, variant=variant_for(s.reason, s.kind, endpoint.supported_parameters),
            confirms=evidence))
    return tasks
