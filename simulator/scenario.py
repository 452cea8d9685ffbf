"""Scenario files of the simulated gateway: models, endpoints and their faults (TOML).

A scenario names every model the simulated gateway serves, each with its
endpoints (one per provider tag, as ``GET /models/{author}/{slug}/endpoints``
lists them, OpenRouter's endpoints listing API) and, per endpoint, a list of faults.  An
endpoint without faults is healthy.  Example::

    seed = 7

    [[models]]
    id = "deepseek/deepseek-chat-v3.1"
    name = "DeepSeek: DeepSeek V3.1"

    [[models.endpoints]]
    tag = "lambda/fp8"
    provider_name = "Lambda"
    quantization = "fp8"
    faults = [{ kind = "slow", ttft_s = 2.0 }]

Every fault has ``kind`` (its profile), ``rate`` (share of the matching requests
it affects, default 1.0) and an optional ``when`` table that narrows the
requests it applies to: ``json`` (the request has ``response_format``),
``languages`` (requested languages), ``prompt_contains`` (substrings of the
last user message, case-insensitive).

Two families of faults: **provider defects** (:data:`FAULT_KINDS`: what the
canary must catch and judge; the ``full`` scenario has one endpoint per kind)
and a **hostile gateway** (:data:`HOSTILE_KINDS`: what the canary must
survive, bounded in time and memory; the ``hostile`` scenario
has one endpoint per kind).  Both speak the real wire format.

Decoding is strict (unknown fields and wrong types are errors) and every error
names the field: ``scenario default.toml: Expected `float`, got `str` - at
`$.models[0].endpoints[6].faults[0].ttft_s```.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.contract.events import PROBE_KINDS
from reverie_canary.simulator.text import LANGUAGES

Language = Literal[LANGUAGES]  # type: ignore[valid-type]
ProbeKind = Literal[PROBE_KINDS]  # type: ignore[valid-type]
Share = Annotated[float, Meta(ge=0.0, le=1.0)]
Seconds = Annotated[float, Meta(ge=0.0)]

#: ``Parameter`` enum of the OpenAPI spec (OpenRouter's endpoints listing API).
Parameter = Literal[
    "temperature", "top_p", "top_k", "min_p", "top_a", "frequency_penalty", "presence_penalty",
    "repetition_penalty", "max_tokens", "max_completion_tokens", "logit_bias", "logprobs",
    "top_logprobs", "prediction", "seed", "response_format", "structured_outputs", "stop", "tools",
    "tool_choice", "parallel_tool_calls", "include_reasoning", "reasoning", "reasoning_effort",
    "web_search_options", "verbosity",
]

Quantization = Literal[
    "int4", "int8", "fp4", "mxfp4", "nvfp4", "fp6", "fp8", "mxfp8", "fp16", "bf16", "fp32", "unknown",
]

#: What an endpoint supports unless the scenario says otherwise.
DEFAULT_PARAMETERS: tuple[str, ...] = (
    "max_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "seed",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "logit_bias",
    "response_format", "structured_outputs", "tools", "tool_choice",
    "reasoning", "include_reasoning",
)

PACKAGED = "reverie_canary.simulator.scenarios"


class When(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which requests a fault applies to; an absent key does not narrow.

    Attributes:
        json: ``true`` only requests with ``response_format``; ``false`` only without.
        languages: only requests asking for one of these languages.
        prompt_contains: only requests whose last user message contains one of
            these strings (case-insensitive).
    """

    json: bool | None = None
    languages: list[Language] | None = None
    prompt_contains: list[str] | None = None


class FaultBase(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="kind"):
    """Fields every fault has.

    Attributes:
        rate: share of the matching requests the fault affects (0..1), drawn
            from the endpoint's seeded generator.
        when: narrows the requests the fault applies to.
    """

    rate: Share = 1.0
    when: When | None = None


class Slow(FaultBase, tag="slow", kw_only=True):
    """Late first token; with ``reasoning_s``, a reasoning model (healthy but slow to speak).

    Attributes:
        ttft_s: seconds from the request to the first content delta
            (``: OPENROUTER PROCESSING`` keep-alives meanwhile).
        reasoning_s: seconds to the first ``delta.reasoning``; reasoning
            streams until ``ttft_s``.  Must be below ``ttft_s``.
    """

    ttft_s: Seconds
    reasoning_s: Seconds | None = None

    def __post_init__(self) -> None:
        if self.reasoning_s is not None and self.reasoning_s >= self.ttft_s:
            raise ValueError("slow.reasoning_s must be below slow.ttft_s")


class BrokenStructured(FaultBase, tag="broken_structured", kw_only=True):
    """Structured output that breaks its contract (only requests with ``response_format``).

    Attributes:
        mode: ``missing_field`` (a required key dropped), ``wrong_type`` (a value
            of the wrong JSON type), ``fenced`` (wrapped in a Markdown fence),
            ``prose`` (JSON with chatter around it), ``truncated`` (cut inside a
            value, finish reason ``length``).
    """

    mode: Literal["missing_field", "wrong_type", "fenced", "prose", "truncated"] = "missing_field"


class LeadingJunk(FaultBase, tag="leading_junk", kw_only=True):
    """A stray prefix before every reply (``","``, ``"assistant\\n\\n"``)."""

    junk: str = ","


class LanguageDrift(FaultBase, tag="language_drift", kw_only=True):
    """Prose in the wrong language.

    Attributes:
        mode: ``switch`` (the whole reply in ``to``) or ``mix`` (sentences
            alternate between the requested language and ``to``).
        to: the language drifted into.
        languages: requested languages it applies to (all when absent).
    """

    mode: Literal["switch", "mix"] = "switch"
    to: Language
    languages: list[Language] | None = None


class Filter(FaultBase, tag="filter", kw_only=True):
    """A hidden filter: ``refusal`` (polite refusal in the requested language,
    finish ``stop``), ``content_filter`` (empty, finish ``content_filter``) or
    ``empty`` (empty, finish ``stop``)."""

    mode: Literal["refusal", "content_filter", "empty"] = "refusal"


class Flaky(FaultBase, tag="flaky", kw_only=True):
    """Transport failures, never a quality defect: when it does not fail it answers healthily.

    Attributes:
        rate: share of requests that fail (0..1).
        statuses: HTTP statuses of a failure before streaming; 429 comes with
            ``Retry-After: retry_after_s``.
        timeout_share: share of the failures that hang without response
            headers for ``hang_s`` seconds (then 408, or the next endpoint).
        midstream_share: share of the failures that break mid-stream
            (an in-band error event, OpenRouter's streaming documentation).
    """

    rate: Share = 0.5
    statuses: list[Annotated[int, Meta(ge=400, le=599)]] = field(default_factory=lambda: [500, 502, 503])
    timeout_share: Share = 0.0
    midstream_share: Share = 0.0
    hang_s: Seconds = 30.0
    retry_after_s: Annotated[int, Meta(ge=0)] = 2

    def __post_init__(self) -> None:
        if self.timeout_share + self.midstream_share > 1.0:
            raise ValueError("flaky.timeout_share + flaky.midstream_share must not exceed 1")
        if not self.statuses and self.timeout_share + self.midstream_share < 1.0:
            raise ValueError("flaky.statuses must not be empty")


class Truncate(FaultBase, tag="truncate", kw_only=True):
    """The reply stops in the middle of a word with finish reason ``stop``."""


class ByteLevel(FaultBase, tag="bytelevel", kw_only=True):
    """Byte-level BPE symbols left undecoded: space -> U+0120, newline -> U+010A."""


class Mojibake(FaultBase, tag="mojibake", kw_only=True):
    """UTF-8 read as cp1252 (``ção`` -> ``Ã§Ã£o``)."""


class ControlTokens(FaultBase, tag="control_tokens", kw_only=True):
    """Raw tool-call control tokens appended to the content."""

    tokens: str = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.lamp_status:0"
        '<|tool_call_argument_begin|>{"lit": true}<|tool_call_end|><|tool_calls_section_end|>'
    )


class Repetition(FaultBase, tag="repetition", kw_only=True):
    """The reply degenerates into one phrase repeated ``times`` times."""

    times: Annotated[int, Meta(ge=2)] = 40


class Inject(FaultBase, tag="inject", kw_only=True):
    """A word inserted in the middle of the reply (echo replies included)."""

    word: str = "REDACTED"


class NativeError(FaultBase, tag="native_error", kw_only=True):
    """HTTP 200, empty content, finish ``stop``, an error in ``native_finish_reason``."""

    native_finish_reason: str = "network_error"


class PinBypass(FaultBase, tag="pin_bypass", kw_only=True):
    """Requests routed to this endpoint are served (and named) by endpoint ``serve_as``."""

    serve_as: str


# -- tool calls: what serving stacks' tool parsers get wrong (vLLM, SGLang reports) ----------------
# Each acts only on requests that offer ``tools``; a request without tools is answered healthily.


class ToolMarkup(FaultBase, tag="tool_markup", kw_only=True):
    """The serving stack's parser misses the call: the model's raw tool-call markup is left in
    ``content``, ``tool_calls`` is empty and the finish reason is ``stop`` (as public reports of
    vLLM and SGLang parsers show it).

    Attributes:
        mode: the markup family: ``qwen3_xml`` (``<tool_call><function=NAME><parameter=K>V
            </parameter></function></tool_call>``), ``hermes`` (``<tool_call>`` around a JSON
            object), ``kimi`` (``<|tool_calls_section_begin|>`` tokens), ``mistral``
            (``[TOOL_CALLS]`` and a JSON list), ``deepseek`` (``<｜tool▁calls▁begin｜>`` tokens).
    """

    mode: Literal["qwen3_xml", "hermes", "kimi", "mistral", "deepseek"] = "qwen3_xml"


class ToolArgs(FaultBase, tag="tool_args", kw_only=True):
    """A parser that passes broken argument JSON on: ``truncated`` (cut inside the last value,
    finish reason still ``tool_calls``), ``double_encoded`` (the object as a JSON string) or
    ``single_quotes`` (a Python dict's text)."""

    mode: Literal["truncated", "double_encoded", "single_quotes"] = "truncated"


class ToolSchema(FaultBase, tag="tool_schema", kw_only=True):
    """Arguments that parse but slip the tool's schema: ``wrong_type`` (a number sent as its
    digits in a string, an array or object sent as its JSON text, a string wrapped in a list)
    or ``missing_required`` (a required field dropped)."""

    mode: Literal["wrong_type", "missing_required"] = "wrong_type"


class ToolNoParser(FaultBase, tag="tool_no_parser", kw_only=True):
    """Advertises ``tools`` and answers a valid tool request (``tool_choice`` other than
    ``none``) with an HTTP error, as a vLLM server started without a tool parser does.

    Attributes:
        status: the upstream status (400 or 422).
        message: the upstream error's message (in ``error.metadata.raw``).
    """

    status: Literal[400, 422] = 400
    message: str = ('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')


class ToolStream(FaultBase, tag="tool_stream", kw_only=True):
    """Streamed tool calls that do not assemble (unstreamed replies are right).

    Attributes:
        mode: ``interleaved`` (the argument fragments alternate between the call's index and a
            second index under another id that never names a tool), ``lost`` (a fragment in the
            middle of the arguments dropped), ``id_changed`` (every fragment after the first
            carries a new id at the same index).
    """

    mode: Literal["interleaved", "lost", "id_changed"] = "interleaved"


class ToolEager(FaultBase, tag="tool_eager", kw_only=True):
    """Calls a tool where none fits: a question no offered tool answers, or the turn after a
    tool's result (the call the history already holds, made again)."""


class ToolEmpty(FaultBase, tag="tool_empty", kw_only=True):
    """An empty reply (no text, no call, finish reason ``stop``), only when ``tools`` are offered."""


# -- a hostile gateway: what the canary must survive, on the real wire ------------


class KeepaliveForever(FaultBase, tag="keepalive_forever", kw_only=True):
    """HTTP 200, ``text/event-stream``, then ``: OPENROUTER PROCESSING`` comments every
    ``keepalive_s`` until the client leaves: never a data line."""


class TokensForever(FaultBase, tag="tokens_forever", kw_only=True):
    """Content deltas without end: no finish reason, no usage, no ``[DONE]``.

    Attributes:
        chunk_chars: characters of prose per delta.
        interval_s: seconds between deltas (0: as fast as the client reads).
    """

    chunk_chars: Annotated[int, Meta(ge=1, le=1 << 20)] = 2048
    interval_s: Seconds = 0.0


class SilentAfterHeaders(FaultBase, tag="silent_after_headers", kw_only=True):
    """HTTP 200 and ``text/event-stream`` headers, then not one byte until the client leaves."""


class Html200(FaultBase, tag="html_200", kw_only=True):
    """HTTP 200 with an HTML page (``text/html``) where the completion should be: a
    proxy's or CDN's challenge page, about ``size_kb`` KiB."""

    size_kb: Annotated[int, Meta(ge=1, le=1 << 16)] = 8


class BadUtf8(FaultBase, tag="bad_utf8", kw_only=True):
    """The stream is written in pieces of ``piece_bytes`` bytes, which split
    multi-byte characters across writes; with ``mode = "invalid"`` the content
    also holds bytes that are not UTF-8 (a lone lead byte, ``0xFF``).

    Attributes:
        mode: ``invalid`` (bad bytes and split writes) or ``split`` (only valid
            characters, split across writes: must read as healthy).
        piece_bytes: bytes per write.
    """

    mode: Literal["invalid", "split"] = "invalid"
    piece_bytes: Annotated[int, Meta(ge=1, le=4096)] = 7


class NoDone(FaultBase, tag="no_done", kw_only=True):
    """A stream that never sends ``data: [DONE]``.

    Attributes:
        mode: ``hold`` (finish reason and usage, then the connection is held
            open and silent), ``close`` (finish reason and usage, then the
            connection closes) or ``cut`` (content without a finish reason,
            then the connection closes).
    """

    mode: Literal["hold", "close", "cut"] = "hold"


class HugeReply(FaultBase, tag="huge_reply", kw_only=True):
    """A reply of ``megabytes`` MB of prose, then a normal ending.

    Attributes:
        megabytes: size of the content.
        piece_kb: KiB of content per SSE delta (or per write of a body).
        body: answer even a stream request with one ``application/json`` body
            (non-stream requests always get one).
    """

    megabytes: Annotated[float, Meta(gt=0.0, le=1024.0)] = 20.0
    piece_kb: Annotated[int, Meta(ge=1, le=1 << 16)] = 16
    body: bool = False


DefectFault = (
    Slow | BrokenStructured | LeadingJunk | LanguageDrift | Filter | Flaky | Truncate | ByteLevel
    | Mojibake | ControlTokens | Repetition | Inject | NativeError | PinBypass
    | ToolMarkup | ToolArgs | ToolSchema | ToolNoParser | ToolStream | ToolEager | ToolEmpty
)
HostileFault = KeepaliveForever | TokensForever | SilentAfterHeaders | Html200 | BadUtf8 | NoDone | HugeReply
Fault = DefectFault | HostileFault

#: Every provider-defect kind, by its ``kind`` tag (the ``full`` scenario has each).
FAULT_KINDS: dict[str, type] = {cls.__struct_config__.tag: cls for cls in DefectFault.__args__}  # type: ignore[attr-defined]
#: Every hostile-gateway kind, by its ``kind`` tag (the ``hostile`` scenario has each).
HOSTILE_KINDS: dict[str, type] = {cls.__struct_config__.tag: cls for cls in HostileFault.__args__}  # type: ignore[attr-defined]
#: The tool-call kinds among :data:`FAULT_KINDS` (they act only on requests that offer ``tools``).
TOOL_KINDS: tuple[str, ...] = ("tool_markup", "tool_args", "tool_schema", "tool_no_parser", "tool_stream",
                               "tool_eager", "tool_empty")


class Pricing(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """USD per token as decimal strings (OpenRouter's endpoints listing API ``pricing``)."""

    prompt: str = "0.00000025"
    completion: str = "0.000001"


class Endpoint(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One provider endpoint of a model.

    Attributes:
        tag: endpoint slug for ``provider.order/only/ignore`` (``deepinfra/fp8``).
        provider_name: provider display name, named in responses (``DeepInfra``).
        ttft_s: healthy time to first content, seconds.
        chunk_interval_s: seconds between streamed chunks (scenario default when absent).
        faults: what is wrong with it; empty means healthy.
        note: free text for people reading the scenario.
    """

    tag: str
    provider_name: str
    quantization: Quantization | None = None
    context_length: int = 163840
    max_completion_tokens: int | None = 32768
    max_prompt_tokens: int | None = None
    pricing: Pricing = Pricing()
    supported_parameters: list[Parameter] = field(default_factory=lambda: list(DEFAULT_PARAMETERS))
    supports_implicit_caching: bool = False
    ttft_s: Seconds = 0.05
    chunk_interval_s: Seconds | None = None
    faults: list[Fault] = []
    note: str = ""

    @property
    def slug(self) -> str:
        """Base provider slug: the tag up to the first ``/`` (``deepinfra``)."""
        return self.tag.split("/", 1)[0]


class Model(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One model id (``author/slug``, optionally ``:variant``) and its endpoints."""

    id: str
    name: str
    created: int = 1755779628
    description: str = "A model served by the simulated OpenRouter gateway."
    tokenizer: str = "DeepSeek"
    instruct_type: str | None = None
    endpoints: list[Endpoint]

    def __post_init__(self) -> None:
        if self.id.count("/") != 1 or self.id.startswith("/") or self.id.endswith("/"):
            raise ValueError(f"model id {self.id!r} must look like author/slug")
        if not self.endpoints:
            raise ValueError(f"model {self.id!r} has no endpoints")
        tags = [e.tag for e in self.endpoints]
        dupes = sorted({t for t in tags if tags.count(t) > 1})
        if dupes:
            raise ValueError(f"model {self.id!r}: duplicate endpoint tags {dupes}")
        for i, endpoint in enumerate(self.endpoints):
            check_faults(endpoint.faults, tags, own_tag=endpoint.tag, where=f"endpoints[{i}]")


class Scenario(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A whole simulated fleet.

    Attributes:
        seed: seeds every random choice (routing, text, faults).
        keepalive_s: interval of ``: OPENROUTER PROCESSING`` comments, seconds.
        chunk_interval_s: default seconds between streamed chunks.
        require_key: answer 401 to chat completions and ``/generation`` without a Bearer key,
            as the real gateway does (on by default; the listings answer without one, with
            null latency and throughput, as OpenRouter's endpoints listing API does).
        generation_delay_s: seconds before ``/generation`` knows a finished
            generation (the real one lags, OpenRouter's generation-stats API).
        controls: probe kind -> tag of the positive-control endpoint the canary
            should use with this fleet (read by ``canary demo``; the gateway
            itself treats control hosts like any other endpoint).
        models: the models served.
    """

    seed: int = 0
    keepalive_s: Annotated[float, Meta(gt=0.0)] = 0.2
    chunk_interval_s: Seconds = 0.02
    require_key: bool = True
    generation_delay_s: Seconds = 0.0
    controls: dict[ProbeKind, str] = {}
    models: list[Model]

    def __post_init__(self) -> None:
        ids = [m.id for m in self.models]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate model ids {dupes}")
        tags = {e.tag for m in self.models for e in m.endpoints}
        for kind, tag in self.controls.items():
            if tag not in tags:
                raise ValueError(f"controls.{kind}: unknown endpoint tag {tag!r}")

    def model(self, model_id: str) -> Model | None:
        """The model with id ``model_id``, or ``None``."""
        return next((m for m in self.models if m.id == model_id), None)


def check_faults(faults: list[Any], tags: list[str], *, own_tag: str, where: str = "") -> None:
    """Check cross-field rules of a fault list: a ``pin_bypass`` must name another known tag.

    Raises:
        ValueError: naming ``where`` and the fault's position.
    """
    for j, fault in enumerate(faults):
        if isinstance(fault, PinBypass):
            if fault.serve_as not in tags:
                raise ValueError(f"{where}.faults[{j}].serve_as: unknown endpoint tag {fault.serve_as!r}")
            if fault.serve_as == own_tag:
                raise ValueError(f"{where}.faults[{j}].serve_as: an endpoint cannot bypass to itself")


def load_scenario(path_or_name: str | Path | None = None) -> Scenario:
    """Load a scenario from a packaged name or a TOML file.

    Args:
        path_or_name: ``None`` or ``"default"`` for the packaged demo fleet, a
            bare name (``"full"``) for ``simulator/scenarios/<name>.toml``, or a
            path to a TOML file.

    Returns:
        The validated :class:`Scenario`.

    Raises:
        ConfigError: when the file is missing, not TOML, or a field is wrong;
            the message names the file and the field (``$.models[0]...``).
    """
    name = "default" if path_or_name is None else str(path_or_name)
    packaged = resources.files(PACKAGED).joinpath(f"{name}.toml")
    if "/" not in name and "\\" not in name and not name.endswith(".toml") and packaged.is_file():
        data, source = packaged.read_bytes(), f"{name}.toml"
    else:
        path = Path(name)
        if not path.is_file():
            known = sorted(p.name.removesuffix(".toml") for p in resources.files(PACKAGED).iterdir()
                           if p.name.endswith(".toml"))
            raise ConfigError(f"scenario {name!r}: no such file and not a packaged scenario {known}",
                              scenario=name)
        data, source = path.read_bytes(), str(path)
    return decode_scenario(data, source=source)


def decode_scenario(data: bytes | str, *, source: str = "<string>") -> Scenario:
    """Decode TOML text into a :class:`Scenario`.

    Raises:
        ConfigError: the message names ``source`` and the failing field.
    """
    try:
        return msgspec.toml.decode(data, type=Scenario)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"scenario {source}: {exc}", scenario=source) from exc
    except msgspec.DecodeError as exc:
        raise ConfigError(f"scenario {source}: not valid TOML: {exc}", scenario=source) from exc


def decode_faults(data: Any) -> list[Any]:
    """Validate a list of fault tables (the ``faults`` of ``PUT /_sim/faults``).

    Args:
        data: already-parsed JSON (a list of objects with ``kind``).

    Raises:
        ConfigError: naming the failing field (``$[0].ttft_s``).
    """
    try:
        return msgspec.convert(data, list[Fault])
    except msgspec.ValidationError as exc:
        raise ConfigError(f"faults: {exc}") from exc
