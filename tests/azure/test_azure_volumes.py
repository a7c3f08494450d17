"""Azure volumes and zones beyond the contract: zonal VM bodies, disk bodies and limits, the
premium-storage rule, and regional disks that attach only to regional VMs."""

from __future__ import annotations

from pathlib import Path

import pytest
from azure_helpers import StaticToken, options
from fake_arm import FakeArm

from gpuorch.errors import PermanentError
from gpuorch.provider.port import LaunchRequest, Offer, managed_tags
from gpuorch_azure import AzureProvider
from gpuorch_azure.config import parse_options
from gpuorch_azure.disks import attachable, size_gib
from gpuorch_azure.names import split_zone
from gpuorch_azure.requests import vm_body
from gpuorch_azure.volumes import disk_body

pytestmark = pytest.mark.azure
OWNER = "c0ffee000001"


def offer(zone: str = "eastus-2", size: str = "Standard_NC4as_T4_v3") -> Offer:
    return Offer(provider="azure", region="eastus", zone=zone, instance_type=size, gpu="T4", gpu_count=1,
                 gpu_memory_gib=16, price_per_hour=0.526, spot_price_per_hour=0.05)


@pytest.fixture
def provider(arm: FakeArm, sleeps: list[float], tmp_path: Path):
    offers = [offer(z, s) for z in ("eastus", "eastus-1", "eastus-2") for s in ("Standard_NC4as_T4_v3", "Standard_NC6")]
    p = AzureProvider(parse_options(options(arm)), home=tmp_path / "home", credential=StaticToken(arm.token),
                      sleep=sleeps.append, now=arm.now, monotonic=lambda: arm.clock, offers=offers)
    yield p
    p.close()


def launch(provider: AzureProvider, zone: str, size: str = "Standard_NC4as_T4_v3", job: int = 70) -> str:
    return provider.launch(LaunchRequest(job_id=job, attempt=1, offer=offer(zone, size), spot=False, owner=OWNER)).id


def test_zone_names_are_the_region_or_region_dash_number() -> None:
    assert split_zone("eastus", "eastus") is None and split_zone("eastus-3", "eastus") == "3"
    for bad in ("eastus-4", "westus2-1", "eastus-a"):
        with pytest.raises(ValueError):
            split_zone(bad, "eastus")


def test_a_zonal_offer_launches_a_zonal_vm_and_a_regional_one_a_regional_vm() -> None:
    req = LaunchRequest(job_id=7, attempt=1, offer=offer("eastus-2"), spot=True, owner=OWNER)
    args = {"name": "vm", "subnet_id": "/s", "image": "a:b:c:d", "admin_user": "azureuser", "ssh_public_key": "k"}
    assert vm_body(req, **args)["zones"] == ["2"]
    regional = req.model_copy(update={"offer": offer("eastus")})
    assert "zones" not in vm_body(regional, **args)


def test_launch_into_a_zone_reads_back_in_that_zone(provider: AzureProvider, arm: FakeArm) -> None:
    inst = provider.get(launch(provider, "eastus-1"))
    assert inst.zone == "eastus-1" and arm.vms[inst.id]["zones"] == ["1"]


def test_disk_bodies_and_limits() -> None:
    body = disk_body("eastus", "eastus-1", 100.2, "Premium_LRS", managed_tags(7, 1, OWNER))
    assert body["zones"] == ["1"] and body["sku"] == {"name": "Premium_LRS"}
    assert body["properties"] == {"creationData": {"createOption": "Empty"}, "diskSizeGB": 101}
    assert "zones" not in disk_body("eastus", "eastus", 10, "StandardSSD_LRS", {})
    assert size_gib("StandardSSD_LRS", 4) == 4
    with pytest.raises(ValueError, match=r"volume.size: 40000 GiB is outside .* \(4 to 32767 GiB\)"):
        size_gib("Premium_LRS", 40000)


def test_premium_ssd_attaches_only_to_sizes_with_premium_storage() -> None:
    assert "Premium_LRS" in attachable("Standard_NC24ads_A100_v4")
    assert "Premium_LRS" in attachable("Standard_ND96isr_H100_v5")
    assert attachable("Standard_NC6") == {"StandardSSD_LRS"}


def test_a_size_without_premium_storage_is_refused_naming_the_option(provider: AzureProvider, arm: FakeArm) -> None:
    vol = provider.create_volume(region="eastus", zone="eastus-1", size_gib=10, tags=managed_tags(7, 1, OWNER))
    inst = launch(provider, "eastus-1", "Standard_NC6")
    with pytest.raises(PermanentError) as e:
        provider.attach_volume(vol.id, inst)
    assert e.value.code == "InvalidVolume.DiskType" and "set volume_type to StandardSSD_LRS" in str(e.value)
    assert not any(r["path"].endswith("attachDetachDataDisks") for r in arm.requests)


def test_a_regional_disk_attaches_to_a_regional_vm_but_not_a_zonal_one(provider: AzureProvider) -> None:
    vol = provider.create_volume(region="eastus", zone="eastus", size_gib=10, tags=managed_tags(8, 1, OWNER))
    assert vol.zone == "eastus"
    with pytest.raises(PermanentError) as e:
        provider.attach_volume(vol.id, launch(provider, "eastus-1", job=71))
    assert e.value.code == "InvalidVolume.ZoneMismatch"
    regional = launch(provider, "eastus", job=72)
    provider.attach_volume(vol.id, regional)
    assert next(v for v in provider.list_volumes() if v.id == vol.id).attached_to == regional


def test_a_deleted_vm_lets_go_of_its_data_disk(provider: AzureProvider, arm: FakeArm) -> None:
    vol = provider.create_volume(region="eastus", zone="eastus-2", size_gib=10, tags=managed_tags(9, 1, OWNER))
    inst = launch(provider, "eastus-2", job=73)
    provider.attach_volume(vol.id, inst)
    [data] = arm.vms[inst]["properties"]["storageProfile"]["dataDisks"]
    assert data["lun"] == 0 and data["deleteOption"] == "Detach"  # the job's data outlives the VM
    provider.terminate(inst)
    assert next(v for v in provider.list_volumes() if v.id == vol.id).attached_to is None
