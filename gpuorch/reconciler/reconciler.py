"""One reconcile pass: load (store + providers) -> decide (pure) -> apply (side effects).

Intent is recorded before every side effect (an attempt row exists before its launch call), and
every write checks, with the job's row locked, that this daemon still holds the job's unexpired
lease (``leases.py``), so a restarted or second daemon never double-acts. Nothing here sleeps:
``run_pass`` returns how soon it wants to run again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from threading import Event

from sqlalchemy import func, or_
from sqlmodel import Session, select

from .. import events
from ..budget import Policy
from ..clock import Clock, SystemClock
from ..crashpoints import crashpoint
from ..errors import AuthError, NoCapacityError, PermanentError, ProviderError, QuotaError
from ..logmirror import LogMirror
from ..placement import Candidate
from ..provider import Instance, InstanceState, LaunchRequest, Offer, Provider
from ..runner import RunnerUnavailable
from ..spec import JobSpec
from ..store import Store
from ..store.models import Attempt, AttemptStatus, Backoff, Checkpoint, Job, JobStatus, TerminationReason
from ..store.models import Event as EventRow
from ..store.models import Instance as InstanceRow
from . import actions as A
from .agent_config import agent_config
from .decide import AttemptView, JobView, Settings, decide
from .leases import LeaseLost, Leases
from .money import Money
from .scheduled import ScheduledStops
from .volumes import Volumes

log = logging.getLogger("gpuorch.reconciler")

__all__ = ["LeaseLost", "Reconciler", "backoff_key"]


def backoff_key(provider: str, region: str = "", instance_type: str = "", spot: bool | None = None) -> str:
    parts = [provider, region, instance_type] + ([] if spot is None else ["spot" if spot else "on-demand"])
    return "/".join(p for p in parts if p)


class Reconciler:
    def __init__(self, store: Store, providers: Mapping[str, Provider], *, clock: Clock | None = None,
                 settings: Settings | None = None, owner: str | None = None, lease_s: float = 60.0,
                 backoff_s: float = 300.0, offers_ttl_s: float = 300.0, logs: LogMirror | None = None,
                 budget: Policy | None = None) -> None:
        self.store, self.providers = store, dict(providers)
        self.clock = clock or SystemClock()
        self.settings = settings or Settings()
        # host/pid/random: operators see which process holds a job; unique across restarts
        self.owner = owner or f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:6]}"
        self.lease_s, self.backoff_s, self.offers_ttl_s = lease_s, backoff_s, offers_ttl_s
        self.logs = logs
        self._terminated: set[str] = set()
        self._offers: dict[str, list[Offer]] = {}  # by provider; kept when a refresh fails
        self._offers_at: dict[str, datetime] = {}
        self.leases = Leases(store, self.owner, lease_s)
        self._last_pass_at: datetime | None = None
        self.money = Money(store, budget or Policy(), self._txn)  # caps, sweeps, prices, metrics
        self.volumes = Volumes(store, self.providers, self._txn)  # spec volume: (docs/aws.md)
        self.scheduled_stops = ScheduledStops(store)  # warnings of stops announced far ahead

    # -- load ------------------------------------------------------------------------------
    def _current_offers(self, now: datetime) -> list[Offer]:
        """Every provider's offers, refreshed after ``offers_ttl_s``. A provider whose refresh
        fails keeps its previous offers and is asked again next pass (not after the TTL)."""
        for name, p in self.providers.items():
            at = self._offers_at.get(name)
            if at is not None and (now - at).total_seconds() < self.offers_ttl_s:
                continue
            try:
                self._offers[name], self._offers_at[name] = p.offers(), now
            except ProviderError as e:
                log.warning("offers from %s unavailable this pass (keeping %d known): %s", name,
                            len(self._offers.get(name, [])), e)
        return [o for offers in self._offers.values() for o in offers]

    def invalidate_offers(self) -> None:
        self._offers_at.clear()

    def _observe(self) -> tuple[dict[tuple[str, int, int], Instance], set[str]]:
        """Instances of this installation by (provider, job, attempt), and providers listed OK."""
        found: dict[tuple[str, int, int], Instance] = {}
        ok: set[str] = set()
        for name, p in self.providers.items():
            try:
                listed = p.list_managed()
            except ProviderError as e:
                log.warning("cannot list %s instances this pass: %s", name, e)
                continue
            ok.add(name)
            for inst in listed:
                if inst.owner == self.store.installation_id and inst.job_id is not None and inst.attempt is not None:
                    key = (name, inst.job_id, inst.attempt)
                    if key not in found or inst.state.alive:
                        found[key] = inst
        return found, ok

    def release_leases(self) -> None:
        self.leases.release()

    def _view(self, job: Job, observed: dict[tuple[str, int, int], Instance], ok: set[str]) -> JobView:
        with self.store.read() as s:
            rows = list(s.exec(select(Attempt).where(Attempt.job_id == job.id).order_by(Attempt.number)))  # type: ignore[arg-type]
        views = []
        for row in rows:
            if row.status == AttemptStatus.ENDED:
                views.append(AttemptView(row, observed=True))
                continue
            inst = observed.get((row.provider, job.id or 0, row.number))
            agent, reachable = None, False
            provider = self.providers.get(row.provider)
            # Only a running instance is worth a (possibly slow) connection; a booting one is not yet.
            if inst is not None and provider is not None and (
                    inst.state == InstanceState.RUNNING or (not inst.state.alive and provider.runner_outlives_instance)):
                runner = provider.runner(inst)
                try:
                    agent = runner.status()
                    reachable = True
                except (RunnerUnavailable, ProviderError):
                    pass
                if self.logs is not None and agent is not None:
                    self.logs.pull(job.id or 0, row.number, runner)
                if agent is not None:
                    self.money.collect_metrics(job.id or 0, row, runner, self.clock.now())
            views.append(AttemptView(row, observed=row.provider in ok, instance=inst, agent=agent, reachable=reachable))
        return JobView(job, JobSpec.model_validate_json(job.spec), views)

    def _avoid(self, now: datetime):  # type: ignore[no-untyped-def]
        with self.store.read() as s:
            keys = {b.key for b in s.exec(select(Backoff).where(Backoff.until > now))}

        def avoid(c: Candidate) -> bool:
            o = c.offer
            return (o.provider in keys or backoff_key(o.provider, o.region) in keys
                    or backoff_key(o.provider, o.region, o.instance_type, c.spot) in keys)

        return avoid

    # -- the pass ----------------------------------------------------------------------------
    def run_pass(self, stop: Event | None = None) -> float:
        """Reconcile every job once; return the seconds until the next pass is due.

        Once ``stop`` is set (the daemon is shutting down) no more jobs are claimed and the jobs
        not reached yet are left alone: the pass ends after the job in hand.
        """
        if stop is not None and stop.is_set():
            return 0.0
        now = self.clock.now()
        # Claim, then observe: observations then postdate every write of a daemon whose lease
        # this pass took over (its writes need an unexpired lease; we took an expired one).
        claimed = self.leases.claim(now, self._last_pass_at)
        self._last_pass_at = now
        observed, ok = self._observe()  # before reading attempts: see _sweep_orphans
        crashpoint("pass.observed")
        self.scheduled_stops.note(observed, {j.id for j in claimed if j.id is not None}, now)
        offers = self._current_offers(now)
        settings = self.settings
        if len(self._offers) < len(self.providers):  # a catalog is missing: "no offer" may be a blip
            settings = dataclasses.replace(settings, no_offer_retry_s=settings.poll_s)
        avoid = self._avoid(now)
        requeue = self.settings.no_offer_retry_s
        self._terminated: set[str] = set()  # this pass's terminations; `observed` predates them
        self.money.begin_pass()
        renewed = now
        for job in claimed:
            if stop is not None and stop.is_set():
                return 0.0  # the leases taken are released by the daemon on its way out
            if (t := self.clock.now()) - renewed >= timedelta(seconds=self.lease_s / 3):
                self.leases.renew(t)
                renewed = t
            try:
                view = self._view(job, observed, ok)
                self.money.track_prices(view, offers, max(self._offers_at.values(), default=None))
                view = dataclasses.replace(view, gate=self.money.gate(view, now))
                decision = decide(view, now, offers, avoid=avoid, settings=settings)
                self._apply(view, decision, observed, now)
                self.money.after(decision)
                requeue = min(requeue, decision.requeue_after)
            except LeaseLost:
                log.info("job %s: lease lost (expired or taken over); its work this pass is dropped", job.id)
            except Exception:  # one job's trouble must not stall the others; the next pass retries it
                log.exception("job %s: reconcile failed", job.id)
                requeue = min(requeue, self.settings.poll_s)
        self.money.finish_sweeps(now)
        self._sweep_orphans(observed, ok, now)
        self.volumes.sweep(ok, now)
        self._mirror_instances(observed, ok, now)
        crashpoint("pass.done")
        return max(0.0, requeue)

    def _mirror_instances(self, observed: dict[tuple[str, int, int], Instance], ok: set[str], now: datetime) -> None:
        """Keep the instance table in step with what the providers report; write only changes."""
        seen = {(k[0], inst.id): (k, inst) for k, inst in observed.items()}
        with self.store.read() as s:
            rows = {(r.provider, r.instance_id): r for r in s.exec(select(InstanceRow).where(or_(
                InstanceRow.terminated_at.is_(None),  # type: ignore[union-attr]
                InstanceRow.instance_id.in_([i for _, i in seen]))))}  # type: ignore[attr-defined]
        changes: list[InstanceRow] = []
        for key, (k, inst) in seen.items():
            row = rows.get(key)
            state = "terminating" if inst.id in self._terminated else inst.state.value
            if row is None:
                row = InstanceRow(provider=k[0], instance_id=inst.id, job_id=k[1], attempt=k[2], region=inst.region,
                                  zone=inst.zone, instance_type=inst.instance_type, spot=inst.spot, state="", first_seen=now)
            elif row.state == state:
                continue
            row.state, row.last_seen = state, now
            if not inst.state.alive:
                row.terminated_at = now
            changes.append(row)
        for key, row in rows.items():
            if key not in seen and key[0] in ok and row.terminated_at is None:
                row.state, row.terminated_at = "gone", now
                changes.append(row)
        if changes:
            with self.store.write() as s:
                for row in changes:
                    s.merge(row)

    # -- apply -------------------------------------------------------------------------------
    @contextmanager
    def _txn(self, job_id: int) -> Iterator[tuple[Session, Job]]:
        """A write on the job, only while this daemon holds its unexpired lease (else LeaseLost).

        The job's row stays locked until commit (``FOR UPDATE``; SQLite: BEGIN IMMEDIATE), so no
        other daemon's claim commits between this check and this write.
        """
        with self.store.write() as s:
            job = s.get(Job, job_id, with_for_update=True)
            now = self.clock.now()
            if not self.leases.held(job, now):
                raise LeaseLost(job_id)
            yield s, job  # type: ignore[misc]
            job.updated_at = self.clock.now()  # type: ignore[union-attr]

    def _apply(self, view: JobView, d: A.Decision, observed: dict[tuple[str, int, int], Instance], now: datetime) -> None:
        job_id = view.job.id or 0
        by_number = {a.row.number: a for a in view.attempts}
        for action in d.actions:
            a = by_number.get(getattr(action, "attempt", -1))
            match action:
                case A.Launch():
                    self._launch(view, action, now)
                case A.Relaunch():
                    self.leases.check(job_id, self.clock.now())
                    self._launch_attempt(view, a.row, now)  # type: ignore[union-attr]
                case A.Adopt():
                    with self._txn(job_id) as (s, _):
                        row = s.get(Attempt, a.row.id)  # type: ignore[union-attr]
                        row.status, row.instance_id, row.launched_at = AttemptStatus.LAUNCHED, action.instance.id, now
                        events.record(s, now, "adopted", f"found instance {action.instance.id} already launched",
                                      job_id=job_id, attempt=row.number)
                case A.StartAgent():
                    self.leases.check(job_id, self.clock.now())
                    vol = view.spec.volume
                    volume_id = "" if vol is None else self.volumes.attach(job_id, vol.size, a.row, a.instance.id, now)  # type: ignore[union-attr]
                    if volume_id is not None:
                        self._start_agent(view, a, now, volume_id or None)  # type: ignore[arg-type]
                    crashpoint("agent.started")
                case A.Progress():
                    self._progress(job_id, a, action.status, now)  # type: ignore[arg-type]
                    crashpoint("progress.recorded")
                case A.Drain():
                    with self._txn(job_id) as (s, job):
                        row = s.get(Attempt, a.row.id)  # type: ignore[union-attr]
                        row.status, row.reason = AttemptStatus.DRAINING, TerminationReason.PREEMPTED
                        row.notice_at, row.drain_until = action.notice_at, action.until
                        job.preemptions += 1
                        job.status, job.message = JobStatus.RECOVERING, f"preemption notice on attempt {row.number}"
                        left = (action.until - now).total_seconds()
                        events.record(s, now, "notice", f"preemption notice: {row.instance_id} reclaimed in {left:.0f}s; "
                                      "final checkpoint requested, replacement requested now", job_id=job_id,
                                      attempt=row.number)
                    crashpoint("drain.recorded")
                case A.End():
                    self._end(view, a, action, now)  # type: ignore[arg-type]
                    crashpoint("end.recorded")
                case A.Terminate():
                    self.leases.check(job_id, self.clock.now())
                    try:
                        self.providers[a.row.provider].terminate(action.instance_id)  # type: ignore[union-attr]
                        self._terminated.add(action.instance_id)
                        crashpoint("terminate.called")
                    except ProviderError as e:
                        log.warning("terminate %s failed (the orphan sweep retries): %s", action.instance_id, e)
                case A.SetJob():
                    with self._txn(job_id) as (s, job):
                        if job.status != action.status or job.message != action.message:
                            if action.status != job.status:
                                events.record(s, now, action.status.value, action.message or action.status.value,
                                              job_id=job_id)
                            job.status, job.message = action.status, action.message
                        job.not_before = action.not_before
                        if action.finished:
                            job.finished_at = now
                    if action.finished and view.spec.volume is not None:
                        self.volumes.release(job_id, now)
                case A.Note():
                    with self._txn(job_id) as (s, _):
                        events.record(s, now, action.kind, action.message, job_id=job_id, attempt=action.attempt, **action.data)
                case A.StopCleanly():
                    self.money.stop_cleanly(self.providers[a.row.provider], view, a, action, now)  # type: ignore[union-attr,arg-type]
                case A.Heartbeat():
                    inst = a.instance  # type: ignore[union-attr]
                    try:
                        self.providers[a.row.provider].runner(inst).heartbeat()  # type: ignore[union-attr,arg-type]
                    except (RunnerUnavailable, ProviderError):
                        pass

    def _launch(self, view: JobView, action: A.Launch, now: datetime) -> None:
        job_id = view.job.id or 0
        refused: str | None = None
        for cand in action.candidates:
            o = cand.offer
            with self._txn(job_id) as (s, job):
                refused = self.money.admit(s, job, view.spec, cand, now)
                if refused is not None:  # the budget check and the attempt row it admits are one transaction
                    continue
                last = s.exec(select(Attempt.number).where(Attempt.job_id == job_id)
                              .order_by(Attempt.number.desc())).first()  # type: ignore[attr-defined]
                row = Attempt(job_id=job_id, number=(last or 0) + 1, provider=o.provider, region=o.region, zone=o.zone,
                              instance_type=o.instance_type, gpu=o.gpu, gpu_count=o.gpu_count, spot=cand.spot,
                              price_per_hour=cand.price_per_hour, billing_granularity_s=o.billing_granularity_s,
                              min_billing_s=o.min_billing_s, predecessor=action.predecessor, requested_at=now)
                s.add(row)
                job.status = JobStatus.RECOVERING if job.preemptions and job.status == JobStatus.RECOVERING else JobStatus.STARTING
                market = "spot" if cand.spot else "on-demand"
                events.record(s, now, "launch_requested",
                              f"{o.provider} {o.zone} {o.instance_type} {market} at ${cand.price_per_hour:.3f}/h",
                              job_id=job_id, attempt=row.number)
            crashpoint("launch.intent")
            if self._launch_attempt(view, row, now, offer=o):
                return
        with self._txn(job_id) as (s, job):
            job.status, job.message = JobStatus.QUEUED, refused or "no capacity on the candidate offers; will try again"

    def _launch_attempt(self, view: JobView, row: Attempt, now: datetime, offer: Offer | None = None) -> bool:
        """Call launch for a recorded attempt (idempotent by client token). True if it has an instance."""
        job_id = view.job.id or 0
        provider = self.providers.get(row.provider)
        if provider is None:
            self._close_attempt(job_id, row, TerminationReason.LAUNCH_FAILED, f"provider {row.provider} is not enabled", now)
            return False
        offer = offer or Offer(provider=row.provider, region=row.region, zone=row.zone, instance_type=row.instance_type,
                               gpu=row.gpu, gpu_count=row.gpu_count, price_per_hour=row.price_per_hour,
                               spot_price_per_hour=row.price_per_hour if row.spot else None,
                               billing_granularity_s=row.billing_granularity_s, min_billing_s=row.min_billing_s)
        req = LaunchRequest(job_id=job_id, attempt=row.number, offer=offer, spot=row.spot,
                            disk_gib=view.spec.resources.disk, owner=self.store.installation_id,
                            max_lifetime_s=self.settings.max_lifetime_s)
        try:
            inst = provider.launch(req)
        except (NoCapacityError, QuotaError) as e:
            kind = "quota" if isinstance(e, QuotaError) else "no capacity"
            self._close_attempt(job_id, row, TerminationReason.NO_CAPACITY, f"{kind}: {e}", now,
                                backoff=backoff_key(row.provider, row.region, row.instance_type, row.spot))
            return False
        except PermanentError as e:
            key = row.provider if isinstance(e, AuthError) else backoff_key(row.provider, row.region, row.instance_type, row.spot)
            self._close_attempt(job_id, row, TerminationReason.LAUNCH_FAILED, f"launch refused: {e}", now,
                                backoff=key, backoff_s=3600)
            return False
        except ProviderError as e:  # TransientError, or an adapter's unclassified error: retry, bounded
            return self._launch_retry(job_id, row, e, now)
        crashpoint("launch.called")  # the instance exists and nothing says so yet: tags find it again
        with self._txn(job_id) as (s, _):
            r = s.get(Attempt, row.id)
            r.status, r.instance_id, r.launched_at = AttemptStatus.LAUNCHED, inst.id, now  # type: ignore[union-attr]
            events.record(s, now, "launched", f"instance {inst.id} ({inst.state.value})", job_id=job_id,
                          attempt=row.number)
        crashpoint("launch.recorded")
        return True

    def _launch_retry(self, job_id: int, row: Attempt, error: ProviderError, now: datetime) -> bool:
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

    def _close_attempt(self, job_id: int, row: Attempt, reason: TerminationReason, message: str, now: datetime,
                       backoff: str | None = None, backoff_s: float | None = None) -> None:
        with self._txn(job_id) as (s, _):
            r = s.get(Attempt, row.id)
            r.status, r.reason, r.message, r.ended_at = AttemptStatus.ENDED, reason, message, now  # type: ignore[union-attr]
            if backoff:
                until = now + timedelta(seconds=backoff_s or self.backoff_s)
                b = s.get(Backoff, backoff) or Backoff(key=backoff, until=until)
                b.until, b.reason = until, message
                s.add(b)
            events.record(s, now, reason.value, message, job_id=job_id, attempt=row.number)

    def _start_agent(self, view: JobView, a: AttemptView, now: datetime, volume_id: str | None = None) -> None:
        pred_deadline = None
        if a.row.predecessor is not None:
            pred = next((p.row for p in view.attempts if p.row.number == a.row.predecessor), None)
            if pred is not None and pred.drain_until is not None:
                pred_deadline = pred.drain_until.timestamp()
        cfg = agent_config(view.job, view.spec, a.row, predecessor_deadline=pred_deadline,
                           heartbeat_timeout_s=self.settings.heartbeat_timeout_s, volume_id=volume_id)
        workdir = Path(view.spec.workdir) if view.spec.workdir else None
        try:
            self.providers[a.row.provider].runner(a.instance).start(cfg, workdir)  # type: ignore[arg-type]
        except (RunnerUnavailable, ProviderError) as e:
            log.info("job %s attempt %s: runner not ready: %s", view.job.id, a.row.number, e)

    def _progress(self, job_id: int, a: AttemptView, st, now: datetime) -> None:  # type: ignore[no-untyped-def]
        """Write only what changed: most polls of a running job change nothing."""
        row = a.row
        became_running = row.status == AttemptStatus.LAUNCHED and st.state != "starting"
        new_ckpt = bool(st.uploaded) and st.uploaded[-1] != row.last_checkpoint
        # The agent may be seen first while still restoring: what it resumed from comes later.
        restored = not became_running and st.restored_from is not None and row.resumed_from is None
        if not (became_running or new_ckpt or restored):
            return
        with self._txn(job_id) as (s, job):
            r = s.get(Attempt, row.id)
            if restored:
                r.resumed_from = st.restored_from  # type: ignore[union-attr]
                events.record(s, now, "restored", f"resumed from checkpoint {st.restored_from}", job_id=job_id,
                              attempt=row.number)
            if became_running:
                r.status, r.started_at, r.resumed_from = AttemptStatus.RUNNING, now, st.restored_from  # type: ignore[union-attr]
                job.status, job.message = JobStatus.RUNNING, None
                how = f"resumed from checkpoint {st.restored_from}" if st.restored_from else "started fresh"
                events.record(s, now, "running", f"agent up on {r.instance_id}, {how}", job_id=job_id,  # type: ignore[union-attr]
                              attempt=row.number)
            if new_ckpt:
                self._record_checkpoints(s, job_id, r, st, now)  # type: ignore[arg-type]

    def _record_checkpoints(self, s: Session, job_id: int, r: Attempt, st, now: datetime) -> None:  # type: ignore[no-untyped-def]
        known = set(s.exec(select(Checkpoint.name).where(Checkpoint.job_id == job_id)))
        for name in st.uploaded:
            if name in known:
                continue
            known.add(name)  # an agent may list a name twice (a checkpoint whose COMPLETE changed)
            last = name == st.last_checkpoint
            completed = datetime.fromtimestamp(st.last_checkpoint_at, now.tzinfo) if last and st.last_checkpoint_at else None
            s.add(Checkpoint(job_id=job_id, attempt=r.number, name=name, recorded_at=now, completed_at=completed,
                             step=st.last_checkpoint_step if last else None, final=name == st.final_checkpoint))
            events.record(s, now, "checkpoint", f"checkpoint {name} durable" + (" (final, on notice)" if name == st.final_checkpoint else ""),
                          job_id=job_id, attempt=r.number)
        if st.last_checkpoint:
            r.last_checkpoint = st.last_checkpoint
            if st.last_checkpoint_at:
                r.last_checkpoint_at = datetime.fromtimestamp(st.last_checkpoint_at, now.tzinfo)

    def _end(self, view: JobView, a: AttemptView, end: A.End, now: datetime) -> None:
        job_id = view.job.id or 0
        with self._txn(job_id) as (s, job):
            r = s.get(Attempt, a.row.id)
            assert r is not None
            was_draining = r.status == AttemptStatus.DRAINING
            if end.status is not None and end.status.uploaded and end.status.uploaded[-1] != r.last_checkpoint:
                self._record_checkpoints(s, job_id, r, end.status, now)
            if end.status is not None and r.resumed_from is None:
                r.resumed_from = end.status.restored_from
            r.status, r.ended_at, r.message = AttemptStatus.ENDED, now, end.message
            r.reason = (r.reason or TerminationReason.PREEMPTED) if was_draining else end.reason
            r.exit_code, r.lost_work_s = end.exit_code, end.lost_work_s
            if not was_draining:
                if end.reason.counts_as == "preemption":
                    job.preemptions += 1
                elif end.reason.counts_as == "failure":
                    job.failures += 1
                if end.exit_code is not None:
                    job.exit_code = end.exit_code
                if end.result is not None:
                    job.result = json.dumps(end.result)
            lost = f"; lost work {end.lost_work_s:.0f}s" if end.lost_work_s is not None else ""
            events.record(s, now, "attempt_ended", f"{r.reason.value}: {end.message}{lost}", job_id=job_id,
                          attempt=r.number, reason=r.reason.value, lost_work_s=end.lost_work_s)
            volume_job = job if view.spec.volume is not None else None
        if volume_job is not None:
            self.volumes.detach(volume_job, a.row.instance_id)

    def _sweep_orphans(self, observed: dict[tuple[str, int, int], Instance], ok: set[str], now: datetime) -> None:
        """Terminate live instances of this installation that no unfinished attempt owns.

        ``observed`` was listed before the attempts are read here, and an attempt row is always
        committed before its launch call, so an instance launched this pass, by this daemon or by
        another, is never mistaken: the read below is a new READ COMMITTED statement and sees
        every row committed before it began. Instances of jobs another daemon holds are left to
        that daemon, so two daemons never both act on one.
        """
        with self.store.read() as s:
            owned = {(r.provider, r.job_id, r.number) for r in s.exec(
                select(Attempt).where(Attempt.status != AttemptStatus.ENDED))}
        theirs = self.leases.others(now)
        for key, inst in observed.items():
            if key[0] not in ok or not inst.state.alive or key in owned or key[1] in theirs or inst.id in self._terminated:
                continue
            try:
                self.providers[key[0]].terminate(inst.id)
            except ProviderError as e:
                log.warning("orphan %s: terminate failed: %s", inst.id, e)
                continue
            crashpoint("orphan.terminated")
            with self.store.write() as ws:
                events.record(ws, now, "orphan_terminated", f"{key[0]} instance {inst.id} had no live attempt",
                              job_id=key[1], attempt=key[2])
