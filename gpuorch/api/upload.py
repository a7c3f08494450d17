"""A job's workdir travels to the server as a gzipped tar (base64 in the submit request).

The client packs the directory it would have pinned for a local submit; the server unpacks it
under ``$GPUORCH_HOME/uploads/<random>/`` with the ``data`` extraction filter (no absolute paths,
no ``..``, no links out, no devices) and points the job's workdir there. Both sizes are capped:
a request is held in memory, and a small archive can inflate into a large tree.
"""

from __future__ import annotations

import base64
import binascii
import io
import shutil
import tarfile
import uuid
import zlib
from pathlib import Path

from gpuorch.errors import UserInputError

MAX_PACKED = 64 << 20  # bytes of gzipped tar
MAX_UNPACKED = 512 << 20  # bytes of files once extracted (api.max_upload_bytes)
MAX_FILES = 10_000  # entries in one upload (api.max_upload_files)
SWEEP_EVERY_S = 3600.0  # how often the server looks for uploads no job references


def pack(workdir: Path) -> str:
    """The directory as base64 of a gzipped tar. Raises UserInputError past MAX_PACKED."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(workdir, arcname=".")
    if buf.tell() > MAX_PACKED:
        raise UserInputError(f"workdir: {workdir} packs to {buf.tell() >> 20} MiB, over the {MAX_PACKED >> 20} MiB an "
                             "upload may carry; move data to object storage and fetch it in `setup`")
    return base64.b64encode(buf.getvalue()).decode()


def unpack(data: str, uploads: Path, *, max_bytes: int = MAX_UNPACKED, max_files: int = MAX_FILES) -> Path:
    """Extract an upload into a new directory under ``uploads``; return that directory.

    Bounded before anything is written: the archive's entries are read one by one and the
    upload is refused at the first past ``max_files`` entries or ``max_bytes`` of contents (a
    small archive can hold a huge tree, or a million empty files' inodes)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise UserInputError("workdir_tar: not base64; send a base64-encoded gzipped tar") from None
    if len(raw) > MAX_PACKED:
        raise UserInputError(f"workdir_tar: over {MAX_PACKED >> 20} MiB; upload less")
    dest = uploads / uuid.uuid4().hex
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tf:
            members, size = [], 0
            while (m := tf.next()) is not None:
                members.append(m)
                size += m.size
                if len(members) > max_files:
                    raise UserInputError(f"workdir_tar: over {max_files} files (api.max_upload_files); upload fewer")
                if size > max_bytes:
                    raise UserInputError(f"workdir_tar: unpacks to over {max_bytes >> 20} MiB "
                                         "(api.max_upload_bytes); upload less")
            dest.mkdir(parents=True, mode=0o700)
            tf.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        shutil.rmtree(dest, ignore_errors=True)
        raise UserInputError(f"workdir_tar: not a usable gzipped tar ({' '.join(str(e).split())})") from None
    return dest


def sweep(uploads: Path, referenced: set[str], now: float, grace_s: float = 3600.0) -> list[Path]:
    """Remove the uploads no job references (``referenced``: the jobs' workdirs) and older than
    ``grace_s`` (a submit in flight has unpacked but not yet stored); return what was removed."""
    removed: list[Path] = []
    try:
        entries = list(uploads.iterdir())
    except OSError:
        return removed
    for d in entries:
        try:
            old = now - d.stat().st_mtime > grace_s
        except OSError:
            continue
        if d.is_dir() and old and str(d) not in referenced:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed
