"""The documentation's reference pages are what the code generates now, and every code they list means something.

The pages under ``docs/reference/`` (all but ``index.md``) are rendered by
``reverie_canary.canary.reference`` from the code's own tables; a page that differs from
what the code renders now is stale. The fix is one command: ``canary docs --write``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from reverie_canary.canary import reference
from reverie_canary.client.reasons import REASONS, meaning
from reverie_canary.shared.runtime.settings import AT_LEAST, AT_LEAST_BYTES, CHOICES, POSITIVE, RELATIONS, Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def standard_ports(monkeypatch):
    """The metrics page shows the standard ports, which the suite's own fixture moves to free ones."""
    from reverie_canary.shared.runtime import metrics
    from tests.conftest import STANDARD_METRICS_PORTS

    monkeypatch.setattr(metrics, "STANDARD_PORTS", dict(STANDARD_METRICS_PORTS))


@pytest.mark.parametrize("rel", sorted(reference.PAGES))
def test_the_committed_reference_page_is_what_the_code_generates(rel):
    """A reference page differs from what its source renders now: regenerate it, never edit it by hand."""
    path = ROOT / "docs" / rel
    assert path.exists(), f"docs/{rel} is missing: run `{reference.FIX}`"
    assert path.read_text(encoding="utf-8") == reference.PAGES[rel](), (
        f"docs/{rel} is stale (the code changed): run `{reference.FIX}` and commit the pages")


def test_every_setting_has_its_meaning_in_the_settings_docstring():
    """The settings page takes each setting's meaning from the Settings docstring: none may be missing."""
    import msgspec

    described = reference.setting_descriptions()
    missing = [f.name for f in msgspec.structs.fields(Settings) if not described.get(f.name)]
    assert not missing, (f"settings without a line in the Attributes section of Settings' docstring "
                         f"(shared/runtime/settings.py): {missing}; add one, then run `{reference.FIX}`")
    unknown = sorted(set(described) - {f.name for f in msgspec.structs.fields(Settings)})
    assert not unknown, f"the Settings docstring describes fields that do not exist: {unknown}"


def test_every_bound_names_a_real_setting():
    """The bound tables the settings page prints name fields of Settings only (a renamed field would leave one behind)."""
    import msgspec

    fields = {f.name for f in msgspec.structs.fields(Settings)}
    for table in (POSITIVE, AT_LEAST, AT_LEAST_BYTES, CHOICES, RELATIONS):
        assert set(table) <= fields, sorted(set(table) - fields)


def test_a_bound_in_the_tables_is_what_loading_enforces():
    """Each simple bound refuses the value just past it and takes the bound itself, naming the setting."""
    from reverie_canary.shared.contract.errors import ConfigError

    base = Settings()
    for name, least in AT_LEAST.items():
        with pytest.raises(ConfigError, match=name):
            base.replace(**{name: least - 1})
    for name in POSITIVE:
        with pytest.raises(ConfigError, match=name):
            base.replace(**{name: 0})
    for name, least in AT_LEAST_BYTES.items():
        with pytest.raises(ConfigError, match=name):
            base.replace(**{name: least - 1})
        assert getattr(base.replace(**{name: least}), name) == least


def _literal_reasons() -> dict[str, str]:
    """Every string literal a check or the prober gives as a reason code or a transport error, with its file."""
    found: dict[str, str] = {}
    sources = [ROOT / "client" / "reply.py", ROOT / "client" / "chunks.py", *(ROOT / "client" / "checks").glob("*.py"),
               *(ROOT / "services" / "prober").glob("*.py")]
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            values: list[ast.expr] = []
            if isinstance(node, ast.keyword) and node.arg in ("reason", "transport_error"):
                values = [node.value]
            elif isinstance(node, ast.Assign):
                for target in node.targets:  # state.transport_error = "..." and state.cut, state.transport_error = ...
                    pairs = (zip(target.elts, node.value.elts, strict=False)
                             if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                             else [(target, node.value)])
                    values += [v for t, v in pairs if isinstance(t, ast.Attribute) and t.attr == "transport_error"]
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
                    found.setdefault(value.value, str(path.relative_to(ROOT)))
    return found


def test_every_reason_code_a_check_gives_has_its_meaning():
    """A check that gives a new reason code (a string literal) without a line in client/reasons.py fails here."""
    missing = {code: where for code, where in _literal_reasons().items() if meaning(code) is None}
    assert not missing, (f"reason codes without a meaning in REASONS (client/reasons.py): {missing}; "
                         f"add each, then run `{reference.FIX}`")


def test_the_reason_table_covers_the_codes_the_checks_document():
    """The stable codes the checks' docstring lists all have a meaning (the docstring and the table agree)."""
    import re

    from reverie_canary.client import checks

    _, _, listed = (checks.__doc__ or "").partition("Reason codes (stable):")
    codes = {c for c in re.findall(r"``([a-z_]+)``", listed) if not c.startswith("http_")}
    codes -= {"pass", "fail", "inconclusive", "not_applicable", "blind", "transport_error"}
    assert codes and not sorted(c for c in codes if c not in REASONS)


def test_the_docs_command_says_which_page_is_stale(tmp_path):
    """`canary docs --check` fails on a stale page and names the command that fixes it."""
    from typer.testing import CliRunner

    from reverie_canary.canary.cli import app

    result = CliRunner().invoke(app, ["docs", "--check"])
    assert result.exit_code == 0, result.output
    assert reference.stale(tmp_path) == list(reference.PAGES)
