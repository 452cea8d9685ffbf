"""Rendering shared/redis/users.acl into the file redis-server loads."""

from __future__ import annotations

import hashlib

import pytest

from reverie_canary.shared.contract.errors import ConfigError
from reverie_canary.shared.runtime.auth import (
    REDIS_USERS,
    generate_redis_passwords,
    redis_passwords_from,
    redis_url_for,
    redis_url_without_credential,
    render_redis_acl,
)


def test_the_rendered_file_has_every_user_under_the_namespace_with_hashes_and_no_password():
    """One line per user, the default user off, keys under the namespace, SHA-256 in place of each password."""
    passwords = generate_redis_passwords()
    text = render_redis_acl(passwords, "prod")
    lines = text.splitlines()
    assert [line.split()[1] for line in lines] == ["default", *REDIS_USERS]
    assert lines[0].startswith("user default off")
    for user, password in passwords.items():
        assert password not in text
        line = next(line for line in lines if line.split()[1] == user)
        assert f"#{hashlib.sha256(password.encode()).hexdigest()}" in line.split()
    judge = next(line for line in lines if line.split()[1] == "judge")
    assert "~prod:judge:*" in judge.split() and "~prod:judge-initialized" in judge.split()
    assert "%R~prod:*" in next(line for line in lines if line.split()[1] == "reader").split()
    assert "$" not in text and not any(line.startswith("#") for line in lines)


def test_a_namespace_that_would_widen_the_key_patterns_or_a_missing_password_is_refused():
    """A glob in the namespace or a user without a password is a ConfigError, naming the variable."""
    passwords = generate_redis_passwords()
    for namespace in ("*", "a b", "", "x[1]"):
        with pytest.raises(ConfigError, match="namespace"):
            render_redis_acl(passwords, namespace)
    with pytest.raises(ConfigError, match="CANARY_REDIS_READER_PASSWORD"):
        render_redis_acl({**passwords, "reader": ""}, "canary")


def test_passwords_come_from_the_environment_or_files(tmp_path):
    """CANARY_REDIS_<USER>_PASSWORD or its _FILE (trailing newline stripped); both set is refused."""
    env = {f"CANARY_REDIS_{u.upper()}_PASSWORD": f"p{u}" for u in REDIS_USERS}
    secret = tmp_path / "judge"
    secret.write_text("fromfile\n")
    env.pop("CANARY_REDIS_JUDGE_PASSWORD")
    env["CANARY_REDIS_JUDGE_PASSWORD_FILE"] = str(secret)
    assert redis_passwords_from(env)["judge"] == "fromfile"
    assert redis_passwords_from(env)["router"] == "prouter"
    with pytest.raises(ConfigError, match="both set"):
        redis_passwords_from({**env, "CANARY_REDIS_JUDGE_PASSWORD": "x"})


def test_a_user_is_put_into_a_redis_url_and_taken_out_again():
    """Any earlier credential is replaced; the password is percent-encoded."""
    assert redis_url_for("redis://127.0.0.1:6379/0", "judge", "p1") == "redis://judge:p1@127.0.0.1:6379/0"
    assert redis_url_for("rediss://old:x@redis:6380/2", "router", "a/b@c") == "rediss://router:a%2Fb%40c@redis:6380/2"
    assert redis_url_without_credential("redis://judge:p1@redis:6379/0") == "redis://redis:6379/0"
