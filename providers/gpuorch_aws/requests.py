"""EC2 request bodies, built by pure functions (no boto3, no I/O) so each is unit-tested alone."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpuorch.provider import login_config, user_data
from gpuorch.provider.port import TAG_ATTEMPT, TAG_JOB, TAG_MANAGED, TAG_OWNER, LaunchRequest

ROOT_VOLUME_TYPE = "gp3"
# Root volumes carry the attempt's tags too (cost reports, orphan hunts) plus this one, so that
# ``list_volumes`` can leave them out: they die with their instance and hold no job data.
TAG_ROLE, ROOT_ROLE = "gpuorch:role", "root"
VOLUME_DEVICES = tuple(f"/dev/sd{c}" for c in "fghijklmnop")  # where data volumes attach


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def tag_specifications(tags: Mapping[str, str], resource_types: Sequence[str]) -> list[dict[str, Any]]:
    """Tags applied atomically at creation: a resource is never seen untagged."""
    return [{"ResourceType": rt, "Tags": tag_list(tags)} for rt in resource_types]


def launch_tag_specifications(tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """The instance's tags, and the same plus the root role on the volumes launched with it."""
    return [*tag_specifications(tags, ("instance",)), *tag_specifications({**tags, TAG_ROLE: ROOT_ROLE}, ("volume",))]


def tags_of(resource: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or ()}


def managed_filters() -> list[dict[str, Any]]:
    return [{"Name": f"tag:{TAG_MANAGED}", "Values": ["true"]}]


def attempt_filters(job_id: int, attempt: int, owner: str = "") -> list[dict[str, Any]]:
    """Filters that find a launch's instance again (look before creating). Without an owner,
    instances that carry one are someone else's: the caller drops them client-side."""
    filters = [*managed_filters(), {"Name": f"tag:{TAG_JOB}", "Values": [str(job_id)]},
               {"Name": f"tag:{TAG_ATTEMPT}", "Values": [str(attempt)]}]
    if owner:
        filters.append({"Name": f"tag:{TAG_OWNER}", "Values": [owner]})
    return filters


def run_instances_kwargs(
    request: LaunchRequest, *, image_id: str, zone: str, root_device: str, subnet_id: str | None = None,
    security_group_ids: Sequence[str] = (), key_name: str | None = None, instance_profile: str | None = None,
    cloud_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The RunInstances body of one launch: one instance, tagged with its volumes, idempotent.

    ``cloud_config``: user-data settings (SSH keys); default: authorize ``request.ssh_public_key``.
    """
    kwargs: dict[str, Any] = {
        "ImageId": image_id,
        "InstanceType": request.offer.instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "ClientToken": request.client_token,  # the port's: owner, job, attempt; <= 64 characters
        "Placement": {"AvailabilityZone": zone},
        # The agent's dead-man switch powers off; this makes a power-off stop the bill for good.
        "InstanceInitiatedShutdownBehavior": "terminate",
        "TagSpecifications": launch_tag_specifications(request.tags),
        "BlockDeviceMappings": [{
            "DeviceName": root_device,
            "Ebs": {"VolumeSize": max(1, math.ceil(request.disk_gib)), "VolumeType": ROOT_VOLUME_TYPE,
                    "DeleteOnTermination": True},
        }],
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},  # IMDSv2 for the notice
    }  # fmt: skip
    if request.spot:
        kwargs["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
    data = user_data(login_config(request.ssh_public_key) if cloud_config is None else cloud_config,
                     request.max_lifetime_s)
    if data:
        kwargs["UserData"] = data
    if subnet_id:
        kwargs["SubnetId"] = subnet_id
    if security_group_ids:
        kwargs["SecurityGroupIds"] = list(security_group_ids)
    if key_name:
        kwargs["KeyName"] = key_name
    if instance_profile:
        key = "Arn" if instance_profile.startswith("arn:") else "Name"
        kwargs["IamInstanceProfile"] = {key: instance_profile}
    return kwargs


def create_volume_kwargs(zone: str, size_gib: float, tags: Mapping[str, str]) -> dict[str, Any]:
    """A gp3 volume (3000 IOPS and 125 MB/s baseline, whatever the size), tagged at creation."""
    return {"AvailabilityZone": zone, "Size": max(1, math.ceil(size_gib)), "VolumeType": "gp3",
            "TagSpecifications": tag_specifications({**tags, TAG_MANAGED: "true"}, ("volume",))}


def is_root_volume(volume: Mapping[str, Any]) -> bool:
    return tags_of(volume).get(TAG_ROLE) == ROOT_ROLE


def free_device(instance: Mapping[str, Any]) -> str:
    """The first data-volume device name the instance does not use yet."""
    used = {m.get("DeviceName") for m in instance.get("BlockDeviceMappings") or ()}
    for dev in VOLUME_DEVICES:
        if dev not in used and dev.replace("/dev/sd", "/dev/xvd") not in used:
            return dev
    raise ValueError(f"instance {instance.get('InstanceId')} has no free device name for another volume")


# -- multi-node gangs (spec ``nodes:``) -----------------------------------------------------------
# EFA interfaces per instance type (AWS: "Supported instance types" for EFA, one per network card
# on the multi-card types). A gang of these gets them; other types use their ENA network.
EFA_INTERFACES = {"p4d.24xlarge": 4, "p4de.24xlarge": 4, "p5.48xlarge": 32, "p5e.48xlarge": 32,
                  "p5en.48xlarge": 16, "g6e.48xlarge": 4, "g5.48xlarge": 1, "trn1.32xlarge": 8}


def placement_group_kwargs(name: str, tags: Mapping[str, str]) -> dict[str, Any]:
    """CreatePlacementGroup for one gang: a ``cluster`` group packs its instances close together
    in one zone (lowest latency, highest throughput between them), tagged like the attempt."""
    return {"GroupName": name, "Strategy": "cluster",
            "TagSpecifications": tag_specifications(tags, ["placement-group"])}


def efa_network_interfaces(instance_type: str, subnet_id: str,
                           security_group_ids: Sequence[str] = ()) -> list[dict[str, Any]] | None:
    """RunInstances ``NetworkInterfaces`` with every EFA the type has (None: it has none). The
    first card's interface is the instance's primary one (device 0); the others are device 1
    of their own network card, as AWS requires for multi-card types."""
    count = EFA_INTERFACES.get(instance_type, 0)
    if count == 0:
        return None
    return [{"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "InterfaceType": "efa",
             "SubnetId": subnet_id, "Groups": list(security_group_ids), "DeleteOnTermination": True}
            for card in range(count)]


def gang_run_instances_kwargs(kwargs: Mapping[str, Any], request: LaunchRequest) -> dict[str, Any]:
    """One gang node's RunInstances body: ``run_instances_kwargs``'s, placed in the gang's cluster
    placement group, with EFA where the type has it (the subnet and security groups move into
    the interfaces, where EC2 then wants them)."""
    out = dict(kwargs)
    if request.placement_group:
        out["Placement"] = {**kwargs["Placement"], "GroupName": request.placement_group}
    subnet = kwargs.get("SubnetId")
    efa = efa_network_interfaces(request.offer.instance_type, subnet, kwargs.get("SecurityGroupIds", ())) \
        if subnet else None
    if efa:
        out.pop("SubnetId", None)
        out.pop("SecurityGroupIds", None)
        out["NetworkInterfaces"] = efa
    return out
