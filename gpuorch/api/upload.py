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
import tarfile
import uuid
from pathlib import Path

from gpuorch.errors import UserInputError

MAX_PACKED = 64 << 20  # bytes of gzipped tar
MAX_UNPACKED = 512 << 20  # bytes of files once extracted


def pack(workdir: Path) -> str:
    """The directory as base64 of a gzipped tar. Raises UserInputError past MAX_PACKED."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(workdir, arcname=".")
    if buf.tell() > MAX_PACKED:
        raise UserInputError(f"workdir: {workdir} packs to {buf.tell() >> 20} MiB, over the {MAX_PACKED >> 20} MiB an "
                             "upload may carry; move data to object storage and fetch it in `setup`")
    return base64.b64encode(buf.getvalue()).decode()


def unpack(data: str, uploads: Path) -> Path:
    """Extract an upload into a new directory under ``uploads``; return that directory."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise UserInputError("workdir_tar: not base64; send a base64-encoded gzipped tar") from None
    if len(raw) > MAX_PACKED:
        raise UserInputError(f"workdir_tar: over {MAX_PACKED >> 20} MiB; upload less")
    dest = uploads / uuid.uuid4().hex
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tf:
            members = tf.getmembers()
            if sum(m.size for m in members) > MAX_UNPACKED:
                raise UserInputError(f"workdir_tar: unpacks to over {MAX_UNPACKED >> 20} MiB; upload less")
            dest.mkdir(parents=True)
            tf.extractall(dest, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise UserInputError(f"workdir_tar: not a usable gzipped tar ({e})") from None
    return dest
