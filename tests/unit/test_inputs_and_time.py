"""One list per fact: each service's input from one table (shared/contract/inputs.py), every UTC time through one formatter."""

from __future__ import annotations

import typing
from datetime import datetime, timedelta, timezone

import pytest

from reverie_canary.services.judge.core import JudgeInput
from reverie_canary.services.judge.replay import JUDGE_SUBJECTS
from reverie_canary.services.judge.service import JUDGE_INPUT
from reverie_canary.services.router.service import REBUILD_PREFIXES, ROUTER_FOLDS, ROUTER_INPUT
from reverie_canary.shared.contract import codec, inputs
from reverie_canary.shared.contract.errors import Undecodable
from reverie_canary.shared.contract.events import ProbeTask
from reverie_canary.shared.contract.timefmt import utc_text
from reverie_canary.shared.runtime import streams
from reverie_canary.shared.runtime.settings import Settings


def test_the_judges_consumer_replay_decoder_and_fold_all_come_from_its_row():
    """Consumer filter, replay subjects, decoder and fold union: the same families and types as READS['judge']."""
    spec = streams.judge_consumer(Settings.load(env={}))
    assert spec.filter_subjects == ["canary.discovery.>", "canary.results.>", "canary.ops.>", "canary.routing.>"]
    assert spec.filter_subjects == inputs.filters("judge")
    assert tuple(f.removesuffix(">") for f in spec.filter_subjects) == JUDGE_SUBJECTS
    assert set(typing.get_args(JudgeInput)) == set(inputs.folded("judge"))
    assert JUDGE_INPUT.name == "judge input"


def test_the_routers_consumer_decoder_fold_and_rebuild_come_from_its_row():
    """The router reads decisions, ops and discovery; its rebuild reads those plus its own answers."""
    spec = streams.router_consumer(Settings.load(env={}))
    assert spec.filter_subjects == ["canary.decisions.>", "canary.ops.>", "canary.discovery.>"]
    assert inputs.folded("router") == ROUTER_FOLDS
    assert (*inputs.prefixes("router"), "canary.answers.router.") == REBUILD_PREFIXES
    assert ROUTER_INPUT.name == "router input"


@pytest.mark.parametrize("service", sorted(inputs.READS))
def test_a_services_decoder_takes_everything_that_arrives_on_its_subjects_and_nothing_else(service):
    """Every type of codec.ORIGINS on the service's families decodes (to be skipped if not folded); a task does not."""
    from tests.unit.test_subjects_and_codec import _messages

    decoder = inputs.decoder(service)
    arriving = inputs.arriving(service)
    for message in _messages():
        data = codec.encode(message)
        if isinstance(message, arriving):
            assert decoder.decode(data) == message
        else:
            with pytest.raises(Undecodable):
                decoder.decode(data)
    assert ProbeTask not in arriving


def test_a_type_read_where_it_never_arrives_is_refused():
    """The table is checked against codec.ORIGINS: a service cannot be declared to read tasks on canary.results."""
    with pytest.raises(TypeError, match=r"x reads \['ProbeTask'\] on canary.results, where they never arrive"):
        inputs.check({"x": {"results": (ProbeTask,)}})
    inputs.check(inputs.READS)


def test_utc_text_writes_utc_with_z_to_the_chosen_precision():
    """Any zone is converted; seconds by default, microseconds for ids, a clock for the demo; None is 'missing'."""
    paris = timezone(timedelta(hours=2))
    at = datetime(2026, 6, 11, 20, 0, 5, 123456, tzinfo=paris)
    assert utc_text(at) == "2026-06-11T18:00:05Z"
    assert utc_text(at, precision="us") == "2026-06-11T18:00:05.123456Z"
    assert utc_text(at, precision="clock") == "18:00:05"
    assert utc_text(None) == "never" and utc_text(None, missing="-") == "-"
    with pytest.raises(ValueError, match="naive"):
        utc_text(datetime(2026, 6, 11, 18))
    with pytest.raises(ValueError, match="precision"):
        utc_text(at, precision="ms")
