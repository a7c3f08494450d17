"""The fake kubelet's PersistentVolumeClaim mounts: a claim is a directory, a mount is a symlink.

A claim ``c`` of namespace ``ns`` keeps its files in ``<kubelet root>/volumes/<ns>/<c>`` for as
long as the test runs (a bound PersistentVolume whose reclaim policy keeps it), so what one pod
wrote there the next pod that mounts the claim reads ("Persistent Volumes": the claim outlives
its pods). A fake pod's processes share this host's filesystem, so a ``volumeMount`` of the claim
at ``mountPath`` is done, when ``FakeKubelet.mount_links`` is set, as a symlink at ``mountPath``
(a path the test owns, under its temporary directory: nothing outside it is ever replaced; an
existing directory or file there is an error the kubelet records). Without it, tests read and
write the claim through ``claim_dir`` (the test plays the container's view of its mounts).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def claim_dir(root: Path, namespace: str, claim: str) -> Path:
    """Where the files of claim ``claim`` in ``namespace`` live (created on first use)."""
    path = Path(root) / "volumes" / namespace / claim
    path.mkdir(parents=True, exist_ok=True)
    return path


def mounts(pod: dict[str, Any]) -> list[tuple[str, str]]:
    """(claim, mountPath) of each PersistentVolumeClaim the pod's first container mounts."""
    spec = pod.get("spec") or {}
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes") or []
              if (v.get("persistentVolumeClaim") or {}).get("claimName")}
    container = (spec.get("containers") or [{}])[0]
    return [(claims[m["name"]], m["mountPath"]) for m in container.get("volumeMounts") or [] if m.get("name") in claims]


def mount_claims(root: Path, pod: dict[str, Any], links: bool) -> list[str]:
    """Mount the pod's claims (see the module docstring); the errors, if any."""
    errors = []
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    for claim, path in mounts(pod):
        source = claim_dir(root, namespace, claim)
        if not links:
            continue
        target = Path(path)
        if target.is_symlink():
            target.unlink()
        elif target.exists():
            errors.append(f"{path}: exists and is not a mount link; mount a claim at a path of the test's own")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(source, target)
    return errors
