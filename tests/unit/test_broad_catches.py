"""``except Exception`` stands only at a task's outermost boundary, each one listed here with why."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "services", "canary", "client", "simulator")

#: (file, enclosing function) -> the boundary it is.  Inner code catches the faults it expects
#: (``NATS_FAULTS``, ``REDIS_FAULTS`` in shared/runtime/retry.py, the contract's errors).
BOUNDARIES = {
    ("services/router/service.py", "Router.expiry_loop"): "a background loop's top",
    ("services/notifier/service.py", "Notifier._try"): "a delivery's settle point: a sender's bug",
    ("shared/runtime/service.py", "Shell._guard"): "a background loop's top, restarted",
    ("shared/runtime/eventlog.py", "_Reader.on_msg"): "a subscription callback: the scan's reader raises it",
    ("shared/runtime/consumer.py", "Consumer._handle"): "a message's settle point",
    ("shared/runtime/consumer.py", "Consumer._fold_in_hand"): "a batch's settle point",
    ("canary/cli.py", "main"): "the CLI's top",
    ("canary/cli_probe.py", "probe"): "a CLI command's top",
    ("canary/runtime.py", "running"): "stopping each service: one failing stop does not skip the rest",
    ("client/ignore_list.py", "IgnoreListClient.apply"): "the caller's callback",
    ("client/ignore_list.py", "IgnoreListClient._run"): "the watch loop's top, restarted",
    ("client/ignore_list.py", "IgnoreListClient._on_entry"): "a subscription callback",
}


def broad_catches() -> set[tuple[str, str]]:
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "build" in path.parts:
                continue
            rel = str(path.relative_to(ROOT))

            def visit(node: ast.AST, scope: list[str], rel: str = rel) -> None:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                        visit(child, [*scope, child.name])
                        continue
                    if isinstance(child, ast.ExceptHandler) and isinstance(child.type, ast.Name) \
                            and child.type.id == "Exception":
                        found.add((rel, ".".join(scope[:2])))
                    visit(child, scope)

            visit(ast.parse(path.read_text(encoding="utf-8")), [])
    return found


def test_broad_catches_stand_only_at_listed_boundaries():
    """Every ``except Exception`` in the product packages is one of the listed boundaries, and each listed one exists."""
    assert broad_catches() == set(BOUNDARIES)
