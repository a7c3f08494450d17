"""The volume contract suite: the tests every provider with ``SupportsVolumes`` passes.

Each test checks one sentence of the ``SupportsVolumes`` docstrings in ``gpuorch.provider.port``.
A test module subclasses ``VolumeContract`` (its name starting with ``Test``) and provides the
``provider`` fixture; ``instance_in(provider, zone)`` launches an instance to attach to (by
default an on-demand launch of the zone's cheapest offer). The suite needs two zones of one
region among the provider's offers. Requires pytest; nothing outside tests imports this.

What it holds every provider to: create, attach, detach and delete are idempotent (a create
repeated after a crash, with the same job's tags, returns the volume the first made); a zone
mismatch is a domain error (PermanentError ``InvalidVolume.ZoneMismatch``); "still attached"
(attach of a volume another instance holds, delete of an attached one) is a retryable not-yet
(TransientError ``VolumeInUse``) that changes nothing; a missing volume deletes quietly.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from gpuorch.errors import NotFoundError, PermanentError, ProviderError, TransientError
from gpuorch.provider.port import LaunchRequest, Provider, SupportsVolumes, Volume, managed_tags


class VolumeContract:
    """Base class of every volume-capable adapter's contract tests."""

    owner = "c0ffee000001"
    missing_volume_id = "vol-0123456789abcdef0"  # in the provider's format, held by no volume

    # -- fixtures and hooks ------------------------------------------------------------------
    @pytest.fixture
    def provider(self) -> Provider:
        raise NotImplementedError("a VolumeContract subclass must provide the `provider` fixture")

    @pytest.fixture
    def volumes(self, provider: Provider) -> Iterator[SupportsVolumes]:
        """The provider as ``SupportsVolumes``; deletes what the test left (best effort)."""
        assert isinstance(provider, SupportsVolumes), f"{type(provider).__name__} does not implement SupportsVolumes"
        self._created: list[Volume] = []
        yield provider
        for vol in self._created:
            try:
                provider.detach_volume(vol.id, vol.attached_to or "")
                provider.delete_volume(vol.id)
            except ProviderError:
                pass

    @pytest.fixture
    def zones(self, provider: Provider) -> tuple[str, str, str]:
        """(region, a zone, another zone of the same region) among the provider's offers."""
        by_region: dict[str, set[str]] = {}
        for o in provider.offers():
            by_region.setdefault(o.region, set()).add(o.zone)
        for region, zs in sorted(by_region.items()):
            if len(zs) >= 2:
                a, b = sorted(zs)[:2]
                return region, a, b
        pytest.skip("the provider's offers have no region with two zones")

    def instance_in(self, provider: Provider, zone: str) -> str:
        """Launch an instance in ``zone`` and return its id."""
        offer = min((o for o in provider.offers() if o.zone == zone), key=lambda o: o.price_per_hour)
        job = 10**6 + secrets.randbelow(10**9)
        return provider.launch(LaunchRequest(job_id=job, attempt=1, offer=offer, spot=False, owner=self.owner)).id

    def settle(self, volumes: SupportsVolumes) -> None:
        """Let a detach finish (a cloud whose detach is asynchronous overrides this)."""

    # -- helpers -----------------------------------------------------------------------------
    def create(self, volumes: SupportsVolumes, region: str, zone: str, job_id: int = 7) -> Volume:
        vol = volumes.create_volume(region=region, zone=zone, size_gib=10, tags=managed_tags(job_id, 1, self.owner))
        self._created.append(vol)
        return vol

    def listed(self, volumes: SupportsVolumes, volume_id: str) -> Volume | None:
        return next((v for v in volumes.list_volumes() if v.id == volume_id), None)

    # -- create and list -----------------------------------------------------------------------
    def test_create_returns_a_detached_volume_in_its_zone_with_its_tags(
        self, volumes: SupportsVolumes, zones: tuple[str, str, str]
    ) -> None:
        region, zone, _ = zones
        vol = volumes.create_volume(region=region, zone=zone, size_gib=9.5, tags=managed_tags(7, 1, self.owner))
        self._created.append(vol)
        assert (vol.region, vol.zone, vol.attached_to) == (region, zone, None)
        assert vol.size_gib >= 9.5, "never smaller than asked (a provider may round up)"
        assert managed_tags(7, 1, self.owner).items() <= vol.tags.items()

    def test_list_volumes_lists_a_created_volume(self, volumes: SupportsVolumes, zones: tuple[str, str, str]) -> None:
        region, zone, _ = zones
        vol = self.create(volumes, region, zone)
        got = self.listed(volumes, vol.id)
        assert got is not None and (got.zone, got.attached_to) == (zone, None)
        assert managed_tags(7, 1, self.owner).items() <= got.tags.items()

    def test_create_is_idempotent_by_the_jobs_tags(self, volumes: SupportsVolumes, zones: tuple[str, str, str]) -> None:
        """A create repeated after a crash (same job, same installation) finds the first volume."""
        region, zone, _ = zones
        first = self.create(volumes, region, zone, job_id=7)
        assert self.create(volumes, region, zone, job_id=7).id == first.id
        assert [v.id for v in volumes.list_volumes() if v.tags.get("gpuorch:job") == "7"] == [first.id]
        assert self.create(volumes, region, zone, job_id=8).id != first.id

    # -- attach and detach ---------------------------------------------------------------------
    def test_attach_is_seen_in_list_and_quiet_the_second_time(
        self, provider: Provider, volumes: SupportsVolumes, zones: tuple[str, str, str]
    ) -> None:
        region, zone, _ = zones
        vol, inst = self.create(volumes, region, zone), self.instance_in(provider, zone)
        volumes.attach_volume(vol.id, inst)
        volumes.attach_volume(vol.id, inst)
        got = self.listed(volumes, vol.id)
        assert got is not None and got.attached_to == inst

    def test_attach_across_zones_is_refused(
        self, provider: Provider, volumes: SupportsVolumes, zones: tuple[str, str, str]
    ) -> None:
        region, zone, other = zones
        vol, inst = self.create(volumes, region, zone), self.instance_in(provider, other)
        with pytest.raises(PermanentError) as e:
            volumes.attach_volume(vol.id, inst)
        assert e.value.code == "InvalidVolume.ZoneMismatch"
        got = self.listed(volumes, vol.id)
        assert got is not None and got.attached_to is None

    def test_attach_of_a_volume_held_by_another_instance_is_refused(
        self, provider: Provider, volumes: SupportsVolumes, zones: tuple[str, str, str]
    ) -> None:
        region, zone, _ = zones
        vol = self.create(volumes, region, zone)
        holder, other = self.instance_in(provider, zone), self.instance_in(provider, zone)
        volumes.attach_volume(vol.id, holder)
        with pytest.raises(TransientError) as e:  # a not-yet: the holder's detach may be under way
            volumes.attach_volume(vol.id, other)
        assert e.value.code == "VolumeInUse"
        got = self.listed(volumes, vol.id)
        assert got is not None and got.attached_to == holder

    def test_attach_of_an_unknown_volume_raises_not_found(
        self, provider: Provider, volumes: SupportsVolumes, zones: tuple[str, str, str]
    ) -> None:
        inst = self.instance_in(provider, zones[1])
        with pytest.raises(NotFoundError):
            volumes.attach_volume(self.missing_volume_id, inst)

    def test_detach_frees_the_volume_and_is_quiet_when_not_attached(
        self, provider: Provider, volumes: SupportsVolumes, zones: tuple[str, str, str]
    ) -> None:
        region, zone, _ = zones
        vol, inst = self.create(volumes, region, zone), self.instance_in(provider, zone)
        volumes.attach_volume(vol.id, inst)
        volumes.detach_volume(vol.id, inst)
        got = self.listed(volumes, vol.id)
        assert got is not None and got.attached_to is None
        volumes.detach_volume(vol.id, inst)
        volumes.detach_volume(self.missing_volume_id, inst)

    # -- delete --------------------------------------------------------------------------------
    def test_delete_of_an_attached_volume_is_refused(
        self, provider: Provider, volumes: SupportsVolumes, zones: tuple[str, str, str]
    ) -> None:
        region, zone, _ = zones
        vol, inst = self.create(volumes, region, zone), self.instance_in(provider, zone)
        volumes.attach_volume(vol.id, inst)
        with pytest.raises(TransientError) as e:  # a not-yet: try again once it is detached
            volumes.delete_volume(vol.id)
        assert e.value.code == "VolumeInUse"
        assert self.listed(volumes, vol.id) is not None
        volumes.detach_volume(vol.id, inst)
        self.settle(volumes)
        volumes.delete_volume(vol.id)
        assert self.listed(volumes, vol.id) is None

    def test_delete_removes_the_volume_and_is_quiet_when_gone(
        self, volumes: SupportsVolumes, zones: tuple[str, str, str]
    ) -> None:
        region, zone, _ = zones
        vol = self.create(volumes, region, zone)
        volumes.delete_volume(vol.id)
        gone = self.listed(volumes, vol.id)
        assert gone is None, f"{vol.id} is still listed after delete"
        volumes.delete_volume(vol.id)
        volumes.delete_volume(self.missing_volume_id)


__all__ = ["VolumeContract"]
