"""A Kubernetes API server for tests: ``kmock``'s emulator made real where gpuorch relies on it.

``kmock`` (PyPI, MIT) serves an in-memory Kubernetes-like API from aiohttp. Plain, it ignores
``labelSelector``, stamps no ``uid`` or ``resourceVersion``, answers ``generateName`` with a 500,
and sends its errors as ``application/json; charset=utf-8`` (which ``lightkube`` does not
recognise as a Status). ``KubeEmulator`` fixes those and adds what a pod's life needs, each as
the real API server does it (https://kubernetes.io/docs/reference/kubernetes-api/):

- create stamps ``uid``, ``namespace``, ``creationTimestamp`` and a counter ``resourceVersion``
  (bumped on every change), and fills ``name`` from ``generateName`` plus five characters;
- list and watch filter by ``labelSelector`` (equality ``=``, ``==``, ``!=``, existence ``k``,
  ``!k`` and the set forms ``k in (a,b)``, ``k notin (a,b)``: "Labels and Selectors");
- a graceful pod delete (a bound pod, no ``gracePeriodSeconds=0``) only marks the pod
  (``deletionTimestamp`` = now + grace, ``deletionGracePeriodSeconds``): its kubelet ends it
  ("Pod Lifecycle: Termination of Pods"); finalizers hold any object until they are removed;
- ``POST pods/<name>/eviction`` (the Eviction API a drain uses) is a graceful delete that adds the
  ``DisruptionTarget`` condition, reason ``EvictionByEvictionAPI`` ("Pod disruption conditions");
- ``pods/<name>/exec`` over a WebSocket (``v5.channel.k8s.io``/``v4.channel.k8s.io``: channel
  byte, stdin 0, stdout 1, stderr 2, status 3) runs through ``exec_handler`` (the fake kubelet);
- the request history (iterating the emulator, as kmock's assertions do) keeps the writes only:
  reads are dropped once answered (kmock's matching walks the whole history on every request);
- errors are ``Status`` objects with the real reasons (``NotFound``, ``AlreadyExists``,
  ``Forbidden``); ``forbid(namespace)`` refuses a namespace as RBAC would, ``reject_pods``
  answers pod creation as an exceeded ResourceQuota does (HTTP 403, "exceeded quota: ...").

``KubeServer`` runs one on 127.0.0.1 in a thread of its own and writes kubeconfig files for it.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import itertools
import json
import re
import secrets
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import rendering

# (namespace, pod, container, argv, stdin) -> (exit code, stdout, stderr); None: no such container.
ExecHandler = Callable[[str, str, str | None, list[str], bytes], "tuple[int, bytes, bytes] | None"]

POD_RESOURCES = ("v1/pods", "v1/nodes", "v1/namespaces", "v1/services", "v1/persistentvolumeclaims",
                 "v1/configmaps", "v1/events")
STDIN_QUIET_S = 2.0
SYSTEM_TOKEN = "system-kubelet"  # the fake kubelet's bearer token: RBAC (``forbid``) never applies to it
_EXEC_PATH = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec")
_VERBS = {"list": "list", "watch": "watch", "fetch": "get", "create": "create", "update": "patch",
          "delete": "delete"}
_REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "AlreadyExists", 410: "Gone",
            422: "Invalid", 500: "InternalError"}


def now_iso(delta_s: float = 0.0) -> str:
    at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=delta_s)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, message: str, reason: str | None = None, details: dict | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "code": code,
            "reason": reason or _REASONS.get(code, "Unknown"), "message": message, "details": details or {}}


def _json(body: dict[str, Any], status: int) -> aiohttp.web.Response:
    # Exactly ``application/json``: lightkube turns only that into an ApiError with the Status.
    return aiohttp.web.Response(body=json.dumps(body).encode(), status=status, content_type="application/json")


class ApiFailure(Exception):
    def __init__(self, code: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.body = _status(code, message, reason)
        self.code = code


# -- label selectors ---------------------------------------------------------------------------

_SET = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split_selector(text: str) -> list[str]:
    """Split on the commas outside ``(...)``."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p for p in [*parts, cur] if p.strip()]


def selector_matches(selector: str, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy the ``labelSelector`` text (every requirement, ANDed)."""
    for req in _split_selector(selector):
        if m := _SET.match(req):
            values = {v.strip() for v in m[3].split(",") if v.strip()}
            has = m[1] in labels and labels[m[1]] in values
            if has != (m[2] == "in"):
                return False
        elif "!=" in req:
            key, value = (s.strip() for s in req.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in req:
            key, value = (s.strip() for s in req.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif req.strip().startswith("!"):
            if req.strip()[1:].strip() in labels:
                return False
        elif req.strip() not in labels:
            return False
    return True


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesEmulator):
    """See the module docstring. ``exec_handler``: set by the fake kubelet."""

    exec_handler: ExecHandler | None = None
    _rv: Any = attrs.field(factory=lambda: itertools.count(1), init=False)
    _forbidden: set[str] = attrs.field(factory=set, init=False)
    _quota: dict[str, str] = attrs.field(factory=dict, init=False)

    # -- knobs (any thread) ------------------------------------------------------------------
    def forbid(self, namespace: str) -> None:
        """Every request into ``namespace`` gets 403 Forbidden, as a user without a Role there does."""
        self._forbidden.add(namespace)

    def reject_pods(self, namespace: str, message: str | None) -> None:
        """Pod creation in ``namespace`` gets 403 "exceeded quota" (None: accepted again)."""
        if message is None:
            self._quota.pop(namespace, None)
        else:
            self._quota[namespace] = message

    # -- the HTTP entry point -----------------------------------------------------------------
    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        m = _EXEC_PATH.fullmatch(raw_request.path)
        if m and raw_request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._exec(raw_request, m[1], m[2])
        return await super().__call__(raw_request)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        try:
            return await self._answer(request)
        finally:
            if request.method == kmock.method.GET:
                self._forget(request)

    def _forget(self, request: rendering.Request) -> None:
        """Drop a read from kmock's request history (kept for tests' assertions): kmock matches
        every request against the whole history, so a server that kept the fake kubelet's reads
        (about 20 a second) slowed down with every request it served."""
        history = self._requests
        for i in range(len(history) - 1, max(-1, len(history) - 512), -1):
            if history[i] is request:
                del history[i]
                return

    async def _answer(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        try:
            system = request.headers.get("Authorization") == f"Bearer {SYSTEM_TOKEN}"  # the fake kubelet
            if request.namespace is not None and request.namespace in self._forbidden and not system:
                plural = request.resource.plural if request.resource else "resource"
                verb = _VERBS.get(request.action.value.lower() if request.action else "", request.method.value.lower())
                raise ApiFailure(403, f'{plural} is forbidden: User "gpuorch" cannot {verb} '
                                      f'resource "{plural}" in API group "" in the namespace "{request.namespace}"')
            if request.resource is None:
                return await super()._handle(request)
            plural = request.resource.plural
            if request.method == kmock.method.POST and request.subresource == "eviction":
                return await self._delete_pod(request, evict=True)
            if request.action == kmock.action.CREATE and request.subresource is None:
                self._stamp_create(request, plural)
            elif request.action == kmock.action.UPDATE and isinstance(request.data, dict):
                request.data.setdefault("metadata", {})["resourceVersion"] = str(next(self._rv))
            elif request.action == kmock.action.DELETE and plural == "pods" and request.name:
                return await self._delete_pod(request, evict=False)
            return await super()._handle(request)
        except ApiFailure as e:
            return _json(e.body, e.code)

    def _stamp_create(self, request: rendering.Request, plural: str | None) -> None:
        if not isinstance(request.data, dict):
            raise ApiFailure(400, "the body is not a JSON object")
        meta = request.data.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiFailure(422, f"{plural}: metadata.name or metadata.generateName is required", "Invalid")
            alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the API server's: no vowels, no look-alikes
            meta["name"] = meta["generateName"] + "".join(secrets.choice(alphabet) for _ in range(5))
        if request.namespace:
            meta["namespace"] = request.namespace
        if plural == "pods" and request.namespace in self._quota:
            raise ApiFailure(403, f'pods "{meta["name"]}" is forbidden: exceeded quota: '
                                  f'{self._quota[request.namespace]}')
        key: Any = (request.resource, request.namespace or meta.get("namespace"), meta["name"])
        if key in self._objects and not self._objects[key].deleted:
            raise ApiFailure(409, f'{plural} "{meta["name"]}" already exists', "AlreadyExists")
        meta.update(uid=str(uuid.uuid4()), resourceVersion=str(next(self._rv)), creationTimestamp=now_iso())
        meta.pop("deletionTimestamp", None)

    async def _delete_pod(self, request: rendering.Request, *, evict: bool) -> aiohttp.web.StreamResponse:
        assert request.resource is not None
        key: Any = (request.resource, request.namespace, request.name)
        grace = request.params.get("gracePeriodSeconds")
        if grace is None and isinstance(request.data, dict):
            grace = request.data.get("gracePeriodSeconds", (request.data.get("deleteOptions") or {})
                                     .get("gracePeriodSeconds"))
        async with self._lock:
            if key not in self._objects or self._objects[key].deleted:
                raise ApiFailure(404, f'pods "{request.name}" not found', "NotFound")
            obj = self._objects[key]
            raw = copy.deepcopy(dict(obj.raw))
            meta, spec = raw.get("metadata", {}), raw.get("spec", {})
            grace_s = int(grace) if grace is not None else int(spec.get("terminationGracePeriodSeconds", 30))
            patch: dict[str, Any] = {"metadata": {"resourceVersion": str(next(self._rv))}}
            if evict:
                conditions = [c for c in (raw.get("status") or {}).get("conditions") or []
                              if c.get("type") != "DisruptionTarget"]
                conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                                   "message": "Eviction API: evicting", "lastTransitionTime": now_iso()})
                patch["status"] = {"conditions": conditions}
            bound = bool(spec.get("nodeName")) and (raw.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            if meta.get("deletionTimestamp") and grace_s > 0:
                pass  # already terminating: an earlier grace stands
            elif bound and grace_s > 0:  # graceful: the kubelet ends it, then deletes it with grace 0
                patch["metadata"].update(deletionTimestamp=now_iso(grace_s), deletionGracePeriodSeconds=grace_s)
            elif meta.get("finalizers"):
                patch["metadata"].update(deletionTimestamp=meta.get("deletionTimestamp") or now_iso(),
                                         deletionGracePeriodSeconds=0)
            else:
                obj.patch(patch)
                obj.delete()
                await self._buses[request.resource].put({"type": "DELETED", "object": obj.last.raw})
                return _json(dict(obj.last.raw), 200)
            obj.patch(patch)
            await self._buses[request.resource].put({"type": "MODIFIED", "object": obj.raw})
            if evict:
                return _json({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success"}, 201)
            return _json(dict(obj.raw), 200)

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        if isinstance(exc, ApiFailure):
            return _json(exc.body, exc.code)
        code = exc.status if isinstance(exc, kmock.KubernetesError) else 500
        message = (exc.message if isinstance(exc, kmock.KubernetesError) else None) or repr(exc)
        return _json(_status(code, message), code)

    # -- selectors -----------------------------------------------------------------------------
    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        result = await super()._serve_list(request)
        selector = request.params.get("labelSelector")
        assert isinstance(result, dict)
        if selector:
            result["items"] = [o for o in result["items"]
                               if selector_matches(selector, (o.get("metadata") or {}).get("labels") or {})]
        result["metadata"] = {"resourceVersion": str(next(self._rv))}
        return result

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        selector = request.params.get("labelSelector")
        async for event in super()._serve_watch(request):
            if selector and isinstance(event, dict):
                labels = ((event.get("object") or {}).get("metadata") or {}).get("labels") or {}
                if not selector_matches(selector, labels):
                    continue
            yield event

    # -- exec ----------------------------------------------------------------------------------
    async def _exec(self, raw_request: aiohttp.web.BaseRequest, namespace: str,
                    name: str) -> aiohttp.web.StreamResponse:
        ws = aiohttp.web.WebSocketResponse(protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"))
        await ws.prepare(raw_request)
        query = raw_request.query
        argv, stdin = list(query.getall("command", [])), b""
        if query.get("stdin") in ("true", "True", "1") and ws.ws_protocol == "v5.channel.k8s.io":
            # Stdin frames until the close-stdin signal (255, 0). The real server runs the command
            # meanwhile; this one takes all of stdin first, so a client that sends none is given
            # up on after a quiet while (lightkube asks for stdin even when it has none to send).
            while True:
                try:
                    msg = await ws.receive(timeout=STDIN_QUIET_S)
                except TimeoutError:
                    break
                if msg.type != aiohttp.WSMsgType.BINARY or msg.data[:2] == b"\xff\x00":
                    break
                if msg.data[:1] == b"\x00":
                    stdin += msg.data[1:]
        handler = self.exec_handler
        result = None
        if handler is not None and namespace not in self._forbidden:
            result = await asyncio.get_running_loop().run_in_executor(
                None, handler, namespace, name, query.get("container"), argv, stdin)
        if result is None:
            status = _status(400, f"unable to upgrade connection: container not found (pod {name!r} is not running)")
        else:
            code, out, err = result
            if out:
                await ws.send_bytes(b"\x01" + out)
            if err:
                await ws.send_bytes(b"\x02" + err)
            status = ({"metadata": {}, "status": "Success"} if code == 0 else
                      {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                       "message": f"command terminated with non-zero exit code: {code}",
                       "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}})
        await ws.send_bytes(b"\x03" + json.dumps(status).encode())
        await ws.close()
        return ws


class KubeServer:
    """A ``KubeEmulator`` served on 127.0.0.1 by a thread of its own (its own event loop).

    ``with KubeServer() as k8s: k8s.write_kubeconfig(path)``. Objects can be read and written from
    any thread through ``call`` (run on the server's loop), or through a real client.
    """

    def __init__(self, resources: tuple[str, ...] = POD_RESOURCES) -> None:
        self.resources = resources
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.emulator: KubeEmulator
        self.url = ""
        self._thread = threading.Thread(target=self._main, name="kube-emulator", daemon=True)

    def __enter__(self) -> KubeServer:
        self._thread.start()
        if not self._ready.wait(30) or self._error is not None:
            raise RuntimeError(f"the Kubernetes emulator did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as e:  # reported to the starting thread
            self._error = e
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with KubeEmulator() as emulator, kmock.Server(emulator) as server:
            for res in self.resources:
                emulator.resources[res] = {}  # type: ignore[assignment]
            self.emulator, self.url = emulator, str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the server's loop (where kmock's objects live) and return its result."""
        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def kubeconfig(self, contexts: dict[str, str] | None = None, current: str | None = None,
                   token: str = "kmock-token") -> dict[str, Any]:
        """A kubeconfig whose contexts (name -> namespace; default ``{"kmock": "default"}``) all
        point at this server, with a bearer token (checked only against ``SYSTEM_TOKEN``)."""
        contexts = contexts or {"kmock": "default"}
        return {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "kmock", "cluster": {"server": self.url}}],
            "users": [{"name": "kmock", "user": {"token": token}}],
            "contexts": [{"name": n, "context": {"cluster": "kmock", "user": "kmock", "namespace": ns}}
                         for n, ns in contexts.items()],
            "current-context": current or next(iter(contexts)),
        }

    def write_kubeconfig(self, path: Path, contexts: dict[str, str] | None = None,
                         current: str | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.kubeconfig(contexts, current)))
        return path
