"""The language check's one use of py3langid internals, pinned (small ones).

``client/checks/language.py`` scores a reply through ``_Scorer``: py3langid's byte
automaton and model arrays, reached through private names, so that each byte is walked once and a
reply's sentences share one pass.  ``benchmarks/checks_bench.py`` ("language scorer" rows) measures
it beside the public ``LanguageIdentifier.rank()``.  These tests fail when the library changes under
it: the fast path must still be taken, and must give the public API's answer; the vectorised walk
(``_Scorer.score_texts``) must still rest on what it assumes of the automaton (its depth, a byte that
resets it) and give what scoring each sentence alone gives.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from reverie_canary.client.checks.language import (
    _WORD,
    AUTOMATON_DEPTH,
    DEFAULT_POLICY,
    LANGUAGES,
    SEPARATOR,
    _letters_in,
    _scorer,
)
from reverie_canary.client.checks.text import count_letters
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


def test_the_automaton_is_as_deep_as_the_vectorised_walk_assumes():
    """``AUTOMATON_DEPTH`` is the longest path from the automaton's root (breadth-first over its table).

    ``_Scorer.score_texts`` finds each byte's state from the ``AUTOMATON_DEPTH`` bytes that end there;
    a deeper automaton (a model with longer n-grams) would make it wrong.
    """
    scorer = _scorer(DEFAULT_POLICY.label_set)
    table = np.asarray(scorer.ident.tk_nextmove).reshape(-1, 256)
    rows = np.asarray(scorer.ident.tk_row, dtype=np.intp)
    depth = np.full(len(rows), -1, dtype=np.int16)
    depth[0] = 0
    frontier, level = np.zeros(1, dtype=np.intp), 0
    while frontier.size:
        reached = np.unique(table[rows[frontier]])
        reached = reached[depth[reached] < 0]
        level += 1
        depth[reached] = level
        frontier = reached.astype(np.intp)
    assert (depth >= 0).all()
    assert int(depth.max()) == AUTOMATON_DEPTH


def test_the_separator_takes_every_state_back_to_the_root():
    """``SEPARATOR`` leads every state to the root, which has no feature: the batch path is taken."""
    scorer = _scorer(DEFAULT_POLICY.label_set)
    table = np.asarray(scorer.ident.tk_nextmove).reshape(-1, 256)
    rows = np.asarray(scorer.ident.tk_row, dtype=np.intp)
    assert set(np.unique(table[rows, SEPARATOR]).tolist()) == {0}
    assert scorer.ident.tk_output[0] < 0
    assert scorer.batch is True


def _one_by_one(scorer, texts):
    parts = [scorer.features(text) for text in texts]
    return [scorer.probabilities(*part) for part in parts], scorer.combined(parts)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_score_texts_equals_scoring_each_sentence_alone(lang):
    """The vectorised walk gives each sentence's and the whole reply's probabilities, as one by one."""
    scorer = _scorer(DEFAULT_POLICY.label_set)
    sentences = _sentences(lang, 40)
    for start in range(0, len(sentences), 8):
        texts = sentences[start:start + 8]
        texts = [texts[0].upper(), *texts[1:]]  # py3langid lowercases a text that is all upper case, per text
        each, whole = scorer.score_texts(texts)
        alone, combined = _one_by_one(scorer, texts)
        assert each.shape == (len(texts), len(scorer.classes))
        for row, expected in zip(each, alone, strict=False):
            assert row.argmax() == expected.argmax()
            assert row == pytest.approx(expected, abs=1e-4)
        assert whole.argmax() == combined.argmax()
        assert whole == pytest.approx(combined, abs=1e-4)


def test_score_texts_on_texts_without_features_and_random_bytes():
    """Empty texts, texts with no feature, and random text score as one by one (uniform where nothing is seen)."""
    scorer = _scorer(DEFAULT_POLICY.label_set)
    rng = random.Random(13)
    alphabet = "abcdeéèñçßøあ中ягґ한ا .,'\n\x00\U0001f600"
    cases = [[""], ["", ""], ["\x00\x00"], ["Olá", ""], ["", "Bonjour à tous"]]
    cases += [["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))) for _ in range(rng.randint(1, 6))]
              for _ in range(200)]
    for texts in cases:
        each, whole = scorer.score_texts(texts)
        alone, combined = _one_by_one(scorer, texts)
        assert each == pytest.approx(np.array(alone), abs=1e-4), texts
        assert whole == pytest.approx(combined, abs=1e-4), texts


def test_letters_from_words_equal_count_letters():
    """``_letters_in`` (letters from the words already found) is ``count_letters`` on real and random text."""
    rng = random.Random(7)
    alphabet = "ab'’ _-1٣²½éあ中\u0301\u200d\U0001d400x."
    texts = [line for lang in LANGUAGES for line in _sentences(lang, 40)]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    for text in texts:
        assert _letters_in(_WORD.findall(text)) == count_letters(text), text
