"""TLS to NATS and Redis from the settings.

``tls://`` NATS URLs and ``rediss://`` Redis URLs, with the CA, client certificate and key
files of :class:`reverie_canary.shared.runtime.settings.Settings` (``CANARY_NATS_CA_FILE``,
``CANARY_NATS_CERT_FILE``, ``CANARY_NATS_KEY_FILE``, and the ``REDIS`` ones).  Every
connection the services, the command line and the chat-backend client make goes through
these two functions (:mod:`reverie_canary.shared.runtime.service`, :mod:`reverie_canary.shared.runtime.broker`).
"""

from __future__ import annotations

import ssl
from typing import Any

from reverie_canary.client.tls import tls_context
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime.settings import TLS_SCHEMES, Settings


def nats_tls(settings: Settings) -> ssl.SSLContext | None:
    """The SSLContext of NATS connections; ``None`` for a plain ``nats://`` URL.

    The server's certificate must chain to ``nats_ca_file`` (else the system's trust store)
    and name the URL's host; ``nats_cert_file`` / ``nats_key_file`` are this client's.

    Raises:
        ConfigError: a file that is not a PEM certificate or key (the message names the setting).
    """
    if not settings.nats_url.startswith(TLS_SCHEMES["nats"]):
        return None
    try:
        return tls_context(settings.nats_ca_file, settings.nats_cert_file, settings.nats_key_file)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"nats_ca_file / nats_cert_file / nats_key_file: {exc}") from None


def redis_tls(settings: Settings) -> dict[str, Any]:
    """redis-py's TLS options for a ``rediss://`` URL (none for ``redis://``).

    Raises:
        ConfigError: Redis TLS files are set but the URL is not ``rediss://`` (plain text).

    The server's certificate is required and checked against ``redis_ca_file`` (else the
    system's trust store), its host name too; ``redis_cert_file`` / ``redis_key_file`` are
    this client's certificate (Redis's ``tls-auth-clients yes``).
    """
    if not settings.redis_url.startswith(TLS_SCHEMES["redis"]):
        if settings.redis_ca_file or settings.redis_cert_file or settings.redis_key_file:
            # checked here, where a Redis connection is made, not in Settings.load: the prober keeps no
            # state and connects to no Redis, so a shared environment's Redis TLS files must not stop it
            raise ConfigError("redis_ca_file / _cert_file / _key_file are set but redis_url does not use TLS "
                              f"(start it with {' or '.join(TLS_SCHEMES['redis'])}): the connection would be "
                              "plain text")
        return {}
    options: dict[str, Any] = {"ssl_cert_reqs": "required", "ssl_check_hostname": True,
                               "ssl_min_version": ssl.TLSVersion.TLSv1_2}
    if settings.redis_ca_file:
        options["ssl_ca_certs"] = settings.redis_ca_file
    if settings.redis_cert_file:
        options["ssl_certfile"] = settings.redis_cert_file
        options["ssl_keyfile"] = settings.redis_key_file
    return options
