"""Who may read the dashboard (services/dashboard/auth.py): the web configuration file, the check, the bind rule.

The app under test is a small Starlette app behind :class:`WebAuth`, driven by
httpx through its ASGI transport (the real server, TLS and the whole dashboard
are tests/integration/test_dashboard_feed.py's).
"""

from __future__ import annotations

import base64
import os
import time

import bcrypt
import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from structlog.testing import capture_logs

from reverie_canary.services.dashboard import auth
from reverie_canary.services.dashboard.auth import WebAuth, WebConfigError, WebConfigSource, check_bind

PASSWORD = "correct horse battery staple"
#: cost 4: the check is the same, the tests are fast
ALICE = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
TOKEN = "t0ken-for-grafana-0123456789abcdef0123456789"


def write(path, text: str):
    path.write_text(text)
    st = path.stat()  # a rewrite within the same clock tick must still count as a change
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    return path


def config_text(users: dict[str, str] | None = None, tokens: dict[str, str] | None = None) -> str:
    lines = []
    if users:
        lines += ["basic_auth_users:", *[f"  {u}: '{h}'" for u, h in users.items()]]
    if tokens:
        lines += ["bearer_tokens:", *[f"  {r}: {auth.token_digest(t)}" for r, t in tokens.items()]]
    return "\n".join(lines) + "\n"


def app_behind(source: WebConfigSource, refused: list | None = None):
    async def hello(request):
        return PlainTextResponse(f"hello {request.scope['state']['reader']}")

    inner = Starlette(routes=[Route("/", hello), Route("/healthz", hello), Route("/api/v1/quality", hello)])
    return WebAuth(inner, source, on_refused=(refused.append if refused is not None else None))


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def get(app, path="/", headers=None) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://dash") as client:
        return await client.get(path, headers=headers or {})


@pytest.fixture
def web(tmp_path):
    return write(tmp_path / "web.yml", config_text({"alice": ALICE}, {"grafana": TOKEN}))


async def test_without_credentials_every_path_but_healthz_answers_401_with_both_challenges(web):
    """401 with WWW-Authenticate Basic (first: the browser prompts) and Bearer; /healthz stays open."""
    refused: list = []
    app = app_behind(WebConfigSource(web), refused)
    for path in ("/", "/api/v1/quality", "/static/x.css", "/nowhere"):
        r = await get(app, path)
        assert r.status_code == 401, path
        assert r.headers.get_list("www-authenticate") == ['Basic realm="reverie-canary", charset="UTF-8"',
                                                          'Bearer realm="reverie-canary"']
        assert r.headers["cache-control"] == "no-store" and r.headers["x-frame-options"] == "deny"
    assert refused == ["/", "/api/v1/quality", "/static/x.css", "/nowhere"]
    assert (await get(app, "/healthz")).status_code == 200


async def test_a_user_with_its_password_or_a_reader_with_its_token_gets_in_and_is_named(web):
    """Basic alice + password, Bearer grafana's token: 200 and the reader's name; wrong ones 401."""
    app = app_behind(WebConfigSource(web))
    r = await get(app, "/", basic("alice", PASSWORD))
    assert (r.status_code, r.text) == (200, "hello alice")
    assert r.headers["x-content-type-options"] == "nosniff" and "default-src 'self'" in r.headers[
        "content-security-policy"]
    r = await get(app, "/api/v1/quality", {"Authorization": f"Bearer {TOKEN}"})
    assert (r.status_code, r.text) == (200, "hello grafana")
    for headers in (basic("alice", PASSWORD + "x"), basic("bob", PASSWORD), basic("grafana", TOKEN),
                    {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": f"Bearer {ALICE}"},
                    {"Authorization": "Basic !!!notbase64"}, {"Authorization": "Basic " + base64.b64encode(
                        b"no-colon").decode()}, {"Authorization": "Digest x"}, {"Authorization": "Basic"},
                    {"Authorization": "Basic " + base64.b64encode(b"\xff\xfe:x").decode()}):
        assert (await get(app, "/", headers)).status_code == 401, headers


async def test_a_password_over_72_bytes_is_refused_without_an_error(web):
    """bcrypt 5 raises beyond 72 bytes: such a password is a plain 401, never a 500 (and never truncated to a match)."""
    long = PASSWORD + "x" * 80
    assert len(long.encode()) > auth.BCRYPT_MAX_BYTES
    app = app_behind(WebConfigSource(web))
    assert (await get(app, "/", basic("alice", long))).status_code == 401
    with pytest.raises(ValueError, match="72 bytes"):
        auth.hash_password(long)


async def test_bcrypt_runs_once_per_user_and_password_and_an_unknown_user_costs_a_bcrypt_too(web, monkeypatch):
    """A browser's repeated requests cost one bcrypt; an unknown user is checked against a dummy hash (timing)."""
    calls: list[bytes] = []
    real = bcrypt.checkpw

    def counting(password: bytes, hashed: bytes) -> bool:
        calls.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", counting)
    app = app_behind(WebConfigSource(web))
    for _ in range(5):
        assert (await get(app, "/", basic("alice", PASSWORD))).status_code == 200
    assert calls == [ALICE.encode()]
    assert (await get(app, "/", basic("mallory", PASSWORD))).status_code == 401
    assert len(calls) == 2 and calls[1] != ALICE.encode() and calls[1].startswith(b"$2b$10$")


async def test_no_password_or_token_reaches_the_log(web):
    """A refusal logs the path and the user name, never the password, the token or the header."""
    app = app_behind(WebConfigSource(web))
    with capture_logs() as logs:
        await get(app, "/", basic("alice", "hunter2-wrong"))
        await get(app, "/", {"Authorization": "Bearer leaked-token-value"})
        await get(app, "/", basic("alice", PASSWORD))
    text = repr(logs)
    assert logs and {e["event"] for e in logs} == {"web_request_refused"}
    assert logs[0]["user"] == "alice" and logs[0]["path"] == "/"
    for secret in ("hunter2", "leaked-token-value", PASSWORD, base64.b64encode(b"alice:hunter2-wrong").decode()):
        assert secret not in text


async def test_the_file_is_read_again_when_it_changes_and_a_broken_one_closes_the_doors(web):
    """A removed user is out at the next request; an invalid file answers 503 until fixed; then it works again."""
    source = WebConfigSource(web)
    app = app_behind(source)
    assert (await get(app, "/", basic("alice", PASSWORD))).status_code == 200
    bob = bcrypt.hashpw(b"bob's", bcrypt.gensalt(4)).decode()
    write(web, config_text({"bob": bob}))
    assert (await get(app, "/", basic("alice", PASSWORD))).status_code == 401
    assert (await get(app, "/", basic("bob", "bob's"))).status_code == 200
    with capture_logs() as logs:
        write(web, "basic_auth_users:\n  bob: plaintext-password\n")
        for _ in range(2):
            r = await get(app, "/", basic("bob", "bob's"))
            assert r.status_code == 503 and "unusable" in r.text
    assert [e["event"] for e in logs] == ["web_config_unusable"]  # said once, not per request
    assert "plaintext-password" not in repr(logs)
    write(web, config_text({"bob": bob}))
    assert (await get(app, "/", basic("bob", "bob's"))).status_code == 200


async def test_without_readers_nothing_is_checked(tmp_path):
    """An empty configuration (or none) names no reader: the app answers (the bind rule keeps it on loopback)."""
    app = app_behind(WebConfigSource(write(tmp_path / "empty.yml", "")))
    assert (await get(app, "/")).status_code == 200
    assert (await get(app_behind(WebConfigSource()), "/")).text == "hello None"


@pytest.mark.parametrize("text, message", [
    ("basic_auth_user:\n  alice: x\n", "unknown key"),  # a misspelt key must not leave the pages open
    ("basic_auth_users:\n  alice: plain\n", "not a bcrypt hash"),
    ("basic_auth_users:\n  'a:b': '$2b$04$" + "a" * 53 + "'\n", "not a user name"),
    ("bearer_tokens:\n  grafana: abc\n", "sha256"),
    ("bearer_tokens:\n  a: sha256:" + "0" * 64 + "\n  b: sha256:" + "0" * 64 + "\n", "share one token"),
    ("tls_server_config:\n  cert_file: a.crt\n", "cert_file and key_file"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [x]\n", "not supported"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n",
     "needs client_ca_file"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS10\n", "TLS12 or TLS13"),
    ("http_server_config:\n  headers:\n    Set-Cookie: x\n", "not one of"),
    ("http_server_config:\n  http2: true\n", "not supported"),
    ("- a list\n", "a mapping"),
    ("basic_auth_users: [\n", "not YAML"),
])
def test_an_invalid_file_is_refused_at_start_naming_the_key(tmp_path, text, message):
    """The server does not start on a file it cannot apply; the message says what is wrong."""
    with pytest.raises(WebConfigError, match=message):
        WebConfigSource(write(tmp_path / "web.yml", text))


def test_prometheus_files_are_read_with_paths_from_the_files_folder(tmp_path):
    """htpasswd's $2y$ hashes and Prometheus's TLS keys: paths relative to the file, the headers it may set."""
    y = "$2y$" + ALICE[4:]
    path = write(tmp_path / "web.yml", f"tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\n"
                                       f"  client_ca_file: ca.pem\n  min_version: TLS13\n"
                                       f"http_server_config:\n  headers:\n    strict-transport-security: max-age=60\n"
                                       f"basic_auth_users:\n  alice: '{y}'\n")
    config = auth.load_web_config(path)
    assert config.tls.cert_file == tmp_path / "s.crt" and config.tls.client_ca_file == tmp_path / "ca.pem"
    assert config.tls.client_auth.name == "CERT_REQUIRED" and config.tls.min_version.name == "TLSv1_3"
    assert config.headers == {"Strict-Transport-Security": "max-age=60"}
    assert bcrypt.checkpw(PASSWORD.encode(), config.users["alice"])
    with pytest.raises(WebConfigError, match="cannot load"):
        config.tls.context()


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "::1", "[::1]", "localhost"])
def test_loopback_needs_neither_tls_nor_readers(host):
    """Loopback addresses, and names that resolve only to them, may serve without a web configuration."""
    check_bind(host, auth.WebConfig())


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "::ffff:127.0.0.1", "no-such-host.invalid"])
def test_beyond_loopback_without_tls_and_readers_is_refused_unless_told_so(host, tmp_path):
    """Every interface, a routable address, an IPv4-mapped loopback, an unresolvable name: refused (fails closed)."""
    with pytest.raises(WebConfigError, match="--insecure-beyond-loopback"):
        check_bind(host, auth.WebConfig())
    readers_only = auth.parse_web_config({"basic_auth_users": {"alice": ALICE}})
    with pytest.raises(WebConfigError, match="without TLS"):
        check_bind(host, readers_only)
    tls_only = auth.parse_web_config({"tls_server_config": {"cert_file": "a", "key_file": "b"}})
    with pytest.raises(WebConfigError, match="without authentication"):
        check_bind(host, tls_only)
    both = auth.parse_web_config({"tls_server_config": {"cert_file": "a", "key_file": "b"},
                                  "bearer_tokens": {"grafana": auth.token_digest(TOKEN)}})
    check_bind(host, both)
    check_bind(host, auth.WebConfig(), insecure_beyond_loopback=True)


def test_new_credentials_check_against_what_the_file_keeps():
    """canary web-user's hash checks with bcrypt; canary web-token's digest is the token's SHA-256, never the token."""
    started = time.perf_counter()
    hashed = auth.hash_password("s3cret")
    assert bcrypt.checkpw(b"s3cret", hashed.encode()) and hashed.startswith("$2b$10$")
    assert time.perf_counter() - started < 5
    token, digest = auth.new_token()
    assert len(token) >= 43 and token not in digest and digest == auth.token_digest(token)
    assert auth.parse_web_config({"bearer_tokens": {"r": digest}}).tokens["r"].hex() == digest[7:]
