"""A throwaway OpenSSH server on 127.0.0.1 for the SSH runner tests (recipe: shared/TESTING.md).

Own host key, own authorized_keys, an ephemeral port; logins as the current user by key only.
``SshdUnavailable`` says why a daemon cannot run here (the tests then skip with that reason).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


class SshdUnavailable(Exception):
    pass


def find_sshd() -> str:
    found = shutil.which("sshd") or next((p for p in SSHD_CANDIDATES if os.access(p, os.X_OK)), None)
    if found is None:
        raise SshdUnavailable("sshd is not installed; `make test` installs it (scripts/test-services.sh)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sshd:
    """``sshd -D`` with ``host_key`` (an OpenSSH private key) and ``authorized_keys`` in ``workdir``."""

    def __init__(self, workdir: Path, host_key: str, authorized_keys: list[str], port: int | None = None) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.user = getpass.getuser()
        self.log = self.dir / "sshd.log"
        self.authorized_keys = self.dir / "authorized_keys"
        self.authorized_keys.write_text("".join(f"{k}\n" for k in authorized_keys))
        host_key_file = self.dir / "host_ed25519"
        host_key_file.write_text(host_key)
        host_key_file.chmod(0o600)
        home = self.dir / "home"
        home.mkdir(exist_ok=True)
        self.config = self.dir / "sshd_config"
        self.config.write_text("\n".join([
            # A fresh instance's clean home: bash sources ~/.bashrc for commands run by sshd, and
            # this host's own rc files (pyenv, conda...) must not slow down or break the tests.
            f"SetEnv HOME={home}",
            f"ListenAddress 127.0.0.1:{self.port}",
            f"HostKey {host_key_file}",
            f"AuthorizedKeysFile {self.authorized_keys}",
            f"PidFile {self.dir / 'sshd.pid'}",
            f"AllowUsers {self.user}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",  # keys under /tmp would fail the ownership checks
            "Subsystem sftp internal-sftp",
            "LogLevel VERBOSE",
            "",
        ]))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 5.0) -> Sshd:
        sshd = find_sshd()
        with contextlib.suppress(OSError):
            os.makedirs("/run/sshd", exist_ok=True)  # privilege separation dir, absent in containers
        self.proc = subprocess.Popen([sshd, "-D", "-f", str(self.config), "-E", str(self.log)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise SshdUnavailable(f"sshd exited with {self.proc.returncode}: {self.log_text()[-600:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return self
            time.sleep(0.02)
        self.stop()
        raise SshdUnavailable(f"sshd did not listen within {timeout} s: {self.log_text()[-600:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=5)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""
