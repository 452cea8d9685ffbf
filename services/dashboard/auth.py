"""Who may read the dashboard and the quality feed: TLS, basic-auth users and bearer tokens from one file.

The pages and the feed name every provider, reason and operator, so they are
served to known readers only.  The rules, in the order they apply:

1. **The file.**  ``canary dashboard --web-config FILE`` reads Prometheus's web
   configuration format (the ``--web.config.file`` of Prometheus and its
   exporters), so one file can serve both:

   .. code-block:: yaml

      tls_server_config:            # HTTPS; absent: plain HTTP
        cert_file: server.crt       # paths relative to the file's folder
        key_file: server.key
        client_ca_file: ca.pem      # optional mutual TLS, with
        client_auth_type: RequireAndVerifyClientCert
        min_version: TLS12          # TLS12 (default) or TLS13
      http_server_config:
        headers: {Strict-Transport-Security: max-age=31536000}
      basic_auth_users:             # user -> bcrypt hash ($2y$, $2b$, $2a$)
        alice: $2y$10$...
      bearer_tokens:                # this project's extension: reader -> sha256 of its token
        grafana: sha256:9f86d0...

   ``bearer_tokens`` is not Prometheus's (its format has no token key): a
   Prometheus exporter refuses a file that has it.  Tokens are random (``canary
   web-token`` makes one of 32 bytes), so their SHA-256 is stored, not a slow
   hash; users choose passwords, so theirs are bcrypt.  Any other key is
   refused by name (a misspelt key must not leave the pages open), and so are
   Prometheus's keys this server does not implement (``cipher_suites``,
   ``http2`` ...).
2. **Reading it again.**  The file is checked for a change (size, time, inode) on
   every request and read again when it changed, as Prometheus does: a user
   added or removed counts from the next request.  A file that became
   unreadable or invalid closes the doors (every request answers 503 and the
   log says why, once) until it is fixed: an old list of users must not stay
   valid after an operator removed one.  TLS is read at start (restart to
   load a new certificate).
3. **The check.**  A request with neither valid ``Authorization: Basic`` nor
   ``Authorization: Bearer`` credentials gets ``401`` with ``WWW-Authenticate``
   challenges (``Basic`` first, so a browser asks for a password).  Every path
   is checked -- the pages, the event stream, the JSON APIs, ``/metrics``, the
   static files -- except ``/healthz`` (a container's liveness check; it says
   only whether the sources are read).  Passwords are checked with bcrypt
   (``bcrypt.checkpw``), an unknown user against a fixed dummy hash so that
   the answer takes as long as for a known one (no user enumeration by
   timing), at most one bcrypt at a time in a worker thread; a result is
   remembered per (user, hash, password) under a keyed digest of the three, so a
   browser's repeated requests cost one bcrypt, and the plain password is
   never kept.  Passwords over 72 bytes are refused without a check (bcrypt
   reads 72).  Token digests are compared with :func:`hmac.compare_digest`,
   against every reader's digest, in constant time.
4. **Nothing secret in the log.**  A refusal is logged with the path and the
   user name, never the password, the token or the header.
5. **Where it may listen.**  Without both TLS and authentication the server
   binds loopback addresses only (``127.0.0.0/8``, ``::1``; a host name counts
   only when every address it resolves to is loopback); anything wider is
   refused at start unless the operator passes ``--insecure-beyond-loopback``
   (:func:`check_bind`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from reverie_canary.shared.contract.errors import ConfigError

log = structlog.get_logger("reverie_canary.dashboard.auth")

#: The realm browsers show in their password prompt.
REALM = "reverie-canary"
#: Paths answered without credentials (a liveness check; it names no provider).
OPEN_PATHS = frozenset({"/healthz"})
#: bcrypt reads at most this many bytes of a password; bcrypt 5 raises beyond it.
BCRYPT_MAX_BYTES = 72
#: Cost of the hashes ``canary web-user`` writes (2^10 rounds: about 50-70 ms a check).
BCRYPT_COST = 10
#: Checked password results remembered (per user, hash and password; oldest out).
CHECK_CACHE = 1024
#: Longest user name, password or token read from a header (bytes); longer: refused unread.
MAX_CREDENTIAL_BYTES = 4096
#: Headers a web configuration may set on every response (Prometheus's list).
ALLOWED_HEADERS = ("Strict-Transport-Security", "X-Content-Type-Options", "X-Frame-Options",
                   "X-XSS-Protection", "Content-Security-Policy")
#: Headers every response carries unless the file sets them: no sniffing, no framing, no referrer, no
#: script or style from anywhere but the dashboard itself.
DEFAULT_HEADERS: dict[str, str] = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "deny",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
}
_TOP_KEYS = {"tls_server_config", "http_server_config", "basic_auth_users", "bearer_tokens"}
_TLS_KEYS = {"cert_file", "key_file", "client_ca_file", "client_auth_type", "min_version"}
_TLS_UNSUPPORTED = {"max_version", "cipher_suites", "curve_preferences", "prefer_server_cipher_suites",
                    "client_allowed_sans"}
_HTTP_KEYS = {"headers"}
_HTTP_UNSUPPORTED = {"http2"}
_CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
                "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
_MIN_VERSION = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_BCRYPT = re.compile(r"^\$2[aby]\$\d{2}\$[./A-Za-z0-9]{53}$")
_SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")
READER_NAME = re.compile(r"^[^:\x00-\x1f\x7f]{1,256}$")


class WebConfigError(ConfigError):
    """The web configuration file cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class TlsServerConfig:
    """HTTPS for the dashboard: the server's certificate and key, optionally client certificates from a CA."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None
    client_auth: ssl.VerifyMode = ssl.CERT_NONE
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2

    def context(self) -> ssl.SSLContext:
        """A server-side :class:`ssl.SSLContext` (TLS 1.2 or newer; the client CA when given).

        Raises:
            WebConfigError: a certificate, key or CA file cannot be read.
        """
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = self.min_version
        try:
            ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
            if self.client_ca_file is not None:
                ctx.load_verify_locations(cafile=str(self.client_ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise WebConfigError(f"tls_server_config: cannot load {self.cert_file} / {self.key_file}"
                                 f"{' / ' + str(self.client_ca_file) if self.client_ca_file else ''}: {exc}") from exc
        ctx.verify_mode = self.client_auth
        return ctx


@dataclass(frozen=True)
class WebConfig:
    """One reading of the web configuration file (see the module's rules).

    ``users`` maps a user to its bcrypt hash (bytes); ``tokens`` a reader to the
    SHA-256 digest (32 bytes) of its bearer token; ``headers`` are added to
    every response.  ``source`` is the file it came from (``None``: built in code).
    """

    users: dict[str, bytes] = field(default_factory=dict)
    tokens: dict[str, bytes] = field(default_factory=dict)
    tls: TlsServerConfig | None = None
    headers: dict[str, str] = field(default_factory=dict)
    source: Path | None = None

    @property
    def authenticates(self) -> bool:
        """Whether any reader is named: with none, nothing is checked (allowed on loopback only)."""
        return bool(self.users or self.tokens)


def _mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{where}: a mapping is expected, not {type(value).__name__}")
    return value


def _unknown(keys: set, known: set, unsupported: set, where: str) -> None:
    bad = sorted(str(k) for k in keys - known - unsupported)
    if bad:
        raise WebConfigError(f"{where}: unknown key(s) {', '.join(bad)} (known: {', '.join(sorted(known))})")
    used = sorted(str(k) for k in keys & unsupported)
    if used:
        raise WebConfigError(f"{where}: {', '.join(used)} is Prometheus's but not supported by the dashboard; "
                             "remove it")


def parse_web_config(data: Any, base: Path | None = None, source: Path | None = None) -> WebConfig:
    """Check a loaded web configuration (a mapping, as YAML gives it) and build a :class:`WebConfig`.

    Args:
        data: the file's content (``None``: an empty file: no TLS, no readers).
        base: the folder relative paths are read from (the file's own).
        source: the file, for messages.

    Raises:
        WebConfigError: an unknown or unsupported key, a value of the wrong
            shape, a hash that is not bcrypt, a token digest that is not
            ``sha256:`` and 64 hex digits; the message names the key.
    """
    where = str(source) if source else "web configuration"
    top = _mapping(data, where)
    _unknown(set(top), _TOP_KEYS, set(), where)
    base = base or Path(".")
    users: dict[str, bytes] = {}
    for user, hashed in _mapping(top.get("basic_auth_users"), f"{where}: basic_auth_users").items():
        if not isinstance(user, str) or not READER_NAME.match(user):
            raise WebConfigError(f"{where}: basic_auth_users: {user!r} is not a user name (no ':' or control "
                                 "character, 1..256 characters)")
        if not isinstance(hashed, str) or not _BCRYPT.match(hashed):
            raise WebConfigError(f"{where}: basic_auth_users: the value of {user!r} is not a bcrypt hash "
                                 "($2y$10$... as htpasswd -nBC 10 or canary web-user writes it)")
        users[user] = hashed.encode("ascii")
    tokens: dict[str, bytes] = {}
    for reader, digest in _mapping(top.get("bearer_tokens"), f"{where}: bearer_tokens").items():
        if not isinstance(reader, str) or not READER_NAME.match(reader):
            raise WebConfigError(f"{where}: bearer_tokens: {reader!r} is not a reader name")
        if not isinstance(digest, str) or not _SHA256.match(digest):
            raise WebConfigError(f"{where}: bearer_tokens: the value of {reader!r} is not sha256:<64 hex digits> "
                                 "(canary web-token writes it)")
        tokens[reader] = bytes.fromhex(digest.removeprefix("sha256:"))
    if len(set(tokens.values())) < len(tokens):
        raise WebConfigError(f"{where}: bearer_tokens: two readers share one token (give each its own)")
    tls = None
    raw_tls = top.get("tls_server_config")
    if raw_tls is not None:
        t = _mapping(raw_tls, f"{where}: tls_server_config")
        _unknown(set(t), _TLS_KEYS, _TLS_UNSUPPORTED, f"{where}: tls_server_config")
        if not t.get("cert_file") or not t.get("key_file"):
            raise WebConfigError(f"{where}: tls_server_config needs cert_file and key_file")
        auth_type = t.get("client_auth_type") or ("RequireAndVerifyClientCert" if t.get("client_ca_file")
                                                  else "NoClientCert")
        if auth_type not in _CLIENT_AUTH:
            raise WebConfigError(f"{where}: tls_server_config: client_auth_type {auth_type!r} is not one of "
                                 f"{', '.join(_CLIENT_AUTH)}")
        if _CLIENT_AUTH[auth_type] != ssl.CERT_NONE and not t.get("client_ca_file"):
            raise WebConfigError(f"{where}: tls_server_config: client_auth_type {auth_type} needs client_ca_file")
        version = t.get("min_version") or "TLS12"
        if version not in _MIN_VERSION:
            raise WebConfigError(f"{where}: tls_server_config: min_version {version!r} is not TLS12 or TLS13")
        tls = TlsServerConfig(cert_file=base / str(t["cert_file"]), key_file=base / str(t["key_file"]),
                              client_ca_file=base / str(t["client_ca_file"]) if t.get("client_ca_file") else None,
                              client_auth=_CLIENT_AUTH[auth_type], min_version=_MIN_VERSION[version])
    http = _mapping(top.get("http_server_config"), f"{where}: http_server_config")
    _unknown(set(http), _HTTP_KEYS, _HTTP_UNSUPPORTED, f"{where}: http_server_config")
    headers: dict[str, str] = {}
    for name, value in _mapping(http.get("headers"), f"{where}: http_server_config: headers").items():
        canonical = next((h for h in ALLOWED_HEADERS if h.lower() == str(name).lower()), None)
        if canonical is None:
            raise WebConfigError(f"{where}: http_server_config: headers: {name!r} is not one of "
                                 f"{', '.join(ALLOWED_HEADERS)}")
        if not isinstance(value, str) or any(c in value for c in "\r\n"):
            raise WebConfigError(f"{where}: http_server_config: headers: {name} needs a one-line text value")
        headers[canonical] = value
    return WebConfig(users=users, tokens=tokens, tls=tls, headers=headers, source=source)


def load_web_config(path: Path) -> WebConfig:
    """Read and check the web configuration file at ``path`` (YAML; relative paths from its folder).

    Raises:
        WebConfigError: the file cannot be read, is not YAML, or is invalid (:func:`parse_web_config`).
    """
    import yaml

    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WebConfigError(f"cannot read the web configuration {path}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WebConfigError(f"{path} is not YAML: {exc}") from exc
    return parse_web_config(data, base=path.parent, source=path)


class WebConfigSource:
    """The web configuration in force: a fixed one, or a file read again whenever it changes.

    Args:
        path: the file (``None``: ``fixed`` is the configuration, or none at all).
        fixed: a configuration built in code (the demo's, tests').

    Raises:
        WebConfigError: at construction, when the file is invalid (a server must not start on one).
    """

    def __init__(self, path: Path | None = None, fixed: WebConfig | None = None) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._config = fixed or WebConfig()
        self._broken: str | None = None
        if path is not None:
            self._config = load_web_config(path)
            self._stamp = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def current(self) -> WebConfig:
        """The configuration to apply to this request (read again if the file changed).

        Raises:
            WebConfigError: the file changed into something unusable (the doors stay closed until it is fixed).
        """
        if self.path is None:
            return self._config
        stamp = self._stat()
        if stamp != self._stamp or self._broken is not None:
            try:
                config = load_web_config(self.path)
            except WebConfigError as exc:
                if str(exc) != self._broken:
                    log.error("web_config_unusable", path=str(self.path), error=str(exc))
                self._broken, self._stamp = str(exc), stamp
                raise
            if self._broken is not None or stamp != self._stamp:
                log.info("web_config_read", path=str(self.path), users=len(config.users), tokens=len(config.tokens))
            self._config, self._stamp, self._broken = config, stamp, None
        return self._config


class Checker:
    """Checks one request's ``Authorization`` header against a :class:`WebConfig` (see the module's rule 3)."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)  # keys the cache: no password, not even its plain hash, is kept
        self._cache: collections.OrderedDict[bytes, bool] = collections.OrderedDict()
        self._one_at_a_time = asyncio.Lock()
        self._dummy: bytes | None = None

    def _dummy_hash(self) -> bytes:
        if self._dummy is None:
            import bcrypt

            self._dummy = bcrypt.hashpw(secrets.token_bytes(16).hex().encode(), bcrypt.gensalt(BCRYPT_COST))
        return self._dummy

    async def check(self, config: WebConfig, header: str | None) -> str | None:
        """The reader's name when ``header`` holds valid credentials, else ``None``.

        ``Basic``: a user of ``basic_auth_users`` and its password; ``Bearer``:
        a token whose SHA-256 is one reader's of ``bearer_tokens``.
        """
        if not header or len(header) > MAX_CREDENTIAL_BYTES:
            return None
        scheme, _, value = header.strip().partition(" ")
        scheme, value = scheme.lower(), value.strip()
        if scheme == "bearer" and value:
            return self._bearer(config, value)
        if scheme == "basic" and value:
            return await self._basic(config, value)
        return None

    @staticmethod
    def _bearer(config: WebConfig, token: str) -> str | None:
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found = None
        for reader, expected in config.tokens.items():  # every digest compared: the time says nothing
            if hmac.compare_digest(digest, expected):
                found = reader
        return found

    async def _basic(self, config: WebConfig, value: str) -> str | None:
        try:
            decoded = base64.b64decode(value, validate=True)
            user, sep, password = decoded.decode("utf-8").partition(":")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            return None
        if not sep:
            return None
        secret = password.encode("utf-8")
        if len(secret) > BCRYPT_MAX_BYTES:
            return None
        hashed = config.users.get(user)
        known = hashed is not None
        target = hashed if hashed is not None else self._dummy_hash()
        key = hmac.new(self._key, b"\x00".join([user.encode("utf-8"), target, secret]), hashlib.sha256).digest()
        ok = self._cache.get(key)
        if ok is None:
            import bcrypt

            async with self._one_at_a_time:  # bcrypt is CPU: one at a time, off the event loop
                ok = await asyncio.to_thread(bcrypt.checkpw, secret, target)
            self._cache[key] = ok
            if len(self._cache) > CHECK_CACHE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return user if ok and known else None


def challenges() -> list[tuple[bytes, bytes]]:
    """The ``WWW-Authenticate`` headers of a 401 (Basic first: browsers prompt for it)."""
    return [(b"www-authenticate", f'Basic realm="{REALM}", charset="UTF-8"'.encode()),
            (b"www-authenticate", f'Bearer realm="{REALM}"'.encode())]


class WebAuth:
    """ASGI middleware around the whole dashboard app: refuses what the module's rules refuse.

    Every HTTP request but :data:`OPEN_PATHS` needs credentials when the
    configuration names readers; every response gets :data:`DEFAULT_HEADERS`
    and the file's ``headers``.  The reader's name is put in
    ``scope["state"]["reader"]`` (``None``: no authentication configured).

    Args:
        app: the ASGI app it guards.
        source: where the configuration comes from.
        on_refused: called with the path of each refused request (a counter).
    """

    def __init__(self, app: Callable[..., Awaitable[None]], source: WebConfigSource,
                 on_refused: Callable[[str], None] | None = None) -> None:
        self.app = app
        self.source = source
        self.checker = Checker()
        self.on_refused = on_refused

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        try:
            config = self.source.current()
        except WebConfigError:
            await _plain(send, 503, b"the dashboard's web configuration file is unusable: see its log",
                         DEFAULT_HEADERS)
            return
        headers = {**DEFAULT_HEADERS, **config.headers}
        path = scope.get("path", "")
        reader = None
        if config.authenticates and path not in OPEN_PATHS:
            reader = await self.checker.check(config, _header(scope, b"authorization"))
            if reader is None:
                log.info("web_request_refused", path=path[:200], user=_claimed_user(scope))
                if self.on_refused is not None:
                    self.on_refused(path)
                await _plain(send, 401, b"credentials needed: basic (user and password) or a bearer token",
                             headers, challenges())
                return
        scope.setdefault("state", {})["reader"] = reader
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *[(k, v) for k, v in extra if k not in present]]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _claimed_user(scope: dict) -> str | None:
    """The user name a refused Basic header claimed (for the log; never the password), else ``None``."""
    header = _header(scope, b"authorization") or ""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or len(value) > MAX_CREDENTIAL_BYTES:
        return None
    try:
        user = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")[0]
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return user[:64] if READER_NAME.match(user or "-") else None


async def _plain(send: Callable, status: int, body: bytes, headers: dict[str, str],
                 more: list[tuple[bytes, bytes]] | None = None) -> None:
    raw = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
           (b"cache-control", b"no-store"), *(more or []),
           *[(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


# -- where the server may listen ---------------------------------------------------------------------------------


def is_loopback_host(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address (``127.0.0.0/8``, ``::1``).

    A name is resolved first (``localhost``); a name that does not resolve, an
    unspecified address (``0.0.0.0``, ``::``: every interface) or an
    IPv4-mapped one (``::ffff:127.0.0.1``, which Python 3.11 does not call
    loopback) counts as beyond loopback: the rule fails closed.
    """
    candidate = host.strip("[]")
    try:
        return ipaddress.ip_address(candidate).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(candidate, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def check_bind(host: str, config: WebConfig, *, insecure_beyond_loopback: bool = False) -> None:
    """Refuse to serve beyond loopback without TLS and authentication (the module's rule 5).

    Raises:
        WebConfigError: ``host`` reaches beyond loopback, and TLS or readers
            are missing, and ``insecure_beyond_loopback`` is not set; the
            message says what is missing and how to supply it.
    """
    if insecure_beyond_loopback or is_loopback_host(host):
        return
    missing = [what for what, present in (("TLS (tls_server_config)", config.tls is not None),
                                          ("authentication (basic_auth_users or bearer_tokens)",
                                           config.authenticates)) if not present]
    if missing:
        raise WebConfigError(
            f"refusing to serve the dashboard on {host} (beyond loopback) without {' and '.join(missing)}: "
            "give --web-config FILE (Prometheus's web configuration format), bind 127.0.0.1, or pass "
            "--insecure-beyond-loopback to show every provider and reason to anyone who can reach the port")


# -- making credentials ------------------------------------------------------------------------------------------


def hash_password(password: str, cost: int = BCRYPT_COST) -> str:
    """The bcrypt hash of ``password`` for ``basic_auth_users`` (``$2b$``, ``cost`` log2 rounds).

    Raises:
        ValueError: the password is empty or longer than :data:`BCRYPT_MAX_BYTES` bytes in UTF-8.
    """
    import bcrypt

    secret = password.encode("utf-8")
    if not secret:
        raise ValueError("the password is empty")
    if len(secret) > BCRYPT_MAX_BYTES:
        raise ValueError(f"the password is longer than {BCRYPT_MAX_BYTES} bytes (bcrypt reads no more)")
    return bcrypt.hashpw(secret, bcrypt.gensalt(cost)).decode("ascii")


def new_token() -> tuple[str, str]:
    """A fresh bearer token (32 random bytes, URL-safe text) and its ``sha256:`` digest for ``bearer_tokens``."""
    token = secrets.token_urlsafe(32)
    return token, token_digest(token)


def token_digest(token: str) -> str:
    """The ``sha256:<hex>`` form of ``token`` that ``bearer_tokens`` holds."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()
