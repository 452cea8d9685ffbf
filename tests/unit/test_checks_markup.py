"""Markup that only looks like a token, and output that only looks like a loop: context decides."""

from __future__ import annotations

import pytest

from reverie_canary.client.checks import evaluate
from reverie_canary.client.checks.behaviour import check_repetition
from reverie_canary.client.checks.tokens import (
    STRIKETHROUGH_CHARS,
    check_control_tokens,
    find_tokens,
    mask_code,
    strikethrough_end,
)
from reverie_canary.client.reply import ProbeSpec, Reply

SPEC = ProbeSpec(kind="refusal", language="en")


def _tokens(text: str):
    return check_control_tokens(Reply(text=text), SPEC)


# -- <s>...</s>: strikethrough or sequence tokens ----------------------------------------------------


@pytest.mark.parametrize("text", [
    "The old price was <s>$20</s> and the new one is $15.",
    "Use <b>bold</b>, <s>strikethrough</s> and <i>italics</i> in the note.",
    "Der Plan: <s>Montag</s> Dienstag, <s>Hafen</s> Leuchtturm.",
    "Il a écrit <s> vieux </s> nouveau sur le tableau.",
    "<s>Old plan</s> new plan: keep the lamp lit.",
    "Done:\n- <s>clean the lens</s>\n- <s>fill the oil</s>\n- light the lamp",
])
def test_a_strikethrough_inside_a_line_is_markup(text):
    """<s> with its own </s> further on the line and text after the pair: HTML strikethrough."""
    assert _tokens(text).outcome == "pass"


@pytest.mark.parametrize("text, token", [
    ("The lamp is lit and the storm has passed over the harbour.</s>", "</s>"),       # trailing
    ("The lamp is lit.</s>\n", "</s>"),                                                  # trailing, then a newline
    ("<s>The lamp is lit and the storm has passed.</s>", "<s>"),                          # the reply wrapped
    ("Die Laterne brennt.</s> Der Sturm zieht über den Hafen.", "</s>"),                 # lone, mid-text
    ("<s>La lanterne brûle et la tempête passe", "<s>"),                                 # never closed
    ("The lamp <s>is lit\nand </s> the storm passes.", "<s>"),                            # not on one line
    ("O farol brilha.</s><s>[INST] continue [/INST]", "</s>"),                           # a turn leaked
    ("x <s></s> y", "<s>"),                                                              # nothing struck
])
def test_a_lone_trailing_or_wrapping_sequence_token_is_a_leak(text, token):
    """A lone </s>, a trailing one, an <s> never closed or a pair around the whole reply: control_tokens."""
    result = _tokens(text)
    assert (result.outcome, result.reason) == ("fail", "control_tokens")
    assert result.evidence["token"] == token


def test_a_strikethrough_is_short():
    """More than STRIKETHROUGH_CHARS characters between <s> and </s> is not a struck word or clause."""
    near = "a <s>" + "x" * STRIKETHROUGH_CHARS + "</s> b"
    far = "a <s>" + "x" * (STRIKETHROUGH_CHARS + 1) + "</s> b"
    assert strikethrough_end(near, 2) == near.index("</s>") + 4
    assert strikethrough_end(far, 2) is None
    assert [t for t, *_ in find_tokens(far)] == ["control", "control"]


def test_markup_does_not_hide_other_tokens():
    """A strikethrough next to a real leak: the leak still fails."""
    result = _tokens("The price was <s>$20</s> $15.<|im_end|>")
    assert result.reason == "control_tokens" and result.evidence["token"] == "<|im_end|>"


# -- repeated output in code, a loop in prose --------------------------------------------------------------


def _repetition(text: str, finish: str = "stop", cut: str | None = None):
    return check_repetition(Reply(text=text, finish_reason=finish, cut=cut), SPEC)


@pytest.mark.parametrize("text", [
    "The output is:\n```\n" + "0\n" * 60 + "```\nSixty zeros, one per line.",
    "Printed:\n```text\n" + "ok ok ok ok ok ok ok ok ok ok\n" * 8 + "```\nThat is what the loop prints.",
    "Run `yes` and it prints `y y y y y y y y y y y y y y y y y y` until you stop it.",
    "出力:\n```\n" + "あ\n" * 50 + "```\n以上です。",
    "Output:\n~~~\n" + "[1, 1, 1, 1]\n" * 30 + "~~~\nThe same row thirty times.",
])
def test_repeated_values_printed_in_code_are_output(text):
    """A printed list of equal values in a code block or span is not a runaway."""
    assert _repetition(text).outcome == "pass"


def test_a_loop_in_prose_is_still_a_loop_next_to_code():
    """Code is skipped; the prose around it is judged as before."""
    text = "Here is the value:\n```\n42\n```\n" + "and again and again " * 30
    assert _repetition(text).reason == "repetition"
    assert _repetition("The sea is calm. " * 40).reason == "repetition"


def test_a_block_left_open_by_a_cut_reply_is_judged():
    """A fence never closed in a reply cut at its budget: the runaway spent the budget inside the block."""
    text = "Here it is:\n```\n" + "0\n" * 200
    assert _repetition(text, finish="length").reason == "repetition"
    assert _repetition(text, cut="reply_max_bytes").reason == "repetition"
    assert _repetition(text, finish="stop").outcome == "pass"  # finished normally: output, even unclosed


def test_mask_code_can_leave_an_unclosed_fence():
    """mask_code(unclosed=False) blanks closed blocks and spans only."""
    text = "a `b` c\n```\nd\n```\ne\n```\nf f f"
    masked = mask_code(text, unclosed=False)
    assert len(masked) == len(text) and "b" not in masked and "d" not in masked and masked.endswith("f f f")
    assert not mask_code(text).strip().endswith("f")


def test_the_evaluation_passes_a_reply_of_markup_and_output():
    """Through the whole pipeline: strikethrough and printed output give a passing reply."""
    text = ("The old plan was <s>wait for dawn</s> to light the lamp now. The counter prints:\n"
            "```\n" + "0\n" * 40 + "```\nThe counter never moved, so the lamp stayed dark all night.")
    result = evaluate(Reply(text=text, finish_reason="stop", http_status=200, ttft_ms=400.0), SPEC)
    assert (result.outcome, result.reason) == ("pass", ""), [c for c in result.checks if c.outcome != "pass"]
