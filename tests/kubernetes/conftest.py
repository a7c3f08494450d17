"""Fixtures of the Kubernetes tests: kmock's API server (``KubeServer``) and the fake kubelet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("kmock")
pytest.importorskip("lightkube")

from gpuorch.testing.kmock_ext import KubeServer


@pytest.fixture
def kube() -> Iterator[KubeServer]:
    with KubeServer() as server:
        yield server


@pytest.fixture
def client(kube: KubeServer):
    from lightkube import Client, KubeConfig

    c = Client(config=KubeConfig.from_dict(kube.kubeconfig()), namespace="default")
    yield c
    c.close()
