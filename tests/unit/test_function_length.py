"""No function in monitor/ is longer than 60 lines unless its docstring says why.

A long function is split into named steps; where the length is the clearest form (a table, a
match over kinds) its docstring says so with the phrase "long because". The functions listed in
``ALLOWED`` predate the rule, in modules other refactors own; each entry gives its reason, and an
entry is removed when its function is split.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "monitor"
MAX_LINES = 60
REASON = "long because"

#: ``path:qualified name`` -> what the function does, in modules outside this rule's first pass
#: (the edges, services, loops and scheduler, split by their owners).
ALLOWED: dict[str, str] = {}


def _functions(
    tree: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method in ``tree`` with its qualified name (``Class.method``, ``outer.inner``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _long_functions() -> dict[str, int]:
    """``path:qualified name`` -> line count, for functions over the limit without a reason."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, node in _functions(tree):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            docstring = (ast.get_docstring(node) or "").lower()
            if lines > MAX_LINES and REASON not in docstring:
                found[f"{path.relative_to(ROOT).as_posix()}:{name}"] = lines
    return found


def test_functions_over_60_lines_say_why_in_their_docstring() -> None:
    offenders = {key: lines for key, lines in _long_functions().items() if key not in ALLOWED}
    assert not offenders, (
        f"functions longer than {MAX_LINES} lines: split them into named steps, or say why the "
        f"length is the clearest form with '{REASON}' in the docstring: {offenders}"
    )


def test_every_allowed_function_has_a_reason() -> None:
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_walk_sees_nested_functions_and_methods() -> None:
    tree = ast.parse("class A:\n    def m(self):\n        def inner():\n            pass\n")
    assert [name for name, _ in _functions(tree)] == ["A.m", "A.m.inner"]
