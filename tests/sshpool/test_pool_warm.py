"""Warm instances on an SSH pool (issue 35, item 1), through the assembled daemon against a real
sshd "host": a sweep's two trials (one at a time) run back to back on one slot lease, with no
second lease; the second trial's agent starts in a fresh run directory (the first's set aside over
SFTP), and the idle watcher never powers a pool host off (it has no shutdown command there)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pool_harness import PoolHost
from sqlmodel import select

from gpuorch.store.models import Job, JobStatus, SlotLease, WarmInstance
from gpuorch.testing import wait_until
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events

pytestmark = [pytest.mark.sshpool, pytest.mark.timeout(120)]


def sweep_file(tmp_path: Path, out: Path) -> Path:
    # Each trial proves its run directory fresh: the file the last trial left is not there.
    job = {"resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand", "keep_warm": "5m",
           "run": f'test ! -e left-behind && touch left-behind && echo "$GPUORCH_JOB_ID" >"{out}/trial-{{T}}"'}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "pool-warm", "parameters": {"T": [1, 2]}, "max_parallel": 1, "job": job}))
    return path


def test_two_trials_run_back_to_back_on_one_pool_lease(
        tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]], pool_options: Callable[..., dict[str, Any]]):
    (host,) = start_hosts(1)
    out = tmp_path / "out"
    out.mkdir()
    config = {"providers": {"ssh": pool_options([host], "A100:80GB:1", price_per_gpu_hour=3.6)},
              "heartbeat_timeout_s": 3.0}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        sweep_id = d.submit_sweep(sweep_file(tmp_path, out))["id"]
        d.until(lambda: all(j.status.terminal for j in _trials(d, sweep_id)), what="both trials to end")
        first, second = _trials(d, sweep_id)
        assert [first.status, second.status] == [JobStatus.SUCCEEDED] * 2, [first.message, second.message]
        [a1], [a2] = d.attempts(first.id or 0), d.attempts(second.id or 0)
        assert a1.instance_id == a2.instance_id
        [reused] = events(d.store, "warm_reused")
        assert reused.job_id == second.id
        with d.store.read() as s:
            assert len(s.exec(select(SlotLease)).all()) == 1  # one lease: no second launch
        d.until(lambda: all(w.ended_at is not None for w in _rows(d)), what="the warm lease released")
        # Each trial's run directory was set aside; the watcher keeps only the newest.
        root = host.root / (a1.instance_id or "")
        wait_until(lambda: [p.name.split("-")[:2] for p in (root / "runs").iterdir()] == [["1", str(second.id)]]
                   and "idle watcher done: off" in (root / "idle.log").read_text(), timeout_s=30,
                   what="the run directories set aside")
        assert "shutdown" not in (root / "idle.log").read_text()  # a pool host is never powered off


def _trials(d: AssembledDaemon, sweep_id: int) -> list[Job]:
    with d.store.read() as s:
        return list(s.exec(select(Job).where(Job.sweep_id == sweep_id).order_by(Job.id)))  # type: ignore[arg-type]


def _rows(d: AssembledDaemon) -> list[WarmInstance]:
    with d.store.read() as s:
        return list(s.exec(select(WarmInstance)).all())
