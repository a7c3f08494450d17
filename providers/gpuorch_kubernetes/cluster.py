"""One region's API calls (lightkube, imported lazily) and their errors in the domain tree.

Translation (https://kubernetes.io/docs/reference/using-api/api-concepts/, "Status" reasons):
401 and a 403 without a quota are ``AuthError`` (the message names the namespace and the Role),
a 403 "exceeded quota" is ``QuotaError``, 404 ``NotFoundError``, 400/422 ``PermanentError``,
429, 5xx and a connection failure ``TransientError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from gpuorch.errors import AuthError, NotFoundError, PermanentError, ProviderError, QuotaError, TransientError

from .config import Region

T = TypeVar("T")
TIMEOUT_S = 15.0


def translate(e: Exception, what: str, namespace: str) -> ProviderError:
    import httpx2
    from lightkube import ApiError

    if isinstance(e, ApiError):
        code, message = e.status.code or 0, e.status.message or str(e)
        if code == 403 and "exceeded quota" in message:
            return QuotaError(f"{what}: {message}", code="ExceededQuota")
        if code in (401, 403):
            return AuthError(f"{what}: {message} (namespace {namespace}; grant the Role in docs/kubernetes.md)",
                             code=e.status.reason or "Forbidden")
        if code == 404:
            return NotFoundError(f"{what}: {message}", code="NotFound")
        if code == 429 or code >= 500:
            return TransientError(f"{what}: {message}", code=e.status.reason or str(code))
        return PermanentError(f"{what}: {message}", code=e.status.reason or str(code))
    if isinstance(e, httpx2.HTTPError | OSError):
        return TransientError(f"{what}: {type(e).__name__}: {e}", code="Unreachable")
    raise e


class Cluster:
    """A lightkube Client for one region (context and namespace)."""

    def __init__(self, region: Region) -> None:
        self.region = region
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            import httpx2
            from lightkube import Client

            self._client = Client(config=self.region.config, namespace=self.region.namespace,
                                  timeout=httpx2.Timeout(TIMEOUT_S), field_manager="gpuorch")
        return self._client

    def call(self, what: str, fn: Callable[[Any], T]) -> T:
        try:
            return fn(self.client)
        except Exception as e:  # translated, or re-raised when not an API error
            raise translate(e, f"{self.region.name}: {what}", self.region.namespace) from None

    def pods(self, selector: dict[str, str] | None = None, *, all_namespaces: bool = False) -> list[dict[str, Any]]:
        from lightkube.resources.core_v1 import Pod

        ns = "*" if all_namespaces else self.region.namespace
        return self.call("list pods", lambda c: [p.to_dict() for p in c.list(Pod, namespace=ns, labels=selector)])

    def nodes(self) -> list[dict[str, Any]]:
        from lightkube.resources.core_v1 import Node

        return self.call("list nodes", lambda c: [n.to_dict() for n in c.list(Node)])

    def node(self, name: str) -> dict[str, Any] | None:
        from lightkube.resources.core_v1 import Node

        try:
            return self.call(f"get node {name}", lambda c: c.get(Node, name).to_dict())
        except NotFoundError:
            return None

    def pod(self, name: str) -> dict[str, Any]:
        from lightkube.resources.core_v1 import Pod

        return self.call(f"get pod {name}", lambda c: c.get(Pod, name).to_dict())

    def create_pod(self, manifest: dict[str, Any]) -> dict[str, Any] | None:
        """The created pod, or None when one of that name exists (HTTP 409: adopt it)."""
        return self._create("Pod", manifest)

    def patch_pod(self, name: str, patch: dict[str, Any]) -> None:
        from lightkube.resources.core_v1 import Pod
        from lightkube.types import PatchType

        self.call(f"patch pod {name}", lambda c: c.patch(Pod, name, patch, patch_type=PatchType.MERGE))

    def delete_pod(self, name: str, grace_s: int | None = None) -> None:
        from lightkube.resources.core_v1 import Pod

        try:
            self.call(f"delete pod {name}", lambda c: c.delete(Pod, name, grace_period=grace_s))
        except NotFoundError:
            pass

    def services(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        from lightkube.resources.core_v1 import Service

        return self.call("list services", lambda c: [s.to_dict() for s in c.list(Service, labels=selector)])

    def create_service(self, manifest: dict[str, Any]) -> None:
        """Create the Service; quiet when one of that name exists (HTTP 409: a repeat)."""
        self._create("Service", manifest)

    def delete_service(self, name: str) -> None:
        from lightkube.resources.core_v1 import Service

        try:
            self.call(f"delete service {name}", lambda c: c.delete(Service, name))
        except NotFoundError:
            pass

    def claims(self, selector: dict[str, str]) -> list[dict[str, Any]]:
        from lightkube.resources.core_v1 import PersistentVolumeClaim as Pvc

        return self.call("list persistentvolumeclaims", lambda c: [v.to_dict() for v in c.list(Pvc, labels=selector)])

    def claim(self, name: str) -> dict[str, Any]:
        from lightkube.resources.core_v1 import PersistentVolumeClaim as Pvc

        return self.call(f"get persistentvolumeclaim {name}", lambda c: c.get(Pvc, name).to_dict())

    def create_claim(self, manifest: dict[str, Any]) -> dict[str, Any] | None:
        """The created claim, or None when one of that name exists (HTTP 409)."""
        return self._create("PersistentVolumeClaim", manifest)

    def delete_claim(self, name: str) -> None:
        from lightkube.resources.core_v1 import PersistentVolumeClaim as Pvc

        try:
            self.call(f"delete persistentvolumeclaim {name}", lambda c: c.delete(Pvc, name))
        except NotFoundError:
            pass

    def _create(self, kind: str, manifest: dict[str, Any]) -> dict[str, Any] | None:
        """Create a core/v1 object of ``kind``: the created object, or None on a 409."""
        from lightkube import ApiError
        from lightkube.resources import core_v1

        what = f"{self.region.name}: create {kind.lower()} {manifest['metadata']['name']}"
        try:
            created: dict[str, Any] = self.client.create(getattr(core_v1, kind).from_dict(manifest)).to_dict()
            return created
        except ApiError as e:
            if e.status.code == 409:
                return None
            raise translate(e, what, self.region.namespace) from None
        except Exception as e:
            raise translate(e, what, self.region.namespace) from None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
