"""A Kubernetes gang through the assembled daemon (``gpuorch daemon``'s build, the config naming
kmock's API server): ``nodes: 2`` runs two pods whose jobs get torchrun's environment, with
``MASTER_ADDR`` node 0's DNS name under the gang's headless Service (which the fake cluster DNS
resolves); one pod evicted ends both (one fate), the attempt relaunches as a new gang, and the job
finishes; nothing of either gang is left alive."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from k8s_harness import cluster
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod, Service

from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.fake_kubelet import FakeNode

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(300)]

NODES = (FakeNode("gpu-a", gpus=2), FakeNode("gpu-b", gpus=2))
# Each rank writes its rendezvous environment to <out>/<attempt>-<rank>.json, then waits for <out>/go.
JOB = r"""
import json, os, pathlib, sys, time
out = pathlib.Path(sys.argv[1])
keys = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "NNODES", "WORLD_SIZE", "NPROC_PER_NODE")
tmp = out / ".tmp-{}-{}".format(os.environ["GPUORCH_ATTEMPT"], os.environ["NODE_RANK"])
tmp.write_text(json.dumps({k: os.environ.get(k) for k in keys}))
tmp.rename(out / "{}-{}.json".format(os.environ["GPUORCH_ATTEMPT"], os.environ["NODE_RANK"]))
while not (out / "go").exists():
    time.sleep(0.1)
"""


def test_a_gang_gets_the_rendezvous_and_one_evicted_pod_relaunches_the_gang(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "job.py").write_text(JOB)
    with cluster(tmp_path, NODES) as k8s, AssembledDaemon.start(
            tmp_path / "home", {"providers": {"kubernetes": k8s.options()}}) as d:
        job = d.submit({"name": "gang", "run": f"{sys.executable} {tmp_path / 'job.py'} {out}", "nodes": 2,
                        "resources": {"gpu": "A100:80GB:1"}})
        d.until(lambda: (out / "1-0.json").exists() and (out / "1-1.json").exists(), timeout_s=120,
                what="both ranks of attempt 1 to start")
        envs = [json.loads((out / f"1-{k}.json").read_text()) for k in range(2)]
        first = d.attempts(job)[0]
        pod0 = first.instance_id.split(":", 1)[1]
        assert [e["NODE_RANK"] for e in envs] == ["0", "1"]
        assert {e["MASTER_ADDR"] for e in envs} == {f"{pod0}.{pod0}.default.svc"}
        assert {(e["MASTER_PORT"], e["NNODES"], e["WORLD_SIZE"]) for e in envs} == {(envs[0]["MASTER_PORT"], "2", "2")}
        assert k8s.kubelet.resolve(envs[0]["MASTER_ADDR"]) == "127.0.0.1"  # the cluster DNS knows node 0

        client = k8s.client()
        eviction = Pod.Eviction(metadata=ObjectMeta(name=f"{pod0}-n1", namespace="default"))
        client.create(eviction, name=f"{pod0}-n1", namespace="default")  # node 1 is evicted: one fate
        d.until(lambda: (out / "2-0.json").exists() and (out / "2-1.json").exists(), timeout_s=120,
                what="the gang relaunched")
        (out / "go").touch()
        done = d.until_terminal(job, timeout_s=120)
        a1, a2 = d.attempts(job)[:2]
        assert a1.reason == TerminationReason.PREEMPTED and done.status == JobStatus.SUCCEEDED
        assert a2.instance_id != a1.instance_id
        k8s_adapter = d.adapter("kubernetes")

        def left() -> list[str]:
            pods = [i.id for i in k8s_adapter.list_managed() if i.state.alive]
            return pods + [s.metadata.name for s in client.list(Service, namespace="default")]

        try:
            d.until(lambda: not left(), timeout_s=60, what="every pod ended and both Services deleted")
        except AssertionError as e:
            raise AssertionError(f"{e}: left {left()}") from None
