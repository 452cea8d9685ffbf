"""TLS settings for NATS and Redis: where they are refused, what the connections get."""

from __future__ import annotations

import ssl

import pytest

from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime.settings import Settings
from reverie_canary.shared.runtime.tls import nats_tls, redis_tls


@pytest.fixture
def pem(tmp_path):
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    client = ca.issue_cert("canary-client")
    paths = {"ca": tmp_path / "ca.pem", "cert": tmp_path / "client.pem", "key": tmp_path / "client-key.pem"}
    ca.cert_pem.write_to_path(paths["ca"])
    client.cert_chain_pems[0].write_to_path(paths["cert"])
    client.private_key_pem.write_to_path(paths["key"])
    return {k: str(v) for k, v in paths.items()}


def test_plain_urls_get_no_tls_and_tls_urls_get_the_files(pem):
    """nats:// and redis:// connect in plain text; tls:// and rediss:// verify against the CA, with the client pair."""
    plain = Settings.load(env={})
    assert nats_tls(plain) is None and redis_tls(plain) == {}
    s = Settings.load(env={"NATS_URL": "tls://nats:4222", "REDIS_URL": "rediss://judge:p@redis:6380/0",
                           "CANARY_NATS_CA_FILE": pem["ca"], "CANARY_NATS_CERT_FILE": pem["cert"],
                           "CANARY_NATS_KEY_FILE": pem["key"], "CANARY_REDIS_CA_FILE": pem["ca"],
                           "CANARY_REDIS_CERT_FILE": pem["cert"], "CANARY_REDIS_KEY_FILE": pem["key"]})
    context = nats_tls(s)
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert redis_tls(s) == {"ssl_cert_reqs": "required", "ssl_check_hostname": True,
                            "ssl_min_version": ssl.TLSVersion.TLSv1_2, "ssl_ca_certs": pem["ca"],
                            "ssl_certfile": pem["cert"], "ssl_keyfile": pem["key"]}
    # a tls:// URL without a CA file trusts the system's store
    assert isinstance(nats_tls(Settings.load(env={"NATS_URL": "tls://nats:4222"})), ssl.SSLContext)


@pytest.mark.parametrize("env, message", [
    ({"CANARY_NATS_CA_FILE": "CA"}, "nats_url does not use TLS"),
    ({"NATS_URL": "tls://nats:4222", "CANARY_NATS_CERT_FILE": "CERT"}, "needs both"),
    ({"REDIS_URL": "rediss://redis:6380/0", "CANARY_REDIS_KEY_FILE": "KEY"}, "needs both"),
    ({"NATS_URL": "tls://nats:4222", "CANARY_NATS_CA_FILE": "/nonexistent/ca.pem"}, "no readable file"),
])
def test_tls_files_without_a_tls_url_half_a_client_pair_or_a_missing_file_are_refused(pem, env, message):
    """Each mistake is a ConfigError naming the setting: never a silent plain-text connection."""
    env = {k: pem["ca"] if v == "CA" else pem["cert"] if v == "CERT" else pem["key"] if v == "KEY" else v
           for k, v in env.items()}
    with pytest.raises(ConfigError, match=message):
        Settings.load(env=env)


def test_a_file_that_is_not_a_certificate_is_a_config_error(tmp_path):
    """Garbage in the CA file stops the connection's setup with a ConfigError, not an ssl traceback."""
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    s = Settings.load(env={"NATS_URL": "tls://nats:4222", "CANARY_NATS_CA_FILE": str(bad)})
    with pytest.raises(ConfigError, match="nats_ca_file"):
        nats_tls(s)


def test_redis_tls_files_with_a_plain_url_are_refused_where_redis_is_used_not_by_the_prober(pem):
    """A shared environment with Redis TLS files and the default redis:// URL: the prober (no Redis) starts;
    a Redis connection from those settings is a ConfigError naming the setting, never plain text."""
    s = Settings.load(env={"REDIS_URL": "redis://redis:6379/0", "CANARY_REDIS_CA_FILE": pem["ca"]})  # not refused
    with pytest.raises(ConfigError, match="redis_url does not use TLS"):
        redis_tls(s)
    from reverie_canary.shared.runtime.service import redis_client

    with pytest.raises(ConfigError, match="redis_url does not use TLS"):
        redis_client(s)
