"""The one table that turns what became of a message into its acknowledgement.

Every consumer of every service settles its messages here
(:class:`reverie_canary.shared.runtime.consumer.Consumer`); the error intents are the
contract's (:mod:`reverie_canary.shared.contract.errors`, "Errors say what to do"):

===================== ====================== ===================================================
raised while handling dead-letter reason     action
===================== ====================== ===================================================
nothing               --                     ``ack``
UnsupportedVersion    ``unsupported_version`` dead-letter, ``term``
Oversize              ``oversize``           dead-letter, ``term``
Undecodable           ``undecodable``        dead-letter, ``term``
TooLarge              ``too_large``          dead-letter, ``term``
Rejected              ``rejected``           dead-letter, ``term``
Transient             --                     ``nak`` after :func:`reverie_canary.shared.runtime.retry.redelivery_delay`;
                                             on the ``max_deliver``-th attempt dead-letter
                                             (``gave_up``) and ``term``
anything else         as Transient           the same, and the error is logged with its traceback
                                             (a bug: nothing is lost, nothing crashes)
===================== ====================== ===================================================

The first row whose type the error is an instance of applies (the kinds come before
their intent).  This module is pure: no NATS, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from reverie_canary.shared.contract.errors import (
    Oversize,
    Rejected,
    TooLarge,
    Transient,
    Undecodable,
    UnsupportedVersion,
)
from reverie_canary.shared.runtime import retry

Action = Literal["ack", "nak", "term"]

#: (error type, dead-letter reason) of every refusal, most specific first: terminated, never retried.
REFUSALS: tuple[tuple[type[Exception], str], ...] = (
    (UnsupportedVersion, "unsupported_version"),
    (Oversize, "oversize"),
    (Undecodable, "undecodable"),
    (TooLarge, "too_large"),
    (Rejected, "rejected"),
)
#: The dead-letter reason of a message that failed on its last allowed attempt.
GAVE_UP = "gave_up"
#: Every dead-letter reason a consumer gives: the ``reason`` values of ``canary_dead_letters_total``.
DEAD_LETTER_REASONS: tuple[str, ...] = (*(reason for _, reason in REFUSALS), GAVE_UP)
#: The ``outcome`` values of ``canary_messages_total``.
MESSAGE_OUTCOMES: tuple[Action, ...] = ("ack", "term", "nak")


@dataclass(frozen=True)
class Settlement:
    """What to do with one message.

    Attributes:
        action: ``ack``, ``nak`` (give it back to be delivered again after ``delay_s``) or ``term``.
        reason: the dead-letter reason when ``term`` (``None`` otherwise).
        delay_s: seconds before the redelivery of a ``nak``.
        bug: the error was none of the contract's intents (log it with its traceback).
    """

    action: Action
    reason: str | None = None
    delay_s: float | None = None
    bug: bool = False


ACK = Settlement("ack")


def refusal(exc: BaseException) -> str | None:
    """The dead-letter reason of a refused message (``None``: ``exc`` is no refusal)."""
    for kind, reason in REFUSALS:
        if isinstance(exc, kind):
            return reason
    return None


def settle(exc: BaseException | None, *, attempt: int, max_deliver: int, retry_delay_s: float) -> Settlement:
    """The settlement of a message whose handling raised ``exc`` (``None``: it was applied).

    Args:
        attempt: the how-many-th attempt at this message this was (its delivery count), from 1.
        max_deliver: attempts allowed in all (the consumer's ``max_deliver``).
        retry_delay_s: the base of the redelivery delay (``retry_delay_s`` setting).
    """
    if exc is None:
        return ACK
    reason = refusal(exc)
    if reason is not None:
        return Settlement("term", reason=reason)
    bug = not isinstance(exc, Transient)
    if attempt >= max_deliver:
        return Settlement("term", reason=GAVE_UP, bug=bug)
    return Settlement("nak", delay_s=retry.redelivery_delay(retry_delay_s, attempt), bug=bug)
