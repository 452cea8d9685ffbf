"""The 17 languages and the arithmetic of their rotation: what the settings and discovery both need.

The table itself is the light distribution's (:mod:`reverie_canary.client.languages`: the reply
checks read it too); the coverage below says how many language probes a provider gets per
cycle so that every language is probed within ``language_coverage_cycles`` cycles (the bound on
the time to detect a one-language defect).  The settings refuse a spread that cannot keep the
bound; discovery plans with it.
"""

from __future__ import annotations

import math

import msgspec

from reverie_canary.client.languages import LANGUAGE_NAMES, LANGUAGES
from reverie_canary.shared.contract.errors import CanaryError

__all__ = ["DEFAULT_COVERAGE_CYCLES", "LANGUAGES", "LANGUAGE_NAMES", "Coverage", "CoverageError", "coverage"]

#: The default bound on the time to detect a one-language defect, in cycles.
DEFAULT_COVERAGE_CYCLES = 4


class CoverageError(CanaryError, ValueError):
    """Language settings that cannot keep the coverage bound (the message names the settings)."""


class Coverage(msgspec.Struct, frozen=True, kw_only=True):
    """How the language probes of one provider are spread over cycles.

    Attributes:
        languages: how many languages are configured.
        coverage_cycles: the setting ``language_coverage_cycles``.
        per_cycle: language probes per provider per cycle (retests come on top).
        rotated: how many of them walk the rotation; the rest (``per_cycle -
            rotated``) are drawn by traffic share (0 without weights).
        bound_cycles: every language is probed at least once in every this
            many consecutive cycles, ``ceil(languages / rotated)`` (at most
            ``coverage_cycles``).
    """

    languages: int
    coverage_cycles: int
    per_cycle: int
    rotated: int
    bound_cycles: int


def coverage(languages: int, coverage_cycles: int = DEFAULT_COVERAGE_CYCLES, languages_per_cycle: int = 0,
             weighted: bool = False) -> Coverage:
    """The spread of language probes that keeps every language within ``coverage_cycles`` cycles.

    Args:
        languages: number of configured languages (at least 1).
        coverage_cycles: the bound, in cycles (at least 1).
        languages_per_cycle: 0 (the minimum the bound needs) or a larger number
            of language probes per provider per cycle.
        weighted: the probes above the minimum are drawn by traffic share
            (``language_weights``); then ``languages_per_cycle`` must be above
            the minimum, or the weights would change nothing.

    Returns:
        The :class:`Coverage`; the minimum is ``ceil(languages / coverage_cycles)``.

    Raises:
        CoverageError: ``languages_per_cycle`` is set below the minimum, or
            above the number of languages, or weights have no probe to share.
    """
    if languages < 1 or coverage_cycles < 1:
        raise CoverageError("language_coverage_cycles needs at least one language and one cycle")
    least = math.ceil(languages / coverage_cycles)
    per_cycle = languages_per_cycle or least
    if per_cycle < least:
        raise CoverageError(
            f"languages_per_cycle {per_cycle} cannot probe {languages} languages within language_coverage_cycles "
            f"{coverage_cycles}: it needs {least} (0 derives it); or raise language_coverage_cycles to "
            f"{math.ceil(languages / per_cycle)}")
    if per_cycle > languages:
        raise CoverageError(f"languages_per_cycle {per_cycle} is above the {languages} languages configured")
    if weighted and per_cycle <= least:
        raise CoverageError(
            f"language_weights share the language probes above the {least} a cycle that "
            f"language_coverage_cycles {coverage_cycles} needs: set languages_per_cycle above {least}")
    rotated = least if weighted else per_cycle
    return Coverage(languages=languages, coverage_cycles=coverage_cycles, per_cycle=per_cycle, rotated=rotated,
                    bound_cycles=math.ceil(languages / rotated))


