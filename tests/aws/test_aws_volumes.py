"""EBS volumes against moto: gp3, tagged, attached only within their zone."""

from __future__ import annotations

from typing import Any

import pytest

from gpuorch.errors import NotFoundError, PermanentError, TransientError
from gpuorch.provider.port import LaunchRequest, Offer, SupportsVolumes, managed_tags
from gpuorch_aws import AwsProvider

pytestmark = pytest.mark.aws


@pytest.fixture
def instance_in(provider: AwsProvider, moto_offers: list[Offer]) -> Any:
    def launch(zone: str, job: int = 7) -> str:
        offer = next(o for o in moto_offers if o.zone == zone)
        return provider.launch(LaunchRequest(job_id=job, attempt=1, offer=offer, spot=False)).id

    return launch


def test_aws_provider_supports_volumes(provider: AwsProvider) -> None:
    assert isinstance(provider, SupportsVolumes)


def test_create_makes_a_tagged_gp3_volume(provider: AwsProvider, ec2: Any) -> None:
    vol = provider.create_volume(region="us-east-1", zone="us-east-1b", size_gib=99.5,
                                 tags=managed_tags(7, 1, "inst-a"))
    assert (vol.zone, vol.size_gib, vol.attached_to) == ("us-east-1b", 100.0, None)
    d = ec2.describe_volumes(VolumeIds=[vol.id])["Volumes"][0]
    assert d["VolumeType"] == "gp3"
    assert {t["Key"]: t["Value"] for t in d["Tags"]} == managed_tags(7, 1, "inst-a")
    assert [v.id for v in provider.list_volumes() if v.tags.get("gpuorch:job") == "7"] == [vol.id]


def test_attach_in_the_same_zone_then_detach(provider: AwsProvider, instance_in: Any) -> None:
    inst = instance_in("us-east-1b")
    vol = provider.create_volume(region="us-east-1", zone="us-east-1b", size_gib=10, tags={"gpuorch:job": "7"})
    provider.attach_volume(vol.id, inst)
    provider.attach_volume(vol.id, inst)  # already attached there: quiet
    assert next(v for v in provider.list_volumes() if v.id == vol.id).attached_to == inst
    with pytest.raises(TransientError, match="detach it first") as e:
        provider.attach_volume(vol.id, instance_in("us-east-1b", job=8))
    assert e.value.code == "VolumeInUse"
    with pytest.raises(TransientError, match="VolumeInUse"):
        provider.delete_volume(vol.id)
    provider.detach_volume(vol.id, inst)
    assert next(v for v in provider.list_volumes() if v.id == vol.id).attached_to is None
    provider.detach_volume(vol.id, inst)  # not attached: quiet


def test_a_cross_zone_attach_is_refused_before_calling_ec2(provider: AwsProvider, instance_in: Any) -> None:
    inst = instance_in("us-east-1a")
    vol = provider.create_volume(region="us-east-1", zone="us-east-1b", size_gib=10, tags={})
    with pytest.raises(PermanentError, match="only to instances in its own zone; launch in us-east-1b") as e:
        provider.attach_volume(vol.id, inst)
    assert e.value.code == "InvalidVolume.ZoneMismatch"
    assert next(v for v in provider.list_volumes() if v.id == vol.id).attached_to is None


def test_a_cross_region_attach_is_refused_too(provider: AwsProvider, instance_in: Any) -> None:
    inst = instance_in("us-west-2a")
    vol = provider.create_volume(region="us-east-1", zone="us-east-1a", size_gib=10, tags={})
    with pytest.raises(PermanentError, match="own zone"):
        provider.attach_volume(vol.id, inst)


def test_delete_is_quiet_when_gone_and_attach_of_a_missing_volume_is_not_found(
    provider: AwsProvider, instance_in: Any
) -> None:
    vol = provider.create_volume(region="us-east-1", zone="us-east-1b", size_gib=10, tags={})
    provider.delete_volume(vol.id)
    provider.delete_volume(vol.id)
    assert vol.id not in {v.id for v in provider.list_volumes()}
    with pytest.raises(NotFoundError):
        provider.attach_volume(vol.id, instance_in("us-east-1b"))
    provider.detach_volume(vol.id, "i-0123456789abcdef0")
