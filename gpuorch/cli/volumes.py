"""``gpuorch volume list``: the jobs' volumes, where each is, and what its storage has cost.

Read-only, from the store (the daemon makes and deletes volumes; the CLI never calls a cloud):
each job that has had a volume, its provider, zone (or region, data center, machine: the place its
attempts keep to), the volume's id, its size and rate as recorded when it was made, since when it
exists, when it was deleted, and its storage cost so far (``gpuorch.money.storage``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import typer

from gpuorch.cli.app import JSON_OPTION, app, emit_json
from gpuorch.cli.output import WIDE_OPTION, show

volume_app = typer.Typer(help="Job volumes: where they are and what their storage costs.", no_args_is_help=True)
app.add_typer(volume_app, name="volume")


def volume_rows(now: datetime, *, deleted: bool) -> list[dict[str, Any]]:
    """One row per job that has a volume (or had one, with ``deleted``), oldest job first."""
    from sqlmodel import col, select

    from gpuorch.cli.jobs import _store
    from gpuorch.money.cost import attempt_cost
    from gpuorch.money.storage import periods, storage_attempt
    from gpuorch.store.models import Job

    with _store().read() as s:
        billed = {p.job_id: p for p in periods(s)}
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
            "deleted_at": p.end if p else None,
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

    t = Table("JOB", "NAME", "STATUS", "PROVIDER", "ZONE", "VOLUME", "GiB", "SINCE", "DELETED", "STORAGE")
    for r in rows:
        t.add_row(str(r["job"]), r["name"], r["status"], r["provider"] or "-", r["zone"] or "-", r["volume_id"] or "-",
                  "-" if r["size_gib"] is None else f"{r['size_gib']:g}",
                  f"{r['since']:%Y-%m-%d %H:%M}" if r["since"] else "-",
                  f"{r['deleted_at']:%Y-%m-%d %H:%M}" if r["deleted_at"] else "-", f"${r['storage_cost']:.4f}")
    show(t, wide=wide)
    total = sum(r["storage_cost"] for r in rows)
    typer.echo(f"{len(rows)} volume{'s' if len(rows) != 1 else ''}, storage ${total:.4f}")
