"""``python -m gpuorch_local.reaper INSTANCE_DIR``: carry out an injected preemption on time.

Started detached by ``LocalProvider.inject_preemption``. Sleeps until the instance's
``preemption_deadline``, then kills its processes and marks it PREEMPTED, as the cloud would
reclaim a spot VM whether or not anyone is watching. Exits early once the instance has ended
(terminated meanwhile). ``get``/``list_managed`` perform the same settlement if this process
dies, so it is a convenience for punctuality, not a source of truth.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gpuorch.errors import NotFoundError
from gpuorch.provider import utcnow
from gpuorch.provider.localdir import InstanceDir

# Re-read the record at least this often: a later notice may move the deadline earlier.
_MAX_NAP_S = 1.0


def reap(instance_dir: Path) -> None:
    inst = InstanceDir(instance_dir)
    while True:
        try:
            meta = inst.observe()  # kills and marks once the deadline has passed
        except NotFoundError:
            return
        if not meta.state.alive or meta.preemption_deadline is None:
            return
        time.sleep(min(_MAX_NAP_S, max(0.0, (meta.preemption_deadline - utcnow()).total_seconds())))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gpuorch_local.reaper INSTANCE_DIR", file=sys.stderr)
        return 2
    reap(Path(argv[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
