"""The router's exclusions file caught while it is being saved: never read half-written."""

from __future__ import annotations

import asyncio

from reverie_canary.services.router.exclusions import ExclusionsFile
from tests import waits

ENTRY = ('[[exclusion]]\nprovider = "{p}"\nmodel = "*"\nreason = "measured defect"\nreference = "T-1"\n'
         'date = 2026-01-01\n')


async def test_a_file_truncated_and_then_written_is_read_only_once_it_holds_still(tmp_path):
    """An in-place save (truncate, pause, write) seen at the pause keeps the old exclusions, then loads the new."""
    path = tmp_path / "exclusions.toml"
    path.write_text(ENTRY.format(p="parasail/fp8"))
    watched = ExclusionsFile(str(path))
    first = watched.read_at_start()
    assert [e.provider for e in first.exclusions] == ["parasail/fp8"]

    truncated = asyncio.Event()

    async def save_in_place():
        with open(path, "w") as f:  # truncates: for a moment the file is empty, which is valid TOML
            f.flush()
            truncated.set()
            await asyncio.sleep(0.1)  # the pause of a slow editor, inside the settle time
            f.write(ENTRY.format(p="parasail/fp8") + "\n" + ENTRY.format(p="novita/bf16"))

    saving = asyncio.create_task(save_in_place())
    await waits.within(truncated.wait(), timeout_s=5, what="the save to truncate the file")
    assert path.stat().st_size == 0
    assert await watched.poll() is None  # caught mid-save: not read, the old exclusions stay in force
    await waits.within(saving, timeout_s=5, what="the save to finish")
    read = await watched.poll()
    assert read is not None and read.trigger == "file_changed"
    assert [e.provider for e in read.exclusions] == ["parasail/fp8", "novita/bf16"]
    assert read.digest != first.digest
    assert await watched.poll() is None  # read once per change
