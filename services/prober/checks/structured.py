"""Structured output (DESIGN.md, contract 3).

Under ``response_format`` json_schema the contract is raw JSON that validates:
prose around it or a Markdown fence fails (case FC-10); without
``response_format`` one enclosing fence is tolerated (FP-02).  Validation uses
``jsonschema`` (Draft 2020-12 unless the schema says otherwise).
"""

from __future__ import annotations

import json
import re

import jsonschema

from services.prober.reply import ProbeSpec, Reply
from shared.events import CheckResult

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(?P<body>.*)\n```\s*$", re.DOTALL)


def check_structured(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Parse the reply as JSON and validate it against ``spec.schema``."""
    name = "structured"
    text = reply.text.strip()
    if spec.response_format is None:
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group("body").strip()
    try:
        value = json.loads(text)
    except ValueError as exc:
        reason = "fenced" if _FENCE.match(text) else "not_json"
        if reply.finish_reason == "length":
            reason = "truncated"
        return CheckResult(check=name, outcome="fail", reason=reason,
                           evidence={"error": str(exc), "first_bytes": reply.text[:120]})
    if spec.schema is None:
        return CheckResult(check=name, outcome="pass")
    validator_cls = jsonschema.validators.validator_for(spec.schema)
    errors = sorted(validator_cls(spec.schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        return CheckResult(check=name, outcome="fail", reason="schema_invalid",
                           evidence={"path": "/".join(str(p) for p in first.absolute_path),
                                     "message": first.message, "errors": len(errors)})
    return CheckResult(check=name, outcome="pass")
