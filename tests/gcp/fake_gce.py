"""A fake Compute Engine API on 127.0.0.1 (plain HTTP, threaded, random port) for the GCP tests.

Just the paths the adapter uses, answering with the JSON shapes GCE uses (camelCase):

- ``POST   /compute/v1/projects/{p}/zones/{z}/instances[?requestId=]``   insert -> Operation
- ``GET    /compute/v1/projects/{p}/zones/{z}/instances/{name}``        get (404 when unknown)
- ``GET    /compute/v1/projects/{p}/zones/{z}/instances[?filter=]``     list
- ``GET    /compute/v1/projects/{p}/aggregated/instances[?filter=]``    aggregatedList
- ``DELETE /compute/v1/projects/{p}/zones/{z}/instances/{name}``        delete -> Operation
- ``GET    /compute/v1/projects/{p}/zones/{z}/operations[/{op}]``, ``POST .../{op}/wait``
- ``GET    /compute/v1/projects/{p}/aggregated/operations[?filter=]``
- ``POST   /compute/v1/projects/{p}/zones/{z}/disks[?requestId=]``, ``GET .../disks/{d}``,
  ``DELETE .../disks/{d}``, ``GET /compute/v1/projects/{p}/aggregated/disks[?filter=]``;
  ``POST .../instances/{name}/attachDisk`` and ``.../detachDisk?deviceName=``: persistent disks
  with their ``users``, refused as GCE refuses them (400 ``resourceInUseByAnotherResource``
  for a disk another VM holds or a delete of an attached disk, 400 ``invalid`` across zones);
  a deleted VM lets go of its disks
- ``POST   /compute/v1/projects/{p}/regions/{r}/resourcePolicies[?requestId=]``, ``GET .../{name}``,
  ``DELETE .../{name}``, ``GET /compute/v1/projects/{p}/aggregated/resourcePolicies``, and the
  region operations ``GET .../regions/{r}/operations/{op}``, ``POST .../{op}/wait``: compact
  placement policies (``groupPlacementPolicy``: ``vmCount``, ``collocation``), refused as GCE
  refuses them: an instance insert naming a policy that does not exist (404), one more VM than
  its ``vmCount`` or a VM in another zone than the first (400 ``invalid``); a delete while a VM
  uses it (400 ``resourceInUseByAnotherResource``); a name taken (409 ``alreadyExists``)
- ``GET    /compute/v1/projects/{p}/aggregated/machineTypes`` (``machine_types``, the API's JSON)
- ``GET    /compute/v1/projects/{p}/aggregated/acceleratorTypes[?maxResults=&pageToken=]``
  (``accelerator_types``: ``name``, ``zone``, ``maximumCardsPerInstance``), paged like GCE: at
  most ``accelerator_page_size`` (or ``maxResults``) per page, grouped under ``zones/{z}``, with
  a ``nextPageToken`` until the last page
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
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.kit.http import JsonHandler

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
    disks: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # machineTypes.aggregatedList answers these (the API's JSON: name, zone, guestCpus, memoryMb, accelerators)
    machine_types: list[dict[str, Any]] = field(default_factory=list)
    # acceleratorTypes.aggregatedList answers these, a few per page
    accelerator_types: list[dict[str, Any]] = field(default_factory=list)
    accelerator_page_size: int = 2
    # attachDisk operations stay RUNNING (the disk not yet in the VM's disks or the disk's users)
    # until ``finish_attaches()``; a second attach meanwhile is refused as GCE refuses a disk in use
    slow_attach: bool = False
    # (zone, name) -> {(namespace, key): value}: what the VM's guest wrote (``publish``)
    guest_attributes: dict[tuple[str, str], dict[tuple[str, str], str]] = field(default_factory=dict)
    # (region, name) -> resource policy (compact placement of a gang)
    policies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self._by_request_id: dict[str, tuple[str, str]] = {}
        self._reclaims: list[tuple[datetime, str, str]] = []  # (due, zone, name)
        self._pending_attaches: list[tuple[str, str, str, str, dict[str, Any]]] = []
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
            if op is not None:  # done when due, whenever the fake's clock got here
                op.update(status="DONE", progress=100, endTime=ts(due))
            if inst is None:
                continue
            if inst.get("scheduling", {}).get("instanceTerminationAction") == "STOP":
                inst.update(status="TERMINATED", lastStopTimestamp=ts(due))
            else:
                self.remove_instance(zone, name)
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
                   user: str = "test@example.com", target: str | None = None) -> dict[str, Any]:
        op_name = f"operation-{next(self._ids)}"
        now = ts(self.now())
        op: dict[str, Any] = {
            "kind": "compute#operation", "id": str(next(self._ids)), "name": op_name,
            "zone": f"{BASE}/projects/{self.project}/zones/{zone}", "operationType": kind,
            "targetLink": target or f"{BASE}/projects/{self.project}/zones/{zone}/instances/{name}",
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
        serial = next(self._ids)
        inst = {
            **body, "kind": "compute#instance", "id": str(next(self._ids)),
            "zone": f"{BASE}/projects/{self.project}/zones/{zone}",
            "machineType": f"{BASE}/projects/{self.project}/{body['machineType']}",
            "status": "PROVISIONING", "creationTimestamp": ts(now), "_ready_at": now + timedelta(seconds=self.boot_s),
            "selfLink": f"{BASE}/projects/{self.project}/zones/{zone}/instances/{name}",
            "networkInterfaces": [{"networkIP": f"10.128.{serial // 250}.{serial % 250 + 2}", "accessConfigs": [
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
        refused = self._policy_refusal(zone, body)
        if refused is not None:
            return refused
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

    # -- resource policies (compact placement) ------------------------------------------------
    def policy_link(self, region: str, name: str) -> str:
        return f"{BASE}/projects/{self.project}/regions/{region}/resourcePolicies/{name}"

    def _policy_key(self, url: str) -> tuple[str, str]:
        parts = url.rstrip("/").split("/")
        return parts[-3], parts[-1]

    def policy_users(self, region: str, name: str) -> list[dict[str, Any]]:
        return [i for i in self.instances.values()
                if any(self._policy_key(u) == (region, name) for u in i.get("resourcePolicies") or ())]

    def _policy_refusal(self, zone: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        for url in body.get("resourcePolicies") or ():
            region, name = self._policy_key(url)
            policy = self.policies.get((region, name))
            if policy is None or not zone.startswith(region):
                return 404, _error(404, f"The resource '{url}' was not found", "notFound")
            users = self.policy_users(region, name)
            count = int((policy.get("groupPlacementPolicy") or {}).get("vmCount") or 0)
            if count and len(users) >= count:
                return 400, _error(400, f"Resource policy {name} allows {count} VMs", "invalid")
            zones = {str(u["zone"]).rsplit("/", 1)[-1] for u in users}
            if zones and zones != {zone}:
                return 400, _error(400, f"VMs of compact placement policy {name} must share one zone", "invalid")
        return None

    def insert_policy(self, region: str, body: dict[str, Any], request_id: str | None) -> tuple[int, dict[str, Any]]:
        if request_id and request_id in self._by_request_id:
            return 200, self.operations[self._by_request_id[request_id]]
        name = body["name"]
        if (region, name) in self.policies:
            return 409, _error(409, f"The resource '{self.policy_link(region, name)}' already exists", "alreadyExists")
        self.policies[(region, name)] = {
            **body, "kind": "compute#resourcePolicy", "id": str(next(self._ids)), "status": "READY",
            "region": f"{BASE}/projects/{self.project}/regions/{region}", "creationTimestamp": ts(self.now()),
            "selfLink": self.policy_link(region, name)}
        op = self._operation(region, "insert", name, target=self.policy_link(region, name))
        if request_id:
            self._by_request_id[request_id] = (region, op["name"])
        return 200, op

    def remove_instance(self, zone: str, name: str) -> None:
        inst = self.instances.pop((zone, name))
        for d in self.disks.values():
            if inst["selfLink"] in d.get("users", []):
                d["users"].remove(inst["selfLink"])

    # -- disks ---------------------------------------------------------------------------------
    def disk_link(self, zone: str, name: str) -> str:
        return f"{BASE}/projects/{self.project}/zones/{zone}/disks/{name}"

    def insert_disk(self, zone: str, body: dict[str, Any], request_id: str | None) -> tuple[int, dict[str, Any]]:
        if request_id and request_id in self._by_request_id:
            return 200, self.operations[self._by_request_id[request_id]]
        name = body["name"]
        if (zone, name) in self.disks:
            return 409, _error(409, f"The resource 'projects/{self.project}/zones/{zone}/disks/{name}' already exists",
                               "alreadyExists")
        self.disks[(zone, name)] = {
            "kind": "compute#disk", "id": str(next(self._ids)), "name": name, "sizeGb": str(body.get("sizeGb", 10)),
            "zone": f"{BASE}/projects/{self.project}/zones/{zone}", "status": "READY",
            "type": f"{BASE}/projects/{self.project}/{body.get('type') or f'zones/{zone}/diskTypes/pd-standard'}",
            "labels": body.get("labels") or {}, "creationTimestamp": ts(self.now()),
            "selfLink": self.disk_link(zone, name),
        }  # fmt: skip
        op = self._operation(zone, "insert", name, target=self.disk_link(zone, name))
        if request_id:
            self._by_request_id[request_id] = (zone, op["name"])
        return 200, op

    def attach_disk(self, zone: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        inst = self.instances.get((zone, name))
        if inst is None:
            return 404, _error(404, f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' "
                                    "was not found", "notFound")
        source = str(body.get("source") or "")
        parts = source.rstrip("/").split("/")
        disk_zone, disk_name = parts[-3], parts[-1]
        disk = self.disks.get((disk_zone, disk_name))
        if disk is None:
            return 404, _error(404, f"The resource '{source}' was not found", "notFound")
        if disk_zone != zone:
            return 400, _error(400, f"Invalid value for field 'resource.source': '{source}'. "
                                    "Disk must be in the same zone as the instance.", "invalid")
        users = disk.setdefault("users", [])
        if any(p[1] == disk["selfLink"] for p in self._pending_attaches):
            return 400, _error(400, f"The disk resource '{disk['selfLink']}' is already being used by "
                                    f"'{inst['selfLink']}'", "resourceInUseByAnotherResource")
        if self.slow_attach and inst["selfLink"] not in users:
            op = self._operation(zone, "attachDisk", name, status="RUNNING")
            self._pending_attaches.append((op["name"], disk["selfLink"], zone, name, body))
            return 200, op
        if users and inst["selfLink"] not in users:
            return 400, _error(400, f"The disk resource '{disk['selfLink']}' is already being used by "
                                    f"'{users[0]}'", "resourceInUseByAnotherResource")
        if inst["selfLink"] not in users:
            users.append(inst["selfLink"])
            inst.setdefault("disks", []).append({
                "kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": body.get("mode", "READ_WRITE"),
                "source": disk["selfLink"], "deviceName": body.get("deviceName") or disk_name,
                "index": len(inst.get("disks", [])), "boot": False, "autoDelete": bool(body.get("autoDelete"))})
        return 200, self._operation(zone, "attachDisk", name)

    def finish_attaches(self) -> None:
        """The attach operations left RUNNING by ``slow_attach`` complete."""
        with self.lock:
            pending, self._pending_attaches = self._pending_attaches, []
            self.slow_attach = False
            for op_name, _, zone, name, body in pending:
                self.attach_disk(zone, name, body)
                self.operations[(zone, op_name)].update(status="DONE", progress=100, endTime=ts(self.now()))

    def detach_disk(self, zone: str, name: str, device: str) -> tuple[int, dict[str, Any]]:
        inst = self.instances.get((zone, name))
        if inst is None:
            return 404, _error(404, f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' "
                                    "was not found", "notFound")
        attached = next((d for d in inst.get("disks", []) if d.get("deviceName") == device), None)
        if attached is None:
            return 400, _error(400, f"Invalid value for field 'deviceName': '{device}'. "
                                    "No attached disk found with device name.", "invalid")
        inst["disks"].remove(attached)
        disk = next((d for d in self.disks.values() if d["selfLink"] == attached["source"]), None)
        if disk is not None and inst["selfLink"] in disk.get("users", []):
            disk["users"].remove(inst["selfLink"])
        return 200, self._operation(zone, "detachDisk", name)

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
_REGION = r"/compute/v1/projects/(?P<p>[^/]+)/regions/(?P<r>[^/]+)"
ROUTES = [
    ("POST", re.compile(_ZONE + r"/instances$"), "insert"),
    ("GET", re.compile(_ZONE + r"/instances$"), "list"),
    ("GET", re.compile(_ZONE + r"/instances/(?P<n>[^/]+)$"), "get"),
    ("DELETE", re.compile(_ZONE + r"/instances/(?P<n>[^/]+)$"), "delete"),
    ("GET", re.compile(_ZONE + r"/instances/(?P<n>[^/]+)/getGuestAttributes$"), "guest_attributes"),
    ("POST", re.compile(_ZONE + r"/instances/(?P<n>[^/]+)/attachDisk$"), "attach_disk"),
    ("POST", re.compile(_ZONE + r"/instances/(?P<n>[^/]+)/detachDisk$"), "detach_disk"),
    ("POST", re.compile(_ZONE + r"/disks$"), "insert_disk"),
    ("GET", re.compile(_ZONE + r"/disks/(?P<d>[^/]+)$"), "get_disk"),
    ("DELETE", re.compile(_ZONE + r"/disks/(?P<d>[^/]+)$"), "delete_disk"),
    ("GET", re.compile(r"/compute/v1/projects/(?P<p>[^/]+)/aggregated/disks$"), "agg_disks"),
    ("POST", re.compile(_REGION + r"/resourcePolicies$"), "insert_policy"),
    ("GET", re.compile(_REGION + r"/resourcePolicies/(?P<n>[^/]+)$"), "get_policy"),
    ("DELETE", re.compile(_REGION + r"/resourcePolicies/(?P<n>[^/]+)$"), "delete_policy"),
    ("GET", re.compile(r"/compute/v1/projects/(?P<p>[^/]+)/aggregated/resourcePolicies$"), "agg_policies"),
    ("GET", re.compile(_REGION + r"/operations/(?P<o>[^/]+)$"), "region_op"),
    ("POST", re.compile(_REGION + r"/operations/(?P<o>[^/]+)/wait$"), "region_op"),
    ("GET", re.compile(r"/compute/v1/projects/(?P<p>[^/]+)/aggregated/machineTypes$"), "agg_machine_types"),
    ("GET", re.compile(r"/compute/v1/projects/(?P<p>[^/]+)/aggregated/acceleratorTypes$"), "agg_accelerator_types"),
    ("GET", re.compile(_ZONE + r"/operations$"), "ops"),
    ("GET", re.compile(_ZONE + r"/operations/(?P<o>[^/]+)$"), "op"),
    ("POST", re.compile(_ZONE + r"/operations/(?P<o>[^/]+)/wait$"), "op"),
    ("GET", re.compile(r"/compute/v1/projects/(?P<p>[^/]+)/aggregated/instances$"), "agg_instances"),
    ("GET", re.compile(r"/compute/v1/projects/(?P<p>[^/]+)/aggregated/operations$"), "agg_ops"),
]


class _Actions:
    """One method per route of ``ROUTES`` (``_`` + its action), each ``(params, query, body) -> (status,
    payload)``; called under the fake's lock."""

    def __init__(self, fake: FakeGce) -> None:
        self.fake = fake

    def _insert(self, p: dict[str, str], q: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        return self.fake.insert(p["z"], body, q.get("requestId"))

    def _get(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        inst = self.fake.instances.get((p["z"], p["n"]))
        if inst is None:
            return 404, _error(404, f"The resource 'projects/{self.fake.project}/zones/{p['z']}/instances/{p['n']}' "
                                    "was not found", "notFound")
        return 200, self.fake.public(inst)

    def _list(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        items = [self.fake.public(i) for (z, _), i in self.fake.instances.items()
                 if z == p["z"] and matches(i, q.get("filter", ""))]
        return 200, {"kind": "compute#instanceList", "items": items}

    def _delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        status, found = self._get(p, q, body)
        if status != 200:
            return status, found
        self.fake.remove_instance(p["z"], p["n"])
        return 200, self.fake._operation(p["z"], "delete", p["n"])

    def _attach_disk(self, p: dict[str, str], q: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        return self.fake.attach_disk(p["z"], p["n"], body)

    def _detach_disk(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        return self.fake.detach_disk(p["z"], p["n"], q.get("deviceName", ""))

    def _insert_disk(self, p: dict[str, str], q: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        return self.fake.insert_disk(p["z"], body, q.get("requestId"))

    def _get_disk(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        disk = self.fake.disks.get((p["z"], p["d"]))
        if disk is None:
            return 404, _error(404, f"The resource 'projects/{self.fake.project}/zones/{p['z']}/disks/{p['d']}' "
                                    "was not found", "notFound")
        return 200, disk

    def _delete_disk(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        status, disk = self._get_disk(p, q, body)
        if status != 200:
            return status, disk
        if disk.get("users"):
            return 400, _error(400, f"The disk resource '{disk['selfLink']}' is already being used by "
                                    f"'{disk['users'][0]}'", "resourceInUseByAnotherResource")
        del self.fake.disks[(p["z"], p["d"])]
        return 200, self.fake._operation(p["z"], "delete", p["d"], target=disk["selfLink"])

    def _agg_machine_types(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        scoped: dict[str, dict[str, Any]] = {}
        for mt in self.fake.machine_types:
            scoped.setdefault(f"zones/{mt['zone']}", {"machineTypes": []})["machineTypes"].append(mt)
        return 200, {"kind": "compute#machineTypeAggregatedList", "items": scoped}

    def _agg_accelerator_types(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        start = int(q.get("pageToken") or 0)
        size = min(self.fake.accelerator_page_size, int(q.get("maxResults") or 500))
        scoped: dict[str, dict[str, Any]] = {}
        for at in self.fake.accelerator_types[start:start + size]:
            zone = str(at["zone"]).rsplit("/", 1)[-1]
            scoped.setdefault(f"zones/{zone}", {"acceleratorTypes": []})["acceleratorTypes"].append(at)
        page: dict[str, Any] = {"kind": "compute#acceleratorTypeAggregatedList", "items": scoped}
        if start + size < len(self.fake.accelerator_types):
            page["nextPageToken"] = str(start + size)
        return 200, page

    def _agg_disks(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        scoped: dict[str, dict[str, Any]] = {}
        for (z, _), d in self.fake.disks.items():
            if matches(d, q.get("filter", "")):
                scoped.setdefault(f"zones/{z}", {"disks": []})["disks"].append(d)
        return 200, {"kind": "compute#diskAggregatedList", "items": scoped}

    def _guest_attributes(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        status, inst = self._get(p, q, body)
        if status != 200:
            return status, inst
        path = q.get("queryPath", "")
        namespace = path.split("/", 1)[0]
        metadata = {i.get("key"): i.get("value") for i in (inst.get("metadata") or {}).get("items") or []}
        enabled = str(metadata.get("enable-guest-attributes", "")).upper() == "TRUE"
        items = [{"namespace": ns, "key": k, "value": v}
                 for (ns, k), v in self.fake.guest_attributes.get((p["z"], p["n"]), {}).items() if ns == namespace]
        if not enabled or not items:
            return 404, _error(404, f"The resource 'projects/{self.fake.project}/zones/{p['z']}/instances/{p['n']}/"
                                    f"guestAttributes/{path}' was not found", "notFound")
        return 200, {"kind": "compute#guestAttributes", "queryPath": path,
                     "selfLink": f"{BASE}/projects/{self.fake.project}/zones/{p['z']}/instances/{p['n']}"
                                 f"/guestAttributes/{path}",
                     "queryValue": {"items": items}}

    def _insert_policy(self, p: dict[str, str], q: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        return self.fake.insert_policy(p["r"], body, q.get("requestId"))

    def _get_policy(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        policy = self.fake.policies.get((p["r"], p["n"]))
        if policy is None:
            return 404, _error(404, f"The resource '{self.fake.policy_link(p['r'], p['n'])}' was not found", "notFound")
        return 200, policy

    def _delete_policy(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        status, policy = self._get_policy(p, q, body)
        if status != 200:
            return status, policy
        users = self.fake.policy_users(p["r"], p["n"])
        if users:
            return 400, _error(400, f"The resource_policy resource '{policy['selfLink']}' is already being used "
                                    f"by '{users[0]['selfLink']}'", "resourceInUseByAnotherResource")
        del self.fake.policies[(p["r"], p["n"])]
        return 200, self.fake._operation(p["r"], "delete", p["n"], target=policy["selfLink"])

    def _agg_policies(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        scoped: dict[str, dict[str, Any]] = {}
        for (r, _), policy in self.fake.policies.items():
            scoped.setdefault(f"regions/{r}", {"resourcePolicies": []})["resourcePolicies"].append(policy)
        return 200, {"kind": "compute#resourcePolicyAggregatedList", "items": scoped}

    def _region_op(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        op = self.fake.operations.get((p["r"], p["o"]))
        if op is None:
            return 404, _error(404, f"operation {p['o']} not found", "notFound")
        return 200, op

    def _op(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        op = self.fake.operations.get((p["z"], p["o"]))
        if op is None:
            return 404, _error(404, f"operation {p['o']} not found", "notFound")
        return 200, op

    def _ops(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        items = [o for (z, _), o in self.fake.operations.items() if z == p["z"] and matches(o, q.get("filter", ""))]
        return 200, {"kind": "compute#operationList", "items": items}

    def _agg_instances(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        scoped: dict[str, dict[str, Any]] = {}
        for (z, _), i in self.fake.instances.items():
            if matches(i, q.get("filter", "")):
                scoped.setdefault(f"zones/{z}", {"instances": []})["instances"].append(self.fake.public(i))
        return 200, {"kind": "compute#instanceAggregatedList", "items": scoped}

    def _agg_ops(self, p: dict[str, str], q: dict[str, str], body: Any) -> tuple[int, Any]:
        scoped: dict[str, dict[str, Any]] = {}
        for (z, _), o in self.fake.operations.items():
            if matches(o, q.get("filter", "")):
                scoped.setdefault(f"zones/{z}", {"operations": []})["operations"].append(o)
        return 200, {"kind": "compute#operationAggregatedList", "items": scoped}


class _Handler(JsonHandler):
    """The HTTP side: a request matched against ``ROUTES`` and answered by ``_Actions``."""

    protocol_version = "HTTP/1.1"
    fake: FakeGce  # set by _handler's subclass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        fake = self.fake
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
                    return self.reply(f.status, _error(f.status, f.message, f.reason or "backendError"))
            for m, pattern, action in ROUTES:
                match = pattern.match(url.path) if m == method else None
                if match is not None:
                    params = match.groupdict()
                    if params["p"] != fake.project:
                        return self.reply(404, _error(404, f"project {params['p']} not found", "notFound"))
                    return self.reply(*getattr(_Actions(fake), "_" + action)(params, query, body))
        self.reply(404, _error(404, f"no route {method} {url.path}", "notFound"))


def _handler(fake: FakeGce) -> type:
    return type("Handler", (_Handler,), {"fake": fake})
