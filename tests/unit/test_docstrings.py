"""Docstrings and comments stand alone: they say a rule and its source in words, never "issue N" or a file
outside the repository.

A reader of the repository has neither the issue tracker's numbering nor the team's notes beside the
checkout (``DESIGN.md``, the reference notes, the developers' guide): a pointer to them explains
nothing. The design lives in ``docs/concepts/``; an upstream source is named in words (an OpenRouter
documentation page, a specification) or by its public address (``encode/httpx#3215``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: What a docstring or comment must not point to, with what to write instead.
FORBIDDEN: dict[str, str] = {
    r"\bissues? #?\d": "an issue number: say the rule, and its source in words",
    r"\.\./shared": "the folder beside the checkout: name $CANARY_SHARED_DIR, or say what is there",
    r"\bDEVELOPERS\.md": "the developers' guide outside the repository: say the rule (docs/development.md)",
    r"\bDESIGN\.md": "the design outside the repository: point to its page under docs/concepts/",
    r"\bCONVENTIONS\.md": "the conventions outside the repository: docs/development.md",
    r"\b(?:openrouter-api|tool-calls|faststream-nats|language-detection|operators|docs-and-auth)\.md":
        "a reference note outside the repository: name the upstream documentation in words",
    r"shared/reference/|shared/cases/README": "the team's data folder: say the rule or the format here",
}
#: Files that are prose for people (Markdown, where history may be told) or generated from the code.
SKIPPED = (".md", ".png", ".json")
#: This file names the patterns it looks for.
SELF = "tests/unit/test_docstrings.py"


def _tracked() -> list[Path]:
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    names = [n for n in done.stdout.decode().split("\0") if n]
    return [ROOT / n for n in names if not n.endswith(SKIPPED) and n != SELF]


def test_no_code_comment_or_docstring_points_to_an_issue_or_a_file_outside_the_repository():
    """Every tracked source, configuration and script file is free of issue numbers and outside pointers."""
    found: list[str] = []
    for path in _tracked():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for pattern, instead in FORBIDDEN.items():
            for m in re.finditer(pattern, text, flags=re.IGNORECASE if "issue" in pattern else 0):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r} ({instead})")
    assert not found, "\n".join(found)
