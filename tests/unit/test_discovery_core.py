"""Discovery's plan of a cycle: kinds, the language rotation, retests, positive controls."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from reverie_canary.services.discovery.core import cycle_start, plan, rotation
from reverie_canary.services.discovery.service import next_cycle
from reverie_canary.shared.contract.events import PROBE_KINDS, Endpoint
from reverie_canary.shared.runtime.settings import LANGUAGES

START = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
ENDPOINTS = [Endpoint(provider="b/fp8", provider_name="B"), Endpoint(provider="a/fp8", provider_name="A"),
             Endpoint(provider="ctl/filter", provider_name="Ctl")]


def make(**kw):
    args = dict(model="m/x", cycle_no=7, start=START, window_s=600, endpoints=ENDPOINTS, kinds=PROBE_KINDS,
                languages=list(LANGUAGES), language_coverage_cycles=9, controls={"refusal": "ctl/filter"})
    args.update(kw)
    return plan(**args)


@given(st.integers(1, 17), st.integers(0, 10_000), st.text(min_size=1, max_size=20))
def test_rotation_covers_every_language(per_cycle, start_cycle, provider):
    """Within ceil(17 / k) cycles a provider is probed in all 17 languages."""
    seen = set()
    cycles = -(-len(LANGUAGES) // per_cycle)
    for n in range(start_cycle, start_cycle + cycles):
        chosen = rotation(list(LANGUAGES), per_cycle, n, provider)
        assert len(chosen) == len(set(chosen)) == per_cycle
        seen |= set(chosen)
    assert seen == set(LANGUAGES)


def test_rotation_is_deterministic_and_spread_across_providers():
    """Same inputs, same languages; different providers start at different places."""
    assert rotation(list(LANGUAGES), 2, 5, "a/fp8") == rotation(list(LANGUAGES), 2, 5, "a/fp8")
    firsts = {rotation(list(LANGUAGES), 1, 5, f"p{i}/fp8")[0] for i in range(20)}
    assert len(firsts) > 5


def test_every_production_host_gets_every_kind_and_the_control_only_its_kind():
    """Each provider: one task per kind (language: per rotated language); the control: refusal only."""
    event, tasks = make()
    by_provider: dict[str, list[str]] = {}
    for t in tasks:
        by_provider.setdefault(t.provider, []).append(t.kind)
    for p in ("a/fp8", "b/fp8"):
        assert sorted(by_provider[p]) == sorted([k for k in PROBE_KINDS if k != "language"] + ["language"] * 2)
    assert by_provider["ctl/filter"] == ["refusal"]
    assert event.controls == {"refusal": "ctl/filter"}
    assert [p.control for p in event.planned if p.provider == "ctl/filter"] == [True]
    assert [e.provider for e in event.endpoints] == ["a/fp8", "b/fp8", "ctl/filter"]


def test_plan_and_tasks_agree_and_ids_are_unique():
    """The EndpointsDiscovered plan lists exactly the tasks published, with unique deterministic ids."""
    event, tasks = make()
    assert [p.task_id for p in event.planned] == [t.task_id for t in tasks]
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert make()[1] == tasks
    assert all(t.deadline == START + timedelta(seconds=600) == event.deadline for t in tasks)
    assert all(t.cycle == event.cycle for t in tasks)


def test_a_retest_adds_its_language_whatever_the_rotation():
    """The judge asked for pt again: pt is probed next cycle on top of the rotation."""
    rotated = rotation(list(LANGUAGES), 1, 7, "a/fp8")
    extra = next(lang for lang in LANGUAGES if lang not in rotated)
    _, tasks = make(language_coverage_cycles=17, retests=[("a/fp8", extra), ("a/fp8", extra), ("zz/none", "pt")])
    langs = [t.language for t in tasks if t.provider == "a/fp8" and t.kind == "language"]
    assert langs == [*rotated, extra]


def test_retests_are_capped_per_provider_and_take_turns():
    """Five languages asked again: two a cycle on top of the rotation, each in turn within three cycles."""
    rotated_any = {lang for n in (7, 8, 9) for lang in rotation(list(LANGUAGES), 1, n, "a/fp8")}
    asked = [lang for lang in LANGUAGES if lang not in rotated_any][:5]
    seen: set[str] = set()
    for cycle_no in (7, 8, 9):
        rotated = rotation(list(LANGUAGES), 1, cycle_no, "a/fp8")
        _, tasks = make(cycle_no=cycle_no, language_coverage_cycles=17, retests=[("a/fp8", lang) for lang in asked],
                        max_retests=2)
        langs = [t.language for t in tasks if t.provider == "a/fp8" and t.kind == "language"]
        assert langs[:1] == rotated and len(langs) == 3, langs
        assert set(langs[1:]) <= set(asked)
        seen |= set(langs[1:])
        # b/fp8 asked for nothing: the rotation alone
        assert len([t for t in tasks if t.provider == "b/fp8" and t.kind == "language"]) == 1
    assert seen == set(asked)  # every asked language had its turn within ceil(5 / 2) cycles


def test_a_retest_already_in_the_rotation_takes_no_slot():
    """A retest language the rotation probes anyway does not use one of the max_retests places."""
    rotated = rotation(list(LANGUAGES), 1, 7, "a/fp8")
    others = [lang for lang in LANGUAGES if lang not in rotated][:1]
    _, tasks = make(language_coverage_cycles=17, retests=[("a/fp8", rotated[0]), ("a/fp8", others[0])], max_retests=1)
    assert [t.language for t in tasks if t.provider == "a/fp8" and t.kind == "language"] == [*rotated, *others]


def test_no_retests_when_the_cap_is_zero():
    rotated = rotation(list(LANGUAGES), 1, 7, "a/fp8")
    _, tasks = make(language_coverage_cycles=17, retests=[("a/fp8", "es"), ("a/fp8", "pt")], max_retests=0)
    assert [t.language for t in tasks if t.provider == "a/fp8" and t.kind == "language"] == rotated


def test_language_tasks_are_published_first():
    """The longest probe (up to three tries) leads the queue; within a kind, providers keep their order."""
    event, tasks = make()
    kinds = [t.kind for t in tasks]
    first_other = next(i for i, k in enumerate(kinds) if k != "language")
    assert set(kinds[:first_other]) == {"language"} and "language" not in kinds[first_other:]
    assert [t.provider for t in tasks if t.kind == "ttft"] == ["a/fp8", "b/fp8"]
    assert [p.task_id for p in event.planned] == [t.task_id for t in tasks]


def test_a_control_missing_from_the_listing_is_skipped():
    """A configured control the gateway does not list this cycle plans nothing."""
    event, tasks = make(controls={"refusal": "gone/x"})
    assert event.controls == {}
    assert all(not t.control for t in tasks)


def test_cycle_numbers_and_joining_mid_cycle():
    """Cycles start at multiples of the interval; a start more than 10 % into the window waits for the next."""
    assert cycle_start(3, 1800) == datetime(1970, 1, 1, 1, 30, tzinfo=timezone.utc)
    assert next_cycle(1800 * 10 + 50, 1800, 600, last=-1) == 10
    assert next_cycle(1800 * 10 + 70, 1800, 600, last=-1) == 11
    assert next_cycle(1800 * 10 + 50, 1800, 600, last=10) == 11


TOOLED = [Endpoint(provider="t/fp8", provider_name="T", supported_parameters=["max_tokens", "tools", "tool_choice"]),
          Endpoint(provider="half/fp8", provider_name="Half", supported_parameters=["max_tokens", "tools"]),
          Endpoint(provider="old/fp8", provider_name="Old"),
          Endpoint(provider="ctl/tools", provider_name="Ctl",
                   supported_parameters=["max_tokens", "tools", "tool_choice"])]


def test_an_endpoint_that_advertises_tools_gets_every_variant_every_cycle_in_the_rotations_language():
    """tools + tool_choice listed: four tool tasks (call, call_stream, no_tool, second_turn), one language, ids apart."""
    for cycle_no in (7, 8):
        event, tasks = make(endpoints=TOOLED, cycle_no=cycle_no, controls={})
        tools = [t for t in tasks if t.provider == "t/fp8" and t.kind == "tools"]
        assert [t.variant for t in tools] == ["call", "call_stream", "no_tool", "second_turn"]
        ttft = next(t for t in tasks if t.provider == "t/fp8" and t.kind == "ttft")
        assert {t.language for t in tools} == {ttft.language}  # the rotation's first language
        assert [t.task_id.rsplit("|", 1)[1] for t in tools] == [t.variant for t in tools]
        planned = [(p.task_id, p.variant) for p in event.planned if p.kind == "tools" and p.provider == "t/fp8"]
        assert planned == [(t.task_id, t.variant) for t in tools]


def test_an_endpoint_that_does_not_declare_both_tool_parameters_gets_one_task_answered_not_applicable():
    """tools without tool_choice, or no parameters at all: one variant-less task, which the prober gates."""
    _, tasks = make(endpoints=TOOLED, controls={})
    for tag in ("half/fp8", "old/fp8"):
        [tools] = [t for t in tasks if t.provider == tag and t.kind == "tools"]
        assert tools.variant == "" and tools.task_id.endswith("|tools|" + tools.language)
    other = [t for t in tasks if t.kind != "tools"]
    assert {t.variant for t in other} == {""}


def test_a_tool_control_is_probed_on_every_variant():
    """A positive control of the tool probe gets the four variants, all marked control."""
    event, tasks = make(endpoints=TOOLED, controls={"tools": "ctl/tools"})
    control = [t for t in tasks if t.provider == "ctl/tools"]
    assert [(t.kind, t.variant, t.control) for t in control] == [
        ("tools", v, True) for v in ("call", "call_stream", "no_tool", "second_turn")]
    assert event.controls == {"tools": "ctl/tools"}
