"""A real ``gpuorch daemon`` process for tests, with its own NOTIFY_SOCKET and a JSON log file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from notify_socket import NotifySocket

CONFIG = "providers: {local: {}}\npoll_s: 0.2\nmax_sleep_s: 0.5\n"


class DaemonProcess:
    def __init__(self, home: Path, name: str = "daemon", config: str = CONFIG + "metrics: {enabled: false}\n",
                 watchdog_usec: int = 30_000_000, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.config = home / f"{name}.yaml"
        self.config.write_text(config)
        self.log_path = home / f"{name}.log"
        self.notify = NotifySocket()
        env = {**os.environ, "GPUORCH_HOME": str(home), "NOTIFY_SOCKET": self.notify.env_value,
               "WATCHDOG_USEC": str(watchdog_usec), **(env or {})}
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gpuorch", "--config", str(self.config), "daemon", "--log-format", "json"],
                env=env, stdout=subprocess.DEVNULL, stderr=log)

    def ready(self) -> dict[str, str]:
        return self.notify.wait_for("READY")

    def passes(self, n: int) -> None:
        """Wait until ``n`` more reconcile passes have completed (one WATCHDOG=1 each)."""
        for _ in range(n):
            self.notify.wait_for("WATCHDOG")

    def log(self) -> list[dict]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.startswith("{")]

    def terminate(self, timeout: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.notify.close()


def wait_until(check: Callable[[], object], timeout: float = 90.0, what: str = "condition") -> object:
    """Poll ``check`` until truthy; the timeout is a safety net, not an assertion on speed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
