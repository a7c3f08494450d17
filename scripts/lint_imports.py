#!/usr/bin/env python3
"""``make lint``'s import rules: ``lint-imports`` over ``.importlinter`` with the adapters found,
not listed (issue 32).

- Every line ``@adapters`` of ``.importlinter`` becomes the adapter packages under ``providers/``
  (``providers/gpuorch_*/__init__.py``): a new adapter is in every contract the day it exists,
  registered or not. Every ``gpuorch.providers`` entry point of pyproject.toml must name one of
  them (an adapter installed from elsewhere is not this tree's to check).
- Every module of ``gpuorch/`` must be in a layer of the ``core-layers`` contract (the layer's
  module or one of its descendants); a package's ``__init__`` that imports only its own modules
  needs none (a layer names a package with all its modules, so it could not be listed alone).
- Then ``lint-imports <the filled-in copy>``, run on the tree at ``--root`` (default:
  this repository) ahead of whatever is installed. Extra arguments go to ``lint-imports``.

Exit status: lint-imports', or 1 when it passed but a problem was found before it (one line each,
on stderr). Stdlib only.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

MARK = "@adapters"
LAYERS = "importlinter:contract:core-layers"


def adapters(root: Path) -> list[str]:
    """The adapter packages of the tree: ``providers/gpuorch_*`` with an ``__init__.py``."""
    return sorted(p.parent.name for p in (root / "providers").glob("gpuorch_*/__init__.py"))


def unregistered(root: Path, found: list[str]) -> list[str]:
    """``gpuorch.providers`` entry points whose package is not one of ``found``."""
    data = tomllib.loads((root / "pyproject.toml").read_text())
    points = data.get("project", {}).get("entry-points", {}).get("gpuorch.providers", {})
    return [f"entry point gpuorch.providers {name} = {target!r}: no providers/{target.split('.')[0]}/ in this tree"
            for name, target in sorted(points.items()) if target.split(".")[0] not in found]


def filled(text: str, names: list[str]) -> str:
    """``.importlinter``'s text with each ``@adapters`` line replaced by ``names``, indented alike."""
    out = []
    for line in text.splitlines():
        if line.strip() == MARK:
            indent = line[:len(line) - len(line.lstrip())]
            out += [indent + n for n in names]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def layer_modules(config_text: str) -> list[str]:
    """The modules the ``core-layers`` contract names, in order."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read_string(config_text)
    lines = [ln.strip() for ln in cfg[LAYERS]["layers"].splitlines()]
    return [m.strip() for ln in lines if ln and not ln.startswith("#") for m in re.split(r"[|:]", ln) if m.strip()]


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_only_its_own(path: Path, package: str) -> bool:
    """Whether the ``__init__`` at ``path`` imports nothing of the core outside ``package``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside the package when it climbs no higher than it
                if node.level > 1:
                    return False
                continue
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        if any(n.split(".")[0] == "gpuorch" and n != package and not n.startswith(package + ".") for n in names):
            return False
    return True


def unlayered(root: Path, layers: list[str]) -> list[str]:
    """The modules of ``gpuorch/`` in no layer, each with the fix."""
    out = []
    for path in sorted((root / "gpuorch").rglob("*.py")):
        name = _module_name(root, path)
        if name == "gpuorch" or any(name == m or name.startswith(m + ".") for m in layers):
            continue
        if path.name == "__init__.py" and _imports_only_its_own(path, name):
            continue
        out.append(f"{name} ({path.relative_to(root)}) is in no layer of .importlinter's core-layers: "
                   "add it to the layer its imports allow (docs/development.md, 'The core's layers')")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the tree to check (default: this repository)")
    args, rest = parser.parse_known_args(argv)
    root: Path = args.root.resolve()
    names = adapters(root)
    text = filled((root / ".importlinter").read_text(), names)
    problems = unregistered(root, names) + unlayered(root, layer_modules(text))
    if problems:  # said first; the contracts still run, so one run names every problem
        print("\n".join(problems), file=sys.stderr)
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), str(root / "providers"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with tempfile.TemporaryDirectory(prefix="gpuorch-lint-") as tmp:
        config = Path(tmp) / "importlinter.ini"
        config.write_text(text)
        rc = subprocess.run([str(lint), *rest, str(config)], cwd=root, env=env, check=False).returncode
    return rc or (1 if problems else 0)


if __name__ == "__main__":
    sys.exit(main())
