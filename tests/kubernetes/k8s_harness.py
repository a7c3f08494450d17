"""A cluster for the Kubernetes provider's tests: kmock's API server, the fake kubelet with GPU
nodes, a kubeconfig file naming it, and the provider built from options as the daemon builds it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpuorch.store.models import Job
from gpuorch.testing.fake_kubelet import FakeKubelet, FakeNode
from gpuorch.testing.kmock_ext import KubeServer

NODES = (FakeNode("gpu-a100-1", gpus=4), FakeNode("gpu-t4-1", gpus=1, product="Tesla-T4", memory_mib=15360))


@dataclass
class Cluster:
    server: KubeServer
    kubelet: FakeKubelet
    kubeconfig: Path

    def options(self, **extra: Any) -> dict[str, Any]:
        """``providers.kubernetes`` for this cluster; the pods' Python is this interpreter."""
        context = {"context": "kmock", "namespace": "default", "price_per_gpu_hour": 0, **extra.pop("context", {})}
        return {"kubeconfig": str(self.kubeconfig), "contexts": [context], "python": sys.executable,
                "termination_grace_s": 10, **extra}

    def client(self) -> Any:
        from lightkube import Client, KubeConfig

        return Client(config=KubeConfig.from_dict(self.server.kubeconfig()), namespace="default")


@contextmanager
def cluster(root: Path, nodes: tuple[FakeNode, ...] = NODES, **kubelet: Any) -> Iterator[Cluster]:
    with KubeServer() as server, FakeKubelet(server, root / "kubelet", [FakeNode(**vars(n)) for n in nodes],
                                             **kubelet) as k:
        yield Cluster(server, k, server.write_kubeconfig(root / "kubeconfig"))


def waited(d: Any, job: int, seconds: float) -> None:
    """The job was submitted ``seconds`` earlier (its wait for owned capacity, as
    ``decide.owned.waited_s`` measures it, without a test sleeping it), and the assembled daemon
    ``d`` reads its row afresh (it keeps rows across passes; none of them changes ``created_at``)."""
    with d.store.write() as s:
        row = s.get(Job, job)
        assert row is not None
        row.created_at -= timedelta(seconds=seconds)
    d.rec.rows.drop(job)
