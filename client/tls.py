"""TLS for a NATS connection: one SSLContext from a CA file and an optional client certificate.

Used by :class:`reverie_canary.client.IgnoreListClient` (``tls=``) and by the canary's own
services (``reverie_canary.shared.runtime.tls``), so the chat backend and the services verify the
server the same way: the server's certificate must chain to the CA (or to the system's
trust store when no CA file is given) and name the host of the URL.
"""

from __future__ import annotations

import ssl


def tls_context(ca_file: str = "", cert_file: str = "", key_file: str = "") -> ssl.SSLContext:
    """A client SSLContext that verifies the server, with a client certificate when one is given.

    Args:
        ca_file: PEM file of the CA(s) to trust; empty: the system's trust store.
        cert_file, key_file: PEM files of this client's certificate and its key (mutual TLS);
            both or neither.

    Raises:
        ValueError: when only one of ``cert_file`` and ``key_file`` is given.
        OSError, ssl.SSLError: when a file cannot be read or is not a certificate / key.
    """
    if bool(cert_file) != bool(key_file):
        raise ValueError("a client certificate needs both its certificate file and its key file")
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context
