"""Own capacity first, cloud burst after (issue 34 part 3), through the assembled daemon: a pool
of real sshd hosts beside the sim cloud. A job goes to the pool while it has a free slot, even
though the pool's configured price is above the cloud's; a job that finds the pool full bursts
to the sim cloud (no ``max_wait``), or waits for the pool while its ``max_wait`` allows and runs
there as soon as a slot is released (the release lifts the pool's back-off: no timer)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pool_harness import PoolHost
from sqlmodel import select
from test_pool_daemon import gated_job

from gpuorch.placement.owned import WAITS
from gpuorch.store.models import Backoff, JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events

pytestmark = [pytest.mark.sshpool, pytest.mark.timeout(300)]

DEADLINE = {"at": "8h", "job_hours": 1}


def config(tmp_path: Path, pool: dict[str, Any]) -> dict[str, Any]:
    """The pool (priced above the cloud, so only owned-first puts a job there) and the sim cloud
    selling an 80 GB A100 on demand, booting at once, its agents real."""
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "aa-1a_a100.json").write_text(json.dumps({"metadata": {"gap_seconds": 60}, "data": [1] * 100}))
    sim = {"traces": str(traces), "boot_s": 0, "time_scale": 1, "instance_type": "a2-sim", "gpu": "A100-80GB",
           "gpu_memory_gib": 80, "on_demand_price": 1.0, "min_billing_s": 0}
    for host in pool["hosts"]:
        host["price_per_gpu_hour"] = 2.0
    return {"providers": {"ssh": pool, "sim": sim}}


def placements(d: AssembledDaemon, job: int) -> list[tuple[str, dict[str, Any]]]:
    """(message, data) of the job's placement events, oldest first."""
    return [(e.message, json.loads(e.data or "{}")) for e in events(d.store, "placement", job)]


def placement_choices(d: AssembledDaemon, job: int) -> list[str]:
    return [data["choice"] for _, data in placements(d, job)]


def backoffs(d: AssembledDaemon) -> list[str]:
    with d.store.read() as s:
        return list(s.exec(select(Backoff.key)).all())


def test_a_full_pool_bursts_to_the_cloud(tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]],
                                         pool_options: Callable[..., dict[str, Any]]):
    (host,) = start_hosts(1)
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    with AssembledDaemon.start(tmp_path / "home", config(tmp_path, pool_options([host], "A100:80GB:1"))) as d:
        first = d.submit({**gated_job(out, gate, "first"), "deadline": DEADLINE})
        d.until(lambda: (out / f"{first}-1.gpus").exists(), what="the first job to start on the pool")
        assert [a.provider for a in d.attempts(first)] == ["ssh"]  # owned first, though the cloud is cheaper
        assert placement_choices(d, first) == ["owned"]
        second = d.submit({**gated_job(out, gate, "second"), "deadline": DEADLINE})
        d.until(lambda: any(a.provider == "sim" for a in d.attempts(second)), what="the second job to burst")
        *full, burst = d.attempts(second)
        assert [(a.provider, a.reason) for a in full] == [("ssh", TerminationReason.NO_CAPACITY)]
        assert burst.provider == "sim" and burst.price_per_hour == 1.0
        assert placement_choices(d, second)[-1] == "burst"
        ((message, data),) = [(m, x) for m, x in placements(d, second) if x["choice"] == "burst"]
        assert "owned capacity is full" in message and "sets no max_wait" in message
        assert data["owned"].startswith("ssh/") and data["burst"].startswith("sim/")
        gate.touch()
        assert d.until_terminal(second).status == JobStatus.SUCCEEDED
        assert d.until_terminal(first).status == JobStatus.SUCCEEDED


def test_a_job_waits_for_the_pool_within_max_wait_and_runs_there_when_a_slot_frees(
        tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]], pool_options: Callable[..., dict[str, Any]]):
    (host,) = start_hosts(1)
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    with AssembledDaemon.start(tmp_path / "home", config(tmp_path, pool_options([host], "A100:80GB:1"))) as d:
        first = d.submit({**gated_job(out, gate, "first"), "deadline": DEADLINE})
        d.until(lambda: (out / f"{first}-1.gpus").exists(), what="the first job to start on the pool")
        waiter = d.submit({"name": "waiter", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand",
                           "run": f'echo "$CUDA_VISIBLE_DEVICES" > {out}/"$GPUORCH_JOB_ID-$GPUORCH_ATTEMPT.gpus"',
                           "deadline": DEADLINE, "max_wait": "1h"})
        d.until(lambda: (d.job(waiter).message or "").startswith(WAITS), what="the job to wait for the pool")
        assert backoffs(d) and all(k.startswith("ssh/") for k in backoffs(d))
        for _ in range(5):  # it keeps waiting: no burst while max_wait allows
            d.run_pass()
        assert d.status(waiter) == JobStatus.QUEUED and {a.provider for a in d.attempts(waiter)} == {"ssh"}
        assert placement_choices(d, waiter) == ["owned", "wait"]  # the launch that found it full; one for the wait
        gate.touch()  # the first job ends: its slot is released, the pool's back-off lifted
        assert d.until_terminal(waiter).status == JobStatus.SUCCEEDED
        ran = d.attempts(waiter)[-1]
        assert ran.provider == "ssh" and ran.reason == TerminationReason.SUCCEEDED
        assert (out / f"{waiter}-{ran.number}.gpus").read_text().strip() == "0"
        assert not any(a.provider == "sim" for a in d.attempts(waiter))


def test_a_full_host_backs_off_only_itself(tmp_path: Path, start_hosts: Callable[[int], list[PoolHost]],
                                          pool_options: Callable[..., dict[str, Any]]):
    """host0 (1 GPU, cheapest) and host1 (2 GPUs): the second job finds host0 full and runs on
    host1; the third is not held by host0's back-off and takes host1's other GPU at once."""
    hosts = start_hosts(2)
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    pool = pool_options(hosts, "A100:80GB:1")
    pool["hosts"][1]["gpus"] = "A100:80GB:2"
    pool["hosts"][1]["price_per_gpu_hour"] = 0.1
    with AssembledDaemon.start(tmp_path / "home", {"providers": {"ssh": pool}}) as d:
        jobs = []
        for i in range(3):
            jobs.append(d.submit(gated_job(out, gate, f"j{i}")))
            d.until(lambda: len(list(out.glob("*.gpus"))) == len(jobs), what=f"job {i} to start")
        assert [d.attempts(j)[-1].zone for j in jobs] == ["host0", "host1", "host1"]
        assert [(a.zone, a.reason) for a in d.attempts(jobs[1])[:-1]] == [("host0", TerminationReason.NO_CAPACITY)]
        assert any(k.endswith("@host0/on-demand") for k in backoffs(d)), backoffs(d)
        gate.touch()
        assert all(d.until_terminal(j).status == JobStatus.SUCCEEDED for j in jobs)
