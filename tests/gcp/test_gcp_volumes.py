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


def test_volume_jobs_are_placed_only_on_machine_types_that_attach_the_volume_type(make_provider, store) -> None:
    from gpuorch.jobs.spec import parse_spec
    from gpuorch.reconciler.apply.volumes import Volumes

    provider = make_provider(volume_type="hyperdisk-balanced")
    offers = [Offer(provider="gcp", region="us-central1", zone="us-central1-a", instance_type=t, gpu=g, gpu_count=n,
                    gpu_memory_gib=m, price_per_hour=p) for t, g, n, m, p in
              [("g2-standard-4", "L4", 1, 24, 0.7), ("a3-highgpu-1g", "H100", 1, 80, 11.0)]]
    vols = Volumes(store, {"gcp": provider}, txn=None)  # type: ignore[arg-type]
    with_volume = parse_spec({"name": "v", "run": "x", "volume": {"size": "50GB", "mount": "/data"}})
    assert [o.instance_type for o in vols.offers_for(with_volume, offers)] == ["a3-highgpu-1g"]
    assert vols.offers_for(with_volume.model_copy(update={"volume": None}), offers) is offers


def test_submit_refuses_a_volume_job_whose_machine_types_cannot_attach_the_volume_type(_isolated_home, tmp_path):
    from typer.testing import CliRunner

    from gpuorch.cli.app import app

    (_isolated_home / "config.yaml").write_text(
        "providers:\n  gcp: {project: my-project-123, regions: [us-central1], volume_type: hyperdisk-balanced}\n")
    job = tmp_path / "l4.yaml"
    job.write_text("name: l4\nrun: x\nresources: {gpu: 'L4:1'}\nvolume: {size: 100GB, mount: /data}\n")
    r = CliRunner().invoke(app, ["submit", str(job)])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().startswith(f"error: {job}: volume: the instance types this job fits (g2-standard-")
    assert "cannot attach the volume disk type of gcp; set providers.gcp.volume_type to one they attach" in r.stderr
    (_isolated_home / "config.yaml").write_text(
        "providers:\n  gcp: {project: my-project-123, regions: [us-central1], volume_type: pd-ssd}\n")
    assert CliRunner().invoke(app, ["submit", str(job)]).exit_code == 0


def test_a_slow_attach_is_a_not_yet_and_never_holds_the_caller(fake: FakeGce, sleeps) -> None:
    import itertools

    from gpuorch.errors import TransientError
    from gpuorch_gcp import GcpProvider

    ticks = itertools.count(0, 30)  # each look at the clock is 30 s later: the bounded wait gives up at once
    provider = GcpProvider(parse_options({"project": fake.project, "zones": ["us-central1-a"], "endpoint": fake.url}),
                           sleep=sleeps.append, now=fake.now, monotonic=lambda: float(next(ticks)))
    vol = provider.create_volume(region="us-central1", zone="us-central1-a", size_gib=10,
                                 tags=managed_tags(12, 1, OWNER))
    inst = launch(provider, "g2-standard-4", job=80)
    fake.slow_attach = True
    with pytest.raises(TransientError) as e:
        provider.attach_volume(vol.id, inst)
    assert e.value.code == "NotYet"
    with pytest.raises(TransientError) as again:  # our own attach still running: a not-yet, not a failure
        provider.attach_volume(vol.id, inst)
    assert again.value.code == "VolumeInUse"
    fake.finish_attaches()
    provider.attach_volume(vol.id, inst)  # done: quiet
    assert next(v for v in provider.list_volumes() if v.id == vol.id).attached_to == inst
    provider.close()


def test_a_jobs_volume_type_overrides_the_default_and_an_unknown_one_is_refused(make_provider, fake: FakeGce):
    provider = make_provider()  # volume_type: pd-balanced
    vol = provider.create_volume(region="us-central1", zone="us-central1-a", size_gib=10,
                                 tags=managed_tags(13, 1, OWNER), disk_type="pd-ssd")
    assert fake.disks[("us-central1-a", vol.id.split("/")[1])]["type"].endswith("/diskTypes/pd-ssd")
    with pytest.raises(PermanentError) as e:
        provider.create_volume(region="us-central1", zone="us-central1-a", size_gib=10,
                               tags=managed_tags(14, 1, OWNER), disk_type="pd-extreme")
    assert e.value.code == "InvalidVolume.DiskType" and "use one of pd-balanced, pd-ssd" in str(e.value)
    assert provider.can_attach_volume("g2-standard-4", "pd-ssd")
    assert not provider.can_attach_volume("g2-standard-4", "hyperdisk-balanced")


def test_submit_checks_the_jobs_volume_type_against_the_providers(_isolated_home, tmp_path) -> None:
    from typer.testing import CliRunner

    from gpuorch.cli.app import app

    (_isolated_home / "config.yaml").write_text(
        "providers:\n  gcp: {project: my-project-123, regions: [us-central1]}\n")
    job = tmp_path / "job.yaml"
    runner = CliRunner()

    def submit(volume_type: str) -> object:
        job.write_text("name: l4\nrun: x\nresources: {gpu: 'L4:1'}\n"
                       f"volume: {{size: 100GB, mount: /data, type: {volume_type}}}\n")
        return runner.invoke(app, ["submit", str(job)])

    r = submit("gp3")
    assert r.exit_code == 2 and r.stderr.strip() == (
        f"error: {job}: volume.type: 'gp3' is not a disk type of the providers this job may use (gcp: pd-balanced, "
        "pd-ssd, hyperdisk-balanced); use one of those, or leave it out for each provider's default")
    r = submit("hyperdisk-balanced")  # L4 means G2, which attaches no Hyperdisk
    assert r.exit_code == 2 and "volume.type: the instance types this job fits (g2-standard-" in r.stderr
    assert submit("pd-ssd").exit_code == 0
