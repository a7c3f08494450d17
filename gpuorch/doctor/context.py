"""What the doctor's checks share: the context they fill in for each other, and their type.

Its own module (not the package's ``__init__``), so that the check modules, which the package
runs, do not import the package back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpuorch.doctor.findings import Finding

if TYPE_CHECKING:
    from gpuorch.ops.config import DaemonConfig
    from gpuorch.ops.config_sources import Loaded
    from gpuorch.provider.port import Provider


@dataclass
class Context:
    config_path: Path | None = None
    loaded: Loaded | None = None  # set by check_config
    providers: dict[str, Provider] = field(default_factory=dict)  # set by check_providers

    @property
    def config(self) -> DaemonConfig | None:
        return self.loaded.config if self.loaded else None

    def close(self) -> None:
        for p in self.providers.values():
            try:
                p.close()
            except Exception:  # closing is best effort
                pass


Check = Callable[[Context], Iterable[Finding]]
