"""Leaked tokens by kind, not by string: template, reserved and channel tokens.

Three families of leaked tokens (docs/concepts/probes.md, behavioural integrity),
each found on one *normalised view* of the reply (:func:`token_view`):

- **control tokens** (``control_tokens``): chat-template, end-of-turn and
  reasoning tokens (``<|im_end|>``, ``[INST]``, ``<think>``, SentencePiece
  byte fallback ``<0x0A>``).  Tool-call tokens (``<|tool_call_begin|>``,
  ``<｜tool▁sep｜>``, ``[TOOL_CALLS]``, ``<tool_call>``, Harmony's
  ``<|constrain|>`` and ``<|call|>``; :data:`TOOL_TOKEN`) are found by the same
  scan but belong to the tool-call markup family
  (:func:`reverie_canary.client.checks.tools.check_tool_markup`,
  ``tool_markup_in_content``): one defect, one check;
- **reserved and placeholder tokens** (``reserved_tokens``): vocabulary slots
  no model should ever sample, recognised by their *pattern*, numbered or
  not (Gemma ``<unused123>``, T5 ``<extra_id_7>``, Llama 3
  ``<|reserved_special_token_42|>``, BERT ``[PAD]`` ``[unused12]``, ``<pad>``,
  ``<unk>``, ``<mask>``, ``<|endoftext|>`` and its spellings
  ``<|end_of_text|>``, ``<endoftext>``, Qwen ``<|extra_0|>``, DeepSeek
  ``<｜place▁holder▁no▁12｜>``, Mistral ``[control_8]``, Gemma's multimodal
  placeholders ``<start_of_image>`` ``<end_of_audio>`` ``<image_soft_token>``
  and their audio/video/speech kin; bare HTML ``<video>`` ``<audio>`` pass);
- **channel text with its markers stripped** (``channel_leak``): a parser
  that removed the Harmony ``<|start|>``/``<|channel|>``/``<|message|>``
  tokens but kept the channel's text leaves the channel names glued to the
  words around them (``analysisThe user wants a scene…assistantfinalMira
  lifts the lamp``; gpt-oss's Harmony format, channels ``analysis``,
  ``commentary``, ``final``).  A stripped tool-call header
  (``commentary to=functions.x``) is tool-call markup, not channel text.

The view makes one pattern cover every spelling of a delimiter:

- full-width and look-alike bars (``｜`` U+FF5C, ``│`` U+2502, ``∣`` U+2223,
  ``︱`` U+FE31, ``￨`` U+FFE8, ``❘`` U+2758 ...) read as ``|``; full-width ``＜ ＞ ［ ］ ＿`` as ASCII; SentencePiece's
  U+2581 ``▁`` between the words of a token as ``_`` (DeepSeek's
  ``<｜tool▁calls▁begin｜>`` is ``<|tool_calls_begin|>``).  One character
  for one character, so offsets in the view are offsets in the reply;
- **code is not leakage**: inline code spans and fenced
  blocks (CommonMark: an unclosed fence runs to the end) are blanked, so a
  reply that explains what ``<think>`` does in backticks passes and the same
  token bare in the prose still fails;
- **markup is not leakage**: HTML's strikethrough ``<s>…</s>`` spells like
  the SentencePiece sequence tokens; a pair inside a line with text after it
  is markup, a lone or trailing ``</s>`` a leak (:func:`strikethrough_end`).

Every function is pure; a reply without ``<``, ``[`` or their full-width forms
is passed after one scan per trigger character (benchmarks/checks_bench.py).
"""

from __future__ import annotations

import functools
import re

from reverie_canary.client.reply import CheckResult, ProbeSpec, Reply

# -- the normalised view -----------------------------------------------------------

#: One character for one character: look-alike bars, full-width brackets and
#: SentencePiece's space symbol in their ASCII form.
_BARS = "\uff5c\u2502\u2223\u01c0\ufe31\ufe32\uffe8\u2758\u23d0\u05c0"  # ｜ │ ∣ ǀ ︱ ︲ ￨ ❘ ⏐ ׀
CONFUSABLES = str.maketrans({
    **dict.fromkeys(_BARS, "|"),
    "\uff1c": "<", "\uff1e": ">", "\uff3b": "[", "\uff3d": "]", "\uff3f": "_",
    "\u2581": "_",
})
_CONFUSABLE_CHARS = _BARS + "\uff1c\uff1e\uff3b\uff3d\uff3f\u2581"

#: A fenced block (``` or ~~~, to its closing fence or the end) or an inline
#: code span (a run of backticks, to the same run on the same line).
_CODE = re.compile(r"(?P<fence>```+|~~~+).*?(?:(?P=fence)|\Z)|(?P<tick>`+)[^`\n](?:[^\n]*?[^`\n])?(?P=tick)(?!`)",
                   re.DOTALL)


#: The same, with only fences that close (a fence left open is not matched as a block).
_CLOSED_CODE = re.compile(r"(?P<fence>```+|~~~+).*?(?P=fence)|(?P<tick>`+)[^`\n](?:[^\n]*?[^`\n])?(?P=tick)(?!`)",
                          re.DOTALL)


def mask_code(text: str, *, unclosed: bool = True) -> str:
    """``text`` with every inline code span and fenced block blanked (same length).

    Newlines inside a fenced block are kept, so line starts stay line starts.
    ``unclosed=False`` leaves a fence that never closes as it is (a reply cut
    at its budget inside a block: what it holds may be a runaway).
    Returns ``text`` itself when it holds no backtick or ``~~~``.
    """
    if "`" not in text and "~~~" not in text:
        return text
    return (_CODE if unclosed else _CLOSED_CODE).sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def token_view(text: str) -> str:
    """The view of ``text`` that the token patterns read: code blanked, delimiters in ASCII.

    The last few texts' views are kept: the checks of one reply (control,
    reserved and tool-call markup) read the same view.

    Args:
        text: the reply's visible text.

    Returns:
        A string of the same length as ``text`` (offsets agree): code spans
        and fenced blocks replaced by spaces (:func:`mask_code`), then the
        characters of :data:`CONFUSABLES` replaced by their ASCII forms.
    """
    if "`" not in text and "~~~" not in text and not any(ch in text for ch in _CONFUSABLE_CHARS):
        return text
    return _token_view(text)


@functools.lru_cache(maxsize=8)
def _token_view(text: str) -> str:
    view = mask_code(text)
    if any(ch in view for ch in _CONFUSABLE_CHARS):
        view = view.translate(CONFUSABLES)
    return view


def _has_trigger(text: str) -> bool:
    return "<" in text or "[" in text or "\uff1c" in text or "\uff3b" in text


# -- the token patterns ------------------------------------------------------------

#: Reserved and placeholder token names (all lower or all upper case), numbered or not.
_RESERVED_NAMES = (
    r"unused|reserved(?:_special)?(?:_token)?|special(?:_token)?|extra(?:_id)?|dummy|place_?holder(?:_no)?"
    r"|pad(?:ding)?(?:_token)?|unk(?:_token)?|mask(?:_token)?|sep(?:_token)?|cls(?:_token)?"
    r"|end_?of_?text|start_?of_?text|endoftext|startoftext|eos(?:_token)?|bos(?:_token)?"
    r"|(?:start|end|begin)_of_(?:image|audio|video|speech)|(?:image|audio|video)_soft(?:_token)?"
)
RESERVED_TOKEN = re.compile(
    rf"<\|?\s?(?:{_RESERVED_NAMES}|{_RESERVED_NAMES.upper()})(?:[_-]?\d{{1,6}})?\s?\|?>"  # <unused12> <|reserved_special_token_4|> <PAD>
    r"|\[(?:PAD|UNK|CLS|SEP|MASK|EOS|BOS|EOT)\]"                     # BERT-style, upper case only
    r"|\[(?:unused|control|SPECIAL)_?\d{1,6}\]"                        # [unused12] [control_8] [SPECIAL_3]
)

#: Chat-template, end-of-turn, reasoning and tool-call tokens (FC-11), read on
#: the view (so ``<｜end▁of▁sentence｜>`` is ``<|end_of_sentence|>``).
CONTROL_TOKEN = re.compile(
    r"<\|\s?[A-Za-z][\w.-]{0,48}\s?\|>"                 # <|im_end|> <|eot_id|> <|tool_call_begin|> <|channel|>
    r"|\[/?INST\]|\[/?(?:TOOL_CALLS|AVAILABLE_TOOLS|TOOL_RESULTS|SYSTEM_PROMPT)\]"  # Llama 2 / Mistral
    r"|</?(?:think|thinking|tool_call|tool_response|function_call|start_of_turn|end_of_turn)>"
    r"|</s>|<s>(?=\S)"
    r"|<0x[0-9A-Fa-f]{2}>"                              # SentencePiece byte fallback
    r"|<(?:start|end)_of_turn>",
)

#: Tool-call tokens of every serving family, read on the view (the serving stacks' tool-call parsers): Kimi's
#: ``<|tool_calls_section_begin|>`` ``<|tool_call_begin|>`` ``<|tool_call_argument_begin|>``,
#: DeepSeek's ``<｜tool▁calls▁begin｜>`` ``<｜tool▁sep｜>`` (any ``<|tool…|>`` or ``<|function…|>``),
#: Llama's ``<|python_tag|>`` ``<|python_start|>``, Harmony's ``<|constrain|>`` ``<|call|>``,
#: InternLM's ``<|action_start|>`` ``<|plugin|>``, Mistral's ``[TOOL_CALLS]`` ``[ARGS]``
#: ``[CALL_ID]`` ``[TOOL_RESULTS]`` ``[AVAILABLE_TOOLS]``, Hermes/Qwen's ``<tool_call>``
#: ``<tool_response>``, ``<function_call>``.
TOOL_TOKEN = re.compile(
    r"<\|\s?(?:tool|function)[\w.-]{0,44}\s?\|>"
    r"|<\|\s?(?:python_tag|python_start|python_end|constrain|call|plugin|interpreter|action_start|action_end)\s?\|>"
    r"|\[/?(?:TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS|TOOL_CONTENT|ARGS|CALL_ID)\]"
    r"|</?(?:tool_calls?|tool_response|tool_use|function_calls?)>"
)

#: Every kind; reserved first, then tool-call tokens, so that a token is classified once.
_ANY_TOKEN = re.compile(f"(?P<reserved>{RESERVED_TOKEN.pattern})|(?P<tool>{TOOL_TOKEN.pattern})"
                        f"|(?P<control>{CONTROL_TOKEN.pattern})")
_OPENER = re.compile(r"[<\[]")


def find_tokens(text: str) -> tuple[tuple[str, int, int], ...]:
    """Every leaked template, tool-call or reserved token of ``text`` outside code.

    The scan is shared by the checks of the three families (control, reserved,
    tool-call markup): the last few texts' results are kept, so one reply is
    scanned once whatever the number of checks asking.

    Returns:
        ``((kind, start, end), ...)`` in order, ``kind`` ``reserved``, ``tool``
        or ``control``; offsets index ``text`` (the view keeps them).
    """
    if not _has_trigger(text):
        return ()
    return _find_tokens(text)


@functools.lru_cache(maxsize=8)
def _find_tokens(text: str) -> tuple[tuple[str, int, int], ...]:
    view = token_view(text)
    out: list[tuple[str, int, int]] = []
    end = 0
    match = _ANY_TOKEN.match
    for opener in _OPENER.finditer(view):  # the patterns all open with < or [: try them only there
        at = opener.start()
        if at < end:
            continue
        if view.startswith("<s>", at):
            close = strikethrough_end(view, at)
            if close is not None:
                end = close  # <s>...</s> inside a line: markup, and its </s> with it
                continue
        m = match(view, at)
        if m is None:
            continue
        out.append((m.lastgroup, m.start(), m.end()))
        end = m.end()
    return tuple(out)


#: Characters a strikethrough's content holds at most (a word to a clause).
STRIKETHROUGH_CHARS = 200


def strikethrough_end(view: str, start: int) -> int | None:
    """Where the strikethrough that opens with the ``<s>`` at ``start`` ends, or ``None`` if it is a token.

    HTML's ``<s>`` element spells like the SentencePiece begin-of-sequence
    token, its ``</s>`` like the end one.  Context decides: ``<s>`` with its
    own ``</s>`` further on the same line (at most
    :data:`STRIKETHROUGH_CHARS` characters between, no other ``<s>``) and
    text after the pair is markup (``the price was <s>$20</s> $15``); a lone
    ``</s>``, an ``<s>`` never closed, or a pair that ends the reply (a
    generation wrapped in its begin and end tokens, ``<s>Hello!</s>``) is a
    leaked token.

    Returns:
        The offset just after the closing ``</s>``, or ``None``.
    """
    line_end = view.find("\n", start)
    limit = min(len(view) if line_end < 0 else line_end, start + 3 + STRIKETHROUGH_CHARS + 4)
    close = view.find("</s>", start + 3, limit)
    if close <= start + 3 or "<s>" in view[start + 3:close]:
        return None
    if not view[close + 4:].strip():
        return None  # the pair ends the reply: an end-of-sequence token
    return close + 4


def _token_result(name: str, reason: str, kind: str, reply: Reply) -> CheckResult:
    text = reply.text
    found = [(s, e) for k, s, e in find_tokens(text) if k == kind]
    if not found:
        return CheckResult(check=name, outcome="pass")
    start, end = found[0]
    return CheckResult(check=name, outcome="fail", reason=reason,
                       evidence={"token": text[start:end], "offset": start, "count": len(found),
                                 "tokens": sorted({text[s:e] for s, e in found})[:5]})


def check_control_tokens(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail leaked template, end-of-turn and reasoning tokens outside code (FC-11's family).

    Tool-call tokens are left to the tool-call markup check (``tool_markup_in_content``).

    Every bar and spacer spelling counts (:func:`token_view`: ``<｜User｜>``,
    ``<|tool▁calls▁begin|>``); a token in an inline code span or a fenced
    block does not.
    Evidence: ``token`` (the first one), ``offset``, ``count``, ``tokens``
    (up to five distinct).
    """
    return _token_result("corruption.control_tokens", "control_tokens", "control", reply)


def check_reserved_tokens(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail reserved and placeholder tokens anywhere outside code.

    The family by pattern (:data:`RESERVED_TOKEN`): ``<unused123>``,
    ``<extra_id_7>``, ``<|reserved_special_token_42|>``, ``[PAD]``,
    ``<pad>``, ``<|endoftext|>`` and its spellings, numbered kin, with any
    bar (:data:`CONFUSABLES`).  A sampler, quantization or vocabulary
    mismatch emits them; a template never does.
    Evidence: ``token``, ``offset``, ``count``, ``tokens``.
    """
    return _token_result("corruption.reserved_tokens", "reserved_tokens", "reserved", reply)


# -- channel text with the markers stripped ----------------------------------------------

_CH = r"(?:analysis|commentary|final)"
#: A letter that is not Latin (CJK, Cyrillic, Arabic ...), or a Latin capital.
_GLUE = r"(?:[A-Z\u00c0-\u00d6\u00d8-\u00de]|[^\W\d_A-Za-z\u00aa\u00b5\u00ba\u00c0-\u024f\u1e00-\u1eff])"
_OPENERS = r"(?:we|the|user|let|i|so|okay|ok|first|now|here|this|they)\b"

#: Where a stripped Harmony channel header shows (case-sensitive: the
#: channel names are lower case on the wire):
#:
#: - ``start``: the reply opens with a channel name glued to the next word
#:   (``analysisThe user…``, ``analysis用户…``, ``analysiswe need…``);
#: - ``role_channel``: the role and a channel glued together anywhere
#:   (``…so answer.assistantfinalMira…``);
#: - ``after_stop``: a channel name glued between a sentence's end and the
#:   next capital (``…scene.finalMira…``);
#: - ``end``: a role or channel name glued to the last sentence's stop.
CHANNEL_LEAK = re.compile(
    rf"(?P<start>\A\s*(?:assistant)?{_CH}(?={_GLUE}|{_OPENERS}))"
    rf"|(?P<role_channel>assistant{_CH})"
    rf"|(?P<after_stop>(?<=[.!?…。！？\"”’)\]]){_CH}(?={_GLUE}))"
    rf"|(?P<end>(?<=[.!?…。！？\"”’)\]])(?:assistant)?(?:{_CH}|assistant)\s*\Z)"
)
#: Where a :data:`CHANNEL_LEAK` match can begin besides the text's start: every
#: alternative but ``start`` opens with one of these words.
_CHANNEL_WORD = re.compile(r"assistant|analysis|commentary|final")


def find_channel_leak(view: str) -> re.Match[str] | None:
    """``CHANNEL_LEAK.search(view)``, tried only where a match can begin (the same match, 10x faster).

    A match begins at the text's start (``start``) or at a channel or role
    word (every other alternative); trying the pattern there alone, in order,
    finds the leftmost match as ``search`` does, without running its
    lookbehinds at every character (18 ms on a 256 KiB reply, which held the
    GIL and the event loop of every other probe).
    """
    m = CHANNEL_LEAK.match(view)
    if m is not None:
        return m
    for word in _CHANNEL_WORD.finditer(view):
        m = CHANNEL_LEAK.match(view, word.start())
        if m is not None:
            return m
    return None


def check_channel_leak(reply: Reply, spec: ProbeSpec) -> CheckResult:
    """Fail reasoning or channel text whose Harmony markers a parser stripped.

    Rule (:data:`CHANNEL_LEAK`, read outside code): a channel name
    (``analysis``, ``commentary``, ``final``), alone or after ``assistant``,
    glued without a space to the reply's first word, to a capital or a
    letter of another script after a sentence's end, to the end of the last
    sentence; ``assistant`` glued to a channel name anywhere (a Harmony
    recipient, ``commentary to=functions.x``, is tool-call markup:
    :mod:`.tools`).  Natural text never glues a
    lower-case word to a capital or another script: ``Analysis: …``,
    ``the final answer``, ``finalmente``, ``finale`` pass.
    Evidence: ``kind`` (the group above), ``marker``, ``offset``, ``span``
    (the text around it).
    """
    name = "corruption.channel_leak"
    text = reply.text
    if "analysis" not in text and "commentary" not in text and "final" not in text and "assistant" not in text:
        return CheckResult(check=name, outcome="pass")
    view = mask_code(text)
    m = find_channel_leak(view)
    if m is None:
        return CheckResult(check=name, outcome="pass")
    start = m.start() + (len(m.group()) - len(m.group().lstrip()))
    return CheckResult(check=name, outcome="fail", reason="channel_leak",
                       evidence={"kind": m.lastgroup, "marker": text[start:m.end()].strip(), "offset": start,
                                 "span": text[max(0, start - 30):m.end() + 30]})


def without_tokens(text: str) -> str:
    """``text`` with every special token's span blanked (for the byte-level marker count)."""
    spans = find_tokens(text)
    if not spans:
        return text
    out = []
    last = 0
    for _kind, s, e in spans:
        out.append(text[last:s])
        out.append(" " * (e - s))
        last = e
    out.append(text[last:])
    return "".join(out)
