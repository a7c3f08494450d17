"""A job volume's storage as money (issue 33 item 6; docs/money.md, "Storage").

Storage is charged while the volume exists, per GiB-month, at its market's rate: the provider's
own price of that volume where it gives one (``Volume.usd_per_gib_month``: a Vast volume at its
host's ``storage_cost``), else the rate its provider's catalog declares
(``AdapterCatalog.storage_usd_per_gib_month``: Lambda filesystems, RunPod network volumes, Vast
volumes; a cloud's disk where its catalog has one), recorded with the volume when the daemon
makes it, so a later change of the catalog does not rewrite the past. A month is 730 hours, as
the clouds bill storage. Billed by the second from the volume's ``volume`` event (made or adopted
by the daemon, ``gpuorch.reconciler.apply.volumes``) to its ``volume_deleted`` or
``orphan_volume_deleted`` event, or to now while it exists. A volume whose provider says no rate
costs 0 here (and ``rate`` is None in its period).

The money code counts it as the warm pool's idle time is counted (``gpuorch.warm.ledger``): a
transient ``Attempt`` of the job that bills the volume's hourly price (``storage_attempt``; never
stored), live and stoppable while the volume exists, so ``Ledger.build`` (the caps: job, sweep,
UTC day) and ``gpuorch cost`` add it to what the job spent.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, or_, select

from gpuorch.placement.cost import HOURS_PER_MONTH, StorageRates
from gpuorch.store.models import Attempt, Event, Job
from gpuorch.store.states import AttemptStatus

log = logging.getLogger("gpuorch.money.storage")
MADE, ENDS = "volume", ("volume_deleted", "orphan_volume_deleted")
KEPT = "volume_kept"  # recorded when a job that keeps its volume ends (reconciler.apply.kept_volumes)
# An attempt number no real attempt has: warm idle periods are -(period id); these start below.
_NUMBER_BASE = -(1 << 40)


@dataclass(frozen=True)
class StoragePeriod:
    """One job volume's life: from ``start`` to ``end`` (None: it exists), ``size_gib`` at
    ``rate`` USD per GiB-month (None: not said)."""

    job_id: int
    provider: str
    size_gib: float
    rate: float | None
    start: datetime
    end: datetime | None

    @property
    def price_per_hour(self) -> float:
        return self.size_gib * (self.rate or 0.0) / HOURS_PER_MONTH


def rate_of(provider: str | None, disk_type: str | None = None) -> float | None:
    """The provider's declared storage rate for ``disk_type`` (None: its default type), USD per
    GiB-month (None: its catalog says none)."""
    from gpuorch.catalog.registry import catalog_of

    cat = catalog_of(provider or "")
    return cat.storage_rate(disk_type) if cat is not None else None


def rate_table(providers: Iterable[str] | None = None) -> StorageRates:
    """Every catalog's storage rates (of ``providers`` only, when given) as placement counts a
    job volume's storage (``PlacementOptions.storage_rates``): the default type's rate as type "",
    then each listed type's. A catalog that says none is left out (its storage is not counted)."""
    from gpuorch.catalog.registry import catalogs

    wanted = set(providers) if providers is not None else None
    out: list[tuple[str, str, float]] = []
    for name, cat in catalogs().items():
        if wanted is not None and name not in wanted:
            continue
        if cat.storage_usd_per_gib_month is not None:
            out.append((name, "", float(cat.storage_usd_per_gib_month)))
        out.extend((name, t, float(r)) for t, r in cat.storage_rates)
    return tuple(out)


def made_data(provider: str, size_gib: float, disk_type: str | None = None,
              own_rate: float | None = None) -> dict[str, object]:
    """What a ``volume`` event records for the money: provider, size, disk type and the rate now:
    the provider's own for this volume (``Volume.usd_per_gib_month``, a Vast host's) when it gave
    one, else its catalog's. A rate that is not a finite number >= 0 is not trusted (one log line)."""
    rate = own_rate
    if rate is not None and (not isinstance(rate, int | float) or not math.isfinite(rate) or rate < 0):
        log.warning("%s: volume storage rate %r is not a price; billing the catalog's rate", provider, rate)
        rate = None
    return {"provider": provider, "size_gib": size_gib, "disk_type": disk_type,
            "usd_per_gib_month": float(rate) if rate is not None else rate_of(provider, disk_type)}


def periods(s: Session, job_ids: Iterable[int] | None = None) -> list[StoragePeriod]:
    """The storage periods of the jobs ``job_ids`` (None: every job), from their volume events."""
    q = select(Event).where(col(Event.kind).in_((MADE, *ENDS)), col(Event.job_id).is_not(None))
    if job_ids is not None:
        ids = sorted(set(job_ids))
        if not ids:
            return []
        q = q.where(col(Event.job_id).in_(ids))
    made: dict[int, tuple[datetime, dict[str, object]]] = {}
    ended: dict[int, datetime] = {}
    for e in s.exec(q.order_by(col(Event.ts))):
        jid = e.job_id or 0
        if e.kind == MADE and jid not in made:
            made[jid] = (e.ts, _data(e.data))
        elif e.kind in ENDS and jid in made and jid not in ended:
            ended[jid] = e.ts
    out = []
    for jid, (start, data) in made.items():
        size, rate = data.get("size_gib"), data.get("usd_per_gib_month")
        provider = str(data.get("provider") or "")
        if not isinstance(size, int | float) or size <= 0:
            continue  # an older event that did not record the volume's size: not billed here
        out.append(StoragePeriod(jid, provider, float(size), float(rate) if isinstance(rate, int | float) else None,
                                 start, ended.get(jid)))
    return out


def _data(text: str | None) -> dict[str, object]:
    try:
        d = json.loads(text) if text else {}
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def storage_attempt(p: StoragePeriod) -> Attempt:
    """The period as the money code bills it: an attempt of the job at the volume's hourly price,
    by the second, live while the volume exists (never stored)."""
    return Attempt(job_id=p.job_id, number=_NUMBER_BASE - p.job_id, provider=p.provider, region="", zone="",
                   instance_type="volume", spot=False, price_per_hour=p.price_per_hour, billing_granularity_s=1,
                   min_billing_s=0, status=AttemptStatus.ENDED if p.end is not None else AttemptStatus.LAUNCHED,
                   requested_at=p.start, launched_at=p.start, ended_at=p.end)


def ledger_rows(s: Session, since: datetime, sweeps: Iterable[int | None]) -> Iterator[tuple[Attempt, int | None]]:
    """(storage attempt, sweep id) of every volume the money ledger counts (``Ledger.build``'s
    rows): those of unfinished jobs, of jobs that finished since ``since`` (the UTC day's start),
    of the active ``sweeps``' trials, and every volume kept after its job (``volume.keep``) not
    deleted yet: it bills every day until then, so every day's cap counts it."""
    ids = [i for i in sweeps if i is not None]
    clause = or_(col(Job.finished_at).is_(None), col(Job.finished_at) >= since)
    if ids:
        clause = or_(clause, col(Job.sweep_id).in_(ids))
    kept = set(s.exec(select(Event.job_id).where(Event.kind == KEPT, col(Event.job_id).is_not(None))))
    if kept:
        kept -= set(s.exec(select(Event.job_id).where(col(Event.kind).in_(ENDS), col(Event.job_id).in_(list(kept)))))
        clause = or_(clause, col(Job.id).in_(list(kept)))
    jobs = dict(s.exec(select(Job.id, Job.sweep_id).where(col(Job.volume_provider).is_not(None), clause)).all())
    for p in periods(s, [j for j in jobs if j is not None]):
        if p.rate:
            yield storage_attempt(p), jobs.get(p.job_id)


def report_rows(s: Session, since: datetime | None) -> list[tuple[Attempt, Job]]:
    """(storage attempt, job) of every volume that existed after ``since`` (None: ever), for
    ``gpuorch cost``."""
    found = [p for p in periods(s) if p.rate and (since is None or p.end is None or p.end >= since)]
    jobs = {j.id: j for j in s.exec(select(Job).where(col(Job.id).in_([p.job_id for p in found])))} if found else {}
    return [(storage_attempt(p), jobs[p.job_id]) for p in found if p.job_id in jobs]
