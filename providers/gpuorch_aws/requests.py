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
