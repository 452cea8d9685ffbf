"""Structured logging: every line of the process through structlog, secrets masked.

One handler on the root logger renders every record with
``structlog.stdlib.ProcessorFormatter``: the services' own structlog events and the
plain-``logging`` lines of every library (FastStream, nats-py, httpx, uvicorn,
redis, asyncio, ``warnings``) come out in the same shape, one event a line, JSON
in production (``CANARY_LOG_FORMAT=json``) and readable ``key=value`` text for
people (``console``, the default and the demo's).  The redaction processor runs
on every line, whatever its origin (structlog's standard-library integration):

* registered secrets (:func:`redact`: the API key, the NATS password) become ``***``;
* a secret URL (:func:`redact_url` with ``whole=True``: the webhook URL, whose path
  is the credential of a Slack-style hook) becomes ``scheme://host/***``;
* any password inside any URL (``nats://user:pass@host``, ``redis://:pass@host``)
  becomes ``***``, registered or not.

:func:`scrub` applies the same masking to a text printed outside the log (error
messages on stderr, settings dumps).  Services log facts with fields
(``provider=``, ``subject=``, ``reason=``); settings are logged through
:meth:`reverie_canary.shared.runtime.settings.Settings.public`.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any, TextIO
from urllib.parse import urlsplit

import structlog

MASK = "***"
#: A registered secret shorter than this is not masked inside other text (it
#: would mask ordinary words); a URL's password is masked whatever its length.
MIN_SECRET_LEN = 6
#: ``scheme://user:password@`` (user may be empty, as in ``redis://:pw@host``).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s]*):(?P<pw>[^@/?#\s]*)@")

#: Libraries whose INFO lines are per-request noise: shown from WARNING up unless
#: the level is DEBUG (httpx logs every probe request, uvicorn every scrape).
QUIET_BELOW_WARNING = ("faststream", "nats", "httpx", "httpcore", "uvicorn", "uvicorn.access",
                       "uvicorn.error", "asyncio", "redis", "apprise")

_secrets: dict[str, str] = {}
_configured = False
_format = "console"
_handler: logging.Handler | None = None


def redact(*values: str) -> None:
    """Never print these values (API key, passwords): every log line and :func:`scrub` mask them."""
    for value in values:
        if value and len(value) >= MIN_SECRET_LEN:
            _secrets[value] = MASK


def masked_url(url: str, *, whole: bool = False) -> str:
    """``url`` safe to print: its password masked; with ``whole`` only scheme and host kept.

    >>> masked_url("nats://judge:s3cret@nats:4222")
    'nats://judge:***@nats:4222'
    >>> masked_url("https://hooks.slack.com/services/T0/B0/XYZ", whole=True)
    'https://hooks.slack.com/***'
    >>> masked_url("slack://TokenA/TokenB/TokenC", whole=True)
    'slack://***'
    """
    if not url:
        return url
    if whole:
        try:
            parts = urlsplit(url)
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
        except ValueError:
            return MASK
        if not parts.scheme or not host:
            return MASK
        if parts.scheme not in ("http", "https"):  # apprise URLs (slack://TokenA/...) carry tokens as the "host"
            return f"{parts.scheme}://{MASK}"
        return f"{parts.scheme}://{host}{port}/{MASK}"
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", url)


def redact_url(url: str, *, whole: bool = False) -> None:
    """Mask ``url``'s credential wherever it is printed.

    Args:
        url: a URL from the settings (NATS, Redis, webhook, notification channel).
        whole: the URL itself is the secret (a Slack-style webhook, an apprise
            channel URL with tokens in its path): it is printed as
            ``scheme://host/***``, and its path and query alone are masked too.
    """
    if not url:
        return
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        parts, password = None, None
    if password:
        redact(password)
    if whole:
        _secrets[url] = masked_url(url, whole=True)
        if parts is not None:
            tail = parts.path + (f"?{parts.query}" if parts.query else "")
            if len(tail.strip("/")) >= MIN_SECRET_LEN:
                redact(tail)
        else:
            redact(url)


def scrub(text: str) -> str:
    """``text`` with every registered secret and every URL password masked."""
    if not isinstance(text, str) or not text:
        return text
    if _secrets:
        for secret in sorted(_secrets, key=len, reverse=True):  # a whole URL before the path inside it
            if secret in text:
                text = text.replace(secret, _secrets[secret])
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", text)
    return text


def _mask(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return type(value)(_mask(v) for v in value)
    if isinstance(value, BaseException):  # an exception object logged as a field
        return scrub(f"{type(value).__name__}: {value}")
    return value


def redact_processor(logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: mask secrets and URL passwords in every value (and the rendered exception)."""
    return {k: _mask(v) for k, v in event_dict.items()}


class ScrubbedStream:
    """A text stream that masks secrets (:func:`scrub`) in everything written through it.

    ``canary`` wraps its ``stdout`` and ``stderr`` in it, so that no message of
    any command prints a password, a key or a webhook URL, whatever its origin
    (an exception text, a library's message, a settings dump).
    """

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(scrub(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def scrub_standard_streams() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`ScrubbedStream` (once)."""
    if not isinstance(sys.stdout, ScrubbedStream):
        sys.stdout = ScrubbedStream(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, ScrubbedStream):
        sys.stderr = ScrubbedStream(sys.stderr)  # type: ignore[assignment]


class _StderrHandler(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is at the time of the record.

    A stream fixed at configure time goes stale when a test runner or typer's
    ``CliRunner`` swaps ``sys.stderr`` and closes its replacement.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def _renderer(fmt: str):
    if fmt == "json":
        return structlog.processors.JSONRenderer(default=str)
    return structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback,
                                         pad_event_to=0, pad_level=False)


def configure(fmt: str = "console", level: str = "INFO", stream: TextIO | None = None, *,
              root_handler: bool = True) -> None:
    """Send every log line of the process through structlog, once per call (idempotent).

    Args:
        fmt: ``console`` (readable ``key=value`` lines, for people) or ``json``
            (one JSON object a line, for log collectors).
        level: ``DEBUG`` / ``INFO`` / ``WARNING`` / ``ERROR``; the noisy
            libraries (:data:`QUIET_BELOW_WARNING`) show INFO lines only at ``DEBUG``.
        stream: where lines go (default: the current ``sys.stderr``).
        root_handler: install the handler on the root logger (so that every
            library's lines go through it); ``False`` leaves the host
            application's logging alone (a library use: the chat backend's client).
    """
    global _configured, _handler, _format
    lvl = getattr(logging, level.upper(), logging.INFO)
    _format = fmt
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.StackInfoRenderer(),
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            redact_processor,
            _renderer(fmt),
        ],
    )
    handler: logging.Handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(formatter)
    handler.addFilter(FoldRepeats())
    _configured = True
    root, ours = logging.getLogger(), logging.getLogger("canary")
    if _handler is not None:  # ours from an earlier call (a test's, a command's)
        root.removeHandler(_handler)
        ours.removeHandler(_handler)
    _handler = handler
    if not root_handler:  # our own lines only, on the ``canary`` logger, not passed on to the host's handlers
        ours.addHandler(handler)
        ours.propagate = False
        ours.setLevel(lvl)
        return
    ours.setLevel(logging.NOTSET)
    ours.propagate = True
    root.addHandler(handler)
    adopt_library_loggers()
    root.setLevel(lvl)
    for name in QUIET_BELOW_WARNING:
        logging.getLogger(name).setLevel(lvl if lvl <= logging.DEBUG else max(lvl, logging.WARNING))
    logging.captureWarnings(True)  # warnings.warn(...) lines too, through the same handler


#: Seconds during which a warning of one kind is said once (:class:`FoldRepeats`).
FOLD_S = 10.0


class FoldRepeats(logging.Filter):
    """Say a repeated warning once: the first of a kind in :data:`FOLD_S` seconds passes, the rest are counted.

    A kind is the logger, the level, the event (a structlog event's name, else the
    message's first 80 characters) and the service: during a NATS outage every message
    in flight retries (``message_retry``, 61 lines in 2 s in the field), and one line a
    kind says as much.  The first line of that kind after the window carries the count
    (``folded=N``: lines of that kind left out since the one before).  INFO and DEBUG
    lines pass untouched.
    """

    def __init__(self, window_s: float = FOLD_S, clock: Any = time.monotonic) -> None:
        super().__init__()
        self.window_s = window_s
        self.clock = clock
        self._seen: dict[tuple[str, int, str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        msg = record.msg
        if isinstance(msg, dict):
            key = (record.name, record.levelno, str(msg.get("event", ""))[:80], str(msg.get("service", "")))
        else:
            text = record.getMessage() if record.args else str(msg)
            key = (record.name, record.levelno, text[:80], str(getattr(record, "service", "")))
        now = self.clock()
        first, folded = self._seen.get(key, (None, 0))
        if first is not None and now - first < self.window_s:
            self._seen[key] = (first, folded + 1)
            return False
        if len(self._seen) > 1024:  # bounded: forget kinds whose window is over
            self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window_s}
        self._seen[key] = (now, 0)
        if folded:
            if isinstance(msg, dict):
                msg["folded"] = folded
            else:
                record.msg, record.args = f"{record.getMessage()} (folded: {folded} like it)", ()
        return True


class _TlsEofNoise(logging.Filter):
    """Drops asyncio's ``returning true from eof_received() has no effect when using ssl``.

    CPython's ``asyncio.sslproto`` logs it at WARNING on every TLS connection
    whose protocol asks to keep a half-closed transport open: nats-py upgrades
    its plain connection with ``loop.start_tls``, so the stream protocol under it
    answers ``True`` (it does not know the transport became TLS).  The
    connection is closed as it should be; the line says nothing an operator can act on.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "asyncio" and str(record.msg).startswith("returning true from eof_received()"))


logging.getLogger("asyncio").addFilter(_TlsEofNoise())


#: Libraries that give their logger a handler of their own and stop it from propagating:
#: FastStream (a coloured stdout handler on ``faststream``, at import) and uvicorn (its dictConfig).
SELF_HANDLED = ("faststream", "uvicorn", "uvicorn.error", "uvicorn.access")


def adopt_library_loggers() -> None:
    """Send the lines of :data:`SELF_HANDLED` loggers to the root handler (structlog) instead of their own.

    Called by :func:`configure` and again when a broker is made (FastStream may be
    imported after logging was configured).  Does nothing in library use, where the
    host application owns its logging.
    """
    if _handler is None or _handler not in logging.getLogger().handlers:
        return
    for name in SELF_HANDLED:
        lib = logging.getLogger(name)
        for old in list(lib.handlers):
            lib.removeHandler(old)
        lib.propagate = True


def error_line(message: str) -> str:
    """The line a command prints on stderr when it stops on an error, masked.

    In JSON mode (configured, or ``CANARY_LOG_FORMAT=json`` when the settings
    themselves were refused) it is a JSON log line like every other, so that a
    log collector reading a service's output gets only JSON; else ``error: ...``.
    """
    import json
    import os
    from datetime import datetime, timezone

    text = scrub(message)
    if _format == "json" or (not _configured and os.environ.get("CANARY_LOG_FORMAT") == "json"):
        return json.dumps({"event": "command_failed", "level": "error", "logger": "canary.cli",
                           "timestamp": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
                           "error": text})
    return f"error: {text}"


def get(service: str) -> structlog.stdlib.BoundLogger:
    """A logger bound to ``service`` (logger name ``canary.<service>``).

    Used before :func:`configure` (a library use, such as the chat backend's
    client), it configures structlog but installs the root handler only when
    the host application has none.
    """
    if not _configured:
        configure(root_handler=not logging.getLogger().handlers)
    return structlog.get_logger(f"canary.{service}").bind(service=service)
