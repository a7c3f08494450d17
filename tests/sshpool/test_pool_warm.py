"""Warm instances on an SSH pool (issue 35, item 1), through the assembled daemon against a real
sshd "host": two jobs back to back on one slot lease, with no second lease; the second job's agent
starts in a fresh run directory (the first's set aside over SFTP), and the idle watcher never
powers a pool host off (it has no shutdown command there)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pool_harness import PoolHost
from sqlmodel import select

from gpuorch.store.models import JobStatus, SlotLease, WarmInstance
from gpuorch.testing import wait_until
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events

pytestmark = [pytest.mark.sshpool, pytest.mark.timeout(120)]


def job(out: Path, name: str, gate: Path | None = None) -> dict[str, Any]:
    wait = f"; while [ ! -e {gate} ]; do sleep 0.1; done" if gate else ""
    return {"name": name, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand", "keep_warm": "5m",
            "run": f'test ! -e left-behind && touch left-behind && echo "$GPUORCH_JOB_ID" >{out}/{name}{wait}'}


def test_two_jobs_run_back_to_back_on_one_pool_lease(
        tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]], pool_options: Callable[..., dict[str, Any]]):
    (host,) = start_hosts(1)
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    config = {"providers": {"ssh": pool_options([host], "A100:80GB:1", price_per_gpu_hour=3.6)},
              "heartbeat_timeout_s": 3.0}
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        first = d.submit(job(out, "first", gate))
        d.until(lambda: (out / "first").exists(), what="the first job to start")
        second = d.submit(job(out, "second"))  # the host's one GPU is taken: it waits for the warm lease
        gate.touch()
        assert d.until_terminal(first).status == JobStatus.SUCCEEDED
        assert d.until_terminal(second).status == JobStatus.SUCCEEDED
        [a1], [a2] = d.attempts(first), d.attempts(second)
        assert a1.instance_id == a2.instance_id
        [reused] = events(d.store, "warm_reused")
        assert reused.job_id == second
        with d.store.read() as s:
            assert len(s.exec(select(SlotLease)).all()) == 1  # one lease: no second launch
        root = host.root / (a1.instance_id or "")
        d.until(lambda: all(w.ended_at is not None for w in _rows(d)), what="the warm lease released")
        # Each job's run directory was set aside; the watcher keeps only the newest.
        wait_until(lambda: [p.name.split("-")[:2] for p in (root / "runs").iterdir()] == [["1", str(second)]],
                   timeout_s=30, what="the run directories set aside")
        log = (root / "idle.log").read_text()
        assert "idle watcher done: off" in log and "shutdown" not in log  # a pool host is never powered off


def _rows(d: AssembledDaemon) -> list[WarmInstance]:
    with d.store.read() as s:
        return list(s.exec(select(WarmInstance)).all())
