"""Whether a job's ``workdir`` can be copied onto an instance: the one rule, for ``submit`` (refuse
it at once) and for every runner's ``start`` (the directory may change after submit).

A workdir can be copied when it is a directory this process can read whose entries are regular
files, directories and symbolic links only (links are copied as links, never followed), each
readable. A FIFO would block the copy or be refused by it, a device would be read forever (or
not at all), a socket cannot be opened; none of them clears by trying again, so a runner raises
``PermanentError`` (code ``InvalidWorkdir``) and the attempt ends at once.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuorch.errors import PermanentError

CODE = "InvalidWorkdir"
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def workdir_problem(path: Path) -> str | None:
    """Why ``path`` cannot be copied as a workdir, as the end of one line ("a FIFO at data/pipe
    cannot be copied; remove it"); None when it can. Walks the whole tree (``lstat`` only)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "does not exist (moved or deleted?); restore it or submit the job again with another workdir"
    except OSError as e:
        return f"cannot be read ({e.strerror}); make it readable by the daemon's user"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory; give a directory"
    todo = [Path(path)]
    while todo:
        folder = todo.pop()
        if not os.access(folder, os.R_OK | os.X_OK):
            return f"the directory {_rel(folder, path)} cannot be read; make it readable by the daemon's user"
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return f"the directory {_rel(folder, path)} vanished while it was read; keep the workdir unchanged"
        except OSError as e:
            return f"the directory {_rel(folder, path)} cannot be read ({e.strerror}); make it readable"
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue  # removed meanwhile: nothing to copy
            if stat.S_ISLNK(mode):
                continue
            if stat.S_ISDIR(mode):
                todo.append(Path(entry.path))
            elif not stat.S_ISREG(mode):
                return f"{_kind(mode)} at {_rel(Path(entry.path), path)} cannot be copied; remove it"
            elif not os.access(entry.path, os.R_OK):
                return f"the file {_rel(Path(entry.path), path)} cannot be read; make it readable by the daemon's user"
    return None


def check_workdir(path: Path) -> None:
    """``PermanentError`` (code ``InvalidWorkdir``), naming the workdir and the problem, unless
    ``workdir_problem`` finds none: what a runner's ``start`` raises before it copies anything."""
    problem = workdir_problem(path)
    if problem is not None:
        raise PermanentError(f"workdir {path}: {problem}", code=CODE)


def _rel(p: Path, root: Path) -> str:
    """``p`` relative to the workdir, printable on one line (a name holding a newline is quoted)."""
    text = "." if p == Path(root) else str(p.relative_to(root))
    return text if text.isprintable() else repr(text)
