"""Helpers of the SSH pool tests (fixtures: conftest.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from sshd import Sshd


@dataclass
class PoolKeys:
    login: Path  # the private login key
    login_public: str
    hosts: list[tuple[str, str]]  # (private, public) host keys, one per host


@dataclass
class PoolHost:
    sshd: Sshd
    host_public: str
    root: Path  # the host's remote_root: every instance's directory is under it


def host_processes(root: Path) -> list[int]:
    """Every process of an instance under ``root``: agents (their command line names a run
    directory there) and every process in an agent's or a job's session."""
    table: dict[int, tuple[list[bytes], int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            table[int(entry)] = (args, int(fields[2]), int(fields[3]))
    prefix = str(root).encode() + b"/"
    agents = {pid for pid, (args, _, _) in table.items() if any(a.startswith(prefix) and a.endswith(b"/run")
                                                                 for a in args)}
    groups = set(agents)
    for status in root.glob("*/run/status.json"):
        with contextlib.suppress(OSError, ValueError):
            pid = json.loads(status.read_text()).get("pid")
            if isinstance(pid, int) and pid > 1:
                groups.add(pid)
    return sorted(pid for pid, (_, pgid, sid) in table.items() if pid in agents or pgid in groups or sid in groups)


def kill_host_processes(root: Path) -> int:
    """SIGKILL every process of ``root``'s instances (a host losing power); how many there were."""
    pids = host_processes(root)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def descendants(root_pid: int) -> list[int]:
    """Every process under ``root_pid`` (its children, theirs...)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root_pid]
    while frontier:
        kids = [pid for pid, ppid in parents.items() if ppid in frontier]
        found += kids
        frontier = kids
    return found


def kill_host(host: PoolHost) -> int:
    """The host dies: its sshd with every session it serves (open connections drop), and every
    process of its instances. How many instance processes there were."""
    assert host.sshd.proc is not None
    sessions = descendants(host.sshd.proc.pid)
    host.sshd.stop()
    for pid in sessions:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return kill_host_processes(host.root)
