"""The cluster DNS of the fake kubelet's cluster: what CoreDNS answers for a headless Service's pods.

"DNS for Services and Pods" (https://kubernetes.io/docs/concepts/services-networking/dns-pod-service/):
a pod whose ``spec.hostname`` is ``h`` and ``spec.subdomain`` is ``s``, in a namespace with a
headless Service (``clusterIP: None``) named ``s``, has the A record
``h.s.<namespace>.svc.<cluster domain>`` pointing at its pod IP, Ready or not when the Service
publishes not-ready addresses. Every fake pod shares this host's network, so that IP is 127.0.0.1
(``FakeKubelet`` sets it): a gang's rendezvous address resolves here as it would in a cluster.
"""

from __future__ import annotations

from typing import Any


def resolve(client: Any, name: str) -> str | None:
    """The pod IP for ``<hostname>.<subdomain>.<namespace>.svc[.cluster.local]`` (``client``: a
    lightkube Client); None where CoreDNS would answer NXDOMAIN."""
    from lightkube import ApiError
    from lightkube.resources.core_v1 import Pod, Service

    parts = name.rstrip(".").removesuffix(".cluster.local").split(".")
    if len(parts) != 4 or parts[3] != "svc":
        return None
    host, subdomain, namespace, _ = parts
    try:
        svc = client.get(Service, subdomain, namespace=namespace)
    except ApiError:
        return None
    if svc.spec is None or svc.spec.clusterIP != "None":
        return None
    for pod in client.list(Pod, namespace=namespace):
        spec, status = pod.spec, pod.status
        if spec and spec.hostname == host and spec.subdomain == subdomain and status and status.podIP:
            return str(status.podIP)
    return None
