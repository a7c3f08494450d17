"""An image the cluster cannot pull fails the attempt with the cluster's message, through the
assembled daemon (issue 34): the pod's ImagePullBackOff is the provider's ``Instance.failure``, so
the attempt ends FAILED at once (not lost, and not relaunched as a preemption until
``max_preemptions``), the job's retry policy decides, and no pod is left."""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_harness import cluster

from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(300)]

IMAGE = "registry.example/missing:1"


def test_an_unpullable_image_fails_the_attempt_with_the_clusters_message(tmp_path: Path) -> None:
    with cluster(tmp_path) as k8s:
        k8s.kubelet.unpullable[IMAGE] = "manifest unknown"
        config = {"providers": {"kubernetes": k8s.options(context={"image": IMAGE})}}
        with AssembledDaemon.start(tmp_path / "home", config) as d:
            job = d.submit({"name": "pull", "run": "python -c 'print(1)'", "resources": {"gpu": "T4:1"},
                            "retry": {"max_failures": 0}})
            done = d.until_terminal(job, timeout_s=120)
            attempts = d.attempts(job)
            assert done.status == JobStatus.FAILED
            assert len(attempts) == 1 and attempts[0].reason == TerminationReason.FAILED
            message = attempts[0].message or ""
            assert "ImagePullBackOff" in message and "manifest unknown" in message
            assert done.preemptions == 0
            assert [i for i in d.adapter("kubernetes").list_managed() if i.state.alive] == []
