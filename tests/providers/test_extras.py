"""Each adapter's extra installs what its code imports (the gcp/azure extras once lacked paramiko).

For each adapter, the import closure is walked over the source's ASTs: the adapter package, and
every core module it reaches (``gpuorch.runners.ssh`` -> ``paramiko``), lazy imports inside
functions included. ``if TYPE_CHECKING:`` imports are not needed at run time and are skipped,
except to follow a name a package re-exports that way (the adapter kit's lazy ``__init__``:
``from gpuorch.provider import Runners`` reaches ``gpuorch.runners.pool``). Every third-party
module found must come from a distribution of the core dependencies or the adapter's extra
(pyproject.toml), or of what those require in turn (installed metadata); a namespace package
(``google``, ``azure``) is matched by its deepest owned module. No network, nothing installed.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions, requires
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT, ROOT / "providers")
ADAPTERS = {"aws": "aws", "gcp": "gcp", "azure": "azure", "local": None, "sim": None}  # adapter -> its extra


def module_file(name: str) -> Path | None:
    parts = name.split(".")
    for src in SOURCES:
        for candidate in (src.joinpath(*parts, "__init__.py"), src.joinpath(*parts[:-1], parts[-1] + ".py")):
            if candidate.is_file():
                return candidate
    return None


def _ours(name: str) -> bool:
    return name.split(".")[0].startswith("gpuorch")


def _type_checking(test: ast.expr) -> bool:
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


@cache
def imports(name: str) -> tuple[frozenset[tuple[str, str | None]], dict[str, str]]:
    """Of module ``name``: the run-time imports as (module, imported name or None), and the
    names it re-exports for type checkers only (name -> the module it is from)."""
    path = module_file(name)
    assert path is not None, name
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    runtime: set[tuple[str, str | None]] = set()
    reexports: dict[str, str] = {}

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        if isinstance(node, ast.Import) and not typing_only:
            runtime.update((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            mod = ".".join([*base, *([node.module] if node.module else [])])
            if typing_only:
                reexports.update({a.asname or a.name: mod for a in node.names})
            else:
                runtime.update((mod, a.name) for a in node.names)
        for child in ast.iter_child_nodes(node):  # lazy imports in functions, try blocks, ...
            visit(child, typing_only)

    visit(ast.parse(path.read_text()), False)
    return frozenset(runtime), reexports


def closure(adapter: str) -> set[str]:
    """Every third-party module gpuorch_<adapter>'s code may import at run time."""
    start = f"gpuorch_{adapter}"
    pending = [start, *(f"{start}.{p.stem}" for p in (ROOT / "providers" / start).glob("*.py"))]
    seen: set[str] = set()
    third: set[str] = set()
    while pending:
        name = pending.pop().removesuffix(".__init__")
        if name in seen:
            continue
        seen.add(name)
        for mod, attr in imports(name)[0]:
            if not _ours(mod):
                if mod.split(".")[0] not in sys.stdlib_module_names and mod != "__future__":
                    third.add(mod)
                continue
            pending.append(mod)
            if attr is not None and module_file(f"{mod}.{attr}") is not None:
                pending.append(f"{mod}.{attr}")  # a submodule
            elif attr is not None and attr in imports(mod)[1]:
                pending.append(imports(mod)[1][attr])  # a lazily re-exported name
    return third


def _canonical(dist: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", dist, maxsplit=1)[0].lower().replace("_", "-")


@cache
def _modules_of(dist: str) -> frozenset[str]:
    files = distribution(dist).files or []
    return frozenset(".".join(f.with_suffix("").parts).removesuffix(".__init__") for f in files if f.suffix == ".py")


def owners(module: str) -> set[str]:
    """The installed distributions that provide ``module`` (the deepest match for a namespace)."""
    candidates = packages_distributions().get(module.split(".")[0], [])
    if len(set(candidates)) > 1:
        parts = module.split(".")
        for n in range(len(parts), 0, -1):
            found = [d for d in candidates if ".".join(parts[:n]) in _modules_of(d)]
            if found:
                return {_canonical(d) for d in found}
    return {_canonical(d) for d in candidates}


@cache
def requirements_of(dist: str) -> frozenset[str]:
    """``dist`` and everything its installed metadata requires, recursively (extras left out)."""
    out = {dist}
    try:
        reqs = requires(dist) or []
    except PackageNotFoundError:
        return frozenset(out)
    for r in reqs:
        if "extra ==" not in r:
            out |= requirements_of(_canonical(r))
    return frozenset(out)


def provided(extra: str | None) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    direct = [*project["dependencies"], *(project["optional-dependencies"][extra] if extra else [])]
    return {d for r in direct for d in requirements_of(_canonical(r))}


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_the_extra_provides_every_module_the_adapter_imports(adapter):
    have = provided(ADAPTERS[adapter])
    missing: dict[str, list[str]] = {}
    for module in sorted(closure(adapter)):
        found = owners(module)
        assert found, f"{module}: imported in gpuorch_{adapter}'s closure, but no installed distribution has it"
        if not found & have:
            missing[module] = sorted(found)
    extra = f"gpuorch[{ADAPTERS[adapter]}]" if ADAPTERS[adapter] else "gpuorch"
    assert not missing, f"{extra} does not install {missing} (module: distributions); add them to its extra"


def test_the_walk_follows_the_kit_and_tells_namespace_packages_apart():
    gcp = closure("gcp")
    assert "paramiko" in gcp  # only through gpuorch.provider's lazy re-export of Runners -> gpuorch.runners.ssh
    assert any(m.startswith("google.cloud.compute") for m in gcp)
    assert owners("azure.mgmt.compute") == {"azure-mgmt-compute"}
    assert owners("azure.identity") == {"azure-identity"}
