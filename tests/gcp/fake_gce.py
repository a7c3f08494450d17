"""A fake Compute Engine API on 127.0.0.1 (plain HTTP, threaded, random port) for the GCP tests.

Just the paths the adapter uses, answering with the JSON shapes GCE uses (camelCase):

- ``POST   /compute/v1/projects/{p}/zones/{z}/instances[?requestId=]``   insert -> Operation
- ``GET    /compute/v1/projects/{p}/zones/{z}/instances/{name}``        get (404 when unknown)
- ``GET    /compute/v1/projects/{p}/zones/{z}/instances[?filter=]``     list
- ``GET    /compute/v1/projects/{p}/aggregated/instances[?filter=]``    aggregatedList
- ``DELETE /compute/v1/projects/{p}/zones/{z}/instances/{name}``        delete -> Operation
- ``GET    /compute/v1/projects/{p}/zones/{z}/operations[/{op}]``, ``POST .../{op}/wait``
- ``GET    /compute/v1/projects/{p}/aggregated/operations[?filter=]``
- ``GET    /compute/v1/projects/{p}/zones/{z}/instances/{name}/getGuestAttributes?queryPath=``
  (what the guest published, ``publish``; 404 while nothing is under the path or the VM's
  metadata lacks ``enable-guest-attributes: TRUE``, as GCE answers)

Filters: ``labels.KEY = "v"`` and ``operationType = "v"`` joined by AND (GCE's syntax, the
subset the adapter sends). ``requestId`` is honoured like GCE does (a repeat gets the first
operation back and creates nothing). Injectable: ``refuse`` (a failed insert operation, e.g.
ZONE_RESOURCE_POOL_EXHAUSTED or QUOTA_EXCEEDED), ``fail_http`` (the next N matching requests
answer an HTTP error), ``preempt`` (GCE's reclaim of a spot VM: STOPPING and a
``compute.instances.preempted`` operation; after the 30 s notice, in the fake's clock, the VM
is deleted). Time: ``advance(s)`` moves the fake's clock (``now``), which starts at the wall clock.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

BASE = "https://www.googleapis.com/compute/v1"
_CLAUSE = re.compile(r'\(?\s*([\w.-]+)\s*(?:=|eq)\s*"?([^"\s)]*)"?\s*\)?')


def ts(d: datetime) -> str:
    return d.astimezone(UTC).isoformat(timespec="milliseconds")


@dataclass
class Refusal:
    code: str  # the operation's error code, e.g. ZONE_RESOURCE_POOL_EXHAUSTED
    when: Callable[[str, dict[str, Any]], bool]  # (zone, insert body) -> refuse?
    http_status: int = 503
    message: str = "refused by the fake"


@dataclass
class HttpFailure:
    method: str
    path: str  # regular expression searched in the path
    status: int
    reason: str = ""
    times: int = 1
    message: str = "injected by the fake"


@dataclass
class FakeGce:
    project: str = "test-project"
    boot_s: float = 0.0  # PROVISIONING for this long (fake clock) after insert
    instances: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    operations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    refusals: list[Refusal] = field(default_factory=list)
    http_failures: list[HttpFailure] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) seen
    offset_s: float = 0.0
    # (zone, name) -> {(namespace, key): value}: what the VM's guest wrote (``publish``)
    guest_attributes: dict[tuple[str, str], dict[tuple[str, str], str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self._by_request_id: dict[str, tuple[str, str]] = {}
        self._reclaims: list[tuple[datetime, str, str]] = []  # (due, zone, name)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the clock ---------------------------------------------------------------------------
    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.offset_s)

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.offset_s += seconds
            self._settle()

    def _settle(self) -> None:
        now = self.now()
        for due, zone, name in [r for r in self._reclaims if r[0] <= now]:
            self._reclaims.remove((due, zone, name))
            inst = self.instances.get((zone, name))
            op = next((o for o in self.operations.values() if o["operationType"] == "compute.instances.preempted"
                       and o["targetLink"].endswith(f"/zones/{zone}/instances/{name}") and o["status"] != "DONE"), None)
            if op is not None:
                op.update(status="DONE", progress=100, endTime=ts(now))
            if inst is None:
                continue
            if inst.get("scheduling", {}).get("instanceTerminationAction") == "STOP":
                inst.update(status="TERMINATED", lastStopTimestamp=ts(now))
            else:
                del self.instances[(zone, name)]
        for inst in self.instances.values():
            if inst["status"] == "PROVISIONING" and now >= inst["_ready_at"]:
                inst["status"] = "RUNNING"

    # -- injection ---------------------------------------------------------------------------
    def refuse(self, code: str, *, zone: str | None = None, machine_type: str | None = None,
               spot: bool | None = None, http_status: int = 503) -> Refusal:
        def when(z: str, body: dict[str, Any]) -> bool:
            is_spot = body.get("scheduling", {}).get("provisioningModel") == "SPOT"
            return ((zone is None or z == zone)
                    and (machine_type is None or body.get("machineType", "").endswith("/" + machine_type))
                    and (spot is None or is_spot == spot))

        r = Refusal(code, when, http_status)
        self.refusals.append(r)
        return r

    def fail_http(self, method: str, path: str, status: int, reason: str = "", times: int = 1,
                  message: str = "injected by the fake") -> None:
        self.http_failures.append(HttpFailure(method, path, status, reason, times, message))

    def preempt(self, zone: str, name: str, notice_s: float = 30.0) -> None:
        """GCE reclaims a spot VM: STOPPING now, a preempted operation, deleted after the notice."""
        with self.lock:
            inst = self.instances[(zone, name)]
            inst["status"] = "STOPPING"
            self._operation(zone, "compute.instances.preempted", name, status="RUNNING", user="system")
            self._reclaims.append((self.now() + timedelta(seconds=notice_s), zone, name))

    def publish(self, zone: str, name: str, namespace: str, key: str, value: str) -> None:
        """The VM's guest writes a guest attribute (e.g. the guest agent its host keys:
        namespace ``hostkeys``, key the key type, value the base64 blob)."""
        with self.lock:
            self.guest_attributes.setdefault((zone, name), {})[(namespace, key)] = value

    def publish_host_key(self, zone: str, name: str, public_key: str) -> None:
        """``publish`` an OpenSSH public key line the way the guest agent does."""
        key_type, blob = public_key.split()[:2]
        self.publish(zone, name, "hostkeys", key_type, blob)

    def add_instance(self, zone: str, name: str, labels: dict[str, str] | None = None,
                     machine_type: str = "g2-standard-4") -> None:
        """A VM created behind the adapter's back (somebody else's)."""
        with self.lock:
            self._create(zone, {"name": name, "machineType": f"zones/{zone}/machineTypes/{machine_type}",
                                "labels": labels or {}})

    # -- the API -----------------------------------------------------------------------------
    def _operation(self, zone: str, kind: str, name: str, *, status: str = "DONE",
                   error: dict[str, Any] | None = None, http_status: int | None = None,
                   user: str = "test@example.com") -> dict[str, Any]:
        op_name = f"operation-{next(self._ids)}"
        now = ts(self.now())
        op: dict[str, Any] = {
            "kind": "compute#operation", "id": str(next(self._ids)), "name": op_name,
            "zone": f"{BASE}/projects/{self.project}/zones/{zone}", "operationType": kind,
            "targetLink": f"{BASE}/projects/{self.project}/zones/{zone}/instances/{name}",
            "status": status, "progress": 100 if status == "DONE" else 0, "insertTime": now, "startTime": now,
            "user": user, "selfLink": f"{BASE}/projects/{self.project}/zones/{zone}/operations/{op_name}",
        }  # fmt: skip
        if status == "DONE":
            op["endTime"] = now
        if error is not None:
            op["error"] = error
            op["httpErrorStatusCode"] = http_status or 400
        self.operations[(zone, op_name)] = op
        return op

    def _create(self, zone: str, body: dict[str, Any]) -> None:
        now = self.now()
        name = body["name"]
        nat = f"10.{len(self.instances) // 250}.{len(self.instances) % 250}.{next(self._ids) % 250}"
        inst = {
            **body, "kind": "compute#instance", "id": str(next(self._ids)),
            "zone": f"{BASE}/projects/{self.project}/zones/{zone}",
            "machineType": f"{BASE}/projects/{self.project}/{body['machineType']}",
            "status": "PROVISIONING", "creationTimestamp": ts(now), "_ready_at": now + timedelta(seconds=self.boot_s),
            "selfLink": f"{BASE}/projects/{self.project}/zones/{zone}/instances/{name}",
            "networkInterfaces": [{"networkIP": "10.128.0.2", "accessConfigs": [
                {"name": "External NAT", "type": "ONE_TO_ONE_NAT", "natIP": nat}]}],
        }  # fmt: skip
        self.instances[(zone, name)] = inst

    def insert(self, zone: str, body: dict[str, Any], request_id: str | None) -> tuple[int, dict[str, Any]]:
        if request_id and request_id in self._by_request_id:
            return 200, self.operations[self._by_request_id[request_id]]
        name = body["name"]
        if (zone, name) in self.instances:
            return 409, _error(409, f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' "
                                    "already exists", "alreadyExists")
        refusal = next((r for r in self.refusals if r.when(zone, body)), None)
        if refusal is not None:
            error = {"errors": [{"code": refusal.code, "message": f"{refusal.message}: {refusal.code}"}]}
            op = self._operation(zone, "insert", name, error=error, http_status=refusal.http_status)
        else:
            self._create(zone, body)
            op = self._operation(zone, "insert", name)
        if request_id:
            self._by_request_id[request_id] = (zone, op["name"])
        return 200, op

    def public(self, inst: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in inst.items() if not k.startswith("_")}


def _error(status: int, message: str, reason: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "errors": [
        {"message": message, "domain": "global", "reason": reason}]}}


def matches(item: dict[str, Any], filter_: str) -> bool:
    for key, value in _CLAUSE.findall(filter_ or ""):
        if key.startswith("labels."):
            if (item.get("labels") or {}).get(key[len("labels."):]) != value:
                return False
        elif str(item.get(key, "")) != value:
            return False
    return True


_ZONE = r"/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<z>[^/]+)"
ROUTES = [
    ("POST", re.compile(_ZONE + r"/instances$"), "insert"),
    ("GET", re.compile(_ZONE + r"/instances$"), "list"),
    ("GET", re.compile(_ZONE + r"/instances/(?P<n>[^/]+)$"), "get"),
    ("DELETE", re.compile(_ZONE + r"/instances/(?P<n>[^/]+)$"), "delete"),
    ("GET", re.compile(_ZONE + r"/instances/(?P<n>[^/]+)/getGuestAttributes$"), "guest_attributes"),
    ("GET", re.compile(_ZONE + r"/operations$"), "ops"),
    ("GET", re.compile(_ZONE + r"/operations/(?P<o>[^/]+)$"), "op"),
    ("POST", re.compile(_ZONE + r"/operations/(?P<o>[^/]+)/wait$"), "op"),
    ("GET", re.compile(r"/compute/v1/projects/(?P<p>[^/]+)/aggregated/instances$"), "agg_instances"),
    ("GET", re.compile(r"/compute/v1/projects/(?P<p>[^/]+)/aggregated/operations$"), "agg_ops"),
]


def _handler(fake: FakeGce) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

        def _handle(self, method: str) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            with fake.lock:
                fake.requests.append((method, url.path))
                fake._settle()
                for f in fake.http_failures:
                    if f.method == method and re.search(f.path, url.path) and f.times > 0:
                        f.times -= 1
                        return self._reply(f.status, _error(f.status, f.message, f.reason or "backendError"))
                for m, pattern, action in ROUTES:
                    match = pattern.match(url.path) if m == method else None
                    if match is not None:
                        params = match.groupdict()
                        if params["p"] != fake.project:
                            return self._reply(404, _error(404, f"project {params['p']} not found", "notFound"))
                        return self._reply(*getattr(self, "_" + action)(params, query, body))
            self._reply(404, _error(404, f"no route {method} {url.path}", "notFound"))

        # -- actions (called under the lock) -----------------------------------------------
        def _insert(self, p: dict[str, str], q: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
            return fake.insert(p["z"], body, q.get("requestId"))

        def _get(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
            inst = fake.instances.get((p["z"], p["n"]))
            if inst is None:
                return 404, _error(404, f"The resource 'projects/{fake.project}/zones/{p['z']}/instances/{p['n']}' "
                                        "was not found", "notFound")
            return 200, fake.public(inst)

        def _list(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
            items = [fake.public(i) for (z, _), i in fake.instances.items()
                     if z == p["z"] and matches(i, q.get("filter", ""))]
            return 200, {"kind": "compute#instanceList", "items": items}

        def _delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
            status, found = self._get(p, q, body)
            if status != 200:
                return status, found
            del fake.instances[(p["z"], p["n"])]
            return 200, fake._operation(p["z"], "delete", p["n"])

        def _guest_attributes(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
            status, inst = self._get(p, q, body)
            if status != 200:
                return status, inst
            path = q.get("queryPath", "")
            namespace = path.split("/", 1)[0]
            metadata = {i.get("key"): i.get("value") for i in (inst.get("metadata") or {}).get("items") or []}
            enabled = str(metadata.get("enable-guest-attributes", "")).upper() == "TRUE"
            items = [{"namespace": ns, "key": k, "value": v}
                     for (ns, k), v in fake.guest_attributes.get((p["z"], p["n"]), {}).items() if ns == namespace]
            if not enabled or not items:
                return 404, _error(404, f"The resource 'projects/{fake.project}/zones/{p['z']}/instances/{p['n']}/"
                                        f"guestAttributes/{path}' was not found", "notFound")
            return 200, {"kind": "compute#guestAttributes", "queryPath": path,
                         "selfLink": f"{BASE}/projects/{fake.project}/zones/{p['z']}/instances/{p['n']}"
                                     f"/guestAttributes/{path}",
                         "queryValue": {"items": items}}

        def _op(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
            op = fake.operations.get((p["z"], p["o"]))
            if op is None:
                return 404, _error(404, f"operation {p['o']} not found", "notFound")
            return 200, op

        def _ops(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
            items = [o for (z, _), o in fake.operations.items() if z == p["z"] and matches(o, q.get("filter", ""))]
            return 200, {"kind": "compute#operationList", "items": items}

        def _agg_instances(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
            scoped: dict[str, dict[str, Any]] = {}
            for (z, _), i in fake.instances.items():
                if matches(i, q.get("filter", "")):
                    scoped.setdefault(f"zones/{z}", {"instances": []})["instances"].append(fake.public(i))
            return 200, {"kind": "compute#instanceAggregatedList", "items": scoped}

        def _agg_ops(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
            scoped: dict[str, dict[str, Any]] = {}
            for (z, _), o in fake.operations.items():
                if matches(o, q.get("filter", "")):
                    scoped.setdefault(f"zones/{z}", {"operations": []})["operations"].append(o)
            return 200, {"kind": "compute#operationAggregatedList", "items": scoped}

        def _reply(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
