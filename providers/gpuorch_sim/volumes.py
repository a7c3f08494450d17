"""The sim's volumes (``SupportsVolumes``): a directory per volume under the sim's home, zone-bound like EBS.

A volume is ``<sim home>/volumes/<id>/``: ``volume.json`` (its zone, size, tags, the instance it
is attached to, when it was made) and ``data/``, the directory its job sees as
``GPUORCH_VOLUME_DIR`` while it is attached to the job's instance (``runner.SimRunner``: a sim
instance is a set of local processes, so nothing is mounted; the spec's ``mount`` path is not
used). Records are written atomically (a new volume appears whole, by a rename of its
directory; a deleted one disappears by a rename before its files go), not fsync'd, as the sim's
instance records: a crash of the daemon or a restart sees the same volumes.

No cloud process is needed: nothing about a volume changes on a schedule. An instance that ended
(terminated, reclaimed by the market, lifetime over) lets go of its volume as a cloud's does:
its ``attached_to`` reads None from then on, and another instance of the zone may attach it.

Every change takes ``volumes/.lock`` (``flock``), so two daemons' threads or processes creating
one job's volume make one. Ids are ``simvol-`` and 16 hex digits.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from gpuorch.agent.protocol import write_atomic
from gpuorch.errors import NotFoundError, PermanentError, TransientError
from gpuorch.provider import Instance
from gpuorch.provider.port import TAG_JOB, TAG_MANAGED, TAG_OWNER, Volume

from .market import PROVIDER

RECORD_FILE = "volume.json"
DATA_DIR = "data"
LOCK_FILE = ".lock"
VOLUME_ID = re.compile(r"simvol-[0-9a-f]{16}")


class VolumeRecord(BaseModel):
    """What ``volume.json`` holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    region: str
    zone: str
    size_gib: float
    tags: dict[str, str]
    attached_to: str | None = None
    created_at: datetime

    def volume(self, attached_to: str | None) -> Volume:
        return Volume(id=self.id, provider=PROVIDER, region=self.region, zone=self.zone, size_gib=self.size_gib,
                      attached_to=attached_to, tags=dict(self.tags))


class SimVolumes:
    """The volume records under ``root``. ``instance_of(id)``: the sim instance as the market has
    it now (NotFoundError for an unknown one), to check zones and whether a holder is alive."""

    def __init__(self, root: Path, instance_of: Callable[[str], Instance]) -> None:
        self.root, self._instance_of = root, instance_of
        self.root.mkdir(parents=True, exist_ok=True)

    # -- files -------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.root / LOCK_FILE, "a") as f:  # one open file description per call: threads exclude too
            fcntl.flock(f, fcntl.LOCK_EX)
            yield

    def data_dir(self, volume_id: str) -> Path:
        """Where the volume's files are (the job's ``GPUORCH_VOLUME_DIR`` while attached)."""
        return self.root / volume_id / DATA_DIR

    def read(self, volume_id: str) -> VolumeRecord:
        """The volume's record. NotFoundError for an id not in the sim's format or held by no volume."""
        if not VOLUME_ID.fullmatch(volume_id):  # also keeps "../x" from reaching the file system
            raise NotFoundError(f"sim volume {volume_id!r} not found")
        try:
            return VolumeRecord.model_validate_json((self.root / volume_id / RECORD_FILE).read_bytes())
        except FileNotFoundError:
            raise NotFoundError(f"sim volume {volume_id!r} not found") from None

    def _records(self) -> list[VolumeRecord]:
        out = []
        for name in sorted(os.listdir(self.root)):
            if VOLUME_ID.fullmatch(name):
                try:
                    out.append(self.read(name))
                except (NotFoundError, ValidationError, ValueError):  # being deleted, or not ours
                    continue
        return out

    def _write(self, rec: VolumeRecord) -> None:
        write_atomic(self.root / rec.id / RECORD_FILE, rec.model_dump_json(indent=1), durable=False)

    def holder(self, rec: VolumeRecord) -> str | None:
        """The instance the volume is attached to, while that instance is alive; None otherwise
        (an ended instance let go of it)."""
        if rec.attached_to is None:
            return None
        try:
            return rec.attached_to if self._instance_of(rec.attached_to).state.alive else None
        except NotFoundError:
            return None

    # -- the port ----------------------------------------------------------------------------
    def create(self, region: str, zone: str, size_gib: float, tags: dict[str, str], disk_type: str | None) -> Volume:
        """See ``SupportsVolumes.create_volume``: a volume of the tags' job and owner already in
        ``zone`` is returned as it is."""
        if disk_type is not None:
            raise PermanentError(f"volume.type {disk_type!r}: the sim makes one kind of volume; leave type out",
                                 code="InvalidVolume.DiskType")
        with self._locked():
            for rec in self._records():
                if rec.zone == zone and all(rec.tags.get(k) == tags.get(k) for k in (TAG_JOB, TAG_OWNER)):
                    return rec.volume(self.holder(rec))
            self._sweep_leftovers()
            rec = VolumeRecord(id=f"simvol-{secrets.token_hex(8)}", region=region, zone=zone, size_gib=size_gib,
                               tags={**tags, TAG_MANAGED: "true"}, created_at=datetime.now(UTC))
            tmp = self.root / f".{rec.id}.new"
            (tmp / DATA_DIR).mkdir(parents=True)
            write_atomic(tmp / RECORD_FILE, rec.model_dump_json(indent=1), durable=False)
            os.rename(tmp, self.root / rec.id)  # the volume appears whole
            return rec.volume(None)

    def attach(self, volume_id: str, instance_id: str) -> None:
        """See ``SupportsVolumes.attach_volume``; PermanentError ``IncorrectInstanceState`` for an
        instance that has ended."""
        with self._locked():
            rec = self.read(volume_id)
            inst = self._instance_of(instance_id)
            if inst.zone != rec.zone:
                raise PermanentError(f"volume {volume_id} is in {rec.zone}, instance {instance_id} in {inst.zone}",
                                     code="InvalidVolume.ZoneMismatch")
            holder = self.holder(rec)
            if holder not in (None, instance_id):
                raise TransientError(f"volume {volume_id} is attached to {holder}", code="VolumeInUse")
            if not inst.state.alive:
                raise PermanentError(f"instance {instance_id} is {inst.state.value}: cannot attach {volume_id}",
                                     code="IncorrectInstanceState")
            if rec.attached_to != instance_id:
                self._write(rec.model_copy(update={"attached_to": instance_id}))

    def detach(self, volume_id: str, instance_id: str) -> None:
        """See ``SupportsVolumes.detach_volume``."""
        with self._locked():
            try:
                rec = self.read(volume_id)
            except NotFoundError:
                return
            if rec.attached_to == instance_id:
                self._write(rec.model_copy(update={"attached_to": None}))

    def delete(self, volume_id: str) -> None:
        """See ``SupportsVolumes.delete_volume``: its data go with it."""
        with self._locked():
            try:
                rec = self.read(volume_id)
            except NotFoundError:
                return
            if (holder := self.holder(rec)) is not None:
                raise TransientError(f"volume {volume_id} is attached to {holder}", code="VolumeInUse")
            gone = self.root / f".{volume_id}.deleting"
            os.rename(self.root / volume_id, gone)  # no longer listed, whatever happens to the files next
            shutil.rmtree(gone, ignore_errors=True)

    def list(self) -> list[Volume]:
        """Every volume, ``attached_to`` as ``holder`` reads it."""
        return [rec.volume(self.holder(rec)) for rec in self._records()]

    def _sweep_leftovers(self) -> None:
        """Remove what a crash left half done: a volume never renamed into place, a deleted one's files."""
        for name in os.listdir(self.root):
            if name.startswith(".simvol-") and name.endswith((".new", ".deleting")):
                shutil.rmtree(self.root / name, ignore_errors=True)


def attached_dir(volumes: SimVolumes, volume_id: str, instance_id: str) -> Path | None:
    """The volume's data directory if it is attached to ``instance_id`` now; None if it is not
    (yet). NotFoundError for a volume that does not exist."""
    rec = volumes.read(volume_id)
    return volumes.data_dir(volume_id) if rec.attached_to == instance_id else None




class SimVolumePort:
    """``SupportsVolumes`` of ``SimProvider``, forwarded to its ``sim_volumes`` (contract: the
    port's docstrings; tests/sim/test_sim_volumes.py runs the volume contract suite)."""

    sim_volumes: SimVolumes

    def create_volume(self, *, region: str, zone: str, size_gib: float, tags: dict[str, str],
                      disk_type: str | None = None) -> Volume:
        return self.sim_volumes.create(region, zone, size_gib, tags, disk_type)

    def attach_volume(self, volume_id: str, instance_id: str) -> None:
        self.sim_volumes.attach(volume_id, instance_id)

    def detach_volume(self, volume_id: str, instance_id: str) -> None:
        self.sim_volumes.detach(volume_id, instance_id)

    def delete_volume(self, volume_id: str) -> None:
        self.sim_volumes.delete(volume_id)

    def list_volumes(self) -> list[Volume]:
        return self.sim_volumes.list()


__all__ = ["SimVolumePort", "SimVolumes", "VolumeRecord", "attached_dir"]
