"""Every exception class the project defines sits under the one root, CanaryError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from reverie_canary.client.errors import CanaryError
from reverie_canary.shared.contract import errors

PACKAGES = ("reverie_canary.shared", "reverie_canary.services", "reverie_canary.canary", "reverie_canary.client",
            "reverie_canary.simulator")


def defined_exceptions() -> list[type[BaseException]]:
    found = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            found += [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, BaseException)
                      and c.__module__ == module.__name__]
    return found


def test_every_exception_class_is_under_the_one_root():
    """No module defines an exception outside CanaryError (the contract's intents and the client's errors alike)."""
    found = defined_exceptions()
    assert len(found) > 20  # the walk saw the packages
    assert [f"{c.__module__}.{c.__qualname__}" for c in found if not issubclass(c, CanaryError)] == []
    assert errors.CanaryError is CanaryError
