"""The Kubernetes provider through the assembled daemon (``gpuorch daemon``'s build, the config naming
kmock's API server): a drain's eviction reaches the agent in the pod as SIGTERM, which it takes as
its notice: final checkpoint, then a relaunch on another node (another context) that resumes from
it; a pod already there for an attempt (a 409) is adopted, never doubled."""

from __future__ import annotations

import json
import sys
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

ENV = {"STEPS": "300", "CKPT_EVERY": "40", "STEP_SLEEP": "0.03", "SEED": "7"}
NODES = (FakeNode("gpu-a", gpus=1), FakeNode("gpu-b", gpus=1))


def two_contexts(k8s, **extra) -> dict:
    """Two contexts of one cluster (namespaces team-a and team-b): two regions, as two clusters are."""
    opts = k8s.options(**extra)
    k8s.server.write_kubeconfig(k8s.kubeconfig, {"team-a": "team-a", "team-b": "team-b"})
    opts["contexts"] = [{"context": "team-a", "price_per_gpu_hour": 0},
                        {"context": "team-b", "price_per_gpu_hour": 0.5}]
    return {"providers": {"kubernetes": opts}}


def test_an_eviction_takes_a_final_checkpoint_and_the_job_resumes_elsewhere(tmp_path: Path) -> None:
    with cluster(tmp_path, NODES) as k8s, AssembledDaemon.start(tmp_path / "home", two_contexts(k8s)) as d:
        job = d.submit({"name": "mlp", "run": f"{sys.executable} train.py", "workdir": str(e2e.TINY_MLP),
                        "env": ENV, "resources": {"gpu": "A100:80GB:1"},
                        "checkpoint": {"store": (tmp_path / "ckpt").as_uri(), "interval": "1s"}})
        d.until(lambda: d.attempts(job) and d.attempts(job)[-1].last_checkpoint is not None, timeout_s=120,
                what="a first periodic checkpoint")
        first = d.attempts(job)[-1]
        assert first.region == "team-a"  # the free context first
        pod = d.adapter("kubernetes").get(first.instance_id)
        node = _node_of(k8s, pod.id)
        k8s.kubelet.drain(node)
        done = d.until_terminal(job, timeout_s=180)
        a1, a2 = d.attempts(job)[:2]
        assert a1.reason == TerminationReason.PREEMPTED
        # The pod's tombstone says why (the daemon's message of a drained attempt does not carry it yet).
        tomb = k8s.client().get(Pod, a1.instance_id.split(":", 1)[1], namespace="team-a")
        assert tomb.metadata.deletionTimestamp is not None
        assert ("DisruptionTarget", "EvictionByEvictionAPI") in [(c.type, c.reason) for c in tomb.status.conditions]
        assert a2.region == "team-b" and done.status == JobStatus.SUCCEEDED
        with d.store.read() as s:
            final = s.exec(select(Checkpoint).where(Checkpoint.job_id == job, Checkpoint.attempt == a1.number,
                                                    Checkpoint.final == True)).one()  # noqa: E712
        assert a2.resumed_from == final.name  # the checkpoint the agent took on the kubelet's SIGTERM
        assert json.loads(done.result)["final_loss"] == e2e.tiny_mlp_reference(tmp_path, ENV)
        assert [i for i in d.adapter("kubernetes").list_managed() if i.state.alive] == []


def _node_of(k8s, instance_id: str) -> str:
    return k8s.client().get(Pod, instance_id.split(":", 1)[1], namespace="team-a").spec.nodeName
