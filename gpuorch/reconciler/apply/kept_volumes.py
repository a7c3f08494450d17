"""Volumes kept after their job (spec ``volume.keep``) and deletes asked for by ``gpuorch volume delete``.

Contract (issue 34 section 1, issue 33 item 4; docs/providers.md "Volumes"):

- A job whose spec says ``volume: {keep: true}`` keeps its volume when it ends: ``Volumes.release``
  detaches it and records ``volume_kept``; ``Volumes.sweep`` leaves it. Its storage keeps billing
  (``gpuorch.money.storage``: from its ``volume`` event to a ``volume_deleted`` one).
- ``gpuorch volume delete`` records a ``volume_delete_requested`` event on the job (the CLI never
  calls a provider). From then on the sweep deletes the volume like any finished job's; a delete
  refused while the volume is still attached (``VolumeInUse``) or failing for a while is tried
  again next sweep. Done, the sweep records ``volume_deleted`` and billing stops. A requested
  volume that its provider no longer lists (deleted, then a crash before the event; or deleted
  by hand) gets its ``volume_deleted`` at the next sweep that lists that provider.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from sqlmodel import Session, col, select

from gpuorch.money.storage import ENDS
from gpuorch.store.models import Event, Job

DELETE_REQUESTED = "volume_delete_requested"


def keeps(spec_json: str | None) -> bool:
    """Whether a job's stored spec says ``volume.keep: true`` (read as JSON: the sweep reads a few
    finished jobs' specs a sweep, no model validation needed)."""
    try:
        d = json.loads(spec_json or "")
    except ValueError:
        return False
    v = d.get("volume") if isinstance(d, dict) else None
    return isinstance(v, dict) and v.get("keep") is True


def pending_deletes(s: Session) -> dict[int, Job]:
    """The jobs whose volume delete was asked for and not yet done (no ``volume_deleted`` or
    ``orphan_volume_deleted`` event since), by id."""
    asked = set(s.exec(select(Event.job_id).where(Event.kind == DELETE_REQUESTED, col(Event.job_id).is_not(None))))
    if not asked:
        return {}
    done = set(s.exec(select(Event.job_id).where(col(Event.kind).in_(ENDS), col(Event.job_id).in_(list(asked)))))
    ids = [i for i in asked - done if i is not None]
    return {j.id or 0: j for j in s.exec(select(Job).where(col(Job.id).in_(ids)))} if ids else {}


def held(s: Session, job_tags: Collection[str]) -> set[str]:
    """Of the finished (or unknown) jobs named by these volume tags, those whose volume stays:
    the spec keeps it and no delete was asked for."""
    ids = [int(t) for t in job_tags if t.isdigit()]
    if not ids:
        return set()
    kept = {str(i) for i, spec in s.exec(select(Job.id, Job.spec).where(col(Job.id).in_(ids))) if keeps(spec)}
    if not kept:
        return kept
    asked = set(s.exec(select(Event.job_id).where(Event.kind == DELETE_REQUESTED,
                                                   col(Event.job_id).in_([int(k) for k in kept]))))
    return {k for k in kept if int(k) not in asked}
