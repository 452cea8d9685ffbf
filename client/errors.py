"""The root of every error the project raises on purpose, in the light distribution both sides share.

The chat backend's client raises these, and the main distribution's wire contract
(``reverie_canary.shared.contract.errors``) derives its three intents from the same root,
so one ``except CanaryError`` covers every deliberate error of either distribution.
"""

from __future__ import annotations

from typing import Any


class CanaryError(Exception):
    """Root of every error the project raises on purpose.

    Args:
        message: what happened, for a human.
        **context: provider, subject, stream sequence ... for the log line.
    """

    def __init__(self, message: str = "", **context: Any) -> None:
        super().__init__(message)
        self.context = context
