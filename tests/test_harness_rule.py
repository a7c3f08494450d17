"""Feature tests run through the assembled daemon (``gpuorch.testing.daemon``); a test that builds
a bare ``Reconciler`` says why in its docstring (DESIGN.md 4), so the reason is read in review and
a test that could use the harness is not written around it by habit.

The rule: every ``Reconciler(...)`` call under tests/ sits in a function whose docstring, or in a
module whose docstring, contains "bare Reconciler" and the reason after it.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MARK = "bare reconciler"


def _builds_reconciler(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "Reconciler")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "Reconciler"))


def _unexplained(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    module_ok = MARK in (ast.get_docstring(tree) or "").lower()
    out = []

    def visit(node: ast.AST, explained: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            explained = explained or MARK in (ast.get_docstring(node) or "").lower()
        if _builds_reconciler(node) and not explained:
            out.append(f"{path}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(child, explained)

    visit(tree, module_ok)
    return out


def test_every_bare_reconciler_in_the_tests_says_why():
    missing = [where for path in sorted(TESTS.rglob("*.py")) for where in _unexplained(path)]
    assert missing == [], ("these build a Reconciler by hand without 'Bare Reconciler: <why>' in their function's or "
                           "module's docstring; use gpuorch.testing.daemon.AssembledDaemon, or say why not: "
                           + ", ".join(missing))


def test_the_rule_sees_a_bare_reconciler(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""x"""\ndef t():\n    rec = Reconciler(store, {})\n')
    assert len(_unexplained(probe)) == 1
    probe.write_text('"""x"""\ndef t():\n    """Bare Reconciler: a fake clock."""\n    rec = Reconciler(store, {})\n')
    assert _unexplained(probe) == []
