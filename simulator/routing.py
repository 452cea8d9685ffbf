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
  false only those.  Without ``order``: a seeded shuffle, endpoints that
  support a requested ``response_format`` first (the soft preference), and
  with ``allow_fallbacks`` false only the first.

An empty result raises :class:`NoRoute` (404 with ``availability``, §6).
"""

from __future__ import annotations

import random
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


class NoRoute(CanaryError):
    """No endpoint is left to try.

    Attributes:
        code: ``availability.code``: ``no_endpoints`` or ``constraint_filtered``.
        excluded_by: ``availability.excluded_by`` values.
        affected: base slugs of the endpoints the last filter removed.
        detail: what removed them, for ``availability.constraint``.
    """

    def __init__(self, code: str, excluded_by: list[str], affected: list[str], detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.excluded_by = excluded_by
        self.affected = affected
        self.detail = detail


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


def route(
    endpoints: list[Endpoint],
    prefs: ProviderPreferences | None,
    needed: set[str],
    rng: random.Random,
) -> list[Endpoint]:
    """Order the endpoints to try for one request.

    Args:
        endpoints: the model's endpoints.
        prefs: the request's ``provider`` object, or ``None``.
        needed: parameters the request uses (:func:`request_parameters`).
        rng: seeded generator for load balancing.

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
    rng.shuffle(pool)
    if "response_format" in needed:
        pool.sort(key=lambda e: "response_format" not in e.supported_parameters)
    return pool if fallbacks else pool[:1]
