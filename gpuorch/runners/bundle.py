"""The agent as one self-contained file for instances: a zipapp of ``gpuorch.agent`` and
``gpuorch.checkpoint`` (both stdlib only), plus each installed adapter's instance-side modules
(the stores and notice pollers its ``gpuorch.stores``/``gpuorch.notices`` entry points name, and
their packages' ``__init__.py``), run there as ``python3 gpuorch-agent-<hash>.pyz RUNDIR``.

An instance has no entry points: the bundle carries the two tables as
``gpuorch/checkpoint/plugins.json``, which the registries read when entry points are absent.

The archive is deterministic (sorted entries, fixed timestamps, sorted JSON), so its name can
carry its content hash: a runner uploads it only if an instance lacks that exact version.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import json
import zipfile
from pathlib import Path

import gpuorch
from gpuorch.checkpoint.registry import NOTICE_PLUGINS, PLUGINS_FILE, STORE_PLUGINS, PluginTable

PACKAGES = ("agent", "checkpoint")  # under gpuorch/; everything the agent imports from the core
PLUGIN_TABLES = (STORE_PLUGINS, NOTICE_PLUGINS)
# Runs the package exactly as ``python -m gpuorch.agent RUNDIR`` does, wherever its main lives.
_MAIN = b"import runpy\nrunpy.run_module('gpuorch.agent', run_name='__main__', alter_sys=True)\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


def _source(module: str) -> tuple[str, bytes]:
    """``(path in the zip, source)`` of a plain ``.py`` module or package ``__init__``."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise RuntimeError(f"cannot bundle {module!r} for instances: no .py source found")
    is_package = spec.submodule_search_locations is not None
    return module.replace(".", "/") + ("/__init__.py" if is_package else ".py"), Path(spec.origin).read_bytes()


def adapter_modules(tables: tuple[PluginTable, ...] = PLUGIN_TABLES) -> list[str]:
    """The installed plugin modules outside the bundled core packages, sorted: what an
    instance must be given besides ``gpuorch.agent`` and ``gpuorch.checkpoint``."""
    core = tuple(f"gpuorch.{p}." for p in PACKAGES)
    return sorted({t.module(n) for t in tables for n in t.names()
                   if not t.module(n).startswith(core) and t.findable(n)})


def bundle_files() -> dict[str, bytes]:
    """Every file of the bundle by its path in the zip (the core packages, the adapters'
    instance-side modules and their packages' ``__init__.py``, and ``plugins.json``)."""
    root = Path(gpuorch.__file__).resolve().parent
    files = {"__main__.py": _MAIN, "gpuorch/__init__.py": (root / "__init__.py").read_bytes()}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            files[f"gpuorch/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    for module in adapter_modules():
        parts = module.split(".")
        for i in range(1, len(parts) + 1):  # the module and each package above it
            name, data = _source(".".join(parts[:i]))
            files[name] = data
    # Only what the bundle can load: a plugin whose module is not installed here is left out.
    tables = {t.group: {n: t.table[n] for n in sorted(t.names()) if t.findable(n)} for t in PLUGIN_TABLES}
    files[f"gpuorch/checkpoint/{PLUGINS_FILE}"] = (json.dumps(tables, indent=1, sort_keys=True) + "\n").encode()
    return files


@functools.lru_cache(maxsize=1)
def agent_bundle() -> tuple[str, bytes]:
    """``(file name, zipapp bytes)``; the name is ``gpuorch-agent-<sha256[:16]>.pyz``.

    Built once per process from the installed sources.
    """
    files = bundle_files()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[name])
    data = buf.getvalue()
    return f"gpuorch-agent-{hashlib.sha256(data).hexdigest()[:16]}.pyz", data
