"""Plugin tables found by entry points: ``gpuorch.stores`` (URL scheme -> ``ObjectStore`` class)
here, and ``gpuorch.notices`` (notice kind -> poller class) for ``gpuorch.agent.notice``.

On the control host the tables come from the installed packages' entry points (pyproject.toml).
On an instance there are none: the agent bundle carries ``gpuorch/checkpoint/plugins.json``,
the same tables written when the bundle was built (``gpuorch.runners.bundle``), and the
modules they name.

Stdlib only (Python 3.8+): shipped to instances with the agent.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from typing import Any, Dict, List, Optional

STORES_GROUP = "gpuorch.stores"
NOTICES_GROUP = "gpuorch.notices"
PLUGINS_FILE = "plugins.json"  # in this package, inside the agent bundle: {group: {name: "module:attr"}}


def _entry_points(group: str) -> Dict[str, str]:
    from importlib import metadata

    if sys.version_info >= (3, 10):
        found = metadata.entry_points(group=group)
    else:  # pragma: no cover - the instance's python 3.8/3.9
        found = metadata.entry_points().get(group, ())
    return {ep.name: ep.value.split("[")[0].strip() for ep in found}


def bundled_tables() -> Dict[str, Dict[str, str]]:
    """The tables packed into the agent bundle, or {} outside one (a missing or unreadable file)."""
    import pkgutil  # here: read only where no entry points are installed (the instance), not by the daemon

    try:
        data = pkgutil.get_data(__name__.rpartition(".")[0], PLUGINS_FILE)
    except OSError:
        return {}
    if not data:
        return {}
    tables = json.loads(data.decode())
    return tables if isinstance(tables, dict) else {}


class PluginTable:
    """``name -> "module:attr"`` for one entry-point group, read on first use.

    The entry points win; without any (an instance), the bundled table is used. ``table`` is a
    plain dict: tests may ``monkeypatch.setitem`` it.
    """

    def __init__(self, group: str) -> None:
        self.group = group
        self._table: Optional[Dict[str, str]] = None

    @property
    def table(self) -> Dict[str, str]:
        if self._table is None:
            self._table = _entry_points(self.group) or dict(bundled_tables().get(self.group) or {})
        return self._table

    def names(self) -> List[str]:
        return list(self.table)

    def module(self, name: str) -> str:
        return self.table[name].partition(":")[0]

    def findable(self, name: str) -> bool:
        """Whether ``name``'s module is there, looked up without importing it."""
        try:
            return importlib.util.find_spec(self.module(name)) is not None
        except ModuleNotFoundError:  # its package is absent
            return False

    def load(self, name: str) -> Any:
        """The object ``name`` points at (its module imported). KeyError for an unknown name;
        ModuleNotFoundError when its module (or a module it imports at load) is missing."""
        module_name, _, attr = self.table[name].partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
        return obj


STORE_PLUGINS = PluginTable(STORES_GROUP)
NOTICE_PLUGINS = PluginTable(NOTICES_GROUP)
