"""The contract suite of volumes given at launch (``SupportsLaunchVolumes``,
``gpuorch.provider.launch_volumes``): the tests Lambda, RunPod and Vast pass.

A test module subclasses ``LaunchVolumeContract`` (its name starting with ``Test``) and provides
the ``provider`` fixture and the instance side: ``write`` and ``read`` a file at a path on a
launched instance, as the job would (against a fake, the fake plays the instance's mounts).
``advance`` moves the fake's clock where it has one. Requires pytest; nothing outside tests
imports this.

What it holds every provider to: the capability is declared and implemented; a create carries
the job's tags, is listed, and repeated (after a crash) returns the same volume; an instance
launched with the volume (``LaunchRequest.volumes``) sees it at the request's mount path, and
what it wrote there is read by the next instance of the job after the first is gone (the data
outlives the instance); delete is a not-yet (TransientError ``VolumeInUse``) while an instance
uses it and quiet once the volume is gone; a launch naming a volume that does not exist is
refused (PermanentError).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator

import pytest

from gpuorch.errors import NotFoundError, PermanentError, ProviderError, TransientError
from gpuorch.provider.launch_volumes import SupportsLaunchVolumes
from gpuorch.provider.port import (
    TAG_JOB,
    TAG_OWNER,
    Instance,
    InstanceState,
    LaunchRequest,
    Offer,
    Provider,
    Volume,
    VolumeSpec,
)

MOUNT = "/data"


class LaunchVolumeContract:
    """Base class of every launch-volume adapter's contract tests."""

    owner = "c0ffee000002"
    missing_volume_id = "0"  # in the provider's format, held by no volume
    timeout_s = 10.0

    # -- fixtures and hooks ------------------------------------------------------------------
    @pytest.fixture
    def provider(self) -> Provider:
        raise NotImplementedError("a LaunchVolumeContract subclass must provide the `provider` fixture")

    @pytest.fixture
    def volumes(self, provider: Provider) -> Iterator[SupportsLaunchVolumes]:
        """The provider as ``SupportsLaunchVolumes``; ends what the test left (best effort)."""
        assert provider.capabilities.volumes_at_launch, f"{type(provider).__name__} does not declare volumes_at_launch"
        assert isinstance(provider, SupportsLaunchVolumes), f"{type(provider).__name__} lacks SupportsLaunchVolumes"
        self._launched: list[str] = []
        self._created: list[Volume] = []
        yield provider
        for iid in self._launched:
            try:
                provider.terminate(iid)
            except ProviderError:
                pass
        for vol in self._created:
            try:
                provider.delete_launch_volume(vol.id)
            except ProviderError:
                pass

    def offer(self, provider: Provider) -> Offer:
        """The offer the suite launches on: the cheapest on-demand one by default."""
        return min(provider.offers(), key=lambda o: o.price_per_hour)

    def write(self, provider: Provider, instance: Instance, path: str, data: bytes) -> None:
        raise NotImplementedError("write `data` at `path` on the instance, as its job would")

    def read(self, provider: Provider, instance: Instance, path: str) -> bytes | None:
        raise NotImplementedError("the bytes at `path` on the instance, None if there is no such file")

    def advance(self, provider: Provider, seconds: float) -> None:
        """Move the provider's clock (a fake's); the default waits that long, briefly."""
        time.sleep(min(seconds, 0.05))

    # -- helpers -----------------------------------------------------------------------------
    def tags(self, job_id: int) -> dict[str, str]:
        return {"gpuorch:managed": "true", TAG_JOB: str(job_id), TAG_OWNER: self.owner}

    def create(self, volumes: SupportsLaunchVolumes, offer: Offer, job_id: int) -> Volume:
        vol = volumes.create_launch_volume(offer=offer, size_gib=10, tags=self.tags(job_id))
        self._created.append(vol)
        return vol

    def launch(self, provider: Provider, offer: Offer, job_id: int, attempt: int, vol: Volume) -> Instance:
        req = LaunchRequest(job_id=job_id, attempt=attempt, offer=offer, spot=False, owner=self.owner,
                            volumes=(VolumeSpec(volume_id=vol.id, mount_path=MOUNT),))
        inst = provider.launch(req)
        self._launched.append(inst.id)
        return self.until(provider, inst.id, lambda i: i.state == InstanceState.RUNNING, "running")

    def until(self, provider: Provider, instance_id: str, ok: Callable[[Instance], bool], what: str) -> Instance:
        """The instance once ``ok`` holds (a forgotten one reads TERMINATED), advancing the clock."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                inst = provider.get(instance_id)
            except NotFoundError:
                inst = Instance(id=instance_id, provider=provider.name, region="", zone="", instance_type="",
                                spot=False, state=InstanceState.TERMINATED)
            if ok(inst):
                return inst
            assert time.monotonic() < deadline, f"instance {instance_id} not {what} within {self.timeout_s}s"
            self.advance(provider, 1.0)

    def job(self) -> int:
        return 10**6 + secrets.randbelow(10**9)

    # -- the tests ---------------------------------------------------------------------------
    def test_create_carries_the_jobs_tags_is_listed_and_is_idempotent(
            self, provider: Provider, volumes: SupportsLaunchVolumes) -> None:
        offer, job = self.offer(provider), self.job()
        first = self.create(volumes, offer, job)
        assert first.provider == provider.name and first.size_gib >= 10
        assert (first.tags.get(TAG_JOB), first.tags.get(TAG_OWNER)) == (str(job), self.owner)
        listed = [v for v in volumes.list_launch_volumes() if v.id == first.id]
        assert len(listed) == 1 and listed[0].tags.get(TAG_JOB) == str(job)
        assert self.create(volumes, offer, job).id == first.id, "a repeated create finds the first volume"
        assert [v.id for v in volumes.list_launch_volumes() if v.tags.get(TAG_JOB) == str(job)] == [first.id]
        assert self.create(volumes, offer, job + 1).id != first.id

    def test_a_jobs_data_outlives_its_instance_and_the_next_attempt_reads_it(
            self, provider: Provider, volumes: SupportsLaunchVolumes) -> None:
        offer, job = self.offer(provider), self.job()
        vol = self.create(volumes, offer, job)
        first = self.launch(provider, offer, job, 1, vol)
        self.write(provider, first, f"{MOUNT}/ckpt/step-300", b"written by attempt 1")
        provider.terminate(first.id)
        self.until(provider, first.id, lambda i: not i.state.alive, "gone")
        second = self.launch(provider, offer, job, 2, vol)
        assert second.id != first.id
        assert self.read(provider, second, f"{MOUNT}/ckpt/step-300") == b"written by attempt 1"

    def test_delete_waits_while_an_instance_uses_the_volume_and_is_quiet_once_gone(
            self, provider: Provider, volumes: SupportsLaunchVolumes) -> None:
        offer, job = self.offer(provider), self.job()
        vol = self.create(volumes, offer, job)
        inst = self.launch(provider, offer, job, 1, vol)
        with pytest.raises(TransientError) as e:
            volumes.delete_launch_volume(vol.id)
        assert e.value.code == "VolumeInUse"
        assert any(v.id == vol.id for v in volumes.list_launch_volumes()), "a refused delete changes nothing"
        provider.terminate(inst.id)
        self.until(provider, inst.id, lambda i: not i.state.alive, "gone")
        deadline = time.monotonic() + self.timeout_s
        while True:  # the provider may hold the volume a moment after its instance ended
            try:
                volumes.delete_launch_volume(vol.id)
                break
            except TransientError:
                assert time.monotonic() < deadline, "the volume stayed in use after its instance ended"
                self.advance(provider, 1.0)
        assert all(v.id != vol.id for v in volumes.list_launch_volumes())
        volumes.delete_launch_volume(vol.id)  # quiet: already gone
        volumes.delete_launch_volume(self.missing_volume_id)

    def test_the_suites_offer_can_carry_a_volume(self, provider: Provider, volumes: SupportsLaunchVolumes) -> None:
        assert volumes.can_carry_volume(self.offer(provider))

    def test_a_launch_naming_a_volume_that_does_not_exist_is_refused(
            self, provider: Provider, volumes: SupportsLaunchVolumes) -> None:
        offer = self.offer(provider)
        req = LaunchRequest(job_id=self.job(), attempt=1, offer=offer, spot=False, owner=self.owner,
                            volumes=(VolumeSpec(volume_id=self.missing_volume_id, mount_path=MOUNT),))
        with pytest.raises(PermanentError):
            inst = provider.launch(req)
            self._launched.append(inst.id)
