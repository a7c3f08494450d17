"""The systemd notify protocol (``sd_notify(3)``), with the stdlib only.

Under ``Type=notify`` systemd passes ``NOTIFY_SOCKET``: a unix datagram socket, a filesystem
path or, when it starts with ``@``, a name in the abstract namespace. Each message is one
datagram of newline-separated ``KEY=VALUE`` assignments: ``READY=1`` once the daemon serves,
``STOPPING=1`` when it begins to shut down, ``WATCHDOG=1`` as a keep-alive, ``STATUS=...`` free
text for ``systemctl status``. With ``WatchdogSec=`` systemd also passes ``WATCHDOG_USEC`` (and
``WATCHDOG_PID``): a service silent for that long is killed and, with ``Restart=on-failure``,
restarted. The protocol's convention is to ping at half that interval.

Contract: every method is a no-op returning False when no socket was given, and never raises:
the daemon must keep working when the notify socket is gone or full.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import MutableMapping

log = logging.getLogger("gpuorch.sdnotify")

ENV_SOCKET, ENV_WATCHDOG_USEC, ENV_WATCHDOG_PID = "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"


def socket_address(value: str | None) -> str | None:
    """The address to ``connect`` to for a ``NOTIFY_SOCKET`` value, or None if unusable.

    ``@name`` is the abstract socket ``\\0name``; an absolute path is used as is. Other forms
    (``vsock:``, relative paths) are not supported and yield None.
    """
    if not value:
        return None
    if value.startswith("@"):
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    return None


def watchdog_interval(env: MutableMapping[str, str], pid: int | None = None) -> float | None:
    """Seconds between keep-alives (half of ``WATCHDOG_USEC``), or None if no watchdog is set
    for this process (unset, malformed, zero, or ``WATCHDOG_PID`` names another process)."""
    try:
        usec = int(env.get(ENV_WATCHDOG_USEC, ""))
    except ValueError:
        return None
    owner = env.get(ENV_WATCHDOG_PID)
    if usec <= 0 or (owner and owner != str(pid if pid is not None else os.getpid())):
        return None
    return usec / 2 / 1e6


class Notifier:
    """Sends notify messages to one socket. Build it with ``from_env``."""

    def __init__(self, address: str | None, watchdog_s: float | None = None) -> None:
        self.address = address
        self.watchdog_s = watchdog_s  # the keep-alive period (half of WatchdogSec)

    @classmethod
    def from_env(cls, env: MutableMapping[str, str] | None = None, *, unset: bool = False) -> Notifier:
        """Read ``NOTIFY_SOCKET`` and the watchdog variables. With ``unset``, remove them from
        ``env`` so child processes (the local provider's jobs) do not inherit them."""
        env = os.environ if env is None else env
        notifier = cls(socket_address(env.get(ENV_SOCKET)), watchdog_interval(env))
        if unset:
            for key in (ENV_SOCKET, ENV_WATCHDOG_USEC, ENV_WATCHDOG_PID):
                env.pop(key, None)
        return notifier

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *assignments: str) -> bool:
        """Send ``KEY=VALUE`` lines as one datagram; True if it was sent."""
        if self.address is None:
            return False
        data = "\n".join(assignments).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.settimeout(2.0)  # a full socket must not stall the daemon
                s.connect(self.address)
                s.send(data)
            return True
        except OSError as e:  # systemd gone, socket full: never worth failing the daemon for
            log.debug("sd_notify %r failed: %s", assignments, e)
            return False

    def ready(self, status: str | None = None) -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def stopping(self, status: str | None = None) -> bool:
        return self.send("STOPPING=1", *([f"STATUS={status}"] if status else []))

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def watchdog(self) -> bool:
        """Keep-alive; only sent when systemd asked for a watchdog."""
        return self.send("WATCHDOG=1") if self.watchdog_s is not None else False
