"""OpenRouter wire shapes the simulated gateway reads and writes (msgspec Structs).

Requests are decoded leniently about unknown fields (clients send many
OpenAI/OpenRouter extras) and strictly about types.  Responses follow
OpenRouter's API documentation: the endpoints, models and providers listings,
the streaming chunks, the finish reasons, the errors and the generation stats.  Optional response fields are ``UNSET`` (omitted), not ``null``.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

# --- requests ---------------------------------------------------------------


class ContentPart(Struct, kw_only=True):
    """One part of a multi-part message; only ``text`` parts are read."""

    type: str
    text: str | None = None


class ToolFunction(Struct, kw_only=True):
    """``tools[].function`` (the Chat Completions tool schema): ``name`` required, the rest optional."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(Struct, kw_only=True):
    """One entry of ``tools``: ``{"type": "function", "function": {...}}``."""

    type: str
    function: ToolFunction


class CalledFunction(Struct, kw_only=True):
    """``tool_calls[].function`` of an assistant message in the history."""

    name: str | None = None
    arguments: str | None = None


class HistoryToolCall(Struct, kw_only=True):
    """A call of an assistant message in the history (read leniently: it is the client's text)."""

    id: str | None = None
    type: str | None = None
    function: CalledFunction | None = None


class Message(Struct, kw_only=True):
    """A chat message; ``content`` is a string or a list of parts; an assistant turn may carry
    ``tool_calls``, a ``tool`` turn its ``tool_call_id`` (the Chat Completions tool-result turn)."""

    role: str
    content: str | list[ContentPart] | None = None
    tool_calls: list[HistoryToolCall] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        """The message's text, parts joined."""
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            return "".join(p.text or "" for p in self.content if p.type == "text")
        return ""


class JsonSchemaConfig(Struct, kw_only=True):
    """``response_format.json_schema`` (OpenRouter's structured-outputs documentation)."""

    name: str
    schema: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None


class ResponseFormat(Struct, kw_only=True):
    """``response_format``: ``text``, ``json_object`` or ``json_schema``."""

    type: str
    json_schema: JsonSchemaConfig | None = None


class ProviderPreferences(Struct, kw_only=True):
    """The ``provider`` routing object (OpenRouter's provider routing documentation); fields not simulated are accepted."""

    order: list[str] | None = None
    only: list[str] | None = None
    ignore: list[str] | None = None
    allow_fallbacks: bool | None = None
    require_parameters: bool | None = None
    quantizations: list[str] | None = None
    data_collection: str | None = None
    zdr: bool | None = None
    sort: Any = None


class ChatRequest(Struct, kw_only=True):
    """``POST /chat/completions`` body: OpenAI chat completions plus OpenRouter extras."""

    model: str
    messages: list[Message]
    stream: bool = False
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    response_format: ResponseFormat | None = None
    tools: list[Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    provider: ProviderPreferences | None = None


# --- listings ----------------------------------------------------------------


class Percentiles(Struct, kw_only=True):
    """``PercentileStats``: p50/p75/p90/p99."""

    p50: float
    p75: float
    p90: float
    p99: float


class ToolChoiceSupport(Struct, kw_only=True):
    """``supports_tool_choice``: which ``tool_choice`` values passed OpenRouter's testing."""

    auto: bool
    none: bool
    required: bool
    function: bool


class PublicEndpoint(Struct, kw_only=True):
    """One entry of ``data.endpoints`` (OpenRouter's endpoints listing API, ``PublicEndpoint``).

    ``native_tools``, ``service_tier``, ``supports_tool_choice`` and ``supports_diarization``
    are required by OpenRouter's current API document (its generated ``openrouter`` SDK
    refuses a listing without them).
    """

    name: str
    model_id: str
    model_name: str
    provider_name: str
    tag: str
    context_length: int
    max_completion_tokens: int | None
    max_prompt_tokens: int | None
    quantization: str | None
    pricing: dict[str, Any]
    supported_parameters: list[str]
    status: int
    uptime_last_5m: float | None
    uptime_last_30m: float | None
    uptime_last_1d: float | None
    latency_last_30m: Percentiles | None
    throughput_last_30m: Percentiles | None
    supports_implicit_caching: bool
    native_tools: dict[str, Any] = msgspec.field(default_factory=dict)
    service_tier: str | None = None
    supports_tool_choice: ToolChoiceSupport
    supports_diarization: bool = False


class Architecture(Struct, kw_only=True):
    """``architecture`` of a model."""

    modality: str = "text->text"
    input_modalities: list[str] = msgspec.field(default_factory=lambda: ["text"])
    output_modalities: list[str] = msgspec.field(default_factory=lambda: ["text"])
    tokenizer: str = "Other"
    instruct_type: str | None = None


class ModelEndpoints(Struct, kw_only=True):
    """``data`` of ``GET /models/{author}/{slug}/endpoints``."""

    id: str
    name: str
    created: int
    description: str
    architecture: Architecture
    endpoints: list[PublicEndpoint]


# --- chat --------------------------------------------------------------------


class StreamFunction(Struct, kw_only=True, omit_defaults=True):
    """``delta.tool_calls[].function``: the name once, then ``arguments`` fragments."""

    name: str | UnsetType = UNSET
    arguments: str | UnsetType = UNSET


class StreamToolCall(Struct, kw_only=True, omit_defaults=True):
    """``delta.tool_calls[]`` (OpenAI's streamed function calls): ``index`` always; ``id``, ``type`` and the
    name on a call's first delta."""

    index: int
    id: str | UnsetType = UNSET
    type: str | UnsetType = UNSET
    function: StreamFunction | UnsetType = UNSET


class Delta(Struct, kw_only=True):
    """``choices[].delta`` of a stream chunk; ``content`` is null beside tool calls."""

    role: str = "assistant"
    content: str | None = ""
    reasoning: str | None | UnsetType = UNSET
    tool_calls: list[StreamToolCall] | UnsetType = UNSET


class StreamChoice(Struct, kw_only=True):
    """``choices[]`` of a stream chunk; the finish reasons are ``null`` until the last one."""

    index: int = 0
    delta: Delta
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    logprobs: None = None


class ErrorObject(Struct, kw_only=True, omit_defaults=True):
    """``error`` of an error envelope or an in-band error chunk (OpenRouter's error documentation)."""

    code: int
    message: str
    error_type: str | UnsetType = UNSET
    http_status: int | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    availability: dict[str, Any] | UnsetType = UNSET


class Usage(Struct, kw_only=True):
    """``usage`` (OpenRouter's streaming documentation): token counts and cost in USD credits."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost: float
    is_byok: bool = False
    prompt_tokens_details: dict[str, int] = msgspec.field(default_factory=lambda: {"cached_tokens": 0})
    completion_tokens_details: dict[str, int] = msgspec.field(default_factory=lambda: {"reasoning_tokens": 0})
    cost_details: dict[str, float | None] = {}


class Chunk(Struct, kw_only=True):
    """``chat.completion.chunk``: ``provider`` names the provider that served (display name)."""

    id: str
    object: str = "chat.completion.chunk"
    created: int
    model: str
    provider: str
    choices: list[StreamChoice]
    error: ErrorObject | UnsetType = UNSET
    usage: Usage | UnsetType = UNSET
    openrouter_metadata: dict[str, Any] | UnsetType = UNSET


class FunctionCall(Struct, kw_only=True):
    """``message.tool_calls[].function``: ``arguments`` is a JSON-encoded string (Chat Completions)."""

    name: str
    arguments: str


class ToolCall(Struct, kw_only=True):
    """``message.tool_calls[]``: ``id``, ``type`` (``function``) and ``function``, all required."""

    id: str
    type: str = "function"
    function: FunctionCall


class ChatMessage(Struct, kw_only=True):
    """``choices[0].message`` of a non-streamed completion; ``content`` null beside tool calls."""

    role: str = "assistant"
    content: str | None
    refusal: None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] | UnsetType = UNSET


class Choice(Struct, kw_only=True):
    """``choices[]`` of a non-streamed completion; ``error`` on a mid-generation failure (§6)."""

    index: int = 0
    message: ChatMessage
    finish_reason: str | None
    native_finish_reason: str | None
    logprobs: None = None
    error: ErrorObject | UnsetType = UNSET


class Completion(Struct, kw_only=True):
    """A ``chat.completion`` response."""

    id: str
    object: str = "chat.completion"
    created: int
    model: str
    provider: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: None = None
    openrouter_metadata: dict[str, Any] | UnsetType = UNSET


class ProviderResponse(Struct, kw_only=True):
    """One attempt of a generation (OpenRouter's generation-stats API ``provider_responses``)."""

    provider_name: str
    status: int | None
    latency: float
    id: str | None
    endpoint_id: str
    model_permaslug: str
    is_byok: bool = False


class Generation(Struct, kw_only=True):
    """``data`` of ``GET /generation?id=`` (OpenRouter's generation-stats API); times in ms."""

    id: str
    upstream_id: str | None
    request_id: str
    created_at: str
    model: str
    provider_name: str
    router: None = None
    api_type: str = "completions"
    streamed: bool
    cancelled: bool
    finish_reason: str | None
    native_finish_reason: str | None
    latency: float
    generation_time: float
    moderation_latency: None = None
    tokens_prompt: int
    tokens_completion: int
    native_tokens_prompt: int
    native_tokens_completion: int
    native_tokens_reasoning: int
    native_tokens_cached: int = 0
    native_tokens_completion_images: int = 0
    num_media_prompt: int = 0
    num_media_completion: int = 0
    num_input_audio_prompt: int = 0
    num_search_results: int = 0
    num_fetches: int = 0
    web_search_engine: None = None
    total_cost: float
    usage: float
    upstream_inference_cost: None = None
    cache_discount: None = None
    is_byok: bool = False
    service_tier: None = None
    origin: str = ""
    http_referer: str | None = None
    user_agent: str | None = None
    app_id: None = None
    external_user: None = None
    preset_id: None = None
    session_id: None = None
    data_region: str = "global"
    workspace_id: None = None
    response_cache_source_id: None = None
    provider_responses: list[ProviderResponse]


_encoder = msgspec.json.Encoder()


def encode(obj: Any) -> bytes:
    """Encode a Struct or plain data as compact JSON bytes."""
    return _encoder.encode(obj)


def error_body(code: int, message: str, *, metadata: dict[str, Any] | None = None,
               availability: dict[str, Any] | None = None, error_type: str | None = None,
               **top: Any) -> dict[str, Any]:
    """Build an OpenRouter error envelope ``{"error": {code, message, metadata?, availability?}, ...}``.

    Args:
        code: HTTP status; the response's status must equal it (OpenRouter's error documentation).
        message: human-readable message.
        metadata: ``error.metadata`` (``error_type``, ``provider_name``, ``raw`` ...).
        availability: ``error.availability`` (``code``, ``retryable``, ``excluded_by`` ...);
            with it, ``error_type`` and ``http_status`` sit inside ``error`` as in
            the availability examples.
        error_type: ``error.error_type`` (availability errors).
        **top: top-level siblings (``openrouter_metadata``, ``user_id``).
    """
    error = ErrorObject(code=code, message=message,
                        error_type=UNSET if error_type is None else error_type,
                        http_status=UNSET if availability is None else code,
                        metadata=UNSET if metadata is None else metadata,
                        availability=UNSET if availability is None else availability)
    return {"error": error, **top}
