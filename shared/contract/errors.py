"""One root error and three intents, each mapped once to an ack action.

(docs/development.md, "Errors say what to do".)  The settle table,
:mod:`reverie_canary.shared.runtime.settle`, is the only place that turns them into
``ack`` / ``nak(delay)`` / ``term``.

- :class:`Undecodable`: bad bytes.  Terminate, dead-letter with the reason
  (its kinds :class:`UnsupportedVersion` and :class:`Oversize` say which).
- :class:`Rejected`: valid but refused (unauthorised, out of range, stale).
  Terminate and record with the reason.
- :class:`Transient`: Redis, HTTP or NATS hiccup.  Nack with a delay; the
  consumer's ``max_deliver`` bounds the retries, then it is dead-lettered.
"""

from __future__ import annotations

from reverie_canary.client.errors import CanaryError

__all__ = ["CanaryError", "ConfigError", "Oversize", "Rejected", "TooLarge", "Transient", "Undecodable",
           "UnsupportedVersion"]


class Undecodable(CanaryError):
    """The bytes are not a valid message of the expected type."""


class UnsupportedVersion(Undecodable):
    """A message of a schema version this code does not read (``v``); never read as another version."""


class Oversize(Undecodable):
    """A message larger than the bound every wire message keeps (``shared/contract/bounds.py``)."""


class Rejected(CanaryError):
    """A well-formed message that the service refuses to apply."""


class TooLarge(Rejected):
    """What a message would make is larger than the wire bound: refused, with the sizes, never sent half."""


class Transient(CanaryError):
    """A temporary failure of a dependency; retrying later may succeed."""


class ConfigError(CanaryError):
    """Settings, scenario or exclusions file is invalid; the service must not start."""
