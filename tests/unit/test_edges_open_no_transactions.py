"""Handlers and commands call use cases; they never open a transaction themselves.

A use case (a function of ``monitor/services``) opens one unit of work; the edges — the HTTP
and web handlers, the composition root, the CLI — only call it (docs/architecture.md). This
test reads their source for the ways to open one: ``<engine>.begin()``, ``<engine>.connect()``
and ``UnitOfWork``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EDGES = ["monitor/http", "monitor/web", "monitor/cli", "monitor/edge.py", "monitor/app.py"]


def _openings(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("begin", "connect")
            and "engine" in ast.unparse(node.value)
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Name) and node.id == "UnitOfWork":
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: UnitOfWork")
    return found


def test_no_edge_opens_a_transaction() -> None:
    files = [
        p for edge in EDGES for p in ([ROOT / edge] if edge.endswith(".py") else (ROOT / edge).rglob("*.py"))
    ]
    assert len(files) > 20
    found = [o for path in files for o in _openings(path)]
    assert found == [], "call a use case of monitor/services instead:\n" + "\n".join(found)
