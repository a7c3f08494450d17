"""The one way the adapter calls ARM: through azure-mgmt-compute, retried, then translated.

azure-core's own retry policy is switched off (``retry_total=0``) so there is exactly one retry
policy, this one: throttling (429), 5xx and connection errors are retried with exponential
backoff and full jitter, bounded by attempts and total time, each retry logged; what still fails
becomes TransientError. Every other error is translated at once (``errors.translate``).
The SDK is imported here, only when the first client is built.

VMs are read and written as ARM's JSON (the SDK's models are mappings of it), so request
bodies and parsing stay pure functions over plain dicts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from gpuorch.errors import NotFoundError
from gpuorch.provider.retry import RetryPolicy, call_with_retries

from .config import AzureOptions
from .errors import translate

log = logging.getLogger("gpuorch.azure")
NETWORK_API_VERSION = "2024-05-01"  # the two Microsoft.Network reads (a VM's NIC and public IP)


class Arm:
    """One ``ComputeManagementClient`` for the configured subscription (thread-safe), made on first use."""

    def __init__(self, options: AzureOptions, *, credential: Any = None, policy: RetryPolicy | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.options = options
        self.credential = credential
        self.policy = policy or RetryPolicy(max_attempts=options.max_attempts, max_total_s=options.retry_max_s)
        self.sleep = sleep
        self._client: Any = None

    def token_credential(self) -> Any:
        """The credential ARM calls use: the one given, else ``DefaultAzureCredential`` (made once)."""
        if self.credential is None:
            from azure.identity import DefaultAzureCredential

            self.credential = DefaultAzureCredential()
        return self.credential

    @property
    def client(self) -> Any:
        """The SDK client (tests and tools; the adapter uses the methods below)."""
        if self._client is None:
            from azure.mgmt.compute import ComputeManagementClient

            credential = self.token_credential()
            kwargs: dict[str, Any] = {"retry_total": 0, "polling_interval": self.options.poll_interval_s,
                                      "user_agent": "gpuorch"}
            if self.options.endpoint:
                kwargs["base_url"] = self.options.endpoint
                kwargs["credential_scopes"] = ["https://management.azure.com/.default"]
            if self.options.connection_verify:
                kwargs["connection_verify"] = self.options.connection_verify
            self._client = ComputeManagementClient(credential, self.options.subscription_id, **kwargs)
        return self._client

    # -- VMs, as ARM JSON ----------------------------------------------------------------------
    def get_vm(self, name: str) -> dict[str, Any]:
        """The VM with its instance view. NotFoundError when ARM does not know it."""
        rg = self.options.resource_group
        vm = self.call(f"get VM {name}", lambda: self.client.virtual_machines.get(rg, name, expand="instanceView"))
        return vm.as_dict()

    def list_vms(self) -> list[dict[str, Any]]:
        """Every VM of the resource group, with instance views; a failure restarts the listing."""
        rg = self.options.resource_group
        return self.call(f"list VMs of {rg}", lambda: [
            vm.as_dict() for vm in self.client.virtual_machines.list(rg, expand="instanceView")])

    def begin_create(self, name: str, body: dict[str, Any]) -> Any:
        """Send the create (only if no VM has that name: ``If-None-Match: *``); return the SDK's
        poller, which follows the long-running operation. Raises ``Exists`` for a VM of that name."""
        from azure.core import MatchConditions

        rg = self.options.resource_group
        return self.call(f"create VM {name} in {body.get('location')}", lambda: self.client.virtual_machines
                         .begin_create_or_update(rg, name, body, match_condition=MatchConditions.IfMissing))

    def begin_delete(self, name: str) -> None:
        """Ask ARM to delete the VM (its NIC, IP and OS disk go with it); no wait. Quiet if unknown."""
        rg = self.options.resource_group
        try:
            self.call(f"delete VM {name}", lambda: self.client.virtual_machines.begin_delete(rg, name, polling=False))
        except NotFoundError:
            return

    # -- proximity placement groups of gangs (gang.py), as ARM JSON --------------------------
    def get_ppg(self, name: str) -> dict[str, Any]:
        """NotFoundError when ARM does not know it."""
        rg = self.options.resource_group
        return self.call(f"get proximity placement group {name}",
                         lambda: self.client.proximity_placement_groups.get(rg, name)).as_dict()

    def create_ppg(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create (or update) the group; ARM answers at once (no long-running operation)."""
        rg = self.options.resource_group
        return self.call(f"create proximity placement group {name} in {body.get('location')}",
                         lambda: self.client.proximity_placement_groups.create_or_update(rg, name, body)).as_dict()

    def list_ppgs(self) -> list[dict[str, Any]]:
        rg = self.options.resource_group
        return self.call(f"list proximity placement groups of {rg}", lambda: [
            g.as_dict() for g in self.client.proximity_placement_groups.list_by_resource_group(rg)])

    def delete_ppg(self, name: str) -> None:
        """Quiet if unknown; a ProviderError while a VM still references it."""
        rg = self.options.resource_group
        try:
            self.call(f"delete proximity placement group {name}",
                      lambda: self.client.proximity_placement_groups.delete(rg, name))
        except NotFoundError:
            return

    # -- managed disks (volumes.py), as ARM JSON ---------------------------------------------
    def get_disk(self, name: str) -> dict[str, Any]:
        """NotFoundError when ARM does not know it."""
        rg = self.options.resource_group
        return self.call(f"get disk {name}", lambda: self.client.disks.get(rg, name)).as_dict()

    def list_disks(self) -> list[dict[str, Any]]:
        """Every managed disk of the resource group (paged); a failure restarts the listing."""
        rg = self.options.resource_group
        return self.call(f"list disks of {rg}", lambda: [
            d.as_dict() for d in self.client.disks.list_by_resource_group(rg)])

    def create_disk(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create the disk and follow the create to its end (a blank disk takes seconds)."""
        rg = self.options.resource_group
        return self.call(f"create disk {name} in {body.get('location')}", lambda: self.client.disks
                         .begin_create_or_update(rg, name, body).result()).as_dict()

    def delete_disk(self, name: str) -> None:
        """Ask ARM to delete the disk; no wait. Quiet if unknown."""
        rg = self.options.resource_group
        try:
            self.call(f"delete disk {name}", lambda: self.client.disks.begin_delete(rg, name, polling=False))
        except NotFoundError:
            return

    def attach_detach(self, vm: str, body: dict[str, Any], wait_s: float) -> bool:
        """``attachDetachDataDisks`` on ``vm`` (``dataDisksToAttach``/``dataDisksToDetach``),
        followed for at most ``wait_s``; whether it finished (then the disk's ``managedBy`` shows it)."""
        rg = self.options.resource_group
        poller = self.call(f"attach/detach data disks of VM {vm}", lambda: self.client.virtual_machines
                           .begin_attach_detach_data_disks(rg, vm, body))

        def follow() -> bool:
            poller.wait(timeout=wait_s)
            if poller.done():
                poller.result()  # raises the operation's failure, if it failed
            return bool(poller.done())

        return bool(self.call(f"follow attach/detach of VM {vm}", follow))

    def resource_skus(self, region: str) -> list[dict[str, Any]]:
        """The subscription's resource SKUs in ``region`` (sizes, capabilities, zones, restrictions)."""
        return self.call(f"list resource SKUs of {region}", lambda: [
            s.as_dict() for s in self.client.resource_skus.list(filter=f"location eq '{region}'")])

    def get_resource(self, resource_id: str, api_version: str = NETWORK_API_VERSION) -> dict[str, Any]:
        """GET one ARM resource by id (the NIC and public IP ARM made for a VM) through the same
        client, credential and policies: azure-mgmt-compute has no Microsoft.Network operations,
        and two reads do not justify azure-mgmt-network. NotFoundError for 404."""
        from azure.core.exceptions import HttpResponseError
        from azure.core.rest import HttpRequest
        from azure.mgmt.core.exceptions import ARMErrorFormat

        def get() -> dict[str, Any]:
            request = HttpRequest("GET", resource_id, params={"api-version": api_version},
                                  headers={"Accept": "application/json"})
            response = self.client.send_request(request)
            if response.status_code >= 400:
                raise HttpResponseError(response=response, error_format=ARMErrorFormat)
            return response.json()

        return self.call(f"get {resource_id.rsplit('/', 2)[-2]} {resource_id.rsplit('/', 1)[-1]}", get)

    # -- the policy ----------------------------------------------------------------------------
    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` with the retry policy; raises gpuorch.errors only (``Exists`` aside)."""
        def translate_or_exists(e: Exception, what: str) -> Any:
            if _is_precondition_failed(e):  # If-None-Match: * on a name that exists
                raise Exists(what) from None
            return translate(e, what)

        return call_with_retries(fn, what, translate_or_exists, self.policy, log=log, sleep=self.sleep)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        close = getattr(self.credential, "close", None)
        if callable(close):
            close()


class Exists(Exception):
    """A create found a VM of that name already (``If-None-Match: *`` answered 412)."""


def _is_precondition_failed(e: BaseException) -> bool:
    return getattr(e, "status_code", None) == 412
