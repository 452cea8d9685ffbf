"""Word salad, and every family's synthetic cases through the whole pipeline."""

from __future__ import annotations

import pytest

from reverie_canary.client.checks import evaluate
from reverie_canary.client.checks.salad import MIN_NOISE, assess_salad, noise
from reverie_canary.client.reply import Reply
from reverie_canary.services.prober.prompts import build
from tests.family_cases import CAUGHT, FAMILIES, TRAPS, caught, tripped

_CAUGHT = [(family, lang, text) for family, cases in CAUGHT.items() for lang, text in cases]
_TRAPS = [(family, lang, text) for family, cases in TRAPS.items() for lang, text in cases]


@pytest.mark.parametrize("family, lang, text", _CAUGHT)
def test_every_synthetic_defect_is_caught_with_its_reason(family, lang, text):
    """Through evaluate (the reason after precedence), each family's case fails with the family's reason."""
    assert caught(family, lang, text), (FAMILIES[family], text)


@pytest.mark.parametrize("family, lang, text", _TRAPS)
def test_no_trap_trips_its_family(family, lang, text):
    """The traps next to each family (names, quotes, code, prose words, real punctuation) are not reported."""
    assert not tripped(family, lang, text), (FAMILIES[family], text)


def test_every_family_has_cases_in_several_languages():
    """Several cases per family, in at least three languages, and traps for each."""
    for family in FAMILIES:
        assert len(CAUGHT[family]) >= 4 and len({lang for lang, _ in CAUGHT[family]}) >= 3, family
        assert len(TRAPS[family]) >= 3, family


# -- the salad measure ---------------------------------------------------------------------------


def test_noise_counts_backslashes_odd_runs_and_lone_separators():
    """Backslashes count one each; odd or doubled punctuation runs and lone separators one per run."""
    units, examples = noise("a \\ b ,, c || d , e . f")
    assert units == 5 and examples
    assert noise("«Bonjour !» dit-elle ; puis : « Viens... » — et rien.")[0] == 0


def test_the_evidence_says_why():
    """A salad reports its kind, its noise, its words and the density."""
    result = assess_salad("the, of \\ \\ and ing ,, tion the\\\\ a ly ness , , ment of the \\n\\n ed")
    assert result.reason == "word_salad" and result.evidence["kind"] == "noise"
    assert result.evidence["noise"] >= MIN_NOISE and result.evidence["density"] >= 0.1


def test_a_run_on_without_sentences_is_salad():
    """Sixty words or more with no sentence or clause mark at all: no sentence structure."""
    text = CAUGHT["salad"][9][1]
    result = assess_salad(text)
    assert result.evidence["kind"] == "run_on" and result.evidence["words"] >= 60
    assert assess_salad(" ".join(text.split()[:45]) + ".").outcome == "pass"  # 45 words: too few to say


def test_a_repeated_run_on_is_repetition():
    """A run-on that repeats one unit is a runaway loop: repetition names it before word_salad."""
    text = " ".join(["lamp ough stair tion the ing smug ed ly harbour gle ness ment keeper ward"] * 5)
    result = evaluate(Reply(text=text, finish_reason="stop"), build("refusal", "en").spec)
    assert result.reason == "repetition"
    assert any(c.reason == "word_salad" for c in result.checks)


def test_salad_outranks_the_language_verdict():
    """On the language probe a salad is reported as word_salad, not as a failed detection."""
    text = "o a de \\ \\ que ção mente os , , , lan terna ç \\ \\ ão do ,, escada || mar da , , nas"
    result = evaluate(Reply(text=text, finish_reason="stop"), build("language", "pt").spec)
    assert (result.outcome, result.reason) == ("fail", "word_salad")


def test_structured_replies_are_not_judged_for_salad():
    """JSON is all marks: the structured probe does not run the salad check."""
    reply = Reply(text='{"city": "Lisbon", "temp_c": 21, "summary": "clear sky"}', finish_reason="stop")
    result = evaluate(reply, build("structured", "en").spec)
    assert result.outcome == "pass" and all(c.check != "corruption.word_salad" for c in result.checks)
