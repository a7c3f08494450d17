"""The systemd unit for the control host, rendered from one template.

``systemd/gpuorch.service`` in the repository is ``render_unit()`` with the defaults (a test
keeps them equal); ``gpuorch install-service`` writes it with this installation's executable.
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_EXEC = "/opt/gpuorch/.venv/bin/gpuorch"
DEFAULT_USER = "gpuorch"

TEMPLATE = """\
# gpuorch daemon on the control host. Install: `gpuorch install-service`, or see docs/operations.md.
[Unit]
Description=gpuorch GPU orchestration daemon
After=network-online.target
Wants=network-online.target

[Service]
# READY=1 once the store is open and the providers are loaded; STOPPING=1 on SIGTERM;
# WATCHDOG=1 after each completed reconcile pass (at most every WatchdogSec/2).
Type=notify
NotifyAccess=main
ExecStart={exec_start} daemon
User={user}
Group={user}
# /var/lib/gpuorch (database, logs, keys), owned by User=; the group may use the CLI on this host
# (it writes intent to the database). /etc/gpuorch (config.yaml) stays root's.
StateDirectory=gpuorch
StateDirectoryMode=0770
ConfigurationDirectory=gpuorch
Environment=GPUORCH_HOME=%S/gpuorch
WatchdogSec=180
TimeoutStartSec=120
# SIGTERM: no more jobs are claimed, the pass in flight gets drain_timeout_s (30 s), leases are
# released. Jobs keep running (in the cloud, or for the local provider as processes on this host:
# KillMode=process leaves them alone) and the next start re-adopts them.
KillSignal=SIGTERM
KillMode=process
TimeoutStopSec=60
Restart=on-failure
RestartSec=5
# Exit code 2 is a configuration error: restarting will not fix it.
RestartPreventExitStatus=2

# Hardening. Left out because they would break the local provider's jobs on this host:
# PrivateDevices=, DevicePolicy=, ProtectClock= (they hide /dev/nvidia*), MemoryDenyWriteExecute=
# (CUDA and JIT compilers need W+X pages), RemoveIPC= (jobs' shared memory outlives a restart).
# A file:// checkpoint store outside the state directory needs ReadWritePaths=/that/path.
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=true
PrivateTmp=true
ProtectKernelTunables=true
ProtectKernelModules=true
ProtectKernelLogs=true
ProtectControlGroups=true
ProtectHostname=true
PrivateMounts=true
ProtectProc=invisible
RestrictNamespaces=true
RestrictRealtime=true
RestrictSUIDSGID=true
LockPersonality=true
CapabilityBoundingSet=
AmbientCapabilities=
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
UMask=0007

[Install]
WantedBy=multi-user.target
"""


def render_unit(exec_start: str = DEFAULT_EXEC, user: str = DEFAULT_USER) -> str:
    return TEMPLATE.format(exec_start=exec_start, user=user)


def this_executable() -> str:
    """How systemd should start this installation's gpuorch: the venv's ``gpuorch`` script
    next to the running interpreter, else ``python -m gpuorch``. Symlinks are kept (a venv's
    interpreter must be run through its own path)."""
    script = Path(sys.executable).parent / "gpuorch"
    return str(script) if script.exists() else f"{sys.executable} -m gpuorch"


def install_commands(exec_start: str, user: str = DEFAULT_USER) -> list[str]:
    """The root commands that finish the installation once the unit file is in place."""
    config = "/etc/gpuorch/config.yaml"
    return [
        f"useradd --system --user-group --home-dir /var/lib/gpuorch --shell /usr/sbin/nologin {user}",
        "install -d -m 0755 /etc/gpuorch",
        f"test -e {config} || printf 'home: /var/lib/gpuorch\\n' > {config}   # every option: configs/daemon.yaml",
        f"chgrp {user} {config} && chmod 0640 {config}",
        "systemctl daemon-reload",
        "systemctl enable --now gpuorch",
        "systemctl status gpuorch           # active (running) once the daemon sent READY=1",
        "journalctl -u gpuorch -f           # its log",
        f"usermod -aG {user} $USER          # to run gpuorch submit/status on this host (log in again)",
        f"sudo -u {user} {exec_start} doctor",
    ]
