"""The router's pure core: the three-layer merge (properties) and the exclusions file (tables).

docs/concepts/routing.md: layers combine by
union, each entry names every layer that ignores the provider, an entry past
its expiry never appears, and ``*`` applies to every model.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reverie_canary.services.router.core import Exclusion, Override, Suspension, merge, next_expiry, parse_exclusions
from reverie_canary.shared.contract.errors import ConfigError

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
MODELS = ["acme/chat-1", "meta-llama/llama-3.3-70b-instruct:free"]
PROVIDERS = ["a/fp8", "b/fp8", "c", "d/int4"]

minutes = st.integers(min_value=-600, max_value=600).map(lambda m: NOW + timedelta(minutes=m))
maybe_until = st.one_of(st.none(), minutes)
scopes = st.sampled_from([*MODELS, "*"])
texts = st.sampled_from(["incident 42", "ttft", "filter", "same"])

exclusions = st.builds(Exclusion, provider=st.sampled_from(PROVIDERS), model=scopes, reason=texts,
                       reference=st.sampled_from(["", "https://x/1"]), since=minutes, until=maybe_until)
overrides = st.builds(Override, provider=st.sampled_from(PROVIDERS), model=scopes, reason=texts,
                      actor=st.sampled_from(["alice", "bob"]), since=minutes, until=maybe_until,
                      reference=st.sampled_from(["", "INC-7"]))
suspensions = st.builds(Suspension, provider=st.sampled_from(PROVIDERS), model=st.sampled_from(MODELS),
                        reason=texts, since=minutes, until=minutes, decision_id=st.sampled_from(["d1", "d2"]))

layers = st.tuples(st.lists(exclusions, max_size=6), st.lists(overrides, max_size=6),
                   st.lists(suspensions, max_size=6))


def reasons_of(entries) -> Counter:
    """Every (provider, reason) pair of a merge, as a multiset."""
    return Counter((e.provider, r) for e in entries for r in e.reasons)


@given(layers, st.sampled_from(MODELS))
def test_layers_combine_by_union(data, model):
    """The merge of all layers holds exactly the reasons of each layer merged alone."""
    ex, ov, su = data
    together = merge(model, ex, ov, su, NOW)
    alone = merge(model, ex, [], [], NOW) + merge(model, [], ov, [], NOW) + merge(model, [], [], su, NOW)
    assert reasons_of(together) == reasons_of(alone)
    assert {e.provider for e in together} == {e.provider for e in alone}
    assert [e.provider for e in together] == sorted({e.provider for e in together})  # one entry per provider


@given(layers, st.sampled_from(MODELS), st.data())
def test_removing_an_override_never_removes_a_suspension_or_an_exclusion(data, model, draw):
    """Dropping any one override leaves every exclusion and suspension reason in place."""
    ex, ov, su = data
    if not ov:
        ov = [draw.draw(overrides)]
    index = draw.draw(st.integers(min_value=0, max_value=len(ov) - 1))
    before = merge(model, ex, ov, su, NOW)
    after = merge(model, ex, ov[:index] + ov[index + 1:], su, NOW)
    kept = Counter({k: n for k, n in reasons_of(before).items() if k[1].layer != "override"})
    assert kept == Counter({k: n for k, n in reasons_of(after).items() if k[1].layer != "override"})
    # and it removes at most that one override's reason
    assert sum(reasons_of(before).values()) - sum(reasons_of(after).values()) in (0, 1)


@given(layers, st.sampled_from(MODELS))
def test_expired_entries_never_appear_and_live_ones_always_do(data, model):
    """Every reason in the merge is live at now; every live record for the model is in it."""
    ex, ov, su = data
    entries = merge(model, ex, ov, su, NOW)
    for e in entries:
        assert e.reasons, e
        for r in e.reasons:
            assert r.until is None or r.until > NOW
            assert r.layer != "exclusion" or r.since <= NOW
        assert e.active_at(NOW) == e
    live = ([x for x in ex if x.model in (model, "*") and (x.until is None or x.until > NOW) and x.since <= NOW]
            + [o for o in ov if o.model in (model, "*") and (o.until is None or o.until > NOW)]
            + [s for s in su if s.model == model and s.until > NOW])
    assert sum(len(e.reasons) for e in entries) == len(live)
    assert {e.provider for e in entries} == {r.provider for r in live}


@given(layers, st.sampled_from(MODELS), st.randoms(use_true_random=False))
def test_merge_is_deterministic_and_independent_of_input_order(data, model, rnd):
    """Same inputs give the same entries, whatever order each layer's records come in."""
    ex, ov, su = data
    first = merge(model, ex, ov, su, NOW)
    assert merge(model, ex, ov, su, NOW) == first
    shuffled = [list(x) for x in (ex, ov, su)]
    for layer in shuffled:
        rnd.shuffle(layer)
    assert merge(model, *shuffled, NOW) == first


def test_same_reason_text_in_one_layer_sorts_the_same_in_any_order():
    """A * override and a model override with one reason text give one order (Redis hash order is arbitrary)."""
    a = Override(provider="a/fp8", model="*", reason="same", actor="bob", since=NOW - timedelta(hours=2))
    b = Override(provider="a/fp8", model=MODELS[0], reason="same", actor="alice", since=NOW - timedelta(hours=1))
    one = merge(MODELS[0], [], [a, b], [], NOW)
    other = merge(MODELS[0], [], [b, a], [], NOW)
    assert one == other
    assert [r.actor for r in one[0].reasons] == ["alice", "bob"]


@given(st.lists(st.one_of(exclusions, overrides), min_size=1, max_size=6),
       st.text(alphabet="abcdefghijklmnopqrstuvwxyz/-.:0123456789", min_size=1, max_size=30))
def test_star_scope_applies_to_every_model(records, model):
    """An exclusion or override scoped * ignores its provider for any model id at all."""
    star = [r.__class__(**{**{f: getattr(r, f) for f in r.__struct_fields__}, "model": "*",
                           "until": None, "since": NOW - timedelta(days=1)}) for r in records]
    ex = [r for r in star if isinstance(r, Exclusion)]
    ov = [r for r in star if isinstance(r, Override)]
    entries = merge(model, ex, ov, [], NOW)
    assert {e.provider for e in entries} == {r.provider for r in star}
    assert sum(len(e.reasons) for e in entries) == len(star)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(layers, st.sampled_from(MODELS), st.integers(min_value=0, max_value=10_000))
def test_merge_does_not_change_before_the_next_expiry(data, model, permille):
    """Between now and next_expiry the merge is constant, so the router need not look earlier."""
    ex, ov, su = data
    upcoming = next_expiry(ex, ov, su, NOW)
    if upcoming is None:
        later = NOW + timedelta(days=365)
    else:
        assert upcoming > NOW
        later = NOW + (upcoming - NOW) * (permille / 10_001)
    assert merge(model, ex, ov, su, later) == merge(model, ex, ov, su, NOW)


def test_an_override_at_its_expiry_is_gone_and_the_suspension_behind_it_stays():
    """At the override's until the entry keeps only the suspension; before it, both layers."""
    until = NOW + timedelta(minutes=5)
    o = Override(provider="a/fp8", model="*", reason="incident 42", actor="alice", since=NOW, until=until)
    s = Suspension(provider="a/fp8", model=MODELS[0], reason="ttft", since=NOW, until=NOW + timedelta(days=1),
                   decision_id="dec|1")
    before = merge(MODELS[0], [], [o], [s], until - timedelta(microseconds=1))
    at = merge(MODELS[0], [], [o], [s], until)
    assert [r.layer for r in before[0].reasons] == ["override", "suspension"]
    assert [r.layer for r in at[0].reasons] == ["suspension"]
    assert next_expiry([], [o], [s], NOW) == until


# -- the reviewed exclusions file --------------------------------------------------------------

GOOD = """\
# reviewed exclusions
[[exclusion]]
provider = "parasail/fp8"
model = "thedrummer/cydonia-24b-v4.1"
reason = "byte-level BPE markers in every streamed reply"
reference = "https://github.com/etherfunlab/eros-engine/issues/84"
date = 2026-06-11

[[exclusion]]
provider = "acme"
model = "*"
reason = "policy mismatch"
reference = "TICKET-9"
date = 2026-06-01T08:30:00Z
expires = 2026-12-01
"""


def test_a_valid_file_gives_each_entry_with_its_line_and_utc_dates():
    """Two entries: their header lines, dates at midnight UTC, the optional expiry."""
    entries = parse_exclusions(GOOD, "x.toml")
    assert [(e.provider, e.model, e.line) for e in entries] == [
        ("parasail/fp8", "thedrummer/cydonia-24b-v4.1", 2), ("acme", "*", 9)]
    assert entries[0].since == datetime(2026, 6, 11, tzinfo=timezone.utc) and entries[0].until is None
    assert entries[1].since == datetime(2026, 6, 1, 8, 30, tzinfo=timezone.utc)
    assert entries[1].until == datetime(2026, 12, 1, tzinfo=timezone.utc)


def _entry(**fields: str) -> str:
    base = {"provider": '"a/fp8"', "model": '"m/x"', "reason": '"slow"', "reference": '"T-1"',
            "date": "2026-06-11"}
    base.update(fields)
    return "[[exclusion]]\n" + "".join(f"{k} = {v}\n" for k, v in base.items() if v is not None)


FIRST = _entry(provider='"z/ok"')  # six lines, so the bad entry's header is line 8 (after a blank line)


@pytest.mark.parametrize(
    ("bad", "line", "words"),
    [
        (_entry(reason=None), 8, "missing ['reason']"),
        (_entry(reference=None, date=None), 8, "missing ['reference', 'date']"),
        (_entry(colour='"red"'), 8, "unknown keys ['colour']"),
        (_entry(date='"last tuesday"'), 8, "date must be a TOML date"),
        (_entry(date='"2026-06-11"'), 8, "date must be a TOML date"),
        (_entry(expires="12"), 8, "expires must be a TOML date"),
        (_entry(provider='"z/ok"'), 8, "duplicate of the exclusion at line 1"),
        (_entry(provider='" z/ok "'), 8, "duplicate of the exclusion at line 1"),
        (_entry(expires="2026-06-10"), 8, "expires must be after date"),
        (_entry(expires="2026-06-11"), 8, "expires must be after date"),
        (_entry(reason='"  "'), 8, "reason must be a non-empty string"),
        (_entry(model="3"), 8, "model must be a non-empty string"),
    ],
)
def test_a_bad_entry_is_refused_naming_the_file_and_its_line(bad, line, words):
    """Missing field, unknown key, bad date, duplicate, expiry before date: the error names the line."""
    with pytest.raises(ConfigError) as err:
        parse_exclusions(FIRST + "\n" + bad, "exclusions.toml")
    message = str(err.value)
    assert message.startswith(f"exclusions.toml:{line}: "), message
    assert words in message


def test_an_invalid_toml_date_is_refused_with_its_line():
    """A date TOML cannot read (month 13) is reported by the TOML parser with line and column."""
    with pytest.raises(ConfigError) as err:
        parse_exclusions(FIRST + "\n" + _entry(date="2026-13-01"), "exclusions.toml")
    assert "exclusions.toml: not valid TOML" in str(err.value)
    assert "line 13" in str(err.value)


def test_a_spaced_table_header_still_counts_for_line_numbers():
    """``[[ exclusion ]]`` is the same table in TOML; the line numbers must still match."""
    text = FIRST.replace("[[exclusion]]", "[[ exclusion ]]") + "\n" + _entry(reason=None)
    with pytest.raises(ConfigError, match=r"^x:8: exclusion is missing \['reason'\]"):
        parse_exclusions(text, "x")


def test_unknown_top_level_keys_are_refused():
    """Anything but [[exclusion]] tables at the top level is an error, not silently ignored."""
    with pytest.raises(ConfigError, match="unknown top-level keys \\['exclusions'\\]"):
        parse_exclusions('[[exclusions]]\nprovider = "a"\n', "x")


def test_an_exclusion_naming_a_provider_with_whitespace_is_refused_with_its_line():
    """provider = "bad provider" is no endpoint tag: refused, naming the line."""
    text = ('[[exclusion]]\nprovider = "bad provider"\nmodel = "*"\nreason = "r"\nreference = "x"\n'
            'date = 2026-01-01\n')
    with pytest.raises(ConfigError, match=r":1: provider 'bad provider' has whitespace"):
        parse_exclusions(text, "x.toml")
