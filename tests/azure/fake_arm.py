"""A fake Azure Resource Manager on 127.0.0.1 over TLS: just the paths the Azure adapter uses.

- ``PUT/GET/DELETE .../Microsoft.Compute/virtualMachines/{vm}`` (``$expand=instanceView``),
  ``GET .../virtualMachines`` (paged by ``page_size`` with ``nextLink``), the create's
  long-running operation (``Azure-AsyncOperation`` -> ``.../locations/{loc}/operations/{id}``),
  and ``GET`` of the NICs and public IPs a VM's ``networkInterfaceConfigurations`` made.
- Managed disks: ``PUT/GET/DELETE .../Microsoft.Compute/disks/{disk}``, ``GET .../disks`` (paged),
  and ``POST .../virtualMachines/{vm}/attachDetachDataDisks`` (``dataDisksToAttach`` with
  ``diskId``/``lun``, ``dataDisksToDetach``), refused as ARM refuses them (409
  ``OperationNotAllowed`` for a disk another VM holds or a delete of an attached disk, 400
  ``BadRequest`` across zones); a deleted VM lets go of its data disks.
- ``GET /subscriptions/{s}/providers/Microsoft.Compute/skus?$filter=location eq '...'`` answers
  ``resource_skus`` (ARM's JSON: capabilities, locationInfo zones, restrictions), paged.
- Proximity placement groups: ``PUT/GET/DELETE .../Microsoft.Compute/proximityPlacementGroups/{g}``
  and ``GET .../proximityPlacementGroups``, with the ``virtualMachines`` that reference them. A
  VM create naming a group that does not exist is 404 ``NotFound``, one in another location or
  zone than the group's is 400 ``BadRequest``; a delete while a VM still references the group is
  refused 409 ``OperationNotAllowed`` (the code is this fake's choice: ARM's docs name none).
- Its own clock (``advance``): VMs boot ``boot_s`` after their create succeeds, deletions take
  ``delete_s``, evictions happen at their time. Nothing ever sleeps.
- Failures to inject: ``refuse(code, ...)`` (at submit, as ARM answers the PUT; or in the
  operation, like ``AllocationFailed``, which leaves a Failed VM behind as Azure does),
  ``fail_http(status, code, ...)`` (429, 5xx, 401 before anything is done), ``evict(vm, notice_s)``
  (eviction policy Delete: the VM, and what it owns with deleteOption Delete, disappear;
  Deallocate: ``PowerState/deallocated``), ``power_off(vm)`` (a shutdown from inside).
- Bearer tokens are required (401 ``InvalidAuthenticationToken`` without); ``If-None-Match: *``
  on a VM that exists is 412, as ARM does.

The TLS certificate is made at start with ``cryptography`` (SAN ``IP:127.0.0.1``); clients trust
it through ``ca_file`` (``connection_verify``).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import itertools
import json
import re
import ssl
import tempfile
import threading
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SUBSCRIPTION = "00000000-0000-4000-8000-000000000001"
RESOURCE_GROUP = "gpuorch-test"
_EPOCH = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
_RG = r"/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers"
_VM = re.compile(_RG + r"/Microsoft\.Compute/virtualMachines/(?P<name>[^/]+)$", re.IGNORECASE)
_VMS = re.compile(_RG + r"/Microsoft\.Compute/virtualMachines$", re.IGNORECASE)
_OP = re.compile(r"/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Compute/locations/(?P<loc>[^/]+)"
                 r"/operations/(?P<op>[^/]+)$", re.IGNORECASE)
_DISK = re.compile(_RG + r"/Microsoft\.Compute/disks/(?P<name>[^/]+)$", re.IGNORECASE)
_DISKS = re.compile(_RG + r"/Microsoft\.Compute/disks$", re.IGNORECASE)
_ATTACH = re.compile(_RG + r"/Microsoft\.Compute/virtualMachines/(?P<name>[^/]+)/attachDetachDataDisks$",
                     re.IGNORECASE)
_PPG = re.compile(_RG + r"/Microsoft\.Compute/proximityPlacementGroups/(?P<name>[^/]+)$", re.IGNORECASE)
_PPGS = re.compile(_RG + r"/Microsoft\.Compute/proximityPlacementGroups$", re.IGNORECASE)
_SKUS = re.compile(r"/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Compute/skus$", re.IGNORECASE)
_NET = re.compile(_RG + r"/Microsoft\.Network/(?P<kind>networkInterfaces|publicIPAddresses)/(?P<name>[^/]+)$",
                  re.IGNORECASE)


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and its key), as PEM files in ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "arm.pem", directory / "arm.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@dataclass
class Refusal:
    code: str
    message: str
    status: int = 409
    stage: str = "submit"  # "submit": the PUT is refused; "operation": the create's operation fails
    size: str | None = None
    region: str | None = None
    spot: bool | None = None
    count: int | None = None  # None: every time

    def matches(self, size: str, region: str, spot: bool) -> bool:
        return ((self.size is None or self.size == size) and (self.region is None or self.region == region)
                and (self.spot is None or self.spot == spot) and (self.count is None or self.count > 0))


@dataclass
class HttpFailure:
    status: int
    code: str
    method: str | None = None
    path: str | None = None  # a substring of the path
    count: int | None = 1
    headers: dict[str, str] = field(default_factory=dict)


class FakeArm:
    def __init__(self, directory: Path | None = None) -> None:
        self._tmp = None if directory else tempfile.TemporaryDirectory(prefix="fake-arm-")
        self.dir = Path(directory or self._tmp.name)  # type: ignore[union-attr]
        self.ca_file, key_file = make_certificate(self.dir)
        self.subscription, self.resource_group = SUBSCRIPTION, RESOURCE_GROUP
        self.token = "fake-arm-token"
        self.lock = threading.RLock()
        self.reset()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca_file, key_file)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self) -> None:
        with self.lock:
            self.vms: dict[str, dict[str, Any]] = {}
            self.disks: dict[str, dict[str, Any]] = {}
            self.ppgs: dict[str, dict[str, Any]] = {}  # lower-case name -> proximity placement group
            self.resource_skus: list[dict[str, Any]] = []
            self.nics: dict[str, dict[str, Any]] = {}
            self.ips: dict[str, dict[str, Any]] = {}
            self.operations: dict[str, dict[str, Any]] = {}
            self.refusals: list[Refusal] = []
            self.http_failures: list[HttpFailure] = []
            self.requests: list[dict[str, Any]] = []
            self.evictions: dict[str, float] = {}
            self.clock = 0.0
            self.boot_s = 0.0
            self.delete_s = 0.0
            self.op_polls = 1  # polls answered InProgress before an operation's end
            self.page_size = 50
            self.reject_tokens = False
            self._addresses = itertools.count(4)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._tmp is not None:
            self._tmp.cleanup()

    # -- the harness's knobs -----------------------------------------------------------------
    def now(self) -> dt.datetime:
        return _EPOCH + dt.timedelta(seconds=self.clock)

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.clock += seconds
            self._settle()

    def refuse(self, code: str, message: str = "", *, status: int = 409, stage: str = "submit",
               size: str | None = None, region: str | None = None, spot: bool | None = None,
               count: int | None = None) -> None:
        with self.lock:
            self.refusals.append(Refusal(code, message or f"{code} (fake)", status, stage, size, region, spot, count))

    def fail_http(self, status: int, code: str, *, method: str | None = None, path: str | None = None,
                  count: int | None = 1, headers: dict[str, str] | None = None) -> None:
        with self.lock:
            self.http_failures.append(HttpFailure(status, code, method, path, count, headers or {}))

    def evict(self, name: str, notice_s: float = 0.0) -> None:
        with self.lock:
            self.evictions[name] = self.clock + notice_s
            self._settle()

    def power_off(self, name: str) -> None:
        with self.lock:
            self.vms[name]["_power"] = "stopped"

    def add_vm(self, name: str, region: str, size: str, tags: dict[str, str] | None = None) -> None:
        """Somebody else's running VM in the resource group."""
        with self.lock:
            self.vms[name] = {"name": name, "location": region, "tags": dict(tags or {}),
                              "properties": {"hardwareProfile": {"vmSize": size}, "priority": "Regular",
                                             "provisioningState": "Succeeded"},
                              "_created": self.clock, "_power": "running", "_nics": []}

    # -- state ---------------------------------------------------------------------------------
    def _id(self, kind: str, name: str) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}/providers/{kind}/{name}"

    def _settle(self) -> None:
        for name, at in list(self.evictions.items()):
            if self.clock >= at:
                del self.evictions[name]
                vm = self.vms.get(name)
                if vm is None:
                    continue
                if vm["properties"].get("evictionPolicy") == "Deallocate":
                    vm["_power"], vm["_stopped"] = "deallocated", at
                else:
                    self._remove(name)
        for name, vm in list(self.vms.items()):
            if "_deleted_at" in vm and self.clock >= vm["_deleted_at"]:
                self._remove(name)

    def _remove(self, name: str) -> None:
        vm = self.vms.pop(name)
        vm_id = self._id("Microsoft.Compute/virtualMachines", name).lower()
        for disk in self.disks.values():
            if str(disk.get("managedBy", "")).lower() == vm_id:
                self._release(disk)
        for nic_name, nic_delete, ip_name, ip_delete in vm["_nics"]:
            if nic_delete:
                self.nics.pop(nic_name, None)
            if ip_name and ip_delete:
                self.ips.pop(ip_name, None)

    def _power(self, vm: dict[str, Any]) -> str | None:
        props = vm["properties"]
        if props["provisioningState"] in ("Creating", "Failed"):
            return None
        if vm["_power"] == "running" and self.clock < vm["_created"] + self.boot_s:
            return "starting"
        return str(vm["_power"])

    def view(self, vm: dict[str, Any], expand: bool) -> dict[str, Any]:
        out = {k: v for k, v in vm.items() if not k.startswith("_")}
        out["id"] = self._id("Microsoft.Compute/virtualMachines", vm["name"])
        out["type"] = "Microsoft.Compute/virtualMachines"
        out = json.loads(json.dumps(out))
        props = out["properties"]
        props["timeCreated"] = (_EPOCH + dt.timedelta(seconds=vm["_created"])).isoformat()
        props["networkProfile"] = {**props.get("networkProfile", {}), "networkInterfaces": [
            {"id": self._id("Microsoft.Network/networkInterfaces", n[0]), "properties": {"primary": True}}
            for n in vm["_nics"]]}
        if expand:
            prov = props["provisioningState"]
            codes = [f"ProvisioningState/{prov.lower()}"]
            if prov == "Failed":
                codes = [f"ProvisioningState/failed/{vm['_failure']}"]
            power = self._power(vm)
            if power:
                codes.append(f"PowerState/{power}")
            # As ARM: the provisioning status is dated (the last operation's end: the creation, or an
            # eviction's deallocation); the power status is not.
            when = (_EPOCH + dt.timedelta(seconds=vm.get("_stopped", vm["_created"]))).isoformat()
            props["instanceView"] = {"statuses": [{"code": c, "level": "Info", **(
                {"time": when} if c.startswith("ProvisioningState/") else {})} for c in codes]}
        return out

    # -- proximity placement groups ------------------------------------------------------------
    def ppg_members(self, name: str) -> list[str]:
        gid = self._id("Microsoft.Compute/proximityPlacementGroups", name).lower()
        return sorted(n for n, vm in self.vms.items()
                      if str(((vm["properties"].get("proximityPlacementGroup") or {}).get("id")) or "").lower() == gid)

    def _ppg_view(self, group: dict[str, Any]) -> dict[str, Any]:
        out = json.loads(json.dumps(group))
        out["properties"]["virtualMachines"] = [
            {"id": self._id("Microsoft.Compute/virtualMachines", n)} for n in self.ppg_members(group["name"])]
        return out

    def _ppg(self, method: str, name: str, body: dict[str, Any] | None) -> tuple[int, Any, dict[str, str]]:
        group = self.ppgs.get(name.lower())
        if method == "GET":
            return (200, self._ppg_view(group), {}) if group else _not_found("proximityPlacementGroups", name)
        if method == "PUT":
            body = body or {}
            created = group is None
            group = {"id": self._id("Microsoft.Compute/proximityPlacementGroups", name), "name": name,
                     "type": "Microsoft.Compute/proximityPlacementGroups", "location": body.get("location"),
                     "tags": body.get("tags") or {}, "properties": dict(body.get("properties") or {})}
            if body.get("zones"):
                group["zones"] = list(body["zones"])
            self.ppgs[name.lower()] = group
            return (201 if created else 200), self._ppg_view(group), {}
        if method == "DELETE":
            if group is None:
                return 204, None, {}
            if self.ppg_members(name):
                return 409, {"error": {"code": "OperationNotAllowed", "message": (
                    f"Proximity placement group {name} is referenced by VMs {self.ppg_members(name)}.")}}, {}
            del self.ppgs[name.lower()]
            return 200, None, {}
        return 405, {"error": {"code": "MethodNotAllowed", "message": method}}, {}

    def _ppg_refusal(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        gid = str(((body.get("properties") or {}).get("proximityPlacementGroup") or {}).get("id") or "")
        if not gid:
            return None
        group = self.ppgs.get(gid.rstrip("/").rsplit("/", 1)[-1].lower())
        if group is None:
            return 404, {"error": {"code": "NotFound", "message": f"Proximity placement group {gid} not found."}}, {}
        if group.get("location") != body.get("location") or (group.get("zones") or []) != (body.get("zones") or []):
            return 400, {"error": {"code": "BadRequest", "message": (
                f"The VM and proximity placement group {group['name']} must share location and zone.")}}, {}
        return None

    def _create(self, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        refused = self._ppg_refusal(body)
        if refused is not None:
            return refused
        props = body.get("properties") or {}
        size = (props.get("hardwareProfile") or {}).get("vmSize", "")
        region = body.get("location", "")
        spot = props.get("priority") == "Spot"
        failure = None
        for r in self.refusals:
            if r.matches(size, region, spot):
                if r.count is not None:
                    r.count -= 1
                if r.stage == "submit":
                    return r.status, {"error": {"code": r.code, "message": r.message}}, {}
                failure = r
                break
        nics = []
        for cfg in (props.get("networkProfile") or {}).get("networkInterfaceConfigurations") or ():
            n = next(self._addresses)
            ipcfg = cfg["properties"]["ipConfigurations"][0]["properties"]
            pub = ipcfg.get("publicIPAddressConfiguration")
            ip_name = pub["name"] if pub else None
            nic = {"id": self._id("Microsoft.Network/networkInterfaces", cfg["name"]), "name": cfg["name"],
                   "tags": cfg.get("tags") or {}, "properties": {"ipConfigurations": [{"name": "ipconfig1",
                   "properties": {"primary": True, "privateIPAddress": f"10.0.0.{n}",
                                  **({"publicIPAddress": {"id": self._id("Microsoft.Network/publicIPAddresses",
                                                                          ip_name)}} if pub else {})}}]}}
            self.nics[cfg["name"]] = nic
            if pub:
                self.ips[ip_name] = {"id": self._id("Microsoft.Network/publicIPAddresses", ip_name), "name": ip_name,
                                     "tags": pub.get("tags") or {}, "properties": {"ipAddress": f"203.0.113.{n}"}}
            nics.append((cfg["name"], cfg["properties"].get("deleteOption") == "Delete", ip_name,
                         bool(pub) and (pub.get("properties") or {}).get("deleteOption") == "Delete"))
        vm = json.loads(json.dumps(body))
        vm["name"] = name
        vm["properties"]["provisioningState"] = "Creating"
        vm["properties"]["vmId"] = str(uuid.uuid4())
        vm.update({"_created": self.clock, "_power": "running", "_nics": nics})
        self.vms[name] = vm
        op = uuid.uuid4().hex
        self.operations[op] = {"vm": name, "polls": self.op_polls, "failure": failure}
        return 201, self.view(vm, False), {"Azure-AsyncOperation": self._op_url(region, op)}

    def _op_url(self, region: str, op: str) -> str:
        return f"{self.url}/subscriptions/{self.subscription}/providers/Microsoft.Compute/locations/{region}" \
               f"/operations/{op}?api-version=2024-07-01"

    def _poll(self, op_id: str) -> dict[str, Any] | None:
        op = self.operations.get(op_id)
        if op is None:
            return None
        if op["polls"] > 0:
            op["polls"] -= 1
            return {"name": op_id, "status": "InProgress"}
        vm = self.vms.get(op["vm"])
        failure: Refusal | None = op["failure"]
        if failure is not None:
            if vm is not None and vm["properties"]["provisioningState"] == "Creating":
                vm["properties"]["provisioningState"] = "Failed"
                vm["_failure"] = failure.code
            return {"name": op_id, "status": "Failed", "error": {"code": failure.code, "message": failure.message}}
        if vm is not None and vm["properties"]["provisioningState"] == "Creating":
            vm["properties"]["provisioningState"] = "Succeeded"
            vm["_created"] = self.clock
        return {"name": op_id, "status": "Succeeded"}

    # -- disks ---------------------------------------------------------------------------------
    @staticmethod
    def _release(disk: dict[str, Any]) -> None:
        disk.pop("managedBy", None)
        disk["properties"]["diskState"] = "Unattached"

    def _disk(self, method: str, name: str, body: dict[str, Any] | None) -> tuple[int, Any, dict[str, str]]:
        disk = self.disks.get(name.lower())
        if method == "GET":
            return (200, disk, {}) if disk else _not_found("disks", name)
        if method == "PUT":
            if disk is not None:
                return 200, disk, {}
            body = body or {}
            props = body.get("properties") or {}
            disk = {"id": self._id("Microsoft.Compute/disks", name), "name": name, "type": "Microsoft.Compute/disks",
                    "location": body.get("location"), "tags": body.get("tags") or {},
                    "sku": {"name": (body.get("sku") or {}).get("name", "Standard_LRS")},
                    "properties": {"creationData": props.get("creationData") or {"createOption": "Empty"},
                                   "diskSizeGB": props.get("diskSizeGB"), "diskState": "Unattached",
                                   "provisioningState": "Succeeded",
                                   "timeCreated": self.now().isoformat()}}
            if body.get("zones"):
                disk["zones"] = list(body["zones"])
            self.disks[name.lower()] = disk
            return 200, disk, {}  # ARM's disks answer 200 (or 202), never 201
        if method == "DELETE":
            if disk is None:
                return 204, None, {}
            if disk.get("managedBy"):
                return 409, {"error": {"code": "OperationNotAllowed",
                                       "message": f"Disk {name} is attached to VM {disk['managedBy']}."}}, {}
            del self.disks[name.lower()]
            return 200, None, {}
        return 405, {"error": {"code": "MethodNotAllowed", "message": method}}, {}

    def _attach_detach(self, vm_name: str, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        vm = self.vms.get(vm_name)
        if vm is None:
            return _not_found("virtualMachines", vm_name)
        vm_id = self._id("Microsoft.Compute/virtualMachines", vm_name)
        vm_zones = vm.get("zones") or []
        data = vm["properties"].setdefault("storageProfile", {}).setdefault("dataDisks", [])
        for item in body.get("dataDisksToAttach") or ():
            disk = self.disks.get(str(item["diskId"]).rsplit("/", 1)[-1].lower())
            if disk is None:
                return _not_found("disks", str(item["diskId"]))
            if disk.get("location") != vm.get("location") or (disk.get("zones") or []) != vm_zones:
                return 400, {"error": {"code": "BadRequest", "message": (
                    f"Disk {disk['name']} cannot be attached to VM {vm_name}: the disk and the VM are not in the "
                    "same zone.")}}, {}
            holder = str(disk.get("managedBy") or "")
            if holder and holder.lower() != vm_id.lower():
                return 409, {"error": {"code": "OperationNotAllowed",
                                       "message": f"Disk '{disk['name']}' is already attached to VM '{holder}'."}}, {}
            if any(d.get("lun") == item.get("lun") and d["managedDisk"]["id"].lower() != disk["id"].lower()
                   for d in data):
                return 409, {"error": {"code": "InvalidParameter",
                                       "message": f"LUN {item.get('lun')} is already in use."}}, {}
            if not holder:
                disk["managedBy"] = vm_id
                disk["properties"]["diskState"] = "Attached"
                data.append({"lun": item.get("lun"), "name": disk["name"], "createOption": "Attach",
                             "managedDisk": {"id": disk["id"]}, "deleteOption": item.get("deleteOption", "Detach")})
        for item in body.get("dataDisksToDetach") or ():
            disk_id = str(item["diskId"]).lower()
            data[:] = [d for d in data if d["managedDisk"]["id"].lower() != disk_id]
            disk = self.disks.get(disk_id.rsplit("/", 1)[-1])
            if disk is not None and str(disk.get("managedBy", "")).lower() == vm_id.lower():
                self._release(disk)
        return 200, {"dataDisks": data}, {}

    # -- one request -----------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, str], headers: dict[str, str],
               body: dict[str, Any] | None) -> tuple[int, Any, dict[str, str]]:
        with self.lock:
            self.requests.append({"method": method, "path": path, "query": query, "headers": headers, "body": body})
            self._settle()
            auth = headers.get("authorization", "")
            if self.reject_tokens or auth != f"Bearer {self.token}":
                return 401, {"error": {"code": "InvalidAuthenticationToken",
                                       "message": "The access token is invalid."}}, {}
            injected = self._injected(method, path)
            if injected is not None:
                return injected
            if m := _OP.match(path):
                result = self._poll(m["op"])
                return (200, result, {}) if result else _not_found("operation", m["op"])
            if _SKUS.match(path):
                return self._skus(path, query)
            return self._resource(method, path, query, headers, body)

    def _injected(self, method: str, path: str) -> tuple[int, Any, dict[str, str]] | None:
        """The first of ``http_failures`` this request matches (counted down), as the answer; None: none."""
        for f in self.http_failures:
            if (f.count is None or f.count > 0) and (f.method is None or f.method == method) \
                    and (f.path is None or f.path in path):
                if f.count is not None:
                    f.count -= 1
                return f.status, {"error": {"code": f.code, "message": f"{f.code} (fake)"}}, f.headers
        return None

    def _skus(self, path: str, query: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        where = re.search(r"location eq '([^']+)'", query.get("$filter", ""))
        found = [x for x in self.resource_skus
                 if where is None or where[1] in [str(loc).lower() for loc in x.get("locations", [])]]
        start = int(query.get("$skiptoken", "0"))
        page: dict[str, Any] = {"value": found[start:start + self.page_size]}
        if start + self.page_size < len(found):
            q = urllib.parse.urlencode({**query, "$skiptoken": str(start + self.page_size)})
            page["nextLink"] = f"{self.url}{path}?{q}"
        return 200, page, {}

    def _resource(self, method: str, path: str, query: dict[str, str], headers: dict[str, str],
                  body: dict[str, Any] | None) -> tuple[int, Any, dict[str, str]]:
        """A resource of the subscription's resource group: VMs, NICs and IPs, disks, placement groups."""
        m = (_VM.match(path) or _VMS.match(path) or _NET.match(path) or _DISK.match(path) or _DISKS.match(path)
             or _ATTACH.match(path) or _PPG.match(path) or _PPGS.match(path))
        if m is None:
            return 400, {"error": {"code": "InvalidRequestUri", "message": f"fake ARM has no {path}"}}, {}
        if m["sub"].lower() != self.subscription:
            return 404, {"error": {"code": "SubscriptionNotFound",
                                   "message": f"The subscription '{m['sub']}' could not be found."}}, {}
        if m["rg"].lower() != self.resource_group.lower():
            return 404, {"error": {"code": "ResourceGroupNotFound",
                                   "message": f"Resource group '{m['rg']}' could not be found."}}, {}
        expand = query.get("$expand", "").lower() == "instanceview"
        if _ATTACH.match(path):
            return self._attach_detach(m["name"], body or {}) if method == "POST" else \
                (405, {"error": {"code": "MethodNotAllowed", "message": method}}, {})
        if _DISKS.match(path):
            return 200, {"value": [self.disks[k] for k in sorted(self.disks)]}, {}
        if _PPGS.match(path):
            return 200, {"value": [self._ppg_view(self.ppgs[k]) for k in sorted(self.ppgs)]}, {}
        if _PPG.match(path):
            return self._ppg(method, m["name"], body)
        if _DISK.match(path):
            return self._disk(method, m["name"], body)
        if _VMS.match(path):
            return self._vm_list(path, query, expand)
        if "kind" in m.groupdict():
            store = self.nics if m["kind"].lower() == "networkinterfaces" else self.ips
            item = store.get(m["name"])
            return (200, item, {}) if item else _not_found(m["kind"], m["name"])
        return self._vm(method, m["name"], headers, body, expand)

    def _vm_list(self, path: str, query: dict[str, str], expand: bool) -> tuple[int, Any, dict[str, str]]:
        names = sorted(self.vms)
        start = int(query.get("$skiptoken", "0"))
        page = names[start:start + self.page_size]
        out: dict[str, Any] = {"value": [self.view(self.vms[n], expand) for n in page]}
        if start + self.page_size < len(names):
            q = urllib.parse.urlencode({**query, "$skiptoken": str(start + self.page_size)})
            out["nextLink"] = f"{self.url}{path}?{q}"
        return 200, out, {}

    def _vm(self, method: str, name: str, headers: dict[str, str], body: dict[str, Any] | None,
            expand: bool) -> tuple[int, Any, dict[str, str]]:
        vm = self.vms.get(name)
        if method == "GET":
            return (200, self.view(vm, expand), {}) if vm else _not_found("virtualMachines", name)
        if method == "PUT":
            if vm is not None:
                if headers.get("if-none-match") == "*":
                    return 412, {"error": {"code": "PreconditionFailed",
                                           "message": f"The VM '{name}' exists already."}}, {}
                return 409, {"error": {"code": "OperationNotAllowed", "message": "updates are not faked"}}, {}
            return self._create(name, body or {})
        if method == "DELETE":
            return self._delete_vm(name, vm)
        return 405, {"error": {"code": "MethodNotAllowed", "message": method}}, {}

    def _delete_vm(self, name: str, vm: dict[str, Any] | None) -> tuple[int, Any, dict[str, str]]:
        if vm is None:
            return 204, None, {}
        if self.delete_s > 0:
            vm["properties"]["provisioningState"] = "Deleting"
            vm.setdefault("_deleted_at", self.clock + self.delete_s)
        else:
            self._remove(name)
        op = uuid.uuid4().hex
        self.operations[op] = {"vm": name, "polls": 0, "failure": None}
        url = self._op_url(vm["location"], op)
        return 202, None, {"Azure-AsyncOperation": url, "Location": url}

    # -- what tests look at ------------------------------------------------------------------
    def creates(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == "PUT"]


def _not_found(kind: str, name: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    return 404, {"error": {"code": "ResourceNotFound",
                           "message": f"The Resource 'Microsoft.Compute/{kind}/{name}' was not found."}}, {}


def _handler(arm: FakeArm) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, out, extra = arm.handle(self.command, urllib.parse.unquote(url.path), query, headers, body)
            data = json.dumps(out).encode() if out is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-ms-request-id", uuid.uuid4().hex)
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_DELETE = do_PATCH = do_POST = _serve

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
