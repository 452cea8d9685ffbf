"""The one-pass free-JSON check (bounds._within) agrees with the walk that names a breach."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.shared.contract.bounds import FREE_JSON, FreeJsonLimits, _walk, _within, check_free_json

SMALL = FreeJsonLimits(keys=4, depth=3, string=8, container=4, text=30, items=10)

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=6)
                      | st.dictionaries(st.text(max_size=10), inner, max_size=6), max_leaves=30)
mappings = st.dictionaries(st.text(max_size=10), values, max_size=6)


def _walk_passes(value, limits) -> bool:
    try:
        _walk(value, limits)
    except ValueError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(mappings)
def test_the_one_pass_check_says_within_exactly_when_the_walk_passes(value):
    """Property: on plain JSON, _within is True iff the naming walk raises nothing (small and default limits)."""
    for limits in (SMALL, FREE_JSON):
        assert _within(value, limits) == _walk_passes(value, limits)


def test_a_breach_is_still_named_by_the_walk():
    """A string above the bound inside nested evidence is refused with the walk's message."""
    value = {"a": {"b": ["x" * 401]}}
    assert not _within(value, FREE_JSON)
    try:
        check_free_json(value)
    except ValueError as exc:
        assert str(exc) == "a string of 401 characters (at most 400)"
    else:
        raise AssertionError("not refused")


def test_values_that_are_not_plain_json_go_to_the_walk():
    """A dict subclass, a tuple or a non-string key is not judged by the one pass (the walk decides)."""
    class Sub(dict):
        pass

    for value in ({"a": Sub(b=1)}, {"a": (1, 2)}, {1: "x"}):
        assert not _within(value, FREE_JSON)
        check_free_json(value)  # within every bound: the walk passes them as before
