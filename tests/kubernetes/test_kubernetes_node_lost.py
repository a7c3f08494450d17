"""A node lost without notice (issue 34, the dead-man case), through the assembled daemon: the fake
kubelet's node dies at once (its pod's processes killed without a signal, its kubelet silent), so
no SIGTERM reaches the agent and no final checkpoint is taken. After ``node_lost_s`` the provider
reports the pod preempted ("node lost"), and the job resumes on the other node from its last
periodic checkpoint, finishing with the loss of an uninterrupted run."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from k8s_harness import cluster
from lightkube.resources.core_v1 import Pod
from sqlmodel import select

from gpuorch.store.models import Checkpoint, JobStatus, TerminationReason
from gpuorch.testing import e2e
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.fake_kubelet import FakeNode

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(300)]

# Checkpoints every 10 steps, synced every 0.5 s: the node is lost after two (at step ~40 of 100
# when the machine is quiet, earlier under load), and the daemon looks every 0.5 s (poll_s).
ENV = {"STEPS": "100", "CKPT_EVERY": "10", "STEP_SLEEP": "0.03", "SEED": "7"}
NODES = (FakeNode("gpu-a", gpus=1), FakeNode("gpu-b", gpus=1))


def checkpoints(d: AssembledDaemon, job: int) -> list[Checkpoint]:
    with d.store.read() as s:
        return list(s.exec(select(Checkpoint).where(Checkpoint.job_id == job)))


def test_a_node_lost_without_notice_resumes_the_job_from_its_last_periodic_checkpoint(tmp_path: Path) -> None:
    pool = ThreadPoolExecutor(1)  # the uninterrupted reference run, meanwhile (it mostly sleeps)
    reference = pool.submit(e2e.tiny_mlp_reference, tmp_path, ENV)
    with pool, cluster(tmp_path, NODES) as k8s, AssembledDaemon.start(
            tmp_path / "home", {"providers": {"kubernetes": k8s.options(node_lost_s=0.5)}, "poll_s": 0.5}) as d:
        job = d.submit({"name": "mlp", "run": f"{sys.executable} train.py", "workdir": str(e2e.TINY_MLP),
                        "env": ENV, "resources": {"gpu": "A100:80GB:1"},
                        "checkpoint": {"store": (tmp_path / "ckpt").as_uri(), "interval": "0.5s"}})
        d.until(lambda: len(checkpoints(d, job)) >= 2, timeout_s=120, what="two periodic checkpoints")
        first = d.attempts(job)[-1]
        pod = k8s.client().get(Pod, first.instance_id.split(":", 1)[1], namespace="default")
        k8s.kubelet.lose_node(pod.spec.nodeName)  # no notice: the processes die, the node goes silent
        done = d.until_terminal(job, timeout_s=180)
        a1, a2 = d.attempts(job)[:2]
        assert a1.reason == TerminationReason.PREEMPTED and "lost" in (a1.message or ""), a1.message
        assert done.status == JobStatus.SUCCEEDED and a2.region == a1.region
        assert k8s.client().get(Pod, a2.instance_id.split(":", 1)[1], namespace="default").spec.nodeName \
            != pod.spec.nodeName
        saved = [c for c in checkpoints(d, job) if c.attempt == a1.number]
        assert saved and not any(c.final for c in saved)  # nothing was taken on a notice: none came
        assert a2.resumed_from is not None and a2.resumed_from.startswith("step-")  # tiny_mlp's step-<n>
        assert int(a2.resumed_from.removeprefix("step-")) >= max(c.step or 0 for c in saved)  # the newest
        assert json.loads(done.result)["final_loss"] == reference.result(timeout=120)
