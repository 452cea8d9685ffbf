"""What a check sees and what it says: a finished reply, the probe's spec, a check's result.

Defined here, in the light distribution the chat backend installs, because one implementation of
the checks serves both the prober and the backend's reply guard.  The prober's HTTP layer, the
recorded-case reader and the backend's guard all produce these plain Structs (through
:class:`reverie_canary.client.chunks.ChunkReader`); checks never see an HTTP object.
:class:`CheckResult` travels inside the canary's ``ProbeResult`` events, whose module re-exports it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

#: Tool calls a reply keeps, in the order of their first delta (more are counted in
#: ``Reply.tool_calls`` only): a probe asks for one call, a chat turn makes a handful.
MAX_TOOL_CALLS = 4
#: UTF-8 bytes of one call's ``function.arguments`` kept (the probe's calls take about 200);
#: the rest is counted in :attr:`ToolCall.arguments_bytes`, never kept (a hostile stream cannot
#: grow the reader's memory).
TOOL_ARGUMENTS_MAX_BYTES = 4096
#: Characters kept of a call's ``id`` and of its ``function.name`` (OpenAI caps names at 64).
TOOL_ID_CHARS = 128
TOOL_CALL_NAME_CHARS = 128
#: Distinct stream-assembly facts a reply keeps (:attr:`Reply.tool_faults`).
MAX_TOOL_FAULTS = 16
#: Characters of one assembly fact (``id_changed@0``).
TOOL_FAULT_CHARS = 64


class ToolCall(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One tool call as the client assembled it, bounded; also the wire's form of it in the evidence.

    A streamed call is keyed by its ``index``: ``id``, ``type`` and ``function.name`` are taken
    from the first delta that carries them, ``function.arguments`` fragments are appended in
    order; a call delivered whole in one chunk is one fragment (the OpenAI tool-call wire as OpenRouter passes it, OpenAI's
    assembly rule).  An unstreamed ``message.tool_calls`` entry is one call whose ``index`` is its
    place in the list.

    Attributes:
        index: the call's ``index`` on the wire, or its place in ``message.tool_calls``.
        id: the call's ``id`` as first received (cut to :data:`TOOL_ID_CHARS`); ``None`` when none
            came or it was empty.
        name: ``function.name`` as first received (cut to :data:`TOOL_CALL_NAME_CHARS`); ``None``
            when none came.
        arguments: ``function.arguments`` exactly as received (fragments concatenated, never
            parsed or repaired), up to :data:`TOOL_ARGUMENTS_MAX_BYTES` UTF-8 bytes, cut at a
            character boundary.
        arguments_bytes: UTF-8 bytes of arguments received, those past the cap included: more
            than ``arguments`` holds means the arguments were cut (:attr:`arguments_cut`).
        fragments: deltas that carried argument text (1 for an unstreamed or whole call).
    """

    index: int
    id: Annotated[str, Meta(max_length=TOOL_ID_CHARS)] | None = None
    name: Annotated[str, Meta(max_length=TOOL_CALL_NAME_CHARS)] | None = None
    arguments: Annotated[str, Meta(max_length=TOOL_ARGUMENTS_MAX_BYTES)] = ""
    arguments_bytes: Annotated[int, Meta(ge=0)] = 0
    fragments: Annotated[int, Meta(ge=0)] = 0

    @property
    def arguments_cut(self) -> bool:
        """Whether arguments past :data:`TOOL_ARGUMENTS_MAX_BYTES` were received and not kept."""
        kept = self.arguments
        return self.arguments_bytes > (len(kept) if kept.isascii() else len(kept.encode("utf-8", "surrogatepass")))


class Reply(Struct, frozen=True, kw_only=True):
    """A finished reply as the client assembled it.

    Times are milliseconds from the start of the request.

    Attributes:
        text: the visible output (content deltas concatenated).
        reasoning_text: reasoning deltas concatenated (reasoning models).
        finish_reason: normalised (``stop``, ``length``, ``content_filter``,
            ``tool_calls``, ``error``) or ``None`` when none came.
        native_finish_reason: the provider's raw finish reason.
        http_status: status of the response, ``None`` if no headers came.
        error: an error object: the JSON error body, or an in-band error chunk.
        transport_error: why the exchange broke below the content level
            (``connect_error``, ``headers_timeout``, ``stream_cut``,
            ``body_parse`` ...), ``None`` if it did not.
        ttft_ms: first content **or** reasoning delta with a visible
            (non-whitespace) character; keep-alive comments, empty and
            whitespace-only deltas never start it (docs/concepts/probes.md, the latency contract; the
            rule of :mod:`reverie_canary.client.chunks`).
        timed_out: the client stopped waiting after the response opened
            (200) because nothing, or not all, arrived in time.
        served_by: provider display name the response named.
        keepalives: SSE comment lines seen (``: OPENROUTER PROCESSING``); ``None``
            when not counted (a recorded case without its SSE lines).
        done: the reply ended as a whole: ``data: [DONE]`` came, or a complete
            JSON body was read (a finish reason alone also ends a reply).
        tool_calls: tool calls the reply made (``delta.tool_calls`` entries by
            index, ``message.tool_calls`` entries; counted up to 1024); ``tool_names`` their
            function names (at most 8, 64 chars each).
        calls: the calls themselves as assembled (:class:`ToolCall`: index, id, name, the raw
            arguments), the first :data:`MAX_TOOL_CALLS`; a reply with more says so by
            ``tool_calls`` above ``len(calls)``.
        tool_faults: what the reader saw go wrong while it assembled the calls, each
            ``<fact>@<index>`` (at most :data:`MAX_TOOL_FAULTS` distinct):
            ``id_missing`` (no id, or an empty one), ``id_duplicate`` (an id another call has),
            ``id_changed`` (a new id at a used index: another call reusing the index),
            ``id_resent`` (the same id again), ``name_missing``, ``name_changed`` (another name
            at a used index, or a name sent in pieces), ``name_resent`` (the same name again),
            ``index_missing`` (a streamed delta without ``index``), ``after_finish`` (a tool-call
            delta after the finish reason), ``type_invalid`` (``type`` not ``function``),
            ``arguments_not_string`` (``function.arguments`` an object, not a JSON string).
            Which of them fail a probe is the checks' decision (:mod:`.checks.tools`).
        streamed: the reply came as Server-Sent Events (``False``: one JSON body).
        output_bytes: UTF-8 bytes of text and reasoning received, including
            any beyond ``reply_max_bytes`` in the chunk that crossed it.
        wire_bytes: bytes of the response body read from the network.
        cut: the cap that stopped the read (``reply_max_bytes``,
            ``response_max_bytes``, ``sse_line_max_bytes``), ``None`` when the
            reply was read whole.  ``text`` and ``reasoning_text`` then hold the
            first bytes only; the rest was never read (bounded reads).
        invalid_utf8: data lines whose bytes were not valid UTF-8 (read with
            U+FFFD in place of the bad bytes).
        content_type: the response's ``Content-Type``.
    """

    text: str = ""
    reasoning_text: str = ""
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    http_status: int | None = None
    error: dict[str, Any] | None = None
    transport_error: str | None = None
    ttft_ms: float | None = None
    first_content_ms: float | None = None
    first_reasoning_ms: float | None = None
    total_ms: float | None = None
    timed_out: bool = False
    served_by: str | None = None
    generation_id: str | None = None
    usage: dict[str, Any] = {}
    keepalives: int | None = None
    cache_hit: bool = False
    done: bool = False
    tool_calls: int = 0
    tool_names: tuple[str, ...] = ()
    calls: tuple[ToolCall, ...] = ()
    tool_faults: tuple[str, ...] = ()
    streamed: bool = False
    output_bytes: int = 0
    wire_bytes: int = 0
    cut: str | None = None
    invalid_utf8: int = 0
    content_type: str | None = None


ResponseFormat = Literal["json_schema", "json_object"]
#: What a tool-call probe asks (:mod:`reverie_canary.services.prober.prompts`): one known call,
#: unstreamed (``call``) or streamed (``call_stream``); a request no tool fits, text is right
#: (``no_tool``); the turn after the tool's result, text that uses it is right (``second_turn``).
ToolVariant = Literal["call", "call_stream", "no_tool", "second_turn"]
TOOL_VARIANTS: tuple[str, ...] = ("call", "call_stream", "no_tool", "second_turn")


class ProbeSpec(Struct, frozen=True, kw_only=True):
    """What the probe asked for: the contract a reply is checked against.

    Attributes:
        kind: probe kind (``ttft``, ``refusal``, ``structured``, ``language``, ``echo``,
            ``tools``).
        language: ISO 639-1 code the reply must be written in, or ``None``.
        prompt: the user prompt, kept as evidence.
        expected_prefix: the first character the probe demanded (``*``), if any.
        sentinel: the closing marker the probe demanded (``[[END]]``), if any;
            a reply without it and with a normal finish reason was cut off.
        echo_text: the exact text an echo probe must return.
        schema: the JSON schema sent (structured probes).
        response_format: ``json_schema`` / ``json_object`` if sent, else ``None``
            (then one enclosing Markdown fence is tolerated).
        max_tokens: the output budget sent.
        ttft_threshold_ms: latency bar (docs/concepts/probes.md, the latency contract: 10 000 ms).
        tools: the OpenAI-format tool definitions offered (``[{"type": "function", "function":
            {"name", "description", "parameters"}}]``), ``None`` when the request offered none.
        expected_tool: the tool the prompt calls for; ``None`` when no tool fits and a text
            answer is right (trigger agreement; the second turn).
        expected_arguments: the argument values the prompt fixed, a subset the call must
            contain (nested objects are subsets too), or ``None``.
        parallel_calls: whether the request allowed more than one call (``parallel_tool_calls``
            not sent, or ``true``: the default; ``false``: at most one).
        variant: the tool probe's variant (:data:`ToolVariant`), ``None`` for other kinds.
        tool_result_value: on the second turn, the value only the tool's result holds; the
            reply's text must carry it.
    """

    kind: str
    language: str | None = None
    prompt: str = ""
    expected_prefix: str | None = None
    sentinel: str | None = None
    echo_text: str | None = None
    schema: dict[str, Any] | None = None
    response_format: ResponseFormat | None = None
    max_tokens: int | None = None
    ttft_threshold_ms: float = 10_000.0
    tools: list[dict[str, Any]] | None = None
    expected_tool: str | None = None
    expected_arguments: dict[str, Any] | None = None
    parallel_calls: bool = True
    variant: ToolVariant | None = None
    tool_result_value: str | None = None


#: A machine-readable reason code (``ttft_exceeded``); bounded, so that one
#: oversized message cannot bloat the judge's state or a verdict past NATS's
#: payload limit; printable ASCII without ``"`` or ``\\`` (one byte a character).
Reason = Annotated[str, Meta(max_length=64, pattern=r"^[ !#-\[\]-~]*$")]

#: Free-form JSON (check evidence, the gateway's ``usage``): at most 32 keys at the top, and
#: every nested string, container and the whole within ``shared.bounds.FREE_JSON``, checked
#: by :class:`reverie_canary.shared.contract.codec.Codec` at decoding (``extra={"free_json": True}``
#: marks it).
FreeJson = Annotated[dict[Annotated[str, Meta(max_length=64)], Any], Meta(max_length=32, extra={"free_json": True})]

#: Outcome of one check or one probe.  ``not_applicable``: the endpoint does not
#: declare the capability the probe needs; it is neither evidence for nor against.
#: ``blind``: the canary itself could not see (the gateway refused the canary's key,
#: its credit or its access, or could not be reached; :data:`BLIND_REASONS`): it says
#: nothing about the provider and never touches its streak (docs/concepts/health.md).
Outcome = Literal["pass", "fail", "inconclusive", "transport_error", "not_applicable", "blind"]

#: The HTTP statuses that are about the canary's own key, not a provider (OpenRouter's error documentation).
BLIND_STATUS: dict[int, str] = {401: "gateway_auth", 402: "gateway_credit", 403: "gateway_forbidden"}


class CheckResult(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What one check concluded about one reply.

    ``check`` names the check (``latency.ttft``, ``structured.schema`` ...),
    ``reason`` is a stable machine-readable code (``ttft_exceeded`` ...),
    ``evidence`` holds the offending span, shares, validator message ...
    An empty reason and evidence are left out of the JSON (a passing check is
    ``{"check":..., "outcome":"pass"}``: the checks are most of a result's bytes).
    """

    check: Annotated[str, Meta(max_length=64)]
    outcome: Outcome
    reason: Reason = ""
    evidence: FreeJson = {}
