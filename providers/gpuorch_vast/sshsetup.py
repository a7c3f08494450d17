"""What a Vast container is told at start: the attempt's SSH host key and the job's login key.

Vast runs no cloud-init; its ``ssh`` launch mode starts an sshd in the container, then runs the
instance's ``onstart`` commands (docs.vast.ai/api-reference/creating-instances-with-api). The
onstart script below installs the host key the daemon made for the attempt (the one the runner
pins before it ever connects: nothing is trusted on first use), removes every other host key,
authorizes the job's login key, and makes sshd reload its keys. Only keys the daemon generated go
into it, base64-encoded, so no value is ever interpolated into the shell as text.
"""

from __future__ import annotations

import base64
from pathlib import Path

from gpuorch.provider import LaunchRequest
from gpuorch.runners.cloudinit import single_line


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def onstart(home: Path | None, request: LaunchRequest) -> str | None:
    """The onstart script of ``request``'s container; None without a home (no keys to give)."""
    logins = [single_line(request.ssh_public_key)] if request.ssh_public_key else []
    if home is None:
        if not logins:
            return None
        host = None
    else:
        from gpuorch.runners.keys import ensure_host_key, ensure_job_key

        _, login = ensure_job_key(home, request.job_id)
        host = ensure_host_key(home, request.job_id, request.attempt)
        logins.insert(0, single_line(login))
    lines = ["set -e", "umask 077", "mkdir -p /root/.ssh"]
    if host is not None:
        private, public = host
        lines += ["rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub",
                  f"echo {_b64(private)} | base64 -d > /etc/ssh/ssh_host_ed25519_key",
                  f"echo {_b64(single_line(public))} | base64 -d > /etc/ssh/ssh_host_ed25519_key.pub"]
    lines += [f"echo {_b64(key)} | base64 -d >> /root/.ssh/authorized_keys" for key in logins]
    lines += ["pkill -HUP -x sshd || true"]  # sshd re-executes on SIGHUP and reads the new host key
    return "\n".join(lines) + "\n"
