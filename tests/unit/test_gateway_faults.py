"""``canary demo --gateway-fault``: the forms it takes and the switches it makes at cycle boundaries."""

from __future__ import annotations

import asyncio
import time

import pytest

from reverie_canary.simulator.faults import GatewayFault, drive, fault_at, parse_fault


@pytest.mark.parametrize("text, fault, status", [
    ("auth:3", GatewayFault("auth", 3, None), 401), ("credit:2", GatewayFault("credit", 2, None), 402),
    ("forbidden:1-1", GatewayFault("forbidden", 1, 1), 403), ("down:2-3", GatewayFault("down", 2, 3), None),
])
def test_the_forms_of_a_fault(text, fault, status):
    """KIND:N is from cycle N on, KIND:N-M cycles N to M; each kind has its answer (down: none, refused)."""
    parsed = parse_fault(text)
    assert parsed == fault and parsed.status == status and str(parsed) == text


@pytest.mark.parametrize("text", ["auth", "auth:0", "down:3-2", "teapot:3", "auth:3-", "auth:x", ""])
def test_a_bad_fault_is_refused_with_the_forms(text):
    """Anything else is refused, naming the forms that are accepted."""
    with pytest.raises(ValueError, match="auth:3|cycles count from 1"):
        parse_fault(text)


def test_the_first_fault_that_holds_in_a_cycle_wins():
    """credit:2-3 then down:3-4: cycle 3 is credit's, 4 down's, 5 none's."""
    faults = (parse_fault("credit:2-3"), parse_fault("down:3-4"))
    assert [str(f) if f else None for f in (fault_at(faults, n) for n in range(1, 6))] == [
        None, "credit:2-3", "credit:2-3", "down:3-4", None]


def test_the_driver_switches_once_per_change_and_stops_after_the_last():
    """down:2-3 and auth:5: on at 2, off at 4, auth at 5, and nothing after (auth lasts to the end)."""
    interval = 0.05
    first = int(time.time() // interval) + 1
    seen: list[str | None] = []

    async def first_cycle_no() -> int:
        return first

    async def switch(fault) -> None:
        seen.append(str(fault) if fault else None)

    asyncio.run(asyncio.wait_for(drive((parse_fault("down:2-3"), parse_fault("auth:5")), first_cycle_no,
                                       interval, switch), timeout=5))
    assert seen == ["down:2-3", None, "auth:5"]
    seen.clear()
    asyncio.run(asyncio.wait_for(drive((parse_fault("auth:1"),), first_cycle_no, interval, switch), timeout=5))
    assert seen == ["auth:1"]
