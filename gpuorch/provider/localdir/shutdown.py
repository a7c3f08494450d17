"""``python -m gpuorch.provider.localdir.shutdown INSTANCE_DIR``: a local instance shuts itself down.

The runner makes this the agent's ``shutdown_command`` when the dead-man switch is on: once the
agent has heard nothing from the daemon for ``heartbeat_timeout_s`` and has handed off its final
checkpoint, it runs this, which ends the instance the way ``shutdown -h now`` ends a cloud VM
whose shutdown behaviour is "terminate": every process killed, the record TERMINATED.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gpuorch.provider.port import InstanceState

from .instances import InstanceDir

REASON_SHUTDOWN = "shutdown-by-agent"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gpuorch.provider.localdir.shutdown INSTANCE_DIR", file=sys.stderr)
        return 2
    try:
        os.setsid()  # leave the agent's process group, which the shutdown kills
    except OSError:
        pass  # already a group leader
    InstanceDir(Path(argv[0])).end(InstanceState.TERMINATED, REASON_SHUTDOWN)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
