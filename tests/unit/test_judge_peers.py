"""Facts across the providers of a model: the template kind (token counts) and slow_vs_peers (first-token medians)."""

from __future__ import annotations

import msgspec
import pytest

from reverie_canary.services.judge import gauges
from reverie_canary.services.judge.core import Folder, Policy, fold
from reverie_canary.services.judge.store import delta, record_from_parts, state_parts
from reverie_canary.shared.contract.commands import SetMode
from reverie_canary.shared.contract.events import CycleVerdict, Decision, ResultRef
from reverie_canary.shared.runtime.settings import Settings
from tests.judge_events import CYCLE, MODEL, T0, cycle_events, healthy

FLEET = ("a/fp8", "b/fp8", "c/fp8", "d/fp8", "e/fp8")
ENFORCE = Policy(mode="enforce")


def tokens(counts: dict[str, int], *, completion: dict[str, int] | None = None, kind: str = "ttft"):
    """Every provider's numbers for one kind: its prompt tokens (and completion tokens, 40 unless given)."""
    return {p: {kind: {"prompt_tokens": n, "completion_tokens": (completion or {}).get(p, 40)}}
            for p, n in counts.items()}


def cycle(n: int, numbers, outcomes=None, **kw):
    return cycle_events(n, outcomes or healthy(*FLEET), numbers=numbers, **kw)


def verdicts(effects) -> list[CycleVerdict]:
    return [e for e in effects if isinstance(e, CycleVerdict)]


def decisions(effects, *actions: str) -> list[Decision]:
    return [e for e in effects if isinstance(e, Decision) and (not actions or e.action in actions)]


def reasons_of(verdict: CycleVerdict) -> dict[str, list[str]]:
    return {v.provider: v.reasons for v in verdict.verdicts if v.reasons}


SAME = dict.fromkeys(FLEET, 380)
ODD = {**SAME, "c/fp8": 412}


# -- template: prompt tokens ----------------------------------------------------------------------


def test_a_prompt_token_count_unlike_the_peers_fails_the_template_kind_and_names_both_counts():
    """Four providers report 380 for the same prompt, one 412: it alone fails template, with both counts."""
    _, effects = fold(cycle(0, tokens(ODD)), ENFORCE)
    (verdict,) = verdicts(effects)
    assert reasons_of(verdict) == {"c/fp8": ["template:prompt_tokens_differ (ttft/en: prompt_tokens 412, peers 380)"]}
    failed = {v.provider: v.verdict for v in verdict.verdicts}
    assert failed == {"a/fp8": "passed", "b/fp8": "passed", "c/fp8": "failed", "d/fp8": "passed", "e/fp8": "passed"}
    (fact,) = [r for v in verdict.verdicts for r in v.results if r.kind == "template"]
    assert fact == ResultRef(task_id=fact.task_id, cycle=fact.cycle, kind="template", outcome="fail",
                             reason="prompt_tokens_differ")
    assert fact.task_id.split("|")[3:5] == ["c/fp8", "ttft"]  # the probe result that showed it: its evidence


def test_template_observes_by_default_even_on_a_model_in_enforce_until_switched():
    """Two failed template cycles: would_suspend under enforce; after `canary mode enforce --kind template`, suspend."""
    events = [*cycle(0, tokens(ODD)), *cycle(1, tokens(ODD))]
    _, effects = fold(events, ENFORCE)
    assert [(d.action, d.provider, d.mode) for d in decisions(effects)] == [("would_suspend", "c/fp8", "observe")]
    switch = SetMode(command_id="template-enforce", actor="ops", at=T0 + 2 * CYCLE, mode="enforce", model=MODEL,
                     kind="template", reason="template calls scored right")
    _, effects = fold([*events, switch, *cycle(2, tokens(ODD))], ENFORCE)
    assert [(d.action, d.provider) for d in decisions(effects, "suspend", "would_suspend")] == [
        ("would_suspend", "c/fp8"), ("suspend", "c/fp8")]


@pytest.mark.parametrize("counts", [
    {**SAME, "c/fp8": 382},  # within 2 tokens
    {**SAME, "c/fp8": 387},  # within 2 % of 380 (7.6 tokens)
])
def test_a_count_within_the_tolerance_is_the_same_count(counts):
    """A count within max(2 tokens, 2 %) of the peers' is no fact."""
    _, effects = fold(cycle(0, tokens(counts)), ENFORCE)
    assert reasons_of(verdicts(effects)[0]) == {}


def test_no_count_is_compared_without_a_majority_or_with_fewer_than_three_providers():
    """Counts with no majority (380, 380, 412, 412) say nothing; nor do two providers alone."""
    split = {"a/fp8": 380, "b/fp8": 380, "c/fp8": 412, "d/fp8": 412}
    _, effects = fold(cycle_events(0, healthy(*split), numbers=tokens(split)), ENFORCE)
    assert reasons_of(verdicts(effects)[0]) == {}
    pair = {"a/fp8": 380, "b/fp8": 412}
    _, effects = fold(cycle_events(0, healthy(*pair), numbers=tokens(pair)), ENFORCE)
    assert reasons_of(verdicts(effects)[0]) == {}


def test_counts_are_compared_only_within_one_language():
    """Language probes in different languages send different prompts: three pt at 300 and two ja at 520 are fine."""
    langs = {"a/fp8": "pt", "b/fp8": "pt", "c/fp8": "pt", "d/fp8": "ja", "e/fp8": "ja"}
    counts = {"a/fp8": 300, "b/fp8": 300, "c/fp8": 300, "d/fp8": 520, "e/fp8": 520}
    outcomes = {p: {"language": "pass"} for p in FLEET}
    _, effects = fold(cycle_events(0, outcomes, numbers=tokens(counts, kind="language"), languages=langs), ENFORCE)
    assert reasons_of(verdicts(effects)[0]) == {}
    counts["c/fp8"] = 360
    _, effects = fold(cycle_events(0, outcomes, numbers=tokens(counts, kind="language"), languages=langs), ENFORCE)
    assert reasons_of(verdicts(effects)[0]) == {
        "c/fp8": ["template:prompt_tokens_differ (language/pt: prompt_tokens 360, peers 300)"]}


def test_a_result_served_by_another_provider_is_not_its_count():
    """A pin_violated result's usage is another provider's: its count is not compared."""
    outcomes = healthy(*FLEET)
    outcomes["c/fp8"]["ttft"] = ("inconclusive", "pin_violated")
    _, effects = fold(cycle(0, tokens(ODD), outcomes), ENFORCE)
    assert "template" not in " ".join(r for rs in reasons_of(verdicts(effects)[0]).values() for r in rs)


# -- template: max_tokens -----------------------------------------------------------------------------


def test_completion_tokens_above_max_tokens_is_a_parameter_not_honoured():
    """One reply of 512 completion tokens for max_tokens 320: max_tokens_ignored, with both numbers."""
    _, effects = fold(cycle(0, tokens(SAME, completion={"e/fp8": 512})), ENFORCE)
    assert reasons_of(verdicts(effects)[0]) == {
        "e/fp8": ["template:max_tokens_ignored (completion_tokens 512 > max_tokens 320)"]}


def test_most_providers_above_max_tokens_is_the_models_accounting_not_theirs():
    """Three of five above max_tokens (reasoning counted, say): nobody is flagged."""
    over = dict.fromkeys(("a/fp8", "b/fp8", "c/fp8"), 400)
    _, effects = fold(cycle(0, tokens(SAME, completion=over)), ENFORCE)
    assert reasons_of(verdicts(effects)[0]) == {}


# -- the numbers stay out of the wire's references -------------------------------------------------


def test_the_numbers_are_never_copied_into_verdicts_or_decisions():
    """ResultRef has no numbers; a verdict's JSON holds no token count or first-token time."""
    assert not {"prompt_tokens", "ttft_ms", "completion_tokens"} & set(ResultRef.__struct_fields__)
    _, effects = fold([*cycle(0, tokens(ODD)), *cycle(1, tokens(ODD))], ENFORCE)
    for effect in effects:
        text = msgspec.json.encode(effect)
        assert b"prompt_tokens\"" not in text and b"ttft_ms" not in text


def test_the_open_cycle_numbers_survive_the_store_parts_and_go_at_the_close():
    """The store's short result form keeps the numbers of an open cycle; the close drops them."""
    events = cycle(0, tokens(ODD))
    states, _ = fold(events[:-1], ENFORCE)  # open: every result in, not closed
    state = states[MODEL]
    (open_cycle,) = state.open_cycles.values()
    assert len(open_cycle.measured) == 5 and {m.prompt_tokens for m in open_cycle.measured.values()} == {380, 412}
    assert record_from_parts(MODEL, state_parts(state)).state == state
    before, _ = fold(events[:-2], ENFORCE)
    sets, deletes = delta(before[MODEL], state)
    assert record_from_parts(MODEL, {**state_parts(before[MODEL]), **sets}).state == state and not deletes
    closed, _ = fold(events, ENFORCE)
    assert closed[MODEL].open_cycles == {}


def test_the_folder_gives_the_fold_states_with_numbers():
    """Folder (in place, copy on write) and fold agree on the open cycles' numbers and the facts."""
    events = [*cycle(0, tokens(ODD)), *cycle(1, tokens(SAME))[:-1]]
    folder = Folder(ENFORCE)
    out = [e for event in events for e in folder.apply(MODEL, event)]
    states, effects = fold(events, ENFORCE)
    assert folder.states == states and out == effects


# -- slow_vs_peers ----------------------------------------------------------------------------------------


def ttfts(ms: dict[str, float]):
    return {p: {"ttft": {"ttft_ms": v}} for p, v in ms.items()}


FAST = {"a/fp8": 400.0, "b/fp8": 500.0, "c/fp8": 600.0, "d/fp8": 700.0, "e/fp8": 650.0}
SLOW = {**FAST, "e/fp8": 4000.0}  # under the 10 s bar: passes the contract every cycle


def slow_log(cycles: int, ms=SLOW, fleet=FLEET):
    return [e for n in range(cycles) for e in cycle_events(n, healthy(*fleet), numbers=ttfts(
        {p: v for p, v in ms.items() if p in fleet}))]


def test_a_first_token_median_far_above_the_peers_is_slow_vs_peers():
    """Five providers, one at 4 s against 400-700 ms: slow_vs_peers once half the window is measured."""
    states, _ = fold(slow_log(2), ENFORCE)
    assert not any(ps.slow_vs_peers for ps in states[MODEL].providers.values())  # 2 of 6 cycles: too few
    states, _ = fold(slow_log(3), ENFORCE)
    state = states[MODEL]
    assert {n for n, ps in state.providers.items() if ps.slow_vs_peers} == {"e/fp8"}
    # medians 400 500 600 700 4000: centre 600, MAD 100 -> spread max(100, 200) = 200, bar 600 + 5 x 200
    assert (state.ttft_peer_median_ms, state.ttft_peer_bar_ms) == (600.0, 1600.0)
    assert state.providers["e/fp8"].ttft_median_ms == 4000.0


def test_slow_vs_peers_never_suspends_nor_would_suspend():
    """Twelve cycles slow_vs_peers in enforce mode: every verdict passed, no suspension decision of any kind."""
    states, effects = fold(slow_log(12), ENFORCE)
    assert states[MODEL].providers["e/fp8"].slow_vs_peers
    assert decisions(effects, "suspend", "would_suspend", "floor_held") == []
    assert {v.verdict for cv in verdicts(effects) for v in cv.verdicts} == {"passed"}
    assert states[MODEL].providers["e/fp8"].failed_streak == 0


def test_slow_vs_peers_needs_four_providers():
    """Three providers measured: no bar, nobody slow (the 10 s bar stays the only one)."""
    states, _ = fold(slow_log(6, fleet=("a/fp8", "b/fp8", "e/fp8")), ENFORCE)
    state = states[MODEL]
    assert state.ttft_peer_bar_ms is None and not any(ps.slow_vs_peers for ps in state.providers.values())


def test_peers_within_milliseconds_do_not_flag_the_slightly_slower_one():
    """Medians 500-503 ms and 560 ms: the spread floor (200 ms) keeps 560 under the bar."""
    close = {"a/fp8": 500.0, "b/fp8": 501.0, "c/fp8": 502.0, "d/fp8": 503.0, "e/fp8": 560.0}
    states, _ = fold(slow_log(6, close), ENFORCE)
    assert not any(ps.slow_vs_peers for ps in states[MODEL].providers.values())


def test_a_provider_that_speeds_up_leaves_slow_vs_peers_as_its_window_moves():
    """Slow for 4 cycles, then fast: once most of its last 6 cycles are fast, it is no longer slow."""
    log = slow_log(4) + [e for n in range(4, 9) for e in cycle_events(n, healthy(*FLEET), numbers=ttfts(FAST))]
    states, _ = fold(log, ENFORCE)
    assert not states[MODEL].providers["e/fp8"].slow_vs_peers
    assert len(states[MODEL].providers["e/fp8"].ttft_recent_ms) == 6


def test_the_gauges_show_slow_vs_peers_and_the_template_mode():
    """provider_slow_vs_peers is 1 for the slow one, 0 for the others; template's mode is exported (observe)."""
    states, _ = fold(slow_log(3), ENFORCE)
    samples = list(gauges.samples(states, ENFORCE, cycle_interval_s=1800))
    slow = {labels["provider"]: value for key, labels, value in samples if key == "provider_slow_vs_peers"}
    assert slow == {"a/fp8": 0, "b/fp8": 0, "c/fp8": 0, "d/fp8": 0, "e/fp8": 1}
    assert [(v) for k, labels, v in samples if k == "mode_enforce" and labels["kind"] == "template"] == [0]
    assert [v for k, _, v in samples if k == "model_ttft_peer_bar_ms"] == [1600.0]


def test_the_settings_carry_the_peer_thresholds_into_the_policy():
    """Policy.from_settings reads k, the window, the provider minimums and the template tolerance."""
    settings = Settings.load(env={}, slow_vs_peers_k=3.0, slow_vs_peers_window_cycles=4, template_tolerance_tokens=5)
    policy = Policy.from_settings(settings)
    assert (policy.slow_vs_peers_k, policy.slow_vs_peers_window_cycles, policy.slow_vs_peers_min_providers,
            policy.template_tolerance_tokens, policy.template_min_providers) == (3.0, 4, 4, 5, 3)
    assert policy.new_kind_modes["template"] == "observe"
    with pytest.raises(Exception, match="slow_vs_peers_min_providers"):
        Settings.load(env={}, slow_vs_peers_min_providers=2)
