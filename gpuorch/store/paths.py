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


PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600  # the state holds job env values: its owner's alone


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) created 0700; an existing one is left as its owner set it
    (``gpuorch doctor`` warns when the state directory is wider)."""
    missing = []
    p = path
    while not p.is_dir() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):  # each level 0700 (mkdir's parents=True would use the umask's mode)
        d.mkdir(exist_ok=True, mode=PRIVATE_DIR)
        os.chmod(d, PRIVATE_DIR)  # mkdir's mode is filtered by the umask; this is not
    return path


def private_file(path: Path) -> None:
    """Make ``path`` 0600 if it exists and is wider (the database and its WAL, a log)."""
    try:
        if os.stat(path).st_mode & 0o077:
            os.chmod(path, PRIVATE_FILE)
    except FileNotFoundError:
        pass


def default_url(home: Path | None = None) -> str:
    return os.environ.get("GPUORCH_DATABASE_URL") or f"sqlite:///{(home or default_home()) / 'state.db'}"
