"""A fake of RunPod's GraphQL API on 127.0.0.1, from RunPod's documented shapes:

- https://docs.runpod.io/sdks/graphql/manage-pods: ``POST /graphql`` with ``{"query": ...}``;
  ``podFindAndDeployOnDemand`` and ``podRentInterruptable`` (``bidPerGpu``) answer the pod,
  ``podTerminate`` answers null, ``pod(input: {podId})`` and ``myself { pods }`` the pods with
  ``desiredStatus``, ``lastStatusChange``, ``podType``, ``env`` and ``runtime.ports``
  (``ip``, ``isIpPublic``, ``privatePort``, ``publicPort``; runtime null while the container
  starts), ``gpuTypes`` the GPU types with ``securePrice``/``communityPrice``,
  ``secureSpotPrice``/``communitySpotPrice`` and ``lowestPrice``;
- errors as GraphQL answers them, HTTP 200 with ``{"errors": [{"message", "path"}]}``; the
  stock-out message RunPod prints; a bad key: HTTP 401 (the official client's
  runpod/api/graphql.py checks exactly that); ``Authorization: Bearer <key>`` as the client sends.

- network volumes (https://docs.runpod.io/storage/network-volumes; the REST reference's fields,
  https://docs.runpod.io/api-reference/network-volumes/POST/networkvolumes): ``myself {
  networkVolumes { id name size dataCenterId } }``, ``createNetworkVolume(input: {name, size,
  dataCenterId})`` (size 1-4000 GB), ``deleteNetworkVolume(input: {id})`` (refused while a pod
  uses the volume); a deploy's ``networkVolumeId`` (Secure Cloud only, in the volume's data
  center, ``dataCenterId``) mounted at ``volumeMountPath``.

- registry auths (private images): ``saveRegistryAuth(input: {name, username, password}) { id name }``
  and ``updateRegistryAuth(input: {id, username, password})`` as the official client sends them
  (runpod/api/mutations/container_register_auth.py), ``myself { containerRegistryCreds { id name } }``
  (a password is never answered back), and a deploy's ``containerRegistryAuthId``
  (https://graphql-spec.runpod.io/, ``PodFindAndDeployOnDemandInput``; the REST reference,
  https://docs.runpod.io/api-reference/pods/POST/pods). A private image (``private_images``: image
  -> the user and password its registry takes) deployed without a matching auth is accepted, as
  RunPod accepts it, but its container never starts (RunPod retries the pull): no runtime, no port;
  the image lands in ``pull_denied``.

The pod side, for played pods: ``write``/``read`` a path in a pod as its job would; a path under
the pod's ``volumeMountPath`` lands on its network volume (``FakeVolume.files``), which outlives
the pod.

What a market does, injectable: ``throttle(n, retry_after)`` (HTTP 429 with ``Retry-After``),
``out_of_stock(gpu, cloud, interruptible)``, ``reclaim(pod)`` (an interruptible pod outbid and
stopped: EXITED, "Exited by Runpod: <date>"), ``never_run`` (pods whose container never starts),
``http_error(n, status)``. It is not a GraphQL engine: it picks the operation by its root field and
reads the variables. ``sshd_factory(pod_id, env) -> port``, if given, stands a real sshd in for
each pod's container, started from the pod's env as the pod's start command would (host key,
login key): the SSH runner then reaches it at 127.0.0.1 and that port.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "rpa_TESTKEY0123456789"
NO_CAPACITY = ("There are no longer any instances available with the requested specifications. "
               "Please refresh and try again.")

GPU_TYPES: list[dict[str, Any]] = [
    {"id": "NVIDIA GeForce RTX 4090", "displayName": "RTX 4090", "memoryInGb": 24, "maxGpuCount": 8,
     "secureCloud": True, "communityCloud": True, "securePrice": 0.69, "communityPrice": 0.34,
     "secureSpotPrice": 0.35, "communitySpotPrice": 0.2, "lowestPrice": {"minVcpu": 6, "minMemory": 41,
                                                                           "stockStatus": "High"}},
    {"id": "NVIDIA H100 80GB HBM3", "displayName": "H100 SXM", "memoryInGb": 80, "maxGpuCount": 8,
     "secureCloud": True, "communityCloud": False, "securePrice": 2.69, "communityPrice": None,
     "secureSpotPrice": 1.75, "communitySpotPrice": None, "lowestPrice": {"minVcpu": 20, "minMemory": 125,
                                                                            "stockStatus": "Medium"}},
    {"id": "NVIDIA GeForce RTX 2080", "displayName": "RTX 2080", "memoryInGb": 8, "maxGpuCount": 1,
     "secureCloud": False, "communityCloud": True, "securePrice": None, "communityPrice": 0.1,
     "secureSpotPrice": None, "communitySpotPrice": 0.05, "lowestPrice": {"minVcpu": 2, "minMemory": 8}},
]


def js_date(t: datetime) -> str:
    """``Date.toString()`` as RunPod's ``lastStatusChange`` carries it."""
    return t.astimezone(UTC).strftime("%a %b %d %Y %H:%M:%S GMT+0000 (Coordinated Universal Time)")


@dataclass
class Pod:
    id: str
    body: dict[str, Any]
    interruptible: bool
    status: str = "RUNNING"
    changed: str = ""
    port: int | None = None

    def view(self) -> dict[str, Any]:
        b = self.body
        runtime = None
        if self.status == "RUNNING" and self.port is not None:
            runtime = {"uptimeInSeconds": 1, "ports": [
                {"ip": "127.0.0.1", "isIpPublic": True, "privatePort": 22, "publicPort": self.port, "type": "tcp"}]}
        return {
            "id": self.id, "name": b.get("name"), "desiredStatus": self.status, "lastStatusChange": self.changed,
            "podType": "INTERRUPTABLE" if self.interruptible else "RESERVED", "costPerHr": 0.5,
            "gpuCount": b.get("gpuCount"), "vcpuCount": 6, "memoryInGb": 41, "imageName": b.get("imageName"),
            "env": [f"{e['key']}={e['value']}" for e in b.get("env") or ()], "machineId": "m1", "uptimeSeconds": 1,
            "runtime": runtime, "machine": {"gpuDisplayName": b.get("gpuTypeId")},
        }


@dataclass
class FakeVolume:
    id: str
    name: str
    size: int
    data_center: str
    files: dict[str, bytes] = field(default_factory=dict)

    def view(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "size": self.size, "dataCenterId": self.data_center}


@dataclass
class FakeRunpod:
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    sshd_factory: Callable[[str, dict[str, str]], int] | None = None
    gpu_types: list[dict[str, Any]] = field(default_factory=lambda: [dict(t) for t in GPU_TYPES])
    pods: dict[str, Pod] = field(default_factory=dict)
    never_run: bool = False
    calls: list[str] = field(default_factory=list)  # root field of each request, in order
    deployed_images: list[str] = field(default_factory=list)  # imageName of each pod deployed, in order
    volumes: dict[str, FakeVolume] = field(default_factory=dict)
    private_images: dict[str, tuple[str, str]] = field(default_factory=dict)  # image -> (user, password)
    registry_auths: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> name, username, password
    pull_denied: list[str] = field(default_factory=list)  # private images deployed without their login

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self._stock_out: set[tuple[str, str, bool]] = set()
        self._throttle: list[tuple[int, str | None]] = []  # (status, Retry-After) per coming request
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> FakeRunpod:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- injections --------------------------------------------------------------------------
    def throttle(self, n: int = 1, retry_after: str | None = "1") -> None:
        with self.lock:
            self._throttle += [(429, retry_after)] * n

    def http_error(self, n: int = 1, status: int = 503) -> None:
        with self.lock:
            self._throttle += [(status, None)] * n

    def out_of_stock(self, gpu_type_id: str, cloud: str, interruptible: bool, out: bool = True) -> None:
        with self.lock:
            (self._stock_out.add if out else self._stock_out.discard)((gpu_type_id, cloud.upper(), interruptible))

    def reclaim(self, pod_id: str) -> datetime:
        """The market takes an interruptible pod back: stopped, its GPUs rented to a higher bid."""
        with self.lock:
            pod = self.pods[pod_id]
            assert pod.interruptible, "only interruptible pods are reclaimed"
            at = self.now()
            pod.status, pod.changed, pod.port = "EXITED", f"Exited by Runpod: {js_date(at)}", None
            return at

    def _on_volume(self, pod_id: str, path: str) -> tuple[FakeVolume, str]:
        with self.lock:
            body = self.pods[pod_id].body
            vol, mount = self.volumes.get(str(body.get("networkVolumeId"))), str(body.get("volumeMountPath") or "")
            if vol is None or not path.startswith(mount.rstrip("/") + "/"):
                raise FileNotFoundError(f"{path} is on no network volume of pod {pod_id}")
            return vol, path[len(mount.rstrip("/")) + 1:]

    def write(self, pod_id: str, path: str, data: bytes) -> None:
        vol, name = self._on_volume(pod_id, path)
        vol.files[name] = data

    def read(self, pod_id: str, path: str) -> bytes | None:
        vol, name = self._on_volume(pod_id, path)
        return vol.files.get(name)

    def live(self) -> list[Pod]:
        with self.lock:
            return [p for p in self.pods.values() if p.status == "RUNNING"]

    def add_unmanaged(self, name: str = "someone-elses") -> str:
        with self.lock:
            pod = Pod(_pod_id(), {"name": name, "gpuTypeId": "NVIDIA GeForce RTX 4090", "gpuCount": 1, "env": []},
                      False, changed=f"Rented by User: {js_date(self.now())}", port=2222)
            self.pods[pod.id] = pod
            return pod.id

    # -- the API -----------------------------------------------------------------------------
    def answer(self, query: str, variables: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        m = re.search(r"\b(podFindAndDeployOnDemand|podRentInterruptable|podTerminate|gpuTypes|pod|myself"
                      r"|createNetworkVolume|deleteNetworkVolume|saveRegistryAuth|updateRegistryAuth)\b(?=\s*[({])",
                      query)
        root = m.group(1) if m else ""
        with self.lock:
            self.calls.append(root)
            if root in ("podFindAndDeployOnDemand", "podRentInterruptable"):
                return self._deploy(root, variables.get("input") or {})
            if root == "podTerminate":
                pod_id = (variables.get("input") or {}).get("podId")
                if self.pods.pop(pod_id, None) is None:
                    return 200, {"errors": [{"message": "Pod not found", "path": ["podTerminate"]}],
                                 "data": {"podTerminate": None}}
                return 200, {"data": {"podTerminate": None}}
            if root == "pod":
                pod = self.pods.get((variables.get("input") or {}).get("podId"))
                return 200, {"data": {"pod": pod.view() if pod else None}}
            if root in ("createNetworkVolume", "deleteNetworkVolume"):
                return self._volume_call(root, variables.get("input") or {})
            if root in ("saveRegistryAuth", "updateRegistryAuth"):
                return self._registry_call(root, variables.get("input") or {})
            if root == "gpuTypes":
                return 200, {"data": {"gpuTypes": self.gpu_types}}
            if root == "myself":
                if "containerRegistryCreds" in query:
                    creds = [{"id": i, "name": a["name"]} for i, a in self.registry_auths.items()]
                    return 200, {"data": {"myself": {"containerRegistryCreds": creds}}}
                if "networkVolumes" in query:
                    return 200, {"data": {"myself": {"networkVolumes": [v.view() for v in self.volumes.values()]}}}
                if "pods" in query:
                    return 200, {"data": {"myself": {"pods": [p.view() for p in self.pods.values()]}}}
                return 200, {"data": {"myself": {"id": "user_1"}}}
        return 400, {"errors": [{"message": f"Cannot query {query[:60]!r}"}]}

    def _volume_call(self, root: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if root == "createNetworkVolume":
            size, dc = body.get("size"), body.get("dataCenterId")
            if not isinstance(size, int) or not 1 <= size <= 4000 or not dc or not body.get("name"):
                return 200, {"errors": [{"message": "size must be 1-4000 GB; name and dataCenterId are required",
                                         "path": [root]}], "data": {root: None}}
            vol = FakeVolume(secrets.token_hex(5), str(body["name"]), size, str(dc))
            self.volumes[vol.id] = vol
            return 200, {"data": {root: vol.view()}}
        vol = self.volumes.get(str(body.get("id")))
        if vol is None:
            return 200, {"errors": [{"message": "Network volume not found", "path": [root]}], "data": {root: None}}
        if any(p.body.get("networkVolumeId") == vol.id for p in self.pods.values()):
            return 200, {"errors": [{"message": "Network volume is in use by a pod", "path": [root]}],
                         "data": {root: None}}
        del self.volumes[vol.id]
        return 200, {"data": {root: None}}

    def _registry_call(self, root: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        user, password = body.get("username"), body.get("password")
        if not user or not password:
            return 200, {"errors": [{"message": "username and password are required", "path": [root]}],
                         "data": {root: None}}
        if root == "saveRegistryAuth":
            name = str(body.get("name") or "")
            if not name or any(a["name"] == name for a in self.registry_auths.values()):
                return 200, {"errors": [{"message": "Registry auth name must be unique", "path": [root]}],
                             "data": {root: None}}
            auth_id = secrets.token_hex(6)
            self.registry_auths[auth_id] = {"name": name, "username": str(user), "password": str(password)}
        else:
            auth_id = str(body.get("id"))
            if auth_id not in self.registry_auths:
                return 200, {"errors": [{"message": "Registry auth not found", "path": [root]}], "data": {root: None}}
            self.registry_auths[auth_id] |= {"username": str(user), "password": str(password)}
        return 200, {"data": {root: {"id": auth_id, "name": self.registry_auths[auth_id]["name"]}}}

    def _pulls(self, body: dict[str, Any]) -> bool:
        """Whether RunPod can pull the pod's image: public, or its login named by the deploy."""
        image = str(body.get("imageName"))
        if image not in self.private_images:
            return True
        auth = self.registry_auths.get(str(body.get("containerRegistryAuthId")))
        if auth is not None and (auth["username"], auth["password"]) == self.private_images[image]:
            return True
        self.pull_denied.append(image)
        return False

    def _deploy(self, root: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        spot = root == "podRentInterruptable"
        gpu = body.get("gpuTypeId")
        cloud = str(body.get("cloudType", "ALL"))
        t = next((t for t in self.gpu_types if t["id"] == gpu), None)
        if t is None:
            return 200, {"errors": [{"message": f"GPU type {gpu} is not valid", "path": [root]}], "data": None}
        if spot and float(body.get("bidPerGpu") or 0) < float(t.get(f"{cloud.lower()}SpotPrice") or 1e9):
            return 200, {"errors": [{"message": "Your bid price is too low for this GPU type", "path": [root]}]}
        vid = body.get("networkVolumeId")
        if vid is not None:
            vol = self.volumes.get(str(vid))
            if vol is None or cloud != "SECURE" or body.get("dataCenterId") != vol.data_center:
                return 200, {"errors": [{"message": f"network volume {vid} cannot be used here (a Secure Cloud pod "
                                         "in the volume's data center)", "path": [root]}], "data": {root: None}}
        if (gpu, cloud, spot) in self._stock_out:
            return 200, {"errors": [{"message": NO_CAPACITY, "path": [root]}], "data": {root: None}}
        pod = Pod(_pod_id(), dict(body), spot, changed=f"Rented by User: {js_date(self.now())}")
        self.deployed_images.append(str(body.get("imageName")))
        if not self.never_run and self._pulls(body):
            env = {e["key"]: e["value"] for e in body.get("env") or ()}
            pod.port = self.sshd_factory(pod.id, env) if self.sshd_factory else 40000 + len(self.pods)
        self.pods[pod.id] = pod
        return 200, {"data": {root: pod.view()}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with fake.lock:
                    forced = fake._throttle.pop(0) if fake._throttle else None
                if self.path.split("?")[0] != "/graphql":
                    return self._send(404, {"errors": [{"message": "not found"}]})
                if forced is not None:
                    status, retry_after = forced
                    return self._send(status, {"errors": [{"message": "Too Many Requests" if status == 429
                                                           else "Service Unavailable"}]},
                                      {"Retry-After": retry_after} if retry_after else {})
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self._send(401, {"errors": [{"message": "Unauthorized"}]})
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._send(400, {"errors": [{"message": "Must provide query string."}]})
                status, answer = fake.answer(str(body.get("query", "")), body.get("variables") or {})
                self._send(status, answer)

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _pod_id() -> str:
    return secrets.token_hex(7)[:14]
