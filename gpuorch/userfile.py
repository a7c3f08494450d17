"""Reading a file a user names (``--catalog``, ``api.token_file``, a config file): bounded in
size, and refused when it is not a file at all.

``open(path).read()`` of ``/dev/zero`` or ``/dev/urandom`` grows until memory runs out, and a
directory or socket fails with an errno the user must decode. Here a character or block device,
a directory or a socket is refused in one line naming the option; a regular file or a pipe
(``--catalog <(curl ...)``) is read up to ``limit`` bytes, and one byte more is refused.
Standard library only (a leaf).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuorch.errors import UserInputError

_NOT_A_FILE = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def _head(option: str, path: Path) -> str:
    """``api.token_file: /x``, or ``/x`` alone where the option is the path (a catalog's lines)."""
    return str(path) if option == str(path) else f"{option}: {path}"


def _refuse_kind(mode: int, path: Path, option: str, what: str) -> None:
    for test, kind in _NOT_A_FILE:
        if test(mode):
            raise UserInputError(f"{_head(option, path)} is {kind}, not a file; give the path of {what}")


def read_bytes(path: str | os.PathLike[str], *, option: str, what: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``; UserInputError (one line naming ``option``) for a
    path that cannot be read, is not a file or a pipe, or holds more than ``limit`` bytes."""
    p = Path(path).expanduser()
    try:
        _refuse_kind(os.stat(p).st_mode, p, option, what)  # before open: opening some devices acts
        with open(p, "rb") as f:
            _refuse_kind(os.fstat(f.fileno()).st_mode, p, option, what)  # it may have changed since
            data = f.read(limit + 1)
    except OSError as e:
        raise UserInputError(f"{option}: cannot read {what} ({e.strerror or e}); check the path and its "
                             "permissions") from None
    if len(data) > limit:
        raise UserInputError(f"{_head(option, p)} is larger than {limit} bytes; give the path of {what}")
    return data


def read_text(path: str | os.PathLike[str], *, option: str, what: str, limit: int) -> str:
    """``read_bytes`` as UTF-8 text; UserInputError naming the first byte that is not."""
    data = read_bytes(path, option=option, what=what, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserInputError(f"{_head(option, Path(path).expanduser())} is not UTF-8 text (byte {e.start}); save "
                             "it as UTF-8") from None
