"""The log scan's reader: a pull request answered 503 (no responders) is asked again, a few times at most."""

from __future__ import annotations

import asyncio

import pytest

from reverie_canary.shared.contract.errors import Transient
from reverie_canary.shared.runtime.eventlog import NO_RESPONDERS_RETRIES, STATUS_HEADER, _Reader


class Status:
    """A server status message (no data, a Status header), as nats-py hands it to the callback."""

    def __init__(self, code: str) -> None:
        self.data = b""
        self.headers = {STATUS_HEADER: code, "Description": "No Responders"}


def test_no_responders_is_asked_again_then_said_as_transient():
    """Seen in a three-node cluster right after a node came back: the scan's new consumer had no leader yet.
    A 503 asks again (bounded waits); past NO_RESPONDERS_RETRIES the scan ends with a Transient."""
    asked = []

    async def run() -> _Reader:
        reader = _Reader(lambda e: None, None, last=10, idle_s=1.0)

        async def ask() -> None:
            asked.append(1)

        reader.ask = ask
        for _ in range(NO_RESPONDERS_RETRIES):
            await reader.on_msg(Status("503"))
            assert reader.error is None and not reader.finished.is_set()
        await reader.on_msg(Status("503"))
        return reader

    reader = asyncio.run(run())
    assert len(asked) == NO_RESPONDERS_RETRIES
    assert isinstance(reader.error, Transient) and "503" in str(reader.error)
    with pytest.raises(Transient):
        raise reader.error
