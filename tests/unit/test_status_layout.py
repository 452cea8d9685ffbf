"""``canary status`` fits the terminal it prints in: 80 and 100 columns readable, ``--wide`` every column.

The view is the judge's own fold of a demo-like fleet (nine providers, five probe kinds,
two suspended, one frozen on 5xx), printed by the command's renderer on a rich console of
a fixed width, as a terminal of that size shows it.
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from rich.console import Console

from reverie_canary.canary.cli_status import STREAKS_LEGEND, render
from reverie_canary.services.dashboard.core import LogWindow, fleet_status, model_status
from reverie_canary.services.judge.core import Policy, fold
from tests.judge_events import CYCLE, MODEL, cycle_events, healthy

KINDS = ("ttft", "refusal", "structured", "language", "echo")
FLEET = ("atlas-cloud/fp8", "baseten/fp8", "deepinfra/fp8", "fireworks", "gmicloud/fp8", "lambda/fp8",
         "novita/fp8", "parasail/fp8", "together")
ENFORCE = Policy(mode="enforce", models=(MODEL,))


def demo_fleet():
    """Three cycles: baseten fails structured, lambda ttft (both suspended after two), atlas-cloud 5xx (frozen)."""
    states: dict = {}
    window = LogWindow()
    seq = 0
    events = []
    for n in range(3):
        out = healthy(*FLEET, kinds=KINDS)
        out["baseten/fp8"]["structured"] = ("fail", "schema_invalid")
        out["lambda/fp8"]["ttft"] = ("fail", "ttft_exceeded")
        out["atlas-cloud/fp8"]["refusal"] = ("transport_error", "http_503")
        events += cycle_events(n, out)
    for event in events:
        seq += 1
        window.add(event, seq)
        states, produced = fold([event], ENFORCE, states)
        for effect in produced:
            seq += 1
            window.add(effect, seq)
    now = max(e.at for e in events) + CYCLE / 10
    status = model_status(MODEL, now=now, policy=ENFORCE, kinds=list(KINDS), state=states.get(MODEL),
                          snapshot=None, window=window.models.get(MODEL), cycle_interval_s=1800.0)
    return fleet_status([status], now=now, window=window)


def printed(width: int, wide: bool = False) -> list[str]:
    out = StringIO()
    render(Console(file=out, width=width, soft_wrap=False, color_system=None), demo_fleet(), list(KINDS), wide=wide)
    return out.getvalue().splitlines()


def rows(lines: list[str]) -> dict[str, str]:
    """Each provider's row with the lines its cells wrapped onto (until the next provider's row)."""
    out: dict[str, str] = {}
    current = None
    for line in lines:
        first = line.split("│")[0].strip() if "│" in line else ""
        if first in FLEET:
            current = first
            out[current] = line
        elif current and "│" in line and not first:
            out[current] += " " + line
        else:
            current = None
    return {k: re.sub(r"[\s│]+", " ", v) for k, v in out.items()}


@pytest.mark.parametrize("width", [80, 100])
def test_at_80_and_100_columns_every_row_says_its_state_streaks_and_what_failed(width):
    """No line wider than the terminal, nothing cut to '…', each provider's state and failing kind readable."""
    lines = printed(width)
    assert all(len(line.rstrip()) <= width for line in lines), "\n".join(lines)
    assert not any("…" in line for line in lines), "\n".join(lines)
    got = rows(lines)
    assert set(got) == set(FLEET), "\n".join(lines)
    assert "suspended" in got["baseten/fp8"] and "structured FAIL schema_invalid" in got["baseten/fp8"]
    assert "suspended" in got["lambda/fp8"] and "ttft FAIL ttft_exceeded" in got["lambda/fp8"]
    assert "refusal transport http_503" in got["atlas-cloud/fp8"]
    assert "active" in got["fireworks"] and " pass" in got["fireworks"]
    assert any(STREAKS_LEGEND[:40] in " ".join(lines).replace("\n", " ") for _ in [0])


def test_wide_shows_a_column_per_probe_kind_and_the_utc_end():
    """--wide: the header names every kind; a suspension shows its end in UTC."""
    lines = printed(220, wide=True)
    header = next(line for line in lines if line.startswith("provider"))
    assert all(kind in header for kind in KINDS) and "last judged" in header
    assert "until 20" in rows(lines)["baseten/fp8"]


def test_the_sizing_line_is_not_the_first_line():
    """What is printed first is the model, never a line that reads like a log line ("cycle … sized")."""
    assert printed(100)[0].startswith(MODEL)
