"""``gpuorch port NAME 8888``: a local TCP port on 127.0.0.1 carried to a port on the box.

``Forward.open`` binds the local port first (a port in use is one UserInputError line, and
nothing has been connected), then connects to the box. Each local connection becomes one SSH
``direct-tcpip`` channel to ``127.0.0.1:<remote>`` on the box (paramiko), or, on a
``LocalEndpoint`` (the job runs on this host), a plain TCP connection to that port here.
While the forward is open it holds a session on the box (``keepalive.session_command``), so a
dev box with ``idle_stop`` is not stopped under a notebook in use.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuorch.devbox.remote import Endpoint, LocalEndpoint
from gpuorch.devbox.sessions import remote_line
from gpuorch.errors import UserInputError

if TYPE_CHECKING:
    import paramiko

HOLD = ["cat"]  # the session a forward holds open: it reads its stdin, so it ends when the forward closes
_CHUNK = 65536


@dataclass
class Forward:
    endpoint: Endpoint
    remote_port: int
    server: socket.socket
    client: paramiko.SSHClient | None = None
    _hold: Any = None
    _closed: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def open(cls, ep: Endpoint, remote_port: int, local_port: int = 0) -> Forward:
        """Bind ``127.0.0.1:local_port`` (0: any free port) and connect to the box. UserInputError
        for a local port in use (``--local``) or a box that cannot be reached."""
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            server.bind(("127.0.0.1", local_port))
        except OSError as e:
            server.close()
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                raise UserInputError(f"--local: port {local_port} on 127.0.0.1 is in use or not allowed; choose "
                                     "another, or --local 0 for any free port") from None
            raise
        server.listen(16)
        fwd = cls(ep, remote_port, server)
        try:
            if isinstance(ep, LocalEndpoint):
                fwd._hold = subprocess.Popen(["/bin/sh", "-c", remote_line(ep, HOLD)], stdin=subprocess.PIPE,
                                             stdout=subprocess.DEVNULL)
            else:
                fwd.client = ep.connect()
                transport = fwd.client.get_transport()
                assert transport is not None
                fwd._hold = transport.open_session()
                fwd._hold.exec_command(remote_line(ep, HOLD))
        except BaseException:
            fwd.close()
            raise
        return fwd

    @property
    def local_port(self) -> int:
        return int(self.server.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/"

    def serve(self) -> None:
        """Accept local connections until ``close`` (or the SSH connection drops)."""
        while not self._closed.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(conn,), daemon=True, name="gpuorch-port").start()

    def serve_in_thread(self) -> threading.Thread:
        t = threading.Thread(target=self.serve, daemon=True, name="gpuorch-port-accept")
        t.start()
        return t

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.server.close()
        if isinstance(self._hold, subprocess.Popen):
            with contextlib.suppress(Exception):
                self._hold.communicate(timeout=10)  # closes its stdin: cat ends
        elif self._hold is not None:
            with contextlib.suppress(Exception):
                self._hold.close()  # the channel's close is cat's end of input on the box
        if self.client is not None:
            self.client.close()

    def __enter__(self) -> Forward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _carry(self, conn: socket.socket) -> None:
        try:
            if isinstance(self.endpoint, LocalEndpoint):
                far: Any = socket.create_connection(("127.0.0.1", self.remote_port), timeout=10)
                far.settimeout(None)
            else:
                assert self.client is not None
                transport = self.client.get_transport()
                if transport is None or not transport.is_active():
                    self.close()
                    return
                far = transport.open_channel("direct-tcpip", ("127.0.0.1", self.remote_port), conn.getpeername())
        except Exception:  # nothing listens there (yet): this connection fails, the forward stays
            conn.close()
            return
        _pump(conn, far)


def _pump(a: socket.socket, b: Any) -> None:
    """Copy both ways until either side closes; then close both."""
    def copy(src: Any, dst: Any) -> None:
        try:
            while data := src.recv(_CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        finally:  # no more from src: tell dst (the other direction may still carry data)
            with contextlib.suppress(Exception):
                if isinstance(dst, socket.socket):
                    dst.shutdown(socket.SHUT_WR)
                else:
                    dst.shutdown_write()

    other = threading.Thread(target=copy, args=(b, a), daemon=True)
    other.start()
    copy(a, b)
    other.join()
    for s in (a, b):
        with contextlib.suppress(Exception):
            s.close()
