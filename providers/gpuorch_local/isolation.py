"""Who the local provider's instances run as (docs/providers.md, "Local provider isolation").

Decided when the provider is built (``Isolation.plan``: no process started, no user created), and
settled at the first launch (``Isolation.identity``): the default user is created if missing, and
the agent's interpreter is started once as that user to prove it can run the agent. The outcome
is recorded in every instance's record (``Meta.run_as``), so an instance keeps the user it
started with across daemon restarts and configuration changes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import pwd
import shlex
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import gpuorch.agent
from gpuorch.agent.protocol import STOP_FILE, AgentConfig
from gpuorch.errors import PermanentError, UserInputError
from gpuorch.provider import Finding
from gpuorch.provider.localdir import LocalRunner
from gpuorch.provider.localdir.isolation import (
    DEFAULT_USER,
    FALLBACK_USER,
    TRAVERSE_DIR,
    RunAs,
    agent_env,
    blocked,
    can_switch_user,
    ensure_user,
    hand_over_tree,
    lookup,
    probe,
)

log = logging.getLogger("gpuorch.provider.local")
DEFAULT_JOBS_DIR = Path("/var/lib/gpuorch-jobs")  # one directory per daemon home below it
_GPUORCH_ROOT = Path(str(gpuorch.agent.__file__)).resolve().parents[2]  # what PYTHONPATH gets


def _me() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


@dataclass
class Isolation:
    """``user``: whom instances run as (None: the daemon's own user, ``why_not`` says why and
    ``fix`` what to do). ``jobs_dir``: where instance directories go when ``user`` is set."""

    user: str | None
    explicit: bool = False
    jobs_dir: Path | None = None
    python: str | None = None
    why_not: str | None = None
    fix: str | None = None
    _settled: bool = field(default=False, repr=False)
    _who: RunAs | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def plan(cls, run_as: str | None, jobs_dir: Path | None, python: str | None, home: Path) -> Isolation:
        """What the options ask for on this host. Raises UserInputError (one line naming the
        option and the fix) for a user that does not exist or cannot be switched to."""
        me = _me()
        if run_as is not None:
            who = lookup(run_as)
            if who is None:
                raise UserInputError(f"providers.local.run_as: no user {run_as!r} on this host; create it "
                                     f"(useradd --system {DEFAULT_USER}) or name an existing user")
            if who.uid == os.geteuid():
                return cls(None, why_not=f"providers.local.run_as names the daemon's own user ({me}): jobs can "
                           "read the daemon's environment, state and token",
                           fix=f"set providers.local.run_as to another user (e.g. {DEFAULT_USER})")
            if not can_switch_user():
                raise UserInputError(f"providers.local.run_as: starting jobs as {who.user} needs a daemon running "
                                     "as root (or with CAP_SETUID and CAP_SETGID); run it so, or remove run_as")
            target, target_who, explicit = who.user, lookup(run_as), True
        elif os.geteuid() == 0:
            target, target_who, explicit = DEFAULT_USER, lookup(DEFAULT_USER), False
        else:
            return cls(None, why_not=f"the daemon runs as {me}, not root, and providers.local.run_as is not set: "
                       "a local job runs as that user and can read the daemon's environment, state and token",
                       fix="run the daemon as root (jobs then run as gpuorch-job), or give it CAP_SETUID and "
                       "CAP_SETGID and set providers.local.run_as")
        jobs = jobs_dir or DEFAULT_JOBS_DIR / hashlib.sha256(str(home).encode()).hexdigest()[:16]
        interpreter = python or sys.executable
        need = [Path(interpreter), _GPUORCH_ROOT, jobs.parent] + ([] if python else [Path(os.__file__).parent])
        for path in need:
            if (stop := blocked(path, target_who)) is not None:
                why = f"{target} cannot reach {path} ({stop} is not searchable to it)"
                fix = (f"make {stop} searchable (chmod o+x {stop}), install Python and gpuorch where {target} can "
                       "read them, or set providers.local.python to an interpreter it can run")
                if explicit:
                    raise UserInputError(f"providers.local.run_as: {why}; {fix}")
                return cls(None, why_not=f"local jobs would run as {target}, but {why}", fix=fix)
        return cls(target, explicit=explicit, jobs_dir=jobs, python=python)

    def identity(self, cwd: Path) -> RunAs | None:
        """The user a new instance runs as, settled once: created if it is the default and
        missing, then proven able to start the agent. Raises PermanentError (and keeps raising)
        where ``run_as`` was asked for and cannot be honoured; the default instead falls back to
        the daemon's user, with a warning here and in ``gpuorch doctor``."""
        with self._lock:
            if not self._settled:
                self._who, self._settled = self._settle(cwd), True
            if self.explicit and self._who is None:
                raise PermanentError(f"providers.local.run_as: {self.why_not}; {self.fix}", code="LocalRunAs")
            return self._who

    def _settle(self, cwd: Path) -> RunAs | None:
        if self.user is None:
            return None
        who = lookup(self.user) if self.explicit else ensure_user(self.user) or lookup(FALLBACK_USER)
        if who is None:
            self._refuse(f"user {self.user} does not exist and could not be created",
                         f"create it (useradd --system {self.user}) or set providers.local.run_as")
            return None
        who = who.model_copy(update={"python": self.python})
        env = {**agent_env(os.environ), "PYTHONPATH": str(_GPUORCH_ROOT)}
        error = probe(who, [self.python or sys.executable, "-c", "import gpuorch.agent.agent"], env, cwd)
        if error is not None:
            self._refuse(f"{who.user} cannot start the agent ({error})",
                         "make the interpreter and gpuorch readable to it, or set providers.local.python")
            return None
        return who

    def _refuse(self, why: str, fix: str) -> None:
        self.why_not, self.fix = why, fix
        if not self.explicit:
            log.warning("local jobs run as %s, unisolated: %s; fix: %s", _me(), why, fix)

    def finding(self, check: str) -> Finding:
        """``gpuorch doctor``'s word on it: ok when jobs run as another user, a warning with the
        fix when they run as the daemon's."""
        if self.user is None or (self._settled and self._who is None):
            return Finding.warn(check, f"local jobs run as {_me()}, unisolated: {self.why_not}", self.fix)
        who = self._who or lookup(self.user)
        if who is None:
            return Finding.ok(check, f"local jobs will run as {self.user} (created at the first launch) "
                              f"under {self.jobs_dir}")
        return Finding.ok(check, f"local jobs run as {who.user} (uid {who.uid}) under {self.jobs_dir}; "
                          "they cannot read the daemon's environment, state or token")


def jobs_root(path: Path) -> Path:
    """Create the instances' directory and its missing parents, root's and 0711 (passable, not
    listable). An existing one must be this user's and writable by nobody else."""
    if not path.is_absolute():
        raise UserInputError(f"providers.local.jobs_dir: {path} is not an absolute path; write one like "
                             f"{DEFAULT_JOBS_DIR}")
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    try:
        for d in reversed(missing):
            d.mkdir(mode=TRAVERSE_DIR)
            os.chmod(d, TRAVERSE_DIR)
        st = path.stat()
    except OSError as e:
        raise UserInputError(f"providers.local.jobs_dir: cannot create {path} ({e.strerror}); name a directory "
                             "the daemon can create") from None
    if not path.is_dir() or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise UserInputError(f"providers.local.jobs_dir: {path} must be a directory of the daemon's user that no "
                             f"one else can write; fix it (chown {_me()} {path}; chmod 711 {path}) or name another")
    return path


# The dead-man switch's shutdown for an instance whose user may not write its record: leave
# run/powered-off for the daemon (``InstanceDir.observe`` ends the instance as of its time), then
# kill the job's group, every process carrying the instance's marker that this user can see, and
# the agent's group (this command's own, left first). Stdlib only; the paths arrive in argv.
POWER_OFF = """import json, os, signal, sys
run, marker = sys.argv[1], ("GPUORCH_LOCAL_INSTANCE_DIR=" + sys.argv[2]).encode()
agent = os.getpgrp()
os.setsid()
open(os.path.join(run, "powered-off"), "a").close()
try:
    groups = [json.load(open(os.path.join(run, "status.json")))["pid"]]
except (OSError, ValueError, KeyError, TypeError):
    groups = []
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        if marker in open("/proc/%s/environ" % pid, "rb").read().split(b"\\0"):
            os.kill(int(pid), signal.SIGKILL)
    except OSError:
        pass
for group in groups + [agent]:
    try:
        os.killpg(int(group), signal.SIGKILL)
    except (OSError, ValueError, TypeError):
        pass
"""


class IsolatedRunner(LocalRunner):
    """``LocalRunner`` for an instance that runs as another user: the files the daemon writes for
    its agent are made readable to it, the job's file:// checkpoint prefix is handed to it, and
    the dead-man switch's shutdown is one that user may carry out."""

    def __init__(self, instance_dir: Path, who: RunAs, **kwargs: object) -> None:
        super().__init__(instance_dir, **kwargs)  # type: ignore[arg-type]
        self.who = who

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        prefix = _file_prefix(config)
        if prefix is not None:
            prefix.mkdir(parents=True, exist_ok=True)
            hand_over_tree(prefix, self.who)  # its checkpoints: the agent writes and prunes them
        if config.heartbeat_timeout_s is not None and not config.shutdown_command:
            python = self.who.python or sys.executable
            command = [python, "-c", POWER_OFF, str(self.rundir), str(self.instance.path)]
            config = dataclasses.replace(config, shutdown_command=shlex.join(command))
        super().start(config, workdir)

    def request_stop(self, deadline: float) -> None:
        super().request_stop(deadline)
        os.chmod(self.rundir / STOP_FILE, 0o644)  # written 0600 by the daemon; the agent reads it


def _file_prefix(config: AgentConfig) -> Path | None:
    """The job's own directory in a file:// checkpoint store (``<root>/<installation>/<name>-<id>``)."""
    if not config.checkpoint_url or not config.checkpoint_url.startswith("file://"):
        return None
    path = Path(unquote(urlsplit(config.checkpoint_url).path))
    if not path.is_absolute() or not path.name.endswith(f"-{config.job_id}") or len(path.parts) < 3:
        return None  # not the shape the daemon gives a job: hand nothing over
    return path
