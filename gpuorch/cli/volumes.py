"""``gpuorch volume list`` and ``gpuorch volume delete``: the jobs' volumes, where each is, what its
storage has cost, and deleting one kept after its job (spec ``volume.keep``).

Read-only, from the store (the daemon makes and deletes volumes; the CLI never calls a cloud):
each job that has had a volume, its provider, zone (or region, data center, machine: the place its
attempts keep to), the volume's id, its size and rate as recorded when it was made, since when it
exists, when it was deleted, whether it is kept after its job (and a delete was asked for), and its
storage cost so far (``gpuorch.money.storage``).

``delete`` only records the request (a ``volume_delete_requested`` event): the daemon's volume
sweep deletes the volume once it is detached and records ``volume_deleted``, where storage billing
stops (``gpuorch.reconciler.apply.kept_volumes``).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer

from gpuorch.cli.app import JSON_OPTION, app, emit_json
from gpuorch.cli.output import WIDE_OPTION, show

if TYPE_CHECKING:
    from gpuorch.store import Store

volume_app = typer.Typer(help="Job volumes: where they are, what their storage costs, deleting kept ones.",
                         no_args_is_help=True)
app.add_typer(volume_app, name="volume")


def volume_rows(now: datetime, *, deleted: bool) -> list[dict[str, Any]]:
    """One row per job that has a volume (or had one, with ``deleted``), oldest job first."""
    from sqlmodel import col, select

    from gpuorch.cli.jobs import _store
    from gpuorch.money.cost import attempt_cost
    from gpuorch.money.storage import periods, storage_attempt
    from gpuorch.reconciler.apply.kept_volumes import keeps, pending_deletes
    from gpuorch.store.models import Job

    with _store().read() as s:
        billed = {p.job_id: p for p in periods(s)}
        asked = set(pending_deletes(s))
        jobs = list(s.exec(select(Job).where(col(Job.volume_provider).is_not(None) | col(Job.id).in_(list(billed)))
                           .order_by(col(Job.id))))
    out = []
    for job in jobs:
        p = billed.get(job.id or 0)
        if p is not None and p.end is not None and not deleted:
            continue
        out.append({
            "job": job.id, "name": job.name, "status": job.status.value,
            "provider": job.volume_provider or (p.provider if p else None), "zone": job.volume_zone,
            "volume_id": job.volume_id, "size_gib": p.size_gib if p else None,
            "usd_per_gib_month": p.rate if p else None, "since": p.start if p else None,
            "deleted_at": p.end if p else None, "keep": keeps(job.spec),
            "delete_requested": (job.id or 0) in asked,
            "storage_cost": round(attempt_cost(storage_attempt(p), now), 6) if p and p.rate else 0.0,
        })
    return out


@volume_app.command("list")
def list_volumes(deleted: bool = typer.Option(False, "--deleted", help="Also the volumes already deleted."),
                 json_out: bool = JSON_OPTION, wide: bool = WIDE_OPTION) -> None:
    """The jobs' volumes: provider, place, size, since when, and their storage cost so far.

    Example: gpuorch volume list --deleted
    """
    from gpuorch.clock import utcnow

    rows = volume_rows(utcnow(), deleted=deleted)
    if json_out:
        emit_json({"volumes": rows})
        return
    from rich.table import Table

    t = Table("JOB", "NAME", "STATUS", "PROVIDER", "ZONE", "VOLUME", "GiB", "KEPT", "SINCE", "DELETED", "STORAGE")
    for r in rows:
        kept = "deleting" if r["delete_requested"] else ("kept" if r["keep"] else "-")
        t.add_row(str(r["job"]), r["name"], r["status"], r["provider"] or "-", r["zone"] or "-", r["volume_id"] or "-",
                  "-" if r["size_gib"] is None else f"{r['size_gib']:g}", kept,
                  f"{r['since']:%Y-%m-%d %H:%M}" if r["since"] else "-",
                  f"{r['deleted_at']:%Y-%m-%d %H:%M}" if r["deleted_at"] else "-", f"${r['storage_cost']:.4f}")
    show(t, wide=wide)
    total = sum(r["storage_cost"] for r in rows)
    typer.echo(f"{len(rows)} volume{'s' if len(rows) != 1 else ''}, storage ${total:.4f}")


def request_delete(store: Store, ref: str, now: datetime) -> dict[str, Any]:
    """Record that the volume ``ref`` (its id, or its job's id or name) is to be deleted: a
    ``volume_delete_requested`` event on its job, once. Raises UserInputError (one line naming the
    fix; nothing stored) for an unknown volume or job, a job without a volume, a job not yet
    finished, and a volume already deleted. Returns the job, volume and whether it was already asked."""
    from sqlmodel import col, select

    from gpuorch.errors import UnknownJob, UserInputError
    from gpuorch.jobs import events
    from gpuorch.jobs.intent import find_job
    from gpuorch.money.storage import ENDS
    from gpuorch.reconciler.apply.kept_volumes import DELETE_REQUESTED, pending_deletes
    from gpuorch.store.models import Event, Job

    with store.write() as s:
        job = s.exec(select(Job).where(Job.volume_id == ref).order_by(col(Job.id).desc())).first()
        if job is None:
            try:
                job = find_job(s, ref)
            except UnknownJob:
                raise UserInputError(f"volume delete: no volume or job {ref!r}; see gpuorch volume list") from None
        jid = job.id or 0
        if job.volume_id is None:
            raise UserInputError(f"volume delete: job {jid} ({job.name}) has no volume; see gpuorch volume list")
        if job.finished_at is None:
            raise UserInputError(f"volume delete: job {jid} ({job.name}) is still {job.status.value} and uses volume "
                                 f"{job.volume_id}; cancel it first (gpuorch cancel {jid}) or wait for it to end")
        ended = s.exec(select(Event.ts).where(Event.job_id == jid, col(Event.kind).in_(ENDS))).first()
        if ended is not None:
            raise UserInputError(f"volume delete: volume {job.volume_id} of job {jid} was already deleted "
                                 f"at {ended:%Y-%m-%d %H:%M} UTC; see gpuorch volume list --deleted")
        already = jid in pending_deletes(s)
        if not already:
            events.record(s, now, DELETE_REQUESTED, f"volume {job.volume_id} delete requested by user", job_id=jid)
        return {"job": jid, "name": job.name, "volume_id": job.volume_id, "already_requested": already}


@volume_app.command("delete")
def delete_volume(ref: str = typer.Argument(..., help="Volume id, or the job's id or name."),
                  yes: bool = typer.Option(False, "-y", "--yes", help="Delete without asking."),
                  json_out: bool = JSON_OPTION) -> None:
    """Ask the daemon to delete a finished job's volume (one kept by volume.keep); its data is lost.

    The daemon deletes it at its next volume sweep, once detached; storage billing stops then.
    On a terminal it asks first; elsewhere --yes is required.

    Example: gpuorch volume delete ft-llama --yes
    """
    import sys

    from gpuorch.cli.app import guard
    from gpuorch.cli.jobs import _store
    from gpuorch.clock import utcnow
    from gpuorch.errors import UserInputError

    with guard():
        if not yes:
            if not (sys.stdin.isatty() and sys.stdout.isatty()):
                raise UserInputError("volume delete: its data is lost; add --yes to confirm (no terminal to ask on)")
            if not typer.confirm(f"Delete volume {ref} and its data?", default=False):
                typer.echo("not deleted", err=True)
                raise typer.Exit(1)
        r = request_delete(_store(), ref, utcnow())
    if json_out:
        emit_json(r)
        return
    how = "already requested" if r["already_requested"] else "delete requested"
    typer.echo(f"volume {r['volume_id']} of job {r['job']} ({r['name']}): {how}; "
               "the daemon deletes it once detached (gpuorch volume list --deleted)")
