"""The templates for hosts without Docker: NATS configurations a real nats-server accepts, systemd units that run the CLI.

The NATS templates (``shared/nats/host-*.conf``) take every host name and path from the
server's environment; each is checked here with ``nats-server -t`` (the configuration test)
from a copy in a directory of its own, as an operator would lay it out: ``server.conf`` beside
it, since NATS reads ``include`` relative to the including file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reverie_canary.canary.embedded import find_nats_server
from reverie_canary.shared.runtime.auth import USERS
from reverie_canary.shared.runtime.settings import SERVICE_NAMES

ROOT = Path(__file__).resolve().parents[2]
NATS = ROOT / "shared" / "nats"
SYSTEMD = ROOT / "deploy" / "systemd"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A CA and one server certificate for n1.internal, as PEM files."""
    import trustme

    out = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    cert = ca.issue_cert("n1.internal")
    ca.cert_pem.write_to_path(str(out / "ca.pem"))
    cert.private_key_pem.write_to_path(str(out / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(out / "cert.pem"))
    return out


def _environment(certs: Path) -> dict[str, str]:
    env = {f"CANARY_{user.upper()}_PASSWORD": f"p{user}secret" for user in USERS}
    env.update(NATS_SERVER_CERT_FILE=str(certs / "cert.pem"), NATS_SERVER_KEY_FILE=str(certs / "key.pem"),
               NATS_SERVER_CA_FILE=str(certs / "ca.pem"), CANARY_NATS_SERVER_NAME="n1",
               NATS_CLUSTER_LISTEN="127.0.0.1:6222", NATS_ROUTE_1="nats-route://n1.internal:6222",
               NATS_ROUTE_2="nats-route://n2.internal:6222", NATS_ROUTE_3="nats-route://n3.internal:6222",
               PATH="/usr/bin:/bin")
    return env


def _check(directory: Path, name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([find_nats_server(), "-t", "-c", str(directory / name)], env=env, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("name", ["host-tls.conf", "host-cluster.conf", "host-cluster-tls.conf"])
def test_a_host_template_is_a_valid_nats_configuration_beside_server_conf(name, certs, tmp_path):
    """Copied with server.conf (and host-tls.conf) into one directory, nats-server -t accepts the template."""
    for needed in ("server.conf", "host-tls.conf", name):
        shutil.copy(NATS / needed, tmp_path / needed)
    done = _check(tmp_path, name, _environment(certs))
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_template_names_no_compose_host_and_no_compose_path():
    """No host template names compose's services (nats-2 ...) or its /certs mount: both come from the environment."""
    for path in NATS.glob("host-*.conf"):
        body = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        assert "/certs" not in body and "nats-2" not in body and "nats://nats" not in body, path.name


def test_without_server_conf_beside_it_the_template_is_refused(certs, tmp_path):
    """The include is read from the including file's directory: a template copied alone fails the test."""
    shutil.copy(NATS / "host-tls.conf", tmp_path / "host-tls.conf")
    done = _check(tmp_path, "host-tls.conf", _environment(certs))
    assert done.returncode != 0
    assert "server.conf" in done.stdout + done.stderr


def _unit(path: Path) -> dict[str, list[str]]:
    """A systemd unit's ``Key=value`` lines (keys may repeat), by key."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_the_service_template_runs_canary_run_for_its_instance_and_stops_on_a_refused_setup():
    """canary@.service runs `canary run %i` as its own user, never loops on exit status 2, and reads its env files."""
    unit = _unit(SYSTEMD / "canary@.service")
    assert unit["ExecStart"] == ["/opt/reverie-canary/.venv/bin/canary run %i"]
    assert unit["RestartPreventExitStatus"] == ["2"]
    assert unit["User"] == ["canary"]
    assert "/etc/reverie-canary/%i.env" in unit["EnvironmentFile"]
    text = (SYSTEMD / "canary@.service").read_text()
    assert all(f"canary@{name}" in text for name in SERVICE_NAMES)


def test_every_unit_runs_a_command_the_cli_has():
    """Each unit's ExecStart names a canary command that exists (a renamed command would break a deployment)."""
    import typer

    from reverie_canary.canary.cli import app

    commands = set(typer.main.get_command(app).commands)
    for path in SYSTEMD.glob("*.service"):
        (start,) = _unit(path)["ExecStart"]
        binary, *args = start.split()
        if binary.endswith("/canary"):
            assert args[0] in commands, (path.name, args[0])
        else:
            assert binary.endswith("/nats-server") and "/etc/nats/host-tls.conf" in args, path.name


def test_the_host_certificates_are_one_pair_per_service_from_one_ca(tmp_path):
    """make-host-certs.sh issues a client pair per service and tool, all verifying against its CA, and a NATS
    certificate that the cluster template with TLS accepts."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    out = tmp_path / "certs"
    done = subprocess.run(["sh", str(ROOT / "deploy" / "make-host-certs.sh"), str(out),
                           "DNS:n1.internal,IP:127.0.0.1", "DNS:redis.internal"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    who = [*SERVICE_NAMES, "dashboard", "admin", "operator", "backend"]
    pems = [str(out / f"{name}.pem") for name in (*who, "nats", "redis")]
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(out / "ca.pem"), *pems], capture_output=True,
                              text=True, timeout=60)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert all(((out / f"{name}-key.pem").stat().st_mode & 0o077) == 0 for name in who)  # keys: owner only
    for needed in ("server.conf", "host-tls.conf", "host-cluster-tls.conf"):
        shutil.copy(NATS / needed, tmp_path / needed)
    env = {**_environment(out), "NATS_SERVER_CERT_FILE": str(out / "nats.pem"),
           "NATS_SERVER_KEY_FILE": str(out / "nats-key.pem"), "NATS_SERVER_CA_FILE": str(out / "ca.pem")}
    checked = _check(tmp_path, "host-cluster-tls.conf", env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
