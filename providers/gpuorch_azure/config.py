"""The Azure provider's options (``providers.azure`` in the daemon config), validated statically.

Everything checkable without a call is checked here, so a typo fails at start with one line
naming the field and the fix; ``AzureProvider.check`` then asks ARM about the resource group.
Credentials never appear here: azure-identity's ``DefaultAzureCredential`` chain finds them
(environment, workload identity, managed identity, Azure CLI login).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuorch.provider.options import validate_options

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_RESOURCE_GROUP = re.compile(r"[-\w._()]{1,90}")  # Azure's rule (and no trailing period, checked apart)
REGION = re.compile(r"[a-z]+[a-z0-9]*")  # eastus, westus2, southcentralus
_SUBNET = re.compile(
    r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+",
    re.IGNORECASE)
_NSG = re.compile(r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/networkSecurityGroups/[^/]+",
                  re.IGNORECASE)
_IMAGE_ID = re.compile(r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/.+", re.IGNORECASE)
_URN = re.compile(r"[^:\s]+:[^:\s]+:[^:\s]+:[^:\s]+")
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# Azure refuses these as the admin user of a Linux VM.
_RESERVED_USERS = frozenset({"root", "admin", "administrator", "guest", "user", "test", "sys", "daemon", "bin",
                             "nobody", "support", "console", "sshd", "adm", "lp", "backup", "owner"})
# Ubuntu 22.04 with the NVIDIA driver, CUDA and InfiniBand drivers baked in (Microsoft's HPC image).
DEFAULT_IMAGE = "microsoft-dsvm:ubuntu-hpc:2204:latest"


class AzureOptions(BaseModel):
    """``providers.azure`` options. ``subnet_id`` is keyed by region: a subnet lives in one region."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    subscription_id: str
    resource_group: str
    regions: list[str] = Field(min_length=1)
    subnet_id: dict[str, str]
    image: str = DEFAULT_IMAGE  # publisher:offer:sku:version, or an image / gallery image version resource id
    admin_user: str = "azureuser"  # the VM's admin user: the SSH runner logs in as it
    public_ip: bool = True  # a Standard public IP per VM (deleted with it); False: the private address
    network_security_group_id: str | None = None  # on each VM's NIC; default: the subnet's NSG only
    os_disk_type: Literal["Premium_LRS", "StandardSSD_LRS", "Standard_LRS"] = "Premium_LRS"
    # The managed disk type of job volumes (``volume:``): Premium SSD, or Standard SSD (disks.py).
    volume_type: Literal["Premium_LRS", "StandardSSD_LRS"] = "Premium_LRS"
    # What Azure does to a spot VM it evicts. Delete: the VM, its disk, NIC and IP go (nothing
    # bills); Deallocate: the VM stays deallocated (its disk bills until gpuorch deletes it),
    # which lets gpuorch tell an eviction apart from a deletion even after a daemon restart.
    eviction_policy: Literal["Delete", "Deallocate"] = "Delete"
    catalog: str | None = None  # offers CSV; default: the shipped snapshot
    launch_wait_s: float = Field(default=120.0, ge=0)  # how long launch follows the create for a capacity refusal
    poll_interval_s: float = Field(default=5.0, ge=0)  # between polls of a long-running operation
    max_attempts: int = Field(default=5, ge=1, le=20)  # per API call, throttling and 5xx included
    retry_max_s: float = Field(default=60.0, gt=0)
    tombstone_s: float = Field(default=3600.0, ge=0)  # how long an evicted VM that Azure deleted is still reported
    endpoint: str | None = None  # tests: a local fake ARM (https://127.0.0.1:PORT)
    # The public Retail Prices API `catalog refresh` reads (no credentials); tests: a local fake.
    prices_endpoint: str = "https://prices.azure.com/api/retail/prices"
    connection_verify: str | None = None  # tests: the CA bundle (PEM) that endpoint's certificate is signed with

    @field_validator("subscription_id")
    @classmethod
    def _subscription(cls, v: str) -> str:
        if not _UUID.fullmatch(v):
            raise ValueError(f"{v!r} is not a subscription id (a GUID like 00000000-0000-0000-0000-000000000000); "
                             "see `az account show --query id`")
        return v.lower()

    @field_validator("resource_group")
    @classmethod
    def _resource_group(cls, v: str) -> str:
        if not _RESOURCE_GROUP.fullmatch(v) or v.endswith("."):
            raise ValueError(f"{v!r} is not a resource group name (1-90 letters, digits, '-', '_', '.', '(', ')')")
        return v

    @field_validator("regions")
    @classmethod
    def _regions(cls, v: list[str]) -> list[str]:
        for r in v:
            if not REGION.fullmatch(r):
                raise ValueError(f"{r!r} is not an Azure region name (like eastus or westus2, lower case, no spaces)")
        if len(set(v)) != len(v):
            raise ValueError("lists a region twice")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        if not (_URN.fullmatch(v) or _IMAGE_ID.fullmatch(v)):
            raise ValueError(f"{v!r} is neither publisher:offer:sku:version nor an image resource id")
        return v

    @field_validator("admin_user")
    @classmethod
    def _admin_user(cls, v: str) -> str:
        if not _USER.fullmatch(v) or v in _RESERVED_USERS:
            raise ValueError(f"{v!r} cannot be a Linux VM's admin user on Azure (lower case, not root/admin/...)")
        return v

    @field_validator("network_security_group_id")
    @classmethod
    def _nsg(cls, v: str | None) -> str | None:
        if v is not None and not _NSG.fullmatch(v):
            raise ValueError(f"{v!r} is not a network security group resource id "
                             "(/subscriptions/.../providers/Microsoft.Network/networkSecurityGroups/NAME)")
        return v

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("https://"):
            raise ValueError("must be an https:// URL (the SDK sends bearer tokens over TLS only)")
        return v.rstrip("/") if v else v

    @model_validator(mode="after")
    def _subnets(self) -> AzureOptions:
        for region, subnet in self.subnet_id.items():
            if region not in self.regions:
                raise ValueError(f"subnet_id.{region}: {region} is not in regions {self.regions}; "
                                 "add it there or drop this entry")
            if not _SUBNET.fullmatch(subnet):
                raise ValueError(f"subnet_id.{region}: {subnet!r} is not a subnet resource id "
                                 "(/subscriptions/.../virtualNetworks/VNET/subnets/SUBNET)")
        missing = [r for r in self.regions if r not in self.subnet_id]
        if missing:
            raise ValueError(f"subnet_id.{missing[0]}: no subnet for region {missing[0]}; give one subnet "
                             "resource id per region (a subnet lives in one region)")
        return self


_HINTS = {
    "subscription_id": "the subscription's GUID, see `az account show --query id`",
    "resource_group": "the resource group gpuorch creates its VMs in",
    "regions": "list the regions to use, like [eastus, westus2]",
    "subnet_id": "a subnet resource id per region, like {eastus: /subscriptions/.../subnets/default}",
}


def parse_options(options: dict[str, Any] | None) -> AzureOptions:
    """Validate ``providers.azure``; raise UserInputError naming the option and the fix."""
    return validate_options(AzureOptions, options, "azure",
                            required=lambda field: _HINTS.get(field.split(".")[-1], "see docs/azure.md"))
