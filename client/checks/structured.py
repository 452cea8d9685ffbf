"""Structured output (docs/concepts/probes.md, the structured-output contract).

The probe asks for a small object with a fixed JSON schema
(``response_format`` json_schema, strict) and validates it with
``jsonschema``.  Rules (the field cases' decisions, which the tests replay; OpenRouter's
structured-outputs documentation):

- Under ``response_format`` (json_schema or json_object) the contract is raw
  JSON: a Markdown fence around it is ``fenced`` (FC-10), prose around it or
  malformed JSON is ``not_json`` (FC-07).
- Without ``response_format`` one enclosing fence is tolerated (FP-02).
- A finished generation that does not match the schema is ``schema_invalid``
  with the validator's path and message (FC-08, FC-12).
- A generation cut by ``length`` (a runaway value) is ``truncated``: it fails
  too; the budget is generous.  When reasoning spent the budget it is
  ``inconclusive`` / ``reasoning_budget`` instead (FP-07, FP-08: a probe-budget
  problem, not the provider's).
- No visible text and ``finish_reason: length``, or the client stopped
  waiting: ``not_applicable`` / ``no_text``; ``refusal.empty`` calls that reply
  inconclusive, and this check must not turn it into a failure.  Empty text that finished
  otherwise is ``not_json`` (and ``empty_output`` names the cause first).

``jsonschema`` is the client distribution's ``schema`` extra: it is imported when a schema is
validated, so the checks import without it (the schema check then says ``not_applicable`` /
``validator_missing``).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from reverie_canary.client.checks.refusal import spent_on_reasoning
from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

CHECK = "structured"
_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```\s*$", re.DOTALL)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str) -> Any:
    """Parse strict JSON (no ``NaN``/``Infinity``; no trailing data).

    Raises:
        ValueError (``json.JSONDecodeError``) when ``text`` is not one JSON value.
    """
    return json.loads(text, parse_constant=_reject_constant)


@lru_cache(maxsize=32)
def _validator(schema_json: str):
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validator_for(schema: dict[str, Any]):
    """Return a cached ``jsonschema`` validator (draft from ``$schema``, else the latest)."""
    return _validator(json.dumps(schema, sort_keys=True))


def _pointer(path) -> str:
    return "".join(f"/{str(p).replace('~', '~0').replace('/', '~1')}" for p in path)


def check_structured(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Parse the reply as JSON and validate it against ``spec.schema``.

    Args:
        reply: ``reply.text`` is the generation; ``reply.finish_reason``
            tells a cut generation from a finished one.
        spec: ``schema``, ``response_format``.

    Returns:
        ``CheckResult(check="structured")``: ``pass``; or ``fail`` with
        reason ``truncated`` / ``fenced`` / ``not_json`` (evidence: parser
        ``error``, ``first_bytes``) or ``schema_invalid`` (evidence: ``path``
        as a JSON pointer, ``message``, ``validator``, ``errors`` count);
        ``inconclusive`` / ``reasoning_budget`` for a generation cut because
        reasoning spent the budget; ``not_applicable`` / ``no_text`` for an
        empty reply cut at ``length`` or given up on.
    """
    text = reply.text.strip()
    if not text and (reply.finish_reason == "length" or reply.timed_out):
        return CheckResult(check=CHECK, outcome="not_applicable", reason="no_text",
                           evidence={"finish_reason": reply.finish_reason})
    if text and reply.finish_reason == "length" and spent_on_reasoning(reply):
        return CheckResult(check=CHECK, outcome="inconclusive", reason="reasoning_budget",
                           evidence={"first_bytes": text[:120], "finish_reason": "length"})
    fenced = _FENCE.match(text)
    strict = spec.response_format is not None
    body = fenced.group("body").strip() if (fenced and not strict) else text
    try:
        value = parse_json(body)
    except ValueError as exc:
        evidence = {"error": str(exc), "first_bytes": text[:120]}
        if reply.finish_reason == "length":
            return CheckResult(check=CHECK, outcome="fail", reason="truncated", evidence=evidence)
        if fenced:
            try:
                parse_json(fenced.group("body"))
                return CheckResult(check=CHECK, outcome="fail", reason="fenced", evidence=evidence)
            except ValueError:
                pass
        return CheckResult(check=CHECK, outcome="fail", reason="not_json", evidence=evidence)
    if reply.finish_reason == "length":
        return CheckResult(check=CHECK, outcome="fail", reason="truncated",
                           evidence={"first_bytes": text[:120], "finish_reason": "length"})
    if spec.schema is None:
        return CheckResult(check=CHECK, outcome="pass")
    try:
        import jsonschema
        import referencing.exceptions
    except ImportError:
        return CheckResult(check=CHECK, outcome="not_applicable", reason="validator_missing")
    try:
        validator = validator_for(spec.schema)
        errors = sorted(validator.iter_errors(value), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    except (jsonschema.exceptions.SchemaError, referencing.exceptions.Unresolvable) as exc:
        # the probe's own schema is broken: nothing can be concluded about the provider
        return CheckResult(check=CHECK, outcome="inconclusive", reason="bad_schema",
                           evidence={"error": str(exc).splitlines()[0][:300]})
    if errors:
        first = errors[0]
        return CheckResult(check=CHECK, outcome="fail", reason="schema_invalid",
                           evidence={"path": _pointer(first.absolute_path), "message": first.message,
                                     "validator": first.validator, "errors": len(errors)})
    return CheckResult(check=CHECK, outcome="pass")
