"""Multi-node gangs on Azure (spec ``nodes:``): ``AzureProvider``'s hooks of ``CloudGangs``.

A gang is N VMs of one size in one zone in one proximity placement group
(``requests.proximity_placement_group_body``: Standard, its intent the gang's size, pinned to
the zone), named for the attempt (the VM name rule applied to its client token, so a repeat
after a crash finds it) in the configured resource group and tagged with the attempt. Node k is
the VM ``<attempt's token>-n<k>``, tagged ``gpuorch:node=<k>-of-<N>``. InfiniBand sizes
(``requests.has_infiniband``) reach each other over IB only inside one scale set or
availability set, which stand-alone VMs in a proximity group are not: they get the group's low
latency over Ethernet (docs/azure.md). ARM refuses to delete a group a VM still references;
the sweep on ``list_managed`` retries once the nodes are deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuorch.errors import NotFoundError
from gpuorch.provider import TAG_MANAGED, Instance, LaunchRequest, Runner
from gpuorch.provider.gang import node_of
from gpuorch.provider.gang_cloud import CloudGangs
from gpuorch.provider.gang_decide import PlacementGroup, attempt_key
from gpuorch.provider.port import managed_tags

from .names import gpuorch_tags, split_zone, vm_name
from .parse import nic_addresses, nic_ids
from .requests import proximity_placement_group_body

if TYPE_CHECKING:
    from .calls import Arm

MAX_NODES = 16  # gpuorch's cap per gang


def group_tags(tags: dict[str, str]) -> dict[str, str]:
    key = attempt_key(tags)
    if key is None:
        raise ValueError("a gang's proximity placement group needs the attempt's managed tags")
    owner, job, attempt = key
    return managed_tags(int(job), int(attempt), owner)


class AzureGangs(CloudGangs):
    """The ARM side of ``CloudGangs``; mixed into ``AzureProvider``, whose helpers it uses."""

    _arm: Arm
    _terminated: set[str]
    _hosts: dict[str, str]
    options: Any

    if TYPE_CHECKING:  # the adapter's own helpers this mixin calls (defined on AzureProvider)
        def _find(self, name: str, request: LaunchRequest) -> Instance | None: ...
        def _launch_one(self, request: LaunchRequest) -> Instance: ...
        def _observe(self, vm: dict[str, Any], wanted_tags: dict[str, str] | None = None) -> Instance: ...
        def _tombstone(self, name: str) -> Instance | None: ...
        def _runner_pool(self) -> Any: ...

    def _node_launch(self, request: LaunchRequest) -> Instance:
        return self._launch_one(request)

    def _node_find(self, request: LaunchRequest) -> Instance | None:
        return self._find(vm_name(request.client_token), request)

    def _nodes_of(self, node: Instance) -> list[Instance]:
        """The gang's VMs by their tags, plus its nodes that vanished while this provider watched
        them (an eviction with policy Delete: they read PREEMPTED, which ends the gang)."""
        want = group_tags(node.tags).items()
        out = [self._observe(vm) for vm in self._arm.list_vms()
               if want <= gpuorch_tags(vm.get("tags")).items() and node_of(gpuorch_tags(vm.get("tags")))]
        present = {i.id for i in out}
        size = (node_of(node.tags) or (0, 1))[1]
        token = _token(node)
        for k in range(size):
            name = vm_name(token if k == 0 else f"{token}-n{k}")
            if name not in present:
                tomb = self._tombstone(name)
                if tomb is not None and node_of(tomb.tags) is not None:
                    out.append(tomb)
        return out

    def _nodes_terminate(self, ids: list[str]) -> None:
        runners = getattr(self, "_runners", None)
        for name in ids:
            if runners is not None:
                runners.forget(name)
            self._terminated.add(name)
            self._hosts.pop(name, None)
            self._arm.begin_delete(name)

    def _node_address(self, node: Instance) -> str | None:
        nics = nic_ids(self._arm.get_vm(node.id))
        if not nics:
            return None
        return nic_addresses(self._arm.get_resource(nics[0]))[0]

    def _node_runner(self, node: Instance) -> Runner:
        return self._runner_pool().get(node)

    def _group_at(self, token: str, region: str, zone: str, tags: dict[str, str]) -> PlacementGroup:
        return PlacementGroup(name=vm_name(token), where=region, tags=group_tags(tags))

    def _group_create(self, request: LaunchRequest) -> None:
        o = request.offer
        group = self._group_at(request.placement_group or "", o.region, o.zone, request.tags)
        try:
            self._arm.get_ppg(group.name)
            return  # there already (a repeat after a crash or a transient error)
        except NotFoundError:
            pass
        body = proximity_placement_group_body(o.region, split_zone(o.zone, o.region), o.instance_type, group.tags)
        self._arm.create_ppg(group.name, body)

    def _group_list(self) -> list[PlacementGroup]:
        out = []
        for g in self._arm.list_ppgs():
            tags = gpuorch_tags(g.get("tags"))
            if tags.get(TAG_MANAGED) == "true":
                out.append(PlacementGroup(name=str(g["name"]), where=str(g.get("location") or ""), tags=tags))
        return out

    def _group_delete(self, group: PlacementGroup) -> None:
        self._arm.delete_ppg(group.name)

    def _ppg_id(self, request: LaunchRequest) -> str:
        o = request.offer
        name = self._group_at(request.placement_group or "", o.region, o.zone, request.tags).name
        return (f"/subscriptions/{self.options.subscription_id}/resourceGroups/{self.options.resource_group}"
                f"/providers/Microsoft.Compute/proximityPlacementGroups/{name}")


def _token(node: Instance) -> str:
    from gpuorch.provider.port import client_token

    return client_token(node.job_id or 0, node.attempt or 0, node.owner)
