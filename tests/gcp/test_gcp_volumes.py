"""GCP volumes beyond the contract: the disk types each machine series attaches, size limits,
labels and device names, and ``volume_type`` refused in one line."""

from __future__ import annotations

import pytest
from fake_gce import FakeGce

from gpuorch.errors import PermanentError, UserInputError
from gpuorch.provider.port import LaunchRequest, Offer, managed_tags
from gpuorch_gcp.config import parse_options
from gpuorch_gcp.disks import attachable, size_gb
from gpuorch_gcp.volumes import disk_body

pytestmark = pytest.mark.gcp
OWNER = "c0ffee000001"


def launch(provider, machine: str, zone: str = "us-central1-a", job: int = 70) -> str:
    o = Offer(provider="gcp", region=zone.rsplit("-", 1)[0], zone=zone, instance_type=machine, gpu="H100",
              gpu_count=1, gpu_memory_gib=80, price_per_hour=10.0)
    return provider.launch(LaunchRequest(job_id=job, attempt=1, offer=o, spot=False, owner=OWNER)).id


def test_machine_series_attach_the_disk_types_gce_documents() -> None:
    assert attachable("a3-ultragpu-8g") == attachable("a4-highgpu-8g") == {"hyperdisk-balanced"}
    assert attachable("a3-highgpu-1g") == {"pd-balanced", "pd-ssd", "hyperdisk-balanced"}
    assert attachable("g2-standard-4") == attachable("a2-highgpu-1g") == {"pd-balanced", "pd-ssd"}


def test_sizes_round_up_to_whole_gb_within_the_types_limits() -> None:
    assert size_gb("pd-balanced", 9.5) == 10 and size_gb("hyperdisk-balanced", 4) == 4
    with pytest.raises(ValueError, match=r"volume.size: 3 GiB is outside .* pd-ssd disk can be \(10 to 65536 GiB\)"):
        size_gb("pd-ssd", 3)
    with pytest.raises(ValueError, match="65536"):
        size_gb("pd-balanced", 70000)


def test_the_disk_is_named_after_the_job_and_labelled_like_every_managed_resource() -> None:
    body = disk_body("us-central1-a", 100, "pd-ssd", managed_tags(7, 1, OWNER))
    assert body["name"] == "gpuorch-c0ffee000001-7-vol"
    assert body["type_"] == "zones/us-central1-a/diskTypes/pd-ssd" and body["size_gb"] == 100
    assert body["labels"] == {"gpuorch-managed": "true", "gpuorch-job": "7", "gpuorch-attempt": "1",
                              "gpuorch-owner": OWNER}


def test_an_unknown_volume_type_is_one_line_naming_the_option() -> None:
    with pytest.raises(UserInputError) as e:
        parse_options({"project": "my-project-123", "zones": ["us-central1-a"], "volume_type": "pd-extreme"})
    assert str(e.value) == ("providers.gcp.volume_type: 'pd-extreme' is not a GCP volume disk type gpuorch knows; "
                            "use one of pd-balanced, pd-ssd, hyperdisk-balanced")


def test_a_machine_type_that_cannot_attach_the_disk_type_is_refused_before_the_call(make_provider,
                                                                                   fake: FakeGce) -> None:
    provider = make_provider(volume_type="hyperdisk-balanced")
    vol = provider.create_volume(region="us-central1", zone="us-central1-a", size_gib=50,
                                 tags=managed_tags(7, 1, OWNER))
    inst = launch(provider, "g2-standard-4")
    with pytest.raises(PermanentError) as e:
        provider.attach_volume(vol.id, inst)
    assert e.value.code == "InvalidVolume.DiskType"
    assert str(e.value).startswith("providers.gcp.volume_type: g2-standard-4 cannot attach a hyperdisk-balanced disk")
    assert not any(p.endswith("/attachDisk") for _, p in fake.requests)
    provider.attach_volume(vol.id, launch(provider, "a3-highgpu-1g", job=71))  # an A3 takes it


def test_attach_names_the_device_after_the_disk_the_mount_step_looks_for(make_provider, fake: FakeGce) -> None:
    provider = make_provider()
    vol = provider.create_volume(region="us-central1", zone="us-central1-b", size_gib=10,
                                 tags=managed_tags(9, 1, OWNER))
    inst = launch(provider, "g2-standard-4", zone="us-central1-b")
    provider.attach_volume(vol.id, inst)
    zone, name = inst.split("/")
    [attached] = [d for d in fake.instances[(zone, name)]["disks"] if not d.get("boot")]
    assert attached["deviceName"] == vol.id.split("/")[1] == "gpuorch-c0ffee000001-9-vol"
    assert attached["autoDelete"] is False  # the VM's deletion must not take the job's data with it
    provider.terminate(inst)
    assert next(v for v in provider.list_volumes() if v.id == vol.id).attached_to is None
