"""The in-place fold (``Folder``) is the pure fold: same states, same effects, same order; shared states stay untouched."""

from __future__ import annotations

import json
import random
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from reverie_canary.services.judge.core import Folder, Policy, fold
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.events import EndpointsDiscovered, ProbeResult
from tests.judge_events import MODEL, cycle_events, healthy
from tests.unit.test_judge_properties import FAST, logs, policies

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios" / "judge"


def folded(events, policy, *, share_every: int | None = None, rnd: random.Random | None = None):
    """Fold through a Folder; with ``share_every``, call share() at random points and check nothing shared changed."""
    folder = Folder(policy)
    effects = []
    shared: list[tuple[object, bytes]] = []
    for _i, event in enumerate(events):
        model = getattr(event, "model", None)
        if model is None:
            continue
        targets = sorted(set(folder.states) | set(policy.models)) if model == "*" else [model]
        for target in targets:
            effects += folder.apply(target, event)
        if share_every and rnd.random() < 1 / share_every:
            shared += [(state, msgspec.json.encode(state)) for state in folder.states.values()]
            folder.share()
    for state, encoded in shared:
        assert msgspec.json.encode(state) == encoded  # a state handed out before share() was never changed
    return folder.states, effects


@FAST
@given(logs(), policies, st.integers(1, 40), st.randoms(use_true_random=False))
def test_the_folder_folds_what_the_pure_fold_folds(events, policy, share_every, rnd):
    """Random logs (gaps, lifts, overrides, missing results): equal states and effects, batches or not."""
    expected = fold(events, policy)
    assert folded(events, policy) == expected
    assert folded(events, policy, share_every=share_every, rnd=rnd) == expected


def test_every_scenario_file_folds_the_same_in_place():
    """The hand-written scenarios, duplicates and all, through both folds."""
    for path in sorted(SCENARIOS.glob("*.jsonl")):
        events = [codec.LOG_EVENT.decode(line) for line in path.read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
        models = {e.model for e in events if getattr(e, "model", "*") != "*"}
        policy = Policy(mode="enforce", models=tuple(sorted(models)))
        assert folded(events, policy, share_every=3, rnd=random.Random(path.name)) == fold(events, policy), path.name


def test_a_listing_in_parts_and_results_of_several_models_interleaved():
    """Two models, one listed in two parts, results arriving between the parts and repeated: the same fold."""
    table = healthy(*(f"p{i}/x" for i in range(6)), kinds=("ttft", "structured", "language"))
    table["p0/x"]["ttft"] = ("fail", "ttft_exceeded")
    table["p1/x"]["language"] = ("fail", "language_switch")
    events = []
    for n in range(3):
        a = cycle_events(n, table)
        b = cycle_events(n, table, model="other/m")
        first, *results, close = a
        half = len(first.planned) // 2
        parts = [msgspec.structs.replace(first, planned=first.planned[:half], endpoints=first.endpoints[:3],
                                         part=0, parts=2),
                 msgspec.structs.replace(first, planned=first.planned[half:], endpoints=first.endpoints[3:],
                                         part=1, parts=2)]
        events += [parts[0], b[0], *results[:4], parts[1], *results[4:], *results[:2], *b[1:], close]
    rnd = random.Random(7)
    policy = Policy(mode="enforce")
    expected = fold(events, policy)
    assert any(isinstance(e, ProbeResult) for e in events) and any(isinstance(e, EndpointsDiscovered) for e in events)
    assert folded(events, policy) == expected
    for _ in range(5):
        assert folded(events, policy, share_every=4, rnd=rnd) == expected
    assert json.dumps(msgspec.to_builtins(expected[0][MODEL]))  # a real state, not an empty one
    assert expected[0][MODEL].providers["p0/x"].suspension is not None  # suspended after two failed cycles
