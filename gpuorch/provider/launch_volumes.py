"""Volumes given at launch (issue 33 item 4): Lambda persistent filesystems, RunPod network
volumes, Vast volumes. Unlike ``SupportsVolumes`` (a block device attached to a running
instance), such a volume is named in the launch request (``LaunchRequest.volumes``), mounted by
the provider (an NFS share, a network or host mount) and never detached from a running instance.

An adapter declares ``Capabilities(volumes_at_launch=True)`` and implements
``SupportsLaunchVolumes``; the daemon (``gpuorch.reconciler.apply.volumes``) then creates the
job's volume before the first launch, in the region (data center, machine) of the offer placed,
passes it in every later launch request, and deletes it when the job ends. The contract suite is
``gpuorch.testing.launch_volume_contract``.

Providers without tags carry the volume's tags in its name (``launch_volume_name``), which every
one of the three accepts: ``gpuorch-<owner>-j<job>``.
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from gpuorch.provider.offer import Offer
from gpuorch.provider.port import TAG_JOB, TAG_MANAGED, TAG_OWNER, Volume

_NAME = re.compile(r"gpuorch-([a-z0-9]{1,16})-j([0-9]{1,18})")


def launch_volume_name(tags: dict[str, str]) -> str:
    """The name that carries a job volume's tags (its job and owner): letters, digits and ``-``,
    at most 45 characters (Lambda's filesystem names: a letter first, then letters, digits and
    hyphens, up to 60). ValueError for an owner that is not a short lowercase alphanumeric id
    (the daemon's installation ids are 12 hex digits) or a job that is not a number."""
    owner, job = tags.get(TAG_OWNER, ""), tags.get(TAG_JOB, "")
    name = f"gpuorch-{owner}-j{job}"
    if not _NAME.fullmatch(name):
        raise ValueError(f"volume tags {tags!r}: the owner must be 1-16 lowercase letters or digits, "
                         "the job a number")
    return name


def launch_volume_tags(name: str) -> dict[str, str]:
    """The tags ``launch_volume_name`` put in ``name``; {} for a name that is not one of gpuorch's."""
    m = _NAME.fullmatch(name or "")
    if m is None:
        return {}
    return {TAG_MANAGED: "true", TAG_JOB: m.group(2), TAG_OWNER: m.group(1)}


@runtime_checkable
class SupportsLaunchVolumes(Protocol):
    """Volumes an instance gets at launch (``LaunchRequest.volumes``), found by ``isinstance``
    where the adapter declares ``capabilities.volumes_at_launch``."""

    def create_launch_volume(self, *, offer: Offer, size_gib: float, tags: dict[str, str]) -> Volume:
        """A volume an instance launched on ``offer`` can be given, of at least ``size_gib``,
        carrying ``tags`` (the job and owner: ``launch_volume_name``) and listed by
        ``list_launch_volumes`` from then on. Placed where the offer launches (Lambda: its region;
        RunPod: a data center; Vast: one machine that sells the offer's class); the adapter's
        ``launch`` of a request naming the volume keeps to that place. Idempotent by the tags' job
        and owner: a repeat (after a crash) returns the volume the first call created.
        PermanentError ``InvalidVolume.Size`` for a size the provider does not make;
        NoCapacityError where no place can hold it now; TransientError while it is being made
        (``VolumeCreating``: call again)."""
        ...

    def can_carry_volume(self, offer: Offer) -> bool:
        """Whether an instance launched on ``offer`` can be given a volume at all (RunPod: Secure
        Cloud only). Pure, no cloud call: placement keeps a volume job to such offers."""
        ...

    def list_launch_volumes(self) -> list[Volume]:
        """The account's volumes that carry gpuorch's tags (any owner), ``zone`` the place an
        instance must launch to be given it; ``attached_to`` the instance using it, if known."""
        ...

    def delete_launch_volume(self, volume_id: str) -> None:
        """Delete, data and all; quiet if already gone. TransientError ``VolumeInUse`` (a
        not-yet) while an instance still uses it."""
        ...
