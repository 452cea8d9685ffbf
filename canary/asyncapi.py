"""The message contract as one AsyncAPI 3.0 document, generated from the code's own tables.

Nothing here is written by hand: the channels are the subject families of
:data:`reverie_canary.shared.contract.codec.ORIGINS` (which types may travel on each), the
payload schemas are the msgspec Structs' own (:data:`~reverie_canary.shared.contract.codec.WIRE_TYPES`),
who may publish is read from the shipped NATS authorization (``shared/nats/server.conf``),
who reads what from :data:`reverie_canary.shared.contract.inputs.READS` and the durable consumers
of :mod:`reverie_canary.shared.runtime.streams`, the streams and the KV bucket from the same
module at the default settings.  ``canary asyncapi`` prints it; the repository keeps the
generated file (``docs/asyncapi.json``) and a test fails when the two differ.

AsyncAPI 3.0.0: https://www.asyncapi.com/docs/reference/specification/v3.0.0 (one
``operations`` entry per user and action; ``x-canary-*`` extensions carry the streams,
consumers and permissions, which the specification has no object for).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

#: Where the document is kept in the repository (relative to its root).
DOCUMENT_PATH = "docs/asyncapi.json"


@dataclass(frozen=True)
class Channel:
    """One subject family: its AsyncAPI address, the subject pattern, what the parameters mean."""

    key: str
    address: str
    pattern: str
    parameters: dict[str, str]
    description: str


#: Subject families, in the order of docs/concepts/messages.md ("Subjects").  ``pattern`` is the NATS wildcard
#: form of ``address`` (each ``{parameter}`` one token), used to match the publish permissions.
CHANNELS: tuple[Channel, ...] = (
    Channel("discovery", "canary.discovery.{model}", "canary.discovery.*", {"model": "the model id, token-encoded"},
            "Discovery opens a cycle (EndpointsDiscovered, possibly in parts) and closes it (CycleClosed)."),
    Channel("tasks", "canary.tasks.{model}.{provider}", "canary.tasks.*.*",
            {"model": "the model id, token-encoded", "provider": "the provider slug, token-encoded"},
            "One probe for one provider (work queue: each task goes to one prober)."),
    Channel("results", "canary.results.{model}.{provider}", "canary.results.*.*",
            {"model": "the model id, token-encoded", "provider": "the provider slug, token-encoded"},
            "A probe's outcome, its checks and evidence."),
    Channel("verdicts", "canary.verdicts.{model}", "canary.verdicts.*", {"model": "the model id, token-encoded"},
            "The judge's verdict per provider when a cycle closes."),
    Channel("decisions", "canary.decisions.{model}.{provider}", "canary.decisions.*.*",
            {"model": "the model id, token-encoded", "provider": "the provider slug, token-encoded; * model-wide"},
            "The judge's decisions: suspend, recover, floor held, mode changed ..."),
    Channel("retest", "canary.retest.{model}", "canary.retest.*", {"model": "the model id, token-encoded"},
            "The judge asks discovery to probe one language of one provider again."),
    Channel("confirmations", "canary.confirmations.{model}.{provider}", "canary.confirmations.*.*",
            {"model": "the model id, token-encoded", "provider": "the provider slug, token-encoded"},
            "What a pinned confirmation probe said about a provider's live failures (LiveConfirmation: confirmed, "
            "not reproduced or inconclusive); a fact for operators that enters no verdict and no streak."),
    Channel("routing", "canary.routing.{model}", "canary.routing.*", {"model": "the model id, token-encoded"},
            "Every new ignore list of a model (also kept in the KV bucket)."),
    Channel("routing-kv", "$KV.canary-routing.{model}", "$KV.canary-routing.*",
            {"model": "the model id, token-encoded (the KV key)"},
            "The current ignore list of a model: what chat backends read."),
    Channel("ops", "canary.ops.{verb}", "canary.ops.*", {"verb": "override, unoverride, lift, mode or reload"},
            "Operator commands."),
    Channel("answers", "canary.answers.{service}.{commandId}", "canary.answers.*.*",
            {"service": "the service that owns the command", "commandId": "the command's id, token-encoded"},
            "The one answer to an operator command: CommandApplied or CommandRefused."),
    Channel("deadletter", "canary.deadletter.{service}", "canary.deadletter.*",
            {"service": "the service that refused the message"}, "Refused input with its reason."),
    Channel("notices-dead", "canary.notices.dead.{channel}", "canary.notices.dead.*",
            {"channel": "the notice channel's name"}, "A notice that exhausted its delivery schedule."),
    Channel("notices-resend", "canary.notices.resend", "canary.notices.resend", {},
            "An operator asks the notifier to deliver dead-lettered notices again."),
    Channel("notices-resent", "canary.notices.resent", "canary.notices.resent", {},
            "The notifier's answer to a resend."),
    Channel("served", "canary.served.{model}", "canary.served.*", {"model": "the model id, token-encoded"},
            "A chat backend's requests per provider over a period (counts only, never a prompt or a reply)."),
    Channel("live", "canary.live.{model}", "canary.live.*", {"model": "the model id, token-encoded"},
            "How a chat backend's replies fared over a period, per provider and outcome reason, as its reply guard "
            "judged them (LiveCounts: counts only, never a prompt, a reply, a user or a request id)."),
    Channel("cycles", "canary.cycles.sized", "canary.cycles.sized", {},
            "Discovery's sizing of a cycle of every model, before its tasks: the probes each prober runs at once, "
            "the expected wall time and whether the cycle fits its window (CycleSized)."),
)


def _family_types() -> dict[str, tuple[type, ...]]:
    from reverie_canary.shared.contract.codec import NOTICE_ORIGINS, ORIGINS, wire_types

    out = {key: wire_types(types) for key, types in ORIGINS.items() if key != "notices"}
    out["routing-kv"] = ORIGINS["routing"]
    for what, typ in NOTICE_ORIGINS.items():
        out[f"notices-{what}"] = (typ,)
    return out


# -- the shipped NATS authorization -----------------------------------------------------------

_USER = re.compile(r"\{\s*user:\s*([A-Za-z0-9_-]+)\s*,")
_ALLOW = re.compile(r"(publish|subscribe):\s*\{\s*allow:\s*\[([^\]]*)\]", re.S)


def nats_permissions(text: str | None = None) -> dict[str, dict[str, list[str]]]:
    """``{user: {"publish": [...], "subscribe": [...]}}`` of the shipped ``shared/nats/server.conf``.

    A user without a ``permissions`` block (admin) gets ``[">"]`` for both.  Only the
    ``allow`` lists are read: the shipped file has no ``deny``.

    Raises:
        ValueError: when the file holds a ``deny`` list (this reader would misstate it).
    """
    if text is None:
        from reverie_canary.shared.runtime.auth import server_config

        text = server_config().read_text(encoding="utf-8")
    body = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    if re.search(r"\bdeny\s*:", body):
        raise ValueError("server.conf has a deny list: nats_permissions reads allow lists only")
    starts = [(m.start(), m.group(1)) for m in _USER.finditer(body)]
    out: dict[str, dict[str, list[str]]] = {}
    for i, (start, user) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(body)
        block = body[start:end]
        perms = {"publish": [">"], "subscribe": [">"]} if "permissions" not in block else {"publish": [], "subscribe": []}
        for action, items in _ALLOW.findall(block):
            perms[action] = re.findall(r'"([^"]+)"', items)
        out[user] = perms
    return out


def overlaps(a: str, b: str) -> bool:
    """Whether some subject matches both NATS patterns ``a`` and ``b`` (``*`` one token, ``>`` the rest)."""
    x, y = a.split("."), b.split(".")
    for _i, (s, t) in enumerate(zip(x, y, strict=False)):
        if s == ">" or t == ">":
            return True
        if s != t and "*" not in (s, t):
            return False
    return len(x) == len(y) or (len(x) > len(y) and x[len(y)] == ">") or (len(y) > len(x) and y[len(x)] == ">")


# -- the document -----------------------------------------------------------------------------

def _readers() -> dict[str, list[str]]:
    """Channel key -> the users that read it (folds, work queues, the KV watchers)."""
    from reverie_canary.shared.contract.inputs import READS

    out: dict[str, list[str]] = {}
    for service, families in READS.items():
        for family in families:
            out.setdefault(family, []).append(service)
    extra = {"tasks": ["prober"], "retest": ["discovery"], "live": ["discovery"], "routing-kv": ["backend"],
             "notices-resend": ["notifier"], "notices-resent": ["operator"], "answers": ["operator"],
             "deadletter": ["operator"], "notices-dead": ["operator"],
             # the read-only dashboard (canary dashboard, canary incident) reads the log's families
             **{f: ["dashboard"] for f in ("discovery", "results", "verdicts", "decisions", "routing", "ops",
                                            "served", "live", "confirmations")}}
    for key, users in extra.items():
        out.setdefault(key, []).extend(u for u in users if u not in out.get(key, []))
    return {k: sorted(v) for k, v in out.items()}


def _streams() -> dict[str, Any]:
    from reverie_canary.shared.runtime.settings import Settings
    from reverie_canary.shared.runtime.streams import stream_configs

    out = {}
    for cfg in stream_configs(Settings()):
        out[cfg.name] = {"subjects": list(cfg.subjects or []), "maxAgeS": cfg.max_age, "maxBytes": cfg.max_bytes,
                         "retention": getattr(cfg.retention, "value", cfg.retention),
                         "description": cfg.description or ""}
    return out


def _consumers() -> dict[str, Any]:
    from reverie_canary.shared.runtime import streams
    from reverie_canary.shared.runtime.settings import Settings

    settings = Settings()
    out = {}
    for name in sorted(n for n in dir(streams) if n.endswith("_consumer")):
        spec = getattr(streams, name)(settings)
        out[spec.durable] = {"stream": spec.stream, "filterSubjects": list(spec.filter_subjects),
                             "maxAckPending": spec.max_ack_pending, "ackWaitS": spec.ack_wait_s,
                             "maxDeliver": spec.max_deliver, "deliverPolicy": spec.deliver_policy.value}
    return out


#: The NATS headers a service's message carries (shared/runtime/broker.py Publisher.publish).
MESSAGE_HEADERS: dict[str, Any] = {
    "type": "object",
    "description": "NATS headers of a published message. A KV entry (IgnoreSnapshot in canary-routing) has none.",
    "properties": {
        "Nats-Msg-Id": {"type": "string", "maxLength": 512,
                        "description": "The deterministic id JetStream deduplicates on (shared/contract/ids.py): a "
                                       "redelivered input publishes the same id."},
        "content-type": {"type": "string", "const": "application/json"},
        "traceparent": {"type": "string", "pattern": "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$",
                        "description": "W3C trace context of the span that published it, when traces are on "
                                       "(CANARY_TRACES, shared/runtime/tracing.py): one probe is one trace."},
        "tracestate": {"type": "string", "maxLength": 512, "description": "W3C trace state, with traceparent."},
    },
}


def document() -> dict[str, Any]:
    """The AsyncAPI 3.0.0 document of the whole message contract (a JSON-ready dict, stable order)."""
    from reverie_canary.shared.contract.codec import WIRE_TYPES, wire_types
    from reverie_canary.shared.contract.inputs import READS
    from reverie_canary.shared.contract.subjects import ROUTING_BUCKET
    from reverie_canary.shared.runtime.streams import ROUTING_HISTORY

    refs, schemas = msgspec.json.schema_components(WIRE_TYPES, ref_template="#/components/schemas/{name}")
    names = {t: ref["$ref"].rsplit("/", 1)[1] for t, ref in zip(WIRE_TYPES, refs, strict=False)}
    families = _family_types()
    permissions = nats_permissions()
    readers = _readers()

    schemas = {**schemas, "MessageHeaders": MESSAGE_HEADERS}
    messages = {names[t]: {"name": names[t], "title": names[t], "contentType": "application/json",
                           "headers": {"$ref": "#/components/schemas/MessageHeaders"},
                           "payload": {"$ref": f"#/components/schemas/{names[t]}"},
                           **({"summary": t.__doc__.strip().splitlines()[0]} if t.__doc__ else {})}
                for t in WIRE_TYPES}
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for ch in CHANNELS:
        types = families[ch.key]
        channels[ch.key] = {
            "address": ch.address,
            "description": ch.description,
            "messages": {names[t]: {"$ref": f"#/components/messages/{names[t]}"} for t in types},
            **({"parameters": {p: {"description": d} for p, d in ch.parameters.items()}} if ch.parameters else {}),
        }
        refs_of = [{"$ref": f"#/channels/{ch.key}/messages/{names[t]}"} for t in types]
        senders = sorted(user for user, perms in permissions.items()
                         if user != "admin" and any(overlaps(p, ch.pattern) for p in perms["publish"]))
        for user in senders:
            operations[f"{user}-sends-{ch.key}"] = {"action": "send", "channel": {"$ref": f"#/channels/{ch.key}"},
                                                    "messages": refs_of, "x-canary-user": user}
        for user in readers.get(ch.key, []):
            folded = wire_types(READS.get(user, {}).get(ch.key, types))  # a fold reads only some types of a family
            operations[f"{user}-receives-{ch.key}"] = {
                "action": "receive", "channel": {"$ref": f"#/channels/{ch.key}"},
                "messages": [{"$ref": f"#/channels/{ch.key}/messages/{names[t]}"} for t in folded],
                "x-canary-user": user}
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("reverie-canary")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        release = "0"
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "reverie-canary",
            "version": release,
            "description": ("Provider canary and route quarantine for LLM traffic through OpenRouter: the subjects, "
                            "who publishes and who reads them, the streams, the KV bucket and the NATS permissions. "
                            "Generated by `canary asyncapi` from the code; do not edit."),
        },
        "defaultContentType": "application/json",
        "servers": {"nats": {"host": "127.0.0.1:4222", "protocol": "nats",
                             "description": "NATS with JetStream; one user per service (shared/nats/server.conf)"}},
        "channels": channels,
        "operations": dict(sorted(operations.items())),
        "components": {"messages": messages, "schemas": schemas},
        "x-canary-streams": _streams(),
        "x-canary-consumers": _consumers(),
        "x-canary-kv": {ROUTING_BUCKET: {"keys": "model id, token-encoded", "value": "IgnoreSnapshot",
                                         "history": ROUTING_HISTORY, "writer": "router", "readers": ["backend"]}},
        "x-canary-permissions": permissions,
    }


def render() -> str:
    """The document as the repository keeps it: JSON, two-space indent, one trailing newline."""
    import json

    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
