"""A reply sent twice: the whole answer again, or a passage of it duplicated; refrains, data and code pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.checks import evaluate, fail_rank
from reverie_canary.client.checks.duplicate import (
    ADJACENT_LETTERS,
    DISTANT_LETTERS,
    SCAN_CHARS,
    WHOLE_LETTERS,
    check_duplicate,
    find_passage_repeat,
    find_whole_repeat,
)
from reverie_canary.client.reply import ProbeSpec, Reply
from reverie_canary.services.prober.prompts import build
from tests.family_cases import _EN, _JA, _PT, _ZH

SHARED = Path(os.environ.get("CANARY_SHARED_DIR") or Path(__file__).resolve().parents[3] / "shared")
LANG_DATA = SHARED / "data" / "lang"
SPEC = ProbeSpec(kind="refusal", language="en")


def _judge(text: str):
    return check_duplicate(Reply(text=text), SPEC)


# -- the whole answer again ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    _EN + _EN, _EN + "\n\n" + _EN, _EN + " " + _EN[:-12], _PT + "\n" + _PT, _ZH + _ZH,
    '{"city": "Lisbon", "summary": "clear sky over the bay"}\n{"city": "Lisbon", "summary": "clear sky over the bay"}',
])
def test_the_answer_twice_fails(text):
    """A A, A and A again after a separator, or missing only its last chunk: whole_reply."""
    result = _judge(text)
    assert (result.outcome, result.reason) == ("fail", "duplicated_text"), result
    assert result.evidence["kind"] == "whole_reply" and result.evidence["letters"] >= WHOLE_LETTERS


@pytest.mark.parametrize("text, chunk", [(_EN, 23), (_EN, 60), (_JA, 6), (_PT, 9)])
def test_the_accumulated_text_resent_with_the_last_chunk_fails(text, chunk):
    """A gateway that sends the accumulated text with its final chunk: P + A where A = P + chunk."""
    resent = text[:-chunk] + text
    result = _judge(resent)
    assert result.reason == "duplicated_text" and result.evidence["offset"] == len(text) - chunk
    assert result.evidence["repeated"] == text[:-chunk][:120]


def test_a_bookend_or_a_title_printed_twice_is_not_the_answer_twice():
    """A reply ending with its first sentence, or a title twice before a long text (real web text), passes."""
    assert _judge("The lighthouse keeper never slept. " + _EN + " The lighthouse keeper never slept.").outcome == "pass"
    title = "Toccaceli terzo nel Campionato Italiano MX2 Under 21 "
    body = "Bryan Toccaceli si conferma tra i giovani più promettenti a livello nazionale, gara dopo gara."
    assert find_whole_repeat(title + title + body) is None
    assert find_whole_repeat(title + title) is not None  # the same with nothing after it: the reply twice


def test_a_short_answer_twice_is_too_little_to_say():
    """Below WHOLE_LETTERS letters repeated (Yes. Yes., a birthday line) nothing is said."""
    assert _judge("Happy birthday to you, Happy birthday to you").outcome == "pass"
    assert _judge("Paris is the capital. Paris is the capital.").outcome == "pass"
    assert _judge("Paris is the capital of France. Paris is the capital of France.").reason == "duplicated_text"


# -- a passage duplicated --------------------------------------------------------------------------------------


def test_a_paragraph_duplicated_next_to_itself_fails():
    """A paragraph printed twice in a row (a chunk re-sent): passage, adjacent."""
    para = "Mira lifts the lamp high and waits for the boat to round the reef."
    result = _judge(f"The storm is close now.\n\n{para}\n\n{para}\n\nThe smugglers step back.")
    assert result.reason == "duplicated_text"
    assert result.evidence["kind"] == "passage" and result.evidence["adjacent"] is True
    assert result.evidence["letters"] >= ADJACENT_LETTERS


def test_a_paragraph_duplicated_further_on_fails_when_long():
    """The same prose paragraph again later: DISTANT_LETTERS letters at least; a shorter sentence is a refrain."""
    para = ("Mira lifts the lamp high above her head and waits for the small fishing boat to round "
            "the black reef.")
    found = find_passage_repeat(f"It begins.\n\n{para}\n\nThe smugglers step back.\n\n{para}\n\nThe end.")
    assert found is not None and found["adjacent"] is False and found["letters"] >= DISTANT_LETTERS
    refrain = "Breathe in, hold the light, breathe out."
    assert find_passage_repeat(f"{refrain} The boat rocks on the black water. {refrain}") is None


def test_verse_code_tables_and_data_pass():
    """A chorus (lines without stops), output in a code block, a table, a JSON list of equal objects."""
    chorus = "Keep the light on, keep the light on\nthrough the storm and through the night"
    song = f"The sea is dark tonight\nthe boats are far\n\n{chorus}\n\nThe gulls are gone\nthe bell rings\n\n{chorus}"
    assert _judge(song).outcome == "pass"
    line = "value = 1 and some more text to make it long enough to count"
    assert _judge(f"Output:\n```\n{line}\n{line}\n{line}\n```\nDone, as expected.").outcome == "pass"
    row = '{"city": "Harbour", "summary": "light rain over the bay, wind from the north-west, gusts near the cliffs"}'
    assert _judge(f"[{row},\n {row},\n {row}]").outcome == "pass"


def test_a_sentence_duplicated_inside_a_paragraph_fails():
    """Two copies of one long sentence in a row, inside a paragraph."""
    sentence = "The leader hesitates, his knife still raised toward the lamp."
    assert _judge(f"The storm is close. {sentence} {sentence} Mira waits.").reason == "duplicated_text"


# -- in the pipeline --------------------------------------------------------------------------------------


def test_every_probe_runs_it_and_it_ranks_with_repetition():
    """Any reply (the structured probe's too); it names the cause before a broken JSON value or a failed echo."""
    assert fail_rank("duplicated_text") == fail_rank("repetition") < fail_rank("not_json")
    assert fail_rank("duplicated_text") < fail_rank("echo_mismatch") < 99
    js = '{"city": "Lisbon", "temp_c": 21, "summary": "clear sky"}'
    result = evaluate(Reply(text=js + js, finish_reason="stop", http_status=200, ttft_ms=400.0),
                      build("structured", "en").spec)
    assert (result.outcome, result.reason) == ("fail", "duplicated_text")
    echo = "The lighthouse keeper counted nine ships before the fog rolled in."
    result = evaluate(Reply(text=echo + " " + echo, finish_reason="stop", http_status=200, ttft_ms=400.0),
                      ProbeSpec(kind="echo", language="en", echo_text=echo))
    assert result.reason == "duplicated_text"


def test_only_the_first_scan_chars_are_read():
    """Bounded work: a duplicate beyond SCAN_CHARS is not read."""
    filler = "".join(f"Sentence number {i} of the long reply goes on. " for i in range(SCAN_CHARS // 40 + 1))
    para = "Mira lifts the lamp high and waits for the boat to round the reef."
    assert _judge(filler + f"\n\n{para}\n\n{para}").outcome == "pass"
    assert _judge(f"{para}\n\n{para}\n\n" + filler).reason == "duplicated_text"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([
    "Mira lifts the lamp.", "The smugglers step back toward the door.", "Rain hits the glass.",
    "The leader hesitates, knife raised.", "A bell rings far out in the channel.", "Gulls circle the tower.",
    "She counts the steps to the door.", "The wind turns north."]), min_size=1, max_size=8, unique=True))
def test_distinct_sentences_never_fail(sentences):
    """Property: a reply of distinct sentences, whatever their order, is never a duplicate."""
    assert _judge(" ".join(sentences)).outcome == "pass"


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=int(0.4 * len(_EN))))
def test_any_resend_point_fails(cut):
    """Property: the accumulated text re-sent whatever the size of its last chunk (up to 40 % of the answer)."""
    assert _judge(_EN[:len(_EN) - cut] + _EN).reason == "duplicated_text"


# -- real text ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not LANG_DATA.is_dir(), reason=f"no language data at {LANG_DATA} (set CANARY_SHARED_DIR)")
def test_real_text_is_never_a_duplicate():
    """Every real sentence, reply of 2-5 sentences and paragraph of 12 lines in the 17 languages passes."""
    from reverie_canary.client.checks.language import LANGUAGES

    tripped = []
    for lang in LANGUAGES:
        lines = [line.strip() for line in (LANG_DATA / "sentences" / f"{lang}.txt").read_text(encoding="utf-8")
                 .splitlines() if line.strip()]
        texts = lines + [" ".join(lines[i:i + 2 + i % 4]) for i in range(0, len(lines), 3)]
        texts += ["\n\n".join(lines[i:i + 12]) for i in range(0, len(lines), 12)]
        tripped += [text[:80] for text in texts if _judge(text).outcome == "fail"]
    assert tripped == []
