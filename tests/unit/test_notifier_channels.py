"""Channels from settings: signing, secrets never printed, refusals that name the channel only."""

from __future__ import annotations

import base64
from datetime import datetime, timezone

import httpx
import pytest

from reverie_canary.canary.cli_notices import _print_tables
from reverie_canary.services.notifier.channels import AppriseSender, WebhookSender, channel_specs, mask_all
from reverie_canary.services.notifier.core import webhook_id
from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.contract.events import Notice
from reverie_canary.shared.runtime.settings import Settings
from tests.notifier_receiver import Receiver, new_secret, spec_signature

HOOK = "https://hooks.example.invalid/services/T0SECRET/B0SECRET/xoxsecrettoken"
AT = datetime(2026, 11, 1, tzinfo=timezone.utc)


def settings(**kw) -> Settings:
    return Settings.load(env={}, **kw)


def test_a_webhook_without_a_signing_secret_is_refused_naming_the_channel_not_the_url():
    """An https channel needs a whsec_ secret; the error names the channel and never prints the URL."""
    with pytest.raises(ConfigError) as exc:
        channel_specs(settings(notify_urls={"ops": HOOK}))
    assert "channel ops" in str(exc.value) and "CANARY_NOTIFY_SECRETS" in str(exc.value)
    assert "T0SECRET" not in str(exc.value) and "hooks.example" not in str(exc.value)


@pytest.mark.parametrize(("secret", "why"), [
    ("abc", "must start with whsec_"),
    ("whsec_!!!notbase64", "not whsec_ + base64"),
    ("whsec_" + base64.b64encode(b"short").decode(), "24 to 64 bytes"),
])
def test_a_malformed_signing_secret_is_refused(secret, why):
    """The Standard Webhooks secret is whsec_ + base64 of 24-64 bytes; the value is never echoed."""
    with pytest.raises(ConfigError) as exc:
        channel_specs(settings(notify_urls={"ops": HOOK}, notify_secrets={"ops": secret}))
    assert why in str(exc.value) and secret not in str(exc.value)


def test_channels_from_settings_with_severities_and_the_webhook_shorthand():
    """webhook_url is the channel 'webhook' (its own severity); apprise URLs are channels of their own."""
    secret = new_secret()
    specs = channel_specs(settings(webhook_url=HOOK, webhook_secret=secret, webhook_min_severity="warning",
                                   notify_urls={"pager": "pagerduty://integrationkey@apikey"},
                                   notify_severity={"pager": "critical"}))
    assert [(c.name, c.kind, c.min_severity) for c in specs] == [("pager", "apprise", "critical"),
                                                                  ("webhook", "webhook", "warning")]
    assert all(HOOK not in repr(c) and secret not in repr(c) for c in specs)


def test_settings_refuse_unknown_channels_and_severities():
    """A severity for no channel, or an unknown severity, is refused when settings load."""
    with pytest.raises(ConfigError, match="no channel named"):
        settings(notify_urls={"ops": "json://h/x"}, notify_severity={"opz": "critical"})
    with pytest.raises(ConfigError, match="must be one of"):
        settings(notify_urls={"ops": "json://h/x"}, notify_severity={"ops": "urgent"})
    with pytest.raises(ConfigError, match="channel names"):
        settings(notify_urls={"Ops Team": "json://h/x"})


def test_urls_and_secrets_are_masked_in_settings_and_errors():
    """Settings.public() and every channel error mask the URL, its path pieces and the secret."""
    secret = new_secret()
    s = settings(notify_urls={"ops": HOOK}, notify_secrets={"ops": secret})
    assert s.public()["notify_urls"] == {"ops": "***"} and s.public()["notify_secrets"] == {"ops": "***"}
    assert HOOK not in repr(s) and secret not in repr(s)
    specs = channel_specs(s)
    text = mask_all(specs, f"ConnectError: {HOOK} / hooks.example.invalid/services/T0SECRET/B0SECRET/xoxsecrettoken")
    assert "T0SECRET" not in text and "xoxsecrettoken" not in text


def test_a_webhook_request_is_signed_over_id_timestamp_and_body():
    """The signature is v1, + base64 HMAC-SHA256 of '{webhook-id}.{timestamp}.{body}' (checked by hand and library)."""
    secret = new_secret()
    (spec,) = channel_specs(settings(notify_urls={"ops": HOOK}, notify_secrets={"ops": secret}))
    sender = WebhookSender(spec, httpx.AsyncClient(), 5.0, "canary")
    n = Notice(notice_id="dec|m/x.1|p|suspend|3", at=AT, severity="critical", action="suspend", title="t")
    body, headers = sender.request(n, datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc))
    assert headers["webhook-id"] == webhook_id("canary", n.notice_id) and headers["webhook-timestamp"] == "1796126400"
    assert headers["webhook-signature"] == spec_signature(secret, headers["webhook-id"], "1796126400", body)
    assert not Receiver(new_secret()).verify(headers, body)


def test_an_url_apprise_cannot_use_is_refused():
    """An apprise URL with an unknown scheme stops the notifier at start, naming the channel."""
    (spec,) = channel_specs(settings(notify_urls={"chat": "nosuchservice://token"}))
    with pytest.raises(ConfigError, match="channel chat: apprise cannot use this URL"):
        AppriseSender(spec, 5.0)


def test_notices_list_tables(capsys):
    """The table form names each section with its count and shows the ref an operator resends."""
    row = {"ref": "msg_0123", "channel": "hook", "severity": "critical", "action": "suspend", "provider": "p",
           "attempts": 7, "dead_at": "2026-12-01T10:00:00Z", "error": "HTTP 503", "next_attempt_at": None,
           "delivered_at": None}
    _print_tables({"channels": [{"name": "hook", "kind": "webhook", "min_severity": "info"}], "dead": [row],
                   "pending": [], "recent": []})
    out = capsys.readouterr().out
    assert "hook (webhook, >= info)" in out and "dead letters" in out and "msg_0123" in out and "HTTP 503" in out
    assert "being retried: 0" in out and "recent deliveries: 0" in out
