"""gpuorch.agent and gpuorch.checkpoint ship to instances as-is: they must import only the stdlib."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_agent_and_checkpoint_import_only_the_stdlib():
    # -S: no site-packages at all, like a bare python3 on a fresh cloud image.
    code = (
        "import sys, gpuorch.agent.agent, gpuorch.checkpoint, gpuorch.checkpoint.filestore\n"
        "roots = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(r for r in roots - set(sys.stdlib_module_names) if r not in ('gpuorch', '__main__')))\n"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_bundle_parses_as_python_3_8():
    """The agent bundle (gpuorch.runners.bundle) runs on the instance's python3 (3.8+), cloud
    store adapters included: s3.py and azstore.py are imported there for their schemes."""
    import ast

    from gpuorch.runners.bundle import PACKAGES

    paths = [p for package in PACKAGES for p in sorted((REPO / "gpuorch" / package).rglob("*.py"))]
    assert any(p.name == "azstore.py" for p in paths)
    for path in paths:
        ast.parse(path.read_text(), str(path), feature_version=(3, 8))
