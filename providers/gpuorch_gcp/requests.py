"""GCE request bodies, built by pure functions (no SDK, no I/O) so each is unit-tested alone.

Bodies use the SDK's snake_case field names (``compute_v1.Instance(body)`` takes them as is).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpuorch.provider.port import LaunchRequest

from .catalog import split_instance_type
from .names import instance_name, labels_from_tags

GUEST_ATTRIBUTES = "enable-guest-attributes"  # metadata key; "TRUE" turns guest attributes on
# Machine families whose GPUs come with the machine type (a2, a3, a4, g2); others (n1) take
# ``guestAccelerators``.
BUNDLED = re.compile(r"(a2|a3|a4|a4x|g2|g4)-")
# gpuorch's GPU names -> GCE accelerator types, for machine types that attach GPUs.
ACCELERATORS = {
    "T4": "nvidia-tesla-t4", "V100": "nvidia-tesla-v100", "P100": "nvidia-tesla-p100",
    "P4": "nvidia-tesla-p4", "L4": "nvidia-l4", "A100": "nvidia-tesla-a100", "A100-80GB": "nvidia-a100-80gb",
}  # fmt: skip


def guest_accelerators(zone: str, machine_type: str, gpu: str | None, count: int) -> list[dict[str, Any]]:
    """The ``guest_accelerators`` of a machine type: none for families that bundle their GPUs,
    else ``count`` of the GPU's accelerator type. ValueError for a GPU GCE cannot attach."""
    if BUNDLED.match(machine_type) or not gpu or count <= 0:
        return []
    accel = ACCELERATORS.get(gpu)
    if accel is None:
        raise ValueError(f"GPU {gpu} cannot be attached to {machine_type} on GCE")
    return [{"accelerator_type": f"zones/{zone}/acceleratorTypes/{accel}", "accelerator_count": count}]


def user_data(cloud_config: Mapping[str, Any], max_lifetime_s: float | None) -> str | None:
    """``#cloud-config`` for the ``user-data`` metadata key (the same document as on EC2)."""
    from gpuorch.provider import user_data as cloud_init

    return cloud_init(cloud_config, max_lifetime_s)


def instance_body(
    request: LaunchRequest, *, zone: str, image: str, disk_type: str = "pd-balanced",
    network: str | None = None, subnetwork: str | None = None, external_ip: bool = True,
    service_account: str | None = "default", scopes: Sequence[str] = (),
    cloud_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``instances.insert`` body of one launch: named from the client token, labelled with
    the attempt's tags, spot or on-demand, GPUs bundled or attached.

    GPU VMs cannot live-migrate: ``on_host_maintenance`` is TERMINATE (and ``automatic_restart``
    off for spot, which GCE requires). Spot VMs are deleted when reclaimed, so a reclaimed VM
    stops billing for its disk too; the reclaim is read back from the ``compute.instances.preempted``
    operation (``parse.py``).
    """
    o = request.offer
    machine = split_instance_type(o.instance_type)[0]  # n1-standard-8+nvidia-tesla-t4x1: the GPUs go below
    scheduling: dict[str, Any] = {"on_host_maintenance": "TERMINATE"}
    if request.spot:
        scheduling.update(provisioning_model="SPOT", instance_termination_action="DELETE", automatic_restart=False)
    else:
        scheduling.update(provisioning_model="STANDARD", automatic_restart=True)
    interface: dict[str, Any] = {}
    if network:
        interface["network"] = network
    if subnetwork:
        interface["subnetwork"] = subnetwork
    if external_ip:
        interface["access_configs"] = [{"name": "External NAT", "type_": "ONE_TO_ONE_NAT"}]
    body: dict[str, Any] = {
        "name": instance_name(request.client_token),
        "machine_type": f"zones/{zone}/machineTypes/{machine}",
        "labels": labels_from_tags(request.tags),
        "scheduling": scheduling,
        "disks": [{
            "boot": True, "auto_delete": True,
            "initialize_params": {"source_image": image, "disk_size_gb": max(10, math.ceil(request.disk_gib)),
                                  "disk_type": f"zones/{zone}/diskTypes/{disk_type}",
                                  "labels": labels_from_tags(request.tags)},
        }],
        "network_interfaces": [interface],
    }  # fmt: skip
    accels = guest_accelerators(zone, machine, o.gpu, o.gpu_count)
    if accels:
        body["guest_accelerators"] = accels
    if service_account:
        body["service_accounts"] = [{"email": service_account, "scopes": list(scopes)}]
    cfg = cloud_config if cloud_config is not None else (
        {"ssh_authorized_keys": [request.ssh_public_key]} if request.ssh_public_key else {})
    # The guest agent (and cloud-init) publish the VM's SSH host keys as guest attributes
    # (namespace ``hostkeys``) only when these are enabled; the runner pins them (docs/gcp.md).
    items: list[dict[str, str]] = [{"key": GUEST_ATTRIBUTES, "value": "TRUE"}]
    data = user_data(cfg, request.max_lifetime_s)
    if data:
        items.append({"key": "user-data", "value": data})
    body["metadata"] = {"items": items}
    return body


# -- multi-node gangs (spec ``nodes:``) -----------------------------------------------------------
def placement_policy_body(name: str, region: str, vm_count: int) -> dict[str, Any]:
    """``resourcePolicies.insert`` for one gang: a compact placement policy (COLLOCATED) puts its
    ``vm_count`` VMs close together in one zone. GCE allows at most 1500 VMs (22 for A3 with
    max distance) per policy; the gang's size is the job's ``nodes``."""
    return {"name": name, "region": region,
            "group_placement_policy": {"vm_count": vm_count, "collocation": "COLLOCATED"}}


def placement_policy_url(project: str, region: str, name: str) -> str:
    return f"projects/{project}/regions/{region}/resourcePolicies/{name}"


def with_placement_policy(body: Mapping[str, Any], policy_url: str) -> dict[str, Any]:
    """A gang node's ``instances.insert`` body: ``instance_body``'s, bound to the gang's policy.
    Compact placement requires ``on_host_maintenance`` TERMINATE, which GPU VMs have already."""
    return {**body, "resource_policies": [policy_url]}
