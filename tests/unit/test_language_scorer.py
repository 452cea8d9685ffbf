"""The language check's one use of py3langid internals, pinned (issue 10, small ones).

``services/prober/checks/language.py`` scores a reply through ``_Scorer``: py3langid's byte
automaton and model arrays, reached through private names, so that each byte is walked once and a
reply's sentences share one pass.  ``benchmarks/checks_bench.py`` ("language scorer" rows) measures
it beside the public ``LanguageIdentifier.rank()``.  These tests fail when the library changes under
it: the fast path must still be taken, and must give the public API's answer.
"""

from __future__ import annotations

import pytest

from reverie_canary.services.prober.checks.language import DEFAULT_POLICY, LANGUAGES, _scorer
from tests.conftest import shared_path


def _sentences(lang: str, n: int = 12) -> list[str]:
    path = shared_path("data", "lang", "sentences", f"{lang}.txt")
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if len(line) >= 20][:n]


def test_the_fast_path_is_taken():
    """py3langid still has every private name the fast path reads (else every call falls back to rank())."""
    assert _scorer(DEFAULT_POLICY.label_set).fast is True


@pytest.mark.parametrize("lang", LANGUAGES)
def test_fast_path_ranks_as_the_public_api(lang):
    """On real sentences of each language, the fast scores equal ``LanguageIdentifier.rank()`` to 1e-3."""
    scorer = _scorer(DEFAULT_POLICY.label_set)
    sentences = _sentences(lang)
    assert sentences, f"no sentences for {lang}"
    for text in sentences:
        fast = dict(scorer.rank(text))
        public = dict(scorer.ident.rank(text))
        assert max(fast, key=fast.get) == max(public, key=public.get), text
        for label, p in public.items():
            assert fast.get(label, 0.0) == pytest.approx(p, abs=1e-3), (text, label)
