"""Multi-node gangs on Compute Engine (spec ``nodes:``): ``GcpProvider``'s hooks of ``CloudGangs``.

A gang is N VMs of one machine type in one zone bound to one compact placement policy
(``resourcePolicies``, ``groupPlacementPolicy`` COLLOCATED with ``vmCount`` N:
``requests.placement_policy_body``), named for the attempt (the VM name rule applied to its
client token, so a repeat after a crash addresses the same policy) in the zone's region. GCE
resource policies carry no labels: the attempt's tags go in the policy's ``description`` as JSON
(and the name spells them too). Node k is the VM ``<attempt's token>-n<k>``, labelled
``gpuorch-node=<k>-of-<N>``. GCE refuses to delete a policy a VM still uses; the sweep on
``list_managed`` retries once the nodes are deleted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from gpuorch.errors import NotFoundError, PermanentError
from gpuorch.provider import TAG_MANAGED, Instance, LaunchRequest, Runner
from gpuorch.provider.gang import node_of
from gpuorch.provider.gang_cloud import CloudGangs
from gpuorch.provider.gang_decide import PlacementGroup, attempt_key
from gpuorch.provider.port import managed_tags

from .errors import operation_error
from .names import (
    instance_name,
    label_filter,
    labels_from_tags,
    region_of,
    request_id,
    tags_from_labels,
    tags_from_name,
)
from .parse import PREEMPTED_OP, gone_preempted, preempted_ops
from .requests import placement_policy_body

if TYPE_CHECKING:
    from .calls import Gce

MAX_NODES = 16  # gpuorch's cap per gang (a compact policy takes up to 1500 VMs, 22 A3s at its tightest)


def group_tags(tags: dict[str, str]) -> dict[str, str]:
    key = attempt_key(tags)
    if key is None:
        raise ValueError("a gang's placement policy needs the attempt's managed tags")
    owner, job, attempt = key
    return managed_tags(int(job), int(attempt), owner)


def policy_tags(policy: dict[str, Any]) -> dict[str, str]:
    """The attempt's tags of a policy this adapter made (its description), else its name's."""
    try:
        tags = json.loads(policy.get("description") or "")
    except ValueError:
        tags = None
    if isinstance(tags, dict) and all(isinstance(v, str) for v in tags.values()):
        return {str(k): v for k, v in tags.items()}
    return tags_from_name(str(policy.get("name") or ""))


class GcpGangs(CloudGangs):
    """The GCE side of ``CloudGangs``; mixed into ``GcpProvider``, whose helpers it uses."""

    _gce: Gce
    _seen: dict[str, Instance]
    options: Any

    if TYPE_CHECKING:  # the adapter's own helpers this mixin calls (defined on GcpProvider)
        def _get_one(self, instance_id: str) -> Instance: ...
        def _launch_one(self, request: LaunchRequest) -> Instance: ...
        def _runner_pool(self) -> Any: ...
        def _split(self, instance_id: str) -> tuple[str, str]: ...
        def _remember(self, inst: Instance) -> Instance: ...

    def _node_launch(self, request: LaunchRequest) -> Instance:
        return self._launch_one(request)

    def _node_find(self, request: LaunchRequest) -> Instance | None:
        try:
            return self._get_one(f"{request.offer.zone}/{instance_name(request.client_token)}")
        except NotFoundError:
            return None

    def _nodes_of(self, node: Instance) -> list[Instance]:
        """The gang's VMs in its zone by their labels, plus its nodes GCE deleted after reclaiming
        them (their preempted operation is still listed): a reclaimed node ends the gang."""
        from .parse import is_spot, to_instance

        labels = labels_from_tags(group_tags(node.tags))
        listed = [d for d in self._gce.list_zone(node.zone, label_filter(labels))
                  if node_of(tags_from_labels(d.get("labels") or {})) is not None]
        size = (node_of(node.tags) or (0, 1))[1]
        token = instance_name(_token(node))
        names = [f"{node.zone}/{token if k == 0 else instance_name(f'{_token(node)}-n{k}')}" for k in range(size)]
        present = {f"{node.zone}/{d['name']}" for d in listed}
        ops: dict[str, Any] = {}
        if any(key not in present for key in names) or any(
                is_spot(d) and d.get("status") not in ("RUNNING", "PROVISIONING", "STAGING") for d in listed):
            ops = dict(preempted_ops(self._gce.operations(f'operationType = "{PREEMPTED_OP}"', zone=node.zone)))
        now = self._now()
        out = [self._remember(to_instance(d, ops.get(f"{node.zone}/{d['name']}"), now)) for d in listed]
        out = [i for i in out if i.owner == node.owner]
        for key in names:
            if key not in present and key in ops:
                gone = gone_preempted(key, ops[key], self._seen.get(key))
                if node_of(gone.tags) is not None:
                    out.append(gone)
        return out

    def _nodes_terminate(self, ids: list[str]) -> None:
        runners = getattr(self, "_runners", None)
        for instance_id in ids:
            if runners is not None:
                runners.forget(instance_id)
            try:
                zone, name = self._split(instance_id)
                self._gce.delete(zone, name)
            except NotFoundError:
                continue

    def _node_address(self, node: Instance) -> str | None:
        zone, name = self._split(node.id)
        d = self._gce.get(zone, name)
        return next((str(n["network_i_p"]) for n in d.get("network_interfaces") or () if n.get("network_i_p")), None)

    def _node_runner(self, node: Instance) -> Runner:
        return self._runner_pool().get(node)

    def _group_at(self, token: str, region: str, zone: str, tags: dict[str, str]) -> PlacementGroup:
        return PlacementGroup(name=instance_name(token), where=region_of(zone), tags=group_tags(tags))

    def _group_create(self, request: LaunchRequest) -> None:
        o = request.offer
        group = self._group_at(request.placement_group or "", o.region, o.zone, request.tags)
        try:
            self._gce.get_policy(group.where, group.name)
            return  # there already (a repeat after a crash or a transient error)
        except NotFoundError:
            pass
        body = {**placement_policy_body(group.name, group.where, request.nodes),
                "description": json.dumps(group.tags, sort_keys=True)}
        try:
            op = self._gce.insert_policy(group.where, body, request_id(f"{request.placement_group}-policy"))
        except PermanentError as e:
            if e.code in ("alreadyExists", "409"):
                return
            raise
        op = self._gce.wait_region(group.where, op, self.options.operation_timeout_s)
        err = operation_error(op, f"gce resourcePolicies.insert {group.where}/{group.name}")
        if err is not None and err.code not in ("alreadyExists", "RESOURCE_ALREADY_EXISTS"):
            raise err

    def _group_list(self) -> list[PlacementGroup]:
        regions = {region_of(z) for z in self.options.zones} | set(self.options.regions)
        out = []
        for region, policy in self._gce.list_policies():
            tags = policy_tags(policy)
            if region in regions and tags.get(TAG_MANAGED) == "true" and policy.get("group_placement_policy"):
                out.append(PlacementGroup(name=str(policy["name"]), where=region, tags=tags))
        return out

    def _group_delete(self, group: PlacementGroup) -> None:
        try:
            self._gce.delete_policy(group.where, group.name)
        except NotFoundError:
            return

    def _policy_url(self, request: LaunchRequest) -> str:
        from .requests import placement_policy_url

        o = request.offer
        group = self._group_at(request.placement_group or "", o.region, o.zone, request.tags)
        return placement_policy_url(self.options.project, group.where, group.name)


def _token(node: Instance) -> str:
    from gpuorch.provider.port import client_token

    return client_token(node.job_id or 0, node.attempt or 0, node.owner)
