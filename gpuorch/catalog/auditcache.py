"""The row audit's result for a catalog file, kept on disk by the file's content hash, so a large
``--catalog`` list is audited once, not in every process that reads it (``plan``, ``offers``, the
daemon after a restart).

An entry is ``$XDG_CACHE_HOME/gpuorch/catalog-audit/<sha256 of the file>-<rules>.json`` (default
``~/.cache``), holding the findings. ``<rules>`` is a hash of what the findings depend on besides
the file: the audit and row code, the GPU table and the installed adapters' catalogs (families,
shapes, billing), so a new release or adapter never reads an old answer. A changed file has another
hash; an entry that cannot be read is audited again; a cache that cannot be written (a read-only
home) is skipped silently: the cache only saves time. At most ``KEEP`` entries are kept, the
oldest removed first. Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import cache
from pathlib import Path

from gpuorch.catalog.audit import Finding

KEEP = 64


def directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuorch" / "catalog-audit"


@cache
def rules_digest() -> str:
    """A hash of everything besides the file that the findings depend on (read once per process)."""
    from gpuorch import gpus
    from gpuorch.catalog import audit, rows
    from gpuorch.catalog.registry import catalogs

    h = hashlib.sha256()
    for module in (audit, rows):
        h.update(Path(str(module.__file__)).read_bytes())
    h.update(repr(gpus.GPUS).encode())
    h.update(repr(sorted((name, c.families, c.shapes, c.billing) for name, c in catalogs().items())).encode())
    return h.hexdigest()[:16]


def entry(content: bytes) -> Path:
    return directory() / f"{hashlib.sha256(content).hexdigest()}-{rules_digest()}.json"


def load(content: bytes) -> list[Finding] | None:
    """The cached findings for a file with this content, or None (audit it)."""
    try:
        data = json.loads(entry(content).read_text(encoding="utf-8"))
        return [Finding(int(i), str(check), str(msg), "warning" if sev == "warning" else "error", str(col))
                for i, check, msg, sev, col in data["findings"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(content: bytes, findings: list[Finding]) -> None:
    path = entry(content)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"findings": [[x.index, x.check, x.message, x.severity, x.column] for x in findings]}, f)
        os.replace(tmp, path)
        old = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for stale in old[:-KEEP]:
            stale.unlink(missing_ok=True)
    except OSError:
        return
