"""Kueue (issue 34): with a context's ``local_queue``, the pod carries the LocalQueue label and waits
behind Kueue's admission gate (the fake kubelet plays Kueue: ``gpuorch.testing.fake_kueue``); the
wait is not a failure (the attempt stays live, the job starting), and once the test admits the
pod it is scheduled, runs the job and succeeds. Through the assembled daemon."""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_harness import cluster
from lightkube.resources.core_v1 import Pod

from gpuorch.store.models import AttemptStatus, JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.fake_kueue import KUEUE_GATE, KUEUE_QUEUE

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(300)]


def test_a_queued_pod_waits_for_admission_then_runs(tmp_path: Path) -> None:
    out = tmp_path / "ran"
    with cluster(tmp_path) as k8s, AssembledDaemon.start(tmp_path / "home", {"providers": {"kubernetes": k8s.options(
            context={"local_queue": "team-queue"})}}) as d:
        job = d.submit({"name": "queued", "run": f"echo ran > {out}", "resources": {"gpu": "A100:80GB:1"}})
        d.until(lambda: d.attempts(job) and d.attempts(job)[-1].instance_id, what="the pod to be created")
        (attempt,) = d.attempts(job)
        name = attempt.instance_id.split(":", 1)[1]

        def pod() -> Pod:
            return k8s.client().get(Pod, name, namespace="default")

        assert pod().metadata.labels[KUEUE_QUEUE] == "team-queue"
        d.until(lambda: d.adapter("kubernetes").get(attempt.instance_id).state_reason or "",
                what="the pod to wait behind Kueue's gate")
        assert [g.name for g in pod().spec.schedulingGates] == [KUEUE_GATE]
        assert (d.adapter("kubernetes").get(attempt.instance_id).state_reason or "").startswith("SchedulingGated")
        for _ in range(5):  # waiting for admission is not a failure: the same attempt, nothing ended
            d.run_pass()
        (waiting,) = d.attempts(job)
        assert waiting.status != AttemptStatus.ENDED and waiting.reason is None
        assert d.status(job) in (JobStatus.STARTING, JobStatus.QUEUED) and pod().spec.nodeName is None
        assert not out.exists()
        k8s.kubelet.admit(name, "default")  # Kueue admits the Workload: the gate goes
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        (ran,) = d.attempts(job)
        assert ran.number == attempt.number and ran.reason == TerminationReason.SUCCEEDED
        assert out.read_text().strip() == "ran" and pod().spec.nodeName
