"""Local instances as another user: who a local instance's agent and job run as, and handing them
their files (docs/providers.md, "Local provider isolation").

A job on the local provider is a process on the daemon's host. Run as the daemon's user it could
read the daemon's ``/proc/<pid>/environ`` (cloud keys, the API token), the state database and the
token file. Run as another, unprivileged user (``RunAs``) it can read none of them: the kernel
denies another uid a process's environ, and the daemon's home is 0700. Switching needs root (or
CAP_SETUID and CAP_SETGID); it is done by ``subprocess.Popen`` itself (``user``, ``group``,
``extra_groups=[]``), never by a shell.

The instance's directory is then root's and traversable (0711); its ``run/`` (agent files, the
workdir copy, logs) is handed to the job user (``hand_over_tree``) right before the agent starts,
bottom-up, by file descriptor, never following a link, so nothing outside the tree changes hands.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

DEFAULT_USER = "gpuorch-job"  # created (useradd --system) at the first launch of a root daemon
FALLBACK_USER = "nobody"  # where no user can be created
TRAVERSE_DIR = 0o711  # the instance directory: its job may pass through, not list
CAP_SETGID, CAP_SETUID = 6, 7
# The daemon's credentials never reach an agent or a job (the job's environment is also the
# agent's allow-list, gpuorch.agent.job.inherited): whole families by prefix, and any name that
# says what it holds. Not a list of known names: a new provider's key is caught by the same rule.
SECRET_PREFIXES = ("AWS_", "GOOGLE_", "GCLOUD_", "CLOUDSDK_", "AZURE_", "ARM_", "KUBE", "DOCKER_AUTH", "VAULT_")
_SECRET_WORD = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH|DATABASE_URL|DSN$")
SECRET_NAMES = frozenset({"SSH_AUTH_SOCK", "GPUORCH_API_TOKEN", "GPUORCH_DATABASE_URL", "NETRC", "PGPASSFILE"})


class RunAs(BaseModel):
    """The user an instance's processes run as, recorded in its ``meta.json`` at launch."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    user: str
    uid: int
    gid: int
    home: str = "/"  # the user's home directory where it has one
    python: str | None = None  # the agent's interpreter (providers.local.python); None: the daemon's

    @classmethod
    def of(cls, entry: pwd.struct_passwd) -> RunAs:
        return cls(user=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid, home=entry.pw_dir)


def is_secret(name: str) -> bool:
    upper = name.upper()
    return upper in SECRET_NAMES or upper.startswith(SECRET_PREFIXES) or bool(_SECRET_WORD.search(upper))


def agent_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the daemon's secrets: what an agent of a local instance starts with."""
    return {k: v for k, v in environ.items() if not is_secret(k)}


def lookup(user: str) -> RunAs | None:
    """The passwd entry of ``user`` (a name, or a number for a uid); None if there is none."""
    try:
        return RunAs.of(pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user))
    except (KeyError, OverflowError):
        return None


def can_switch_user() -> bool:
    """Whether this process may start processes as another user: root, or CAP_SETUID and CAP_SETGID."""
    if os.geteuid() == 0:
        return True
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                caps = int(line.split()[1], 16)
                return bool(caps >> CAP_SETUID & 1 and caps >> CAP_SETGID & 1)
    except (OSError, ValueError):
        pass
    return False


def ensure_user(name: str) -> RunAs | None:
    """``name``'s entry, creating it as a system user without a login or a home if it is missing
    (argv, no shell). None if it is missing and cannot be created (no useradd, not root)."""
    found = lookup(name)
    if found is not None:
        return found
    try:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", "--comment", "gpuorch local jobs", name],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return lookup(name)


def blocked(path: Path, who: RunAs | None, groups: frozenset[int] = frozenset()) -> Path | None:
    """The first directory on ``path``'s way (``path`` itself if it is one) that ``who`` cannot
    search, by mode bits; None if it can reach it. ``who`` None: a user that owns none of them and
    is in none of their groups (a user about to be created). ACLs and LSMs are not read: the
    first launch's probe (``probe``) runs the real thing."""
    path = Path(os.path.realpath(path))
    dirs = [path] if path.is_dir() else []
    dirs = [*reversed(path.parents), *dirs]
    for d in dirs:
        try:
            st = d.stat()
        except OSError:
            return d
        if who is not None and st.st_uid == who.uid:
            bit = stat.S_IXUSR
        elif who is not None and (st.st_gid == who.gid or st.st_gid in groups):
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return d
    return None


def probe(who: RunAs, argv: list[str], env: Mapping[str, str], cwd: Path) -> str | None:
    """Run ``argv`` (the agent's interpreter importing the agent) as ``who``; None if it worked,
    else the last line it printed."""
    user, group, extra_groups = popen_identity(who)
    try:
        done = subprocess.run(argv, env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=120, check=False, user=user, group=group, extra_groups=extra_groups)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def popen_identity(who: RunAs) -> tuple[int, int, list[int]]:
    """``subprocess.Popen``'s ``user``, ``group`` and ``extra_groups`` that start a process as
    ``who``: its uid and gid, no supplementary groups (the daemon's, e.g. docker or disk, would
    be kept otherwise)."""
    return who.uid, who.gid, []


def identity_env(who: RunAs, fallback_home: Path) -> dict[str, str]:
    """HOME, USER and LOGNAME for ``who``: its home where it has one, else ``fallback_home``
    (the run directory: tools that cache under $HOME keep working)."""
    home = who.home if who.home and os.path.isdir(who.home) and who.home != "/" else str(fallback_home)
    return {"HOME": home, "USER": who.user, "LOGNAME": who.user}


def hand_over(path: Path, who: RunAs) -> None:
    """Give one file to ``who`` (the link itself if it is one)."""
    os.chown(path, who.uid, who.gid, follow_symlinks=False)


def hand_over_tree(root: Path, who: RunAs) -> None:
    """Give ``root`` and everything under it to ``who``, bottom-up, by directory descriptor and
    never through a link: until ``root`` itself changes hands last, nothing of ``who``'s can
    reach into the tree, so no entry can be swapped for a link to somewhere else meanwhile."""
    for _dir, dirs, files, dirfd in os.fwalk(root, topdown=False):
        for name in (*files, *dirs):
            os.chown(name, who.uid, who.gid, dir_fd=dirfd, follow_symlinks=False)
    os.chown(root, who.uid, who.gid, follow_symlinks=False)
    os.chmod(root, 0o700)


# ``python -c CONFINE MODULE ARGS...`` runs ``python -m MODULE ARGS...`` in a process made
# non-dumpable first. The agent and the job share a uid, so the job could otherwise read the
# agent's /proc/<pid>/environ and memory; a non-dumpable process's /proc entries are root's and
# ptrace is refused without CAP_SYS_PTRACE. One process, because execve would make it dumpable
# again (the job the agent starts stays an ordinary process). Stdlib only, like the agent; the
# code is constant, the arguments arrive in sys.argv.
CONFINE = """import ctypes, ctypes.util, runpy, sys
try:
    ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
except (OSError, AttributeError, TypeError):
    pass
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def confined(argv: list[str], who: RunAs) -> list[str]:
    """``argv`` as ``who`` runs it: ``[python, -m, MODULE, ...]`` through ``CONFINE``, with the
    instance's interpreter where one is set; any other argv as it is."""
    if len(argv) >= 3 and argv[1] == "-m":
        return [who.python or argv[0], "-c", CONFINE, *argv[2:]]
    return argv


def private_home(path: Path) -> bool:
    """Make the daemon's home 0700 if it is this user's and wider (its database, token and logs
    are then out of another user's reach even where a file's own mode is loose); whether it
    changed. A home of another owner is left as it is (``gpuorch doctor`` reports modes)."""
    try:
        st = path.stat()
        if st.st_uid != os.geteuid() or not st.st_mode & 0o077:
            return False
        os.chmod(path, 0o700)
    except FileNotFoundError:
        return False
    return True


def recorded(instance_dir: Path) -> RunAs | None:
    """The ``run_as`` an instance's record names (None: its processes run as the daemon's user)."""
    try:
        raw = json.loads((instance_dir / "meta.json").read_text()).get("run_as")
    except (OSError, ValueError, AttributeError):
        return None
    return RunAs.model_validate(raw) if isinstance(raw, dict) else None
