"""ARM request bodies, built by pure functions (no SDK, no I/O) so each is unit-tested alone.

One PUT creates everything a VM needs: the VM, its OS disk, and (through the VM's
``networkInterfaceConfigurations``) its NIC and public IP, each tagged like the VM and each with
``deleteOption: Delete``, so deleting the VM (or Azure evicting a spot VM with eviction policy
Delete) removes them too. Nothing per VM is created by a separate call, so a crash can leave
nothing behind that the VM does not own.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

from gpuorch.provider.port import LaunchRequest

from .names import azure_tags, ip_name, nic_name, os_disk_name, split_zone

NETWORK_API = "2022-11-01"  # the API the VM uses to create its NIC and IP (2020-11-01 at least)
SPOT_MAX_PRICE = -1  # pay up to the on-demand price: evicted for capacity, never for price


def image_reference(image: str) -> dict[str, str]:
    """``publisher:offer:sku:version`` or an image resource id -> ``imageReference``."""
    if image.startswith("/"):
        return {"id": image}
    publisher, offer, sku, version = image.split(":")
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def custom_data(user_data: str | None) -> str | None:
    """cloud-init user data as ARM wants it (base64); Azure keeps it at most 64 KiB encoded."""
    if not user_data:
        return None
    encoded = base64.b64encode(user_data.encode()).decode()
    if len(encoded) > 87380:
        raise ValueError("the VM's cloud-init user data is over Azure's 64 KiB limit")
    return encoded


def vm_body(
    request: LaunchRequest, *, name: str, subnet_id: str, image: str, admin_user: str, ssh_public_key: str,
    user_data: str | None = None, public_ip: bool = True, network_security_group_id: str | None = None,
    os_disk_type: str = "Premium_LRS", eviction_policy: str = "Delete",
) -> dict[str, Any]:
    """The PUT body of one launch's VM: in the offer's availability zone (``<region>-<n>``; regional
    when the offer's zone is its region), tagged, spot or on-demand.

    ``ssh_public_key``: the admin user's login key (Azure requires one once password logins are
    off); ``user_data``: the ``#cloud-config`` with the attempt's host key.
    """
    o = request.offer
    tags = azure_tags(request.tags)
    key = ssh_public_key.strip()
    if not key or "\n" in key or "\r" in key:
        raise ValueError("the admin user's SSH key must be one OpenSSH public key line")
    nic = _nic(name, tags, subnet_id, public_ip, network_security_group_id)
    os_profile = _os_profile(name, admin_user, key, user_data)
    properties: dict[str, Any] = {
        "hardwareProfile": {"vmSize": o.instance_type},
        "storageProfile": {
            "imageReference": image_reference(image),
            "osDisk": {"name": os_disk_name(name), "createOption": "FromImage", "deleteOption": "Delete",
                       "diskSizeGB": max(30, math.ceil(request.disk_gib)),
                       "managedDisk": {"storageAccountType": os_disk_type}},
        },
        "osProfile": os_profile,
        "networkProfile": {
            "networkApiVersion": NETWORK_API,
            "networkInterfaceConfigurations": [{"name": nic_name(name), "tags": tags, "properties": nic}],
        },
    }
    _priority(properties, request.spot, eviction_policy)
    body: dict[str, Any] = {"location": o.region, "tags": tags, "properties": properties}
    zone = split_zone(o.zone, o.region)
    if zone is not None:  # a zonal VM: its public IP (Standard SKU) and OS disk follow it into the zone
        body["zones"] = [zone]
    return body


def _nic(name: str, tags: dict[str, str], subnet_id: str, public_ip: bool,
         network_security_group_id: str | None) -> dict[str, Any]:
    """The VM's NIC (and its public IP), created with the VM and deleted with it."""
    ip_config: dict[str, Any] = {"subnet": {"id": subnet_id}, "primary": True, "privateIPAddressVersion": "IPv4"}
    if public_ip:
        ip_config["publicIPAddressConfiguration"] = {
            "name": ip_name(name), "tags": tags, "sku": {"name": "Standard", "tier": "Regional"},
            "properties": {"deleteOption": "Delete", "publicIPAllocationMethod": "Static"},
        }
    nic: dict[str, Any] = {"primary": True, "deleteOption": "Delete",
                           "ipConfigurations": [{"name": "ipconfig1", "properties": ip_config}]}
    if network_security_group_id:
        nic["networkSecurityGroup"] = {"id": network_security_group_id}
    return nic


def _os_profile(name: str, admin_user: str, key: str, user_data: str | None) -> dict[str, Any]:
    """The admin user with only its SSH key (no password login), and the cloud-init user data."""
    os_profile: dict[str, Any] = {
        "computerName": name,
        "adminUsername": admin_user,
        "linuxConfiguration": {
            "disablePasswordAuthentication": True,
            "ssh": {"publicKeys": [{"path": f"/home/{admin_user}/.ssh/authorized_keys", "keyData": key}]},
        },
    }
    data = custom_data(user_data)
    if data:
        os_profile["customData"] = data
    return os_profile


def _priority(properties: dict[str, Any], spot: bool, eviction_policy: str) -> None:
    """Spot (evicted for capacity only, by ``eviction_policy``) or Regular."""
    if spot:
        properties["priority"] = "Spot"
        properties["evictionPolicy"] = eviction_policy
        properties["billingProfile"] = {"maxPrice": SPOT_MAX_PRICE}
    else:
        properties["priority"] = "Regular"


def login_key(cloud_config: Mapping[str, Any], fallback: str | None) -> str | None:
    """The admin user's SSH key: the first ``ssh_authorized_keys`` of the cloud-config (the job's
    login key), else ``fallback`` (a key from the request)."""
    keys = cloud_config.get("ssh_authorized_keys") or ()
    return str(keys[0]) if keys else fallback


# -- multi-node gangs (spec ``nodes:``) -----------------------------------------------------------
# Sizes with an InfiniBand interface (the "r" in the name: RDMA). IB connects VMs of one
# proximity placement group and one availability set or scale set; others use their Ethernet.
INFINIBAND_SIZES = ("Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H100_v5",
                    "Standard_ND96isr_H200_v5", "Standard_HB120rs_v3", "Standard_HB176rs_v4")


def proximity_placement_group_body(location: str, zone: str | None, vm_size: str,
                                   tags: Mapping[str, str]) -> dict[str, Any]:
    """PUT ``.../proximityPlacementGroups/{name}`` for one gang: a Standard group whose intent
    names the gang's size, so Azure picks a datacenter that has it, pinned to the gang's zone."""
    body: dict[str, Any] = {"location": location, "tags": azure_tags(tags),
                            "properties": {"proximityPlacementGroupType": "Standard",
                                           "intent": {"vmSizes": [vm_size]}}}
    if zone:
        body["zones"] = [zone]
    return body


def has_infiniband(vm_size: str) -> bool:
    return vm_size in INFINIBAND_SIZES


def with_proximity_placement_group(body: Mapping[str, Any], group_id: str) -> dict[str, Any]:
    """A gang node's VM body: ``vm_body``'s, in the gang's proximity placement group."""
    props = dict(body["properties"])
    props["proximityPlacementGroup"] = {"id": group_id}
    return {**body, "properties": props}
