"""How a user's reference to a row (``gpuorch status 12`` or ``gpuorch status my-job``) is read."""

from __future__ import annotations

MAX_ID = 2**63 - 1  # SQLite and PostgreSQL integer keys


def row_id(ref: str) -> int | None:
    """``ref`` as a row id when it is one (ASCII digits within the key range), else None (a name).

    ``str.isdigit`` is true for "²" (``int`` refuses it), and a 30-digit id overflows the driver.
    """
    if not (ref.isascii() and ref.isdigit()) or len(ref) > 19:
        return None
    n = int(ref)
    return n if n <= MAX_ID else None
