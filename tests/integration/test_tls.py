"""The pipeline end to end over TLS only: NATS and Redis with no plain port.

A throwaway CA (``trustme``) signs the servers' certificate (127.0.0.1) and one client
certificate; both servers require it (mutual TLS). The five services, the demo's observer
and a chat backend's IgnoreListClient all connect with ``tls://`` and ``rediss://`` and
the settings' CA and client certificate.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import subprocess
import sys

import nats
import pytest
import redis.asyncio as aioredis
import trustme

from reverie_canary.canary.demo import pipeline
from reverie_canary.canary.embedded import ServerTls, start_nats, start_redis
from reverie_canary.client import IgnoreListClient, tls_context
from reverie_canary.shared.runtime.auth import generate_passwords, server_config, server_env
from reverie_canary.shared.runtime.service import nats_connect, redis_client
from reverie_canary.shared.runtime.settings import Settings
from tests.conftest import ROOT
from tests.waits import until, within

pytestmark = pytest.mark.integration

BROKEN = "baseten/fp8"


@pytest.fixture
def certs(tmp_path):
    """A CA, a server certificate for 127.0.0.1 / localhost and a client certificate, as PEM files."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("canary-client")
    files = {name: tmp_path / f"{name}.pem" for name in ("ca", "server", "server-key", "client", "client-key")}
    ca.cert_pem.write_to_path(files["ca"])
    server.cert_chain_pems[0].write_to_path(files["server"])
    server.private_key_pem.write_to_path(files["server-key"])
    client.cert_chain_pems[0].write_to_path(files["client"])
    client.private_key_pem.write_to_path(files["client-key"])
    return {name: str(path) for name, path in files.items()}


async def _quiet(_exc: Exception) -> None:
    return None


async def test_the_pipeline_runs_end_to_end_over_tls_only(tmp_path, certs):
    """Cycles close, the broken provider is suspended and a chat backend over TLS gets the ignore list."""
    server_tls = ServerTls(cert_file=certs["server"], key_file=certs["server-key"], ca_file=certs["ca"])
    client_files = {"nats_ca_file": certs["ca"], "nats_cert_file": certs["client"], "nats_key_file": certs["client-key"],
                    "redis_ca_file": certs["ca"], "redis_cert_file": certs["client"],
                    "redis_key_file": certs["client-key"]}
    async with pipeline(workdir=tmp_path / "run", scenario="default", tls=server_tls, **client_files) as p:
        settings = p.settings
        assert settings.nats_url.startswith("tls://127.0.0.1:") and settings.redis_url.startswith("rediss://")
        host_port = settings.nats_url.removeprefix("tls://")
        redis_port = settings.redis_url.rsplit(":", 1)[1].split("/")[0]

        # TLS only: plain text, or TLS without the client certificate, does not get in
        with pytest.raises(Exception):  # noqa: B017 (refused: the error's class is the library's and the platform's)
            await nats.connect(f"nats://{host_port}", allow_reconnect=False, connect_timeout=2, error_cb=_quiet)
        with pytest.raises(Exception):  # noqa: B017 (refused: the error's class is the library's and the platform's)
            await nats.connect(settings.nats_url, tls=tls_context(certs["ca"]), user="admin",
                               password=p.passwords["admin"], allow_reconnect=False, connect_timeout=2,
                               error_cb=_quiet)
        plain = aioredis.from_url(f"redis://127.0.0.1:{redis_port}/0", socket_connect_timeout=2, socket_timeout=2)
        try:
            with pytest.raises(Exception):  # noqa: B017 (refused: the error's class is the library's and the platform's)
                await plain.ping()
        finally:
            await plain.aclose()

        # the pipeline works over TLS: cycles close and the broken provider ends up ignored
        assert await p.wait_cycles(3)
        await until(lambda: p.observer.snapshot is not None and BROKEN in p.observer.snapshot.ignore,
                    timeout_s=60, what="the broken provider in the ignore list")
        version = p.observer.snapshot.version

        # and a chat backend reads it over TLS with its own certificate and NATS user
        backend = IgnoreListClient(settings.nats_url, settings.models[0], user="backend",
                                   password=p.passwords["backend"],
                                   tls=tls_context(certs["ca"], certs["client"], certs["client-key"]))
        await backend.start()
        try:
            assert await backend.wait_ready(10.0), backend.problem
            await until(lambda: backend.version >= version, timeout_s=10, what="the backend's snapshot version")
            assert BROKEN in backend.provider()["ignore"]
        finally:
            await backend.stop()

        # the example chat backend, configured the way docs/deployment/security.md says
        env = {**os.environ, "NATS_URL": settings.nats_url, "NATS_USER": "backend",
               "NATS_PASSWORD": p.passwords["backend"], "CANARY_NATS_CA_FILE": certs["ca"],
               "CANARY_NATS_CERT_FILE": certs["client"], "CANARY_NATS_KEY_FILE": certs["client-key"],
               "CANARY_MODELS": settings.models[0]}
        proc = await asyncio.create_subprocess_exec(sys.executable, str(ROOT / "examples" / "chat_backend.py"),
                                                    "--requests", "1", "--interval", "0", env=env,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await within(proc.communicate(), timeout_s=60, what="the example chat backend over TLS")
        assert proc.returncode == 0, err.decode()
        assert BROKEN in out.decode().split("request  1: provider=", 1)[1].splitlines()[0], out.decode()


def test_a_client_context_verifies_the_server_against_the_ca(certs):
    """tls_context trusts only the given CA, checks host names, and needs a key with its certificate."""
    context = tls_context(certs["ca"], certs["client"], certs["client-key"])
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname is True
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    with pytest.raises(ValueError, match="both"):
        tls_context(certs["ca"], certs["client"], "")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="deploy/make-certs.sh needs openssl")
async def test_the_compose_tls_files_make_working_servers_and_clients(tmp_path):
    """deploy/make-certs.sh's certificates with shared/nats/tls.conf and compose.tls.yaml's Redis flags.

    The services' own connections (nats_connect, redis_client) get in with the client
    certificate; the server's certificate names localhost as well as its compose service.
    """
    certs = tmp_path / "certs"
    subprocess.run(["sh", str(ROOT / "deploy" / "make-certs.sh"), str(certs), "2"], check=True, capture_output=True,
                   timeout=60)
    passwords = generate_passwords()
    conf = tmp_path / "nats"
    conf.mkdir()
    shutil.copyfile(server_config(), conf / "server.conf")
    (conf / "tls.conf").write_text((ROOT / "shared" / "nats" / "tls.conf").read_text().replace("/certs", str(certs)))
    nats_server = start_nats(conf, conf / "tls.conf", env=server_env(passwords))
    redis_server = start_redis(tmp_path / "redis", tls=ServerTls(cert_file=certs / "redis.pem",
                                                                  key_file=certs / "redis-key.pem",
                                                                  ca_file=certs / "ca.pem"))
    try:
        settings = Settings.load(env={}, nats_url=f"tls://localhost:{nats_server.port}", nats_user="admin",
                                 nats_password=passwords["admin"],
                                 redis_url=f"rediss://localhost:{redis_server.port}/0",
                                 nats_ca_file=str(certs / "ca.pem"), nats_cert_file=str(certs / "client.pem"),
                                 nats_key_file=str(certs / "client-key.pem"), redis_ca_file=str(certs / "ca.pem"),
                                 redis_cert_file=str(certs / "client.pem"),
                                 redis_key_file=str(certs / "client-key.pem"))
        nc = await nats_connect(settings)
        try:
            assert nc.is_connected and nc.connected_url.scheme == "tls"
        finally:
            await nc.close()
        client = redis_client(settings)
        try:
            assert await client.ping() is True
        finally:
            await client.aclose()
        # without the client certificate, Redis says no
        bare = redis_client(settings.replace(redis_cert_file="", redis_key_file=""))
        try:
            with pytest.raises(Exception):  # noqa: B017 (refused: the error's class is the library's and the platform's)
                await bare.ping()
        finally:
            await bare.aclose()
    finally:
        redis_server.stop()
        nats_server.stop()


@pytest.mark.parametrize("mistake", ["another CA", "no client certificate"])
async def test_canary_init_stops_at_once_on_a_tls_refusal_naming_it(tmp_path, certs, mistake):
    """A server certificate that does not verify, or the server's alert refusing ours: no retry heals either.

    Before, ``canary init`` retried until its wait ran out and said 'did not answer within ... s (last:
    BrokenPipeError ...)' (found by a fresh tester).
    """
    import time

    from reverie_canary.canary.runtime import initialise
    from reverie_canary.shared.runtime.preflight import NatsRefused

    server_tls = ServerTls(cert_file=certs["server"], key_file=certs["server-key"], ca_file=certs["ca"])
    server = start_nats(tmp_path / "nats", tls=server_tls)
    try:
        files = {"nats_ca_file": certs["ca"], "nats_cert_file": certs["client"], "nats_key_file": certs["client-key"]}
        if mistake == "another CA":
            other = tmp_path / "other-ca.pem"
            trustme.CA().cert_pem.write_to_path(other)
            files["nats_ca_file"] = str(other)
            expected = "TLS certificate does not verify"
        else:
            files = {"nats_ca_file": certs["ca"]}
            expected = "refused this client's TLS certificate"
        settings = Settings.load(env={}, nats_url=server.url.replace("nats://", "tls://"), **files)
        started = time.monotonic()
        with pytest.raises(NatsRefused) as refused:
            await initialise(settings, wait_s=30)
        took = time.monotonic() - started
    finally:
        server.stop()
    assert expected in str(refused.value), str(refused.value)
    assert took < 10, took  # at once, not at the end of the 30 s wait
