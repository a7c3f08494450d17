"""A fake Lambda Cloud API on 127.0.0.1 for the Lambda adapter's tests (a stdlib HTTP server).

Built from the Lambda Cloud API reference, https://docs-api.lambda.ai/api/cloud (v1; the same
endpoints at https://cloud.lambdalabs.com/api/v1): every answer is ``{"data": ...}``, every error
``{"error": {"code", "message", "suggestion"}}``, with the codes the reference lists
(``global/invalid-api-key`` 401, ``global/object-does-not-exist`` 404,
``global/invalid-parameters`` 400, ``global/quota-exceeded``,
``instance-operations/launch/insufficient-capacity``). Endpoints: ``GET /instance-types``
(``price_cents_per_hour``, ``specs``, ``regions_with_capacity_available``), ``GET /instances``,
``GET /instances/{id}``, ``POST /instance-operations/launch`` (``region_name``,
``instance_type_name``, ``ssh_key_names`` -- exactly one --, ``quantity``, ``name`` -- at most
64 characters --, ``user_data``) answering ``instance_ids``, ``POST
/instance-operations/terminate`` answering ``terminated_instances``, ``GET``/``POST /ssh-keys``.
Filesystems (the reference's "Filesystems"; docs.lambda.ai/public-cloud/filesystems): ``GET
/file-systems`` (``id``, ``name``, ``mount_point`` /lambda/nfs/<name>, ``region``, ``is_in_use``,
``bytes_used``), ``POST /filesystems`` (``name``: a letter, then letters, digits and hyphens, at
most 60, unique in the account; ``region``), ``DELETE /filesystems/{id}`` (``deleted_ids``;
refused while an instance uses it), and a launch's ``file_system_names`` (each in the launch's
region, else ``instance-operations/launch/file-system-in-wrong-region``). Authentication:
``Authorization: Bearer <key>``.

The instance side, for played instances: ``write``/``read`` a path on an instance as its job
would, through the links its cloud-init ``bootcmd`` made (``ln -sfn``) and the NFS mounts of its
filesystems (``/lambda/nfs/<name>``): what lands on a filesystem is kept with it
(``FakeFileSystem.files``) and outlives the instance.

What a test can make happen: a 429 with ``Retry-After`` on the next requests (the reference's
rate limits: about 1 request/s, 1 launch per 12 s), a market out of capacity, an instance that
never leaves ``booting``, and time (``advance``): an instance boots ``boot_s`` after its launch
and is gone ``end_s`` after its termination (Lambda lists ``terminating``, then forgets it).
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "secret_gpuorch-test_0123456789abcdef"
REGIONS = {"us-east-1": "Virginia, USA", "us-west-1": "California, USA", "us-south-1": "Texas, USA"}
# name: (description, cents per hour, vCPUs, RAM GiB, storage GiB, GPUs, regions)
TYPES: dict[str, tuple[str, int, int, int, int, int, tuple[str, ...]]] = {
    "gpu_1x_a10": ("1x A10 (24 GB PCIe)", 75, 30, 200, 1400, 1, ("us-east-1", "us-west-1")),
    "gpu_1x_a100_sxm4": ("1x A100 (40 GB SXM4)", 129, 30, 200, 512, 1, ("us-east-1",)),
    "gpu_1x_a6000": ("1x RTX A6000 (48 GB)", 80, 14, 100, 512, 1, ("us-west-1", "us-south-1")),
    "gpu_8x_h100_sxm5": ("8x H100 (80 GB SXM5)", 2392, 208, 1800, 22528, 8, ("us-south-1",)),
    "gpu_1x_rtx6000": ("1x RTX 6000 (24 GB)", 50, 14, 46, 512, 1, ("us-east-1",)),
}


@dataclass
class FakeInstance:
    id: str
    name: str | None
    region: str
    instance_type: str
    ssh_key_names: list[str]
    user_data: str | None
    born: float
    status: str = "booting"
    ended: float | None = None
    never_boots: bool = False
    file_system_names: list[str] = field(default_factory=list)


@dataclass
class FakeFileSystem:
    id: str
    name: str
    region: str
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class FakeLambda:
    boot_s: float = 1.0
    end_s: float = 1.0
    ip: str = "127.0.0.1"
    key: str = KEY
    clock: float = 0.0
    instances: dict[str, FakeInstance] = field(default_factory=dict)
    ssh_keys: dict[str, dict[str, str]] = field(default_factory=dict)
    no_capacity: set[tuple[str, str]] = field(default_factory=set)  # (instance type, region)
    never_boot: bool = False  # instances launched from now on stay booting
    quota: int | None = None  # most live instances
    throttled: int = 0  # the next N requests answer 429
    retry_after: int = 1
    # next answers: (HTTP status, code, path or None for any); a launch that fails with a 5xx here
    # fails after it launched (the answer is lost), as an upstream outage can.
    failing: list[tuple[int, str, str | None]] = field(default_factory=list)
    lost_launch: bool = False  # an injected 5xx on launch comes after the instance was made
    requests: list[tuple[str, str]] = field(default_factory=list)
    launches: list[dict[str, Any]] = field(default_factory=list)
    filesystems: dict[str, FakeFileSystem] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    # -- lifecycle and test controls ------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/api/v1"

    def start(self) -> FakeLambda:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.clock += seconds

    def refuse(self, instance_type: str, region: str) -> None:
        self.no_capacity.add((instance_type, region))

    def throttle(self, requests: int, retry_after: int = 1) -> None:
        self.throttled, self.retry_after = requests, retry_after

    def add_instance(self, name: str | None, instance_type: str = "gpu_1x_a10", region: str = "us-east-1") -> str:
        with self.lock:
            inst = FakeInstance(secrets.token_hex(16), name, region, instance_type, [], None, self.clock)
            self.instances[inst.id] = inst
            return inst.id

    def _resolve(self, instance_id: str, path: str) -> tuple[FakeFileSystem, str]:
        """The filesystem and file a path on a live instance lands on (its boot links followed)."""
        import yaml

        with self.lock:
            inst = self.instances[instance_id]
            doc = yaml.safe_load((inst.user_data or "").removeprefix("#cloud-config\n")) or {}
            for cmd in doc.get("bootcmd") or ():
                if isinstance(cmd, list) and cmd[:2] == ["ln", "-sfn"] and path.startswith(cmd[3] + "/"):
                    path = cmd[2] + path[len(cmd[3]):]
            for fs in self.filesystems.values():
                root = f"/lambda/nfs/{fs.name}/"
                if fs.name in inst.file_system_names and path.startswith(root):
                    return fs, path[len(root):]
            raise FileNotFoundError(f"{path} is on no filesystem of instance {instance_id}")

    def write(self, instance_id: str, path: str, data: bytes) -> None:
        fs, name = self._resolve(instance_id, path)
        fs.files[name] = data

    def read(self, instance_id: str, path: str) -> bytes | None:
        fs, name = self._resolve(instance_id, path)
        return fs.files.get(name)

    def lose(self, instance_id: str) -> None:
        """The host fails: Lambda ends the instance (terminating, then gone)."""
        with self.lock:
            inst = self.instances[instance_id]
            inst.status, inst.ended = "terminating", self.clock

    def live(self) -> list[FakeInstance]:
        with self.lock:
            self._tick()
            return [i for i in self.instances.values() if i.status in ("booting", "active", "unhealthy")]

    # -- the API ----------------------------------------------------------------------------
    def _tick(self) -> None:
        for i in list(self.instances.values()):
            if i.status == "booting" and not i.never_boots and self.clock - i.born >= self.boot_s:
                i.status = "active"
            if i.status == "terminating" and i.ended is not None and self.clock - i.ended >= self.end_s:
                del self.instances[i.id]

    def _view(self, i: FakeInstance) -> dict[str, Any]:
        desc, cents, vcpus, ram, disk, gpus, _ = TYPES[i.instance_type]
        view: dict[str, Any] = {
            "id": i.id, "name": i.name, "status": i.status, "ssh_key_names": i.ssh_key_names,
            "file_system_names": list(i.file_system_names),
            "region": {"name": i.region, "description": REGIONS[i.region]},
            "instance_type": {"name": i.instance_type, "description": desc, "gpu_description": desc.split(" ", 1)[1],
                              "price_cents_per_hour": cents,
                              "specs": {"vcpus": vcpus, "memory_gib": ram, "storage_gib": disk, "gpus": gpus}},
            "hostname": f"{i.id[:8]}.cloud.lambdalabs.com", "is_reserved": False,
        }
        if i.status != "booting":
            view["ip"] = self.ip
            view["private_ip"] = "10.0.0.2"
        return view

    def handle(self, method: str, path: str, auth: str,
               body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self.lock:
            self.requests.append((method, path))
            if self.throttled > 0:
                self.throttled -= 1
                # The reference documents the limits, not a code: the adapter decides on the status.
                return 429, _err("global/too-many-requests", "Too many requests", "Slow down"), \
                    {"Retry-After": str(self.retry_after)}
            if auth != f"Bearer {self.key}":
                return 401, _err("global/invalid-api-key", "API key was invalid, expired, or deleted.",
                                 "Check your API key or create a new one, then try again."), {}
            self._tick()
            if self.failing and self.failing[0][2] in (None, path):
                status, code, _ = self.failing.pop(0)
                if path == "/instance-operations/launch" and status >= 500 and self.lost_launch:
                    self._route(method, path, body)
                return status, _err(code, f"injected {code}"), {}
            return self._route(method, path, body)

    def _route(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        if (method, path) == ("GET", "/instance-types"):
            return 200, {"data": {name: self._type(name) for name in TYPES}}, {}
        if (method, path) == ("GET", "/instances"):
            return 200, {"data": [self._view(i) for i in self.instances.values()]}, {}
        m = re.fullmatch(r"/instances/([^/]+)", path)
        if method == "GET" and m:
            inst = self.instances.get(m.group(1))
            if inst is None:
                return 404, _not_found(), {}
            return 200, {"data": self._view(inst)}, {}
        if (method, path) == ("POST", "/instance-operations/launch"):
            return self._launch(body)
        if (method, path) == ("POST", "/instance-operations/terminate"):
            ids = body.get("instance_ids")
            if not isinstance(ids, list) or not ids:
                return 400, _err("global/invalid-parameters", "instance_ids is required"), {}
            found = [self.instances.get(str(x)) for x in ids]
            if any(i is None for i in found):
                return 404, _not_found(), {}
            for i in found:
                assert i is not None
                if i.status != "terminating":
                    i.status, i.ended = "terminating", self.clock
            return 200, {"data": {"terminated_instances": [self._view(i) for i in found if i]}}, {}
        if (method, path) == ("GET", "/ssh-keys"):
            return 200, {"data": list(self.ssh_keys.values())}, {}
        if (method, path) == ("POST", "/ssh-keys"):
            name = str(body.get("name") or "")
            if not name or any(k["name"] == name for k in self.ssh_keys.values()) or not body.get("public_key"):
                return 400, _err("global/invalid-parameters", f"invalid or duplicate SSH key name {name!r}"), {}
            key = {"id": secrets.token_hex(16), "name": name, "public_key": str(body["public_key"])}
            self.ssh_keys[key["id"]] = key
            return 200, {"data": key}, {}
        if "file" in path:
            return self._route_fs(method, path, body)
        return 404, _err("global/object-does-not-exist", f"no route {method} {path}"), {}

    def _route_fs(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        if (method, path) == ("GET", "/file-systems"):
            return 200, {"data": [self._fs_view(f) for f in self.filesystems.values()]}, {}
        if (method, path) == ("POST", "/filesystems"):
            return self._create_fs(body)
        m = re.fullmatch(r"/filesystems/([^/]+)", path)
        if method == "DELETE" and m:
            fs = self.filesystems.get(m.group(1))
            if fs is None:
                return 404, _err("global/object-does-not-exist", "Filesystem was not found."), {}
            if self._in_use(fs):
                return 400, _err("global/invalid-parameters", "Filesystem is in use by an instance.",
                                 "Terminate the instances using it first."), {}
            del self.filesystems[fs.id]
            return 200, {"data": {"deleted_ids": [fs.id]}}, {}
        return 404, _err("global/object-does-not-exist", f"no route {method} {path}"), {}

    def _in_use(self, fs: FakeFileSystem) -> bool:
        return any(fs.name in i.file_system_names and i.status != "terminating" for i in self.instances.values())

    def _fs_view(self, fs: FakeFileSystem) -> dict[str, Any]:
        return {"id": fs.id, "name": fs.name, "mount_point": f"/lambda/nfs/{fs.name}",
                "created": "2026-12-05T00:00:00Z",
                "created_by": {"id": "u1", "email": "user@example.com", "status": "active"},
                "is_in_use": self._in_use(fs), "region": {"name": fs.region, "description": REGIONS[fs.region]},
                "bytes_used": sum(len(v) for v in fs.files.values())}

    def _create_fs(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        name, region = str(body.get("name") or ""), str(body.get("region") or "")
        if not re.fullmatch(r"[a-zA-Z][0-9a-zA-Z-]{0,59}", name) or region not in REGIONS:
            return 400, _err("global/invalid-parameters", f"invalid filesystem name {name!r} or region {region!r}"), {}
        if any(f.name == name for f in self.filesystems.values()):
            return 400, _err("global/invalid-parameters", f"a filesystem named {name} exists"), {}
        fs = FakeFileSystem(secrets.token_hex(16), name, region)
        self.filesystems[fs.id] = fs
        return 200, {"data": self._fs_view(fs)}, {}

    def _type(self, name: str) -> dict[str, Any]:
        desc, cents, vcpus, ram, disk, gpus, regions = TYPES[name]
        return {"instance_type": {"name": name, "description": desc, "gpu_description": desc.split(" ", 1)[1],
                                  "price_cents_per_hour": cents,
                                  "specs": {"vcpus": vcpus, "memory_gib": ram, "storage_gib": disk, "gpus": gpus}},
                "regions_with_capacity_available": [{"name": r, "description": REGIONS[r]} for r in regions
                                                    if (name, r) not in self.no_capacity]}

    def _launch(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        itype, region = str(body.get("instance_type_name")), str(body.get("region_name"))
        keys = body.get("ssh_key_names")
        name = body.get("name")
        known_keys = {k["name"] for k in self.ssh_keys.values()}
        if itype not in TYPES or region not in REGIONS:
            return 400, _err("global/invalid-parameters", f"unknown instance type {itype} or region {region}"), {}
        if not isinstance(keys, list) or len(keys) != 1 or keys[0] not in known_keys:
            return 400, _err("global/invalid-parameters", "exactly one existing SSH key must be named"), {}
        if name is not None and (not isinstance(name, str) or len(name) > 64):
            return 400, _err("global/invalid-parameters", "name must be at most 64 characters"), {}
        if (itype, region) in self.no_capacity or region not in TYPES[itype][6]:
            return 400, _err("instance-operations/launch/insufficient-capacity",
                             "Not enough capacity to fulfill launch request.",
                             "Choose an instance type with more availability, or try again later."), {}
        fs_names = body.get("file_system_names") or []
        known = {f.name: f for f in self.filesystems.values()}
        if not isinstance(fs_names, list) or any(n not in known for n in fs_names):
            return 404, _err("global/object-does-not-exist", "Filesystem was not found."), {}
        if any(known[n].region != region for n in fs_names):
            return 400, _err("instance-operations/launch/file-system-in-wrong-region",
                             "File system is in a different region than the instance."), {}
        live = [i for i in self.instances.values() if i.status != "terminating"]
        if self.quota is not None and len(live) >= self.quota:
            return 400, _err("global/quota-exceeded", "Quota exceeded", "Contact Support to increase your quota"), {}
        inst = FakeInstance(secrets.token_hex(16), name, region, itype, list(keys), body.get("user_data"), self.clock,
                            never_boots=self.never_boot, file_system_names=list(fs_names))
        self.instances[inst.id] = inst
        self.launches.append(body)
        return 200, {"data": {"instance_ids": [inst.id]}}, {}


def _err(code: str, message: str, suggestion: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "suggestion": suggestion}}


def _not_found() -> dict[str, Any]:
    return _err("global/object-does-not-exist", "Specified instance does not exist.")


def _handler(fake: FakeLambda) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            path = self.path.split("?", 1)[0].removeprefix("/api/v1")
            status, payload, headers = fake.handle(method, path, self.headers.get("Authorization", ""),
                                                   body if isinstance(body, dict) else {})
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # http.server's naming
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return Handler
