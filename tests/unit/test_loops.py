"""The services' event loop (canary/loops.py): uvloop where it is installed, asyncio's own when asked or missing."""

from __future__ import annotations

import asyncio

import pytest

from reverie_canary.canary import loops
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime.settings import Settings


async def _name() -> str:
    return loops.running_name()


def test_auto_and_uvloop_run_on_uvloop_where_it_is_installed() -> None:
    """``auto`` (the default) and ``uvloop`` make a uvloop loop; the running loop says so."""
    pytest.importorskip("uvloop")
    assert loops.run(_name()) == "uvloop"
    assert loops.run(_name(), "uvloop") == "uvloop"
    assert loops.loop_factory("auto")[1] == "uvloop"


def test_auto_keeps_a_process_that_runs_the_prober_on_asyncios_loop_and_uvloop_overrides_it() -> None:
    """The prober reads untrusted streams: under ``auto`` its process (alone or in ``canary up``) runs asyncio's loop."""
    pytest.importorskip("uvloop")
    assert loops.run(_name(), "auto", ["prober"]) == "asyncio"
    assert loops.loop_factory("auto", ["discovery", "prober", "judge"])[1] == "asyncio"
    assert loops.loop_factory("auto", ["judge"])[1] == "uvloop"
    assert loops.run(_name(), "uvloop", ["prober"]) == "uvloop"


def test_asyncio_runs_on_asyncios_own_loop() -> None:
    """``asyncio`` makes asyncio's default loop (no factory)."""
    assert loops.loop_factory("asyncio") == (None, "asyncio")
    assert loops.run(_name(), "asyncio") == "asyncio"


def test_auto_falls_back_to_asyncio_and_uvloop_is_refused_when_uvloop_is_missing(monkeypatch) -> None:
    """Without uvloop, ``auto`` runs on asyncio's loop and ``uvloop`` is refused in one line, its coroutine closed."""
    monkeypatch.setattr(loops, "_uvloop_factory", lambda: None)
    assert loops.loop_factory("auto") == (None, "asyncio")
    assert loops.run(_name(), "auto") == "asyncio"
    main = _name()
    with pytest.raises(ConfigError, match="uvloop is not installed"):
        loops.run(main, "uvloop")
    assert main.cr_frame is None  # closed, so no "never awaited" warning


def test_an_unknown_loop_is_refused_by_the_settings_and_by_the_factory() -> None:
    """``event_loop`` is one of auto, uvloop, asyncio."""
    with pytest.raises(ConfigError, match="event_loop"):
        Settings.load(env={"CANARY_EVENT_LOOP": "trio"})
    with pytest.raises(ConfigError, match="event_loop"):
        loops.loop_factory("trio")
    assert Settings.load(env={"CANARY_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"
    assert Settings.load(env={}).event_loop == "auto"


def test_running_name_inside_an_asyncio_loop() -> None:
    """A plain ``asyncio.run`` loop is named ``asyncio``."""
    assert asyncio.run(_name()) == "asyncio"
