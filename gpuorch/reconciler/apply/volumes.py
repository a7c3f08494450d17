"""The job's volume (spec ``volume:``): created once, attached to each attempt, deleted at the end.

Contract, on providers that implement ``SupportsVolumes`` (found by ``isinstance``). A volume job
is placed only on those (``offers_for``; ``submit`` and ``plan`` refuse a job none of whose
allowed providers has volumes); one placed elsewhere before that rule (an older daemon) runs
without its volume, and an event says so.

- Intent first: the provider, region and zone go on the job row before the create call; the
  zone is the one of the first attempt that got an instance. From then on placement *requires*
  that zone (``decide`` passes ``volume_zone=``): an EBS-like volume attaches only there. If no
  offer is available in it, the job waits queued (no snapshot-and-move).
- Look before creating: a volume tagged with the job and this installation is adopted, so a
  crash between intent and create (or between create and recording its id) ends with one volume.
- Attached before the agent starts (``attach`` returns None until it is; the StartAgent action
  comes again next pass; the first attach is recorded as the attempt's ``volume_attached_at``),
  detached when the attempt ends (best effort: a terminated instance lets go of it anyway). The
  agent config names it (``volume_id``, ``volume_dir``): the SSH runner mounts it at
  ``volume.mount`` before starting the agent (``gpuorch.runners.volume_mount``); the job gets
  the path as ``GPUORCH_VOLUME_DIR``. The runner never waits for the device: while it is not
  there it raises VolumeNotReady and the start is tried again next pass, until ``volume_wait_s``
  after ``volume_attached_at``; then, or at once when the runner raises VolumeMountFailed, the
  attempt ends FAILED with the reason (``decide.volume_failed``; recording.py).
- Deleted when the job is terminal; ``sweep`` deletes this installation's volumes that no
  unfinished job owns, which also retries deletes that failed (volume still detaching). Except a
  kept one (``volume.keep``): it stays until ``gpuorch volume delete`` asks (``kept_volumes``).

Volumes given at launch (capability ``volumes_at_launch``, ``SupportsLaunchVolumes``: Lambda,
RunPod, Vast) follow the same rules with one change of order: ``for_launch`` records the intent
(the offer's provider, region and zone) and creates or finds the volume *before* the launch, in
the place of the offer placed, and the launch request names it (``LaunchRequest.volumes``, at the
spec's ``mount``); every later attempt keeps to that zone (placement) and the adapter to its
data center or machine. A create refused for good before anything exists clears the intent, so
the job may be placed elsewhere. ``attach`` has nothing to do for them (the agent config names no
device to mount: the provider mounted it), and nothing is detached.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING

from sqlmodel import Session, col, select

from gpuorch.errors import NoCapacityError, NotFoundError, PermanentError, ProviderError, QuotaError
from gpuorch.jobs import events
from gpuorch.money.storage import KEPT, made_data
from gpuorch.ops.crashpoints import crashpoint
from gpuorch.provider.launch_volumes import SupportsLaunchVolumes
from gpuorch.provider.port import (
    TAG_JOB,
    TAG_MANAGED,
    TAG_OWNER,
    Offer,
    Provider,
    SupportsVolumes,
    Volume,
    VolumeSpec,
)
from gpuorch.reconciler.apply import kept_volumes
from gpuorch.store import Store
from gpuorch.store.models import Attempt, Job

if TYPE_CHECKING:
    from gpuorch.jobs.spec import JobSpec, VolumeRequest

log = logging.getLogger("gpuorch.reconciler.volumes")

Txn = Callable[[int], AbstractContextManager[tuple[Session, Job]]]


def volume_tags(job_id: int, owner: str) -> dict[str, str]:
    return {TAG_MANAGED: "true", TAG_JOB: str(job_id), TAG_OWNER: owner}


def launch_provider(p: Provider | None) -> SupportsLaunchVolumes | None:
    """``p`` where it declares volumes given at launch and has their methods."""
    if p is not None and p.capabilities.volumes_at_launch and isinstance(p, SupportsLaunchVolumes):
        return p
    return None


def _record_volume(txn: Txn, job_id: int, attempt: int, vol: Volume, found: bool, now: datetime,
                   disk_type: str | None = None) -> None:
    """The volume's id on the job, and its ``volume`` event: what ``gpuorch.money.storage`` bills
    from (provider, size, and the volume's own rate where the provider gives one, else the catalog's now)."""
    with txn(job_id) as (s, job):
        job.volume_id = vol.id
        how = "found again by its tags" if found else "created"
        events.record(s, now, "volume", f"volume {vol.id} ({vol.size_gib:g} GiB) in {vol.zone} {how}",
                      job_id=job_id, attempt=attempt, **made_data(vol.provider, vol.size_gib, disk_type,
                                                                     vol.usd_per_gib_month))


def for_launch(txn: Txn, p: SupportsLaunchVolumes, owner: str, job_id: int, attempt: int, offer: Offer,
               volume: VolumeRequest, now: datetime) -> VolumeSpec:
    """The job's volume for a launch on ``offer`` by a provider of volumes given at launch: the
    intent (provider, region, zone) recorded first, then the volume found by its tags or created
    there, its id recorded. PermanentError ``InvalidVolume.Place`` when the volume is elsewhere
    (placement keeps a volume job to its zone; only a zone name two providers share gets here).
    A create refused for good (or for want of capacity) with no volume made clears the intent.
    Raises what the provider raises."""
    with txn(job_id) as (s, job):
        if job.volume_zone is None:
            job.volume_provider, job.volume_region, job.volume_zone = offer.provider, offer.region, offer.zone
        elif (job.volume_provider, job.volume_zone) != (offer.provider, offer.zone):
            raise PermanentError(f"job {job_id}: its volume is in {job.volume_provider} {job.volume_zone}, "
                                 f"not {offer.provider} {offer.zone}", code="InvalidVolume.Place")
        volume_id = job.volume_id
    if volume_id is None:
        crashpoint("volume.intent")  # the place recorded, nothing made yet
        tags = volume_tags(job_id, owner)
        found = [v for v in p.list_launch_volumes()
                 if v.tags.get(TAG_OWNER) == owner and v.tags.get(TAG_JOB) == str(job_id)]
        try:
            vol = found[0] if found else p.create_launch_volume(offer=offer, size_gib=volume.size, tags=tags)
        except (PermanentError, NoCapacityError, QuotaError):  # refused: nothing was made, the job may go elsewhere
            _forget_place(txn, job_id)
            raise
        crashpoint("volume.created")  # the volume exists and nothing says so yet: its name finds it again
        _record_volume(txn, job_id, attempt, vol, bool(found), now)
        volume_id = vol.id
    return VolumeSpec(volume_id=volume_id, mount_path=volume.mount)


def _forget_place(txn: Txn, job_id: int) -> None:
    with txn(job_id) as (_, job):
        if job.volume_id is None:
            job.volume_provider = job.volume_region = job.volume_zone = None


class Volumes:
    def __init__(self, store: Store, providers: Mapping[str, Provider], txn: Txn, sweep_every_s: float = 60.0) -> None:
        self.store, self.providers, self._txn = store, providers, txn
        self.sweep_every_s = sweep_every_s  # list_volumes is a cloud call per region: not every pass
        self._swept_at: datetime | None = None
        # volume.type -> (the offers, those a job of that type may use): one list per type and catalog
        self._scoped: dict[str | None, tuple[Sequence[Offer], list[Offer]]] = {}

    def offers_for(self, spec: JobSpec, offers: Sequence[Offer]) -> Sequence[Offer]:
        """The offers a job may be placed on: for a ``volume:`` job, only those of providers with
        volumes (no silent drop) whose instance type can attach the job's ``volume.type`` (or the
        provider's default). The same list object for every job of a type while ``offers`` is the
        same (placement memoises on it)."""
        if spec.volume is None:
            return offers
        cached = self._scoped.get(spec.volume.type)
        if cached is None or cached[0] is not offers:
            cached = self._scoped[spec.volume.type] = (offers, [o for o in offers
                                                                if self._attachable(o, spec.volume.type)])
        return cached[1]

    def _attachable(self, o: Offer, disk_type: str | None) -> bool:
        """A provider with volumes, and (where it says: capability ``volume_attach_check``) an
        instance type that can attach the job's disk type (or the provider's default)."""
        if self._provider(o.provider) is None:
            lp = launch_provider(self.providers.get(o.provider))
            return lp is not None and lp.can_carry_volume(o)
        p = self.providers[o.provider]
        return not p.capabilities.volume_attach_check or p.can_attach_volume(o.instance_type, disk_type)

    def _provider(self, name: str | None) -> SupportsVolumes | None:
        p = self.providers.get(name or "")
        return p if isinstance(p, SupportsVolumes) else None

    def _mine(self, vols: list[Volume]) -> Iterator[Volume]:
        return (v for v in vols if v.tags.get(TAG_OWNER) == self.store.installation_id and v.tags.get(TAG_JOB))

    def attach(self, job_id: int, size_gib: float, row: Attempt, instance_id: str, now: datetime,
               disk_type: str | None = None) -> str | None:
        """Make sure the job's volume exists and is attached to ``instance_id``. Its id when it is
        ("" when the provider has no volumes, or gave it at launch); None: try again next pass."""
        if launch_provider(self.providers.get(row.provider)) is not None:
            return ""  # named in the launch request and mounted by the provider: no device to mount
        p = self._provider(row.provider)
        if p is None:
            with self._txn(job_id) as (s, job):
                if job.volume_provider is None:
                    job.volume_provider = row.provider
                    events.record(s, now, "volume_unsupported", f"{row.provider} has no volumes; running without one",
                                  job_id=job_id, attempt=row.number)
            return ""
        with self._txn(job_id) as (s, job):
            if job.volume_zone is None:  # intent, before any create call
                job.volume_provider, job.volume_region, job.volume_zone = row.provider, row.region, row.zone
            volume_id, zone = job.volume_id, job.volume_zone
        try:
            if volume_id is None:
                volume_id = self._ensure(p, job_id, row, zone, size_gib, now, disk_type)
            p.attach_volume(volume_id, instance_id)
        except PermanentError as e:
            if e.code == "VolumeInUse":  # an adapter of the older contract: its predecessor still holds it
                log.warning("job %s: volume not attached yet: %s", job_id, e)
                return None
            # Final for this attempt (a disk type its machine cannot attach, a size out of range...):
            # recorded like a mount failure, so the next decide ends it and the retry policy decides.
            with self._txn(job_id) as (s, _):
                r = s.get(Attempt, row.id)
                if r is not None and r.start_error is None:
                    r.start_error = f"volume: {e}"
            return None
        except ProviderError as e:
            log.warning("job %s: volume call failed, will retry: %s", job_id, e)
            return None
        if row.volume_attached_at is None:  # the runner's wait for its device counts from here
            with self._txn(job_id) as (s, _):
                r = s.get(Attempt, row.id)
                if r is not None and r.volume_attached_at is None:
                    r.volume_attached_at = now
                    events.record(s, now, "volume_attached", f"volume {volume_id} attached to {instance_id}",
                                  job_id=job_id, attempt=row.number)
        return volume_id

    def _ensure(self, p: SupportsVolumes, job_id: int, row: Attempt, zone: str, size_gib: float, now: datetime,
                disk_type: str | None) -> str:
        """Find the job's volume by its tags, or create it; record its id."""
        found = [v for v in self._mine(p.list_volumes()) if v.tags.get(TAG_JOB) == str(job_id)]
        vol = found[0] if found else p.create_volume(region=row.region, zone=zone, size_gib=size_gib,
                                                     tags=volume_tags(job_id, self.store.installation_id),
                                                     disk_type=disk_type)
        _record_volume(self._txn, job_id, row.number, vol, bool(found), now, disk_type)
        return vol.id

    def detach(self, job: Job, instance_id: str | None) -> None:
        """Best effort: the attempt is over; its instance lets go of the volume."""
        p = self._provider(job.volume_provider)
        if p is None or job.volume_id is None or instance_id is None:
            return
        try:
            p.detach_volume(job.volume_id, instance_id)
        except ProviderError as e:
            log.info("detach %s from %s: %s (terminating the instance detaches it)", job.volume_id, instance_id, e)

    def release(self, job_id: int, now: datetime) -> None:
        """The job is terminal: detach from its last instance and delete. A failure is left to ``sweep``."""
        with self.store.read() as s:
            job = s.get(Job, job_id)
            last = s.exec(select(Attempt).where(Attempt.job_id == job_id)
                          .order_by(Attempt.number.desc())).first()  # type: ignore[attr-defined]
        kind = self._kind(job.volume_provider if job else None)
        if job is None or kind is None or job.volume_id is None:
            return
        self.detach(job, last.instance_id if last else None)
        if kept_volumes.keeps(job.spec):  # stays, billed, until `gpuorch volume delete` asks
            with self.store.write() as ws:
                events.record(ws, now, KEPT, f"volume {job.volume_id} kept after the job "
                              f"(delete it with: gpuorch volume delete {job_id})", job_id=job_id)
            return
        if self._delete(kind[1], job.volume_id):
            with self.store.write() as ws:
                events.record(ws, now, "volume_deleted", f"volume {job.volume_id} deleted", job_id=job_id)

    def sweep(self, ok: set[str], now: datetime) -> None:
        """Delete this installation's volumes whose job is finished or unknown, but for kept ones
        no delete was asked for (at most every ``sweep_every_s``; the first pass always sweeps)."""
        if self._swept_at is not None and (now - self._swept_at).total_seconds() < self.sweep_every_s:
            return
        self._swept_at = now
        listed: dict[str, tuple[Callable[[str], None], list[Volume]]] = {}
        for name in ok:  # listed before the jobs are read: a job is always committed before its volume
            kind = self._kind(name)
            if kind is None:
                continue
            try:
                listed[name] = (kind[1], list(self._mine(kind[0]())))
            except ProviderError as e:
                log.warning("cannot list %s volumes: %s", name, e)
        if not listed:
            return
        with self.store.read() as s:
            # ids only: whole rows (specs and all) of 5,000 held jobs were a share of an idle daemon's CPU
            unfinished = {str(i) for i in s.exec(select(Job.id).where(col(Job.finished_at).is_(None)))}
            ended = {v.tags[TAG_JOB] for _, vols in listed.values() for v in vols} - unfinished
            stays = unfinished | kept_volumes.held(s, ended)
            asked = kept_volumes.pending_deletes(s)
        for name, (p, vols) in listed.items():
            for v in vols:
                tag = v.tags[TAG_JOB]
                if tag not in stays and self._delete(p, v.id):
                    jid = int(tag) if tag.isdigit() else None
                    with self.store.write() as ws:
                        if jid in asked:
                            events.record(ws, now, "volume_deleted", f"volume {v.id} deleted as asked "
                                          "(gpuorch volume delete)", job_id=jid)
                        else:
                            events.record(ws, now, "orphan_volume_deleted",
                                          f"{name} volume {v.id} had no unfinished job", job_id=jid)
        self._settle_gone(asked, listed, now)

    def _settle_gone(self, asked: dict[int, Job], listed: Mapping[str, tuple[object, list[Volume]]],
                     now: datetime) -> None:
        """A volume asked to be deleted that its provider (listed this sweep) no longer has is
        deleted: its ``volume_deleted`` event stops the billing."""
        for jid, job in asked.items():
            there = listed.get(job.volume_provider or "")
            if there is not None and job.volume_id not in {v.id for v in there[1]}:
                with self.store.write() as ws:
                    events.record(ws, now, "volume_deleted", f"volume {job.volume_id} is gone", job_id=jid)

    def _kind(self, name: str | None) -> tuple[Callable[[], list[Volume]], Callable[[str], None]] | None:
        """How provider ``name`` lists and deletes volumes (attached ones, or given at launch)."""
        p = self._provider(name)
        if p is not None:
            return p.list_volumes, p.delete_volume
        lp = launch_provider(self.providers.get(name or ""))
        return (lp.list_launch_volumes, lp.delete_launch_volume) if lp is not None else None

    @staticmethod
    def _delete(delete: Callable[[str], None], volume_id: str) -> bool:
        try:
            delete(volume_id)
            return True
        except NotFoundError:
            return True
        except ProviderError as e:
            log.info("delete volume %s: %s (the sweep retries)", volume_id, e)
            return False
