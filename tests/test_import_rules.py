"""The import rules find new code by themselves (issue 32, item 3).

``make lint`` runs ``scripts/lint_imports.py``: ``.importlinter`` with its ``@adapters`` lines
filled in from ``providers/gpuorch_*``, and a check that every core module is in a layer. A rule
that passes on the tree proves nothing by itself, so here an adapter that no list names,
``providers/gpuorch_nimbus``, is planted in a temporary copy of the tree, breaking each adapter
rule, and the wrapper must fail naming every import; a core module in no layer is named too. And
docs/development.md shows the very layers of the config.
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import lint_imports  # noqa: E402 - scripts/ is no package: put on the path just above

NIMBUS = """\
from gpuorch.reconciler import Reconciler
import boto3
from gpuorch_aws import AwsProvider
from gpuorch.provider.localdir.procs import spawn_detached
from gpuorch.provider.port import Provider
"""
# What the wrapper must name: the core outside the kit, another adapter's SDK, another adapter,
# and a module inside a kit package that the kit does not name (the kit names modules).
NAMED = ["gpuorch_nimbus -> gpuorch.reconciler", "gpuorch_nimbus -> boto3", "gpuorch_nimbus -> gpuorch_aws",
         "gpuorch_nimbus -> gpuorch.provider.localdir.procs"]


def _python_only(directory: str, names: list[str]) -> set[str]:
    """shutil.copytree's ignore: only the Python sources (grimp reads nothing else)."""
    return {n for n in names if n == "__pycache__" or (not n.endswith(".py") and not Path(directory, n).is_dir())}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tree's sources and lint config, with the planted adapter."""
    root = tmp_path_factory.mktemp("tree")
    for name in ("gpuorch", "providers"):
        shutil.copytree(REPO / name, root / name, ignore=_python_only)
    for name in (".importlinter", "pyproject.toml"):
        shutil.copy(REPO / name, root / name)
    (root / "providers" / "gpuorch_nimbus").mkdir()
    (root / "providers" / "gpuorch_nimbus" / "__init__.py").write_text(NIMBUS)
    return root


def test_a_new_adapter_no_list_names_is_checked_by_every_adapter_rule(tree: Path) -> None:
    assert "gpuorch_nimbus" not in (REPO / ".importlinter").read_text()  # found, never listed
    assert "gpuorch_nimbus" in lint_imports.adapters(tree)
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "lint_imports.py"), "--root", str(tree),
                          "--no-cache", "--no-logo"], capture_output=True, text=True, timeout=300)
    out = " ".join(run.stdout.split())  # lint-imports wraps long lines
    assert run.returncode != 0, out
    for named in NAMED:
        assert named in out, f"{named!r} not reported:\n{run.stdout}{run.stderr}"
    assert "the SDK of gpuorch_aws" in out
    for rule in ("Adapters import only the core's adapter kit", "No adapter imports another",
                 "No adapter imports another adapter's cloud SDK"):
        assert re.search(re.escape(rule) + r"( \([^)]*\))? BROKEN", out), f"{rule!r} not broken:\n{run.stdout}"
    assert "it finds them through registries) KEPT" in out  # the core's own rule: nimbus is no part of it


def test_a_core_module_in_no_layer_is_named_with_the_fix(tree: Path) -> None:
    layers = lint_imports.layer_modules((tree / ".importlinter").read_text())
    assert lint_imports.unlayered(tree, layers) == []
    (tree / "gpuorch" / "stray.py").write_text("from gpuorch.errors import UserInputError\n")
    try:
        found = lint_imports.unlayered(tree, layers)
    finally:
        (tree / "gpuorch" / "stray.py").unlink()
    assert len(found) == 1 and found[0].startswith("gpuorch.stray (gpuorch/stray.py) is in no layer")


def test_a_registered_adapter_missing_from_the_tree_is_named(tree: Path) -> None:
    assert lint_imports.unregistered(tree, lint_imports.adapters(tree)) == []
    missing = lint_imports.unregistered(tree, [a for a in lint_imports.adapters(tree) if a != "gpuorch_vast"])
    assert [line.split(" = ")[0] for line in missing] == ["entry point gpuorch.providers vast"]


def test_the_development_guide_shows_the_layers_of_the_config() -> None:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(REPO / ".importlinter")
    config = [ln.strip() for ln in cfg[lint_imports.LAYERS]["layers"].splitlines()
              if ln.strip() and not ln.strip().startswith("#")]
    guide = (REPO / "docs" / "development.md").read_text()
    block = re.search(r"## The core's layers.*?```text\n(.*?)```", guide, re.S)
    assert block is not None, "docs/development.md has no ```text block under 'The core's layers'"
    assert [ln.strip() for ln in block.group(1).splitlines() if ln.strip()] == config
