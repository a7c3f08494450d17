"""A fake Vast.ai API on 127.0.0.1, built from the documented requests and answers, for the real
``vastai`` client (``VastClient(server_url=fake.url)``).

Pages it follows:
- search offers: ``POST /api/v0/bundles/`` with a filter dict (``{"gpu_name": {"in": [...]}, "num_gpus":
  {"eq": 1}, ...}``, plus ``order``/``type``/``limit``/``allocated_storage``) answering ``{"offers": [...]}``
  (https://docs.vast.ai/api-reference/search/search-offers);
- create instance: ``PUT /api/v0/asks/{id}/`` answering ``{"success": true, "new_contract": N}``
  (https://docs.vast.ai/api-reference/instances/create-instance); an ask already rented answers
  HTTP 410 ``{"success": false, "error": "no_such_ask", ...}``;
- show instances: ``GET /api/v1/instances/`` paged by ``limit``/``after_token`` with ``next_token``, and
  ``GET /api/v0/instances/{id}/?owner=me`` answering ``{"instances": {...} | null}``; instance fields and
  states (``actual_status``: null, ``loading``, ``running``, ``stopped``; ``intended_status``)
  from https://docs.vast.ai/sdk/python/reference/show-instances;
- destroy instance: ``DELETE /api/v0/instances/{id}/`` (https://docs.vast.ai/api-reference/instances/destroy-instance);
- ``GET /api/v0/users/current`` (vastai ``show_user``);
- errors ``{"success": false, "error": CODE, "msg": TEXT}``; 429 as plain text "API requests too
  frequent", without Retry-After (https://docs.vast.ai/api-reference/rate-limits-and-errors).

- volumes (docs.vast.ai/documentation/instances/storage/volumes; the CLI reference's "search volumes",
  "create volume", "show volumes", "delete volume", as the official client sends them): ``POST
  /api/v0/volumes/search/`` (one volume offer per machine of the market, ``machine_id``, at its host's
  ``storage_cost``, "storage cost in $/GB/month": the field list of vastai's ``search volumes``
  help, cli/commands/storage.py; the machine's asks' ``storage_cost``, ``storage_costs``),
  ``PUT /api/v0/volumes/`` (``{"size", "id": <volume offer>, "name"}``), ``GET /api/v0/volumes``
  (``{"volumes": [...]}``, ``owner=me``; no per-GB rate: docs.vast.ai/api-reference/volumes/list-volumes),
  ``DELETE /api/v0/volumes/?id=`` (refused, ``volume_in_use``,
  while an instance links it); an instance created with ``volume_info`` (``volume_id``,
  ``mount_path``, ``create_new: false``) only on the volume's machine.

- private images: create-instance's ``image_login``, the docker login arguments of ``vastai create
  instance --login`` (``-u USER -p PASSWORD HOST``; https://docs.vast.ai/cli/reference/create-instance,
  vastai's api/instances.py sends it as ``image_login``). A private image (``private_images``: image
  -> the user and password its registry takes) rented without a matching login is rented, as Vast
  rents it, but its host cannot pull it: the instance stays ``loading`` with docker's refusal in
  ``status_msg`` (a documented field of show-instances); the image lands in ``pull_denied``. A
  login is never answered back.

The instance side, for played instances: ``write``/``read`` a path on an instance as its job
would; a path under its volume's ``mount_path`` lands on the volume (``FakeVast.volume_files``),
which outlives the instance.

Injections: ``fail_next`` (a 429 or 5xx on the next calls), ``steal_on_rent`` (the ask vanishes
between the search and the launch: somebody rents it first), ``outbid`` (a higher bid pauses an
interruptible instance: ``actual_status`` ``stopped`` while ``intended_status`` stays ``running``),
``never_running`` (instances stay ``loading``), ``credit`` (0: ``insufficient_credit``). A destroyed
instance's machine is listed again (its ask back), as a host's machine is once its renter leaves.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

KEY = "fake-vast-key-0123456789abcdef"


def ask(ask_id: int, gpu_name: str = "RTX 4090", *, num_gpus: int = 1, gpu_ram: int = 24564, dph: float = 0.40,
        min_bid: float = 0.20, reliability: float = 0.99, geolocation: str = "Texas, US", cpu: float = 16,
        cpu_ram: int = 65536, verified: bool = True, storage_cost: float = 0.15) -> dict[str, Any]:
    """One ask as the search answers it (the documented fields gpuorch reads, and a few more)."""
    return {"id": ask_id, "ask_contract_id": ask_id, "machine_id": 10_000 + ask_id, "host_id": 500 + ask_id,
            "gpu_name": gpu_name, "num_gpus": num_gpus, "gpu_ram": gpu_ram, "gpu_total_ram": gpu_ram * num_gpus,
            "cpu_cores": cpu * 2, "cpu_cores_effective": cpu, "cpu_ram": cpu_ram, "disk_space": 500.0,
            "dph_base": round(dph - 0.01, 6), "dph_total": dph, "min_bid": min_bid, "reliability2": reliability,
            "reliability": reliability, "geolocation": geolocation, "inet_down": 900.0, "inet_up": 800.0,
            "verified": verified, "rentable": True, "rented": False, "external": False, "is_bid": False,
            "direct_port_count": 10, "storage_cost": storage_cost}


def market() -> list[dict]:
    """A small marketplace: RTX 4090s in two countries at different prices and reliabilities, an
    A100 80GB, an unreliable cheap host, and an A100 40GB (memory tells the variant)."""
    return [
        ask(101, "RTX 4090", dph=0.40, min_bid=0.20, reliability=0.99, geolocation="Texas, US"),
        ask(102, "RTX 4090", dph=0.38, min_bid=0.18, reliability=0.90, geolocation="Oregon, US"),  # below 0.95
        ask(103, "RTX 4090", dph=0.39, min_bid=0.19, reliability=0.96, geolocation="Quebec, CA"),
        ask(104, "RTX 4090", dph=0.41, min_bid=0.22, reliability=0.999, geolocation="Texas, US"),
        ask(201, "A100 SXM4", gpu_ram=81920, dph=1.20, min_bid=0.70, reliability=0.98, geolocation="Sweden, SE"),
        ask(202, "A100 SXM4", gpu_ram=40960, dph=0.80, min_bid=0.40, reliability=0.97, geolocation="Sweden, SE"),
        ask(301, "RTX 4090", num_gpus=2, dph=0.82, min_bid=0.40, reliability=0.99, geolocation="Texas, US"),
    ]


def _matches(value: Any, cond: Any) -> bool:
    if not isinstance(cond, dict):
        return value == cond
    for op, want in cond.items():
        if op == "eq" and value != want or op == "neq" and value == want:
            return False
        if op in ("in", "notin") and isinstance(want, list):
            hit = value in want or (isinstance(value, str) and any(value.endswith(f", {w}") or value == w
                                                                   for w in want))
            if hit != (op == "in"):
                return False
        if op in ("gte", "gt", "lte", "lt"):
            if not isinstance(value, int | float):
                return False
            if (op == "gte" and value < want) or (op == "gt" and value <= want) or \
                    (op == "lte" and value > want) or (op == "lt" and value >= want):
                return False
    return True


_CONTROL = {"order", "type", "limit", "allocated_storage", "disable_bundling"}


@dataclass
class FakeVast:
    asks: dict[int, dict[str, Any]] = field(default_factory=dict)
    instances: dict[int, dict[str, Any]] = field(default_factory=dict)
    boot_s: float = 0.0
    credit: float = 100.0
    never_running: bool = False
    steal_on_rent: int = 0  # the next N rents find their ask gone
    ssh_endpoint: Callable[[dict[str, Any]], tuple[str, int]] = lambda row: ("127.0.0.1", 1)
    calls: list[tuple[str, str]] = field(default_factory=list)
    rented_images: list[str] = field(default_factory=list)  # the ``image`` of each instance created, in order
    _fail: list[tuple[str, int, str]] = field(default_factory=list)
    _next_id: int = 4_000_000
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""
    volumes: dict[int, dict[str, Any]] = field(default_factory=dict)
    volume_files: dict[int, dict[str, bytes]] = field(default_factory=dict)
    private_images: dict[str, tuple[str, str]] = field(default_factory=dict)  # image -> (user, password)
    pull_denied: list[str] = field(default_factory=list)  # private images rented without their login
    logins: dict[int, str] = field(default_factory=dict)  # instance id -> the image_login it was created with
    # machine id -> its host's storage price ($/GB-month), from its asks' storage_cost: what its volume offer asks
    storage_costs: dict[int, Any] = field(default_factory=dict)

    # -- injections --------------------------------------------------------------------------
    def fail_next(self, n: int = 1, status: int = 429, path: str = "/",
                  body: str = "API requests too frequent") -> None:
        with self.lock:
            self._fail += [(path, status, body)] * n

    def outbid(self, instance_id: int | str) -> None:
        """A higher bid takes the machine: the container is paused, the renter's intent unchanged."""
        with self.lock:
            row = self.instances[int(instance_id)]
            row.update(actual_status="stopped", cur_state="stopped", status_msg="outbid by a higher bid")

    def add(self, *asks: dict[str, Any]) -> None:
        with self.lock:
            for a in asks:
                self.asks[a["id"]] = a
                if "storage_cost" in a:
                    self.storage_costs[a["machine_id"]] = a["storage_cost"]

    def take_all(self, gpu_name: str | None = None) -> None:
        """Every ask (of one card) rented by somebody else."""
        with self.lock:
            for a in list(self.asks.values()):
                if gpu_name is None or a["gpu_name"] == gpu_name:
                    del self.asks[a["id"]]

    def create_foreign(self, label: str = "my-notebook") -> int:
        """An instance somebody made by hand on the same account."""
        with self.lock:
            return self._new_instance(next(iter(self.asks.values())), {"label": label, "image": "x"})

    def _on_volume(self, instance_id: str, path: str) -> tuple[dict[str, bytes], str]:
        with self.lock:
            info = self.instances[int(instance_id)].get("_volume") or {}
            mount = str(info.get("mount_path") or "").rstrip("/")
            if not info or not path.startswith(mount + "/"):
                raise FileNotFoundError(f"{path} is on no volume of instance {instance_id}")
            return self.volume_files.setdefault(int(info["volume_id"]), {}), path[len(mount) + 1:]

    def write(self, instance_id: str, path: str, data: bytes) -> None:
        files, name = self._on_volume(instance_id, path)
        files[name] = data

    def read(self, instance_id: str, path: str) -> bytes | None:
        files, name = self._on_volume(instance_id, path)
        return files.get(name)

    # -- the API -------------------------------------------------------------------------------
    def _new_instance(self, a: dict[str, Any], body: dict[str, Any]) -> int:
        self._next_id += 1
        iid = self._next_id
        self.rented_images.append(str(body.get("image")))
        row = {
            "id": iid, "machine_id": a["machine_id"], "label": body.get("label"), "image_uuid": body.get("image"),
            "onstart": body.get("onstart"), "actual_status": None, "intended_status": "running", "cur_state": "running",
            "next_state": "running", "status_msg": "creating", "is_bid": body.get("price") is not None,
            "bid_price": body.get("price"), "gpu_name": a["gpu_name"], "num_gpus": a["num_gpus"],
            "gpu_ram": a["gpu_ram"], "cpu_cores_effective": a["cpu_cores_effective"], "cpu_ram": a["cpu_ram"],
            "disk_space": body.get("disk"), "geolocation": a["geolocation"],
            "dph_total": body.get("price") or a["dph_total"],
            "start_date": time.time(), "end_date": None, "ssh_host": None, "ssh_port": None, "public_ipaddr": None,
            "extra_env": [[k, v] for k, v in (body.get("env") or {}).items()], "_created": time.monotonic(),
            "_volume": body.get("volume_info"), "_ask": dict(a),
        }
        self.instances[iid] = row
        if body.get("image_login"):
            self.logins[iid] = str(body["image_login"])
        if not self._pulls(str(body.get("image")), str(body.get("image_login") or "")):
            self.pull_denied.append(str(body.get("image")))
            row["_denied"] = True
        return iid

    def _pulls(self, image: str, login: str) -> bool:
        """Whether the host's docker can pull ``image``: public, or logged in to its registry."""
        if image not in self.private_images:
            return True
        user, password = self.private_images[image]
        host = image.split("/")[0] if "." in image.split("/")[0] else "docker.io"
        return login.split() == ["-u", user, "-p", password, host]

    def _observe(self, row: dict[str, Any]) -> dict[str, Any]:
        if row.get("_denied"):
            image = row["image_uuid"]
            row.update(actual_status="loading", status_msg=f"Error response from daemon: pull access denied for "
                                                           f"{image}, repository does not exist or may require "
                                                           "'docker login'")
        elif row["actual_status"] in (None, "loading") and not self.never_running:
            if time.monotonic() - row["_created"] >= self.boot_s:
                host, port = self.ssh_endpoint(row)
                row.update(actual_status="running", status_msg="success, running", ssh_host=host, ssh_port=port,
                           public_ipaddr=host)
            else:
                row.update(actual_status="loading", status_msg="pulling image")
        elif row["actual_status"] is None:
            row.update(actual_status="loading", status_msg="pulling image")
        return {k: v for k, v in row.items() if not k.startswith("_")}

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any,
               auth: str | None) -> tuple[int, Any]:
        with self.lock:
            self.calls.append((method, path))
            for i, (prefix, status, text) in enumerate(self._fail):
                if path.startswith(prefix):
                    del self._fail[i]
                    return status, text
            if auth != f"Bearer {KEY}":
                return 401, {"success": False, "error": "auth_error", "msg": "Invalid user key"}
            return self._route(method, path, query, body)

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        if method == "POST" and parts == ["api", "v0", "bundles"]:
            q = body or {}
            found = [dict(a) for a in self.asks.values()
                     if all(_matches(a.get(k), v) for k, v in q.items() if k not in _CONTROL)]
            found.sort(key=lambda a: a["dph_total"])
            if q.get("type") == "bid":
                for a in found:
                    a["is_bid"] = True
            return 200, {"offers": found[: int(q.get("limit") or 64)]}
        if method == "PUT" and parts[:3] == ["api", "v0", "asks"] and len(parts) == 4:
            return self._rent(int(parts[3]), body or {})
        if method == "GET" and parts == ["api", "v1", "instances"]:
            limit = int(json.loads(query.get("limit", ["25"])[0]))
            after = int(json.loads(query.get("after_token", ["0"])[0]))
            rows = [self._observe(r) for iid, r in sorted(self.instances.items()) if iid > after]
            page = rows[:limit]
            more = len(rows) > limit
            return 200, {"instances": page, "next_token": page[-1]["id"] if more else None,
                         "total_instances": len(self.instances)}
        if parts[:3] == ["api", "v0", "instances"] and len(parts) == 4 and parts[3].isdigit():
            row = self.instances.get(int(parts[3]))
            if method == "GET":
                return 200, {"instances": self._observe(row) if row else None}
            if method == "DELETE":
                if row is None:
                    return 404, {"success": False, "error": "no_such_instance", "msg": "Instance not found"}
                del self.instances[int(parts[3])]
                if row["_ask"]["machine_id"] not in {a["machine_id"] for a in self.asks.values()}:
                    self.asks[row["_ask"]["id"]] = row["_ask"]  # its host's machine is for rent again
                return 200, {"success": True}
        if parts[:3] == ["api", "v0", "volumes"]:
            return self._volume_route(method, parts[3:], query, body or {})
        if method == "GET" and parts == ["api", "v0", "users", "current"]:
            return 200, {"id": 7, "username": "fine-tuner", "email": "ft@example.com", "credit": self.credit,
                         "api_key": KEY}
        return 404, {"success": False, "error": "not_found", "msg": f"no route {method} {path}"}


    def _rent(self, ask_id: int, body: dict[str, Any]) -> tuple[int, Any]:
        refused = self._volume_refusal(self.asks.get(ask_id), body.get("volume_info"))
        if refused is not None:
            return refused
        a = self.asks.get(ask_id)
        if a is not None and self.steal_on_rent > 0:
            self.steal_on_rent -= 1
            del self.asks[a["id"]]
            a = None
        if a is None:
            return 410, {"success": False, "error": "no_such_ask", "msg": f"Instance type by id {ask_id} "
                                                                               "is not available."}
        if self.credit <= 0:
            return 402, {"success": False, "error": "insufficient_credit", "msg": "Your account lacks credit"}
        del self.asks[a["id"]]
        return 200, {"success": True, "new_contract": self._new_instance(a, body)}

    def _volume_refusal(self, a: dict[str, Any] | None, info: Any) -> tuple[int, Any] | None:
        if a is None or not info:
            return None
        vol = self.volumes.get(int(info.get("volume_id") or 0)) if isinstance(info, dict) else None
        if vol is None or info.get("create_new") or not info.get("mount_path"):
            return 400, {"success": False, "error": "invalid_args", "msg": "volume_info names no volume of yours"}
        if vol["machine_id"] != a["machine_id"]:
            return 400, {"success": False, "error": "invalid_args",
                         "msg": f"volume {vol['id']} is on machine {vol['machine_id']}, not {a['machine_id']}"}
        return None

    def _volume_route(self, method: str, rest: list[str], query: dict[str, list[str]],
                      body: dict[str, Any]) -> tuple[int, Any]:
        if method == "POST" and rest == ["search"]:
            machines = sorted({a["machine_id"] for a in self.asks.values()}
                              | {r["machine_id"] for r in self.instances.values()})
            offers = [{"id": 500_000 + m, "machine_id": m, "disk_space": 1000.0, "reliability2": 0.99,
                       "storage_cost": self.storage_costs.get(m, 0.15), "verified": True} for m in machines]
            return 200, {"offers": [o for o in offers if _matches(o["machine_id"], body.get("machine_id"))
                                    or "machine_id" not in body]}
        if method == "PUT" and not rest:
            machine, size = int(body.get("id") or 0) - 500_000, body.get("size")
            if machine < 0 or not isinstance(size, int) or size < 1:
                return 400, {"success": False, "error": "invalid_args", "msg": "no such volume offer or size"}
            vid = 7_000_000 + len(self.volumes) + 1
            self.volumes[vid] = {"id": vid, "name": body.get("name"), "machine_id": machine, "disk_space": size,
                                 "status": "online", "start_date": time.time()}
            return 200, {"success": True, "id": vid}
        if method == "GET" and not rest:
            return 200, {"volumes": [dict(v) for v in self.volumes.values()]}
        if method == "DELETE" and not rest:
            vid = int(json.loads(query.get("id", ["0"])[0]))
            if vid not in self.volumes:
                return 404, {"success": False, "error": "no_such_volume", "msg": "Volume not found"}
            if any((r.get("_volume") or {}).get("volume_id") == vid for r in self.instances.values()):
                return 400, {"success": False, "error": "volume_in_use", "msg": "Volume is in use by an instance"}
            del self.volumes[vid]
            return 200, {"success": True}
        return 404, {"success": False, "error": "not_found", "msg": f"no route {method} volumes/{rest}"}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeVast

    def log_message(self, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        status, answer = self.fake.handle(self.command, parts.path, parse_qs(parts.query), body,
                                          self.headers.get("Authorization"))
        data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _serve


class FakeVastServer:
    def __init__(self, fake: FakeVast | None = None) -> None:
        self.fake = fake or FakeVast()
        handler = type("Handler", (_Handler,), {"fake": self.fake})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.fake.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
