"""Credentials: NATS and Redis users, one per service, plus operators, chat backends and an admin.

NATS: the server configuration is ``shared/nats/server.conf`` (used by compose.yaml,
``canary demo`` and the tests); it reads each password from the environment
variable ``CANARY_<USER>_PASSWORD``.  Who may publish what is written there.

Redis: ``shared/redis/users.acl`` says which user may touch which keys with which
commands; :func:`render_redis_acl` turns it into the file ``redis-server --aclfile``
loads, with each password from ``CANARY_REDIS_<USER>_PASSWORD`` (``canary redis-acl``).
A service then connects with its own user in ``REDIS_URL``
(``redis://judge:<password>@redis:6379/0``).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from reverie_canary.shared.contract.errors import ConfigError

SERVICE_USERS = ("discovery", "prober", "judge", "router", "notifier")
USERS = ("admin", *SERVICE_USERS, "operator", "backend", "dashboard")


def server_config() -> Path:
    """Path of the packaged NATS server configuration."""
    return Path(str(resources.files("reverie_canary.shared") / "nats" / "server.conf"))


def generate_passwords() -> dict[str, str]:
    """A fresh random password for every user (for the demo and tests).

    Letters and digits only, starting with a letter: the server's configuration
    parser reads an environment value like ``79-ab`` as something else than a string.
    """
    return {user: "p" + secrets.token_hex(16) for user in USERS}


def server_env(passwords: dict[str, str]) -> dict[str, str]:
    """The environment variables the server configuration reads its passwords from."""
    return {f"CANARY_{user.upper()}_PASSWORD": password for user, password in passwords.items()}


# -- Redis ------------------------------------------------------------------------------------

#: Redis users (``shared/redis/users.acl``): the services that keep state, a read-only user for the
#: operators' tools (status, explain, replay, report, notices list) and an admin. The prober keeps none.
REDIS_SERVICE_USERS = ("discovery", "judge", "router", "notifier")
REDIS_USERS = ("admin", *REDIS_SERVICE_USERS, "reader")

_NAMESPACE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def redis_acl_template() -> Path:
    """Path of the packaged Redis ACL template (who may touch which keys; no passwords)."""
    return Path(str(resources.files("reverie_canary.shared") / "redis" / "users.acl"))


def generate_redis_passwords() -> dict[str, str]:
    """A fresh random password for every Redis user (for the demo and tests); letters and digits."""
    return {user: "r" + secrets.token_hex(16) for user in REDIS_USERS}


def redis_password_variable(user: str) -> str:
    """The environment variable of ``user``'s Redis password: ``CANARY_REDIS_<USER>_PASSWORD``."""
    return f"CANARY_REDIS_{user.upper()}_PASSWORD"


def redis_passwords_from(env: Mapping[str, str]) -> dict[str, str]:
    """Every Redis user's password from ``env`` (``CANARY_REDIS_<USER>_PASSWORD`` or its ``_FILE``).

    Raises:
        ConfigError: when one is missing or empty, or a ``_FILE`` cannot be read (the message names
            the variable, never a value).
    """
    from reverie_canary.shared.runtime.settings import read_secret_file

    out: dict[str, str] = {}
    missing = []
    for user in REDIS_USERS:
        name = redis_password_variable(user)
        if env.get(f"{name}_FILE") and env.get(name):
            raise ConfigError(f"{name} and {name}_FILE are both set: set one of them")
        value = read_secret_file(name, env[f"{name}_FILE"]) if env.get(f"{name}_FILE") else env.get(name, "")
        if not value:
            missing.append(name)
        out[user] = value
    if missing:
        raise ConfigError(f"no Redis password for {', '.join(missing)} (or <NAME>_FILE)")
    return out


def render_redis_acl(passwords: Mapping[str, str], namespace: str) -> str:
    """The ACL file redis-server loads (``--aclfile``), from :func:`redis_acl_template`.

    Args:
        passwords: Redis user -> password, every user of :data:`REDIS_USERS`.
        namespace: the settings' namespace (``canary``): every key pattern is under it.

    Returns:
        The template without its comment lines, ``$CANARY_NAMESPACE`` replaced by ``namespace``
        and each ``$CANARY_REDIS_<USER>_PASSWORD`` by ``#<sha256 of the password>``: the text has
        no password in it.

    Raises:
        ConfigError: when a user has no password, a password is not printable ASCII without
            spaces, or the namespace is not 1-64 of ``[A-Za-z0-9_.-]`` (a ``*`` would widen
            every key pattern).
    """
    if not _NAMESPACE.match(namespace):
        raise ConfigError(f"namespace {namespace!r} cannot be a Redis key prefix: use 1-64 of [A-Za-z0-9_.-]")
    text = "\n".join(line for line in redis_acl_template().read_text(encoding="utf-8").splitlines()
                     if line.strip() and not line.lstrip().startswith("#"))
    for user in REDIS_USERS:
        password = passwords.get(user, "")
        if not password or not password.isascii() or not password.isprintable() or " " in password:
            raise ConfigError(f"{redis_password_variable(user)}: a Redis password must be printable ASCII "
                              "without spaces, and not empty")
        text = text.replace(f"${redis_password_variable(user)}", "#" + hashlib.sha256(password.encode()).hexdigest())
    text = text.replace("$CANARY_NAMESPACE", namespace)
    if "$CANARY_" in text:
        raise ConfigError("shared/redis/users.acl names a variable render_redis_acl does not know")
    return text + "\n"


def redis_url_for(url: str, user: str, password: str) -> str:
    """``url`` (``redis://host:port/db`` or ``rediss://``) with ``user:password@`` put in (any credential replaced).

    The password is percent-encoded, so any character may be in it.
    """
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"))


def redis_url_without_credential(url: str) -> str:
    """``url`` with any ``user:password@`` taken out."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
