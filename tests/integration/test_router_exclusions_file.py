"""The router's exclusions file caught while it is being saved: never read half-written."""

from __future__ import annotations

import asyncio

import pytest

from reverie_canary.services.router.service import Router
from reverie_canary.shared.service import Shell
from reverie_canary.shared.settings import Settings

pytestmark = pytest.mark.integration

ENTRY = ('[[exclusion]]\nprovider = "{p}"\nmodel = "*"\nreason = "measured defect"\nreference = "T-1"\n'
         'date = 2026-01-01\n')


async def test_a_file_truncated_and_then_written_is_read_only_once_it_holds_still(tmp_path):
    """An in-place save (truncate, pause, write) seen at the pause keeps the old exclusions, then loads the new."""
    path = tmp_path / "exclusions.toml"
    path.write_text(ENTRY.format(p="parasail/fp8"))
    router = Router(Shell("router", Settings.load(env={}, exclusions_file=str(path))))
    router.load_exclusions()
    published = []

    async def models():
        return []  # nothing to publish to; the test looks at what was loaded

    router.models = models
    router.publish_snapshot = lambda *a, **k: published.append(a)

    async def save_in_place():
        with open(path, "w") as f:  # truncates: for a moment the file is empty, which is valid TOML
            f.flush()
            await asyncio.sleep(0.1)
            f.write(ENTRY.format(p="parasail/fp8") + "\n" + ENTRY.format(p="novita/bf16"))

    saving = asyncio.create_task(save_in_place())
    await asyncio.sleep(0.02)
    assert path.stat().st_size == 0
    assert await router.check_exclusions_file() is False  # caught mid-save: not read
    assert [e.provider for e in router.exclusions] == ["parasail/fp8"]
    await saving
    assert await router.check_exclusions_file() is True
    assert [e.provider for e in router.exclusions] == ["parasail/fp8", "novita/bf16"]
