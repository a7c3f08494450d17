"""Where the Vast API key comes from, as the vastai client documents it: ``VAST_API_KEY``, then
``$XDG_CONFIG_HOME/vastai/vast_api_key`` (default ``~/.config/vastai/vast_api_key``), then the
legacy ``~/.vast_api_key`` (vastai ``VastAI.__init__`` docstring; docs.vast.ai/cli "set api-key").
Read at start and held in memory only: never written to the config, the database or a log."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "VAST_API_KEY"
_MAX = 4096  # a key is ~64 hex characters; a larger file is not a key file


def key_files() -> list[Path]:
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return [Path(xdg) / "vastai" / "vast_api_key", Path.home() / ".vast_api_key"]


def find_key() -> tuple[str, str] | None:
    """(the key, where it came from: ``env`` or the file's path), or None when there is none."""
    value = os.environ.get(ENV, "").strip()
    if value:
        return value, ENV
    for path in key_files():
        try:
            if not path.is_file():
                continue
            with path.open("rb") as f:
                text = f.read(_MAX + 1)
        except OSError:
            continue
        key = text.decode("utf-8", "replace").strip()
        if key and len(text) <= _MAX and "\n" not in key:
            return key, str(path)
    return None


MISSING = ("no Vast API key: set VAST_API_KEY, or run `vastai set api-key KEY` "
           "(it writes ~/.config/vastai/vast_api_key)")
