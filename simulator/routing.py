"""Provider routing of the simulated gateway (OpenRouter's provider routing documentation).

Pure: from a model's endpoints, the request's ``provider`` object and the
parameters it uses, the ordered list of endpoints to try.

- ``only``: hard allowlist; ``ignore``: denylist.  An entry matches an endpoint
  whose tag equals it, whose tag starts with ``"<entry>/"`` (a base slug
  matches every variant), or whose display name equals it, case-insensitively.
- ``quantizations``: keep endpoints of those quantizations (``fp8`` includes
  ``mxfp8``, ``fp4`` includes ``mxfp4`` and ``nvfp4``).
- ``require_parameters``: drop endpoints that do not list every parameter the
  request uses (``response_format`` json_schema needs ``structured_outputs``
  and ``response_format``).
- ``order``: the listed endpoints first, in order; with ``allow_fallbacks``
  false only those.  Without ``order``: OpenRouter's default load balancing
  (provider-selection guide, "Price-Based Load Balancing"): endpoints without
  a failure in the last :data:`OUTAGE_WINDOW_S` seconds first, each drawn in
  turn with a weight of 1/price² (price = prompt + completion USD per token,
  :func:`price_weight`: an endpoint at half the price is 4 times as likely to
  be tried first), the rest after them; with ``allow_fallbacks`` false only
  the first.
- Soft preferences (provider-selection guide): a request with ``tools`` or
  ``tool_choice`` goes first to endpoints that list ``tools``, one with a
  ``response_format`` to endpoints that list it.  When no endpoint left lists
  ``tools``, the request is refused with the gateway's own 404 "No endpoints
  found that support tool use." (as captured from the real gateway).

An empty result raises :class:`NoRoute` (404 with ``availability``, §6).
"""

from __future__ import annotations

import random
from collections.abc import Collection
from decimal import Decimal, InvalidOperation
from typing import Any

from reverie_canary.shared.contract.errors import CanaryError
from reverie_canary.simulator.scenario import Endpoint
from reverie_canary.simulator.wire import ProviderPreferences

#: Request body keys that map one-to-one to a ``supported_parameters`` value.
SIMPLE_PARAMETERS: tuple[str, ...] = (
    "temperature", "top_p", "top_k", "min_p", "top_a", "frequency_penalty", "presence_penalty",
    "repetition_penalty", "max_tokens", "logit_bias", "logprobs", "top_logprobs", "prediction",
    "seed", "stop", "tools", "tool_choice", "parallel_tool_calls", "include_reasoning", "reasoning",
    "reasoning_effort", "web_search_options", "verbosity",
)

_QUANT_FAMILY = {"fp8": {"fp8", "mxfp8"}, "fp4": {"fp4", "mxfp4", "nvfp4"}}
#: Seconds a failed attempt keeps an endpoint behind the stable ones in default routing
#: ("providers that have not seen significant outages in the last 30 seconds").
OUTAGE_WINDOW_S = 30.0
#: The message of the gateway's 404 when no endpoint left supports tool use (captured 2025-26).
NO_TOOL_ENDPOINT = ("No endpoints found that support tool use. To learn more about provider routing, "
                    "visit: https://openrouter.ai/docs/guides/routing/provider-selection")


class NoRoute(CanaryError):
    """No endpoint is left to try.

    Attributes:
        code: ``availability.code``: ``no_endpoints`` or ``constraint_filtered``.
        excluded_by: ``availability.excluded_by`` values.
        affected: base slugs of the endpoints the last filter removed.
        detail: what removed them, for ``availability.constraint``.
        message: the error's ``message``.
    """

    def __init__(self, code: str, excluded_by: list[str], affected: list[str], detail: str,
                 message: str = "No endpoints found that can handle the requested parameters.") -> None:
        super().__init__(detail)
        self.code = code
        self.excluded_by = excluded_by
        self.affected = affected
        self.detail = detail
        self.message = message


def request_parameters(body: dict[str, Any]) -> set[str]:
    """The ``supported_parameters`` values a raw request body needs.

    Args:
        body: the JSON body as a dict.

    Returns:
        E.g. ``{"response_format", "structured_outputs", "max_tokens"}`` for a
        json_schema request with ``max_tokens``.
    """
    needed = {k for k in SIMPLE_PARAMETERS if body.get(k) is not None}
    if body.get("max_completion_tokens") is not None:
        needed.add("max_tokens")
    rf = body.get("response_format")
    if isinstance(rf, dict):
        if rf.get("type") == "json_schema":
            needed |= {"response_format", "structured_outputs"}
        elif rf.get("type") == "json_object":
            needed.add("response_format")
    return needed


def matches(entry: str, endpoint: Endpoint) -> bool:
    """Tell whether a ``provider.order/only/ignore`` entry names ``endpoint``."""
    e = entry.strip().lower()
    tag = endpoint.tag.lower()
    return e == tag or tag.startswith(e + "/") or e == endpoint.provider_name.lower()


def _affected(dropped: list[Endpoint]) -> list[str]:
    return sorted({e.slug for e in dropped})


def price_weight(endpoint: Endpoint) -> float:
    """The endpoint's load-balancing weight: 1/price², price = prompt + completion (USD per token).

    A free or unpriced endpoint (price 0 or unreadable) gets the weight of a price of one
    millionth of a dollar per million tokens: first almost always, as the cheapest.
    """
    try:
        price = Decimal(endpoint.pricing.prompt) + Decimal(endpoint.pricing.completion)
    except InvalidOperation:
        price = Decimal(0)
    price = max(price, Decimal("1e-12"))
    return float(1 / (price * price))


def weighted_order(endpoints: list[Endpoint], rng: random.Random) -> list[Endpoint]:
    """``endpoints`` in a random order where each next one is drawn with probability ∝ :func:`price_weight`.

    Sampling without replacement (Efraimidis-Spirakis keys ``u ** (1 / w)``): the first
    endpoint is ``e`` with probability ``w(e) / Σ w``.
    """
    weights = [price_weight(e) for e in endpoints]
    top = max(weights, default=1.0)
    keyed = [(rng.random() ** (top / w), i) for i, w in enumerate(weights)]
    return [endpoints[i] for _, i in sorted(keyed, reverse=True)]


def route(
    endpoints: list[Endpoint],
    prefs: ProviderPreferences | None,
    needed: set[str],
    rng: random.Random,
    outage: Collection[str] = (),
) -> list[Endpoint]:
    """Order the endpoints to try for one request.

    Args:
        endpoints: the model's endpoints.
        prefs: the request's ``provider`` object, or ``None``.
        needed: parameters the request uses (:func:`request_parameters`).
        rng: seeded generator for load balancing.
        outage: tags of endpoints that failed within :data:`OUTAGE_WINDOW_S` (tried last
            by default routing).

    Returns:
        Endpoints in the order to try; never empty.

    Raises:
        NoRoute: when the filters leave nothing.
    """
    prefs = prefs or ProviderPreferences()
    pool = list(endpoints)
    if prefs.only:
        kept = [e for e in pool if any(matches(x, e) for x in prefs.only)]
        if not kept:
            raise NoRoute("no_endpoints", ["allowed_providers"], _affected(pool),
                          f"provider.only {prefs.only} matches no endpoint of this model")
        pool = kept
    if prefs.ignore:
        kept = [e for e in pool if not any(matches(x, e) for x in prefs.ignore)]
        if not kept:
            raise NoRoute("no_endpoints", ["allowed_providers"], _affected(pool),
                          f"provider.ignore {prefs.ignore} leaves no endpoint")
        pool = kept
    if prefs.quantizations:
        wanted: set[str] = set()
        for q in prefs.quantizations:
            wanted |= _QUANT_FAMILY.get(q.lower(), {q.lower()})
        kept = [e for e in pool if (e.quantization or "unknown") in wanted]
        if not kept:
            raise NoRoute("constraint_filtered", ["quantization"], _affected(pool),
                          f"no endpoint has quantization in {prefs.quantizations}")
        pool = kept
    if prefs.require_parameters:
        kept = [e for e in pool if needed <= set(e.supported_parameters)]
        if not kept:
            missing = sorted({p for e in pool for p in needed - set(e.supported_parameters)})
            raise NoRoute("constraint_filtered", ["require_parameters"], _affected(pool),
                          f"no endpoint supports every requested parameter (missing: {', '.join(missing)})")
        pool = kept
    if ("tools" in needed or "tool_choice" in needed) and not any("tools" in e.supported_parameters for e in pool):
        raise NoRoute("no_endpoints", ["require_parameters"], _affected(pool),
                      "no endpoint left supports tool use", message=NO_TOOL_ENDPOINT)
    fallbacks = prefs.allow_fallbacks is not False
    if prefs.order:
        ordered: list[Endpoint] = []
        for entry in prefs.order:
            ordered.extend(e for e in pool if matches(entry, e) and e not in ordered)
        rest = [e for e in pool if e not in ordered]
        rng.shuffle(rest)
        candidates = ordered + rest if fallbacks else ordered
        if not candidates:
            raise NoRoute("no_endpoints", ["allowed_providers"], _affected(pool),
                          f"provider.order {prefs.order} matches no allowed endpoint and fallbacks are off")
        return candidates
    pool = weighted_order(pool, rng)
    tools = "tools" in needed or "tool_choice" in needed
    pool.sort(key=lambda e: (e.tag in outage,  # sort is stable: the weighted order holds within each group
                             tools and "tools" not in e.supported_parameters,
                             "response_format" in needed and "response_format" not in e.supported_parameters))
    return pool if fallbacks else pool[:1]
