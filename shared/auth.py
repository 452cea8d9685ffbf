"""NATS credentials: one user per service, operators, chat backends and an admin.

The server configuration is ``shared/nats/server.conf`` (used by compose.yaml,
``canary demo`` and the tests); it reads each password from the environment
variable ``CANARY_<USER>_PASSWORD``.  Who may publish what is written there.
"""

from __future__ import annotations

import secrets
from importlib import resources
from pathlib import Path

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
