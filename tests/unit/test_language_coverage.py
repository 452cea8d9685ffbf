"""The bound on the time to detect a one-language defect: every language of every provider
is probed at least once in every ``language_coverage_cycles`` consecutive cycles."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.services.discovery.core import Coverage, CoverageError, coverage, languages_for, plan
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.contract.events import PROBE_KINDS, Endpoint
from reverie_canary.shared.runtime.settings import LANGUAGES, Settings

START = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
#: A fleet of real-looking tags (the offsets of the rotation come from them).
FLEET = [Endpoint(provider=tag, provider_name=tag.split("/")[0].title()) for tag in (
    "deepinfra/fp8", "novita/fp8", "together", "fireworks", "parasail/fp8", "gmicloud/fp8", "lambda/fp8",
    "baseten/fp8", "atlas-cloud/fp8", "saltmarsh/fp8", "tidewater/fp8", "quietharbor/bf16", "ctl/filter")]


def _language_tasks(cycle_no: int, **kw) -> dict[str, list[str]]:
    """Per provider, the languages of its language probes in cycle ``cycle_no``."""
    args = dict(model="m/x", cycle_no=cycle_no, start=START, window_s=600, endpoints=FLEET, kinds=PROBE_KINDS,
                languages=list(LANGUAGES), controls={"refusal": "ctl/filter"})
    args.update(kw)
    _, tasks = plan(**args)
    out: dict[str, list[str]] = {}
    for t in tasks:
        if t.kind == "language" and not t.control:
            out.setdefault(t.provider, []).append(t.language)
    return out


def test_the_default_is_four_cycles_and_five_languages_a_cycle_for_seventeen():
    """17 languages within 4 cycles: 5 language probes per provider per cycle, bound 4 cycles."""
    assert Settings.load(env={}).language_coverage_cycles == 4
    assert coverage(17) == Coverage(languages=17, coverage_cycles=4, per_cycle=5, rotated=5, bound_cycles=4)
    assert coverage(17, 9) == Coverage(languages=17, coverage_cycles=9, per_cycle=2, rotated=2, bound_cycles=9)
    assert coverage(17, 1).per_cycle == 17
    assert coverage(17, 4, 6) == Coverage(languages=17, coverage_cycles=4, per_cycle=6, rotated=6, bound_cycles=3)
    assert coverage(17, 4, 7, weighted=True) == Coverage(languages=17, coverage_cycles=4, per_cycle=7, rotated=5,
                                                         bound_cycles=4)


@pytest.mark.parametrize("bound", [1, 2, 3, 4, 6, 9, 17])
def test_every_language_of_every_provider_within_the_bound_over_many_cycles(bound):
    """For every provider of the fleet and every window of ``bound`` consecutive cycles: all 17 languages."""
    cycles = range(224_516_400, 224_516_400 + 3 * bound + 5)  # epoch cycle numbers, as discovery uses them
    plans = {n: _language_tasks(n, language_coverage_cycles=bound) for n in cycles}
    providers = {e.provider for e in FLEET} - {"ctl/filter"}
    for n in plans:
        assert set(plans[n]) == providers
        for langs in plans[n].values():
            assert len(langs) == len(set(langs)) == -(-17 // bound)
    for first in list(cycles)[: -bound + 1 or None]:
        for provider in providers:
            seen = {lang for n in range(first, first + bound) for lang in plans[n][provider]}
            assert seen == set(LANGUAGES), (bound, first, provider, set(LANGUAGES) - seen)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 17), st.integers(1, 17), st.integers(0, 10**9), st.text(min_size=1, max_size=30),
       st.lists(st.sampled_from(LANGUAGES), min_size=1, max_size=17, unique=True),
       st.dictionaries(st.sampled_from(LANGUAGES), st.floats(0.0, 1.0), max_size=17))
def test_the_bound_holds_for_any_provider_languages_and_weights(bound, extra, start, provider, languages, weights):
    """Whatever the tag, the languages, the weights and the probes above the least: the bound holds."""
    least = -(-len(languages) // bound)
    weighted = any(w > 0 and lang in languages for lang, w in weights.items())
    per_cycle = min(len(languages), least + extra) if weighted else min(len(languages), least + extra - 1)
    if weighted and per_cycle <= least:
        with pytest.raises(CoverageError):
            coverage(len(languages), bound, per_cycle, weighted=True)
        return
    cov = coverage(len(languages), bound, per_cycle, weighted=weighted)
    assert cov.bound_cycles <= bound
    seen: set[str] = set()
    for n in range(start, start + cov.bound_cycles):
        chosen = languages_for(languages, cov, n, provider, weights)
        assert len(chosen) == len(set(chosen)) == per_cycle and set(chosen) <= set(languages)
        seen |= set(chosen)
    assert seen == set(languages)


def test_weighted_languages_get_the_probes_above_the_bound_in_proportion_to_traffic():
    """pt 60 %, en 30 %, es 10 %: the two probes above the five a cycle go to them about so, the bound kept."""
    weights = {"pt": 0.6, "en": 0.3, "es": 0.1}
    counts: Counter[str] = Counter()
    cycles = range(1000, 1800)
    plans = {n: _language_tasks(n, languages_per_cycle=6, language_weights=weights) for n in cycles}
    for _n, by_provider in plans.items():
        langs = by_provider["deepinfra/fp8"]
        assert len(langs) == len(set(langs)) == 6
        counts.update(langs)
    total = sum(counts.values())
    # rotation alone: 5 / 17 of cycles for each language; the weights add to pt > en > es > any other
    assert counts["pt"] > counts["en"] > counts["es"] > max(counts[lang] for lang in LANGUAGES if lang not in weights)
    unweighted = [counts[lang] for lang in LANGUAGES if lang not in weights]
    assert max(unweighted) - min(unweighted) <= 2 * len(cycles) // 17  # the rotation's share each, no more
    assert total == 6 * len(cycles)
    for first in range(1000, 1796):  # and still every language every 4 cycles
        seen = {lang for n in range(first, first + 4) for lang in plans[n]["deepinfra/fp8"]}
        assert seen == set(LANGUAGES)


def test_the_plan_is_deterministic_and_says_its_bound():
    """Same inputs, same plan; the event carries the bound and the probes per cycle (what status shows)."""
    args = dict(model="m/x", cycle_no=77, start=START, window_s=600, endpoints=FLEET, kinds=PROBE_KINDS,
                languages=list(LANGUAGES), controls={}, languages_per_cycle=7, language_weights={"pt": 2, "ja": 1})
    event, tasks = plan(**args)
    assert plan(**args) == (event, tasks)
    assert (event.language_coverage_cycles, event.languages_per_cycle) == (4, 7)
    event, _ = plan(**{**args, "kinds": ["ttft"], "language_weights": None})
    assert (event.language_coverage_cycles, event.languages_per_cycle) == (0, 0)  # no language probe: not said


def test_settings_that_cannot_keep_the_bound_are_refused_with_what_to_change():
    """Too few probes for the bound, weights with nothing to share, unknown languages: one clear error each."""
    with pytest.raises(ConfigError, match="languages_per_cycle 2 cannot probe 17 languages within "
                                          "language_coverage_cycles 4: it needs 5"):
        Settings.load(env={"CANARY_LANGUAGES_PER_CYCLE": "2"})
    with pytest.raises(ConfigError, match="set languages_per_cycle above 5"):
        Settings.load(env={"CANARY_LANGUAGE_WEIGHTS": "pt=0.5,en=0.5"})
    with pytest.raises(ConfigError, match="language_weights: languages not configured"):
        Settings.load(env={"CANARY_LANGUAGES": "en,pt", "CANARY_LANGUAGE_WEIGHTS": "ja=1",
                           "CANARY_LANGUAGES_PER_CYCLE": "2", "CANARY_LANGUAGE_COVERAGE_CYCLES": "2"})
    with pytest.raises(ConfigError, match="language_coverage_cycles must be >= 1"):
        Settings.load(env={"CANARY_LANGUAGE_COVERAGE_CYCLES": "0"})
    s = Settings.load(env={"CANARY_LANGUAGE_WEIGHTS": "pt=0.4,en=0.3", "CANARY_LANGUAGES_PER_CYCLE": "7"})
    assert s.language_weights == {"pt": 0.4, "en": 0.3} and s.languages_per_cycle == 7
    assert Settings.load(env={"CANARY_LANGUAGE_COVERAGE_CYCLES": "9"}).language_coverage_cycles == 9


def test_status_says_the_bound_discovery_planned():
    """``canary status`` (read model and header) says the bound of the last plan in the log, in cycles and time."""
    from reverie_canary.canary.cli_status import model_header
    from reverie_canary.services.dashboard.core import LogWindow, model_status
    from reverie_canary.services.judge.core import Policy

    event, _ = plan(model="m/x", cycle_no=77, start=START, window_s=600, endpoints=FLEET, kinds=PROBE_KINDS,
                    languages=list(LANGUAGES), controls={})
    window = LogWindow()
    window.add(event, 1)
    status = model_status("m/x", now=START, policy=Policy(mode="observe"), kinds=list(PROBE_KINDS), state=None,
                          snapshot=None, window=window.models["m/x"], cycle_interval_s=1800.0)
    assert (status.language_coverage_cycles, status.languages_per_cycle) == (4, 5)
    lines = [line.plain for line in model_header(status)]
    assert ("language coverage: every language of every provider probed at least once every 4 cycles (2 h); "
            "5 language probes per provider a cycle, retests on top") in lines
    empty = model_status("m/x", now=START, policy=Policy(mode="observe"), kinds=list(PROBE_KINDS), state=None,
                         snapshot=None, window=None, cycle_interval_s=1800.0)
    assert empty.language_coverage_cycles is None
    assert not any(line.plain.startswith("language coverage") for line in model_header(empty))
