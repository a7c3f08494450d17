"""``SshConnection``: one cached, verified paramiko connection (SSH + SFTP) to one host.

Connects with a bounded, jittered exponential retry while the instance boots (refused or
timed-out connections, an sshd not ready yet). Host keys are checked against the pinned
known_hosts file only: an unknown or changed key raises ``HostKeyRejected`` at once, never
retried. Every other failure to reach the host surfaces as ``RunnerUnavailable``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import paramiko
from paramiko.ssh_exception import NoValidConnectionsError
from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from gpuorch.runners.hostkeys import HostKeyRejected, fingerprint, host_pattern
from gpuorch.runners.port import RunnerUnavailable

T = TypeVar("T")
Op = Callable[[paramiko.SSHClient, paramiko.SFTPClient], T]


class SshConnection:
    """``user@host:port`` with the private key at ``key_path``; see ``SshRunner`` for the knobs.

    Thread-safe: calls are serialised on one connection, opened on first use and reopened
    after it drops. ``close()`` releases it.
    """

    def __init__(
        self, host: str, port: int, user: str, key_path: Path, known_hosts_path: Path, *,
        connect_timeout: float = 10.0, connect_attempts: int = 5, retry_wait_s: float = 1.0,
        retry_wait_max_s: float = 10.0, io_timeout: float = 60.0,
        before_connect: Callable[[], None] | None = None,
    ) -> None:
        self.host, self.port, self.user = host, int(port), user
        self.key_path, self.known_hosts_path = Path(key_path), Path(known_hosts_path)
        self.connect_timeout, self.connect_attempts = connect_timeout, max(1, connect_attempts)
        self.retry_wait_s, self.retry_wait_max_s, self.io_timeout = retry_wait_s, retry_wait_max_s, io_timeout
        # Called before each new connection (not each call): pins the host's keys from their
        # trusted source when that source can change while the instance boots (GCE's guest
        # attributes); may raise RunnerUnavailable ("not known yet"). None: the pin is made once.
        self.before_connect = before_connect
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"{self.user}@{host_pattern(self.host, self.port)}"

    def call(self, what: str, op: Op[T]) -> T:
        """Run ``op(client, sftp)``; if the connection drops meanwhile, reconnect and run it once more.

        ``op`` handles the errors it expects (e.g. FileNotFoundError); any other SSH or I/O
        error becomes RunnerUnavailable("could not <what>"), as does an unreachable host.
        """
        with self._lock:
            for last_try in (False, True):
                client, sftp = self._session()
                try:
                    return op(client, sftp)
                except (paramiko.SSHException, paramiko.SFTPError, EOFError, OSError) as e:
                    # A remote I/O error (permission, disk full) on a live connection is final;
                    # a timeout or a dead transport means the connection itself is gone.
                    transport = client.get_transport()
                    dropped = (not isinstance(e, OSError) or isinstance(e, socket.timeout)
                               or transport is None or not transport.is_active())
                    if dropped:
                        self.close()
                    if last_try or not dropped:
                        raise RunnerUnavailable(f"{self!r}: could not {what}: {e or type(e).__name__}") from e
            raise AssertionError("unreachable")

    def exec(self, client: paramiko.SSHClient, command: str, timeout: float | None = None) -> tuple[int, str]:
        """Run ``command`` (through the login shell); its exit status and combined output.
        ``timeout``: the longest silence allowed between outputs (default ``io_timeout``)."""
        transport = client.get_transport()
        if transport is None:
            raise EOFError("the connection is closed")
        channel = transport.open_session(timeout=self.io_timeout)
        with channel:
            channel.settimeout(self.io_timeout if timeout is None else timeout)
            channel.set_combine_stderr(True)
            channel.exec_command(command)
            channel.shutdown_write()
            output = b"".join(iter(lambda: channel.recv(65536), b""))
            return channel.recv_exit_status(), output.decode(errors="replace")

    def close(self) -> None:
        with self._lock:
            for closable in (self._sftp, self._client):
                if closable is not None:
                    closable.close()
            self._client = self._sftp = None

    def _session(self) -> tuple[paramiko.SSHClient, paramiko.SFTPClient]:
        client = self._client
        transport = client.get_transport() if client is not None else None
        if client is None or self._sftp is None or transport is None or not transport.is_active():
            self.close()
            client = self._connect()
            try:
                sftp = client.open_sftp()
            except (paramiko.SSHException, OSError, EOFError) as e:
                client.close()
                raise RunnerUnavailable(f"{self!r}: SFTP is not available: {e}") from e
            channel = sftp.get_channel()
            assert channel is not None  # open_sftp's client always has its channel
            channel.settimeout(self.io_timeout)  # a hung host fails a call, not the daemon
            self._client, self._sftp = client, sftp
        assert self._sftp is not None
        return client, self._sftp

    def _connect(self) -> paramiko.SSHClient:
        if self.before_connect is not None:
            self.before_connect()
        try:
            pkey = paramiko.PKey.from_path(self.key_path)
        except (OSError, paramiko.SSHException, ValueError) as e:
            raise RunnerUnavailable(f"{self!r}: cannot read the login key {self.key_path}: {e}") from e
        retrying = Retrying(
            stop=stop_after_attempt(self.connect_attempts),
            wait=wait_exponential(multiplier=self.retry_wait_s, max=self.retry_wait_max_s)
            + wait_random(0, self.retry_wait_s / 2),
            retry=retry_if_exception(_booting),
            reraise=True,
        )
        try:
            return retrying(self._connect_once, pkey)
        except paramiko.AuthenticationException as e:
            raise RunnerUnavailable(f"{self!r}: authentication failed with key {self.key_path}: {e}") from e
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise RunnerUnavailable(
                f"{self!r}: unreachable after {self.connect_attempts} attempts: {e or type(e).__name__}"
            ) from e

    def _connect_once(self, pkey: paramiko.PKey) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if self.known_hosts_path.exists():  # re-read each time: pins change as instances come and go
            client.get_host_keys().load(str(self.known_hosts_path))
        client.set_missing_host_key_policy(_RefuseUnpinned())
        try:
            client.connect(
                self.host, self.port, username=self.user, pkey=pkey, timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout, auth_timeout=self.connect_timeout,
                allow_agent=False, look_for_keys=False,
            )
        except paramiko.BadHostKeyException as e:
            client.close()
            raise HostKeyRejected(
                f"{self!r}: host key changed: {self.known_hosts_path} pins {_fp(e.expected_key)} but the "
                f"host offered {_fp(e.key)}; refusing to connect (a man in the middle, or a new instance "
                "at a reused address whose key was not pinned: pin it from the trusted source)"
            ) from None
        except _Unpinned as e:
            client.close()
            raise HostKeyRejected(
                f"{self!r}: no host key pinned for {e.hostname} in {self.known_hosts_path} (the host "
                f"offered {_fp(e.key)}); refusing to connect: pin the instance's key (pin_host_key) first"
            ) from None
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(30)  # keeps NAT and firewall state alive between passes
        return client


class _Unpinned(paramiko.SSHException):
    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        super().__init__(f"no pinned host key for {hostname}")
        self.hostname, self.key = hostname, key


class _RefuseUnpinned(paramiko.RejectPolicy):
    """RejectPolicy with a typed error carrying the offered key, for a clear message."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
        raise _Unpinned(hostname, key)


def _booting(e: BaseException) -> bool:
    """Errors a booting instance produces: refused or timed-out connections, sshd not ready yet."""
    if isinstance(e, (HostKeyRejected, _Unpinned, paramiko.BadHostKeyException, paramiko.AuthenticationException)):
        return False
    return isinstance(e, (NoValidConnectionsError, OSError, EOFError, paramiko.SSHException))


def _fp(key: paramiko.PKey) -> str:
    return fingerprint(f"{key.get_name()} {key.get_base64()}")
