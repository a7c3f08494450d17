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
