"""A real daemon (``gpuorch daemon --once`` in a subprocess) SIGKILLed at each launch crash point,
and at ``terminate.called``, then restarted: the job runs exactly once, on one lease (its client
token's), and every slot is released in the end: no leaked slot, no duplicate."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pool_harness import PoolHost, host_processes
from sqlmodel import select

from gpuorch.ops import crashpoints
from gpuorch.provider import client_token
from gpuorch.store.models import JobStatus, SlotLease
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.sshpool, pytest.mark.chaos, pytest.mark.timeout(300)]


def daemon_until_crash(home: Path, config: Path, point: str) -> None:
    """Passes of a real daemon process with ``point`` armed, until it SIGKILLs itself there."""
    log = home / "crashes.log"
    env = {**os.environ, "GPUORCH_HOME": str(home), crashpoints.ENV: f"seed=1,{point}=1",
           crashpoints.LOG_ENV: str(log)}
    for _ in range(30):
        done = subprocess.run([sys.executable, "-m", "gpuorch", "--config", str(config), "daemon", "--once"],
                              env=env, capture_output=True, text=True, timeout=120)
        if done.returncode == -9:
            assert log.read_text().split()[-1] == point
            return
        assert done.returncode == 0, done.stderr[-2000:]
    pytest.fail(f"the daemon never reached {point}")


@pytest.mark.parametrize("point", ["launch.intent", "launch.called", "launch.recorded", "terminate.called"])
def test_a_crash_then_a_restart_leaves_one_lease_and_no_leaked_slot(
        tmp_path: Path, point: str, start_hosts: Callable[[int], list[PoolHost]],
        pool_options: Callable[..., dict[str, Any]]):
    (host,) = start_hosts(1)
    out = tmp_path / "out"
    out.mkdir()
    home = tmp_path / "home"
    # A restarted daemon takes over the dead one's job once its claim expires: lease_s short here.
    config: dict[str, Any] = {"providers": {"ssh": pool_options([host])}, "lease_s": 3, "max_sleep_s": 1}
    with AssembledDaemon.start(home, config) as d:  # submit only; the passes are the subprocess's
        job = d.submit({"name": "crash", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand",
                        "run": f'echo "$GPUORCH_ATTEMPT" >> {out}/runs'})
        owner = d.store.installation_id
    path = home / "crash-config.yaml"
    path.write_text(yaml.safe_dump(config))
    daemon_until_crash(home, path, point)
    with AssembledDaemon.start(home, config) as d:
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED

        def rows() -> list[SlotLease]:
            with d.store.read() as s:
                return list(s.exec(select(SlotLease)).all())

        d.until(lambda: all(r.released_at is not None for r in rows()), what="every slot released")
        (attempt,) = d.attempts(job)
        assert {r.token for r in rows()} == {client_token(job, attempt.number, owner)}
        assert len(rows()) == 1  # one slot, leased once
        assert (out / "runs").read_text().split() == [str(attempt.number)]  # ran once
        assert not host_processes(host.root)
