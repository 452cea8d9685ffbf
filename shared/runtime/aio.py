"""Bounded waits and stops for asyncio code that never lose a cancellation.

Defined in :mod:`reverie_canary.client.aio` (the chat backend's client needs them
too, and it depends on nothing of the main distribution); re-exported here.
"""

from reverie_canary.client.aio import CANCEL_AGAIN_S, stop_task, wait_event  # noqa: F401  (re-exported)
