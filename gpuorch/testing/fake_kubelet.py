"""A fake kubelet (and scheduler) for ``KubeServer``: pods on fake GPU nodes run as local processes.

What it does, each as the named part of Kubernetes does it (https://kubernetes.io/docs/concepts/):

- **nodes** (``FakeNode``): Node objects with GPUs in ``status.allocatable`` and the GPU feature
  discovery labels (``nvidia.com/gpu.product``, ``nvidia.com/gpu.memory`` in MiB,
  ``nvidia.com/gpu.count``; AMD's ``amd.com/gpu``), a zone and a ``Ready`` condition;
- **scheduling** ("Scheduling Framework", "Pod Priority and Preemption"): a pending pod is bound to
  a node whose labels satisfy its ``nodeSelector`` and required node affinity while the node's
  allocatable GPUs last; otherwise it stays ``Pending`` with ``PodScheduled=False``, reason
  ``Unschedulable``. A pod whose ``priorityClassName`` (``priority_classes``) outranks running
  pods preempts them: ``DisruptionTarget`` reason ``PreemptionByScheduler``, then a graceful delete;
- **running** ("Pod Lifecycle"): a bound pod's container command runs as a local process group in a
  sandbox directory standing for the container's working directory, with the container's env;
  an image in ``unpullable`` never starts (``ErrImagePull`` / ``ImagePullBackOff`` with the
  registry's message); a container that exits ends the pod (``restartPolicy: Never``);
- **termination** ("Termination of Pods"): once a pod has a ``deletionTimestamp`` (a delete, an
  eviction, a drain), its main process gets SIGTERM, and the process group SIGKILL after
  ``deletionGracePeriodSeconds``; the pod's final status is written, then it is deleted with grace
  0 (its finalizers, if any, keep it as a tombstone until their owner removes them);
- **Kueue's pod admission** (``fake_kueue.py``): a pod labelled with a LocalQueue waits behind
  Kueue's scheduling gate (``SchedulingGated``) until ``admit(name, namespace)``;
- **exec**: commands run in the pod's sandbox; **DNS**: ``resolve(name)`` (``fake_dns.py``);
  **PersistentVolumeClaims**: directories, mounted as symlinks (``fake_storage.py``);
- **failures**: ``drain(node)`` cordons and evicts through the Eviction API; ``lose_node(node)``
  kills its pods' processes without a signal and turns the node ``Ready=Unknown`` (the kubelet
  stopped posting status: nothing on that node is updated again). The sync loop lists pods every
  ``tick_s`` (a kubelet's periodic sync) in a thread of its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuorch.testing.fake_dns import resolve
from gpuorch.testing.fake_kueue import admit, gated
from gpuorch.testing.fake_storage import mount_claims
from gpuorch.testing.kmock_ext import SYSTEM_TOKEN, KubeServer, now_iso

TERMINAL = ("Succeeded", "Failed")


@dataclass
class FakeNode:
    name: str
    gpus: int = 4
    product: str = "NVIDIA-A100-SXM4-80GB"
    memory_mib: int = 81920
    resource: str = "nvidia.com/gpu"
    zone: str = "zone-a"
    labels: dict[str, str] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        vendor = self.resource.split("/")[0]
        labels = {"kubernetes.io/hostname": self.name, "topology.kubernetes.io/zone": self.zone,
                  f"{vendor}/gpu.product": self.product, f"{vendor}/gpu.memory": str(self.memory_mib),
                  f"{vendor}/gpu.count": str(self.gpus), **self.labels}
        amounts = {self.resource: str(self.gpus), "cpu": "32", "memory": "256Gi", "pods": "110"}
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self.name, "labels": labels},
                "spec": {}, "status": {"capacity": amounts, "allocatable": amounts, "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": now_iso()}]}}


@dataclass
class _Container:
    proc: subprocess.Popen[bytes]
    sandbox: Path
    env: dict[str, str]
    term_at: float | None = None
    kill_at: float | None = None


def _requests(pod: dict[str, Any], resource: str) -> int:
    total = 0
    for c in pod.get("spec", {}).get("containers") or []:
        res = c.get("resources") or {}
        total += int((res.get("limits") or res.get("requests") or {}).get(resource, 0))
    return total


def _affinity_ok(pod: dict[str, Any], labels: dict[str, str]) -> bool:
    spec = pod.get("spec", {})
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or []

    def ok(e: dict[str, Any]) -> bool:
        key, values = e["key"], e.get("values") or []
        return {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}.get(e["operator"], False)

    return not terms or any(all(ok(e) for e in t.get("matchExpressions") or []) for t in terms)


class FakeKubelet:
    """``with FakeKubelet(server, root, [FakeNode("gpu-1")]) as kubelet: ...``; see the module docstring."""

    def __init__(self, server: KubeServer, root: Path, nodes: Iterable[FakeNode], *, tick_s: float = 0.05,
                 priority_classes: dict[str, int] | None = None) -> None:
        from lightkube import Client, KubeConfig

        self.server, self.root, self.tick_s = server, Path(root), tick_s
        self.nodes = {n.name: n for n in nodes}
        self.priority_classes = dict(priority_classes or {})
        self.unpullable: dict[str, str] = {}  # image -> the registry's message
        self.lost: set[str] = set()
        self.admitted: set[tuple[str, str]] = set()  # (namespace, Workload) Kueue admitted (fake_kueue.workload)
        self.client = Client(config=KubeConfig.from_dict(server.kubeconfig(token=SYSTEM_TOKEN)), namespace="default")
        self._containers: dict[tuple[str, str, str], _Container] = {}  # (namespace, name, uid)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fake-kubelet", daemon=True)
        self.errors: list[str] = []
        self.mount_links = False  # fake_storage: mount a claim as a symlink at its mountPath

    # -- life ------------------------------------------------------------------------------------
    def __enter__(self) -> FakeKubelet:
        from lightkube.resources.core_v1 import Node

        for node in self.nodes.values():
            self.client.create(Node.from_dict(node.manifest()))  # type: ignore[call-overload]
        self.server.emulator.exec_handler = self.exec
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.server.emulator.exec_handler = None
        with self._lock:
            for c in self._containers.values():
                self._kill(c)
            self._containers.clear()
        self.client.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as e:  # a kubelet keeps syncing; tests read ``errors``
                self.errors.append(repr(e))
            self._stop.wait(self.tick_s)

    # -- knobs -----------------------------------------------------------------------------------
    def drain(self, node: str) -> None:
        """``kubectl drain``: cordon the node, then evict each of its pods (graceful)."""
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.core_v1 import Node, Pod

        self.client.patch(Node, node, {"spec": {"unschedulable": True}})
        for pod in self._pods():
            meta = pod["metadata"]
            if pod.get("spec", {}).get("nodeName") == node and meta.get("name"):
                with contextlib.suppress(Exception):
                    eviction = Pod.Eviction(metadata=ObjectMeta(name=meta["name"], namespace=meta["namespace"]))
                    self.client.create(eviction, name=meta["name"], namespace=meta["namespace"])

    def lose_node(self, node: str) -> None:
        """The node dies at once: its processes are killed without notice, its kubelet goes silent."""
        from lightkube.resources.core_v1 import Node

        self.lost.add(node)
        with self._lock:
            for key, c in list(self._containers.items()):
                if c.env.get("GPUORCH_FAKE_NODE") == node:
                    self._kill(c)
                    del self._containers[key]
        self.client.patch(Node.Status, node, {"status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
             "message": "Kubelet stopped posting node status.", "lastTransitionTime": now_iso()}]}})

    def admit(self, name: str, namespace: str = "default") -> None:
        """Kueue admits the pod's Workload (its pod group: every pod of it at once): the next sync
        lifts their gates and schedules them (``fake_kueue.admit``)."""
        admit(self.client, self.admitted, name, namespace)

    def sandbox(self, namespace: str, name: str) -> Path | None:
        """The running pod's sandbox directory (its container's working directory)."""
        with self._lock:
            for (ns, n, _), c in self._containers.items():
                if (ns, n) == (namespace, name):
                    return c.sandbox
        return None

    def resolve(self, name: str) -> str | None:
        return resolve(self.client, name)  # the cluster DNS's answer for ``name`` (fake_dns.py)

    # -- exec ------------------------------------------------------------------------------------
    def exec(self, namespace: str, name: str, container: str | None, argv: list[str],
             stdin: bytes) -> tuple[int, bytes, bytes] | None:
        with self._lock:
            found = [c for (ns, n, _), c in self._containers.items()
                     if (ns, n) == (namespace, name) and c.proc.poll() is None]
        if not found or not argv:
            return None
        c = found[0]
        try:
            done = subprocess.run(argv, cwd=c.sandbox, env=c.env, input=stdin, capture_output=True, timeout=120,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return 126, b"", str(e).encode()
        return done.returncode, done.stdout, done.stderr

    # -- the sync loop ---------------------------------------------------------------------------
    def _pods(self) -> list[dict[str, Any]]:
        from lightkube.resources.core_v1 import Pod

        return [p.to_dict() for p in self.client.list(Pod, namespace="*")]

    def sync(self) -> None:
        admitted = frozenset(self.admitted)  # one look at Kueue's admissions: a Workload's pods start together
        pods = self._pods()
        live = {(p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"].get("uid", "")): p for p in pods}
        with self._lock:  # deleted outright (grace 0, or an unbound pod): nothing to wait for
            for key in [k for k in self._containers if k not in live]:
                self._kill(self._containers.pop(key))
        for key, pod in live.items():
            node = pod.get("spec", {}).get("nodeName")
            if node in self.lost:
                continue
            if pod["metadata"].get("deletionTimestamp"):
                self._terminate(key, pod)
            elif not node:
                if not gated(self.client, admitted, pod, self._status):
                    self._schedule(pod, pods)
            elif node in self.nodes and (pod.get("status") or {}).get("phase") not in TERMINAL:
                self._run(key, pod)

    def _held(self, node: str, pods: list[dict[str, Any]], resource: str) -> list[dict[str, Any]]:
        return [p for p in pods if p.get("spec", {}).get("nodeName") == node
                and (p.get("status") or {}).get("phase") not in TERMINAL and _requests(p, resource)]

    def _priority(self, pod: dict[str, Any]) -> int:
        spec = pod.get("spec", {})
        return int(spec.get("priority") or self.priority_classes.get(spec.get("priorityClassName") or "", 0))

    def _schedule(self, pod: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        from lightkube.resources.core_v1 import Pod

        meta = pod["metadata"]
        candidates = []
        for node in self.nodes.values():
            want = _requests(pod, node.resource)
            ok = node.name not in self.lost and _affinity_ok(pod, node.manifest()["metadata"]["labels"]) and \
                not (node.name in self._cordoned() or want > node.gpus)
            if ok:
                held = self._held(node.name, pods, node.resource)
                free = node.gpus - sum(_requests(p, node.resource) for p in held)
                candidates.append((node, want, free, held))
        for node, want, free, _ in candidates:
            if want <= free:
                self.client.patch(Pod, meta["name"], {"spec": {"nodeName": node.name}}, namespace=meta["namespace"])
                pod["spec"]["nodeName"] = node.name  # this sync's later pods see it held
                self._status(pod, {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": now_iso()}]})
                return
        mine = self._priority(pod)
        for node, want, free, held in candidates:  # preemption: lower-priority pods make room
            victims = sorted((p for p in held if self._priority(p) < mine), key=self._priority)
            chosen, room = [], free
            for v in victims:
                if room >= want:
                    break
                chosen.append(v)
                room += _requests(v, node.resource)
            if room >= want and chosen:
                for v in chosen:
                    self._preempt(v)
                return
        message = f"0/{len(self.nodes)} nodes are available: {len(self.nodes)} Insufficient {self._resource_of(pod)}."
        if [c.get("message") for c in (pod.get("status") or {}).get("conditions") or []] != [message]:
            self._status(pod, {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                 "lastTransitionTime": now_iso()}]})

    def _resource_of(self, pod: dict[str, Any]) -> str:
        return next((n.resource for n in self.nodes.values() if _requests(pod, n.resource)), "nvidia.com/gpu")

    def _cordoned(self) -> set[str]:
        from lightkube.resources.core_v1 import Node

        return {n.metadata.name for n in self.client.list(Node)
                if n.spec and n.spec.unschedulable and n.metadata and n.metadata.name}

    def _preempt(self, victim: dict[str, Any]) -> None:
        from lightkube.resources.core_v1 import Pod

        meta = victim["metadata"]
        conditions = [c for c in (victim.get("status") or {}).get("conditions") or []
                      if c["type"] != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                           "message": "Kubernetes default scheduler: preempting to accommodate a higher priority pod",
                           "lastTransitionTime": now_iso()})
        self._status(victim, {"conditions": conditions})
        with contextlib.suppress(Exception):
            self.client.delete(Pod, meta["name"], namespace=meta["namespace"])

    def _run(self, key: tuple[str, str, str], pod: dict[str, Any]) -> None:
        with self._lock:
            c = self._containers.get(key)
        if c is not None:
            code = c.proc.poll()
            if code is not None:  # the container exited by itself: restartPolicy Never
                phase = "Succeeded" if code == 0 else "Failed"
                self._status(pod, {"phase": phase, "containerStatuses": [self._terminated(pod, code)]})
            return
        spec = pod["spec"]
        container = spec["containers"][0]
        image = container.get("image", "")
        if image in self.unpullable:
            self._status(pod, {"phase": "Pending", "containerStatuses": [{
                "name": container["name"], "image": image, "imageID": "", "ready": False, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff",
                                      "message": f'Back-off pulling image "{image}": {self.unpullable[image]}'}}}]})
            return
        ns, name, uid = key
        sandbox = self.root / ns / f"{name}-{uid[:8]}"
        sandbox.mkdir(parents=True, exist_ok=True)
        self.errors += mount_claims(self.root, pod, self.mount_links)
        env = {**os.environ, "GPUORCH_FAKE_NODE": spec["nodeName"], "HOSTNAME": spec.get("hostname") or name}
        for e in container.get("env") or []:
            ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            env[e["name"]] = {"metadata.name": name, "metadata.namespace": ns}.get(ref or "", e.get("value") or "")
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        with open(sandbox / "container.log", "ab") as log:
            proc = subprocess.Popen(argv, cwd=sandbox, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        with self._lock:
            self._containers[key] = _Container(proc, sandbox, env)
        running = {"name": container["name"], "image": image, "imageID": "", "ready": True, "restartCount": 0,
                   "state": {"running": {"startedAt": now_iso()}}}
        scheduled = next((c.get("lastTransitionTime") for c in (pod.get("status") or {}).get("conditions") or []
                          if c.get("type") == "PodScheduled" and c.get("status") == "True"), None) or now_iso()
        self._status(pod, {"phase": "Running", "podIP": "127.0.0.1", "hostIP": "127.0.0.1", "startTime": now_iso(),
                           "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled},
                                          {"type": "Ready", "status": "True"}], "containerStatuses": [running]})

    def _terminate(self, key: tuple[str, str, str], pod: dict[str, Any]) -> None:
        from lightkube.resources.core_v1 import Pod

        with self._lock:
            c = self._containers.get(key)
        now = time.monotonic()
        if c is not None and c.proc.poll() is None:
            if c.term_at is None:
                grace = float(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
                c.term_at, c.kill_at = now, now + grace
                with contextlib.suppress(ProcessLookupError):
                    c.proc.send_signal(signal.SIGTERM)  # the container's main process, as the runtime does
            if now < (c.kill_at or now):
                return
        if (pod.get("status") or {}).get("phase") not in TERMINAL or c is not None:
            code = None if c is None else c.proc.poll()
            if c is not None:
                self._kill(c)
                with self._lock:
                    self._containers.pop(key, None)
            phase = "Succeeded" if code == 0 else "Failed"
            ended = self._terminated(pod, 137 if code is None else code)
            self._status(pod, {"phase": phase, "containerStatuses": [ended]})
        if pod["metadata"].get("deletionGracePeriodSeconds") != 0:
            meta = pod["metadata"]
            with contextlib.suppress(Exception):
                self.client.delete(Pod, meta["name"], namespace=meta["namespace"], grace_period=0)

    def _terminated(self, pod: dict[str, Any], code: int) -> dict[str, Any]:
        container = pod["spec"]["containers"][0]
        return {"name": container["name"], "image": container.get("image", ""), "imageID": "", "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": code if code >= 0 else 128 - code,
                                         "reason": "Completed" if code == 0 else "Error", "finishedAt": now_iso()}}}

    def _status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        from lightkube.resources.core_v1 import Pod

        meta = pod["metadata"]
        with contextlib.suppress(Exception):  # gone meanwhile
            self.client.patch(Pod.Status, meta["name"], {"status": status}, namespace=meta["namespace"])

    @staticmethod
    def _kill(c: _Container) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(5)
