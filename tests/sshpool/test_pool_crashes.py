"""A real daemon (a ``gpuorch daemon`` subprocess: ``gpuorch.testing.crash.kill_at``) SIGKILLed at
each launch crash point, and at ``terminate.called``, then restarted: the job runs exactly once, on one
lease (its client token's), and every slot is released in the end: no leaked slot, no duplicate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pool_harness import PoolHost, host_processes
from sqlmodel import select

from gpuorch.provider import client_token
from gpuorch.store.models import JobStatus, SlotLease
from gpuorch.testing.crash import kill_at
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.sshpool, pytest.mark.chaos, pytest.mark.timeout(300)]


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
    kill_at(home, config, point)
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
