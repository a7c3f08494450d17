"""A job's workdir travels to the server as a gzipped tar (base64 in the submit request).

The client packs the directory it would have pinned for a local submit; the server unpacks it
under ``$GPUORCH_HOME/uploads/<random>/`` and points the job's workdir there. Whatever the Python
version (``tarfile``'s ``data`` filter let links escape before 3.11.13/3.12.11: CVE-2025-4517,
where a realpath truncated past PATH_MAX hid a chain of symlinks), every member is checked here
first, against a model of the tree the archive builds: no absolute
path or ``..``, only files, directories and links, every link (through links before it, to any
depth) resolving inside, no member written through a link or over an earlier one, counts, sizes
and path lengths bounded. The first offence refuses the whole upload, naming the member and the
rule, before anything is written; then the members are written by this module, each to its
resolved path, so no link is followed while writing.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import shutil
import tarfile
import uuid
import zlib
from pathlib import Path

from gpuorch.errors import UserInputError

MAX_PACKED = 64 << 20  # bytes of gzipped tar
MAX_UNPACKED = 512 << 20  # bytes of files once extracted (api.max_upload_bytes)
MAX_FILES = 10_000  # entries in one upload (api.max_upload_files)
MAX_MEMBER = 256 << 20  # bytes of one file (and at most max_bytes)
MAX_PATH = 1024  # bytes of a member's name or a link's target
MAX_COMPONENT = 255  # bytes of one name in a path (NAME_MAX)
MAX_DEPTH = 64  # directories deep
MAX_HOPS = 40  # links followed resolving one path (Linux's own limit): past it, a loop
SWEEP_EVERY_S = 3600.0  # how often the server looks for uploads no job references
_DIR = "dir"  # a directory the model knows of only as some member's parent
Model = dict[tuple[str, ...], "tarfile.TarInfo | str"]


def pack(workdir: Path) -> str:
    """The directory as base64 of a gzipped tar. Raises UserInputError past MAX_PACKED."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(workdir, arcname=".")
    if buf.tell() > MAX_PACKED:
        raise UserInputError(f"workdir: {workdir} packs to {buf.tell() >> 20} MiB, over the {MAX_PACKED >> 20} MiB an "
                             "upload may carry; move data to object storage and fetch it in `setup`")
    return base64.b64encode(buf.getvalue()).decode()


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


class _Refused(Exception):
    """A member breaks a rule: ``(member name, the rule)``."""


def _refused(name: str, rule: str) -> UserInputError:
    shown = name if len(name) <= 120 else f"{name[:60]}...{name[-40:]}"
    return UserInputError(f"workdir_tar: member {shown!r}: {rule}; nothing was unpacked, fix or drop that member")


def _parts(path: str, what: str = "the path") -> tuple[str, ...]:
    """``path``'s names, "." and empty ones dropped; ValueError naming the rule it breaks."""
    if "\0" in path:
        raise ValueError(f"{what} holds a NUL byte")
    if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH:
        raise ValueError(f"{what} is longer than {MAX_PATH} bytes")
    if path.startswith("/"):
        raise ValueError(f"{what} is absolute; only paths inside the upload are allowed")
    parts = tuple(p for p in path.split("/") if p not in ("", "."))
    if ".." in parts:
        raise ValueError(f"{what} holds '..'; only paths inside the upload are allowed")
    if any(len(p.encode("utf-8", "surrogateescape")) > MAX_COMPONENT for p in parts):
        raise ValueError(f"{what} has a name longer than {MAX_COMPONENT} bytes")
    if len(parts) > MAX_DEPTH:
        raise ValueError(f"{what} is more than {MAX_DEPTH} directories deep")
    return parts


def _resolve(model: Model, path: tuple[str, ...]) -> tuple[str, ...]:
    """``path`` with every symlink of ``model`` on it followed, to any depth and with no length
    limit (realpath's truncation was the CVE); ValueError if it leaves the upload's root."""
    out: list[str] = []
    todo, hops = list(path), 0
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if not out:
                raise ValueError("leaves the upload (followed through the links it names)")
            out.pop()  # ``out`` holds no link, so ".." is its parent
            continue
        out.append(name)
        m = model.get(tuple(out))
        if isinstance(m, tarfile.TarInfo) and m.issym():
            hops += 1
            if hops > MAX_HOPS:
                raise ValueError(f"is more than {MAX_HOPS} links deep (a loop?)")
            if m.linkname.startswith("/"):
                raise ValueError("leaves the upload through an absolute link")
            out.pop()
            todo = m.linkname.split("/") + todo
    return tuple(out)


def _is_dir(node: tarfile.TarInfo | str | None) -> bool:
    return node == _DIR or (isinstance(node, tarfile.TarInfo) and node.isdir())


def _check_parents(model: Model, parts: tuple[str, ...]) -> None:
    """Each directory above ``parts`` into ``model``; ValueError if one is a file or a link."""
    for k in range(1, len(parts)):
        above = model.setdefault(parts[:k], _DIR)
        if not _is_dir(above):
            kind = "link" if isinstance(above, tarfile.TarInfo) and above.issym() else "file"
            raise ValueError(f"would be written through the {kind} {'/'.join(parts[:k])!r}")


def _check_link_target(m: tarfile.TarInfo) -> None:
    """A link's own target, before the tree is known; ValueError naming the rule it breaks."""
    if m.islnk():
        _parts(m.linkname, "its link target")  # a path in the archive, like a member's name
    elif m.issym():  # relative to the link's directory; ".." is fine while it stays inside (_check_links)
        to = m.linkname
        if not to or "\0" in to or len(to.encode("utf-8", "surrogateescape")) > MAX_PATH:
            raise ValueError(f"its link target is empty, holds a NUL byte or is over {MAX_PATH} bytes")
        if to.startswith("/"):
            raise ValueError("its link target is absolute; only links inside the upload are allowed")


def _check_member(model: Model, m: tarfile.TarInfo) -> tuple[str, ...] | None:
    """``m``'s path, checked against the tree so far (None: the upload's root itself); ValueError naming
    the rule it breaks."""
    if not (m.isreg() or m.isdir() or m.issym() or m.islnk()):
        raise ValueError("is a device, FIFO or other special file; only files, directories and links")
    parts = _parts(m.name)
    if not parts:
        if m.isdir():
            return None
        raise ValueError("names the upload's root; only a directory may")
    _check_parents(model, parts)
    earlier = model.get(parts)
    if earlier is not None and not (m.isdir() and _is_dir(earlier)):
        raise ValueError("names a path an earlier member holds; a member may not replace another")
    _check_link_target(m)
    return parts


def _hard_target(model: Model, order: dict[tuple[str, ...], int], parts: tuple[str, ...],
                 link: tarfile.TarInfo) -> tuple[str, ...]:
    """The file a hard link names: resolved inside, a file, and before the link; ValueError if not."""
    target = _resolve(model, _parts(link.linkname, "its link target"))
    first = model.get(target)
    if not (isinstance(first, tarfile.TarInfo) and first.isreg() and order[target] < order[parts]):
        raise ValueError("is no file before it in the upload (a hard link needs one)")
    return target


def _check_links(model: Model, order: dict[tuple[str, ...], int]) -> dict[str, tuple[str, ...]]:
    """Every link of the whole tree resolved inside it; each hard link's target. _Refused if not."""
    hard: dict[str, tuple[str, ...]] = {}
    for parts, link in model.items():
        if not isinstance(link, tarfile.TarInfo) or not (link.issym() or link.islnk()):
            continue
        try:
            if link.issym():
                _resolve(model, parts[:-1] + tuple(link.linkname.split("/")))
            else:
                hard[link.name] = _hard_target(model, order, parts, link)
        except ValueError as e:
            raise _Refused(link.name, f"its link target {e}") from None
    return hard


def _check(members: list[tarfile.TarInfo]) -> tuple[Model, dict[str, tuple[str, ...]]]:
    """The tree the archive builds, and each hard link's target; _Refused at the first offence."""
    model: Model = {}
    order: dict[tuple[str, ...], int] = {}
    for i, m in enumerate(members):
        try:
            parts = _check_member(model, m)
        except ValueError as e:
            raise _Refused(m.name, str(e)) from None
        if parts is not None:  # None: the upload's root itself
            model[parts], order[parts] = m, i
    return model, _check_links(model, order)


def _write(tf: tarfile.TarFile, members: list[tarfile.TarInfo], hard: dict[str, tuple[str, ...]],
           dest: Path) -> None:
    """Each checked member at its own path: no member lies under a link, so none is followed."""
    dirs: list[tuple[Path, int]] = []
    for m in members:
        parts = _parts(m.name)
        if not parts:
            continue
        path = dest.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if m.isdir():
            path.mkdir(exist_ok=True, mode=0o700)
            dirs.append((path, (m.mode & 0o755) | 0o700))
        elif m.issym():
            os.symlink(m.linkname, path)
        elif m.islnk():
            os.link(dest.joinpath(*hard[m.name]), path, follow_symlinks=False)
        else:
            src = tf.extractfile(m)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                if src is not None:
                    shutil.copyfileobj(src, out)
                os.fchmod(fd, (m.mode & 0o755) | 0o600)  # no setuid, no group or other write
                try:
                    os.utime(fd, (m.mtime, m.mtime))
                except (OverflowError, ValueError, OSError):
                    pass  # an odd timestamp is not worth refusing the upload
    for d, mode in reversed(dirs):  # last: a read-only directory would refuse its own contents
        d.chmod(mode)


def unpack(data: str, uploads: Path, *, max_bytes: int = MAX_UNPACKED, max_files: int = MAX_FILES) -> Path:
    """Extract an upload into a new directory under ``uploads``; return that directory.

    Checked before anything is written: the archive's entries are read one by one and the upload
    is refused at the first past ``max_files`` entries or ``max_bytes`` of contents (a small
    archive can hold a huge tree, or a million empty files' inodes), and then member by member
    (``_check``). UserInputError names the member and the rule; nothing is left behind."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise UserInputError("workdir_tar: not base64; send a base64-encoded gzipped tar") from None
    if len(raw) > MAX_PACKED:
        raise UserInputError(f"workdir_tar: over {MAX_PACKED >> 20} MiB; upload less")
    dest = uploads / uuid.uuid4().hex
    per_member = min(MAX_MEMBER, max_bytes)
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tf:
            members: list[tarfile.TarInfo] = []
            size = 0
            while (m := tf.next()) is not None:
                members.append(m)
                if len(members) > max_files:
                    raise UserInputError(f"workdir_tar: over {max_files} files (api.max_upload_files); upload fewer")
                if m.isreg() and m.size > per_member:
                    raise _refused(m.name, f"{_size(m.size)}, over the {_size(per_member)} one file may hold")
                size += m.size if m.isreg() else 0
                if size > max_bytes:
                    raise UserInputError(f"workdir_tar: unpacks to over {max_bytes >> 20} MiB "
                                         "(api.max_upload_bytes); upload less")
            try:
                _, hard = _check(members)
            except _Refused as e:
                raise _refused(*e.args) from None
            dest.mkdir(parents=True, mode=0o700)
            _write(tf, members, hard, dest)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        shutil.rmtree(dest, ignore_errors=True)
        raise UserInputError(f"workdir_tar: not a usable gzipped tar ({' '.join(str(e).split())})") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
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
