"""Warm instances (spec ``keep_warm``): the side effects. The rules are ``decide/warm.py``.

- ``keep``: an ended attempt's instance goes to the pool: one ``WarmInstance`` row (status
  ``dirty``), written after the attempt's End in the job's lease-checked transaction. A runner
  that cannot make its instance ready for another attempt (``Recycles``) gets a terminate instead.
- ``sweep`` (after the pass's jobs): each open row is recycled (the finished agent's run
  directory set aside, then ``idle``), kept, or released (``releasing`` first, then the
  terminate, then ``released``: a crash anywhere repeats the terminate, which is idempotent).
  An idle row's runner that hears notices on the instance (``ReportsIdleNotice``) is asked every
  ``poll_s``, and once more just before a reuse leases it: a notice releases it.
- ``reuse`` (before a launch): a launch whose job fits an idle row leases it instead: in one
  transaction of the job, the row's conditional update (``idle`` -> ``leased``, its period
  ended), the caps' admission and an attempt row already ``launched`` on the instance. The
  conditional update and the partial unique index (``models.WarmInstance``) are the lease: two
  jobs never get one instance, whichever daemons try.
- ``alias``: a leased instance carries the tags of the attempt that launched it; the listing's
  entry is filed under its lessee's key too, so the lessee's attempt sees its instance.

Ownership: an open row's instance is owned (``apply/orphans.py`` reads the open rows with the
attempts), so the orphan sweep leaves it; once released, the origin's attempt is ended and no row
is open, so an instance whose terminate failed is the orphan sweep's again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol, runtime_checkable

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from gpuorch.errors import ProviderError
from gpuorch.jobs import events
from gpuorch.jobs.spec import JobSpec
from gpuorch.money.caps import EPS
from gpuorch.ops.crashpoints import crashpoint
from gpuorch.placement import Candidate
from gpuorch.provider.port import Instance, Offer, Provider
from gpuorch.reconciler.apply.launching import attempt_offer
from gpuorch.reconciler.apply.money import Money, Txn
from gpuorch.reconciler.decide import actions as A
from gpuorch.reconciler.decide import warm as W
from gpuorch.reconciler.observe.listing import Key
from gpuorch.reconciler.observe.rows import UnreadableSpec
from gpuorch.reconciler.observe.views import AttemptView, JobView
from gpuorch.runners.port import RunnerUnavailable
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, WarmInstance
from gpuorch.warm.ledger import idle_cost

log = logging.getLogger("gpuorch.reconciler")

OPEN = (W.DIRTY, W.IDLE, W.RELEASING)
Row = Callable[[JobView, A.Launch, Candidate, int, datetime], dict[str, Any]]


@runtime_checkable
class Recycles(Protocol):
    """A runner that can make its instance ready for another attempt (``LocalRunner.recycle``)."""

    def recycle(self) -> None: ...


@runtime_checkable
class ReportsIdleNotice(Protocol):
    """A runner whose instance hears its own preemption notice while idle (``SshRunner.idle_notice``:
    what the idle watcher reported), where the provider's listing does not carry it."""

    def idle_notice(self) -> float | None: ...


class _NotLeased(Exception):
    """The reuse's transaction is rolled back: the row was taken, or the caps refused."""


def alias(observed: dict[Key, Instance], attempts: Mapping[int, Sequence[Attempt]], live: set[Key]) -> None:
    """File each leased instance under its lessee's key too (in place): a live attempt whose key
    the listing lacks, but whose recorded instance it lists under another key of this
    installation (the attempt that launched it). Cheap when every live key is listed."""
    missing = live - observed.keys()
    if not missing:
        return
    want = {(r.provider, r.instance_id): (r.provider, r.job_id, r.number)
            for job_id in {k[1] for k in missing} for r in attempts.get(job_id, ())
            if (r.provider, r.job_id, r.number) in missing and r.instance_id}
    if not want:
        return
    for (name, _, _), inst in list(observed.items()):
        key = want.get((name, inst.id))
        if key is not None and (key not in observed or inst.state.alive):
            observed[key] = inst


def _queued(claimed: Sequence[Job], spec_of: Callable[[Job], JobSpec],
            refuses: Callable[[Job, JobSpec, Candidate], str | None]) -> Callable[[W.WarmView], str | None]:
    """Why no queued (or held) job of the pass wants a warm instance (``W.demand``; None: one fits
    it and its caps fund it there); their specs parsed once, ``refuses`` asked only of jobs that fit."""
    specs: list[tuple[Job, JobSpec]] | None = None

    def unwanted(w: W.WarmView) -> str | None:
        nonlocal specs
        if specs is None:
            specs = []
            for job in claimed:
                if job.status in (JobStatus.QUEUED, JobStatus.HELD) and not job.cancel_requested:
                    try:
                        specs.append((job, spec_of(job)))
                    except UnreadableSpec:  # the pass quarantines it
                        continue
        return W.demand(w, ((spec, partial(refuses, job, spec)) for job, spec in specs))

    return unwanted


def _view(w: WarmInstance, observed: Mapping[Key, Instance], ok: set[str], stop: str | None) -> W.WarmView:
    offer = Offer.model_validate_json(w.offer)
    return W.WarmView(w.id or 0, w.provider, w.instance_id, w.zone, w.instance_type, w.spot, w.image, offer,
                      w.status, w.keep_until, w.provider in ok,
                      observed.get((w.provider, w.origin_job_id, w.origin_attempt)), stop)


class Warm:
    def __init__(self, store: Store, providers: Mapping[str, Provider], txn: Txn, money: Money,
                 row: Row, poll_s: Callable[[], float], heartbeat_s: Callable[[], float] = lambda: 30.0) -> None:
        """``row``: the attempt row's columns for a candidate (``Launching._row``); ``poll_s``:
        how often an open row is looked at (its caps, its notices); ``heartbeat_s``: how often an
        idle instance hears the daemon is alive (its idle watcher, ``gpuorch.agent.idle``)."""
        self.store, self.providers, self._txn, self.money, self._row = store, providers, txn, money, row
        self.poll_s, self.heartbeat_s = poll_s, heartbeat_s
        self._beats: dict[int, datetime] = {}  # row id -> when its instance was last told the daemon is alive
        self._looks: dict[int, tuple[datetime, float | None]] = {}  # row id -> its notice report's last read, deadline
        self.pool: list[W.WarmView] = []  # the idle rows the last sweep left (reuse tries these)
        self._empty_at: int | None = None  # the store's version when the table had no open row

    # -- the End's hand-over ---------------------------------------------------------------------
    def keep(self, view: JobView, a: AttemptView, action: A.KeepWarm, now: datetime) -> bool:
        """Hand the ended attempt's instance to the pool; False when it cannot go (its runner
        cannot recycle): the caller terminates it."""
        provider, inst = self.providers.get(a.row.provider), a.instance
        if provider is None or inst is None or not isinstance(provider.runner(inst), Recycles):
            return False
        job_id, row = view.job.id or 0, a.row
        self._empty_at = None
        try:
            with self._txn(job_id) as (s, job):
                if self._open(s, row.provider, inst.id) is not None:
                    return True  # handed over already (a pass that died after it): the sweep goes on
                stored = s.get(Attempt, row.id)  # its offer: the pass's rows leave that column out
                if stored is None or stored.status != AttemptStatus.ENDED:
                    return False  # its End did not commit: terminated, as without keep_warm
                offer = stored.offer or attempt_offer(stored).model_dump_json()
                stored.kept_warm = True  # billed until now: the instance's later end is the pool's (money.record)
                origin = (inst.job_id or job_id, inst.attempt or row.number)
                s.add(WarmInstance(provider=row.provider, instance_id=inst.id, region=row.region, zone=row.zone,
                                   instance_type=row.instance_type, spot=row.spot, image=W.image_of(view.spec),
                                   offer=offer, price_per_hour=row.price_per_hour,
                                   billing_granularity_s=row.billing_granularity_s, origin_job_id=origin[0],
                                   origin_attempt=origin[1], job_id=job_id, attempt=row.number,
                                   sweep_id=job.sweep_id, status=W.DIRTY, idle_since=now, keep_until=action.until))
                events.record(s, now, "warm_kept", f"instance {inst.id} kept warm until "
                              f"{action.until:%H:%M:%S} UTC for the next job that fits it (keep_warm)",
                              job_id=job_id, attempt=row.number)
        except IntegrityError:  # another daemon pooled it meanwhile
            return True
        crashpoint("warm.kept")
        with self.store.read() as s:  # ready at once: a job decided later in this pass may take it
            w = self._open(s, row.provider, inst.id)
        if w is not None:
            try:
                view_ = self._recycle(w, _view(w, {(w.provider, w.origin_job_id, w.origin_attempt): inst},
                                                {w.provider}, None))
            except (ProviderError, RunnerUnavailable, OSError) as e:  # the sweep tries again
                log.info("warm instance %s: recycle failed (tried again): %s", inst.id, e)
            else:
                if view_.status == W.IDLE:
                    self.pool.append(view_)
        return True

    @staticmethod
    def _open(s: Session, provider: str, instance_id: str) -> WarmInstance | None:
        return s.exec(select(WarmInstance).where(WarmInstance.provider == provider,
                                                 WarmInstance.instance_id == instance_id,
                                                 col(WarmInstance.ended_at).is_(None))).first()

    # -- a launch takes a warm instance ----------------------------------------------------------
    def reuse(self, view: JobView, action: A.Launch, now: datetime) -> bool:
        """Lease an idle warm instance for the launch instead of launching (True), if one fits the
        job and the caps admit it (``decide/warm.match``)."""
        if not self.pool:
            return False
        found = W.match(view.spec, action.candidates, self.pool)
        if found is None:
            return False
        w, cand = found
        self.pool = [x for x in self.pool if x.id != w.id]  # leased now, or taken: not offered again
        if self._heard(w, now, force=True).noticed is not None:  # going: the sweep releases it
            log.info("job %s: warm instance %s heard a preemption notice; launching", view.job.id, w.instance_id)
            return False
        # The launch paid the instance's minimum bill: the lessee is billed from now, per increment.
        cand = replace(cand, offer=cand.offer.model_copy(update={"min_billing_s": 0}))
        job_id = view.job.id or 0
        try:
            with self._txn(job_id) as (s, job):
                number = (s.exec(select(func.max(Attempt.number)).where(Attempt.job_id == job_id)).one() or 0) + 1
                taken = s.execute(update(WarmInstance).where(
                    col(WarmInstance.id) == w.id, col(WarmInstance.status) == W.IDLE,
                    col(WarmInstance.ended_at).is_(None)).values(
                    status=W.LEASED, ended_at=now, lessee_job_id=job_id, lessee_attempt=number))
                if taken.rowcount != 1:  # type: ignore[attr-defined]
                    raise _NotLeased("taken")
                refused = self.money.admit(s, job, view.spec, cand, now)  # the idle period ended above
                if refused is not None:
                    raise _NotLeased(refused)
                values = self._row(view, action, cand, number, now)
                values.update(status=AttemptStatus.LAUNCHED, instance_id=w.instance_id, launched_at=now)
                s.add(Attempt(**values))
                job.status = JobStatus.RECOVERING if job.preemptions and job.status == JobStatus.RECOVERING \
                    else JobStatus.STARTING
                events.record(s, now, "warm_reused", f"runs on warm instance {w.instance_id} ({w.provider} {w.zone} "
                              f"{w.instance_type} {'spot' if w.spot else 'on-demand'}): no launch",
                              job_id=job_id, attempt=number)
        except _NotLeased as e:
            log.info("job %s: warm instance %s not leased (%s); launching", job_id, w.instance_id, e)
            return False
        crashpoint("warm.leased")
        return True

    # -- after the jobs: recycle, keep or release ------------------------------------------------
    def sweep(self, observed: Mapping[Key, Instance], ok: set[str], now: datetime, claimed: Sequence[Job],
              spec_of: Callable[[Job], JobSpec], version: int | None = None) -> float:
        """Look at every open row; return how soon one wants looking at again (inf: none open).
        ``claimed``: the pass's jobs (a queued one that fits a row keeps it); ``spec_of``: a job
        row's parsed spec; ``version``: the store's ``data_version`` at the pass's claim (the
        table is not read again while the store is unchanged since it was found empty)."""
        if version is not None and version == self._empty_at:
            return float("inf")
        with self.store.read() as s:
            rows = list(s.exec(select(WarmInstance).where(col(WarmInstance.ended_at).is_(None))))
            jobs = {j.id: j for j in s.exec(select(Job).where(col(Job.id).in_({w.job_id for w in rows})))} \
                if rows else {}
        pool, soonest = [], float("inf")
        if rows:  # the caps as the pass's launches left them: an idle row gives way to those (caps.reserved_until)
            self.money.reread()
        unwanted = _queued(claimed, spec_of, lambda j, sp, c: self._refuses(j, sp, c, now)) if rows else None
        for w in rows:
            view = _view(w, observed, ok, self._stop(jobs.get(w.job_id), spec_of, now))
            if view.status == W.IDLE:
                view = self._heard(view, now)
            what, why = W.step_for(view, now, W.NOT_FITTED if unwanted is None else unwanted(view))
            try:
                if what == W.RELEASE:
                    self._release(w, view, why or "released", now)
                    continue
                if what == W.RECYCLE:
                    view = self._recycle(w, view)
            except (ProviderError, RunnerUnavailable, OSError) as e:  # tried again next pass
                log.warning("warm instance %s: %s failed: %s", w.instance_id, what, e)
                if what == W.RELEASE:  # releasing now: never offered to a launch again
                    soonest = min(soonest, self.poll_s())
                    continue
            if view.status == W.IDLE:
                pool.append(view)
                self._beat(w, view, now)
            soonest = min(soonest, max(0.0, (w.keep_until - now).total_seconds()), self.poll_s(), self.heartbeat_s())
        self.pool = pool
        ids = {w.id for w in rows}
        self._beats = {k: v for k, v in self._beats.items() if k in ids}
        self._looks = {k: v for k, v in self._looks.items() if k in ids}
        self._empty_at = version if not rows else None
        return soonest

    def _beat(self, w: WarmInstance, view: W.WarmView, now: datetime) -> None:
        """Tell an idle instance the daemon is alive, every ``heartbeat_s``, as an agent is told: its
        idle watcher powers it off when they stop (a control host that died)."""
        last, provider, inst = self._beats.get(w.id or 0), self.providers.get(w.provider), view.instance
        if provider is None or inst is None or (last is not None and (now - last).total_seconds() < self.heartbeat_s()):
            return
        try:
            provider.runner(inst).heartbeat()
        except (ProviderError, RunnerUnavailable, NotImplementedError, OSError) as e:  # next pass tries again
            log.info("warm instance %s: heartbeat failed: %s", w.instance_id, e)
            return
        self._beats[w.id or 0] = now

    def _heard(self, view: W.WarmView, now: datetime, force: bool = False) -> W.WarmView:
        """``view`` with the notice its idle watcher reported (``noticed``), read every ``poll_s``
        (``force``: now) from a runner that reports one, and kept once heard; unchanged while
        unread or unreachable."""
        provider, inst, (last, heard) = self.providers.get(view.provider), view.instance, \
            self._looks.get(view.id, (None, None))
        if heard is not None:
            return replace(view, noticed=heard)
        if provider is None or inst is None or not inst.state.alive:
            return view
        if not force and last is not None and (now - last).total_seconds() < self.poll_s():
            return view
        runner = provider.runner(inst)
        if not isinstance(runner, ReportsIdleNotice):
            return view
        try:
            deadline = runner.idle_notice()
        except (ProviderError, RunnerUnavailable, OSError) as e:  # the next look tries again
            log.info("warm instance %s: reading its notice report failed: %s", view.instance_id, e)
            return view
        self._looks[view.id] = (now, deadline)
        return view if deadline is None else replace(view, noticed=deadline)

    def _stop(self, job: Job | None, spec_of: Callable[[Job], JobSpec], now: datetime) -> str | None:
        """Why the caps of the job that left the instance warm want it released now."""
        if job is None:
            return None
        try:
            gate = self.money.gate(JobView(job, spec_of(job), ()), now)
        except UnreadableSpec:
            return None
        if gate is None or gate.stop is None:
            return None
        return "released before its idle time would cross a cap: " + gate.stop.message

    def _refuses(self, job: Job, spec: JobSpec, cand: Candidate, now: datetime) -> str | None:
        """Why a queued job's caps would not let it run on a warm instance (None: they would, now or
        once live reservations come back): a stop or hold of its gate (waiting for money or for a
        slot, a spent daily cap), or a run there whose runway and horizon the money not yet spent
        cannot fund. Billed as a lease is: no minimum. Reservations alone do not refuse it: its
        own attempt still draining, or another's, may give them back a pass later (bench/sweep.py
        --small-cap seed 2: a held trial's warm instance was released while its drain ended, and
        it booted a new one); nor does finish first's wait for a warm instance (``lease``)."""
        gate = self.money.gate(JobView(job, spec, ()), now, lease=True)
        if gate is None:
            return None
        block = gate.stop or gate.hold
        if block is not None:
            return f"job {job.id}: {block.message}"
        cand = replace(cand, offer=cand.offer.model_copy(update={"min_billing_s": 0}))
        if gate.affords(cand) or all(cap.spent + gate.need(cand) <= cap.limit + EPS for cap in gate.caps):
            return None  # at most live reservations stand in its way: they may come back (its own drain ending)
        return f"job {job.id}: its caps cannot fund a run there, which reserves {gate.reserve_note(cand)}"

    def _recycle(self, w: WarmInstance, view: W.WarmView) -> W.WarmView:
        provider, inst = self.providers.get(w.provider), view.instance
        if provider is None or inst is None:
            return view
        runner = provider.runner(inst)
        if not isinstance(runner, Recycles):
            return view
        runner.recycle()
        with self.store.write() as s:
            s.execute(update(WarmInstance).where(col(WarmInstance.id) == w.id, col(WarmInstance.status) == W.DIRTY,
                                                 col(WarmInstance.ended_at).is_(None)).values(status=W.IDLE))
        return replace(view, status=W.IDLE)

    def _release(self, w: WarmInstance, view: W.WarmView, why: str, now: datetime) -> None:
        """Claim the release (``releasing``), terminate, then close the period, billed until the
        instance's end when the cloud reports one."""
        with self.store.write() as s:
            claimed = s.execute(update(WarmInstance).where(
                col(WarmInstance.id) == w.id, col(WarmInstance.status).in_(OPEN),
                col(WarmInstance.ended_at).is_(None)).values(status=W.RELEASING,
                                                             reason=why if w.status != W.RELEASING else w.reason))
            if claimed.rowcount != 1:  # type: ignore[attr-defined]
                return  # leased or released meanwhile
        inst, provider = view.instance, self.providers.get(w.provider)
        if provider is not None and (inst is None or inst.state.alive):
            provider.terminate(w.instance_id)
            crashpoint("warm.terminated")
        ended = inst.ended_at if inst is not None and not inst.state.alive and inst.ended_at else now
        ended = min(max(ended, w.idle_since), now)
        with self.store.write() as s:
            row = s.get(WarmInstance, w.id)
            if row is None or row.ended_at is not None:
                return
            row.status, row.ended_at = W.RELEASED, ended
            cost = idle_cost(row, now)
            idle = (ended - w.idle_since).total_seconds()
            events.record(s, now, "warm_released", f"warm instance {w.instance_id} released: {row.reason or why}; "
                          f"idle {timedelta(seconds=round(idle))}, ${cost:.4f}", job_id=w.job_id, attempt=w.attempt,
                          idle_s=round(idle, 3), idle_usd=round(cost, 6))
