"""No function of the core or an adapter is over 60 lines (issue 32 item 1).

A long function does several steps; it is split into small named ones (ruff's ``C901`` at 15
holds the complexity, this the length). The scan is an AST walk over ``gpuorch/`` and
``providers/``: a function's lines run from its ``def`` to its last line, signature and
docstring included, nested functions counted in their parent too.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("gpuorch", "providers")
MAX_LINES = 60


def long_functions(root: Path, limit: int = MAX_LINES) -> list[str]:
    """``path:line name: N lines`` (the path from ``root``'s parent) for each function under
    ``root`` over ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_function_of_the_core_or_an_adapter_is_over_60_lines() -> None:
    long = [entry for root in ROOTS for entry in long_functions(REPO / root)]
    assert not long, f"functions over {MAX_LINES} lines (split them by step):\n" + "\n".join(long)


def _lines(indent: int, n: int) -> list[str]:
    return [" " * indent + f"x{i} = {i}" for i in range(n)]


def test_the_scan_names_a_planted_long_function(tmp_path: Path) -> None:
    # A check that cannot fail proves nothing: a 61-line function is named (an async one, a method
    # and a nested function too), a 60-line one is not.
    source = [
        "def ok():", '    """60 lines."""', *_lines(4, 58), "", "",  # lines 1-60
        "async def too_long():", *_lines(4, 60), "", "",  # lines 63-123
        "class C:",
        "    def outer(self):",  # line 127: 1 + 1 + 60 + 1 lines
        "        def inner():", *_lines(12, 59), "            return x0",  # line 128: 61 lines
        "        return inner",
    ]
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "planted.py").write_text("\n".join(source) + "\n")
    assert long_functions(tmp_path / "pkg") == [
        "pkg/sub/planted.py:63 too_long: 61 lines",
        "pkg/sub/planted.py:127 outer: 63 lines",
        "pkg/sub/planted.py:128 inner: 61 lines",
    ]
