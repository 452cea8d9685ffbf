"""The reply guard: judge a chat reply with the checks any reply gets, and retry once elsewhere when it fails.

Routing waits for proof (two failed cycles); the user whose request is in flight
should not (docs/concepts/in-flight.md).  The guard runs the canary's own
any-reply checks -- one implementation, :mod:`reverie_canary.client.checks`, shared with
the prober -- on a finished reply or on a stream as it arrives, and on a failing
verdict hands back the request body for **one** retry with every endpoint of the
serving provider added to ``provider.ignore``, merged with the canary's list.

Usage (``examples/chat_backend.py``)::

    guard = ReplyGuard(client)                   # client: the IgnoreListClient of the model
    attempt = guard.attempt(body)                # body["provider"] from client.provider(...)
    stream = attempt.stream()
    async for line in response.aiter_lines():   # SSE lines, each as it comes
        verdict = stream.line(line.encode())
        if verdict is not None: break            # decided early: abort, retry
    else:
        verdict = stream.finish()
    retry = attempt.retry(verdict)               # an Attempt with the body to send, or None

What is judged (:data:`GUARD_CHECKS`): transport first (an in-band error, an ``error``
finish, a cut stream, a 5xx), then a ``content_filter`` finish, an empty or
reasoning-only reply, mojibake and control characters, word salad (not on a
structured reply), junk before the first character, tool-call markup in the text,
control, reserved and byte-level tokens, channel leaks, runaway repetition, tool calls
the request did not offer.  Never the language, refusal phrasing or anything a prompt
decides: the guard knows nothing of the prompt.

**A stream is decided as early as the evidence allows** (:class:`StreamGuard`): junk
before the first character at the first visible chunk (it never changes after), a
control character or U+FFFD as soon as it arrives, an in-band error or a filter stop at
once, and no visible token within ``first_token_s`` (10 s, the time-to-first-token contract of docs/concepts/probes.md) at the
deadline: the backend aborts and retries instead of waiting.  The rest at the end.

**Retries** (:meth:`Attempt.retry`): at most one per request; only for a failing reply
or a provider's transport fault (never for 401/402/403 or another 4xx: not the
provider's), only when the reply named its provider, within a retry budget (a token
bucket: :attr:`GuardPolicy.budget_ratio` retries per request, :attr:`GuardPolicy.budget_burst`
at most at once) and while the per-model circuit is closed: when most recent failures of
one reason come from several providers at once (:attr:`GuardPolicy.circuit_min_providers`
within :attr:`GuardPolicy.circuit_window_s`) the failure is the model's or the prompts',
not a provider's, and a retry would only double the traffic.

**The name and the tags**: a reply names its provider by display name (``DeepInfra``);
``provider.ignore``, the snapshot and the canary's pins use endpoint tags, and one name
can cover several (``deepinfra/fp8``, ``deepinfra/fp4``).  The retry ignores every tag
the snapshot's ``names`` gives for that name.  With no snapshot yet (a new backend, the bus
down from its start) no tag is known: the retry ignores the display name as the reply gave
it (OpenRouter's SDK types ``provider.ignore`` entries as provider display names) **and**
the base slug made from it (:func:`base_slug`: ``DeepInfra`` -> ``deepinfra``,
``Amazon Bedrock`` -> ``amazon-bedrock``), which covers every endpoint of the provider;
the gateway's documentation prefers slugs and leaves open how it matches names.  Where
the slug is not the name made lower-case (``Mancer 2`` is ``mancer``) the name alone
still does.  Live counts are keyed by what the reply can tell: the tag when the name
covers one, else the name.

Nothing here waits on the bus or touches the network: it works with the bus down
(the snapshot last known, or none).  Part of the chat-backend distribution: pure Python
on msgspec.
"""

from __future__ import annotations

import re
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import Struct

from reverie_canary.client.checks import fold
from reverie_canary.client.checks.behaviour import (
    BEHAVIOUR_CHECKS,
    CONTROL_CHAR,
    check_control_chars,
    check_leading_junk,
)
from reverie_canary.client.checks.encoding import check_encoding
from reverie_canary.client.checks.refusal import check_empty, check_finish
from reverie_canary.client.checks.salad import check_word_salad
from reverie_canary.client.checks.transport import check_transport
from reverie_canary.client.chunks import ChunkReader, LineSplitter
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply
from reverie_canary.client.served import LiveRecorder

if TYPE_CHECKING:
    from reverie_canary.client.ignore_list import IgnoreListClient
    from reverie_canary.client.wire import IgnoreSnapshot

Check = Callable[[Reply, ProbeSpec], CheckResult]

#: The checks any reply gets, in reporting order (the transport check runs before them).
GUARD_CHECKS: tuple[Check, ...] = (check_finish, check_empty, check_encoding, check_word_salad, *BEHAVIOUR_CHECKS)
#: Without word salad: a structured reply (``response_format``) is JSON, all marks.
STRUCTURED_CHECKS: tuple[Check, ...] = tuple(c for c in GUARD_CHECKS if c is not check_word_salad)
#: Transport faults that are the serving provider's (a retry elsewhere can help).
PROVIDER_FAULTS = frozenset({"in_band_error", "finish_reason_error", "native_finish_reason_error", "stream_cut",
                             "stream_stalled"})
#: Characters of visible text after which leading junk is decided (the longest role leak, ``<|assistant|>:``, fits).
JUNK_DECIDED_CHARS = 16
#: Bytes of text and reasoning the guard keeps per reply (a hostile stream cannot grow the backend's memory).
REPLY_MAX_BYTES = 256 * 1024
#: Longest SSE line accepted (bytes).
LINE_MAX_BYTES = 1024 * 1024
#: Finish reasons decided at once on a stream.
_EARLY_FINISH = frozenset({"content_filter", "error"})
_control_char = CONTROL_CHAR.search
#: Entries a retry's ``provider.ignore`` holds at most.
MAX_IGNORE = 512

Outcome = Literal["pass", "fail", "error", "inconclusive"]
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def base_slug(name: str) -> str:
    """The base routing slug a provider display name most likely has: lower case, each run of other characters a ``-``.

    ``DeepInfra`` -> ``deepinfra``, ``Amazon Bedrock`` -> ``amazon-bedrock``,
    ``inference.net`` -> ``inference-net``; ``""`` for a name with no letter or digit.
    OpenRouter's provider list maps display names to slugs (``/api/v1/providers``);
    the mapping is this one for most providers, not for all (``Mancer 2`` is ``mancer``).
    """
    return _NOT_SLUG.sub("-", name.casefold()).strip("-")


class GuardPolicy(Struct, frozen=True, kw_only=True):
    """The guard's bounds.

    Attributes:
        first_token_s: seconds from the request to the first visible token (docs/concepts/probes.md).
        budget_ratio: retries earned per request (0.5: at most one request in two is retried, sustained).
            One broken provider can carry a third of a model's unpinned traffic (the gateway weights
            the cheapest by 1/price²), and every failing reply of it needs its retry; a tighter budget
            hands those users the broken reply.  The traffic a retry adds stays bounded by the one
            retry per request and this budget, and the circuit stops retries when the failure is the
            model's (several providers at once).
        budget_burst: retries allowed at once (the bucket's size; it starts full).
        circuit_window_s: how far back the circuit looks (seconds).
        circuit_min_failures: failures of one reason in the window before the circuit can open.
        circuit_min_providers: distinct providers among them that make the failure the model's, not a provider's.
        circuit_share: the share of the window's failures that reason must hold.
        circuit_max_provider_share: the most of those failures one provider may hold: more, and they are
            that provider's (its users keep their retry), whatever a few other providers showed.
    """

    first_token_s: float = 10.0
    budget_ratio: float = 0.5
    budget_burst: float = 10.0
    circuit_window_s: float = 120.0
    circuit_min_failures: int = 6
    circuit_min_providers: int = 3
    circuit_share: float = 0.5
    circuit_max_provider_share: float = 0.5


class Verdict(Struct, frozen=True, kw_only=True):
    """What the guard concluded about one reply.

    Attributes:
        outcome: ``pass``; ``fail`` (the reply is broken); ``error`` (the exchange broke: the reason
            says how, and :attr:`provider_fault` whether it is the provider's); ``inconclusive``
            (the budget went to reasoning, the client gave up waiting: nothing proven).
        reason: the reason that names the cause (the checks' precedence), ``""`` on a pass.
        reasons: every failing reason, in reporting order.
        provider: the display name the reply gave (``None``: it named none).
        early: decided before the reply ended: the caller should stop reading it.
        ttft_ms: the first visible token (ms from the request), ``None`` when none came.
    """

    outcome: Outcome
    reason: str = ""
    reasons: tuple[str, ...] = ()
    provider: str | None = None
    early: bool = False
    ttft_ms: float | None = None

    @property
    def provider_fault(self) -> bool:
        """Whether another provider could do better: a broken reply, or a transport fault of the provider's."""
        return self.outcome == "fail" or (self.outcome == "error" and
                                          (self.reason in PROVIDER_FAULTS or self.reason.startswith("http_5")))


def spec_for(request: Mapping[str, Any] | None) -> ProbeSpec:
    """The checks' view of a chat request: the tools it offered, whether it asked for structured output."""
    request = request or {}
    tools = request.get("tools")
    response_format = request.get("response_format")
    kind = "structured" if isinstance(response_format, Mapping) and response_format.get("type") in (
        "json_schema", "json_object") else "chat"
    return ProbeSpec(kind=kind, tools=list(tools) if isinstance(tools, list) and tools else None)


def judge(reply: Reply, spec: ProbeSpec) -> Verdict:
    """Run the transport check, then :data:`GUARD_CHECKS`, on a finished reply; fold them as the prober does."""
    transport = check_transport(reply)
    if transport.outcome != "pass":
        outcome: Outcome = "fail" if transport.outcome == "fail" else "error"
        return Verdict(outcome=outcome, reason=transport.reason, reasons=(transport.reason,),
                       provider=reply.served_by, ttft_ms=reply.ttft_ms)
    checks = STRUCTURED_CHECKS if spec.kind == "structured" else GUARD_CHECKS
    results = [check(reply, spec) for check in checks]
    folded = fold(results)
    failing = tuple(r.reason for r in results if r.outcome == "fail")
    outcome = folded.outcome if folded.outcome in ("pass", "fail", "inconclusive") else "error"
    return Verdict(outcome=outcome, reason=folded.reason, reasons=failing, provider=reply.served_by,
                   ttft_ms=reply.ttft_ms)


class _Circuit:
    """Recent failures of one model (bounded): open for a reason that several providers show at once."""

    __slots__ = ("policy", "recent")

    def __init__(self, policy: GuardPolicy) -> None:
        self.policy = policy
        self.recent: deque[tuple[float, str, str]] = deque(maxlen=64)

    def failed(self, t: float, reason: str, provider: str) -> None:
        self.recent.append((t, reason, provider))

    def open_for(self, t: float, reason: str) -> bool:
        """Whether ``reason`` is the model's now: many failures of it, from several providers, none holding most.

        A provider that holds more than ``circuit_max_provider_share`` of them is a broken provider
        with a few stray failures elsewhere, not the model: its users' retries must go on.
        """
        p = self.policy
        window = [f for f in self.recent if t - f[0] <= p.circuit_window_s]
        same = [f for f in window if f[1] == reason]
        if len(same) < p.circuit_min_failures or len(same) < p.circuit_share * len(window):
            return False
        by_provider = Counter(f[2] for f in same)
        return (len(by_provider) >= p.circuit_min_providers
                and max(by_provider.values()) <= p.circuit_max_provider_share * len(same))


class ReplyGuard:
    """The guard of one model's chat replies: verdicts, the one retry, the circuit, the live counts.

    Args:
        client: the model's :class:`~reverie_canary.client.IgnoreListClient` (its snapshot gives the
            canary's ignore list and the names; its ``live`` recorder gets the counts); ``None``: no
            snapshot (the retry then ignores the served name and its :func:`base_slug`) and counts
            kept locally.
        model: the model id (default the client's).
        policy: the bounds (:class:`GuardPolicy`).
        clock: monotonic seconds (the circuit's window and the first-token deadline).
    """

    def __init__(self, client: IgnoreListClient | None = None, *, model: str | None = None,
                 policy: GuardPolicy | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if client is None and model is None:
            raise ValueError("ReplyGuard needs the model's IgnoreListClient or a model id")
        self.client = client
        self.model = model or client.model  # type: ignore[union-attr]
        self.policy = policy or GuardPolicy()
        self.clock = clock
        self.live: LiveRecorder = client.live if client is not None else LiveRecorder(self.model)
        self._circuit = _Circuit(self.policy)
        self._tokens = self.policy.budget_burst

    # -- the snapshot's view ---------------------------------------------------------------------

    @property
    def snapshot(self) -> IgnoreSnapshot | None:
        """The snapshot last applied (``None``: none yet, or no client)."""
        return self.client.snapshot if self.client is not None else None

    def tags_of(self, name: str) -> list[str]:
        """The endpoint tags a served-by name covers (the snapshot's ``names``); ``[]`` when unknown."""
        snapshot = self.snapshot
        return snapshot.tags_named(name) if snapshot is not None else []

    def ignore_entries(self, name: str) -> list[str]:
        """What a retry puts in ``provider.ignore`` for a served-by name: every endpoint tag it covers.

        With the tags unknown (no snapshot yet, or a name the listing does not give): the
        display name itself and its :func:`base_slug`, which the gateway matches against
        every endpoint of that provider (a base slug covers ``<slug>/<variant>``).
        """
        tags = self.tags_of(name)
        if tags:
            return tags
        return list(dict.fromkeys(e for e in (name, base_slug(name)) if e))

    def key_of(self, name: str | None) -> str | None:
        """The live counts' key for a served-by name: its one tag, else the name itself (``None``: no name)."""
        if not name:
            return None
        tags = self.tags_of(name)
        return tags[0] if len(tags) == 1 else name

    def excluded(self, name: str, ignore: list[str]) -> bool:
        """Whether ``ignore`` (a request's ``provider.ignore`` and the canary's current list) excluded every endpoint
        the name covers: a reply it served means the ignore list was not applied on the way to the gateway.

        As the gateway matches an entry (the router's ``covers``): the tag itself, a base slug of it
        (``lambda`` covers ``lambda/fp8``) or the display name, case-insensitively.  A name whose tags
        are unknown is excluded by an entry that is the name itself or its :func:`base_slug`.
        """
        entries = {e.casefold() for e in ignore if isinstance(e, str)}
        if name.casefold() in entries:
            return True
        tags = self.tags_of(name)
        if not tags:
            return bool(base_slug(name)) and base_slug(name) in entries
        return all(t.casefold() in entries or t.casefold().split("/")[0] in entries for t in tags)

    # -- judging -----------------------------------------------------------------------------------

    def attempt(self, body: Mapping[str, Any]) -> Attempt:
        """Start guarding one request (its first attempt); ``body`` is what goes to the gateway."""
        self._tokens = min(self.policy.budget_burst, self._tokens + self.policy.budget_ratio)
        return Attempt(self, dict(body), number=1)

    def check(self, reply: Reply, attempt: Attempt) -> Verdict:
        """Judge a finished reply of ``attempt`` (see also :meth:`Attempt.check_body`) and count it."""
        return self._counted(judge(reply, spec_for(attempt.body)), attempt)

    def _counted(self, verdict: Verdict, attempt: Attempt) -> Verdict:
        ignore = [*((attempt.body.get("provider") or {}).get("ignore") or []),
                  *(self.client.ignore() if self.client is not None else [])]
        name = verdict.provider
        not_applied = bool(name) and bool(ignore) and self.excluded(name, ignore)  # type: ignore[arg-type]
        counted = verdict.reason if verdict.outcome != "pass" else ""
        self.live.record(self.key_of(name), counted, ignore_not_applied=not_applied)
        attempt.ignore_not_applied = not_applied
        if verdict.provider_fault and name:
            self._circuit.failed(self.clock(), verdict.reason, name)
        attempt.verdict = verdict
        return verdict

    # -- retrying ------------------------------------------------------------------------------------

    def retry_body(self, body: Mapping[str, Any], name: str) -> dict[str, Any] | None:
        """``body`` with every endpoint ``name`` covers added to ``provider.ignore``, merged with the canary's list.

        The entries are :meth:`ignore_entries`: the snapshot's tags of the name, or, with none
        known, the name and its base slug.  Entries the caller pinned (``provider.only``,
        ``provider.order``) that the name covers are taken out; ``None`` when that leaves ``only``
        empty, or ``order`` with ``allow_fallbacks: false`` (the request allows no other provider).
        """
        tags = self.ignore_entries(name)
        covered = {t.casefold() for t in tags} | {name.casefold()}
        bases = {name.casefold(), base_slug(name)} - {""}
        prefs = dict(body.get("provider") or {})
        ours = self.client.ignore() if self.client is not None else []
        merged = sorted({*(prefs.get("ignore") or []), *ours, *tags})
        prefs["ignore"] = merged[:MAX_IGNORE]
        for key in ("only", "order"):
            chosen = prefs.get(key)
            if isinstance(chosen, list):
                kept = [p for p in chosen if not isinstance(p, str) or
                        (p.casefold() not in covered and p.casefold().split("/")[0] not in bases)]
                # ``order`` with ``allow_fallbacks: false`` pins as ``only`` does (OpenRouter's provider
                # routing: no provider outside the list): emptied, the request allows no other one
                pinned = key == "only" or prefs.get("allow_fallbacks") is False
                if pinned and not kept:
                    return None
                prefs[key] = kept
        return {**body, "provider": prefs}

    def _retry(self, attempt: Attempt, verdict: Verdict) -> Attempt | None:
        name = verdict.provider
        why = None
        if not verdict.provider_fault:
            why = "" if verdict.outcome in ("pass", "inconclusive") else "not_the_provider"
        elif attempt.number > 1:
            why = "retried_once"
        elif not name:
            why = "no_provider"
        elif self._circuit.open_for(self.clock(), verdict.reason):
            why = "circuit_open"
        elif self._tokens < 1.0:
            why = "budget"
        body = None
        if why is None:
            body = self.retry_body(attempt.body, name)  # type: ignore[arg-type]
            if body is None:
                why = "pinned"
        attempt.held = why or None
        if why is not None:
            if why:
                self.live.held(why)
            return None
        self._tokens -= 1.0
        self.live.retried(self.key_of(name))
        return Attempt(self, body, number=attempt.number + 1)  # type: ignore[arg-type]


class Attempt:
    """One attempt of one request: the body sent, and at most one retry after it.

    Attributes:
        body: the request body to send (a new dict; ``provider`` as the guard set it).
        number: 1 for the first attempt, 2 for the retry.
        verdict: the last verdict of this attempt (``None`` before one).
        held: why a failing verdict was not retried (``circuit_open``, ``budget``, ``retried_once``,
            ``no_provider``, ``not_the_provider``, ``pinned``), ``None`` when it was (or passed).
        ignore_not_applied: the reply was served by a provider this attempt's ``provider.ignore``
            (or the canary's current list) excluded: something on the way to the gateway dropped
            the list (counted as ``ignore_not_applied`` in the live counts).
    """

    __slots__ = ("guard", "body", "number", "verdict", "held", "started", "ignore_not_applied")

    def __init__(self, guard: ReplyGuard, body: dict[str, Any], *, number: int) -> None:
        self.guard = guard
        self.body = body
        self.number = number
        self.verdict: Verdict | None = None
        self.held: str | None = None
        self.ignore_not_applied = False
        self.started = guard.clock()

    def stream(self) -> StreamGuard:
        """A guard for this attempt's streamed reply; its clock starts now (call it when the request goes out)."""
        return StreamGuard(self)

    def check_body(self, body: bytes | Mapping[str, Any], *, http_status: int = 200) -> Verdict:
        """Judge this attempt's unstreamed reply: the response body (bytes, or the parsed JSON)."""
        raw = body if isinstance(body, bytes | bytearray) else msgspec.json.encode(body)
        reader = ChunkReader(reply_max_bytes=REPLY_MAX_BYTES)
        if http_status == 200:
            reader.body(bytes(raw), self.elapsed_ms())
        else:
            from reverie_canary.client.chunks import error_body

            reader.error = error_body(bytes(raw))
        return self.guard.check(reader.reply(http_status=http_status, total_ms=self.elapsed_ms()), self)

    def retry(self, verdict: Verdict | None = None) -> Attempt | None:
        """The retry of this attempt (an :class:`Attempt` whose body ignores the serving provider), or ``None``.

        ``None`` for a pass, and when no retry is allowed (:attr:`held` says why).
        """
        verdict = verdict or self.verdict
        if verdict is None:
            raise ValueError("no verdict to retry on: judge the reply first")
        return self.guard._retry(self, verdict)

    def elapsed_ms(self) -> float:
        """Milliseconds since this attempt started."""
        return (self.guard.clock() - self.started) * 1000.0


class StreamGuard:
    """Judges one streamed reply line by line: early on what cannot change, the rest at the end.

    Feed it the SSE lines (:meth:`line`), raw bytes (:meth:`feed`) or chunks the backend
    already parsed (:meth:`chunk`) as they come; a returned :class:`Verdict` (``early``)
    means stop reading and retry.  Use :meth:`wait_s`
    as the read timeout before the first visible token, and :meth:`timeout` when it
    passed; :meth:`finish` at ``[DONE]`` or the end of the body.
    """

    __slots__ = ("attempt", "reader", "spec", "deadline_ms", "_junk_open", "_seen", "_verdict", "_splitter")

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.reader = ChunkReader(reply_max_bytes=REPLY_MAX_BYTES)
        self.spec = spec_for(attempt.body)
        self.deadline_ms = attempt.guard.policy.first_token_s * 1000.0
        self._junk_open = True
        self._seen = 0
        self._verdict: Verdict | None = None
        self._splitter: LineSplitter | None = None

    def wait_s(self) -> float | None:
        """Seconds left for the first visible token (``0`` when past), ``None`` once it came."""
        if self.reader.ttft_ms is not None:
            return None
        return max(0.0, (self.deadline_ms - self.attempt.elapsed_ms()) / 1000.0)

    def feed(self, data: bytes) -> Verdict | None:
        """Read raw response bytes (any chunking); a verdict when decided early."""
        if self._splitter is None:
            self._splitter = LineSplitter(LINE_MAX_BYTES)
        for raw in self._splitter.feed(data):
            verdict = self.line(raw)
            if verdict is not None:
                return verdict
        if self._splitter.too_long:
            self.reader.transport_error = "line_too_long"
            return self._early(judge(self.reader.reply(http_status=200), self.spec))
        return None

    def line(self, raw: bytes, t_ms: float | None = None) -> Verdict | None:
        """Read one SSE line (without its line break); a verdict when decided early, else ``None``.

        Args:
            raw: the line's bytes (``data: {...}``, a ``: comment`` keep-alive ...).
            t_ms: ms since the request started; default the attempt's clock.
        """
        if self._verdict is not None:
            return self._verdict
        t = self.attempt.elapsed_ms() if t_ms is None else t_ms
        return self._read(self.reader.line(raw, t), t)

    def chunk(self, chunk: Any, t_ms: float | None = None) -> Verdict | None:
        """Read one chunk the backend already parsed; a verdict when decided early, else ``None``.

        For a backend whose HTTP library or SDK parses the stream itself: ``chunk`` is
        the decoded JSON of one ``data:`` line (a mapping) or an SDK's chunk object (the
        OpenAI SDK's ``ChatCompletionChunk``), so the guard does not parse the SSE bytes a
        second time.  The same rules and verdicts as :meth:`line`; call :meth:`finish`
        when the stream ends (``[DONE]`` is not a chunk).

        Args:
            chunk: the chunk, as a mapping or an object with its attributes.
            t_ms: ms since the request started; default the attempt's clock.
        """
        if self._verdict is not None:
            return self._verdict
        t = self.attempt.elapsed_ms() if t_ms is None else t_ms
        return self._read(self.reader.parsed(chunk, t), t)

    def _read(self, go_on: bool, t: float) -> Verdict | None:
        """What the reader's last input decides: early verdicts on what cannot change (``go_on``: keep reading)."""
        r = self.reader
        if r.ttft_ms is None and t > self.deadline_ms:
            return self.timeout(t)
        if r.error is not None or r.finish_reason in _EARLY_FINISH:
            return self._early(judge(r.reply(http_status=200, total_ms=t), self.spec))
        seen, n = self._seen, len(r.text)
        if n > seen:  # one new piece a line, as a rule: one regex scan of it
            piece = r.text[-1] if n == seen + 1 else "".join(r.text[seen:])
            self._seen = n
            if _control_char(piece):  # present now, present in the whole reply
                found = check_control_chars(Reply(text=piece), self.spec)
                return self._early(Verdict(outcome="fail", reason=found.reason, reasons=(found.reason,),
                                           provider=r.served_by, ttft_ms=r.ttft_ms))
            if self._junk_open:
                text = "".join(r.text)
                body = text.lstrip(" \t\r\n")
                if body:
                    junk = check_leading_junk(Reply(text=text), self.spec)
                    if junk.outcome == "fail" and (len(body) > 1 or body != "."):  # "." may become "..."
                        return self._early(Verdict(outcome="fail", reason="leading_junk", reasons=("leading_junk",),
                                                   provider=r.served_by, ttft_ms=r.ttft_ms))
                    self._junk_open = len(body) < JUNK_DECIDED_CHARS
        if not go_on and r.transport_error is not None:
            return self._early(judge(r.reply(http_status=200, total_ms=t), self.spec))
        return None

    def timeout(self, t_ms: float | None = None) -> Verdict:
        """The first-token deadline passed without a visible token: ``fail`` / ``ttft_exceeded``, early."""
        r = self.reader
        return self._early(Verdict(outcome="fail", reason="ttft_exceeded", reasons=("ttft_exceeded",),
                                   provider=r.served_by, ttft_ms=None))

    def raised(self, exc: BaseException, t_ms: float | None = None) -> Verdict:
        """The backend's SDK raised ``exc`` while reading the stream; the verdict, early.

        The OpenAI SDK raises ``APIError`` for a chunk that carries an ``error`` object (a
        provider that broke mid-stream: OpenRouter sends it with ``finish_reason: "error"``)
        before the chunk reaches the backend; its ``body`` is that error object.  It is read
        as that chunk would have been (``in_band_error``, the same verdict as :meth:`line`);
        an exception without one is a stream cut (``stream_cut``).

        Args:
            exc: the exception the SDK raised (its ``body`` attribute, when a mapping, is the error).
            t_ms: ms since the request started; default the attempt's clock.
        """
        if self._verdict is not None:
            return self._verdict
        body = getattr(exc, "body", None)
        if isinstance(body, Mapping) and body:
            error = body.get("error") if isinstance(body.get("error"), Mapping) else body
            verdict = self.chunk({"error": dict(error), "choices": [{"index": 0, "delta": {},
                                                                     "finish_reason": "error"}]}, t_ms)
            if verdict is not None:
                return verdict
        return self.finish(t_ms=t_ms)

    def finish(self, *, http_status: int = 200, t_ms: float | None = None) -> Verdict:
        """Judge the whole reply (the stream ended: ``[DONE]``, or the body closed); counted once."""
        if self._verdict is not None:
            return self._verdict
        t = self.attempt.elapsed_ms() if t_ms is None else t_ms
        if self._splitter is not None:
            last = self._splitter.end()
            if last:
                self.reader.line(last, t)
        verdict = judge(self.reader.reply(http_status=http_status, total_ms=t), self.spec)
        self._verdict = self.attempt.guard._counted(verdict, self.attempt)
        return self._verdict

    def _early(self, verdict: Verdict) -> Verdict:
        if verdict.outcome == "pass":
            return self.finish()
        early = msgspec.structs.replace(verdict, early=True)
        self._verdict = self.attempt.guard._counted(early, self.attempt)
        return self._verdict
