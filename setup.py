"""The one dynamic part of the build: where the client distribution lives.

The main distribution depends on ``reverie-canary-client``, built from this
repository's ``client/`` folder (the chat backend's side: the client, the
snapshot types and the subject encoding, defined once).  PEP 508 needs an
absolute URL for a local dependency, so it is computed here from this file's
place; the other dependencies are listed in pyproject.toml
(``[tool.reverie-canary] dependencies``).  ``pip wheel .`` builds both wheels.
"""

import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "client"
LISTED = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["reverie-canary"]["dependencies"]

setup(install_requires=[f"reverie-canary-client[all] @ {CLIENT.as_uri()}", *LISTED])
