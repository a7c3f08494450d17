"""``max_wait`` bounds a Kueue admission wait (issue 34), through the assembled daemon beside the
sim cloud. A cluster whose LocalQueue never admits holds the job's pod behind Kueue's gate: the
attempt is live, so only the admission bound ends it. Once the job has waited ``max_wait`` (30 s)
its attempt ends as no capacity, the pod is deleted (the Workload with it), the cluster's class is
backed off (its other back-offs stay: nothing ran there), and the job bursts to the sim cloud in
the same pass, its events saying why. Without ``max_wait`` the job keeps waiting.

No test sleeps 30 s: the job's wait is measured from its submission (``decide.owned.waited_s``),
so a test moves the job's ``created_at`` back (``k8s_harness.waited``) instead of waiting, and has the
daemon read the job's row afresh (it keeps rows across passes; none of them changes its
``created_at`` otherwise).
A crash between ending the queued attempt and its cloud launch, then a restart, leaves one cloud
instance and no pod."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from k8s_harness import cluster, waited
from lightkube.resources.core_v1 import Pod

from gpuorch.money.cost import attempt_cost
from gpuorch.reconciler.decide.attempt_steps import ADMISSION
from gpuorch.store.models import Backoff, JobStatus, TerminationReason
from gpuorch.testing.crash import kill_at
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events
from gpuorch.testing.fake_kubelet import FakeNode

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(300)]

NODES = (FakeNode("gpu-a", gpus=1),)
OTHER = "kubernetes/elsewhere"  # a back-off of the cluster's that the admission end must not lift


def config(tmp_path: Path, k8s: Any) -> dict[str, Any]:
    """The cluster behind a LocalQueue (priced above the cloud: only owned-first puts a job
    there) and the sim cloud selling an 80 GB A100 on demand, booting at once."""
    traces = tmp_path / "traces"
    traces.mkdir(exist_ok=True)
    (traces / "aa-1a_a100.json").write_text(json.dumps({"metadata": {"gap_seconds": 60}, "data": [1] * 100}))
    sim = {"traces": str(traces), "boot_s": 0, "time_scale": 1, "instance_type": "a2-sim", "gpu": "A100-80GB",
           "gpu_memory_gib": 80, "on_demand_price": 1.0, "min_billing_s": 0}
    kube = k8s.options(context={"price_per_gpu_hour": 2.0, "local_queue": "team-queue"})
    return {"providers": {"kubernetes": kube, "sim": sim}}


def spec(out: Path, **extra: Any) -> dict[str, Any]:
    return {"name": "queued", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand",
            "deadline": {"at": "8h", "job_hours": 1}, "run": f'echo "$GPUORCH_ATTEMPT" > {out}', **extra}


def _queued(d: AssembledDaemon, job: int) -> str:
    """Wait for the job's pod to wait for admission; its name."""
    d.until(lambda: (d.job(job).message or "").startswith(ADMISSION), what="the job to wait for admission")
    return d.attempts(job)[-1].instance_id.split(":", 1)[1]


def _pods(k8s: Any, job: int) -> list[Pod]:
    return list(k8s.client().list(Pod, labels={"gpuorch.dev/job": str(job)}))


def test_an_admission_wait_past_max_wait_deletes_the_pod_and_bursts(tmp_path: Path) -> None:
    out = tmp_path / "ran"
    with cluster(tmp_path, NODES) as k8s, AssembledDaemon.start(tmp_path / "home", config(tmp_path, k8s)) as d:
        job = d.submit(spec(out, max_wait="30s"))
        name = _queued(d, job)
        for _ in range(3):  # within max_wait: it waits
            d.run_pass()
        (waiting,) = d.attempts(job)
        assert waiting.provider == "kubernetes" and waiting.reason is None and [p.metadata.name for p in
                                                                                 _pods(k8s, job)] == [name]
        with d.store.write() as s:  # a back-off of the cluster's own: an attempt that never ran lifts none
            s.add(Backoff(key=OTHER, until=d.rec.clock.now() + timedelta(hours=1), reason="test"))

        waited(d, job, 31)
        d.run_pass()  # the bound is over: the attempt ends, the pod goes, the job bursts
        queued, *rest = d.attempts(job)
        assert queued.reason == TerminationReason.NO_CAPACITY, queued
        assert "waited" in (queued.message or "") and "max_wait is 30 s" in (queued.message or ""), queued.message
        assert [a.provider for a in rest] == ["sim"]
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        assert out.read_text().strip() == str(rest[-1].number)
        assert d.attempts(job)[-1].provider == "sim" and len(d.attempts(job)) == 2
        d.until(lambda: not [p for p in _pods(k8s, job) if not p.metadata.deletionTimestamp],
                what="the queued pod to be deleted")
        assert not [i for i in d.adapter("kubernetes").list_managed() if i.state.alive]

        burst = [json.loads(e.data or "{}") | {"message": e.message} for e in events(d.store, "placement", job)][-1]
        assert burst["choice"] == "burst" and "max_wait is 30 s" in burst["message"], burst
        with d.store.read() as s:
            keys = {b.key for b in s.exec(Backoff.__table__.select())}  # type: ignore[attr-defined]
        assert OTHER in keys and any(k.startswith("kubernetes/") and k != OTHER for k in keys), keys
        assert d.job(job).failures == 0 and d.job(job).preemptions == 0
        # the caps count only what ran: a pod deleted before admission bills nothing (from the
        # cluster's record: its tombstone's launch is its deletion)
        d.until(lambda: attempt_cost(d.attempts(job)[0], d.rec.clock.now()) == 0.0,
                what="the queued attempt billed nothing")


def test_without_max_wait_an_admission_wait_is_not_bounded(tmp_path: Path) -> None:
    out = tmp_path / "ran"
    with cluster(tmp_path, NODES) as k8s, AssembledDaemon.start(tmp_path / "home", config(tmp_path, k8s)) as d:
        job = d.submit(spec(out))
        name = _queued(d, job)
        waited(d, job, 3600)
        for _ in range(3):
            d.run_pass()
        (waiting,) = d.attempts(job)
        assert waiting.reason is None and d.status(job) == JobStatus.STARTING
        assert [p.metadata.name for p in _pods(k8s, job)] == [name] and not out.exists()
        k8s.kubelet.admit(name, "default")  # admitted at last: it runs on the cluster
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        assert [a.provider for a in d.attempts(job)] == ["kubernetes"]


def test_with_no_cloud_to_burst_to_the_pod_keeps_its_place_in_the_queue(tmp_path: Path) -> None:
    """``max_wait`` is over but no cloud candidate is left (the job names the cluster only):
    ending the pod would only put a new one at the back of Kueue's queue, so it waits."""
    out = tmp_path / "ran"
    with cluster(tmp_path, NODES) as k8s, AssembledDaemon.start(tmp_path / "home", config(tmp_path, k8s)) as d:
        job = d.submit(spec(out, max_wait="30s", providers=["kubernetes"]))
        name = _queued(d, job)
        waited(d, job, 31)
        for _ in range(3):
            d.run_pass()
        (waiting,) = d.attempts(job)
        assert waiting.reason is None and [p.metadata.name for p in _pods(k8s, job)] == [name]
        k8s.kubelet.admit(name, "default")
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        assert [a.provider for a in d.attempts(job)] == ["kubernetes"]


@pytest.mark.parametrize("point", ["terminate.called", "end.recorded"])
def test_a_crash_after_ending_the_queued_attempt_leaves_one_cloud_instance_and_no_pod(tmp_path: Path,
                                                                                    point: str) -> None:
    """Killed after the pod's delete (``terminate.called``: the End not recorded) or after the End
    (``end.recorded``: the cloud launch not made), then restarted: the job runs on the sim cloud,
    once, and no pod of it is left."""
    out, home = tmp_path / "ran", tmp_path / "home"
    with cluster(tmp_path, NODES) as k8s:
        cfg = {**config(tmp_path, k8s), "lease_s": 3, "max_sleep_s": 1}
        with AssembledDaemon.start(home, cfg) as d:
            job = d.submit(spec(out, max_wait="30s"))
            _queued(d, job)
            waited(d, job, 31)
        kill_at(home, cfg, point, timeout_s=180)

        with AssembledDaemon.start(home, cfg) as d:
            assert d.until_terminal(job).status == JobStatus.SUCCEEDED
            queued, *rest = d.attempts(job)
            assert queued.provider == "kubernetes" and queued.reason == TerminationReason.NO_CAPACITY, queued
            assert [a.provider for a in rest] == ["sim"], [(a.provider, a.reason) for a in rest]
            d.until(lambda: not [p for p in _pods(k8s, job) if not p.metadata.deletionTimestamp],
                    what="no pod of the job left")
            assert not [i for i in d.adapter("kubernetes").list_managed() if i.state.alive]
            assert not [i for i in d.adapter("sim").list_managed() if i.state.alive]
