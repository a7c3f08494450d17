"""Multi-node gangs on EC2 (spec ``nodes:``): ``AwsProvider``'s hooks of ``CloudGangs``.

A gang is N instances of one type in one zone, launched into one ``cluster`` placement group
(``requests.placement_group_kwargs``) named for the attempt (its client token, so a repeat
after a crash finds it: look before creating) and tagged with the attempt; EFA interfaces
where the type has them and a subnet is configured (``requests.gang_run_instances_kwargs``).
Node k's ClientToken is ``<attempt's>-n<k>``, its tag ``gpuorch:node=<k>-of-<N>``. The group is
deleted when the gang ends; EC2 refuses that while a node is still shutting down
(``InvalidPlacementGroup.InUse``), so the sweep on ``list_managed`` retries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuorch.errors import NotFoundError, PermanentError
from gpuorch.provider import TAG_MANAGED, Instance, LaunchRequest, Runner
from gpuorch.provider.gang import node_of
from gpuorch.provider.gang_cloud import CloudGangs
from gpuorch.provider.gang_decide import PlacementGroup, attempt_key
from gpuorch.provider.port import managed_tags

from .requests import attempt_filters, managed_filters, placement_group_kwargs, tags_of

if TYPE_CHECKING:
    from .calls import Ec2

MAX_NODES = 16  # gpuorch's cap per gang; a cluster group itself has none (capacity is the limit)


def group_tags(tags: dict[str, str]) -> dict[str, str]:
    """The placement group's tags: the attempt's (managed, job, attempt, owner), no node tag."""
    key = attempt_key(tags)
    if key is None:
        raise ValueError("a gang's placement group needs the attempt's managed tags")
    owner, job, attempt = key
    return managed_tags(int(job), int(attempt), owner)


class AwsGangs(CloudGangs):
    """The EC2 side of ``CloudGangs``; mixed into ``AwsProvider``, whose helpers it uses."""

    _ec2: Ec2
    _where: dict[str, str]
    _runners: Any
    options: Any

    if TYPE_CHECKING:  # the adapter's own helpers this mixin calls (defined on AwsProvider)
        def _describe(self, region: str, **params: Any) -> list[Instance]: ...
        def _describe_instance(self, instance_id: str) -> tuple[str, dict[str, Any]]: ...
        def _find_attempt(self, request: LaunchRequest) -> Instance | None: ...
        def _launch_one(self, request: LaunchRequest) -> Instance: ...

    def _node_launch(self, request: LaunchRequest) -> Instance:
        return self._launch_one(request)

    def _node_find(self, request: LaunchRequest) -> Instance | None:
        return self._find_attempt(request)

    def _nodes_of(self, node: Instance) -> list[Instance]:
        filters = attempt_filters(node.job_id or 0, node.attempt or 0, node.owner)
        return [i for i in self._describe(node.region, Filters=filters)
                if i.owner == node.owner and node_of(i.tags) is not None]

    def _nodes_terminate(self, ids: list[str]) -> None:
        by_region: dict[str, list[str]] = {}
        for instance_id in ids:
            self._runners.forget(instance_id)
            by_region.setdefault(self._where.get(instance_id, ""), []).append(instance_id)
        for region, some in by_region.items():
            for r in [region] if region else self.options.regions:
                try:
                    self._ec2.call(r, "terminate_instances", InstanceIds=some)
                except NotFoundError:
                    continue

    def _node_address(self, node: Instance) -> str | None:
        _, d = self._describe_instance(node.id)
        address = d.get("PrivateIpAddress")
        return str(address) if address else None

    def _node_runner(self, node: Instance) -> Runner:
        return self._runners.get(node)

    def _group_at(self, token: str, region: str, zone: str, tags: dict[str, str]) -> PlacementGroup:
        return PlacementGroup(name=token, where=region, tags=group_tags(tags))

    def _group_create(self, request: LaunchRequest) -> None:
        name, region = request.placement_group or "", request.offer.region
        try:
            self._ec2.call(region, "describe_placement_groups", GroupNames=[name])
            return  # there already (a repeat after a crash or a transient error)
        except NotFoundError:
            pass
        try:
            self._ec2.call(region, "create_placement_group", **placement_group_kwargs(name, group_tags(request.tags)))
        except PermanentError as e:
            if e.code != "InvalidPlacementGroup.Duplicate":  # a racing launch made it: the same group
                raise

    def _group_list(self) -> list[PlacementGroup]:
        out = []
        for region in self.options.regions:
            groups = self._ec2.call(region, "describe_placement_groups", Filters=managed_filters())
            out += [PlacementGroup(name=g["GroupName"], where=region, tags=tags_of(g))
                    for g in groups.get("PlacementGroups", []) if tags_of(g).get(TAG_MANAGED) == "true"]
        return out

    def _group_delete(self, group: PlacementGroup) -> None:
        try:
            self._ec2.call(group.where, "delete_placement_group", GroupName=group.name)
        except NotFoundError:
            return
