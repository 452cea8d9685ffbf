"""Structured logging (structlog): one event per line, key=value or JSON.

Services log facts with fields (``provider=``, ``subject=``, ``reason=``), never
secrets: settings are logged through :meth:`reverie_canary.shared.settings.Settings.public`.
"""

from __future__ import annotations

import logging
import sys

import structlog

_configured = False
_secrets: set[str] = set()


def redact(*values: str) -> None:
    """Never print these values (API key, passwords): every log line masks them."""
    _secrets.update(v for v in values if v and len(v) >= 6)


def _mask(value):
    if isinstance(value, str):
        for secret in _secrets:
            if secret in value:
                value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask(v) for v in value)
    return value


def _redact(logger, method, event_dict):
    """structlog processor: mask registered secrets in every value (and the rendered exception)."""
    if not _secrets:
        return event_dict
    return {k: _mask(v) for k, v in event_dict.items()}


def configure(fmt: str = "console", level: str = "INFO", stream=None) -> None:
    """Configure structlog and the stdlib root logger once per process.

    Args:
        fmt: ``console`` (key=value, for people) or ``json`` (one JSON object a line).
        level: ``DEBUG`` / ``INFO`` / ``WARNING`` / ``ERROR``.
        stream: where lines go (default stderr).
    """
    global _configured
    lvl = getattr(logging, level.upper(), logging.INFO)
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "service", "event"])
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(lvl, logging.WARNING), stream=stream or sys.stderr)
    # FastStream's per-message "Received/Processed" lines are debug noise here.
    logging.getLogger("faststream").setLevel(max(lvl, logging.WARNING))
    logging.getLogger("nats").setLevel(logging.ERROR)
    logging.getLogger("uvicorn").setLevel(logging.WARNING)
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    _configured = True


def get(service: str) -> structlog.stdlib.BoundLogger:
    """A logger bound to ``service``."""
    if not _configured:
        configure()
    return structlog.get_logger().bind(service=service)
