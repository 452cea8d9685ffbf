"""Subject names and KV keys: every one in the project is built here.

The reversible encoding of slugs into tokens (:func:`encode_token`), the routing
subject and the KV key live in the chat backend's client distribution
(:mod:`reverie_canary.client.subjects`), which both distributions share; they are
re-exported here so that services import every subject from one module
(docs/concepts/messages.md, "Subjects").
"""

from __future__ import annotations

from reverie_canary.client.subjects import (  # noqa: F401  (re-exported)
    PREFIX,
    ROUTING_BUCKET,
    SubjectError,
    decode_token,
    encode_token,
    kv_key,
    live,
    routing,
    served,
)

# -- subjects -----------------------------------------------------------------

def discovery(model: str) -> str:
    """``canary.discovery.<model>``: EndpointsDiscovered, CycleClosed and CycleUnplanned."""
    return f"{PREFIX}.discovery.{encode_token(model)}"


def task(model: str, provider: str) -> str:
    """``canary.tasks.<model>.<provider>``: ProbeTask on the work-queue stream."""
    return f"{PREFIX}.tasks.{encode_token(model)}.{encode_token(provider)}"


def result(model: str, provider: str) -> str:
    """``canary.results.<model>.<provider>``: ProbeResult."""
    return f"{PREFIX}.results.{encode_token(model)}.{encode_token(provider)}"


def verdicts(model: str) -> str:
    """``canary.verdicts.<model>``: the judge's CycleVerdict."""
    return f"{PREFIX}.verdicts.{encode_token(model)}"


def confirmation(model: str, provider: str) -> str:
    """``canary.confirmations.<model>.<provider>``: the judge's LiveConfirmation (a confirmation probe's answer)."""
    return f"{PREFIX}.confirmations.{encode_token(model)}.{encode_token(provider)}"


def decision(model: str, provider: str | None) -> str:
    """``canary.decisions.<model>.<provider>``; model-wide decisions use ``*``."""
    return f"{PREFIX}.decisions.{encode_token(model)}.{encode_token(provider or '*')}"


def retest(model: str) -> str:
    """``canary.retest.<model>``: the judge's RetestRequested for discovery."""
    return f"{PREFIX}.retest.{encode_token(model)}"


def ops(verb: str) -> str:
    """``canary.ops.<verb>``: operator commands (publish permission: operators)."""
    return f"{PREFIX}.ops.{encode_token(verb)}"


def router_event(model: str) -> str:
    """``canary.router.<model>``: router facts (override applied, exclusions loaded)."""
    return f"{PREFIX}.router.{encode_token(model)}"


def answer(service: str, command_id: str) -> str:
    """``canary.answers.<service>.<command id>``: a service's CommandApplied or CommandRefused.

    Only ``service``'s credential may publish on its own ``canary.answers.<service>.>``
    (``shared/nats/server.conf``).
    """
    return f"{PREFIX}.answers.{encode_token(service)}.{encode_token(command_id)}"


def answers_to(command_id: str) -> str:
    """The filter that matches the answer to ``command_id`` from whichever service owns it."""
    return f"{PREFIX}.answers.*.{encode_token(command_id)}"


def deadletter(service: str) -> str:
    """``canary.deadletter.<service>``: rejected input with its reason."""
    return f"{PREFIX}.deadletter.{encode_token(service)}"


def notice_dead(channel: str) -> str:
    """``canary.notices.dead.<channel>``: a notice that exhausted its delivery schedule."""
    return f"{PREFIX}.notices.dead.{encode_token(channel)}"


#: ``ResendNotices`` from operators; the notifier's ``NoticesResent`` answers on the next one.
NOTICES_RESEND = f"{PREFIX}.notices.resend"
NOTICES_RESENT = f"{PREFIX}.notices.resent"


def model_from_subject(subject: str, position: int = 2) -> str:
    """Decode the model token of a ``canary.<kind>.<model>...`` subject.

    Raises:
        SubjectError: when the subject has no such token.
    """
    parts = subject.split(".")
    if len(parts) <= position:
        raise SubjectError(f"subject {subject!r} has no token at {position}")
    return decode_token(parts[position])


ALL_DISCOVERY = f"{PREFIX}.discovery.>"
ALL_TASKS = f"{PREFIX}.tasks.>"
ALL_RESULTS = f"{PREFIX}.results.>"
ALL_VERDICTS = f"{PREFIX}.verdicts.>"
ALL_DECISIONS = f"{PREFIX}.decisions.>"
ALL_RETEST = f"{PREFIX}.retest.>"
#: The judge's LiveConfirmation: what a pinned confirmation probe said about live failures.
ALL_CONFIRMATIONS = f"{PREFIX}.confirmations.>"
ALL_ROUTING = f"{PREFIX}.routing.>"
ALL_OPS = f"{PREFIX}.ops.>"
ALL_ROUTER = f"{PREFIX}.router.>"
ALL_DEADLETTER = f"{PREFIX}.deadletter.>"
ALL_NOTICES = f"{PREFIX}.notices.>"
ALL_NOTICES_DEAD = f"{PREFIX}.notices.dead.>"
ALL_ANSWERS = f"{PREFIX}.answers.>"
#: Discovery's CycleSized: how many probes each cycle runs at once, and whether it fits its window.
CYCLES_SIZED = f"{PREFIX}.cycles.sized"
ALL_CYCLES = f"{PREFIX}.cycles.>"
#: Chat backends' ServedCounts (requests per provider: counts only, never text).
ALL_SERVED = f"{PREFIX}.served.>"
#: Chat backends' LiveCounts (replies per provider and outcome reason: counts only, never text).
ALL_LIVE = f"{PREFIX}.live.>"
