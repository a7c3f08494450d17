"""gpuorch's Kubernetes provider: GPUs of clusters you already run (docs/kubernetes.md).

The client, ``lightkube``, is imported lazily (``pip install -e '.[kubernetes]'``).
"""

from __future__ import annotations

from .provider import KubernetesProvider

__all__ = ["KubernetesProvider"]
