"""Lambda Cloud's REST API through ``httpx``: one method per endpoint the adapter uses, each
retried under the adapter kit's one policy (throttling, 5xx, connection errors) and translated
at this boundary (errors.py). Shapes: the Lambda Cloud API reference
(https://docs-api.lambda.ai/api/cloud): every answer is ``{"data": ...}``.

The API key travels only in the ``Authorization: Bearer`` header; it is never logged or put in
an error message. Requests are limited to about one per second, launches to one per 12 seconds
(the reference's "Rate limiting"): a 429 is retried after its ``Retry-After`` by the policy, up
to its bounds, and then handed to the daemon as a TransientError ("not yet").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from gpuorch.provider import RetryPolicy, call_with_retries

from .errors import as_dict, translate, translate_status

log = logging.getLogger("gpuorch.lambda")
DEFAULT_ENDPOINT = "https://cloud.lambdalabs.com/api/v1"


class LambdaApi:
    def __init__(self, api_key: str, *, endpoint: str = DEFAULT_ENDPOINT, timeout_s: float = 30.0,
                 policy: RetryPolicy | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        import httpx

        self._http = httpx.Client(base_url=endpoint.rstrip("/"), timeout=timeout_s,
                                  headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"})
        self._policy = policy or RetryPolicy()
        self._sleep = sleep

    def _call(self, method: str, path: str, what: str, body: dict[str, Any] | None = None,
              retry: bool = True) -> Any:
        def once() -> Any:
            r = self._http.request(method, path, json=body)
            if r.status_code >= 400:
                raise translate_status(r.status_code, r.text, r.headers, what)
            return as_dict(r.json(), what).get("data")

        policy = self._policy if retry else RetryPolicy(max_attempts=1)
        return call_with_retries(once, what, translate, policy, log=log, sleep=self._sleep)

    # -- endpoints ------------------------------------------------------------------------------
    def instance_types(self) -> dict[str, Any]:
        """``GET /instance-types``: ``{name: {"instance_type": {...}, "regions_with_capacity_available": [...]}}``."""
        return as_dict(self._call("GET", "/instance-types", "list instance types"), "instance types")

    def instances(self) -> list[dict[str, Any]]:
        data = self._call("GET", "/instances", "list instances")
        if not isinstance(data, list):
            from gpuorch.errors import PermanentError

            raise PermanentError("lambda: list instances: the answer is not a list", code="Unparseable")
        return [as_dict(d, "instance") for d in data]

    def instance(self, instance_id: str) -> dict[str, Any]:
        return as_dict(self._call("GET", f"/instances/{_segment(instance_id)}", f"get instance {instance_id}"),
                       "instance")

    def launch(self, body: dict[str, Any]) -> list[str]:
        """``POST /instance-operations/launch``; the new instance ids. Not retried here: a lost
        answer may have launched, and only the provider's look-before-launch may repeat it."""
        data = self._call("POST", "/instance-operations/launch", f"launch {body.get('instance_type_name')}", body,
                          retry=False)
        ids = as_dict(data, "launch").get("instance_ids")
        return [str(i) for i in ids] if isinstance(ids, list) else []

    def terminate(self, instance_ids: list[str]) -> None:
        self._call("POST", "/instance-operations/terminate", f"terminate {', '.join(instance_ids)}",
                   {"instance_ids": instance_ids})

    def ssh_keys(self) -> list[dict[str, Any]]:
        data = self._call("GET", "/ssh-keys", "list SSH keys")
        return [as_dict(d, "ssh key") for d in data] if isinstance(data, list) else []

    def add_ssh_key(self, name: str, public_key: str) -> dict[str, Any]:
        return as_dict(self._call("POST", "/ssh-keys", f"add SSH key {name}", {"name": name, "public_key": public_key}),
                       "ssh key")

    def file_systems(self) -> list[dict[str, Any]]:
        data = self._call("GET", "/file-systems", "list file systems")
        return [as_dict(d, "file system") for d in data] if isinstance(data, list) else []

    def create_file_system(self, name: str, region: str) -> dict[str, Any]:
        """``POST /filesystems`` (``{"name", "region"}``): the new filesystem. Not retried on a lost
        answer: the caller looks for the name first on its next call."""
        return as_dict(self._call("POST", "/filesystems", f"create filesystem {name}",
                                  {"name": name, "region": region}, retry=False), "file system")

    def delete_file_system(self, fs_id: str) -> None:
        self._call("DELETE", f"/filesystems/{_segment(fs_id)}", f"delete filesystem {fs_id}")

    def close(self) -> None:
        self._http.close()


def _segment(instance_id: str) -> str:
    """An id as one path segment: Lambda's ids are hex; anything else is no instance of ours."""
    if not instance_id or not all(c.isalnum() or c in "-_" for c in instance_id):
        from gpuorch.errors import NotFoundError

        raise NotFoundError(f"lambda: {instance_id!r} is not a Lambda instance id", code="global/object-does-not-exist")
    return instance_id
