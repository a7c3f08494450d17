"""Launching an attempt: intent first (the attempt row, in the same transaction as the budget
check that admits it, with the full offer as JSON), then the provider call, idempotent by the
attempt's client token.

A collaborator of the apply stage: it gets the lease-checked ``txn``, the providers, settings,
money and back-off it needs. A launch the provider refuses closes the attempt and backs off its
offer class; a transient failure leaves it requested, and the next pass repeats the same call
(with the same offer), at most ``Settings.max_launch_retries`` times. The launch calls run on
``LaunchPool`` (launch_pool.py), so a hung cloud call holds only its own job.

A queue drains a batch at a time (issue 18): the pass hands its launches to ``intents``, which
records every job's first attempt in one write transaction (``batch_txn.py``: the jobs' lease
check is that transaction's ``SELECT``), and then the pool makes the cloud calls, a share per
worker, each share's "launched" records one transaction (``record_launched``). Intent still
comes first: no cloud call before its attempt row is committed; a crash between the call and
its record leaves a tagged instance the next pass adopts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, case, func, literal, update
from sqlmodel import Session, col, select

from gpuorch.clock import Clock, SystemClock, time_scale, wall_s
from gpuorch.errors import AuthError, NoCapacityError, PermanentError, ProviderError, QuotaError
from gpuorch.jobs import events
from gpuorch.money.record import billed_start
from gpuorch.ops.crashpoints import crashpoint
from gpuorch.placement.rank import Candidate
from gpuorch.provider.gang import gang_cost_per_hour
from gpuorch.provider.port import Instance, LaunchRequest, Offer, Provider
from gpuorch.reconciler.apply.batch_txn import TxnIds, chunks, versioned
from gpuorch.reconciler.apply.money import Money, Txn
from gpuorch.reconciler.apply.volumes import for_launch, launch_provider
from gpuorch.reconciler.decide import actions as A
from gpuorch.reconciler.observe.listing import backoff_key
from gpuorch.reconciler.observe.views import JobView, Settings
from gpuorch.store.bulk import insert_rows
from gpuorch.store.models import Attempt, AttemptStatus, Backoff, Job, JobStatus, TerminationReason
from gpuorch.store.models import Event as EventRow

log = logging.getLogger("gpuorch.reconciler")


def back_off(s: Session, provider: Provider | None, key: str, message: str, now: datetime, seconds: float) -> None:
    """Back the offer class ``key`` (``backoff_key``) of ``provider`` off for ``seconds``, in the
    caller's transaction: a launch refused, or an attempt that found no capacity (``Recording``).
    A back-off is a market duration: on a simulated market it rests its market length."""
    until = now + timedelta(seconds=wall_s(seconds, time_scale(provider)))
    b = s.get(Backoff, key) or Backoff(key=key, until=until)
    b.until, b.reason = until, message
    s.add(b)


def gang_candidate(cand: Candidate, nodes: int) -> Candidate:
    """``cand`` as a gang of ``nodes`` instances bills: every price times ``nodes``, so the
    budget check, the attempt's price and its cost count every node (the provider launches the
    offer's instance type ``nodes`` times)."""
    if nodes <= 1:
        return cand
    o = cand.offer
    spot = o.spot_price_per_hour
    offer = o.model_copy(update={"price_per_hour": gang_cost_per_hour(o.price_per_hour, nodes),
                                 "spot_price_per_hour": None if spot is None else gang_cost_per_hour(spot, nodes)})
    ranked = cand.ranked_price_per_hour
    # Placement already costs a gang over every node (Candidate.nodes); an older candidate did not.
    cost = cand.est_cost if cand.nodes == nodes else cand.est_cost * nodes
    return replace(cand, offer=offer, est_cost=cost, nodes=1,
                   ranked_price_per_hour=None if ranked is None else ranked * nodes)


ATTEMPTS = cast(Table, Attempt.__table__)  # type: ignore[attr-defined]
JOB_STATUS = cast(Table, Job.__table__).c.status.type  # type: ignore[attr-defined]  # a bound status: the column's type


@dataclass(frozen=True, slots=True)
class Intended:
    """An attempt row a batch's intents wrote with Core (``Launching.intents``): what its launch
    and its record need, and its offer as the object placed (not its JSON, parsed back)."""

    id: int
    job_id: int
    number: int
    provider: str
    region: str
    instance_type: str
    spot: bool
    offer: Offer


AttemptRow = Attempt | Intended


def attempt_offer(row: AttemptRow) -> Offer:
    """The offer the attempt was launched on: stored whole since schema 6; an older row's is
    rebuilt from its columns (which lack the offer's size and network fields)."""
    if isinstance(row, Intended):
        return row.offer
    if row.offer:
        return Offer.model_validate_json(row.offer)
    return Offer(provider=row.provider, region=row.region, zone=row.zone, instance_type=row.instance_type,
                 gpu=row.gpu, gpu_count=row.gpu_count, price_per_hour=row.price_per_hour,
                 spot_price_per_hour=row.price_per_hour if row.spot else None,
                 billing_granularity_s=row.billing_granularity_s, min_billing_s=row.min_billing_s)


def requested(cand: Candidate) -> str:
    """The ``launch_requested`` event's message."""
    o = cand.offer
    market = "spot" if cand.spot else "on-demand"
    # A larger instance than the job asked for is never silent (resources.allow_larger).
    larger = f" ({o.gpu_count} GPUs, the job uses {cand.gpus_used})" if cand.larger else ""
    return f"{o.provider} {o.zone} {o.instance_type} {market} at ${cand.price_per_hour:.3f}/h{larger}"


First = tuple[int, AttemptRow | None, str | None]  # ``intent``'s answer: candidate position, row, why refused
Launched = list[tuple[JobView, AttemptRow, Instance]]  # launches made and not yet recorded (``record_launched``)


class Launching:
    def __init__(self, providers: Mapping[str, Provider], txn: Txn, money: Money, settings: Settings,
                 installation_id: str, backoff_s: float, txn_many: TxnIds | None = None,
                 clock: Clock | None = None, txn_ids: TxnIds | None = None) -> None:
        self.providers, self._txn, self.money, self.settings = providers, txn, money, settings
        self.installation_id, self.backoff_s, self._txn_many = installation_id, backoff_s, txn_many
        self._txn_ids = txn_ids  # record_launched's transaction (BatchTxn; apart from txn_many: tests replace one)
        self._now = (clock or SystemClock()).now

    def launch(self, view: JobView, action: A.Launch, now: datetime, first: First | None = None,
               launched: Launched | None = None) -> None:
        """Launch on the first candidate that the caps admit and that has capacity. ``first``:
        ``intent``'s answer when the pass recorded the first attempt already. ``launched``: where
        to leave a made launch for ``record_launched`` (one transaction for a batch), instead of
        recording it here."""
        job_id = view.job.id or 0
        k, row, refused = first if first is not None else self.intent(view, action, 0, now)
        while row is not None:
            if self.launch_attempt(view, row, now, launched):
                return
            k, row, refused = self.intent(view, action, k + 1, now)
        with self._txn(job_id) as (s, job):
            job.status, job.message = JobStatus.QUEUED, refused or "no capacity on the candidate offers; will try again"

    def intent(self, view: JobView, action: A.Launch, start: int, now: datetime) -> First:
        """Record the attempt row for the first candidate from ``start`` on that the caps admit:
        (its position, the row, why the last candidate looked at was refused); no row when none
        was admitted. The pass records the first intents itself, a batch at a time (``intents``:
        a queue drains at the pass's pace, not the launch pool's); the pool records the next
        ones after a refused launch."""
        with self._txn(view.job.id or 0) as (s, job):
            first = self._intent_in(s, job, view, action, start, now, None)
        if first[1] is not None:
            crashpoint("launch.intent")
        return first

    def intents(self, batch: Sequence[tuple[JobView, A.Launch]], now: datetime,
                ) -> list[tuple[JobView, A.Launch, First]]:
        """``intent`` for a batch of jobs in one write transaction (the lease check of every job
        one ``SELECT``). A job whose lease is lost is left out (logged), as ``LeaseLost`` leaves
        one job's work. Needs ``txn_many``.

        A job no cap, budget or sweep applies to (``Money.ungated``: its admission admits the
        first candidate, whatever else is reserved) gets its attempt row, its event and its
        status as part of one Core ``INSERT``/``UPDATE`` for the batch, no ORM object. A job
        under a cap is admitted as ``intent`` does, after the batch's rows so far are written:
        its admission reads every reservation made before it in the transaction."""
        assert self._txn_many is not None
        ids = [view.job.id or 0 for view, _ in batch]
        out: list[tuple[JobView, A.Launch, First]] = []
        with self._txn_many(ids) as (s, held):
            last: dict[int, int] = {}
            for chunk in chunks(ids):
                last.update(s.exec(select(col(Attempt.job_id), func.max(Attempt.number))
                                   .where(col(Attempt.job_id).in_(chunk))
                                   .group_by(col(Attempt.job_id))).all())
            pending: list[tuple[int, Candidate, dict[str, Any]]] = []  # (place in out, candidate, row)
            for view, action in batch:
                job_id = view.job.id or 0
                if job_id not in held:
                    log.info("job %s: lease lost (expired or taken over); its launch this pass is dropped", job_id)
                    continue
                if not self.money.ungated(view.job, view.spec):
                    self._insert(s, out, pending, now)  # what this admission must see
                    job = s.get(Job, job_id)  # its row is locked: the lease check above
                    assert job is not None
                    out.append((view, action, self._intent_in(s, job, view, action, 0, now, last.get(job_id, 0))))
                    continue
                first: First = (0, None, None)  # no candidate: nothing to record
                if action.candidates:  # admitted: nothing gates it (Money.admit)
                    cand = gang_candidate(action.candidates[0], view.spec.nodes)
                    pending.append((len(out), cand, self._row(view, action, cand, last.get(job_id, 0) + 1, now)))
                out.append((view, action, first))  # a pending row's place: filled by _insert
            self._insert(s, out, pending, now)
        if any(first[1] is not None for _, _, first in out):
            crashpoint("launch.intent")
        return out

    def _insert(self, s: Session, out: list[tuple[JobView, A.Launch, First]],
                pending: list[tuple[int, Candidate, dict[str, Any]]], now: datetime) -> None:
        """Write ``pending``'s attempt rows (one ``INSERT``, then their ids read by (job, number)),
        their events and their jobs' status, as ``_intent_in`` does one; put each row in its place
        in ``out``; then clear ``pending``. (An ``INSERT ... RETURNING`` in parameter order took
        twice as long on PostgreSQL as the plain insert and the read together: 250 rows, 20 vs
        10 ms.)"""
        if not pending:
            return
        rows = [row for _, _, row in pending]
        insert_rows(s, ATTEMPTS, rows)  # PostgreSQL: COPY
        job_ids = sorted({row["job_id"] for row in rows})
        ids = {(job_id, number): rid for chunk in chunks(job_ids)
               for rid, job_id, number in s.execute(select(ATTEMPTS.c.id, ATTEMPTS.c.job_id, ATTEMPTS.c.number)
                                                    .where(ATTEMPTS.c.job_id.in_(chunk)))}
        for k, cand, row in pending:
            view, action, _ = out[k]
            rid = ids[row["job_id"], row["number"]]
            out[k] = (view, action, (0, Intended(rid, row["job_id"], row["number"], row["provider"], row["region"],
                                                 row["instance_type"], row["spot"], cand.offer), None))
        events.record_many(s, now, [("launch_requested", requested(cand), row["job_id"], row["number"])
                                    for _, cand, row in pending])
        # STARTING, unless recovering from a preemption, and the row's version: one write of each
        # wide job row (BatchTxn's closing UPDATE leaves them out: ``versioned``)
        recovering = and_(col(Job.preemptions) > 0, col(Job.status) == JobStatus.RECOVERING)
        status = case((recovering, col(Job.status)), else_=literal(JobStatus.STARTING, JOB_STATUS))
        t = self._now()
        for chunk in chunks(job_ids):
            s.execute(update(Job).where(col(Job.id).in_(chunk)).values(status=status, updated_at=t)
                      .execution_options(synchronize_session=False))
        versioned(s, job_ids)
        pending.clear()

    def _row(self, view: JobView, action: A.Launch, cand: Candidate, number: int, now: datetime) -> dict[str, Any]:
        """The attempt row an admitted ``cand`` gets, as column values."""
        o = cand.offer
        return {"job_id": view.job.id or 0, "number": number, "status": AttemptStatus.REQUESTED,
                "provider": o.provider, "region": o.region, "zone": o.zone, "instance_type": o.instance_type,
                "gpu": o.gpu, "gpu_count": o.gpu_count, "spot": cand.spot, "price_per_hour": cand.price_per_hour,
                "billing_granularity_s": o.billing_granularity_s, "min_billing_s": o.min_billing_s,
                "predecessor": action.predecessor, "requested_at": now, "offer": o.model_dump_json(),
                "runway_until": self.money.runway_until(view.spec, cand, now)}

    def _intent_in(self, s: Session, job: Job, view: JobView, action: A.Launch, start: int, now: datetime,
                   last: int | None) -> First:
        """``intent`` inside the caller's transaction; ``last``: the job's last attempt number if
        known (None: read here)."""
        job_id = view.job.id or 0
        refused: str | None = None
        for k in range(start, len(action.candidates)):
            cand = gang_candidate(action.candidates[k], view.spec.nodes)  # a gang is admitted for every node
            refused = self.money.admit(s, job, view.spec, cand, now)
            if refused is not None:  # the budget check and the attempt row it admits are one transaction
                continue
            if last is None:
                last = s.exec(select(Attempt.number).where(Attempt.job_id == job_id)
                              .order_by(Attempt.number.desc())).first() or 0  # type: ignore[attr-defined]
            row = Attempt(**self._row(view, action, cand, last + 1, now))
            s.add(row)
            recovering = job.preemptions and job.status == JobStatus.RECOVERING
            job.status = JobStatus.RECOVERING if recovering else JobStatus.STARTING
            events.record(s, now, "launch_requested", requested(cand), job_id=job_id, attempt=row.number)
            return k, row, refused
        return len(action.candidates), None, refused

    def launch_attempt(self, view: JobView, row: AttemptRow, now: datetime, launched: Launched | None = None) -> bool:
        """Call launch for a recorded attempt (idempotent by client token). True if it has an
        instance. ``launched``: see ``launch``."""
        job_id = view.job.id or 0
        provider = self.providers.get(row.provider)
        if provider is None:
            self._close_attempt(job_id, row, TerminationReason.LAUNCH_FAILED,
                                f"provider {row.provider} is not enabled", now)
            return False
        req = LaunchRequest(job_id=job_id, attempt=row.number, offer=attempt_offer(row), spot=row.spot,
                            disk_gib=view.spec.resources.disk, owner=self.installation_id,
                            max_lifetime_s=self.settings.max_lifetime_s, nodes=view.spec.nodes,
                            image=view.spec.image)
        try:
            at_launch = launch_provider(provider) if view.spec.volume is not None else None
            if at_launch is not None and view.spec.volume is not None:  # created before, named in the request
                req = req.model_copy(update={"volumes": (for_launch(
                    self._txn, at_launch, self.installation_id, job_id, row.number, req.offer, view.spec.volume,
                    now),)})
            inst = provider.launch(req)
        except (NoCapacityError, QuotaError) as e:
            kind = "quota" if isinstance(e, QuotaError) else "no capacity"
            self._close_attempt(job_id, row, TerminationReason.NO_CAPACITY, f"{kind}: {e}", now,
                                backoff=backoff_key(row.provider, row.region, row.instance_type, row.spot))
            return False
        except PermanentError as e:
            key = (row.provider if isinstance(e, AuthError)
                   else backoff_key(row.provider, row.region, row.instance_type, row.spot))
            self._close_attempt(job_id, row, TerminationReason.LAUNCH_FAILED, f"launch refused: {e}", now,
                                backoff=key, backoff_s=3600, credentials=isinstance(e, AuthError))
            return False
        except ProviderError as e:  # TransientError, or an adapter's unclassified error: retry, bounded
            return self._launch_retry(job_id, row, e, now)
        crashpoint("launch.called")  # the instance exists and nothing says so yet: tags find it again
        if launched is not None:
            launched.append((view, row, inst))
            return True
        with self._txn(job_id) as (s, _):
            r = s.get(Attempt, row.id)
            if r is None or r.status != AttemptStatus.REQUESTED:  # adopted meanwhile, or ended: the orphan sweep
                return True                                       # takes an instance nobody owns
            r.status, r.instance_id, r.launched_at = AttemptStatus.LAUNCHED, inst.id, now
            events.record(s, now, "launched", f"instance {inst.id} ({inst.state.value})", job_id=job_id,
                          attempt=row.number)
        crashpoint("launch.recorded")
        return True

    def record_launched(self, launched: Launched, now: datetime) -> None:
        """Record a batch's launches (``launch(..., launched)``) in one write transaction. An
        attempt adopted or ended meanwhile, or a job whose lease is lost, is left as it is: the
        orphan sweep takes an instance nobody owns. Needs ``txn_ids``."""
        if not launched:
            return
        assert self._txn_ids is not None
        with self._txn_ids([view.job.id or 0 for view, _, _ in launched]) as (s, held):
            versioned(s, held)  # attempt rows only: the job rows are locked (the lease check), not written
            # Each attempt's status and request time (Core: no ORM row, which carries its offer), then
            # the launched ones updated by id in one executemany.
            ids = [row.id for _, row, _ in launched]
            state = {}
            for chunk in chunks(ids):
                for rid, status, requested_at in s.exec(select(col(Attempt.id), col(Attempt.status),
                                                               col(Attempt.requested_at))
                                                        .where(col(Attempt.id).in_(chunk))):
                    state[rid] = (status, requested_at)
            changes: list[dict[str, object]] = []
            said: list[tuple[str, str, int, int | None]] = []
            for view, row, inst in launched:
                got = state.get(row.id)
                if view.job.id not in held or got is None or got[0] != AttemptStatus.REQUESTED:
                    continue
                # Billed from the cloud's launch time when it gives one (money.record): recorded now,
                # the next pass's look at the cloud's record has nothing to correct (a write a job).
                changes.append({"b_id": row.id, "b_instance": inst.id,
                                "b_at": billed_start(got[1], inst.created_at, max(now, self._now()))})
                said.append(("launched", f"instance {inst.id} ({inst.state.value})", row.job_id, row.number))
            if changes:  # Core executemany (the ORM's bulk update by primary key cost twice as much)
                s.execute(update(ATTEMPTS).where(ATTEMPTS.c.id == bindparam("b_id"))
                          .values(status=AttemptStatus.LAUNCHED, instance_id=bindparam("b_instance"),
                                  launched_at=bindparam("b_at")), changes)
            events.record_many(s, now, said)
        crashpoint("launch.recorded")

    def _launch_retry(self, job_id: int, row: AttemptRow, error: ProviderError, now: datetime) -> bool:
        """A launch that failed transiently stays requested: the next pass repeats the same
        idempotent call. After ``max_launch_retries`` retries the attempt is closed and its offer
        class backed off, so the job moves on to another offer; an instance the lost answers may
        have created is found by its tags and terminated by the orphan sweep. True: keep waiting."""
        limit = self.settings.max_launch_retries
        with self._txn(job_id) as (s, _):
            tries = s.exec(select(func.count()).select_from(EventRow).where(
                EventRow.job_id == job_id, EventRow.attempt == row.number, EventRow.kind == "launch_retry")).one()
            if tries < limit:
                events.record(s, now, "launch_retry", f"launch failed ({type(error).__name__}, retry {tries + 1} of "
                              f"{limit}): {error}", job_id=job_id, attempt=row.number, code=error.code)
                return True
        self._close_attempt(job_id, row, TerminationReason.LAUNCH_FAILED,
                            f"launch still failing after {limit} retries: {error}", now,
                            backoff=backoff_key(row.provider, row.region, row.instance_type, row.spot))
        return False

    def _close_attempt(self, job_id: int, row: AttemptRow, reason: TerminationReason, message: str, now: datetime,
                       backoff: str | None = None, backoff_s: float | None = None, credentials: bool = False) -> None:
        with self._txn(job_id) as (s, _):
            r = s.get(Attempt, row.id)
            r.status, r.reason, r.message, r.ended_at = AttemptStatus.ENDED, reason, message, now  # type: ignore[union-attr]
            if backoff:
                back_off(s, self.providers.get(row.provider), backoff, message, now, backoff_s or self.backoff_s)
            events.record(s, now, reason.value, message, job_id=job_id, attempt=row.number)
            if credentials:  # the provider refused its credentials: provider.credentials_failed (notify.kinds)
                events.record(s, now, "credentials_failed", f"{row.provider}: {message}", provider=row.provider)

