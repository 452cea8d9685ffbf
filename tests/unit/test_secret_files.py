"""Secrets from files: ``<NAME>_FILE`` for every credential and URL setting."""

from __future__ import annotations

import pytest

from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime.settings import SECRET_FILE_MAX_BYTES, Settings, sources


def _secret(tmp_path, name: str, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def test_bare_and_canary_names_read_their_files_with_one_newline_stripped(tmp_path):
    env = {
        "OPENROUTER_API_KEY_FILE": _secret(tmp_path, "key", b"sk-or-v1-abc\n"),
        "NATS_PASSWORD_FILE": _secret(tmp_path, "pw", b"s3cret pass\r\n"),
        "REDIS_URL_FILE": _secret(tmp_path, "redis", b"redis://:pw@10.0.0.5:6379/2"),
        "CANARY_WEBHOOK_SECRET_FILE": _secret(tmp_path, "wh", b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n\n"),
    }
    s = Settings.load(env=env)
    assert s.openrouter_api_key == "sk-or-v1-abc"
    assert s.nats_password == "s3cret pass"
    assert s.redis_url == "redis://:pw@10.0.0.5:6379/2"
    assert s.webhook_secret == "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"  # only one newline is the file's end
    where = sources(env=env)
    assert where["openrouter_api_key"] == "environment OPENROUTER_API_KEY_FILE"
    assert where["webhook_secret"] == "environment CANARY_WEBHOOK_SECRET_FILE"
    assert where["nats_user"] == "default"


def test_a_file_and_its_variable_together_are_refused(tmp_path):
    env = {"OPENROUTER_API_KEY": "sk-or-v1-env", "OPENROUTER_API_KEY_FILE": _secret(tmp_path, "k", b"sk-or-v1-f")}
    with pytest.raises(ConfigError, match="OPENROUTER_API_KEY and OPENROUTER_API_KEY_FILE are both set"):
        Settings.load(env=env)


@pytest.mark.parametrize("content, problem", [
    (None, "cannot read"),
    (b"\xff\xfe not text", "not UTF-8"),
    (b"x" * (SECRET_FILE_MAX_BYTES + 1), "larger than"),
])
def test_a_bad_file_is_refused_naming_the_variable_never_the_content(tmp_path, content, problem):
    path = tmp_path / "secret"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        Settings.load(env={"NATS_PASSWORD_FILE": str(path)})
    message = str(caught.value)
    assert message.startswith("NATS_PASSWORD_FILE: ") and problem in message
    assert str(path) in message
    if content:
        assert content[:8].decode("latin-1") not in message


def test_a_file_for_a_plain_setting_is_not_read(tmp_path):
    """Only credentials and URLs take _FILE: CANARY_MODELS_FILE is not a setting and changes nothing."""
    s = Settings.load(env={"CANARY_MODELS_FILE": _secret(tmp_path, "m", b"acme/other")})
    assert s.models == Settings.load(env={}).models


def test_secrets_read_from_files_are_masked_like_any_secret(tmp_path):
    env = {"OPENROUTER_API_KEY_FILE": _secret(tmp_path, "key", b"sk-or-v1-verysecret\n"),
           "NATS_URL_FILE": _secret(tmp_path, "nats", b"nats://judge:hunter2@127.0.0.1:4222\n")}
    s = Settings.load(env=env)
    shown = repr(s) + repr(s.public()) + repr(s.environment())
    assert "verysecret" not in shown and "hunter2" not in shown
    assert s.nats_url == "nats://judge:hunter2@127.0.0.1:4222"
