"""The product's 17 interface languages, once: ISO 639-1 code and the English name a prompt says.

Reverie speaks these 17 languages; the canary probes each of them and the reply checks read
replies in them.  Every list of languages in either distribution derives from this table
(the settings' default, the checks' detectors, the prober's prompts, the simulator's text).
"""

from __future__ import annotations

#: ISO 639-1 code -> the language's English name, as a prompt says it ("Write your reply in Portuguese.").
LANGUAGE_NAMES: dict[str, str] = {
    "en": "English", "es": "Spanish", "pt": "Portuguese", "fr": "French",
    "de": "German", "it": "Italian", "nl": "Dutch", "pl": "Polish",
    "ru": "Russian", "uk": "Ukrainian", "tr": "Turkish", "ar": "Arabic",
    "ja": "Japanese", "ko": "Korean", "zh": "Chinese", "id": "Indonesian",
    "vi": "Vietnamese",
}
#: The 17 codes, in the table's order.
LANGUAGES: tuple[str, ...] = tuple(LANGUAGE_NAMES)
