"""The quality feed and the positive controls per cycle (services/dashboard/feed.py), over the judge's own fold.

Events go through the judge (its verdicts and decisions join the window as the
log would hold them); the feed is checked against the judge's state and against
its committed OpenAPI document.
"""

from __future__ import annotations

import json
from datetime import timedelta

import msgspec
import pytest

from reverie_canary.client.served import ServedCounts
from reverie_canary.services.dashboard import feed as feeds
from reverie_canary.services.dashboard import openapi
from reverie_canary.services.dashboard.core import model_status, to_json
from reverie_canary.shared.contract.events import EndpointsDiscovered
from tests.judge_events import MODEL, T0, cycle_events, healthy
from tests.unit.test_dashboard_pages import ENFORCE, FLEET, KINDS, observe, snapshot

CONTROL = "control-filter/strict"


def control_cycles():
    """Five cycles of FLEET with a refusal control: failed, passed, missing, not planned, transport error."""
    plans = [{CONTROL: {"refusal": "fail"}}, {CONTROL: {"refusal": "pass"}}, {CONTROL: {"refusal": "fail"}}, None,
             {CONTROL: {"refusal": ("transport_error", "http_503")}}]
    events = []
    for n, controls in enumerate(plans):
        missing = {(CONTROL, "refusal")} if n == 2 else set()
        events += cycle_events(n, healthy(*FLEET), controls=controls, missing=missing)
    return events


def test_each_cycle_of_a_control_is_failed_passed_or_not_probed_as_the_judge_saw_it():
    """Per cycle: fail -> failed, pass -> passed (the judge's unproven), no result / not planned / transport error ->
    not probed; the cycles since the last failure count back from the newest."""
    state, window = observe(control_cycles())
    (row,) = feeds.control_rows(window.models[MODEL], {"refusal": CONTROL})
    assert (row.kind, row.provider) == ("refusal", CONTROL)
    assert [c.result for c in row.cells] == ["failed", "passed", "not_probed", "not_probed", "not_probed"]
    assert [c.outcome for c in row.cells] == ["fail", "pass", "missing", "not_planned", "transport_error"]
    assert [c.letter for c in row.cells] == ["F", "P", "N", "N", "N"]
    assert row.cells[4].reason == "http_503" and "transport error" in row.cells[4].label
    assert (row.last, row.last_cycle_no, row.cycles_without_failure) == ("not_probed", 4, 4)
    # the judge marks a kind unproven exactly when its control passed
    for facts in window.models[MODEL].cycles.values():
        cell = row.cell(facts.cycle)
        assert ("refusal" in facts.verdict.unproven) == (cell.result == "passed"), cell
    (short,) = feeds.control_rows(window.models[MODEL], {"refusal": CONTROL}, cycles=2)
    assert [c.cycle_no for c in short.cells] == [3, 4] and short.cycles_without_failure == 4


def test_the_control_series_say_the_last_result_and_the_cycles_without_failure():
    """control_result is 1 for the last cycle's result only; a failure in the newest cycle resets the count to 0."""
    state, window = observe(control_cycles())
    samples = list(feeds.control_samples(MODEL, feeds.control_rows(window.models[MODEL], {"refusal": CONTROL})))
    values = {(key, labels.get("result")): value for key, labels, value in samples}
    assert values == {("control_cycles_without_failure", None): 4.0, ("control_result", "failed"): 0.0,
                      ("control_result", "passed"): 0.0, ("control_result", "not_probed"): 1.0}
    state, window = observe(control_cycles() + cycle_events(5, healthy(*FLEET), controls={CONTROL: {"refusal": "fail"}}))
    (row,) = feeds.control_rows(window.models[MODEL], {"refusal": CONTROL})
    assert (row.last, row.cycles_without_failure) == ("failed", 0)


def test_a_control_that_discovery_plans_but_the_settings_do_not_name_is_shown_too():
    """The plan's control probes name their kind and host: a kind is never left out for want of a setting."""
    state, window = observe(control_cycles())
    (row,) = feeds.control_rows(window.models[MODEL], {})
    assert row.provider == CONTROL and row.last == "not_probed"
    assert feeds.control_rows(None, {"refusal": CONTROL})[0].cells == []


def feed_events():
    """Three cycles: b fails structured then is not probed for it; quantizations listed; a backend's counts."""
    events = []
    for n in range(3):
        out = healthy(*FLEET)
        if n == 1:
            out["b/fp8"]["structured"] = ("fail", "schema_invalid")
        if n == 2:
            del out["b/fp8"]["structured"]
        cycle = cycle_events(n, out, controls={CONTROL: {"refusal": "fail"}})
        quant = {"a/fp8": "fp8", "b/fp8": "int4"}
        first = cycle[0]
        assert isinstance(first, EndpointsDiscovered)
        cycle[0] = msgspec.structs.replace(first, endpoints=[
            msgspec.structs.replace(e, quantization=quant.get(e.provider)) for e in first.endpoints])
        events += cycle
    at = max(e.at for e in events)
    events.append(ServedCounts(at=at, model=MODEL, since=at - timedelta(minutes=5), counts={"A/Fp8": 7, "c/fp8": 3}))
    return events


def the_feed(events, snap=None):
    state, window = observe(events)
    now = max(e.at for e in events) + timedelta(seconds=1)
    status = model_status(MODEL, now=now, policy=ENFORCE, kinds=KINDS, state=state, snapshot=snap,
                          window=window.models.get(MODEL), cycle_interval_s=1800.0, controls={"refusal": CONTROL})
    return state, window, feeds.feed_model(status, window.models.get(MODEL), kinds=KINDS,
                                           controls={"refusal": CONTROL})


def test_the_feed_gives_each_kinds_last_result_streaks_quantization_last_probe_and_served_counts():
    """b's structured result is the failure of cycle 1 (cycle 2 did not probe it); streaks are the judge's."""
    events = feed_events()
    state, window, model = the_feed(events)
    rows = {p.provider: p for p in model.providers}
    assert set(rows) == set(FLEET)  # the control is not a provider
    b = {k.kind: k for k in rows["b/fp8"].kinds}
    assert (b["structured"].outcome, b["structured"].reasons, b["structured"].cycle_no) == ("fail",
                                                                                          ["schema_invalid"], 1)
    assert (b["ttft"].outcome, b["ttft"].cycle_no) == ("pass", 2)
    assert [k.kind for k in rows["a/fp8"].kinds] == KINDS
    for name, p in rows.items():
        ps = state.providers[name]
        assert (p.streaks.failed, p.streaks.passed, p.streaks.frozen) == (ps.failed_streak, ps.passed_streak,
                                                                          ps.frozen_streak)
        last = max(e.at for e in events if getattr(e, "provider", None) == name and hasattr(e, "outcome"))
        assert p.last_probe_at == last
    assert (rows["a/fp8"].quantization, rows["b/fp8"].quantization, rows["c/fp8"].quantization) == ("fp8", "int4",
                                                                                                      None)
    assert rows["a/fp8"].served.requests == 7 and rows["c/fp8"].served.requests == 3  # a: by its display name
    assert rows["d/fp8"].served.requests == 0 and rows["a/fp8"].live is None
    assert [(c.kind, c.last, c.cycles_without_failure) for c in model.controls] == [("refusal", "failed", 0)]
    assert model.last_cycle_no == 2 and model.health.state in ("sees", "unknown")


def test_the_state_says_which_ignore_list_layer_it_comes_from():
    """An override makes a provider overridden from layer override; an active one has no layer."""
    events = feed_events()
    at = max(e.at for e in events)
    _, _, model = the_feed(events, snapshot(3, at, ("c/fp8", "override")))
    rows = {p.provider: p for p in model.providers}
    assert (rows["c/fp8"].state, rows["c/fp8"].layer, rows["c/fp8"].layers, rows["c/fp8"].ignored) == (
        "overridden", "override", ["override"], True)
    assert (rows["a/fp8"].state, rows["a/fp8"].layer, rows["a/fp8"].ignored) == ("active", None, False)
    assert model.ignore_list_version == 3


def test_an_unchanged_view_encodes_to_the_same_bytes_whatever_the_time_of_the_read():
    """No field holds the time of the answer: the same log read a minute later gives the same body (and ETag)."""
    events = feed_events()
    state, window = observe(events)
    bodies = []
    for later in (1, 61):
        now = max(e.at for e in events) + timedelta(seconds=later)
        status = model_status(MODEL, now=now, policy=ENFORCE, kinds=KINDS, state=state, snapshot=None,
                              window=window.models.get(MODEL), cycle_interval_s=1800.0)
        bodies.append(to_json(feeds.Feed(models=[feeds.feed_model(status, window.models.get(MODEL), kinds=KINDS,
                                                                    controls={})])))
    assert bodies[0] == bodies[1]


# -- the OpenAPI document ----------------------------------------------------------------------------------------


def validator_for(schema_name: str):
    """A JSON Schema validator of one component of the committed document (its $refs resolved inside it)."""
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    doc = json.loads(openapi.document_bytes())
    registry = Registry().with_resource("urn:feed", Resource.from_contents(doc, default_specification=DRAFT202012))
    schema = {"$ref": f"urn:feed#/components/schemas/{schema_name}"}
    return jsonschema.Draft202012Validator(schema, registry=registry,
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def test_the_committed_openapi_document_is_the_one_the_code_builds_and_is_valid_openapi():
    """A field added to a view without writing the document again fails here (the document cannot drift)."""
    from openapi_spec_validator import validate

    committed = openapi.document_bytes().decode("utf-8")
    assert committed == openapi.render(), "stale: python -m reverie_canary.services.dashboard.openapi --write"
    validate(json.loads(committed))
    assert openapi.main([]) == 0


def test_a_feed_validates_against_the_document_and_a_wrong_one_does_not():
    """The feed of three cycles matches the Feed schema; a state outside the enumeration is refused."""
    events = feed_events()
    _, _, model = the_feed(events, snapshot(3, max(e.at for e in events), ("c/fp8", "override")))
    body = json.loads(to_json(feeds.Feed(models=[model])))
    check = validator_for("Feed")
    check.validate(body)
    body["models"][0]["providers"][0]["state"] = "sleeping"
    with pytest.raises(Exception, match="sleeping"):
        check.validate(body)


def test_the_time_fields_are_utc_rfc3339():
    """Every time the feed gives ends in Z (UTC), as the document says."""
    events = feed_events()
    _, _, model = the_feed(events)
    text = to_json(feeds.Feed(models=[model])).decode()
    times = [v for k, v in json.loads(text)["models"][0]["providers"][0].items() if k in ("last_judged",
                                                                                         "last_probe_at")]
    assert len(times) == 2 and all(t.endswith("Z") and t > T0.isoformat()[:10] for t in times)
