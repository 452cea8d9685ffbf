"""Every log line goes through structlog, JSON in production, with secrets and URL passwords masked."""

from __future__ import annotations

import io
import json
import logging
import warnings

import pytest
import structlog

from reverie_canary.shared.runtime import logging as canary_logging
from reverie_canary.shared.runtime.logging import ScrubbedStream, configure, get, masked_url, scrub
from reverie_canary.shared.runtime.settings import Settings

API_KEY = "sk-or-v1-0123456789abcdef"
NATS_PASSWORD = "natsS3cretPw"
REDIS_PASSWORD = "redisS3cretPw"
HOOK = "https://hooks.slack.com/services/T0AAAA/B0BBBB/XyZ123SecretToken"


@pytest.fixture
def secret_settings() -> Settings:
    return Settings.load(env={}, openrouter_api_key=API_KEY, nats_url=f"nats://judge:{NATS_PASSWORD}@nats:4222",
                         redis_url=f"redis://:{REDIS_PASSWORD}@redis:6379/0", webhook_url=HOOK)


def emit_from_every_origin() -> None:
    """One line from our code and one from each library logger, with secrets inside (some in exceptions)."""
    get("judge").warning("probe_failed", key=API_KEY, url=f"nats://judge:{NATS_PASSWORD}@nats:4222",
                         nested={"hook": HOOK, "list": [REDIS_PASSWORD]})
    logging.getLogger("faststream").warning("subscriber of %s failed", "canary.results.>")
    logging.getLogger("nats.aio.client").error("nats: encountered error connecting to nats://u:%s@h:4222",
                                               NATS_PASSWORD)
    logging.getLogger("httpx").warning('HTTP Request: POST %s "HTTP/1.1 500 Internal Server Error"', HOOK)
    logging.getLogger("uvicorn.error").error("Exception in ASGI application")
    logging.getLogger("redis").warning("retrying redis://:%s@redis:6379/0", REDIS_PASSWORD)
    try:
        raise ConnectionError(f"cannot reach redis://:{REDIS_PASSWORD}@redis:6379/0 with {API_KEY}")
    except ConnectionError:
        logging.getLogger("asyncio").exception("Task exception was never retrieved")
        get("router").error("expiry_check_crashed", exc_info=True)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        logging.captureWarnings(False)  # pytest records warnings per test: route this one to logging again
        logging.captureWarnings(True)
        warnings.warn(f"deprecated call with {HOOK}", UserWarning, stacklevel=1)


def test_json_mode_renders_every_librarys_line_as_one_json_object_without_secrets(secret_settings):
    """Our lines, FastStream, nats-py, httpx, uvicorn, redis, asyncio and warnings: each a JSON line, masked."""
    out = io.StringIO()
    configure("json", "INFO", stream=out)
    emit_from_every_origin()
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # raises on any line that is not JSON
    assert {r["logger"] for r in records} >= {"canary.judge", "faststream", "nats.aio.client", "httpx",
                                              "uvicorn.error", "redis", "asyncio", "canary.router", "py.warnings"}
    assert all({"event", "level", "timestamp"} <= set(r) for r in records)
    text = out.getvalue()
    for secret in (API_KEY, NATS_PASSWORD, REDIS_PASSWORD, HOOK, "XyZ123SecretToken"):
        assert secret not in text, secret
    assert "https://hooks.slack.com/***" in text  # the hook is still named, by its host
    assert "nats://judge:***@nats:4222" in text and "redis://:***@redis:6379/0" in text
    crash = next(r for r in records if r["event"] == "expiry_check_crashed")
    assert "ConnectionError" in crash["exception"] and "***" in crash["exception"]
    assert next(r for r in records if r["logger"] == "asyncio")["exception"].endswith(
        "ConnectionError: cannot reach redis://:***@redis:6379/0 with ***")


def test_console_mode_is_one_readable_line_per_event_and_masked_too(secret_settings):
    """The people's format (the demo's) is key=value text, not JSON, with the same masking."""
    out = io.StringIO()
    configure("console", "INFO", stream=out)
    get("judge").info("suspension_applied", provider="lambda/fp8", until="2026-12-01T10:00:00Z", key=API_KEY)
    logging.getLogger("nats.aio.client").warning("reconnecting to nats://judge:%s@nats:4222", NATS_PASSWORD)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert "suspension_applied" in lines[0] and "provider=lambda/fp8" in lines[0] and "key=***" in lines[0]
    assert lines[0].lstrip()[0] != "{"
    assert "nats://judge:***@nats:4222" in lines[1]
    assert API_KEY not in out.getvalue() and NATS_PASSWORD not in out.getvalue()


def test_a_password_in_any_url_is_masked_even_if_never_registered():
    """URL userinfo passwords are masked by pattern: a URL the settings never saw is safe too."""
    assert scrub("connect to postgres://app:hunter2@db:5432/x failed") == "connect to postgres://app:***@db:5432/x failed"
    assert scrub("redis://:pw@r:6379/0 and amqp://u:p@q/") == "redis://:***@r:6379/0 and amqp://u:***@q/"
    assert scrub("nats://nats:4222 has no password") == "nats://nats:4222 has no password"
    assert masked_url("nats://judge:s3cret@nats:4222") == "nats://judge:***@nats:4222"
    assert masked_url(HOOK, whole=True) == "https://hooks.slack.com/***"
    assert masked_url("not a url", whole=True) == "***"


def test_settings_dumps_mask_url_passwords_and_the_webhook(secret_settings):
    """repr, public() and environment() never show the API key, a URL password or the webhook URL."""
    for text in (repr(secret_settings), str(secret_settings.public()), str(secret_settings.environment())):
        for secret in (API_KEY, NATS_PASSWORD, REDIS_PASSWORD, "XyZ123SecretToken"):
            assert secret not in text, (secret, text[:200])
    public = secret_settings.public()
    assert public["nats_url"] == "nats://judge:***@nats:4222" and public["webhook_url"] == "https://hooks.slack.com/***"
    assert "CANARY_WEBHOOK_URL" not in secret_settings.environment()
    assert secret_settings.environment(with_secrets=True)["CANARY_WEBHOOK_URL"] == HOOK  # for the demo's env files


def test_the_commands_standard_streams_mask_whatever_is_written(secret_settings):
    """canary's stdout and stderr wrappers mask a secret however it got into a message."""
    inner = io.StringIO()
    stream = ScrubbedStream(inner)
    print(f"error: cannot reach Redis at redis://:{REDIS_PASSWORD}@redis:6379/0 (key {API_KEY})", file=stream)
    assert inner.getvalue() == "error: cannot reach Redis at redis://:***@redis:6379/0 (key ***)\n"


def test_library_use_leaves_the_host_applications_root_logger_alone():
    """Used as a library (the chat backend's client), our lines go to our handler only, not twice."""
    root = logging.getLogger()
    host = logging.StreamHandler(io.StringIO())
    root.addHandler(host)
    out = io.StringIO()
    try:
        configure("json", "INFO", stream=out, root_handler=False)
        structlog.get_logger("canary.client").info("snapshot_applied", version=3)
        logging.getLogger("httpx").warning("host app line")
        assert json.loads(out.getvalue())["event"] == "snapshot_applied"
        assert "snapshot_applied" not in host.stream.getvalue()  # type: ignore[attr-defined]
        assert "host app line" not in out.getvalue()
    finally:
        root.removeHandler(host)
        canary_logging.configure()


def test_a_service_refusing_its_settings_says_so_in_one_json_line_in_json_mode(tmp_path):
    """`canary run judge` with a bad setting and JSON logs: exit 2, stderr one JSON line, the URL password masked."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {"PATH": os.environ.get("PATH", ""), "CANARY_LOG_FORMAT": "json", "CANARY_CONFIG": "",
           "NATS_URL": f"nats://judge:{NATS_PASSWORD}@nats:4222", "CANARY_METRICS_PORTS": "jduge=9000"}
    done = subprocess.run([str(Path(sys.executable).parent / "canary"), "run", "judge"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    record = json.loads(line)
    assert record["level"] == "error" and "metrics_ports: unknown service 'jduge'" in record["error"]
    assert NATS_PASSWORD not in done.stderr


def test_asyncios_tls_eof_line_is_dropped_and_its_other_warnings_kept():
    """nats-py over TLS made asyncio warn 'returning true from eof_received() ...' on every connection."""
    out = io.StringIO()
    configure("json", "INFO", stream=out)
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.warning("returning true from eof_received() has no effect when using ssl")
    asyncio_log.warning("Executing %s took %.3f seconds", "<Task>", 0.25)
    records = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    assert [r["event"] for r in records if r["logger"] == "asyncio"] == ["Executing <Task> took 0.250 seconds"]


def test_a_repeated_warning_is_said_once_and_the_next_one_after_the_window_counts_the_rest():
    """60 message_retry warnings in a burst: one line; the first after the window says folded=59; INFO untouched."""
    from reverie_canary.shared.runtime.logging import FoldRepeats

    now = [100.0]
    fold = FoldRepeats(window_s=10.0, clock=lambda: now[0])
    stream = io.StringIO()
    configure("json", "INFO", stream)
    handler = canary_logging._handler
    handler.filters = [f for f in handler.filters if not isinstance(f, FoldRepeats)] + [fold]
    log = get("prober")
    for _ in range(60):
        log.warning("message_retry", attempt=1)
        log.info("probe_done")
    logging.getLogger("faststream").warning("Connection broken with UnexpectedEOF()")
    logging.getLogger("faststream").warning("Connection broken with UnexpectedEOF()")
    now[0] += 10.5
    log.warning("message_retry", attempt=2)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    retries = [line for line in lines if line["event"] == "message_retry"]
    assert [(r["attempt"], r.get("folded")) for r in retries] == [(1, None), (2, 59)]
    assert sum(line["event"] == "probe_done" for line in lines) == 60
    assert sum("Connection broken" in line["event"] for line in lines) == 1


def test_every_handler_configure_installs_folds_repeats():
    """configure() puts the fold on its handler: the services, the demo and the commands all fold."""
    from reverie_canary.shared.runtime.logging import FoldRepeats

    configure("console", "INFO", io.StringIO())
    assert any(isinstance(f, FoldRepeats) for f in canary_logging._handler.filters)
