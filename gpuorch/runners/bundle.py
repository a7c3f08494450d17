"""The agent as one self-contained file for instances: a zipapp of ``gpuorch.agent`` and
``gpuorch.checkpoint`` (both stdlib only), run there as ``python3 gpuorch-agent-<hash>.pyz RUNDIR``.

The archive is deterministic (sorted entries, fixed timestamps), so its name can carry its
content hash: a runner uploads it only if an instance lacks that exact version.
"""

from __future__ import annotations

import functools
import hashlib
import io
import zipfile
from pathlib import Path

import gpuorch

PACKAGES = ("agent", "checkpoint")  # under gpuorch/; everything the agent imports
# Runs the package exactly as ``python -m gpuorch.agent RUNDIR`` does, wherever its main lives.
_MAIN = b"import runpy\nrunpy.run_module('gpuorch.agent', run_name='__main__', alter_sys=True)\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


@functools.lru_cache(maxsize=1)
def agent_bundle() -> tuple[str, bytes]:
    """``(file name, zipapp bytes)``; the name is ``gpuorch-agent-<sha256[:16]>.pyz``.

    Built once per process from the installed sources.
    """
    root = Path(gpuorch.__file__).resolve().parent
    files = {"__main__.py": _MAIN, "gpuorch/__init__.py": (root / "__init__.py").read_bytes()}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            files[f"gpuorch/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[name])
    data = buf.getvalue()
    return f"gpuorch-agent-{hashlib.sha256(data).hexdigest()[:16]}.pyz", data
