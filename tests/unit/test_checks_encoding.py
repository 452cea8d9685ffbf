"""Encoding integrity (docs/concepts/probes.md, the language contract): U+FFFD, C1 controls, mojibake (the detector comparison, ``benchmarks/language_table.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.checks.encoding import assess_encoding, check_encoding, find_mojibake
from reverie_canary.client.reply import ProbeSpec, Reply


def _mojibake(text: str, codec: str = "cp1252") -> str:
    """UTF-8 bytes decoded with a single-byte code page: what a broken provider sends."""
    return text.encode("utf-8").decode(codec, errors="replace")


@pytest.mark.parametrize("text, defect", [
    ("A soluÃ§Ã£o Ã© simples â€” basta reiniciar o serviÃ§o.", "mojibake"),            # FC-22
    (_mojibake("Le phare a été repeint avant l'été, déjà."), "mojibake"),                # fr
    (_mojibake("Der Leuchtturm steht für alle Schiffe über dem Meer."), "mojibake"),     # de
    (_mojibake("Latarnia świeci nad morzem, a mewy krążą nad portem."), "mojibake"),    # pl
    (_mojibake("Маяк стоит на скале.", "cp1251"), "mojibake"),                           # ru via cp1251
    (_mojibake("Ngọn hải đăng đứng trên đá.", "cp1252"), "replacement_char"),           # vi: an undefined cp1252 byte became U+FFFD
    ("The lamp went out at dawn \ufffd and the sea was grey.", "replacement_char"),
    ("C'est vrai que nous n'en avons pas encore parlé\x85 Tu sais.", "c1_control"),
    ("It\x92s the keeper\x92s lamp.", "c1_control"),                                      # cp1252 apostrophe as Latin-1
])
def test_broken_encoding_fails(text, defect):
    """Mojibake, U+FFFD and C1 controls fail as encoding_broken with the defect named (FC-22)."""
    result = assess_encoding(text)
    assert (result.outcome, result.reason) == ("fail", "encoding_broken")
    assert result.evidence["defect"] == defect


@pytest.mark.parametrize("text", [
    "A solução é simples — basta reiniciar o serviço.",
    "NÃO HÁ AÇÃO SEM REAÇÃO, disse o faroleiro.",
    "Le phare a été repeint avant l'été, déjà « comme toujours ».",
    "Der Leuchtturm steht für alle Schiffe über dem Meer – „immer“.",
    "Latarnia świeci nad morzem, a mewy krążą nad portem.",
    "Маяк стоїть на скелі, і море ще сіре, але перше світло вже торкається хвиль.",
    "Deniz feneri ışığını söndürdü; gölgeler ağır ağır çekildi.",
    "Ngọn hải đăng đứng trơ trọi trên những tảng đá đen.",
    "灯塔孤零零地矗立在黑色的礁石上。",
    "Café au lait, naïve façade, Ærøskøbing, 5×3 = 15, ©2024, ½ cup.",
    "plain ascii only",
])
def test_clean_text_passes(text):
    """Clean text in the 17 languages (accents, typographic quotes, symbols) passes."""
    assert assess_encoding(text).outcome == "pass"


# Accented lower-case letters of our Latin-script languages. Their UTF-8 bytes read as cp1252 are an
# upper-case lead (Ã, Ä, Å, Ä…) and a continuation from 0x80-0xBF; none of these letters is itself such
# a lead or continuation, so a text made of them and ASCII is clean by construction.
_LOWER_ACCENTED = "àáâãäçèéêëìíîïñòóôõöùúûüýÿ"
_clean_text = st.text(alphabet=st.sampled_from(_LOWER_ACCENTED + "abcdefghijklmnopqrstuvwxyz ,."),
                      min_size=1, max_size=80)


@settings(max_examples=200, deadline=None)
@given(_clean_text)
def test_clean_latin_text_always_passes(text):
    """Property: text of accented letters and ASCII is never called broken (fails a check that flags any non-ASCII)."""
    assert assess_encoding(text).outcome == "pass"


@settings(max_examples=200, deadline=None)
@given(_clean_text.filter(lambda t: any(c in _LOWER_ACCENTED for c in t)))
def test_mojibake_of_clean_text_is_found_and_fixed_back(text):
    """Property: the cp1252 mojibake of clean text fails, and the fixed span is a piece of the original.

    Fails an implementation that never flags, that flags only some letters, or whose ``fixed`` is not
    the re-decoded original (for instance the damaged span itself).
    """
    damaged = _mojibake(text)
    result = assess_encoding(damaged)
    assert (result.outcome, result.reason) == ("fail", "encoding_broken")
    found = find_mojibake(damaged)
    if result.evidence["defect"] == "mojibake":
        assert found is not None and found["fixed"] != found["span"]
        assert found["fixed"] in text
        assert find_mojibake(found["fixed"]) is None  # the fix is clean: the check never loops on its own output
    else:  # an undefined cp1252 byte (0x81, 0x8D, 0x8F, 0x90, 0x9D) became U+FFFD
        assert result.evidence["defect"] == "replacement_char" and "\ufffd" in damaged


def test_check_encoding_reads_reply_text():
    """check_encoding judges reply.text."""
    spec = ProbeSpec(kind="language", language="pt")
    assert check_encoding(Reply(text="serviÃ§o"), spec).outcome == "fail"
    assert check_encoding(Reply(text="serviço"), spec).outcome == "pass"


@pytest.mark.parametrize("text", [
    "( o¬ô )",  # MacRoman would "repair" it into the C1 control U+0099: no repair, no mojibake
    "├┤a┼┐a┼┐a┼┐a┼┐a",  # DOS line drawing between letters, not cp437 mojibake of a word
    "MÄ£ÄM ÌÑÌ Q £ÄGÌ GÄLÄW ÑÍCH SÖÄ£ ÑÝÄ",  # styled capitals: most accented letters are no sequence
])
def test_what_only_looks_like_mojibake_passes(text):
    """Three kinds ftfy's negative cases hold: a repair into a control, text art, styled text."""
    assert assess_encoding(text).outcome == "pass", find_mojibake(text)


@pytest.mark.parametrize(("text", "fixed"), [
    ("#╨┐╤Ç╨░╨▓╨╕╨╗╤î╨╜╨╛╨╡", "#правильное"),  # Russian read as cp437: a run of drawing characters
    ("ItÃ¢â‚¬â„¢s classic", "Itâ€™s classic"),  # doubly encoded: one repair shows the first layer
])
def test_mojibake_drawn_in_box_characters_or_doubly_encoded_is_still_found(text, fixed):
    found = find_mojibake(text)
    assert found is not None and assess_encoding(text).outcome == "fail"
    assert found["fixed"] == fixed
