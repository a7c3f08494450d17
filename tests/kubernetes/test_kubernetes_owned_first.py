"""Own capacity first on a FULL Kubernetes cluster (issue 34 part 3), through the assembled daemon
beside the sim cloud. The cluster lists its capacity even with every GPU held, so a job that finds
it full (its launch: no capacity, the class backed off) has an owned option to wait for, as with a
full SSH pool: it waits up to its ``max_wait``, then bursts to the cloud; or it runs on the cluster
when a GPU frees inside ``max_wait`` (at the next pass: the cluster's job that ends lifts the
back-off, here a default-length one, so nothing waits out its 300 s).
``gpuorch plan`` shows the owned option and the wait while the cluster is full."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_harness import cluster, waited
from typer.testing import CliRunner

from gpuorch.placement.owned import WAITS
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events
from gpuorch.testing.fake_kubelet import FakeNode

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(300)]

NODES = (FakeNode("gpu-a", gpus=1),)
DEADLINE = {"at": "8h", "job_hours": 1}


def config(tmp_path: Path, k8s: Any) -> dict[str, Any]:
    """The cluster (priced above the cloud, so only owned-first puts a job there) and the sim cloud
    selling an 80 GB A100 on demand, booting at once; a class without capacity rests the default
    300 s, unless a job on the cluster ends."""
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "aa-1a_a100.json").write_text(json.dumps({"metadata": {"gap_seconds": 60}, "data": [1] * 100}))
    sim = {"traces": str(traces), "boot_s": 0, "time_scale": 1, "instance_type": "a2-sim", "gpu": "A100-80GB",
           "gpu_memory_gib": 80, "on_demand_price": 1.0, "min_billing_s": 0}
    return {"providers": {"kubernetes": k8s.options(context={"price_per_gpu_hour": 2.0}), "sim": sim},
            "backoff_s": 300}


def gated(out: Path, gate: Path, name: str, **extra: Any) -> dict[str, Any]:
    """A 1-GPU job that marks its start, then waits for ``gate`` to exist."""
    return {"name": name, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand", "deadline": DEADLINE,
            "run": f'touch {out}/"$GPUORCH_JOB_ID-$GPUORCH_ATTEMPT"; while [ ! -e {gate} ]; do sleep 0.1; done',
            **extra}


def choices(d: AssembledDaemon, job: int) -> list[tuple[str, str]]:
    """(choice, message) of the job's placement events, oldest first."""
    return [(json.loads(e.data or "{}")["choice"], e.message) for e in events(d.store, "placement", job)]


def test_a_full_cluster_is_waited_for_within_max_wait_then_burst_or_run_when_a_gpu_frees(tmp_path: Path) -> None:
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    with cluster(tmp_path, NODES) as k8s, AssembledDaemon.start(tmp_path / "home", config(tmp_path, k8s)) as d:
        first = d.submit(gated(out, gate, "first"))
        d.until(lambda: (out / f"{first}-1").exists(), what="the first job to start on the cluster")
        assert [a.provider for a in d.attempts(first)] == ["kubernetes"]  # owned first, though the cloud is cheaper
        # The cluster is full now; a short max_wait and a long one.
        short = d.submit(gated(out, gate, "short", max_wait="30s"))
        long = d.submit(gated(out, gate, "long", max_wait="1h"))
        for job in (short, long):
            d.until(lambda j=job: (d.job(j).message or "").startswith(WAITS), what="the jobs to wait for the cluster")
        assert "kubernetes kmock A100-80GBx1" in (d.job(long).message or "")

        _plan_shows_the_owned_option_and_the_wait(tmp_path, d)

        waited(d, short, 30)  # its max_wait is over (no test sleeps it: its wait counts from its submission)
        d.until(lambda: any(a.provider == "sim" for a in d.attempts(short)), what="the short job to burst")
        *tried, burst = d.attempts(short)
        assert tried and {(a.provider, a.reason) for a in tried} == {("kubernetes", TerminationReason.NO_CAPACITY)}
        assert burst.provider == "sim"
        said = choices(d, short)
        assert said[0][0] == "owned" and "wait" in [c for c, _ in said] and said[-1][0] == "burst"
        assert "owned capacity is full" in said[-1][1] and "max_wait is 30 s" in said[-1][1], said[-1][1]
        # The long job still waits: nothing but tries on the cluster, never the cloud.
        assert d.status(long) == JobStatus.QUEUED
        assert all((a.provider, a.reason) == ("kubernetes", TerminationReason.NO_CAPACITY) for a in d.attempts(long))

        gate.touch()  # the first job ends, its pod goes, its GPU is free
        assert d.until_terminal(long).status == JobStatus.SUCCEEDED
        ran = d.attempts(long)[-1]
        assert ran.provider == "kubernetes" and ran.reason == TerminationReason.SUCCEEDED
        assert not any(a.provider == "sim" for a in d.attempts(long))
        assert d.until_terminal(first).status == d.until_terminal(short).status == JobStatus.SUCCEEDED


def _plan_shows_the_owned_option_and_the_wait(tmp_path: Path, d: AssembledDaemon) -> None:
    """``gpuorch plan`` over the configured providers' offers (the cluster's, as the daemon last
    listed them: full, yet listed) shows the owned option, the burst, and the wait when full."""
    from gpuorch.cli import app

    job = tmp_path / "plan.yaml"
    job.write_text(yaml.safe_dump(gated(tmp_path, tmp_path / "gate", "plan", max_wait="30m")))
    r = CliRunner().invoke(app, ["--config", str(d.config.home / "daemon-config.yaml"), "plan", str(job)],
                           env={"GPUORCH_HOME": str(d.config.home)})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert any(line.startswith("owned option: kubernetes kmock A100-80GBx1 at $2.000/h") for line in lines), r.output
    assert any(line.startswith("burst option: sim ") for line in lines), r.output
    assert any(line.startswith(f"when it is full: wait: {WAITS}") and "max_wait 30 min" in line
               for line in lines), r.output
