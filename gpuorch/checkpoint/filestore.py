"""``FileStore``: the ObjectStore on a local (or network-mounted) directory, ``file:///abs/path``.

Each key is a file under the root. Atomic puts: write a temp file in the target's directory,
fsync it, ``os.replace`` it into place, fsync the directory. Temp files carry a reserved name
prefix so ``list`` never shows them and no key can collide with them.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

from gpuorch.checkpoint.store import ObjectNotFound, ObjectStore
from gpuorch.checkpoint.url import StoreUrl

_TMP = ".gpuorch-tmp-"
HOME = "~"  # file://~/path: the path under the opening user's home directory


class FileStore(ObjectStore):
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def from_url(cls, url: StoreUrl) -> tuple[FileStore, str]:
        """``file:///abs/path``, or ``file://~/path``: under the home directory of the user whose
        process opens it (the daemon's, for its local instances' agents), a per-user place where
        ``/tmp`` would be shared with every user of the host."""
        if url.scheme != "file" or url.host not in ("", "localhost", HOME) or not url.path.startswith("/"):
            raise ValueError(f"cannot read store URL {url.raw!r}; write file:///absolute/path or file://~/path")
        if url.host == HOME:
            home = os.path.expanduser("~")
            if not os.path.isabs(home):  # no HOME and no passwd entry: never a path relative to the cwd
                raise ValueError(f"cannot read store URL {url.raw!r}: this process has no home directory; "
                                 "write file:///absolute/path")
            return cls(Path(home) / url.path.lstrip("/")), ""
        return cls(Path(url.path)), ""

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or key.startswith("/") or any(p in ("", ".", "..") or p.startswith(_TMP) for p in parts):
            raise ValueError(f"invalid object key {key!r}")
        return self.root.joinpath(*parts)

    def _write(self, key: str, fill: Callable[[BinaryIO], object]) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(target, fill)

    def put_file(self, key: str, path: Path) -> None:
        with open(path, "rb") as src:
            self._write(key, lambda dst: shutil.copyfileobj(src, dst, 1 << 20))

    def put_bytes(self, key: str, data: bytes) -> None:
        self._write(key, lambda dst: dst.write(data))

    def get_file(self, key: str, path: Path) -> None:
        try:
            src = open(self._path(key), "rb")  # noqa: SIM115 - closed by `with src` below; only open's miss is ours
        except FileNotFoundError:
            raise ObjectNotFound(f"no object {key!r} in {self!r}") from None
        with src:
            _write_atomic(Path(path), lambda dst: shutil.copyfileobj(src, dst, 1 << 20))

    def get_bytes(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise ObjectNotFound(f"no object {key!r} in {self!r}") from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> builtins.list[str]:
        # Walk only the deepest directory the prefix pins down, then filter by string prefix.
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self._path(head) if head else self.root
        keys = []
        for dirpath, _dirs, files in os.walk(start):
            rel = Path(dirpath).relative_to(self.root).as_posix()
            for name in files:
                key = name if rel == "." else f"{rel}/{name}"
                if not name.startswith(_TMP) and key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()


def _write_atomic(target: Path, fill: Callable[[BinaryIO], object]) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_TMP)
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(path: Path) -> None:
    """Make a rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
