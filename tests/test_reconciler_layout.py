"""The reconciler's shape, as the tools hold it (issue 32): three stages as packages, and decide pure.

``.importlinter``'s ``reconciler-stages`` contract says a stage imports only the stages below it
(the pass > apply > decide > observe) and ``decide-pure`` that decide imports neither the store, a
provider, a runner nor I/O. A contract that passes on the tree proves nothing by itself: here each
is run on a temporary copy of ``gpuorch/`` with violations planted, and must fail naming each
one, while the same copy without them passes. (No function of the pass, nor of the rest of the core
and the adapters, is over 60 lines: ``tests/test_function_size.py``.)
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONTRACTS = ("reconciler-stages", "decide-pure")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# (module of the copy, the line planted, the import lint-imports must name)
PLANTS = [
    ("reconciler/decide/job.py", "import sqlmodel", "gpuorch.reconciler.decide.job -> sqlmodel"),
    ("reconciler/decide/job.py", "from gpuorch.store.models import Job",
     "gpuorch.reconciler.decide.job -> gpuorch.store.models"),
    ("reconciler/decide/gates.py", "import subprocess", "gpuorch.reconciler.decide.gates -> subprocess"),
    ("reconciler/decide/deadline.py", "from gpuorch.store import Store",
     "gpuorch.reconciler.decide.deadline -> gpuorch.store"),
    ("reconciler/decide/attempt_steps.py", "from gpuorch.runners.port import Runner",
     "gpuorch.reconciler.decide.attempt_steps -> gpuorch.runners.port"),
    ("reconciler/decide/actions.py", "from gpuorch.provider.retry import RetryPolicy",
     "gpuorch.reconciler.decide.actions -> gpuorch.provider.retry"),
    ("reconciler/observe/views.py", "from gpuorch.reconciler.apply.money import Money",
     "gpuorch.reconciler.observe.views -> gpuorch.reconciler.apply.money"),
]


def _config(tmp: Path) -> None:
    """The repository's reconciler contracts, alone, over the copy (no adapter need be importable)."""
    real = configparser.ConfigParser(interpolation=None)
    real.read(REPO / ".importlinter")
    out = configparser.ConfigParser(interpolation=None)
    out["importlinter"] = {"root_package": "gpuorch", "include_external_packages": "True"}
    for name in CONTRACTS:
        section = f"importlinter:contract:{name}"
        assert real.has_section(section), f".importlinter has no [{section}]"
        out[section] = dict(real[section])
    with (tmp / ".importlinter").open("w") as f:  # where lint-imports looks, run there
        out.write(f)


def _lint(tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tmp)}  # the copy, ahead of the installed tree
    _config(tmp)
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "gpuorch", tmp_path / "gpuorch", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_the_reconciler_contracts_keep_the_tree(copy: Path) -> None:
    run = _lint(copy)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 kept, 0 broken" in run.stdout


def test_the_reconciler_contracts_fail_on_planted_imports(copy: Path) -> None:
    for module, line, _ in PLANTS:
        path = copy / "gpuorch" / module
        path.write_text(path.read_text() + f"\n{line}  # planted\n")
    run = _lint(copy)
    out = " ".join(run.stdout.split())  # lint-imports wraps long lines
    assert run.returncode != 0, out
    for _, _, named in PLANTS:
        assert named in out, f"{named!r} not reported:\n{run.stdout}"

