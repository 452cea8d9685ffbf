"""A demo pipeline running in a thread of its own, and the one default demo several test modules read.

Each of ``test_dashboard_browser``, ``test_evidence_demo``, ``test_observability``,
``test_pipeline`` and ``test_status`` used to start a default demo of its own (embedded
NATS and Redis, the simulated gateway, all five services, the dashboard) and wait three
or more of its cycles, about 20 s each, to read the same kind of run.  They read one now: the
``default_demo`` fixture (``tests/conftest.py``) starts :data:`SHARED` for the first of
them, the collection puts their modules next to each other, and the demo stops after the
last of them (well inside the default ladder's first step, so no suspension ends while
they read).  None of them changes the demo (no operator command, no fault): each asserts
what it did before on a run that is the same as its own was, only shared.  One test that
changes it (``test_demo_keep``'s operator override: fixture ``default_demo_last``) runs
after all of them, as its last reader.

The demo runs as ``canary demo --probers 2`` runs it: the default fleet with its dashboard,
the reviewed exclusions of ``config/demo-exclusions.toml`` (the refusal control is ignored by
layer 1 from the first snapshot), two probers on one durable (``test_status`` reads how they split the cycles; the probers'
metrics are one process's, one endpoint), on the real sentences of
``data/lang/sentences`` of the data folder (``$CANARY_SHARED_DIR``) when they are there.
Without the demo's chat traffic: it runs in the demo's own process, and on a busy 2-core CI
machine its load froze a healthy provider's cycle in two clean-clone runs of the suite, which
the readers here count exactly; ``test_live_demo`` runs the demo with its traffic.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from reverie_canary.canary.demo import as_the_demo, pipeline

T = TypeVar("T")


class RunningDemo:
    """A demo pipeline running in its own thread and event loop.

    :meth:`call` runs a coroutine on the demo's loop from plain code, :meth:`run`
    from another event loop (an async test); both are bounded.
    """

    def __init__(self, workdir: Path, **pipeline_kwargs: Any) -> None:
        self.workdir = workdir
        self.kwargs = pipeline_kwargs
        self.ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop: asyncio.Event | None = None
        self.p = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="demo", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self.loop, self.stop = asyncio.get_running_loop(), asyncio.Event()
            async with pipeline(workdir=self.workdir, **self.kwargs) as p:
                self.p = p
                self.ready.set()
                await self.stop.wait()

        try:
            asyncio.run(main())
        except BaseException as exc:  # said by the fixture, not lost in the thread
            self.error = exc
        finally:
            self.ready.set()

    def start(self, timeout_s: float = 120.0) -> RunningDemo:
        """Start the demo's thread and wait until every service runs.

        Raises:
            AssertionError: the demo did not start within ``timeout_s`` seconds.
            BaseException: whatever the pipeline raised while it started.
        """
        self.thread.start()
        assert self.ready.wait(timeout=timeout_s), f"the demo did not start within {timeout_s:g} s"
        if self.error is not None:
            raise self.error
        return self

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
        """Run ``coro`` on the demo's loop and return its result (at most ``timeout_s`` seconds)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout_s)

    async def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 90.0) -> T:
        """:meth:`call` from an async test: await ``coro`` run on the demo's loop (at most ``timeout_s`` s)."""
        assert self.loop is not None
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.wrap_future(future)
        except TimeoutError:
            future.cancel()
            raise AssertionError(f"the demo did not answer within {timeout_s:g} s") from None

    @property
    def alive(self) -> bool:
        return self.thread.is_alive() and self.error is None

    def close(self) -> None:
        """Stop the pipeline (every service and server) and wait for its thread (bounded)."""
        if self.loop is not None and self.stop is not None and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop.set)
        if self.thread.ident is not None:
            self.thread.join(timeout=60)


class SharedDemo:
    """The one default demo of the modules that read it: started on first use, closed after its last reader."""

    def __init__(self) -> None:
        self.demo: RunningDemo | None = None
        self.sentences: str | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None

    def get(self, sentences_dir: Path) -> RunningDemo:
        """The running demo (started now when none runs)."""
        if self.demo is not None and self.demo.alive:
            return self.demo
        self.close()
        self.sentences = str(sentences_dir) if sentences_dir.is_dir() else None
        self._tmp = tempfile.TemporaryDirectory(prefix="canary-shared-demo-")
        demo = RunningDemo(Path(self._tmp.name), scenario="default", sentences=self.sentences, dashboard=True,
                           probers=2, **{**as_the_demo(), "traffic_rpm": 0.0})
        self.demo = demo
        return demo.start()

    def close(self) -> None:
        if self.demo is not None:
            self.demo.close()
            self.demo = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


#: The default demo the reading modules share (``tests/conftest.py``: fixture ``default_demo``).
SHARED = SharedDemo()
