"""Leaked tokens by kind: reserved tokens, every bar spelling, channel text, code."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverie_canary.client.checks import evaluate
from reverie_canary.client.checks.behaviour import check_bytelevel
from reverie_canary.client.checks.tokens import (
    CHANNEL_LEAK,
    check_channel_leak,
    check_control_tokens,
    check_reserved_tokens,
    find_channel_leak,
    find_tokens,
    mask_code,
    token_view,
)
from reverie_canary.client.reply import ProbeSpec, Reply
from reverie_canary.services.prober.prompts import build

FREE = ProbeSpec(kind="refusal", language="en")


def _reasons(text: str) -> tuple[str, str, str]:
    reply = Reply(text=text)
    return tuple(check(reply, FREE).reason or "pass"
                 for check in (check_control_tokens, check_reserved_tokens, check_channel_leak))


# -- item 2: reserved and placeholder tokens as a family ---------------------------------------


@pytest.mark.parametrize("text, token", [
    ("*Mira lifts the lamp.*<unused123> The storm is close now.", "<unused123>"),           # Gemma
    ("Mira ergue a lanterna<unused0><unused0> e sorri para o faroleiro.", "<unused0>"),
    ("Die Laterne flackert <extra_id_7> im Wind, und Mira wartet.", "<extra_id_7>"),       # T5 sentinels
    ("The lamp is lit.<|reserved_special_token_42|>", "<|reserved_special_token_42|>"),  # Llama 3
    ("La lampe brille. [PAD] [PAD] [PAD]", "[PAD]"),                                      # BERT-style
    ("灯塔的灯亮了。<pad><pad><pad>", "<pad>"),
    ("Маяк светит в темноте.<|endoftext|>", "<|endoftext|>"),
    ("The lamp is lit.<|end_of_text|>", "<|end_of_text|>"),
    ("La linterna se apaga <endoftext> y Mira espera.", "<endoftext>"),
    ("Fener yanıyor.<|extra_0|>", "<|extra_0|>"),                                          # Qwen
    ("등대의 불이 켜졌다.<｜place▁holder▁no▁12｜>", "<｜place▁holder▁no▁12｜>"),            # DeepSeek, full-width
    ("Lampu mercusuar menyala. [unused12] [unused13]", "[unused12]"),
    ("Il faro si accende [control_8] nel buio.", "[control_8]"),                          # Mistral
    ("The lamp <UNK> is lit.", "<UNK>"),
    ("Ngọn đèn sáng lên <mask> trong đêm.", "<mask>"),
    ("Mira lifts the lamp.<start_of_image>", "<start_of_image>"),                        # Gemma 3 multimodal
    ("Mira ergue a lanterna.<end_of_image>", "<end_of_image>"),
    ("Die Laterne flackert <image_soft_token><image_soft_token> im Wind.", "<image_soft_token>"),
    ("La lampe brille.<start_of_audio>", "<start_of_audio>"),                             # Gemma 3n audio
    ("Маяк светит.<audio_soft_token>", "<audio_soft_token>"),
    ("The lamp is lit.<end_of_video>", "<end_of_video>"),
    ("The lamp is lit.<｜start▁of▁image｜>", "<｜start▁of▁image｜>"),                        # any bar, ▁ spacer
])
def test_reserved_tokens_fail_by_pattern(text, token):
    """Reserved, placeholder and padding tokens of any numbering and bar spelling fail as reserved_tokens."""
    result = check_reserved_tokens(Reply(text=text), FREE)
    assert (result.outcome, result.reason, result.evidence["token"]) == ("fail", "reserved_tokens", token)
    assert check_control_tokens(Reply(text=text), FREE).outcome == "pass"  # classified once


@pytest.mark.parametrize("text", [
    "Replace <your name> with the keeper's name and <date> with today.",
    "She typed <3 and smiled; x < y but y > z.",
    "The footnotes [1] and [2] cite the harbour log [sic].",
    "He pressed <Enter>, then <Esc>, then <Special> on the old console.",
    "A [Narrator] voice says the pad thai is cold.",
    "The extra ID card lay on the pad next to the mask.",
    "Use <b>bold</b> and <br> in the note.",
    "Embed it with <img src=\"lamp.png\">, or a <video> or <audio> element, at the start of the image gallery.",
])
def test_reserved_token_traps_pass(text):
    """Angle-bracket placeholders, footnotes, HTML and the words pad/mask/extra in prose pass."""
    assert _reasons(text) == ("pass", "pass", "pass")


# -- item 3: every bar and spacer spelling ----------------------------------------------------


@pytest.mark.parametrize("text", [
    "Mira sonríe.<｜end▁of▁sentence｜>",
    "Mira sonríe.<|end▁of▁sentence|>",                  # ASCII bars, U+2581 spacers
    "Mira sonríe.<｜end_of_sentence｜>",                 # full-width bars, ASCII spacers
    "好的。<｜begin▁of▁sentence｜><｜User｜>继续",
    "Ок.＜｜Assistant｜＞Маяк горит.",                     # full-width angle brackets too
    "The lamp is lit.<∣im_end∣>",                        # U+2223 look-alike bars
    "Lampa świeci.<| eot_id |>",                         # spaces inside the bars
])
def test_control_tokens_with_any_bars_and_spacers_fail(text):
    """Full-width or look-alike bars and U+2581 spacers spell the same control token."""
    result = check_control_tokens(Reply(text=text), FREE)
    assert (result.outcome, result.reason) == ("fail", "control_tokens"), result


@pytest.mark.parametrize("text", [
    "好的。<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>lamp",
    "Setting up.<|tool_calls_section_begin|><|tool_call_begin|>functions.lamp:0",
    "Ok.[TOOL_CALLS][{\"name\": \"lamp\", \"arguments\": {}}]",
    "<tool_call>\n{\"name\": \"lamp\", \"arguments\": {}}\n</tool_call>",
])
def test_tool_call_tokens_are_the_tool_markup_family_not_control_tokens(text):
    """Tool-call tokens of any bar spelling are found by the one scan and reported once, as tool-call markup."""
    assert check_control_tokens(Reply(text=text), FREE).outcome == "pass"
    assert [kind for kind, _, _ in find_tokens(text)][:1] == ["tool"]
    result = evaluate(Reply(text=text, finish_reason="stop", http_status=200, ttft_ms=300.0), FREE)
    assert (result.outcome, result.reason) == ("fail", "tool_markup_in_content")


def test_the_view_keeps_offsets():
    """The normalised view has the reply's length, so evidence offsets point into the reply."""
    text = "Mira sonríe.<｜end▁of▁sentence｜> `<think>`"
    view = token_view(text)
    assert len(view) == len(text)
    assert view.startswith("Mira sonríe.<|end_of_sentence|>")
    result = check_control_tokens(Reply(text=text), FREE)
    assert result.evidence["offset"] == 12 and result.evidence["token"] == "<｜end▁of▁sentence｜>"


def test_spacers_inside_a_token_are_not_byte_level_markers():
    """DeepSeek's U+2581 spacers inside a control token count for control_tokens, not bytelevel_tokens."""
    text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>lamp"
    assert check_bytelevel(Reply(text=text), FREE).outcome == "pass"
    assert check_bytelevel(Reply(text="The▁lamp▁is▁lit▁tonight."), FREE).reason == "bytelevel_tokens"


@pytest.mark.parametrize("text", [
    "標題｜副標題｜第三章",                                  # full-width bars as separators in CJK text
    "| name | value |\n|---|---|\n| lamp | lit |",          # a Markdown table
    "A <|> B and C ｜ D",
])
def test_bars_in_prose_pass(text):
    """Bars used as separators in prose and tables are not tokens."""
    assert _reasons(text) == ("pass", "pass", "pass")


# -- item 7: code is not leakage ------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Reasoning models wrap their thoughts in `<think>` and `</think>`; the client hides them.",
    "O token `<|im_end|>` fecha a vez do assistente no formato ChatML.",
    "Der Tokenizer füllt mit ``<pad>`` auf, BERT nutzt `[PAD]` und T5 `<extra_id_0>`.",
    "DeepSeek ends a sentence with:\n\n```\n<｜end▁of▁sentence｜>\n```\n\nand nothing else.",
    "~~~text\n<|start|>assistant<|channel|>analysis<|message|>...\n~~~\nThat is the Harmony format.",
    "Гемма резервирует `<unused0>`…`<unused98>`.",
    "In Harmony the header `analysisThe` is what you see when a parser strips `<|channel|>`.",
])
def test_tokens_inside_code_pass(text):
    """A token in an inline code span or a fenced block is an explanation, not a leak."""
    assert _reasons(text) == ("pass", "pass", "pass"), text


@pytest.mark.parametrize("text, reason_at", [
    ("Reasoning models wrap thoughts in `<think>`.<think>Now I answer.</think>", 0),
    ("O token `<|im_end|>` fecha a vez.<|im_end|>", 0),
    ("BERT nutzt `[PAD]` zum Auffüllen. [PAD] [PAD]", 1),
    ("```\nprint('hi')\n```\nassistantfinalThe code prints hi.", 2),
])
def test_the_same_token_bare_in_prose_still_fails(text, reason_at):
    """Outside the code span the same token is still a leak."""
    assert _reasons(text)[reason_at] != "pass", text


def test_an_unclosed_fence_runs_to_the_end():
    """CommonMark: a fence without its closing line is code to the end of the reply."""
    assert mask_code("See:\n```\n<|im_end|>") == "See:\n   \n" + " " * 10


# -- item 1: channel text with its markers stripped ----------------------------------------------


@pytest.mark.parametrize("text, kind", [
    ("analysisThe user wants Mira to continue the scene. Keep it short.assistantfinal*Mira lifts the lamp.*",
     "start"),
    ("analysisWe need to answer in Portuguese. assistantfinalMira ergue a lanterna e sorri.", "start"),
    ("analysis用户希望继续这个场景。assistantfinal米拉举起了灯。", "start"),
    ("analysisПользователь просит продолжить сцену.assistantfinalМира поднимает фонарь.", "start"),
    ("analysiswe need to continue the story in German.assistantfinalMira hebt die Laterne.", "start"),
    ("*Mira hebt die Laterne.* Die Schmuggler weichen zurück.assistantfinalDie Schmuggler weichen zurück.",
     "role_channel"),
    ("Mira alza la lámpara.finalMira alza la lámpara y sonríe.", "after_stop"),
    ("Mira soulève la lanterne et sourit.assistant", "end"),
    ("Mira solleva la lanterna.final", "end"),
    ("finalMira lifts the lamp and waits.", "start"),
])
def test_stripped_channel_headers_fail(text, kind):
    """Harmony channel names glued to the answer's words fail as channel_leak, in any language."""
    result = check_channel_leak(Reply(text=text), FREE)
    assert (result.outcome, result.reason, result.evidence["kind"]) == ("fail", "channel_leak", kind), result


@pytest.mark.parametrize("text", [
    "Analysis: the smugglers want the lamp, not the keeper.",
    "The final answer is simple: keep the light burning.",
    "Finalmente, Mira sobe o último degrau.",
    "La finale si gioca stasera; il finalista è nervoso.",
    "A análise final mostrou que o farol estava apagado.",
    "Our analysis of the commentary was final. We agreed.",
    "Her assistant, a quiet boy, carried the final crate.",
    "The keeper's analysis was brief — final, even.",
    "Finaliza la escena: Mira apaga la lámpara.",
    "Bu finalde takım çok iyi oynadı.",
    "Analiza końcowa. Finał sezonu.",
])
def test_channel_words_in_prose_pass(text):
    """The words analysis, commentary, final and assistant in ordinary prose are not leaks."""
    assert check_channel_leak(Reply(text=text), FREE).outcome == "pass", text


def test_a_stripped_recipient_header_is_tool_markup_not_channel_text():
    """``commentary to=functions.x`` is a tool call left as text: tool_markup_in_content, once (TC-03's kind)."""
    text = "commentary to=functions.lamp_status json{\"lit\": true}"
    assert check_channel_leak(Reply(text=text), FREE).outcome == "pass"
    result = evaluate(Reply(text=text, finish_reason="stop", http_status=200, ttft_ms=300.0), FREE)
    assert (result.outcome, result.reason) == ("fail", "tool_markup_in_content")
    assert [c.check for c in result.checks if c.outcome == "fail"] == ["corruption.tool_markup"]


def test_channel_leak_names_the_cause_before_the_language():
    """A stripped header before a good Portuguese answer fails as channel_leak, not as a mix."""
    text = ("analysisThe user wants a scene in Portuguese. I should keep it short and vivid. "
            "assistantfinalMira ergue a lanterna enquanto os contrabandistas recuam pela escada estreita. "
            "O vento bate nas janelas antigas e o mar quebra nas rochas lá embaixo.")
    result = evaluate(Reply(text=text, finish_reason="stop"), build("language", "pt").spec)
    assert (result.outcome, result.reason) == ("fail", "channel_leak")


# -- the channel-leak search tried only where a match can begin ----------------------------------

_PIECES = ["analysis", "commentary", "final", "assistant", "The", "we", "user", "Let", ".", "!", "?", "。", " ", "\n",
           "to=", "functions.search", "用户", "Ünd", "finalmente", "finale", ")", "”", "’", "]", "a", "x", "1", "_",
           "analysisThe", "assistantfinal", "Analysis:", "```", "`code`"]


@given(st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(["", "", " "])), max_size=12))
@settings(max_examples=3000, deadline=None)
def test_the_channel_leak_search_finds_what_the_whole_pattern_finds(parts):
    """``find_channel_leak`` gives the very match ``CHANNEL_LEAK.search`` gives (span and kind), or none."""
    view = "".join(a + b for a, b in parts)
    whole, fast = CHANNEL_LEAK.search(view), find_channel_leak(view)
    assert (whole and (whole.span(), whole.lastgroup)) == (fast and (fast.span(), fast.lastgroup)), view


def test_the_channel_leak_search_on_a_long_reply_finds_the_same_late_leak():
    """A leak 200 kB into a reply (after many harmless channel words) is found where the whole pattern finds it."""
    text = "The final answer came after analysis of the assistant role. " * 3300 + "So it ends.finalMira was here."
    whole, fast = CHANNEL_LEAK.search(text), find_channel_leak(text)
    assert fast is not None and (fast.span(), fast.lastgroup) == (whole.span(), whole.lastgroup)
    assert fast.lastgroup == "after_stop" and fast.start() > 190_000
