"""Behavioural integrity (docs/concepts/probes.md, behavioural integrity): junk, control tokens, byte-level markers, repetition, echo."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.checks.behaviour import (
    MAX_PERIOD,
    _min_repeats,
    behaviour_checks,
    check_bytelevel,
    check_control_chars,
    check_control_tokens,
    check_echo,
    check_leading_junk,
    check_repetition,
    check_tool_calls,
    find_repetition,
    longest_run,
)
from reverie_canary.client.reply import ProbeSpec, Reply

STAR = ProbeSpec(kind="ttft", language="en", expected_prefix="*")
FREE = ProbeSpec(kind="language", language="es")


# -- leading junk ----------------------------------------------------------------


@pytest.mark.parametrize("text, kind", [
    ("assistant\n\n*The lantern flickers as the door swings open.*", "role_word"),          # FC-14
    ("Assistant: *The lantern flickers.*", "role_word"),
    ("model\n*La lanterna tremola.*", "role_word"),
    ("ira glances at the map and frowns.*\n\n\"We are late,\" she says.", "lost_first_token"),  # FC-15
    ("ntão a Mira sobe a escada.*", "lost_first_token"),                                    # pt, lost "*E"
    (". *The lantern flickers.*", "stray_punctuation"),
    (", *The lantern flickers.*", "stray_punctuation"),
    ("\ufeff*The lantern flickers.*", "bom"),
    ("\x00*The lantern flickers.*", "control_char"),
    ("\ufffd*The lantern flickers.*", "replacement_char"),
    ("The lantern flickers.", "missing_prefix"),
    ("\"We are late,\" she says. *She lifts the lamp.*", "missing_prefix"),
])
def test_missing_required_first_character_fails(text, kind):
    """With a required first character, any other opening is leading_junk, named by kind (FC-14, FC-15)."""
    result = check_leading_junk(Reply(text=text), STAR)
    assert (result.outcome, result.reason) == ("fail", "leading_junk")
    assert result.evidence["kind"] == kind


def test_junk_before_prefix_is_reported():
    """The characters before the required opening are the evidence."""
    result = check_leading_junk(Reply(text="assistant\n\n*The lantern.*"), STAR)
    assert result.evidence["junk"] == "assistant\n\n"


@pytest.mark.parametrize("text", ["*The lantern flickers.*", "  \n*The lantern flickers.*", "**Bold** start"])
def test_required_prefix_present_passes(text):
    """The required first character after optional whitespace passes."""
    assert check_leading_junk(Reply(text=text), STAR).outcome == "pass"


@pytest.mark.parametrize("text", [
    "—¿Vienes conmigo? —preguntó ella, sin levantar la vista.",   # FP-06
    "¡Cuidado con la escalera!",
    "– Vem comigo? – perguntou ela.",
    "« Viens avec moi », dit-elle.",
    "„Komm mit“, sagte sie.",
    "“Come with me,” she said.",
    "\"Come with me,\" she said.",
    "*She lifts the lamp.*",
    "**The storm** arrives.",
    "# Chapter one",
    "> A quote",
    "- first item",
    "1. first step",
    "`code` first",
    "(She smiles.)",
    "...and then the light went out.",
    "「一緒に来て」と彼女は言った。",
    "🌊 The sea is rough.",
    "{\"city\": \"Porto\"}",
    "",
])
def test_legitimate_openings_pass(text):
    """Legitimate openings (¿ ¡, dialogue dashes, quotes « „ “, Markdown, brackets, emoji) pass (FP-06)."""
    assert check_leading_junk(Reply(text=text), FREE).outcome == "pass"


@pytest.mark.parametrize("text, kind", [
    ("assistant\n\nThe lantern flickers.", "role_word"),
    ("User: hello", "role_word"),
    (") The lantern flickers.", "stray_punctuation"),
    ("; The lantern flickers.", "stray_punctuation"),
    ("! The lantern flickers.", "stray_punctuation"),
    ("\u200bThe lantern flickers.", "control_char"),
    ("\u0301The lantern flickers.", "combining_mark"),
])
def test_generic_leading_junk_fails(text, kind):
    """Without a required first character, role words, stray marks and invisible characters still fail."""
    result = check_leading_junk(Reply(text=text), FREE)
    assert (result.outcome, result.evidence["kind"]) == ("fail", kind)


# -- control tokens (tool-call tokens are the tool-call markup family: test_checks_tools.py) ---------


@pytest.mark.parametrize("text", [
    "The lamp is lit.<|im_end|>",
    "The lamp is lit.<|eot_id|><|start_header_id|>user<|end_header_id|>",
    "The lamp is lit.<｜end▁of▁sentence｜>",
    "[INST] continue [/INST] The lamp is lit.",
    "The lamp is lit.</s>",
    "<think>The user wants a scene.</think>The lamp is lit.",
    "<|channel|>analysis<|message|>The lamp is lit.",
    "Line one<0x0A>Line two",
    "<start_of_turn>model\nThe lamp is lit.",
])
def test_leaked_control_tokens_fail(text):
    """Template, end-of-turn and reasoning tokens in the visible text fail (FC-11's family)."""
    result = check_control_tokens(Reply(text=text), FREE)
    assert (result.outcome, result.reason) == ("fail", "control_tokens")
    assert result.evidence["count"] >= 1


@pytest.mark.parametrize("text", [
    "If x < y and y > z, the lamp is lit.",
    "The map shows [1] the cliff and [2] the cove.",
    "She wrote <b>bold</b> on the note.",
    "Use <Ctrl> + <S> to save.",
    "A <|> B",
])
def test_angle_brackets_in_prose_pass(text):
    """Ordinary brackets, comparisons and HTML in prose are not control tokens."""
    assert check_control_tokens(Reply(text=text), FREE).outcome == "pass"


def test_tool_calls_finish_without_tools_fails():
    """finish_reason tool_calls on a probe without tools is inconsistent (FC-11)."""
    assert check_tool_calls(Reply(text="x", finish_reason="tool_calls"), FREE).reason == "unexpected_tool_calls"
    assert check_tool_calls(Reply(text="x", finish_reason="stop"), FREE).outcome == "pass"


def test_calls_on_a_probe_that_offered_tools_are_the_tool_checks_business():
    """With tools offered, calls are judged by the tool checks (tool_unexpected_call), never unexpected_tool_calls."""
    offered = ProbeSpec(kind="tools", language="en", tools=[{"type": "function", "function": {"name": "lamp"}}])
    reply = Reply(text="", finish_reason="tool_calls", tool_calls=1, tool_names=("lamp",))
    assert check_tool_calls(reply, offered).outcome == "pass"
    assert check_tool_calls(reply, FREE).reason == "unexpected_tool_calls"


# -- byte-level markers ------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "TheĠriverĠbendsĠpastĠtheĠoldĠmill.ĊAĠheronĠwaitsĠinĠtheĠshallows.",        # FC-01
    "ElĠfaroĠseĠalzaĠsobreĠlasĠrocas.",                                            # es
    "Line one.ĊLine two.ĊLine three.ĊLine four.",                                  # newlines only
    "▁The▁lamp▁is▁lit▁and▁the▁sea▁is▁calm.",                                       # SentencePiece
    "ミラはランプに火をともし、暗い海を見つめる。ĊĊミラはらせん階段を上る。",          # ja: few spaces to replace
    "灯塔在黎明中矗立。Ġ[[END]]",                                                      # zh: one marker before the sentinel
])
def test_bytelevel_markers_fail(text):
    """Raw byte-level BPE symbols in place of spaces and newlines fail (FC-01)."""
    result = check_bytelevel(Reply(text=text), FREE)
    assert (result.outcome, result.reason) == ("fail", "bytelevel_tokens")


@pytest.mark.parametrize("text", [
    "Ġorġ Borg lives in Valletta and keeps the lighthouse on the north coast.",   # Maltese name, once
    "The bar chart ▁▂▃▅▇ rose slowly through the night.",
    "Latarnia świeci, a Ċ appears once in a Maltese word here.",
])
def test_occasional_marker_letters_pass(text):
    """A Maltese name or a block character now and then is not a tokenizer leak."""
    assert check_bytelevel(Reply(text=text), FREE).outcome == "pass"


# -- control characters -------------------------------------------------------------------


@pytest.mark.parametrize("text, reason", [
    ("The lamp\x07 is lit.", "control_characters"),
    ("\x1b[31mThe lamp is lit.\x1b[0m", "control_characters"),
    ("The lamp\x85 is lit.", "control_characters"),
    ("The lamp\x7f is lit.", "control_characters"),
    ("The lamp \ufffd is lit.", "encoding_broken"),
])
def test_control_characters_fail(text, reason):
    """C0 (but tab/newline/CR), DEL, C1 and U+FFFD fail; U+FFFD as encoding_broken."""
    result = check_control_chars(Reply(text=text), FREE)
    assert (result.outcome, result.reason) == ("fail", reason)


def test_tabs_and_newlines_pass():
    """Tab, newline and CR are ordinary whitespace."""
    assert check_control_chars(Reply(text="a\tb\nc\r\nd"), FREE).outcome == "pass"


# -- repetition --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "ok ok ok ok ok",                                                             # FP-11, requested
    "Ha ha ha ha! The old keeper laughed and pointed at the storm clouds rolling over the bay.",
    "Row, row, row your boat, gently down the stream. Merrily, merrily, merrily, merrily, life is but a dream.",
    "The lighthouse stood tall against the grey dawn. Waves broke on the rocks below, and gulls cried overhead.",
    "No. No. No. She would not give up the lamp, not tonight, not to these men, not ever.",
])
def test_legitimate_repetition_passes(text):
    """Short, requested or rhetorical repetition passes (FP-11)."""
    assert check_repetition(Reply(text=text), FREE).outcome == "pass"


@pytest.mark.parametrize("text, period", [
    ("the " * 40, 1),
    ("The storm is coming. " * 6, 5),
    ("Mira lifts the lamp. " + "and the sea " * 20, 3),
    ("!" * 50, 1),
    ("哈" * 40, 1),
    ("ミラは階段を上る。" + "外の海は灰色" * 10, 6),                                  # CJK: one token per character
    ("He said: " + "I will not go back to the lighthouse tonight because the storm is too strong. " * 3, 16),
])
def test_runaway_repetition_fails(text, period):
    """A unit repeated back to back far past any request fails with its period and share."""
    result = check_repetition(Reply(text=text), FREE)
    assert (result.outcome, result.reason) == ("fail", "repetition")
    assert result.evidence["period"] == period


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["lamp", "sea", "storm", "Mira", "rocks", "gull", "the", "a", "."]),
                min_size=0, max_size=60))
def test_repetition_needs_eight_copies_of_short_units(words):
    """Property: fewer than 8 back-to-back copies of one word never fail."""
    text = " ".join(words)
    found = find_repetition(text)
    if found is not None and found["period"] == 1:
        assert found["repeats"] >= 8


def _longest_run_by_hand(tokens: list[str], min_share: float) -> tuple[int, int, int] | None:
    """The rule of find_repetition read literally: every period, every position, a counter (the reference)."""
    n = len(tokens)
    best = None
    for period in range(1, min(MAX_PERIOD, n // 3) + 1):
        run = 0
        for i in range(n - period):
            if tokens[i] != tokens[i + period]:
                run = 0
                continue
            run += 1
            covered = run + period
            if covered // period >= _min_repeats(period) and covered >= min_share * n and (best is None or covered > best[0]):
                best = (covered, period, i - run + 1)
    return best


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d", "."]), min_size=0, max_size=400))
def test_repetition_search_finds_what_the_rule_says(tokens):
    """Property: the byte-string search finds the run the rule read literally finds (unit, length, position)."""
    assert longest_run(tokens, 0.3) == _longest_run_by_hand(tokens, 0.3)


def test_long_reply_runaway_and_clean_text():
    """A long loop fails, a long story passes (the search past 120 tokens)."""
    story = ("Mira climbs the spiral stairs and checks the great lamp one more time. Outside, the sea is grey "
             "and restless, and the wind pulls at the shutters. She has kept this lighthouse for eleven years "
             "and knows every sound it makes. Far out, a small fishing boat fights its way toward the harbour. "
             "The smugglers wait on the lower landing, counting the seconds between the flashes of the beam. ")
    assert check_repetition(Reply(text=story * 2), FREE).outcome == "pass"  # a paragraph said twice is not a loop
    loop = story + "and the sea and the sea " * 60
    result = check_repetition(Reply(text=loop), FREE)
    assert (result.outcome, result.evidence["period"]) == ("fail", 3)


# -- exact echo ----------------------------------------------------------------------------------

ECHO = ProbeSpec(kind="echo", language="en", echo_text="Lisbon is the capital of Portugal. It lies on the Tagus estuary.")


@pytest.mark.parametrize("text, inserted, deleted", [
    ("Lisbon is the capital of Portugal. REDACTED It lies on the Tagus estuary.", ["REDACTED"], []),     # FC-17
    ("REDACTED Lisbon is the capital of Portugal. It lies on the Tagus estuary.", ["REDACTED"], []),
    ("Lisbon is the capital of Portugal. It lies on the Tagus estuary. REDACTED", ["REDACTED"], []),
    ("Lisbon is the capital of Portugal. It lies on the Tagus.", ["Tagus."], ["Tagus", "estuary."]),
    ("Lisbon is the capital of Spain. It lies on the Tagus estuary.", ["Spain."], ["Portugal."]),
])
def test_echo_mismatch_fails_with_the_diff(text, inserted, deleted):
    """An exact echo with words inserted, dropped or changed fails with those words as evidence (FC-17)."""
    result = check_echo(Reply(text=text), ECHO)
    assert (result.outcome, result.reason) == ("fail", "echo_mismatch")
    assert result.evidence["inserted"] == inserted and result.evidence["deleted"] == deleted


@pytest.mark.parametrize("text", [
    "Lisbon is the capital of Portugal. It lies on the Tagus estuary.",
    "  Lisbon is the capital of Portugal.  It lies on the Tagus estuary.\n",
    "\"Lisbon is the capital of Portugal. It lies on the Tagus estuary.\"",
    "“Lisbon is the capital of Portugal. It lies on the Tagus estuary.”",
])
def test_exact_echo_passes(text):
    """Whitespace and one pair of enclosing quotes are the only tolerated differences."""
    assert check_echo(Reply(text=text), ECHO).outcome == "pass"


def test_echo_without_echo_text_passes():
    """A probe without echo text has nothing to compare."""
    assert check_echo(Reply(text="anything"), FREE).outcome == "pass"


def test_behaviour_checks_all_pass_on_a_clean_reply():
    """A clean reply passes every behavioural check."""
    reply = Reply(text="*Mira lifts the lamp.* \"Not tonight,\" she says.", finish_reason="stop")
    assert {r.outcome for r in behaviour_checks(reply, STAR)} == {"pass"}
