"""Wire events: frozen, tagged msgspec Structs, JSON on the wire.

Every event is a past-tense fact with a ``type`` tag (never renamed), a schema
version ``v`` and the UTC time it describes in ``at``.  Folding the log again
gives the same state because no decision reads the wall clock: time comes from
``at`` (docs/concepts/index.md).

Evolution rules (msgspec ``docs/schema-evolution.rst``): new fields get
defaults, a field's type never changes, unknown fields are accepted so that an
older reader keeps reading newer events.  Decoding is strict about types: use
the module-level decoders in :mod:`reverie_canary.shared.contract.codec`, never lax conversion.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Annotated, Any, ClassVar, Literal, get_args

import msgspec
from msgspec import Meta, Struct

# What a check sees and says is defined with the checks, in the same light distribution
# (the prober and the chat backend's reply guard share one implementation).
from reverie_canary.client.reply import (  # noqa: F401  (re-exported)
    BLIND_STATUS,
    MAX_TOOL_CALLS,
    MAX_TOOL_FAULTS,
    TOOL_FAULT_CHARS,
    TOOL_VARIANTS,
    CheckResult,
    FreeJson,
    Outcome,
    Reason,
    ToolCall,
)

# The base of every event, UtcDatetime and Slug are defined once, in the client
# distribution that the chat backend installs (it reads IgnoreSnapshot events).
from reverie_canary.client.wire import (  # noqa: F401  (re-exported)
    MAX_ENDPOINTS_PER_MODEL,
    SCHEMA_VERSION,
    Event,
    Slug,
    UtcDatetime,
    Version,
)

#: An ISO 639-1 code (or a short tag).
Language = Annotated[str, Meta(max_length=16)]
#: A bounded free text on the wire (evidence excerpts, error messages).
Excerpt = Annotated[str, Meta(max_length=4000)]
#: A short machine token: a supported parameter, a finish reason, a quantization, a probe kind ...
Token = Annotated[str, Meta(max_length=64)]
#: A display name (``DeepInfra``) or another short free text.
Name = Annotated[str, Meta(max_length=128)]
#: An identifier that may be empty (a task id, a cycle id, a provider tag): the characters of a
#: :data:`Slug`, one byte each in JSON.
Id = Annotated[str, Meta(max_length=256, pattern=r"^[!#-\[\]-~]*$")]

#: The most probes discovery plans for one endpoint in one cycle (every kind, every language of
#: the rotation, the retests, the controls): the bound of a cycle's plan is this times the endpoints.
MAX_PROBES_PER_ENDPOINT = 64
#: The most checks of one reply, and the most requests of one probe (the language probe's
#: confirmations make three).
MAX_CHECKS = 24
MAX_ATTEMPTS = 4
#: The most probes one prober may be told to run at once (a task's ``concurrency``).
MAX_TASK_CONCURRENCY = 4096
#: The most other endpoints of the same provider name one task names (``ProbeTask.same_name``).
MAX_SAME_NAME = 16

#: The probe kinds (docs/concepts/probes.md).
#: ``echo`` is the cheap exact-echo probe of behavioural integrity; ``tools`` the tool-call
#: probe (contract 6).  :data:`PROBE_KINDS` are the kinds planned by default (``Settings.kinds``).
ProbeKind = Literal["ttft", "refusal", "structured", "language", "echo", "tools"]
PROBE_KINDS: tuple[str, ...] = ("ttft", "refusal", "structured", "language", "echo", "tools")
#: Kinds the judge reads across the providers of a model in one cycle, from the probes' own
#: results, with no probe of their own (docs/concepts/probes.md, facts across the providers of a
#: model): ``template``, whose ``usage.prompt_tokens`` differs from its peers' for the same prompt
#: (another chat template or tokenizer), or whose ``completion_tokens`` exceed the request's
#: ``max_tokens``.  Judged like a probe kind, with a mode of its own (observe until switched).
FactKind = Literal["template"]
FACT_KINDS: tuple[str, ...] = ("template",)
#: Every kind a verdict's results and a mode command can name: the probe kinds, then the fact kinds.
JudgedKind = Literal["ttft", "refusal", "structured", "language", "echo", "tools", "template"]
JUDGED_KINDS: tuple[str, ...] = (*PROBE_KINDS, *FACT_KINDS)
assert get_args(JudgedKind) == JUDGED_KINDS == (*get_args(ProbeKind), *get_args(FactKind))
#: The variants of a kind that are each probed every cycle, one task each (``ProbeTask.variant``):
#: the tool probe's streamed and unstreamed call, its no-tool question and its second turn
#: (:data:`reverie_canary.client.reply.TOOL_VARIANTS`).  Each variant every cycle, not a streak
#: per variant: the judge's rule is per provider and cycle (any quality ``fail`` fails the cycle),
#: so a fault only one variant shows fails every cycle and two failed cycles suspend, with no
#: streak of its own to keep; the four requests cost a few thousand tokens per endpoint a cycle
#: (``services/prober/prompts.py``).  A kind not named here has one task, variant ``""``.
KIND_VARIANTS: dict[str, tuple[str, ...]] = {"tools": TOOL_VARIANTS}
#: The request parameters a kind sends that the endpoint's listing must declare in its
#: ``supported_parameters`` (OpenRouter's provider-routing documentation: require_parameters); the prober sends those
#: kinds with ``provider.require_parameters: true``, so the gateway refuses rather than drops them.
PROBE_PARAMETERS: dict[str, tuple[str, ...]] = {
    "structured": ("structured_outputs",),
    "tools": ("tools", "tool_choice"),
}
#: Kinds probed only where the listing declares their parameters: a listing that declares no
#: parameters at all does not advertise tools (a 400 to a tool request is a capability fault only
#: from an endpoint that advertised tools: the tool-call contract, docs/concepts/probes.md).  Other kinds are probed on such
#: an old listing.
DECLARED_ONLY_KINDS: frozenset[str] = frozenset({"tools"})


def missing_parameters(kind: str, supported_parameters: Sequence[str]) -> list[str]:
    """The parameters ``kind`` sends that the listing does not declare (``[]``: the endpoint is probed).

    Args:
        kind: a probe kind.
        supported_parameters: the endpoint's listed ``supported_parameters``.

    Returns:
        The missing names of :data:`PROBE_PARAMETERS`, in its order; for a kind not in
        :data:`DECLARED_ONLY_KINDS` a listing that declares nothing misses nothing.
    """
    needed = PROBE_PARAMETERS.get(kind, ())
    declared = set(supported_parameters)
    if not declared and kind not in DECLARED_ONLY_KINDS:
        return []
    return [p for p in needed if p not in declared]


def variants_of(kind: str, supported_parameters: Sequence[str]) -> tuple[str, ...]:
    """The variants discovery plans for ``kind`` on an endpoint: one task each.

    Every variant of :data:`KIND_VARIANTS` when the endpoint declares the kind's parameters;
    one task of variant ``""`` otherwise (the prober answers it ``not_applicable`` without a
    request) and for a kind without variants.
    """
    variants = KIND_VARIANTS.get(kind)
    if not variants or missing_parameters(kind, supported_parameters):
        return ("",)
    return variants


#: The version of the prober's prompts a task asks for (``ProbeTask.prompt_version``): results of
#: different versions are not comparable (bumped whenever a prompt changes).
PROMPT_VERSION = "p1"

#: Reasons of a language probe that are anomalies *of that language*
#: (docs/concepts/probes.md, the language contract: a whole-reply switch, persistent mixing, broken
#: encoding, letters of a script the language never uses or of another language of its script;
#: ambiguous; ``no_majority`` among the three tries).  The prober
#: confirms such a reply with two more tries; the judge asks for the language
#: again next cycle.  A behavioural failure on the same reply (``leading_junk``,
#: ``bytelevel_tokens`` ...), a refusal or a transport error is no more likely
#: in that language than in another, and a reply too short to judge or served
#: by another provider says nothing about it.
LANGUAGE_ANOMALIES: frozenset[str] = frozenset({
    "language_switch", "language_mix", "encoding_broken", "foreign_script", "foreign_letters",
    "neighbour", "ambiguous", "detectors_disagree", "no_majority",
})


#: A provider's verdict for one cycle (docs/concepts/judge.md).  ``blind``:
#: the canary could not see it this cycle (a ``blind`` probe outcome, or the cycle could
#: not be planned): no streak moves.
CycleVerdictKind = Literal["passed", "failed", "frozen", "blind"]

#: The canary-side causes, the reason codes of a ``blind`` probe outcome and of a
#: :class:`CycleUnplanned` (docs/concepts/health.md):
#:
#: - ``gateway_auth``: 401, the key is missing, wrong or revoked;
#: - ``gateway_credit``: 402, the key's account has no credit left;
#: - ``gateway_forbidden``: 403 that is not a moderation refusal: the key may not do this;
#: - ``gateway_unreachable``: no connection to the gateway (refused, DNS, connect timeout);
#: - ``gateway_error``: the endpoints listing answered 429/5xx (or timed out) until the cycle's deadline;
#: - ``listing_unparseable``: the endpoints listing was not the documented shape;
#: - ``listing_refused``: the endpoints listing answered another 4xx (an unknown model);
#: - ``bus_unavailable``: the plan could not be published before the deadline.
#:
#: Reasons on the wire stay free :data:`Reason` strings, so that a cause added later
#: decodes in an older reader.
BLIND_REASONS: tuple[str, ...] = ("gateway_auth", "gateway_credit", "gateway_forbidden", "gateway_unreachable")
UNPLANNED_CAUSES: tuple[str, ...] = (*BLIND_REASONS, "gateway_error", "listing_unparseable", "listing_refused",
                                     "bus_unavailable")

Mode = Literal["observe", "enforce"]


# -- discovery -----------------------------------------------------------------


#: A listed price in USD as the gateway writes it, a decimal string (``"0.0000002"``); ``"-1"`` is
#: OpenRouter's "variable" price (OpenRouter's endpoints listing API ``pricing``).
Price = Annotated[str, Meta(max_length=32, pattern=r"^-?[0-9]+(\.[0-9]+)?([eE]-?[0-9]+)?$")]


class Pricing(Struct, frozen=True, kw_only=True):
    """An endpoint's listed prices (OpenRouter's endpoints listing API ``pricing``): USD per token, per request.

    ``prompt`` and ``completion`` are USD **per token**; ``request`` USD per
    request (``"0"`` when not listed); ``discount`` a share in [0, 1] taken off
    every price.  Strings, as listed, so that sums are exact (``decimal.Decimal``).
    """

    prompt: Price
    completion: Price
    request: Price = "0"
    discount: Annotated[float, Meta(ge=0, le=1)] = 0.0


#: How the canary came by an endpoint's tag (:attr:`Endpoint.tag_from`): ``""`` the listing's own ``tag``;
#: ``provider_name`` the display name made a slug (``DeepInfra`` -> ``deepinfra``), and
#: ``provider_name+quantization`` with the quantization after it (``deepinfra/bf16``) when the listing has
#: another endpoint of the same provider.  Older listings carry no ``tag`` (OpenRouter's endpoints listing API).
TAG_SOURCES: tuple[str, ...] = ("", "provider_name", "provider_name+quantization")


class Endpoint(Struct, frozen=True, kw_only=True):
    """One OpenRouter endpoint of a model (``GET /models/{author}/{slug}/endpoints``).

    ``provider`` is the endpoint ``tag`` (``deepinfra/fp8``): the value that
    ``provider.only``/``order``/``ignore`` take.  ``provider_name`` is the display
    name the gateway echoes in responses (``DeepInfra``).  ``pricing`` is the
    listed price (``None`` when the listing had none or it was unreadable), for
    the canary's own spend (``canary status``).  ``status`` is the gateway's own
    mark, as listed: ``0`` normal, below 0 the gateway itself deranks the
    endpoint as degraded (its levels are not documented; :func:`degraded`).

    ``tag_from`` says where ``provider`` came from when the listing carried no
    tag (:data:`TAG_SOURCES`; ``""``: the listing's tag); ``unread`` the fields
    the listing gave null where the API documents a value, or of another type,
    read as absent (``supported_parameters`` as none declared, ``status`` as
    unknown ...).
    """

    provider: Slug
    provider_name: Name = ""
    model_id: Annotated[str, Meta(max_length=256)] = ""
    supported_parameters: Annotated[list[Token], Meta(max_length=64)] = []
    quantization: Token | None = None
    context_length: int | None = None
    max_completion_tokens: int | None = None
    status: int | None = None
    pricing: Pricing | None = None
    tag_from: Token = ""
    unread: Annotated[list[Token], Meta(max_length=16)] = []


def degraded(endpoint: Endpoint) -> bool:
    """Whether the gateway itself marks ``endpoint`` degraded: a listed ``status`` below 0.

    OpenRouter lists ``status`` 0 for a normal endpoint and -1, -2, -3, -5 or
    -10 otherwise (OpenRouter's endpoints listing API; the levels are not documented, the
    sign is what the canary reads).  The canary still probes such an endpoint:
    the gateway's mark is shown beside the canary's own verdict, never taken
    for it.
    """
    return endpoint.status is not None and endpoint.status < 0


#: The most dropped endpoints one :class:`EndpointsDiscovered` names (the rest are counted in ``dropped_cut``).
MAX_DROPPED = 16


class DroppedEndpoint(Struct, frozen=True, kw_only=True):
    """One entry of the gateway's listing that discovery could not use, and why.

    ``index`` is its place in the listing (0 first); ``reason`` one of
    ``not_an_object`` (the entry is not a JSON object), ``no_tag`` (no tag,
    and no provider name to derive one from), ``bad_tag`` (a tag that is not
    an identifier: empty, longer than 256, with a space, a quote or a control
    character; it could be neither pinned nor ignored safely) or
    ``duplicate_tag`` (its tag, listed or derived, is an earlier entry's: the
    first is kept);
    ``name`` what the entry calls itself (its ``name``, else its
    ``provider_name``, cut); ``detail`` the fault in words.
    """

    index: Annotated[int, Meta(ge=0)]
    reason: Token
    name: Name = ""
    detail: Annotated[str, Meta(max_length=300)] = ""


class PlannedProbe(Struct, frozen=True, kw_only=True):
    """One probe discovery planned for a cycle; the judge expects its result.

    ``variant``: which of the kind's variants (:data:`KIND_VARIANTS`), ``""`` for a kind without.
    """

    task_id: Slug
    provider: Slug
    kind: ProbeKind
    language: Language | None = None
    control: bool = False
    variant: Token = ""


class EndpointsDiscovered(Event, frozen=True, kw_only=True, tag="endpoints_discovered"):
    """Discovery listed a model's endpoints and planned this cycle's probes.

    ``cycle`` is ``<model>@<start UTC ISO>``; ``deadline`` is when the cycle
    closes (results after it are late and do not count).

    A large model's listing comes in ``parts`` messages (``part`` 0 to
    ``parts - 1``), each with some endpoints and the probes planned for them,
    so that each fits the wire bound (``shared/contract/bounds.py``); readers merge the
    parts of a cycle.  ``listed`` is how many usable endpoints the gateway listed
    (0: not said); more than ``MAX_ENDPOINTS_PER_MODEL`` are not all watched.
    ``dropped`` names the entries of the listing that could not be used
    (:class:`DroppedEndpoint`, at most :data:`MAX_DROPPED`; ``dropped_cut``
    more were dropped than named); every part repeats them.  The others are
    planned as usual: one bad entry never blinds the model.
    """

    model: Slug
    cycle: Slug
    cycle_no: int
    deadline: UtcDatetime
    endpoints: Annotated[list[Endpoint], Meta(max_length=MAX_ENDPOINTS_PER_MODEL)]
    planned: Annotated[list[PlannedProbe], Meta(max_length=MAX_ENDPOINTS_PER_MODEL * MAX_PROBES_PER_ENDPOINT)] = []
    controls: Annotated[dict[Token, Slug], Meta(max_length=16)] = {}
    part: Annotated[int, Meta(ge=0, lt=MAX_ENDPOINTS_PER_MODEL)] = 0
    parts: Annotated[int, Meta(ge=1, le=MAX_ENDPOINTS_PER_MODEL)] = 1
    listed: Annotated[int, Meta(ge=0)] = 0
    language_coverage_cycles: Annotated[int, Meta(ge=0, le=MAX_PROBES_PER_ENDPOINT)] = 0
    languages_per_cycle: Annotated[int, Meta(ge=0, le=MAX_PROBES_PER_ENDPOINT)] = 0
    dropped: Annotated[list[DroppedEndpoint], Meta(max_length=MAX_DROPPED)] = []
    dropped_cut: Annotated[int, Meta(ge=0)] = 0


#: Share of replies: a fraction between 0 and 1.
Share = Annotated[float, Meta(ge=0, le=1)]


class LiveEvidence(Struct, frozen=True, kw_only=True):
    """Why live counts asked for a confirmation probe: one provider's share of one live reason.

    Summed over ``window_s`` seconds of the chat backends' content-free counts
    (``canary.live.<model>``): ``count`` failing replies of ``reason`` out of
    ``served`` replies of the provider (``key``: how the counts named it, a tag or a
    display name), a ``share`` (0..1) above ``threshold`` = the ``median`` of the
    ``peers`` providers with traffic plus k scaled median absolute deviations
    (:mod:`reverie_canary.services.discovery.confirm`).  ``number``: which confirmation of
    the provider in its cycle this is (1 ..  ``confirm_max_per_provider``).
    """

    reason: Reason
    key: Name = ""
    count: Annotated[int, Meta(ge=0)] = 0
    served: Annotated[int, Meta(ge=0)] = 0
    share: Share = 0.0
    median: Share = 0.0
    threshold: Annotated[float, Meta(ge=0)] = 0.0
    peers: Annotated[int, Meta(ge=0, le=MAX_ENDPOINTS_PER_MODEL)] = 0
    window_s: Annotated[float, Meta(ge=0)] = 0.0
    number: Annotated[int, Meta(ge=0, le=MAX_PROBES_PER_ENDPOINT)] = 0


class ProbeTask(Event, frozen=True, kw_only=True, tag="probe_task"):
    """Work for one prober: one probe pinned to one provider (work-queue stream)."""

    task_id: Slug
    model: Slug
    provider: Slug
    provider_name: Name = ""
    kind: ProbeKind
    language: Language = "en"
    cycle: Slug
    deadline: UtcDatetime
    supported_parameters: Annotated[list[Token], Meta(max_length=64)] = []
    max_completion_tokens: int | None = None
    control: bool = False
    prompt_version: Token = ""
    #: Probes each prober runs at once during this task's cycle (discovery's :class:`CycleSized`
    #: ``per_prober``); 0: the prober's own ceiling (``prober_concurrency``).
    concurrency: Annotated[int, Meta(ge=0, le=MAX_TASK_CONCURRENCY)] = 0
    #: The other endpoints of the model the listing gives the same ``provider_name`` (``fireworks/fast``
    #: beside ``fireworks``): the served-by name the pin check compares cannot tell them apart.
    same_name: Annotated[list[Slug], Meta(max_length=MAX_SAME_NAME)] = []
    #: Which of the kind's variants to send (:data:`KIND_VARIANTS`: the tool probe's ``call``,
    #: ``call_stream``, ``no_tool``, ``second_turn``); ``""`` for a kind without variants, and for a
    #: tool task of an endpoint that does not declare the tool parameters (answered ``not_applicable``).
    variant: Token = ""
    #: Set on a confirmation probe: a pinned probe sent outside the rotation because live counts
    #: singled the provider out (its ``cycle`` is ``confirm|<model>|<cycle_no>``, planned in no
    #: cycle, so its result enters no verdict and no streak); ``None`` for a planned probe.
    confirms: LiveEvidence | None = None


class CycleClosed(Event, frozen=True, kw_only=True, tag="cycle_closed"):
    """A cycle's deadline passed; missing results now count as missing."""

    model: Slug
    cycle: Slug
    cycle_no: int


class CycleUnplanned(Event, frozen=True, kw_only=True, tag="cycle_unplanned"):
    """Discovery could not plan a cycle of ``model``: nothing was probed, the canary was blind.

    ``cause`` is one of :data:`UNPLANNED_CAUSES` (``gateway_auth`` ...),
    ``http_status`` the listing's last status (``None``: no answer), ``detail``
    the error as said (never the key), ``attempts`` how many times the listing
    was tried.  ``at`` is when discovery gave up (UTC), ``deadline`` the end of
    the cycle's probe window.  Published on ``canary.discovery.<model>`` with the
    id ``unplanned|<model>|<cycle_no>`` (docs/concepts/health.md).
    """

    model: Slug
    cycle: Slug
    cycle_no: int
    deadline: UtcDatetime
    cause: Reason
    http_status: int | None = None
    detail: Excerpt = ""
    attempts: Annotated[int, Meta(ge=0)] = 1


#: What a cycle's sizing rests on: every planned kind measured, some of them, or none (the prior).
SizingBasis = Literal["measured", "partial", "prior"]


class CycleSized(Event, frozen=True, kw_only=True, tag="cycle_sized"):
    """Discovery's sizing of one cycle of every model, published before the cycle's tasks.

    The probes in flight that end the cycle's plan within ``target_s``
    (``probe_window_s x probe_fill_share``), from the measured probe times
    (:mod:`reverie_canary.services.discovery.sizing`): ``work_s`` is the sum of
    the planned probes' expected seconds (``probe_s`` per kind; ``basis``
    ``measured``, ``partial``: some kinds measured, the others at the prior, or
    ``prior``), ``needed`` the probes in flight the target asks for,
    ``per_prober`` what each of the ``probers`` seen in the last cycle runs
    at once (at most ``ceiling``, ``prober_concurrency``; every task of the cycle
    carries it as ``concurrency``), ``in_flight`` their sum, and
    ``expected_wall_s`` = ``work_s / in_flight + tail_s``.  ``fits`` is false
    when that is past the window on measured probe times: the cycle cannot end
    in time, and this says so before any of its probes runs (on the prior,
    nothing measured yet, it is not judged).  ``at`` is the cycle's start; published
    on ``canary.cycles.sized`` with the id ``sized|<cycle_no>``.
    """

    cycle_no: int
    deadline: UtcDatetime
    models: Annotated[int, Meta(ge=0)]
    probes: Annotated[int, Meta(ge=0)]
    probe_s: Annotated[dict[Token, Annotated[float, Meta(ge=0)]], Meta(max_length=16)] = {}
    basis: SizingBasis = "prior"
    work_s: Annotated[float, Meta(ge=0)] = 0.0
    tail_s: Annotated[float, Meta(ge=0)] = 0.0
    window_s: Annotated[float, Meta(ge=0)] = 0.0
    target_s: Annotated[float, Meta(ge=0)] = 0.0
    probers: Annotated[int, Meta(ge=0)] = 1
    ceiling: Annotated[int, Meta(ge=0)] = 0
    needed: Annotated[int, Meta(ge=0)] = 0
    per_prober: Annotated[int, Meta(ge=0)] = 0
    in_flight: Annotated[int, Meta(ge=0)] = 0
    expected_wall_s: Annotated[float, Meta(ge=0)] = 0.0
    fits: bool = True


# -- prober --------------------------------------------------------------------




#: Characters of a reply's visible text the evidence keeps (``first_bytes`` and ``text_rest``
#: together): far above what a probe's 320-token budget writes, so that an honest reply is kept
#: whole and ``canary check`` reruns the checks on exactly what the prober judged.
EVIDENCE_TEXT_CHARS = 8192
#: Characters of a reply's reasoning text the evidence keeps.
EVIDENCE_REASONING_CHARS = 2048
#: Characters of the visible text in ``ReplyEvidence.first_bytes``.
FIRST_BYTES_CHARS = 160


class ReplyEvidence(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the gateway answered to one request (no check applied yet).

    Times are ms from request start.  ``served_by`` is the provider display name
    the response named; ``first_bytes`` the start of the visible output.

    The reply as the prober assembled it, for ``canary evidence``:
    ``first_bytes + text_rest`` is the visible text the checks read, up to
    :data:`EVIDENCE_TEXT_CHARS`; ``reasoning`` the reasoning text, up to
    :data:`EVIDENCE_REASONING_CHARS`; ``text_cut`` the characters of both left
    out (0: the evidence holds the whole reply).  ``transport_error``,
    ``error_json`` (the error object, bounded), ``timed_out``, ``done``,
    ``keepalives``, ``tool_calls`` / ``tool_names``, ``output_bytes``,
    ``wire_bytes``, ``cut`` (the read cap that stopped the read),
    ``invalid_utf8``, the first content / reasoning delta times, ``calls``
    (each tool call as assembled: index, id, name, the raw arguments within the
    reader's cap, the bytes received), ``tool_faults`` (what went wrong while
    they were assembled) and ``streamed`` are the reply's own fields
    (:class:`reverie_canary.client.reply.Reply`).
    Fields at their defaults are left out of the JSON.
    """

    http_status: int | None = None
    finish_reason: Token | None = None
    native_finish_reason: Token | None = None
    served_by: Name | None = None
    generation_id: Name | None = None
    ttft_ms: float | None = None
    total_ms: float | None = None
    first_bytes: Excerpt = ""
    output_chars: int = 0
    error: Excerpt | None = None
    usage: FreeJson = {}
    text_rest: Annotated[str, Meta(max_length=EVIDENCE_TEXT_CHARS)] = ""
    reasoning: Annotated[str, Meta(max_length=EVIDENCE_REASONING_CHARS)] = ""
    text_cut: Annotated[int, Meta(ge=0)] = 0
    first_content_ms: float | None = None
    first_reasoning_ms: float | None = None
    transport_error: Token | None = None
    error_json: FreeJson | None = None
    timed_out: bool = False
    done: bool = False
    keepalives: Annotated[int, Meta(ge=0)] | None = None
    tool_calls: Annotated[int, Meta(ge=0)] = 0
    tool_names: Annotated[list[Token], Meta(max_length=8)] = []
    output_bytes: Annotated[int, Meta(ge=0)] = 0
    wire_bytes: Annotated[int, Meta(ge=0)] = 0
    cut: Token | None = None
    invalid_utf8: Annotated[int, Meta(ge=0)] = 0
    calls: Annotated[list[ToolCall], Meta(max_length=MAX_TOOL_CALLS)] = []
    tool_faults: Annotated[list[Annotated[str, Meta(max_length=TOOL_FAULT_CHARS)]],
                           Meta(max_length=MAX_TOOL_FAULTS)] = []
    streamed: bool = False


class ProbeAttempt(Struct, frozen=True, kw_only=True):
    """One request of a probe (the language probe's confirmation makes three).

    ``variant``: the tool probe's variant of this request (``call``, ``call_stream``,
    ``no_tool``, ``second_turn``), ``""`` for other kinds.
    """

    outcome: Outcome
    reason: Reason = ""
    checks: Annotated[list[CheckResult], Meta(max_length=MAX_CHECKS)] = []
    reply: ReplyEvidence = ReplyEvidence()
    variant: Token = ""


class ProbeResult(Event, frozen=True, kw_only=True, tag="probe_result"):
    """The outcome of one ProbeTask, with its evidence; ``at`` = completion time.

    ``prompt_version``, ``max_tokens`` and ``ttft_threshold_ms`` say the request
    and the latency bar (``services/prober/prompts.py`` builds the same request
    from them); ``checks_version`` names the checks that judged it
    (:data:`reverie_canary.client.checks.CHECKS_VERSION`): with the
    replies' evidence, what ``canary evidence`` writes for ``canary check``.
    ``variant`` is the tool probe's variant (the prompts build its request from
    kind, language, variant and prompt version), ``""`` for other kinds.
    """

    task_id: Slug
    model: Slug
    provider: Slug
    kind: ProbeKind
    language: Language | None = None
    cycle: Slug
    outcome: Outcome
    reason: Reason = ""
    started_at: UtcDatetime | None = None
    checks: Annotated[list[CheckResult], Meta(max_length=MAX_CHECKS)] = []
    reply: ReplyEvidence = ReplyEvidence()
    attempts: Annotated[list[ProbeAttempt], Meta(max_length=MAX_ATTEMPTS)] = []
    control: bool = False
    prober: Name = ""
    prompt_version: Token = ""
    max_tokens: Annotated[int, Meta(ge=0)] = 0
    ttft_threshold_ms: Annotated[float, Meta(ge=0)] = 0.0
    checks_version: Token = ""
    variant: Token = ""
    #: The task's ``confirms``, copied: this result answers a confirmation probe (a fact for
    #: operators, :class:`LiveConfirmation`; never a cycle's evidence).
    confirms: LiveEvidence | None = None


# -- judge ---------------------------------------------------------------------


class ResultRef(Struct, frozen=True, kw_only=True):
    """A pointer to one probe result that a verdict or decision rests on."""

    task_id: Id
    cycle: Id
    kind: Token
    outcome: Outcome
    reason: Reason = ""
    language: Language | None = None


#: The reasons a shed verdict keeps per provider (:meth:`CycleVerdict.shed`).
SHED_REASONS = 4


class ProviderVerdict(Struct, frozen=True, kw_only=True):
    """One provider's verdict for one cycle, with the results behind it.

    ``results_cut`` / ``missing_cut`` / ``reasons_cut``: how many result
    references, missing task ids and reasons (after the first
    ``SHED_REASONS``) were left out to keep the verdict under the wire bound
    (see :meth:`CycleVerdict.shed`); the results themselves are in the log.
    """

    provider: Slug
    verdict: CycleVerdictKind
    results_cut: int = 0
    missing_cut: int = 0
    reasons_cut: int = 0
    reasons: Annotated[list[Annotated[str, Meta(max_length=128, pattern=r"^[ !#-\[\]-~]*$")]],
                       Meta(max_length=MAX_PROBES_PER_ENDPOINT)] = []
    results: Annotated[list[ResultRef], Meta(max_length=MAX_PROBES_PER_ENDPOINT)] = []
    missing: Annotated[list[Id], Meta(max_length=MAX_PROBES_PER_ENDPOINT)] = []


class CycleVerdict(Event, frozen=True, kw_only=True, tag="cycle_verdict"):
    """The judge closed a cycle: every provider's verdict.

    ``unproven`` lists probe kinds whose positive control passed (their results
    prove nothing this cycle); ``common_mode`` lists kinds frozen because most
    providers failed them at once.
    """

    model: Slug
    cycle: Slug
    cycle_no: int
    verdicts: Annotated[list[ProviderVerdict], Meta(max_length=MAX_ENDPOINTS_PER_MODEL)]
    unproven: Annotated[list[Token], Meta(max_length=16)] = []
    common_mode: Annotated[list[Token], Meta(max_length=16)] = []

    def shed(self) -> CycleVerdict | None:
        """This verdict without the result references and missing task ids (counted instead).

        :func:`reverie_canary.shared.contract.bounds.fit` uses it for a verdict of a
        large model that is above the wire bound: every provider keeps its
        verdict and reasons.  ``None`` when there is nothing left to shed.
        """
        keep = SHED_REASONS
        if not any(v.results or v.missing or len(v.reasons) > keep for v in self.verdicts):
            return None
        lean = [msgspec.structs.replace(v, results=[], missing=[], reasons=v.reasons[:keep],
                                        results_cut=v.results_cut + len(v.results),
                                        missing_cut=v.missing_cut + len(v.missing),
                                        reasons_cut=v.reasons_cut + max(0, len(v.reasons) - keep))
                for v in self.verdicts]
        return msgspec.structs.replace(self, verdicts=lean)


DecisionAction = Literal[
    "suspend",  # a suspension starts (enforce mode)
    "end",  # a suspension ends: reason recovered | expired | lifted
    "floor_held",  # would suspend, but the capacity floor holds
    "would_suspend",  # observe mode: the same call, routing untouched
    "would_end",  # observe mode
    "common_mode",  # a probe kind failed for most providers at once: frozen
    "control_passed",  # a positive control passed: that kind is unproven
    "pin_violated",  # the gateway served a pinned probe from another provider
    "unjudgeable",  # frozen for too many consecutive cycles
    "mode_changed",  # an operator switched observe/enforce
    "canary_blind",  # the canary cannot see (model-wide): reason is the cause, held lists the suspensions it holds
    "canary_sees",  # a cycle judged again after canary_blind (model-wide)
    "suspension_held",  # a suspension came due while blind: kept (until = held until) until judged again
]

#: The reason codes this judge gives its decisions (the table of them, with their meanings, is
#: ``DECISION_REASONS`` in :mod:`reverie_canary.client.reasons`).  A closed set for the code that
#: makes decisions; on the wire ``reason`` stays a free :data:`Reason` string, so that a code a
#: newer judge adds decodes in an older reader (the evolution rules above: a field's type never
#: changes).  ``canary_blind`` is the one decision whose reason is mostly not from this set: it is
#: the cause another service reported (:data:`UNPLANNED_CAUSES`, a blind probe's reason).
DecisionReason = Literal[
    "failed_cycles",  # suspend, would_suspend: the streak of failed cycles reached the bar
    "expired",  # end, would_end: the suspension reached its until
    "recovered",  # end, would_end: passed cycles in a row during the suspension
    "lifted",  # end, would_end: an operator lifted it
    "capacity_floor",  # floor_held
    "canary_blind",  # suspension_held: it came due while the canary could not see
    "judged_again",  # canary_sees
    "frozen_too_long",  # unjudgeable
    "operator",  # mode_changed
    "common_mode",  # common_mode
    "control_passed",  # control_passed
    "pin_violated",  # pin_violated
    "blind",  # canary_blind: blind probe results that named no cause (otherwise the cause itself)
]
DECISION_REASONS: tuple[str, ...] = get_args(DecisionReason)


class HeldSuspension(Struct, frozen=True, kw_only=True):
    """A suspension blindness holds: it came due while the canary could not see its provider.

    ``until`` is the end it had (when it came due), ``held_until`` the end the
    hold gives it for now (renewed while blind), ``decision_id`` the ``suspend``
    decision it belongs to.
    """

    provider: Slug
    until: UtcDatetime
    held_until: UtcDatetime
    decision_id: Id = ""


class Decision(Event, frozen=True, kw_only=True, tag_field="action"):
    """A judge decision, published on ``canary.decisions.<model>.<provider>``: the base of its variants.

    Every decision is one variant, tagged on the wire by ``action`` (one class per
    :data:`DecisionAction`, :data:`DECISION_TYPES`), with ``"type": "decision"`` beside it as
    every decision has always carried: the bytes are those of the one struct it used to be, so
    that every decision on the log decodes (and one of this code decodes in an older reader).
    Match on the variant (``case Suspended(): ...``); what a variant says is its type's: a
    suspension has an ``until``, and an action without one has no such field.

    ``decision_id`` is deterministic (it is the ``Nats-Msg-Id``).  ``reason`` is a code of
    :data:`DecisionReason` (a free string on the wire: a newer judge's code decodes).
    ``cycles`` and ``evidence`` name the cycles and probe results the decision rests on.
    ``provider`` is empty for model-wide decisions.  ``routing_follows``: how many decisions
    that change routing (an enforced ``suspend``, ``end`` or ``suspension_held``) of the same
    judgement -- one cycle's close -- follow this one on the log: the router makes one
    ignore-list version of them all, after the last (0).
    """

    type: Literal["decision"] = "decision"
    #: The variant's tag (a class attribute, not a field: msgspec writes it as ``action``).
    action: ClassVar[DecisionAction]
    #: The reason codes this judge gives the variant (``canary_blind`` also carries another service's cause).
    reasons: ClassVar[tuple[DecisionReason, ...]] = ()
    decision_id: Slug
    model: Slug
    provider: Id = ""
    reason: Reason = ""
    detail: Excerpt = ""
    ladder_level: int = 0
    cycles: Annotated[list[Id], Meta(max_length=32)] = []
    evidence: Annotated[list[ResultRef], Meta(max_length=MAX_PROBES_PER_ENDPOINT)] = []
    mode: Mode = "enforce"
    kind: Token | None = None
    actor: Id | None = None
    routing_follows: Annotated[int, Meta(ge=0, le=4 * MAX_ENDPOINTS_PER_MODEL)] = 0

    def changes_routing(self) -> bool:
        """Whether the router acts on it: an enforced suspension starts, ends, or is held while blind."""
        return False


class TimedDecision(Decision, frozen=True, kw_only=True):
    """A decision about a suspension that has an end: ``until``, the UTC end, is required by its type."""

    until: UtcDatetime


class Suspended(TimedDecision, frozen=True, kw_only=True, tag="suspend"):
    """A suspension starts (enforce mode): routing ignores ``provider`` until ``until`` (UTC).

    ``ladder_level`` is the step of the suspension ladder it took (1: the first).
    """

    action: ClassVar[Literal["suspend"]] = "suspend"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("failed_cycles",)

    def changes_routing(self) -> bool:
        """Always: an enforced suspension starts."""
        return True


class WouldSuspend(TimedDecision, frozen=True, kw_only=True, tag="would_suspend"):
    """Observe mode's shadow of ``Suspended``: the same call and ``until``, routing untouched."""

    action: ClassVar[Literal["would_suspend"]] = "would_suspend"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("failed_cycles",)


class SuspensionHeld(TimedDecision, frozen=True, kw_only=True, tag="suspension_held"):
    """A suspension came due while the canary was blind: kept, ``until`` the end the hold gives it for now."""

    action: ClassVar[Literal["suspension_held"]] = "suspension_held"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("canary_blind",)

    def changes_routing(self) -> bool:
        """When enforced: the router keeps the provider ignored until the hold's ``until``."""
        return self.mode == "enforce"


class SuspensionEnded(Decision, frozen=True, kw_only=True, tag="end"):
    """A suspension ends (``expired``, ``recovered`` or ``lifted``; ``actor``: who lifted it)."""

    action: ClassVar[Literal["end"]] = "end"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("expired", "recovered", "lifted")

    def changes_routing(self) -> bool:
        """Always: the router drops the suspension it ends."""
        return True


class WouldEnd(Decision, frozen=True, kw_only=True, tag="would_end"):
    """Observe mode's shadow of ``SuspensionEnded``."""

    action: ClassVar[Literal["would_end"]] = "would_end"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("expired", "recovered", "lifted")


class FloorHeld(Decision, frozen=True, kw_only=True, tag="floor_held"):
    """The provider would be suspended, but the capacity floor holds: not suspended, operators told."""

    action: ClassVar[Literal["floor_held"]] = "floor_held"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("capacity_floor",)


class CommonMode(Decision, frozen=True, kw_only=True, tag="common_mode"):
    """Probe kind ``kind`` failed for most providers at once: frozen for all (model-wide)."""

    action: ClassVar[Literal["common_mode"]] = "common_mode"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("common_mode",)


class ControlPassed(Decision, frozen=True, kw_only=True, tag="control_passed"):
    """A positive control of kind ``kind`` passed: that kind's failures prove nothing this cycle (model-wide)."""

    action: ClassVar[Literal["control_passed"]] = "control_passed"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("control_passed",)


class PinViolated(Decision, frozen=True, kw_only=True, tag="pin_violated"):
    """The gateway served a probe pinned to ``provider`` from another provider (``evidence``: which)."""

    action: ClassVar[Literal["pin_violated"]] = "pin_violated"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("pin_violated",)


class Unjudgeable(Decision, frozen=True, kw_only=True, tag="unjudgeable"):
    """The provider's cycles were frozen too many in a row to judge it (told once)."""

    action: ClassVar[Literal["unjudgeable"]] = "unjudgeable"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("frozen_too_long",)


class ModeChanged(Decision, frozen=True, kw_only=True, tag="mode_changed"):
    """An operator (``actor``) switched ``mode`` (for ``kind``, or model-wide when ``None``)."""

    action: ClassVar[Literal["mode_changed"]] = "mode_changed"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("operator",)


class CanaryBlind(Decision, frozen=True, kw_only=True, tag="canary_blind"):
    """The canary cannot see the model's providers (model-wide), once when it goes blind.

    ``reason`` is the cause another service reported (one of ``UNPLANNED_CAUSES``, or a
    blind probe's reason); ``held`` lists the suspensions blindness holds.
    """

    action: ClassVar[Literal["canary_blind"]] = "canary_blind"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("blind",)
    held: Annotated[list[HeldSuspension], Meta(max_length=MAX_ENDPOINTS_PER_MODEL)] = []


class CanarySees(Decision, frozen=True, kw_only=True, tag="canary_sees"):
    """A cycle judged the model's providers again after ``CanaryBlind`` (model-wide)."""

    action: ClassVar[Literal["canary_sees"]] = "canary_sees"
    reasons: ClassVar[tuple[DecisionReason, ...]] = ("judged_again",)


#: Every decision variant, one per action, in :data:`DecisionAction`'s order.
DECISION_VARIANTS: tuple[type[Decision], ...] = (
    Suspended, SuspensionEnded, FloorHeld, WouldSuspend, WouldEnd, CommonMode, ControlPassed, PinViolated,
    Unjudgeable, ModeChanged, CanaryBlind, CanarySees, SuspensionHeld)
#: The variant of each action.
DECISION_TYPES: dict[str, type[Decision]] = {t.action: t for t in DECISION_VARIANTS}
assert tuple(DECISION_TYPES) == get_args(DecisionAction), "one variant per action, in order"
assert all(t.__struct_config__.tag == t.action for t in DECISION_VARIANTS), "the tag is the action"
assert {r for t in DECISION_VARIANTS for r in t.reasons} == set(DECISION_REASONS), "every reason has its variant"
#: Any decision, as the wire carries it: a union tagged by ``action`` (decode with
#: :data:`reverie_canary.shared.contract.codec.DECISION`).
AnyDecision = (Suspended | SuspensionEnded | FloorHeld | WouldSuspend | WouldEnd | CommonMode | ControlPassed
               | PinViolated | Unjudgeable | ModeChanged | CanaryBlind | CanarySees | SuspensionHeld)


def make_decision(action: str, **fields: Any) -> Decision:
    """Build the variant of ``action`` from its fields (a generic caller's constructor: tests, tools).

    Args:
        action: one of :data:`DecisionAction`.
        fields: the variant's fields (``until`` where the variant has one, and only there).

    Returns:
        The variant's instance.

    Raises:
        ValueError: when ``action`` names no variant.
        TypeError: when a field is missing or not the variant's (an ``until`` on an ``end``).
    """
    cls = DECISION_TYPES.get(action)
    if cls is None:
        raise ValueError(f"unknown decision action {action!r}: one of {', '.join(DECISION_TYPES)}")
    return cls(**fields)


#: What a confirmation probe said about the live failures that asked for it: ``confirmed`` (the
#: pinned probe failed), ``not_reproduced`` (it passed), ``inconclusive`` (anything else: a
#: transport error, an inconclusive or not-applicable probe, the canary blind).
ConfirmationOutcome = Literal["confirmed", "not_reproduced", "inconclusive"]


class LiveConfirmation(Event, frozen=True, kw_only=True, tag="live_confirmation"):
    """The answer of a confirmation probe to live failures: a fact for operators, never a verdict.

    Published by the judge on ``canary.confirmations.<model>.<provider>`` with the id
    ``confirmation|<task_id>`` once the probe's result is on the log (DESIGN, "The request in
    flight"): ``outcome`` from the probe's (``probe_outcome`` / ``probe_reason``); ``live`` the
    counts that asked for it.  It enters no cycle's verdict and no streak: live counts never
    suspend anyone, only two failed cycles of the canary's own probes do.  ``at`` is the
    result's time.
    """

    model: Slug
    provider: Slug
    task_id: Slug
    kind: Token
    variant: Token = ""
    cycle: Slug
    outcome: ConfirmationOutcome
    probe_outcome: Outcome
    probe_reason: Reason = ""
    live: LiveEvidence


class RetestRequested(Event, frozen=True, kw_only=True, tag="retest_requested"):
    """Probe ``language`` of ``provider`` again in ``for_cycle_no`` (contract 4)."""

    model: Slug
    provider: Slug
    language: Language
    for_cycle_no: int
    reason: Reason = ""
    source_task_id: Id = ""



# -- answers to operator commands ---------------------------------------------------
#
# Every operator command gets one answer on the log from the service that owns it
# (docs/concepts/messages.md, "Operator commands are answered by events"): the router answers
# overrides and exclusions, the judge lifts and modes.  The answer's id is
# ``answer|<command id>`` (its ``Nats-Msg-Id``), so a redelivered command gives
# the same answer, stored once.

#: Bounds of an answer's lists: enough for every watched model of a deployment,
#: small enough that the largest answer stays far below NATS's 1 MiB payload.
ANSWER_MODELS_MAX = 32
ANSWER_IGNORE_MAX = 16


class SnapshotVersion(Struct, frozen=True, kw_only=True):
    """One model's IgnoreSnapshot version, as an answer reports it.

    ``ignore`` lists the providers that version ignores at the answer's ``at``
    (at most ``ANSWER_IGNORE_MAX``; ``ignored`` is the full count);
    ``quantizations`` its ``provider.quantizations`` allow-list (empty: none).
    """

    model: Slug
    version: int
    ignore: Annotated[list[Id], Meta(max_length=ANSWER_IGNORE_MAX)] = []
    ignored: int = 0
    quantizations: Annotated[list[Token], Meta(max_length=16)] = []


class FloorBreach(Struct, frozen=True, kw_only=True):
    """A model left with fewer than ``min_hosts`` usable hosts by an operator's ``--force``.

    ``usable`` lists the production hosts (endpoint tags) still usable after the
    command; the floor is the judge's capacity floor (docs/concepts/judge.md) (setting ``min_hosts``).
    """

    model: Slug
    min_hosts: int
    usable: Annotated[list[Id], Meta(max_length=ANSWER_IGNORE_MAX)] = []


class DecisionMade(Struct, frozen=True, kw_only=True):
    """A judge decision a command caused (a lift's ``end``, a mode's ``mode_changed``)."""

    decision_id: Slug
    model: Slug
    provider: Id = ""
    action: DecisionAction
    at: UtcDatetime
    detail: Excerpt = ""


class CommandAnswer(Event, frozen=True, kw_only=True):
    """Base of the answers: which command (id, verb, actor, scope) and which service answers.

    Published on ``canary.answers.<service>.<command id>``; ``at`` is when the
    service handled the command (UTC).
    """

    answer_id: Slug
    command_id: Slug
    command: Annotated[str, Meta(max_length=32)]
    service: Slug
    actor: Slug
    model: Annotated[str, Meta(max_length=256)] = ""
    provider: Annotated[str, Meta(max_length=256)] = ""


class CommandApplied(CommandAnswer, frozen=True, kw_only=True, tag="command_applied"):
    """The command took effect.

    ``snapshots``: the IgnoreSnapshot versions it made (router); ``unchanged``:
    the models it concerned whose snapshot stayed as it was, with their current
    version; ``decisions``: the judge decisions it caused.  ``forced``: the
    operator passed ``--force`` past a guard rail; ``warnings`` say which, and
    ``floor_broken`` names each model left below the capacity floor by it.
    ``changed``: false when the command changed nothing (the state already was what it asked:
    a no-op, which the answer's ``detail`` says and nobody is notified of).
    """

    detail: Excerpt = ""
    snapshots: Annotated[list[SnapshotVersion], Meta(max_length=ANSWER_MODELS_MAX)] = []
    unchanged: Annotated[list[SnapshotVersion], Meta(max_length=ANSWER_MODELS_MAX)] = []
    decisions: Annotated[list[DecisionMade], Meta(max_length=ANSWER_MODELS_MAX)] = []
    warnings: Annotated[list[Excerpt], Meta(max_length=16)] = []
    forced: bool = False
    floor_broken: Annotated[list[FloorBreach], Meta(max_length=ANSWER_MODELS_MAX)] = []
    changed: bool = True


class CommandRefused(CommandAnswer, frozen=True, kw_only=True, tag="command_refused"):
    """The command changed nothing, and why.

    ``code`` is machine-readable (``unknown_provider``, ``capacity_floor``,
    ``not_watched``, ``unknown_model``, ``expired``, ``no_such_override``,
    ``invalid_exclusions``, ``not_suspended``); ``reason`` says it in the
    operator's words.  ``force_applies``: ``--force`` would apply it.
    """

    code: Reason
    reason: Excerpt
    force_applies: bool = False


# -- the dead letter -----------------------------------------------------------


#: How much of a refused message's error and payload a dead letter keeps (characters).
DEAD_LETTER_ERROR_MAX = 2000
DEAD_LETTER_PAYLOAD_MAX = 8192


class DeadLetter(Event, frozen=True, kw_only=True, tag="dead_letter"):
    """A message a service refused, with the reason; the payload is kept as text."""

    service: Token
    subject: Annotated[str, Meta(max_length=1024)]
    reason: Token
    error: Annotated[str, Meta(max_length=DEAD_LETTER_ERROR_MAX)] = ""
    payload: Annotated[str, Meta(max_length=DEAD_LETTER_PAYLOAD_MAX)] = ""
    stream_seq: int | None = None
    deliveries: int | None = None


def utc(dt: datetime) -> datetime:
    """Return ``dt`` as an aware UTC datetime.

    Raises:
        ValueError: when ``dt`` is naive (a wall-clock time without a zone).
    """
    if dt.tzinfo is None:
        raise ValueError("naive datetime: every time in the system is UTC-aware")
    return dt.astimezone(timezone.utc)



# -- notices (the notifier) ------------------------------------------------------

#: How urgent a notice is; each channel has a minimum (services/notifier/core.py, SEVERITY).
Severity = Literal["info", "warning", "critical"]
#: ``notice``: a one-off fact; ``start`` / ``reminder`` / ``end``: a persisting state folded
#: into one notice when it starts, reminders while it lasts, one when it ends.
NoticePhase = Literal["notice", "start", "reminder", "end"]
#: A notice's identity: the decision id, ``cmd|<command id>``, ``snap|<model>|<version>|<at>``,
#: or ``remind|`` / ``end|`` + the start's id (never the schema version).
NoticeId = Annotated[str, Meta(min_length=1, max_length=600, pattern=r"^[!#-\[\]-~]+$")]
#: A delivery channel's name (``CANARY_NOTIFY_URLS`` key): lower-case letters, digits, ``-`` and ``_``.
ChannelName = Annotated[str, Meta(min_length=1, max_length=32, pattern=r"^[a-z0-9][a-z0-9_-]*$")]


class Notice(Struct, frozen=True, kw_only=True):
    """One thing operators are told, as every channel receives it.

    ``at`` is the UTC time of the fact behind it (a decision's, a verdict's, a
    command's), never the time it was sent.  ``count`` is how many cycles a
    persisting state has been seen so far and ``since`` when it started
    (reminders and ends).  ``source_id`` is the decision or command id.
    """

    notice_id: NoticeId
    source_id: Annotated[str, Meta(max_length=512)] = ""
    at: UtcDatetime
    severity: Severity
    action: Reason
    phase: NoticePhase = "notice"
    model: Annotated[str, Meta(max_length=256)] = ""
    provider: Annotated[str, Meta(max_length=256)] = ""
    kind: Annotated[str, Meta(max_length=64)] | None = None
    title: Annotated[str, Meta(max_length=400)]
    text: Excerpt = ""
    reason: Reason = ""
    detail: Excerpt = ""
    until: UtcDatetime | None = None
    mode: Annotated[str, Meta(max_length=16)] = ""
    actor: Annotated[str, Meta(max_length=256)] = ""
    count: int = 1
    since: UtcDatetime | None = None
    cycle: Annotated[str, Meta(max_length=300)] = ""
    evidence: Annotated[list[Annotated[str, Meta(max_length=200)]], Meta(max_length=16)] = []


class NoticeDeadLettered(Event, frozen=True, kw_only=True, tag="notice_dead_lettered"):
    """A notice still undelivered to one channel after its whole schedule (``canary.notices.dead.<channel>``).

    ``generation`` counts resends (0: never resent), so a notice that dies again
    after ``canary notices resend`` is recorded again.
    """

    notice: Notice
    channel: ChannelName
    attempts: int
    first_attempt_at: UtcDatetime | None = None
    error: Excerpt = ""
    generation: int = 0


class NoticeRef(Struct, frozen=True, kw_only=True):
    """One notice on one channel."""

    notice_id: NoticeId
    channel: Annotated[str, Meta(max_length=32)]
    why: Annotated[str, Meta(max_length=200)] = ""


#: The most notices one ``NoticesResent`` lists as requeued, and as skipped (the answer stays
#: below the wire bound at the largest ids; the log line has the full counts).
NOTICES_RESENT_MAX = 256
#: The most channel names one ``NoticesResent`` lists (the metrics' channel label budget).
NOTICE_CHANNELS_MAX = 64


class NoticesResent(Event, frozen=True, kw_only=True, tag="notices_resent"):
    """The notifier's answer to a ``ResendNotices`` (``canary.notices.resent``).

    ``requeued``: dead letters delivered again through the notifier's schedule;
    ``skipped``: what was asked for but not requeued, each with why (already
    delivered, still pending, unknown, channel not configured).
    ``refused``: why nothing was looked at (empty when the request was carried
    out), e.g. a ``channel`` the notifier does not know; ``channels``: the
    channels it knows (configured, or with notices in its delivery book), sorted.
    """

    command_id: Annotated[str, Meta(min_length=1, max_length=256)]
    requeued: Annotated[list[NoticeRef], Meta(max_length=NOTICES_RESENT_MAX)] = []
    skipped: Annotated[list[NoticeRef], Meta(max_length=NOTICES_RESENT_MAX)] = []
    refused: Annotated[str, Meta(max_length=400)] = ""
    channels: Annotated[list[Annotated[str, Meta(max_length=32)]], Meta(max_length=NOTICE_CHANNELS_MAX)] = []
