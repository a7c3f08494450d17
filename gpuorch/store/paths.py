"""Where the state store lives by default (stdlib only: the configuration needs it without the ORM)."""

from __future__ import annotations

import os
from pathlib import Path


def default_home() -> Path:
    env = os.environ.get("GPUORCH_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    return Path(base).expanduser() / "gpuorch"


def default_url(home: Path | None = None) -> str:
    return os.environ.get("GPUORCH_DATABASE_URL") or f"sqlite:///{(home or default_home()) / 'state.db'}"
