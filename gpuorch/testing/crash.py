"""Crash-recovery checks for any provider: a real ``gpuorch daemon`` SIGKILLed at a crash point.

The shape every adapter's crash test shares (DESIGN.md 4: "a crash at any line, followed by a
restart, must converge")::

    with AssembledDaemon.start(home, config) as d:      # queue the job, the path of `gpuorch submit`
        job = d.submit(spec)
    kill_at(home, config, "launch.called")              # a real daemon process dies there
    with AssembledDaemon.start(home, config) as d:      # the restart, on the same home and config
        d.until(...)                                    # then count the provider's instances

``kill_at`` runs ``gpuorch --config FILE daemon`` as systemd would (a subprocess, passes on its
own, ``$GPUORCH_HOME`` = ``home``) with ``$GPUORCH_CRASHPOINTS`` arming that one point
(``gpuorch.ops.crashpoints``), and returns once the process has SIGKILLed itself there. The
child inherits the caller's environment (a provider's API key), less its ``GPUORCH_*`` settings
and any config file of this machine or user, as ``AssembledDaemon.start`` loads only ``config``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gpuorch.ops import crashpoints


def kill_at(home: Path, config: str | Mapping[str, Any], point: str, *,
            env: Mapping[str, str] | None = None, timeout_s: float = 120.0) -> None:
    """Run a real daemon on ``home`` with ``point`` armed until it SIGKILLs itself there.

    ``config``: YAML text or a mapping, written to ``home/crash-config.yaml``; ``env``: added to
    the child's environment. AssertionError (with the daemon's log tail) when the process ends
    any other way, or is still running after ``timeout_s`` (a safety net, not a speed check).
    """
    home.mkdir(parents=True, exist_ok=True)
    path = home / "crash-config.yaml"
    path.write_text(config if isinstance(config, str) else yaml.safe_dump(dict(config)))
    crashes, log_path = home / "crashes.log", home / "crash-daemon.log"
    crashes.unlink(missing_ok=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GPUORCH_")}
    environ.update({"GPUORCH_HOME": str(home), "XDG_CONFIG_HOME": str(home / ".no-user-config"),
                    "CONFIGURATION_DIRECTORY": str(home / ".no-system-config"),
                    crashpoints.ENV: f"seed=1,{point}=1", crashpoints.LOG_ENV: str(crashes), **(env or {})})
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "gpuorch", "--config", str(path), "daemon"],
                                env=environ, stdout=subprocess.DEVNULL, stderr=log)
    try:
        code = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    tail = log_path.read_text()[-2000:]
    assert code is not None, f"the daemon never reached {point} in {timeout_s:.0f} s: {tail}"
    assert code == -signal.SIGKILL, f"the daemon exited {code}, not killed at {point}: {tail}"
    assert crashes.read_text().split()[-1] == point, f"killed elsewhere: {crashes.read_text()}"
