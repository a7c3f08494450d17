"""Small SFTP helpers over paramiko's ``SFTPClient`` with POSIX paths on the remote side.

Missing files raise ``FileNotFoundError`` (paramiko maps SFTP's no-such-file to ENOENT).
"""

from __future__ import annotations

import errno
import posixpath
import secrets
from typing import IO

import paramiko


def exists(sftp: paramiko.SFTPClient, path: str) -> bool:
    try:
        sftp.stat(path)
    except FileNotFoundError:
        return False
    return True


def makedirs(sftp: paramiko.SFTPClient, path: str) -> None:
    """``mkdir -p``: create ``path`` and its missing parents; quiet if it exists."""
    missing = []
    while path not in ("", "/") and not exists(sftp, path):
        missing.append(path)
        path = posixpath.dirname(path)
    for directory in reversed(missing):
        try:
            sftp.mkdir(directory)
        except OSError as e:  # made meanwhile by a concurrent caller (SFTP reports a generic failure)
            if not exists(sftp, directory):
                raise OSError(e.errno or errno.EIO, f"cannot create {directory}: {e}") from e


def put_atomic(sftp: paramiko.SFTPClient, data: IO[bytes], path: str) -> None:
    """Upload to a temp name beside ``path``, then rename over it: readers never see a partial file."""
    tmp = posixpath.join(posixpath.dirname(path), f".{posixpath.basename(path)}.{secrets.token_hex(6)}")
    try:
        sftp.putfo(data, tmp)
        sftp.posix_rename(tmp, path)  # OpenSSH's extension; plain SFTP rename refuses to replace
    except BaseException:
        try:
            sftp.remove(tmp)
        except OSError:
            pass
        raise


def read_file(sftp: paramiko.SFTPClient, path: str, offset: int = 0, limit: int | None = None) -> bytes:
    """The bytes of ``path`` from ``offset`` (to its end, or at most ``limit``)."""
    with sftp.open(path, "rb") as f:
        if offset:
            f.seek(offset)
        data: bytes = f.read() if limit is None else f.read(limit)
        return data
