"""The GCE clients and the one way the adapter calls them: retried, then translated.

The SDK's own retries are switched off (``retry=None``) so there is exactly one retry policy,
this one: throttling, 5xx and connection errors are retried with exponential backoff and full
jitter, bounded by attempts and total time, each retry logged; what still fails becomes
TransientError. Every other error is translated at once (``errors.translate``), never retried.
Responses come back as plain dicts (``to_dict``, snake_case, enums by name) for ``parse``.

Operations are polled with ``ZoneOperationsClient.wait`` (GCE holds each call up to ~2 min),
never ``ExtendedOperation.result()``: that polls through a hidden client that ignores the
configured endpoint.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from gpuorch.provider.retry import RetryPolicy, call_with_retries

from .errors import translate

log = logging.getLogger("gpuorch.gcp")


def as_dict(message: Any) -> dict[str, Any]:
    return type(message).to_dict(message, use_integers_for_enums=False,
                                   always_print_fields_with_no_presence=False) \
        if hasattr(type(message), "to_dict") else dict(message)


class Gce:
    """Instances and operations clients of one project (REST transport; thread-safe)."""

    def __init__(self, project: str, *, endpoint: str | None = None, credentials: Any = None,
                 billing_endpoint: str | None = None,
                 policy: RetryPolicy | None = None, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        from google.cloud import compute_v1

        self.compute_v1 = compute_v1
        self.project = project
        self.policy = policy or RetryPolicy()
        self.sleep, self.monotonic = sleep, monotonic
        kwargs: dict[str, Any] = {"transport": "rest"}
        if endpoint:
            kwargs["client_options"] = {"api_endpoint": endpoint}
            if credentials is None:  # a local fake: never look for (or send) real credentials
                from google.auth.credentials import AnonymousCredentials

                credentials = AnonymousCredentials()
        if credentials is not None:
            kwargs["credentials"] = credentials
        self.credentials = credentials  # None: google-auth's standard chain, resolved by the clients
        self._kwargs, self._billing_endpoint = kwargs, billing_endpoint
        self._billing: Any = None  # the CloudCatalogClient, made on the first refresh
        self.instances = compute_v1.InstancesClient(**kwargs)
        self.disks = compute_v1.DisksClient(**kwargs)
        self.zone_operations = compute_v1.ZoneOperationsClient(**kwargs)
        self.global_operations = compute_v1.GlobalOperationsClient(**kwargs)
        self._policies: Any = None  # ResourcePoliciesClient and RegionOperationsClient, made for the first gang
        self._region_operations: Any = None

    # -- calls -------------------------------------------------------------------------------
    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` under the retry policy; raises gpuorch.errors only."""
        return call_with_retries(fn, what, translate, self.policy, log=log, sleep=self.sleep)

    def insert(self, zone: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        resource = self.compute_v1.Instance(body)
        op = self.call(f"gce instances.insert {body.get('name')} in {zone}", lambda: self.instances.insert_unary(
            request={"project": self.project, "zone": zone, "instance_resource": resource, "request_id": request_id},
            retry=None))
        return as_dict(op)

    def get(self, zone: str, name: str) -> dict[str, Any]:
        return as_dict(self.call(f"gce instances.get {zone}/{name}", lambda: self.instances.get(
            project=self.project, zone=zone, instance=name, retry=None)))

    def guest_attributes(self, zone: str, name: str, query_path: str) -> dict[str, Any]:
        """``instances.getGuestAttributes`` under ``query_path`` (e.g. ``hostkeys/``); NotFoundError
        while nothing is published there (or the VM is gone)."""
        return as_dict(self.call(f"gce instances.getGuestAttributes {zone}/{name} {query_path}",
                                 lambda: self.instances.get_guest_attributes(request={
                                     "project": self.project, "zone": zone, "instance": name,
                                     "query_path": query_path}, retry=None)))

    def delete(self, zone: str, name: str, request_id: str | None = None) -> dict[str, Any]:
        req: dict[str, Any] = {"project": self.project, "zone": zone, "instance": name}
        if request_id:
            req["request_id"] = request_id
        return as_dict(self.call(f"gce instances.delete {zone}/{name}",
                                 lambda: self.instances.delete_unary(request=req, retry=None)))

    def list_zone(self, zone: str, filter_: str) -> list[dict[str, Any]]:
        """Every instance of ``zone`` matching ``filter_`` (all pages; a failure restarts it)."""
        request = self.compute_v1.ListInstancesRequest(project=self.project, zone=zone, filter=filter_)
        return self.call(f"gce instances.list in {zone}",
                         lambda: [as_dict(i) for i in self.instances.list(request=request, retry=None)])

    def list_aggregated(self, filter_: str) -> list[dict[str, Any]]:
        """Every instance of the project, in every zone, matching ``filter_``."""
        request = self.compute_v1.AggregatedListInstancesRequest(project=self.project, filter=filter_)

        def listing() -> list[dict[str, Any]]:
            pager = self.instances.aggregated_list(request=request, retry=None)
            return [as_dict(i) for _, scoped in pager for i in scoped.instances]

        return self.call("gce instances.aggregatedList", listing)

    def operations(self, filter_: str, zone: str | None = None) -> list[dict[str, Any]]:
        """Operations matching ``filter_``: of one zone, or of every zone (aggregated)."""
        if zone is not None:
            zreq = self.compute_v1.ListZoneOperationsRequest(project=self.project, zone=zone, filter=filter_)
            return self.call(f"gce zoneOperations.list in {zone}", lambda: [
                as_dict(o) for o in self.zone_operations.list(request=zreq, retry=None)])
        areq = self.compute_v1.AggregatedListGlobalOperationsRequest(project=self.project, filter=filter_)

        def listing() -> list[dict[str, Any]]:
            pager = self.global_operations.aggregated_list(request=areq, retry=None)
            return [as_dict(o) for _, scoped in pager for o in scoped.operations]

        return self.call("gce operations.aggregatedList", listing)

    # -- catalog refresh (refresh.py) ---------------------------------------------------------
    def machine_types(self) -> list[dict[str, Any]]:
        """Every machine type of every zone (``machineTypes.aggregatedList``, all pages)."""
        client = self.compute_v1.MachineTypesClient(**self._kwargs)
        request = self.compute_v1.AggregatedListMachineTypesRequest(project=self.project)

        def listing() -> list[dict[str, Any]]:
            pager = client.aggregated_list(request=request, retry=None)
            return [as_dict(m) for _, scoped in pager for m in scoped.machine_types]

        try:
            return self.call("gce machineTypes.aggregatedList", listing)
        finally:
            client.transport.close()

    def accelerator_types(self) -> list[dict[str, Any]]:
        """Every GPU model of every zone (``acceleratorTypes.aggregatedList``, all pages): ``name``
        (``nvidia-tesla-t4``), ``zone``, ``maximum_cards_per_instance``."""
        client = self.compute_v1.AcceleratorTypesClient(**self._kwargs)
        request = self.compute_v1.AggregatedListAcceleratorTypesRequest(project=self.project)

        def listing() -> list[dict[str, Any]]:
            pager = client.aggregated_list(request=request, retry=None)
            return [as_dict(a) for _, scoped in pager for a in scoped.accelerator_types]

        try:
            return self.call("gce acceleratorTypes.aggregatedList", listing)
        finally:
            client.transport.close()

    def skus(self, service: str) -> list[dict[str, Any]]:
        """Every SKU of a Cloud Billing Catalog service (``services.skus.list``, all pages), through
        google-cloud-billing (imported here: only a refresh needs it)."""
        if self._billing is None:
            from google.cloud import billing_v1

            kwargs: dict[str, Any] = {"transport": "rest"}
            if self._billing_endpoint:
                kwargs["client_options"] = {"api_endpoint": self._billing_endpoint}
            if self.credentials is not None:
                kwargs["credentials"] = self.credentials
            elif self._billing_endpoint:
                from google.auth.credentials import AnonymousCredentials

                kwargs["credentials"] = AnonymousCredentials()
            self._billing = billing_v1.CloudCatalogClient(**kwargs)
        billing = self._billing
        return self.call(f"cloudbilling services.skus.list {service}", lambda: [
            as_dict(s) for s in billing.list_skus(request={"parent": service, "page_size": 5000}, retry=None)])

    # -- persistent disks (volumes.py) --------------------------------------------------------
    def insert_disk(self, zone: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        resource = self.compute_v1.Disk(body)
        return as_dict(self.call(f"gce disks.insert {body.get('name')} in {zone}", lambda: self.disks.insert_unary(
            request={"project": self.project, "zone": zone, "disk_resource": resource, "request_id": request_id},
            retry=None)))

    def get_disk(self, zone: str, name: str) -> dict[str, Any]:
        return as_dict(self.call(f"gce disks.get {zone}/{name}", lambda: self.disks.get(
            project=self.project, zone=zone, disk=name, retry=None)))

    def delete_disk(self, zone: str, name: str) -> dict[str, Any]:
        return as_dict(self.call(f"gce disks.delete {zone}/{name}", lambda: self.disks.delete_unary(
            project=self.project, zone=zone, disk=name, retry=None)))

    def list_disks(self, filter_: str) -> list[dict[str, Any]]:
        """Every disk of the project, in every zone, matching ``filter_`` (aggregated, all pages)."""
        request = self.compute_v1.AggregatedListDisksRequest(project=self.project, filter=filter_)

        def listing() -> list[dict[str, Any]]:
            pager = self.disks.aggregated_list(request=request, retry=None)
            return [as_dict(d) for _, scoped in pager for d in scoped.disks]

        return self.call("gce disks.aggregatedList", listing)

    def attach_disk(self, zone: str, instance: str, body: dict[str, Any]) -> dict[str, Any]:
        resource = self.compute_v1.AttachedDisk(body)
        return as_dict(self.call(f"gce instances.attachDisk {zone}/{instance}", lambda: self.instances
                                 .attach_disk_unary(project=self.project, zone=zone, instance=instance,
                                                    attached_disk_resource=resource, retry=None)))

    def detach_disk(self, zone: str, instance: str, device_name: str) -> dict[str, Any]:
        return as_dict(self.call(f"gce instances.detachDisk {zone}/{instance} {device_name}", lambda: self.instances
                                 .detach_disk_unary(project=self.project, zone=zone, instance=instance,
                                                    device_name=device_name, retry=None)))

    def wait(self, zone: str, op: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Poll a zone operation with ``wait`` until DONE or ``timeout_s`` has passed; returns
        its last state (done or not). Each ``wait`` call returns when the operation is done or
        after GCE's own limit, so there is no sleep here."""
        deadline = self.monotonic() + timeout_s
        while op.get("status") != "DONE" and self.monotonic() < deadline:
            name = op["name"]
            wait = functools.partial(self.zone_operations.wait, project=self.project, zone=zone, operation=name,
                                     retry=None, timeout=150.0)  # GCE answers within ~2 min, done or not
            op = as_dict(self.call(f"gce zoneOperations.wait {name}", wait))
        return op

    # -- compact placement policies of gangs (gang.py) -----------------------------------------
    def policies(self) -> Any:
        if self._policies is None:
            self._policies = self.compute_v1.ResourcePoliciesClient(**self._kwargs)
            self._region_operations = self.compute_v1.RegionOperationsClient(**self._kwargs)
        return self._policies

    def insert_policy(self, region: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        resource = self.compute_v1.ResourcePolicy(body)
        return as_dict(self.call(f"gce resourcePolicies.insert {body.get('name')} in {region}",
                                 lambda: self.policies().insert_unary(request={
                                     "project": self.project, "region": region, "resource_policy_resource": resource,
                                     "request_id": request_id}, retry=None)))

    def get_policy(self, region: str, name: str) -> dict[str, Any]:
        return as_dict(self.call(f"gce resourcePolicies.get {region}/{name}", lambda: self.policies().get(
            project=self.project, region=region, resource_policy=name, retry=None)))

    def delete_policy(self, region: str, name: str) -> dict[str, Any]:
        return as_dict(self.call(f"gce resourcePolicies.delete {region}/{name}", lambda: self.policies().delete_unary(
            project=self.project, region=region, resource_policy=name, retry=None)))

    def list_policies(self) -> list[tuple[str, dict[str, Any]]]:
        """``(region, policy)`` of every resource policy of the project (aggregated, all pages)."""
        request = self.compute_v1.AggregatedListResourcePoliciesRequest(project=self.project)

        def listing() -> list[tuple[str, dict[str, Any]]]:
            pager = self.policies().aggregated_list(request=request, retry=None)
            return [(scope.rsplit("/", 1)[-1], as_dict(p)) for scope, scoped in pager for p in scoped.resource_policies]

        return self.call("gce resourcePolicies.aggregatedList", listing)

    def wait_region(self, region: str, op: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """``wait`` for a region operation (a resource policy's insert)."""
        self.policies()
        deadline = self.monotonic() + timeout_s
        while op.get("status") != "DONE" and self.monotonic() < deadline:
            name = op["name"]
            wait = functools.partial(self._region_operations.wait, project=self.project, region=region,
                                     operation=name, retry=None, timeout=150.0)
            op = as_dict(self.call(f"gce regionOperations.wait {name}", wait))
        return op

    def close(self) -> None:
        for client in (self.instances, self.disks, self.zone_operations, self.global_operations, self._billing,
                       self._policies, self._region_operations):
            transport = getattr(client, "transport", None)
            if transport is not None:
                transport.close()
