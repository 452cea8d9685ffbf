"""Where notices go: a signed JSON webhook, or any apprise URL; built from settings, never printed.

A channel is a name, a URL (a secret: Slack-style hooks carry their key in
the path), a minimum severity and, for webhooks, a signing secret.

- ``http://`` and ``https://`` URLs are the generic JSON webhook, signed per
  the Standard Webhooks convention (standard-webhooks/standard-webhooks
  ``spec/standard-webhooks.md``): headers ``webhook-id`` (stable across
  retries and restarts, unique over deployments by their namespace: the
  receiver's idempotency key, :func:`reverie_canary.services.notifier.core.webhook_id`), ``webhook-timestamp`` (this
  attempt, integer Unix seconds) and ``webhook-signature`` (``v1,`` + the
  base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}`` with the key the
  ``whsec_`` secret encodes).  The body is :func:`reverie_canary.services.notifier.core.payload`.
- Anything else (``slack://``, ``discord://``, ``msteams://``, ``mailto://``,
  ``ntfy://``, ``pagerduty://``, ``json://`` ...) goes through apprise
  (caronc/apprise): one ``Apprise`` object per channel, ``async_notify``.

Errors are strings with every part of the URL and the secret masked
(:meth:`Channel.mask`): they go into log lines, the delivery book and dead
letters.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

import httpx
import msgspec

from reverie_canary.services.notifier.core import SEVERITIES, payload, webhook_id
from reverie_canary.shared.contract.errors import CanaryError, ConfigError
from reverie_canary.shared.contract.events import Notice
from reverie_canary.shared.runtime.settings import Settings

#: The Standard Webhooks secret: 24 to 64 random bytes (spec, "Signature scheme").
SECRET_BYTES = (24, 64)
_encoder = msgspec.json.Encoder()


class DeliveryFailed(CanaryError):
    """One attempt failed; the message is safe to print (the URL is masked)."""


class Sender(Protocol):
    async def send(self, notice: Notice) -> None:
        """Deliver ``notice`` once; raise :class:`DeliveryFailed` with why."""
        ...

    async def close(self) -> None:
        ...


@dataclass
class Channel:
    """A named destination with its minimum severity; ``url`` is never printed."""

    name: str
    kind: str  # "webhook" | "apprise"
    min_severity: str
    url: str = field(repr=False)
    secret: str = field(default="", repr=False)
    sender: Any = field(default=None, repr=False)

    def secrets(self) -> list[str]:
        """Every piece of the URL and secret that must not be printed (longest first)."""
        parts = {self.url, self.secret}
        split = urlsplit(self.url)
        parts |= {split.netloc + split.path, split.path, split.password or "", split.username or "",
                  unquote(split.path), split.query}
        parts |= {v for _, v in parse_qsl(split.query)}
        parts |= {seg for seg in split.path.split("/") if len(seg) >= 6}
        return sorted((p for p in parts if p and len(p) >= 6), key=len, reverse=True)

    def mask(self, text: str) -> str:
        """``text`` with every secret part of this channel replaced by ``***``."""
        for part in self.secrets():
            text = text.replace(part, "***")
        return text

    def describe(self) -> str:
        """``name (kind, >= severity)``: what may be printed about the channel."""
        return f"{self.name} ({self.kind}, >= {self.min_severity})"


def check_secret(name: str, secret: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret.

    Raises:
        ConfigError: not ``whsec_`` + base64 of 24 to 64 bytes (the secret is not echoed).
    """
    if not secret.startswith("whsec_"):
        raise ConfigError(f"channel {name}: the signing secret must start with whsec_ (Standard Webhooks)")
    try:
        key = base64.b64decode(secret[len("whsec_"):], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigError(f"channel {name}: the signing secret is not whsec_ + base64") from exc
    if not SECRET_BYTES[0] <= len(key) <= SECRET_BYTES[1]:
        raise ConfigError(f"channel {name}: the signing secret must encode {SECRET_BYTES[0]} to {SECRET_BYTES[1]} "
                          f"bytes, it encodes {len(key)}")
    return key


def channel_specs(settings: Settings) -> list[Channel]:
    """The channels the settings configure (``webhook_url`` is the channel ``webhook``), without senders.

    Raises:
        ConfigError: a webhook without a valid signing secret, or an unknown severity;
            the message names the channel, never its URL.
    """
    urls = dict(settings.notify_urls)
    secrets = dict(settings.notify_secrets)
    severity = dict(settings.notify_severity)
    if settings.webhook_url:
        urls["webhook"] = settings.webhook_url
        if settings.webhook_secret:
            secrets.setdefault("webhook", settings.webhook_secret)
        severity.setdefault("webhook", settings.webhook_min_severity)
    out = []
    for name in sorted(urls):
        url = urls[name].strip()
        minimum = severity.get(name, "info")
        if minimum not in SEVERITIES:
            raise ConfigError(f"channel {name}: minimum severity must be one of {list(SEVERITIES)}")
        scheme = urlsplit(url).scheme.lower()
        if not scheme:
            raise ConfigError(f"channel {name}: the URL has no scheme (https://... or an apprise URL)")
        if scheme in ("http", "https"):
            if not secrets.get(name):
                raise ConfigError(f"channel {name}: a webhook needs a signing secret (CANARY_NOTIFY_SECRETS "
                                  f"{name}=whsec_..., or CANARY_WEBHOOK_SECRET for the webhook channel)")
            check_secret(name, secrets[name])
            out.append(Channel(name=name, kind="webhook", min_severity=minimum, url=url, secret=secrets[name]))
        else:
            out.append(Channel(name=name, kind="apprise", min_severity=minimum, url=url))
    return out


class WebhookSender:
    """POST the notice's JSON, signed; a 2xx answer is a delivery.

    ``namespace``: the deployment's (``Settings.namespace``), part of every ``webhook-id``.
    """

    def __init__(self, channel: Channel, client: httpx.AsyncClient, timeout_s: float, namespace: str) -> None:
        from standardwebhooks import Webhook

        self.namespace = namespace
        self.channel = channel
        self.client = client
        self.timeout_s = timeout_s
        self._signer = Webhook(channel.secret)

    def request(self, notice: Notice, now: datetime) -> tuple[bytes, dict[str, str]]:
        """The body and headers of one attempt at ``now`` (UTC)."""
        body = _encoder.encode(payload(notice, self.namespace))
        msg_id = webhook_id(self.namespace, notice.notice_id)
        stamp = int(now.timestamp())
        signature = self._signer.sign(msg_id, datetime.fromtimestamp(stamp, timezone.utc), body.decode())
        return body, {
            "content-type": "application/json",
            "user-agent": "reverie-canary-notifier",
            "webhook-id": msg_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature,
        }

    async def send(self, notice: Notice) -> None:
        body, headers = self.request(notice, datetime.now(timezone.utc))
        try:
            response = await self.client.post(self.channel.url, content=body, headers=headers, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise DeliveryFailed(self.channel.mask(f"{type(exc).__name__}: {exc}"[:500])) from None
        if not 200 <= response.status_code < 300:
            raise DeliveryFailed(f"HTTP {response.status_code} {response.reason_phrase}"[:200])

    async def close(self) -> None:
        return None


#: apprise's notification type of each severity (and of a state's end: resolved).
_APPRISE_TYPE = {"info": "info", "warning": "warning", "critical": "failure"}


class AppriseSender:
    """One apprise URL: ``async_notify`` with the notice's title and text."""

    def __init__(self, channel: Channel, timeout_s: float) -> None:
        import apprise

        # apprise logs each failure itself, URL host included; we log the failure once, masked
        logging.getLogger("apprise").setLevel(logging.CRITICAL)
        self.channel = channel
        self.timeout_s = timeout_s
        self._apprise = apprise.Apprise()
        if not self._apprise.add(channel.url):
            scheme = urlsplit(channel.url).scheme
            raise ConfigError(f"channel {channel.name}: apprise cannot use this URL ({scheme}://...)")

    async def send(self, notice: Notice) -> None:
        import apprise

        kind = "success" if notice.phase == "end" else _APPRISE_TYPE[notice.severity]
        try:
            async with asyncio.timeout(self.timeout_s):  # not wait_for: it can swallow a cancellation (shared/runtime/aio.py)
                result = await self._apprise.async_notify(body=notice.text or notice.title, title=_title(notice),
                                                          notify_type=apprise.NotifyType(kind))
        except TimeoutError:
            raise DeliveryFailed(f"apprise: no answer within {self.timeout_s:g} s") from None
        if not result:
            raise DeliveryFailed(self.channel.mask(_why(result))[:500])

    async def close(self) -> None:
        return None


def _title(notice: Notice) -> str:
    phase = {"start": "", "notice": "", "reminder": "reminder: ", "end": "ended: "}[notice.phase]
    return f"[{notice.severity.upper()}] {phase}{notice.action} {notice.provider or notice.model}".strip()


def _why(result: Any) -> str:
    """The failure of an apprise result, from its per-service logs."""
    reasons = []
    for service in getattr(result, "results", ()) or ():
        messages = [entry.message for entry in service.logs() if getattr(entry, "level", "") in ("WARNING", "ERROR")]
        reasons.append(f"{service.status.name}: {messages[-1] if messages else 'no detail'}")
    status = getattr(getattr(result, "status", None), "name", "FAILURE")
    return f"apprise {status}" + (f" ({'; '.join(reasons)})" if reasons else "")


def open_channels(settings: Settings, client: httpx.AsyncClient | None = None) -> list[Channel]:
    """The configured channels, each with its sender.

    Raises:
        ConfigError: as :func:`channel_specs`, or an apprise URL apprise cannot parse.
    """
    channels = channel_specs(settings)
    for ch in channels:
        if ch.kind == "webhook":
            if client is None:
                raise ConfigError("a webhook channel needs an HTTP client")
            ch.sender = WebhookSender(ch, client, settings.notify_timeout_s, settings.namespace)
        else:
            ch.sender = AppriseSender(ch, settings.notify_timeout_s)
    return channels


def mask_all(channels: list[Channel], text: str) -> str:
    """``text`` with every channel's secrets masked."""
    for ch in channels:
        text = ch.mask(text)
    return text
