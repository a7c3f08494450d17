"""A real NOTIFY_SOCKET for tests: a unix datagram socket bound the way systemd binds it."""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from pathlib import Path


class NotifySocket:
    """Receives sd_notify datagrams. ``abstract``: bind in the abstract namespace (``@name``)."""

    def __init__(self, abstract: bool = False) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._dir: str | None = None
        if abstract:
            name = f"gpuorch-test-{uuid.uuid4().hex}"
            self.sock.bind("\0" + name)
            self.env_value = "@" + name
        else:  # a short path: sun_path holds 108 bytes, pytest's tmp_path may be longer
            self._dir = tempfile.mkdtemp(prefix="gpo-", dir="/tmp")
            path = str(Path(self._dir) / "notify")
            self.sock.bind(path)
            self.env_value = path
        self.messages: list[dict[str, str]] = []

    def receive(self, timeout: float = 60.0) -> dict[str, str]:
        """The next datagram as a dict of its assignments (a safety timeout, not an assertion)."""
        self.sock.settimeout(timeout)
        data = self.sock.recv(4096).decode()
        msg = dict(line.split("=", 1) for line in data.splitlines() if "=" in line)
        self.messages.append(msg)
        return msg

    def wait_for(self, key: str, timeout: float = 60.0) -> dict[str, str]:
        """Receive until a message carrying ``key`` arrives; return it."""
        while True:
            msg = self.receive(timeout)
            if key in msg:
                return msg

    def close(self) -> None:
        self.sock.close()
        if self._dir:
            for p in Path(self._dir).iterdir():
                p.unlink()
            os.rmdir(self._dir)
