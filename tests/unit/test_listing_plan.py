"""Real listing shapes through the plan and the prober: dropped entries, degraded marks, the pin, the budget."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from reverie_canary.client.reply import Reply
from reverie_canary.services.discovery.core import facts_lines, listing_facts, plan, same_names, split
from reverie_canary.services.prober.core import pin_check, run_probe
from reverie_canary.services.prober.evidence import cases_of
from reverie_canary.services.prober.http import budget_parameter, request_body
from reverie_canary.services.prober.prompts import PREFIX, build
from reverie_canary.services.prober.recorded import check_lines
from reverie_canary.shared.contract import codec
from reverie_canary.shared.contract.events import MAX_DROPPED, DroppedEndpoint, Endpoint, ProbeTask
from reverie_canary.shared.runtime.listing import read_listing

START = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
LISTINGS = Path(__file__).resolve().parents[1] / "data" / "listings"


def listing(name: str):
    return read_listing((LISTINGS / name).read_bytes())


def make(name: str, **kw):
    read = listing(name)
    return plan(model="m/x", cycle_no=7, start=START, window_s=600, endpoints=read.endpoints, kinds=["ttft", "echo"],
                languages=["en"], controls={}, dropped=read.dropped, **kw)


def test_a_listing_with_bad_entries_plans_the_good_ones_and_names_the_rest():
    """The plan probes the five usable endpoints and carries the four dropped entries, in listing order."""
    event, tasks = make("one_bad_entry.json")
    assert {t.provider for t in tasks} == {"deepinfra/fp8", "novita", "lambda/fp8", "parasail/fp8", "together"}
    assert [(d.index, d.reason) for d in event.dropped] == [(2, "no_tag"), (5, "bad_tag"), (6, "duplicate_tag"),
                                                            (7, "not_an_object")]
    assert event.dropped_cut == 0 and event.listed == 5
    assert codec.ENDPOINTS_OR_CLOSE.decode(codec.encode(event)) == event


def test_more_dropped_entries_than_the_bound_are_counted():
    """Forty bad entries: sixteen named, twenty-four counted; every part of a split listing repeats them."""
    dropped = [DroppedEndpoint(index=i, reason="no_tag") for i in range(40)]
    read = listing("current_fast_pair.json")
    event, _ = plan(model="m/x", cycle_no=7, start=START, window_s=600, endpoints=read.endpoints, kinds=["echo"],
                    languages=["en"], controls={}, dropped=dropped)
    assert len(event.dropped) == MAX_DROPPED and event.dropped_cut == 40 - MAX_DROPPED
    parts = split(event, budget=2500)
    assert len(parts) > 1 and all(p.dropped == event.dropped for p in parts)


def test_the_tasks_of_one_provider_with_two_endpoints_name_each_other():
    """``fireworks`` and ``fireworks/fast`` are both Fireworks: each task names the other; the rest none."""
    _, tasks = make("current_fast_pair.json")
    same = {t.provider: t.same_name for t in tasks}
    assert same == {"fireworks": ["fireworks/fast"], "fireworks/fast": ["fireworks"], "alibaba": [],
                    "morph/fast": []}
    assert same_names(listing("untagged_2025.json").endpoints) == {"deepinfra/bf16": ["deepinfra/fp8"],
                                                                    "deepinfra/fp8": ["deepinfra/bf16"]}


def test_the_cycle_facts_say_what_the_listing_did_not():
    """Degraded by the gateway, tags derived, entries dropped, fields unread, names shared: each one line."""
    current = listing("current_fast_pair.json")
    lines = facts_lines(listing_facts(current.endpoints, current.dropped))
    assert lines == [
        "the gateway itself marks degraded (status below 0), still probed: alibaba (status -2), "
        "morph/fast (status -2)",
        "pin check: the served-by name proves the provider, not which of its endpoints served: "
        "Fireworks (fireworks, fireworks/fast)",
    ]
    old = listing("untagged_2025.json")
    (derived,) = [line for line in facts_lines(listing_facts(old.endpoints)) if line.startswith("listing: no tag")]
    assert derived == ("listing: no tag listed, derived from its provider name: chutes; its provider name and "
                       "quantization: deepinfra/bf16; its provider name and quantization: deepinfra/fp8; "
                       "its provider name: novita")
    bad = listing("one_bad_entry.json")
    dropped_line = facts_lines(listing_facts(bad.endpoints, bad.dropped))[0]
    assert dropped_line == ("listing: 4 entries dropped, not probed: #2 'Unknown | acme/chat-1' no_tag; "
                            "#5 'Evil | acme/chat-1' bad_tag; #6 'DeepInfra | acme/chat-1 (again)' duplicate_tag; "
                            "#7 not_an_object")
    assert not listing_facts(listing("completion_tokens_only.json").endpoints)  # a clean listing says nothing


# -- the pin check ---------------------------------------------------------------


def test_the_pin_check_says_what_the_served_by_name_proves():
    """Another name: violated; the same name, alone: proven (nothing to add); shared: the provider only."""
    violated = pin_check("fireworks", "Fireworks", "Alibaba")
    assert (violated.outcome, violated.reason) == ("inconclusive", "pin_violated")
    assert pin_check("fireworks", "Fireworks", " fireworks ") is None
    shared = pin_check("fireworks/fast", "Fireworks", "Fireworks", ["fireworks"])
    assert (shared.outcome, shared.reason) == ("not_applicable", "pin_endpoint_unproven")
    assert shared.evidence["proves"] == "provider" and shared.evidence["cannot_tell"] == ["fireworks/fast",
                                                                                         "fireworks"]
    for name, served, why in (("Fireworks", None, "the reply named no provider"),
                              ("", "Fireworks", "the listing gave the endpoint no provider name")):
        unknown = pin_check("fireworks", name, served)
        assert (unknown.outcome, unknown.reason, unknown.evidence["why"]) == ("not_applicable", "pin_unverifiable",
                                                                              why)


def _task(provider: str, same_name: list[str], provider_name: str = "Fireworks") -> ProbeTask:
    return ProbeTask(at=START, task_id=f"t-{provider}", model="m/x", provider=provider, provider_name=provider_name,
                     kind="ttft", language="en", cycle="c", deadline=START + timedelta(minutes=10),
                     supported_parameters=["max_tokens"], same_name=same_name)


async def _probe(task: ProbeTask, served_by: str | None):
    reply = Reply(text=f"{PREFIX}Mira lifts the lantern.{PREFIX} The storm is close.", finish_reason="stop",
                  http_status=200, ttft_ms=120.0, total_ms=400.0, served_by=served_by)

    async def send(t, probe):
        return reply

    return await run_probe(task, send, lambda: START, max_tokens=256, ttft_threshold_s=10.0, confirmations=2,
                           prober="test")


async def test_a_probe_of_one_of_two_same_named_endpoints_keeps_its_outcome_and_says_what_is_unproven():
    """A passing reply from Fireworks for ``fireworks/fast``: pass, with the pin check's caveat among the checks."""
    result = await _probe(_task("fireworks/fast", ["fireworks"]), "Fireworks")
    assert (result.outcome, result.reason) == ("pass", "")
    (pin,) = [c for c in result.checks if c.check == "pin"]
    assert pin.reason == "pin_endpoint_unproven"
    alone = await _probe(_task("alibaba", [], provider_name="Alibaba"), "Alibaba")
    assert alone.outcome == "pass" and not [c for c in alone.checks if c.check == "pin"]
    elsewhere = await _probe(_task("fireworks/fast", ["fireworks"]), "Morph")
    assert (elsewhere.outcome, elsewhere.reason) == ("inconclusive", "pin_violated")


# -- the output budget's parameter -----------------------------------------------


@pytest.mark.parametrize("params, require, field", [
    (["max_tokens", "temperature"], True, "max_tokens"),
    (["max_tokens", "max_completion_tokens"], True, "max_tokens"),
    (["max_completion_tokens", "structured_outputs"], True, "max_completion_tokens"),
    (["max_completion_tokens"], False, "max_completion_tokens"),
    ([], True, "max_tokens"),  # an old listing that declares nothing: the gateway's default
    (["temperature", "structured_outputs"], False, "max_tokens"),  # dropped silently by the provider at worst
    (["temperature", "structured_outputs"], True, None),  # refused for it: no budget, the read caps bound it
])
def test_the_budget_goes_in_the_parameter_the_endpoint_advertises(params, require, field):
    """``max_completion_tokens`` only when the endpoint lists it and not ``max_tokens``; never an unlisted one
    with ``require_parameters``."""
    assert budget_parameter(params, require_parameters=require) == field


def test_an_endpoint_listing_only_max_completion_tokens_is_sent_that_with_require_parameters():
    """The OpenAI endpoint of the real shape gets ``max_completion_tokens``; the Azure one ``max_tokens``."""
    eps = {e.provider: e for e in listing("completion_tokens_only.json").endpoints}
    probe = build("structured", "en", max_tokens=320)
    openai = request_body("openai/o4-mini", "openai", probe, require_parameters=True,
                          supported_parameters=eps["openai"].supported_parameters)
    assert openai["max_completion_tokens"] == 320 and "max_tokens" not in openai
    assert openai["provider"]["require_parameters"] is True
    azure = request_body("openai/o4-mini", "azure", probe, require_parameters=True,
                         supported_parameters=eps["azure"].supported_parameters)
    assert azure["max_tokens"] == 320 and "max_completion_tokens" not in azure


async def test_canary_check_says_what_the_pin_cannot_prove_as_the_prober_did():
    """The evidence bundle carries the same-named endpoints: the rerun's checks are the prober's, pin included."""
    for provider_name, same_name, reason in (("Fireworks", ["fireworks"], "pin_endpoint_unproven"),
                                             ("", [], "pin_unverifiable")):
        result = await _probe(_task("fireworks/fast", same_name, provider_name=provider_name), "Fireworks")
        result = codec.PROBE_RESULT.decode(codec.encode(result))  # as the log holds it
        endpoint = Endpoint(provider="fireworks/fast", provider_name=provider_name)
        (case,) = cases_of(result, endpoint, same_name=same_name)
        (verdict,) = check_lines([json.dumps(case)])
        assert [(c["check"], c["outcome"], c["reason"]) for c in verdict["checks"]] == \
            [(c.check, c.outcome, c.reason) for c in result.checks]
        assert [c["reason"] for c in verdict["checks"] if c["check"] == "pin"] == [reason]
        assert (verdict["outcome"], result.outcome) == ("pass", "pass")
