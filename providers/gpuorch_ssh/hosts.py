"""``HostWatch``: what gpuorch knows of each pool host, from checks over SSH.

A check connects with the host key verified (pinned in the pool's own known_hosts file from the
host's configured ``host_key`` or the user's known_hosts, never from the connection), runs
``remote.CHECK`` (GPUs by ``nvidia-smi`` unless declared, CPUs, memory), and stops the processes
of instances whose lease has ended, reporting those that are gone so their slots are released.

Checks run on a small thread pool, at most one per host at a time and one per
``check_interval_s``: ``refresh()`` starts the due ones and returns at once, so a pass never waits
on a host that does not answer. A host whose checks have failed for ``silent_after_s`` is silent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import paramiko

from gpuorch.provider import RunnerUnavailable, utcnow
from gpuorch.runners.connection import SshConnection
from gpuorch.runners.hostkeys import fingerprint, pin_host_keys

from . import remote
from .config import Address, GpuGroup, Host
from .gpunames import canonical_groups
from .jump import JumpConnection

log = logging.getLogger("gpuorch.ssh_pool")


@dataclass(frozen=True)
class HostState:
    """The last word on one host. ``ok``: its last check passed."""

    ok: bool = False
    checked_at: datetime | None = None
    last_ok_at: datetime | None = None
    failing_since: datetime | None = None  # the first failed check since the last good one
    error: str | None = None
    host_key: str | None = None  # the fingerprint its pins name
    gpus: tuple[GpuGroup, ...] = ()
    gpus_error: str | None = None
    cpus: int = 0
    memory_gib: float = 0.0
    left: dict[str, int] = field(default_factory=dict)  # stopping instances: processes still alive


class HostWatch:
    """Checks for ``hosts``; ``stopping(host)`` names the tokens whose processes to stop there,
    ``gone(host, tokens)`` hears which have none left."""

    def __init__(self, hosts: list[Host], known_hosts: Path, user_known_hosts: Path, *, interval_s: float,
                 silent_after_s: float, connect_timeout_s: float, grace_s: float,
                 stopping: Callable[[Host], list[str]], gone: Callable[[Host, list[str]], None]) -> None:
        self.hosts = {h.zone: h for h in hosts}
        self.known_hosts, self.user_known_hosts = known_hosts, user_known_hosts
        self.interval = timedelta(seconds=interval_s)
        self.silent_after = timedelta(seconds=silent_after_s)
        self.connect_timeout_s, self.grace_s = connect_timeout_s, grace_s
        self.io_timeout = max(30.0, connect_timeout_s)  # the check itself (nvidia-smi may take seconds)
        self.keep_s = 3600.0  # an ended instance's directory stays this long on its host
        self.stopping, self.gone = stopping, gone
        self.states: dict[str, HostState] = {h.zone: HostState() for h in hosts}
        self._conns: dict[str, SshConnection] = {}
        self._running: dict[str, Future[None]] = {}
        self._due: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=min(8, max(1, len(hosts))), thread_name_prefix="ssh-pool-check")

    # -- asking ----------------------------------------------------------------------------------

    def refresh(self, wait_s: float = 0.0, only: str | None = None, force: bool = False) -> None:
        """Start the checks that are due (all with ``force``; one host with ``only``); wait up to
        ``wait_s`` for the ones running to finish."""
        now = utcnow()
        started: list[Future[None]] = []
        with self._lock:
            if self._closed:
                return
            for zone, host in self.hosts.items():
                if only is not None and zone != only:
                    continue
                running = self._running.get(zone)
                if running is not None and not running.done():
                    started.append(running)
                    continue
                state = self.states[zone]
                due = force or zone in self._due or state.checked_at is None or now - state.checked_at >= self.interval
                if due:
                    self._due.discard(zone)
                    future = self._pool.submit(self._check, host)
                    self._running[zone] = future
                    started.append(future)
        if wait_s > 0 and started:
            wait(started, timeout=wait_s)

    def soon(self, zone: str) -> None:
        """Check ``zone`` on the next ``refresh`` whatever its interval (an instance there ended)."""
        with self._lock:
            self._due.add(zone)

    def state(self, zone: str) -> HostState:
        return self.states.get(zone, HostState())

    def silent(self, zone: str, now: datetime) -> bool:
        s = self.state(zone)
        return not s.ok and s.failing_since is not None and now - s.failing_since >= self.silent_after

    def first_wait_s(self) -> float:
        """How long the first checks may take: a connect, one retry's wait, the check itself."""
        return 3 * self.connect_timeout_s + 5

    def close(self) -> None:
        """Stop checking. Checks not started are dropped, running ones are cut short (their
        connections closed) and waited for: none may report ``gone`` (a store write) after the
        owner closed its store, as a check thread once did into a closed SQLite connection (a
        segfault)."""
        with self._lock:
            self._closed = True
            conns, self._conns = list(self._conns.values()), {}
        self._pool.shutdown(wait=False, cancel_futures=True)
        for conn in conns:
            conn.close()
        self._pool.shutdown(wait=True)

    # -- checking --------------------------------------------------------------------------------

    def pin(self, host: Host) -> str:
        """Pin ``host``'s trusted key(s) for its address in the pool's known_hosts (and its jump
        host's), the first one's fingerprint. RunnerUnavailable when there is none to trust."""
        if host.proxy_jump is not None:
            jump = host.proxy_jump
            pool_host = next((h for h in self.hosts.values() if h.address.key == jump.key), None)
            self._pin(jump, list(pool_host.host_keys) if pool_host else [], f"{host.field}.proxy_jump")
        return self._pin(host.address, list(host.host_keys), f"{host.field}.host_key")

    def _pin(self, address: Address, configured: list[str], field: str) -> str:
        keys = configured or user_known_keys(self.user_known_hosts, address.host, address.port)
        if not keys:
            raise RunnerUnavailable(
                f"{address}: no host key to verify it against: not in {self.user_known_hosts} and none configured "
                f"({field}); add its key from its console, never from a first connection")
        by_type = {k.split()[0]: k for k in reversed(keys)}  # one per key type, the first listed wins
        pin_host_keys(self.known_hosts, address.host, address.port, list(by_type.values()))
        return fingerprint(keys[0])

    def connection(self, host: Host) -> SshConnection:
        conn = self._conns.get(host.zone)
        if conn is None:
            conn = connect(host, self.known_hosts, connect_timeout=self.connect_timeout_s, connect_attempts=2,
                           retry_wait_s=0.2, retry_wait_max_s=1.0, io_timeout=self.io_timeout)
            with self._lock:
                if not self._closed:
                    self._conns[host.zone] = conn
                    return conn
            conn.close()
            raise RunnerUnavailable(f"{host.address}: the pool's checks are closed")
        return conn

    def _check(self, host: Host) -> None:
        now = utcnow()
        before = self.states[host.zone]
        stop = self.stopping(host)
        try:
            fp = self.pin(host)
            payload = remote.check_input(host.remote_root, stop, self.grace_s, detect=host.gpus is None,
                                         keep_s=self.keep_s)
            answer = self.connection(host).call(
                "check the host", lambda client, _sftp: run_check(client, host.python, payload, self.io_timeout))
        except (RunnerUnavailable, ValueError, OSError) as e:
            if isinstance(e, RunnerUnavailable):
                self.connection(host).close()
            first = before.failing_since or now
            self.states[host.zone] = replace(before, ok=False, checked_at=now, failing_since=first,
                                             error=str(e)[:500])
            if before.ok:
                log.warning("%s: check failed: %s", host.address, e)
            return
        groups = (host.gpus,) if host.gpus is not None else canonical_groups(answer.get("gpus") or [])
        self.states[host.zone] = HostState(
            ok=True, checked_at=now, last_ok_at=now, host_key=fp, gpus=groups,
            gpus_error=str(answer["gpus_error"]) if answer.get("gpus_error") else None,
            cpus=int(answer.get("cpus") or 0), memory_gib=float(answer.get("memory_gib") or 0.0),
            left={str(k): int(v) for k, v in (answer.get("left") or {}).items()})
        gone = [t for t in answer.get("gone") or [] if t in stop]
        if gone and not self._closed:
            self.gone(host, gone)



def connect(host: Host, known_hosts: Path, **kwargs: Any) -> SshConnection:
    """A connection to ``host`` (through its jump host if it has one), verified against ``known_hosts``."""
    args = (host.address.host, host.address.port, host.address.user, host.key_path, known_hosts)
    if host.proxy_jump is not None:
        return JumpConnection(*args, jump=host.proxy_jump, **kwargs)
    return SshConnection(*args, **kwargs)


def run_check(client: paramiko.SSHClient, python: str, payload: bytes, timeout: float) -> dict[str, Any]:
    """Run ``remote.CHECK`` on the host with ``payload`` on its stdin; its answer."""
    transport = client.get_transport()
    if transport is None:
        raise EOFError("the connection is closed")
    channel = transport.open_session(timeout=timeout)
    with channel:
        channel.settimeout(timeout)
        channel.exec_command(remote.command(python))
        channel.sendall(payload)
        channel.shutdown_write()
        out = b"".join(iter(lambda: channel.recv(65536), b""))
        err = b"".join(iter(lambda: channel.recv_stderr(65536), b""))
        code = channel.recv_exit_status()
    if code != 0:
        why = (err or out).decode(errors="replace").strip()[-300:]
        raise RunnerUnavailable(f"the host check exited {code} with {python!r}: {why} (the agent needs Python 3.8+)")
    return remote.parse_answer(out.decode(errors="replace"))


def user_known_keys(path: Path, host: str, port: int) -> list[str]:
    """The keys ``path`` (an OpenSSH known_hosts file, hashed names too) holds for ``host:port``."""
    if not path.is_file():
        return []
    try:
        entries = paramiko.HostKeys(str(path))
    except (OSError, paramiko.SSHException, ValueError):
        return []
    name = host if port == 22 else f"[{host}]:{port}"
    found = entries.lookup(name)
    if not found:
        return []
    keys = [f"{key.get_name()} {key.get_base64()}" for key in found.values()]
    return [k for k in keys if k.split()[0] in ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                                                 "ecdsa-sha2-nistp521", "ssh-rsa")]
