"""One reconcile pass: load (store + providers) -> decide (pure) -> apply (side effects).

Intent is recorded before every side effect (an attempt row exists before its launch call), and
every write checks, with the job's row locked, that this daemon still holds the job's unexpired
lease (``leases.py``), so a restarted or second daemon never double-acts. Nothing here sleeps:
``run_pass`` returns how soon it wants to run again.

A pass costs little when nothing changes, so one daemon keeps a thousand running jobs on a few
percent of a core (docs/benchmarks.md): leases are claimed and renewed in bulk and only when due,
instances are listed once per provider, the jobs' attempts are read in one query (and
kept, like the job rows, while the job is held and unwritten: ``_held_attempts``), parsed specs
are cached by job (and spec text), agent heartbeats go out every ``heartbeat_every_s`` rather
than every pass, and the apply, mirror and orphan steps write (or even read) only what changed.

The pass's parts: ``observe.py`` (offers, listing), ``launching.py``, ``recording.py`` (agent
progress, checkpoints, ends), ``orphans.py``, ``mirror.py``, ``money.py``, ``volumes.py``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from threading import Event

from sqlmodel import Session, select

from gpuorch.jobs import events
from gpuorch.money.caps import Policy
from gpuorch.clock import Clock, SystemClock
from gpuorch.ops.crashpoints import crashpoint
from gpuorch.errors import ProviderError
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.placement import Candidate
from gpuorch.provider.port import Instance, InstanceState, Offer, Provider
from gpuorch.runners.port import RunnerUnavailable
from gpuorch.jobs.spec import JobSpec
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Backoff, Job, JobStatus, TerminationReason
from gpuorch.reconciler import actions as A
from gpuorch.reconciler.decide import AttemptView, JobView, Settings, decide, volume_failed
from gpuorch.reconciler.launching import Launching, backoff_key
from gpuorch.reconciler.leases import RENEW_WHEN_LEFT, LeaseLost, Leases
from gpuorch.reconciler.mirror import InstanceMirror
from gpuorch.reconciler.money import Money
from gpuorch.reconciler.observe import Key, OfferCache, list_instances
from gpuorch.reconciler.orphans import sweep_orphans
from gpuorch.reconciler.recording import Recording
from gpuorch.reconciler.scheduled import ScheduledStops
from gpuorch.reconciler.volumes import Volumes

log = logging.getLogger("gpuorch.reconciler")

__all__ = ["LeaseLost", "Reconciler", "backoff_key"]

HEARTBEAT_EVERY_S = 30.0  # at most; and at least four heartbeats per dead-man timeout
IN_CHUNK = 500  # ids per IN (...) list: well under every database's parameter limit


def heartbeat_every_s(settings: Settings) -> float:
    timeout = settings.heartbeat_timeout_s
    return min(HEARTBEAT_EVERY_S, timeout / 4) if timeout else HEARTBEAT_EVERY_S


class Reconciler(Launching, Recording):
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
        self.offers = OfferCache(self.providers, offers_ttl_s)
        self.leases = Leases(store, self.owner, lease_s)
        self._last_pass_at: datetime | None = None
        self.money = Money(store, budget or Policy(), self._txn)  # caps, sweeps, prices, metrics
        self.volumes = Volumes(store, self.providers, self._txn)  # spec volume: (docs/aws.md)
        self.mirror = InstanceMirror(store)
        self.scheduled_stops = ScheduledStops(store)  # warnings of stops announced far ahead
        self._attempts: dict[int, list[Attempt]] = {}  # this pass's attempts, by job id
        self._attempt_cache: dict[int, list[Attempt]] = {}  # kept across passes: see _held_attempts
        self._job_cache: dict[int, Job] = {}  # job rows kept across passes: see Leases.claim(known=)
        self._specs: dict[int, tuple[str, JobSpec]] = {}  # parsed specs by job id, with their text
        self._heartbeats: dict[tuple[int, int], datetime] = {}  # (job, attempt) -> last heartbeat sent

    # -- load ------------------------------------------------------------------------------
    def _current_offers(self, now: datetime) -> list[Offer]:
        return self.offers.current(now)

    def invalidate_offers(self) -> None:
        self.offers.invalidate()

    def _observe(self) -> tuple[dict[Key, Instance], set[str]]:
        """Instances of this installation by (provider, job, attempt), and providers listed OK."""
        return list_instances(self.providers, self.store.installation_id)

    def release_leases(self) -> None:
        self.leases.release()

    def _load_attempts(self, job_ids: Sequence[int]) -> dict[int, list[Attempt]]:
        """Every attempt of these jobs, by job, in number order: one query per ``IN_CHUNK`` jobs."""
        out: dict[int, list[Attempt]] = {i: [] for i in job_ids}
        with self.store.read() as s:
            for k in range(0, len(job_ids), IN_CHUNK):
                chunk = list(job_ids[k:k + IN_CHUNK])
                for row in s.exec(select(Attempt).where(Attempt.job_id.in_(chunk))  # type: ignore[attr-defined]
                                  .order_by(Attempt.job_id, Attempt.number)):  # type: ignore[arg-type]
                    out[row.job_id].append(row)
        return out

    def _held_attempts(self, claimed: list[Job]) -> dict[int, list[Attempt]]:
        """The attempts of the jobs held, from the cache where it is good, else in one query.

        Attempt rows are written only by the daemon holding the job's lease, through ``_txn``,
        which drops the job's cached rows; a job this daemon did not hold without a break since
        it last read them (``Leases.taken``: free, expired or another daemon's until this claim)
        is read again. So a cached row is the row in the store.
        """
        fresh = self.leases.taken
        out = {j.id or 0: rows for j in claimed if (rows := self._attempt_cache.get(j.id or 0)) is not None
               and j.id not in fresh}
        out.update(self._load_attempts([j.id or 0 for j in claimed if j.id not in out]))
        self._attempt_cache = dict(out)
        return out

    def _spec(self, job: Job) -> JobSpec:
        """The job's parsed spec, parsed again only when its text changed."""
        cached = self._specs.get(job.id or 0)
        if cached is not None and cached[0] == job.spec:
            return cached[1]
        spec = JobSpec.model_validate_json(job.spec)
        self._specs[job.id or 0] = (job.spec, spec)
        return spec

    def _view(self, job: Job, observed: dict[Key, Instance], ok: set[str]) -> JobView:
        rows = self._attempts.get(job.id or 0)
        if rows is None:  # not loaded with this pass's batch
            rows = self._load_attempts([job.id or 0])[job.id or 0]
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
                try:  # a runner may not exist yet (no address): the instance is just not reachable
                    runner = provider.runner(inst)
                    agent = runner.status()
                    reachable = True
                except (RunnerUnavailable, ProviderError):
                    pass
                if self.logs is not None and agent is not None:
                    self.logs.pull(job.id or 0, row.number, runner)
                if agent is not None:
                    self.money.collect_metrics(job.id or 0, row, runner, self.clock.now())
            views.append(AttemptView(row, observed=row.provider in ok, instance=inst, agent=agent, reachable=reachable))
        return JobView(job, self._spec(job), views)

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
        claimed = self.leases.claim(now, self._last_pass_at, known=self._job_cache)
        self._job_cache = {j.id or 0: j for j in claimed}
        self._last_pass_at = now
        observed, ok = self._observe()  # before reading attempts: see orphans.py
        crashpoint("pass.observed")
        self.scheduled_stops.note(observed, {j.id for j in claimed if j.id is not None}, now)
        self._attempts = self._held_attempts(claimed)
        live = {(r.provider, r.job_id, r.number) for rows in self._attempts.values() for r in rows
                if r.status != AttemptStatus.ENDED}
        offers = self._current_offers(now)
        settings = self.settings
        if not self.offers.complete:  # a catalog is missing: "no offer" may be a blip
            settings = dataclasses.replace(settings, no_offer_retry_s=settings.poll_s)
        avoid = self._avoid(now)
        requeue = self.settings.no_offer_retry_s
        self._terminated: set[str] = set()  # this pass's terminations; `observed` predates them
        self.money.begin_pass()
        # Leases are renewed (in bulk) once less than RENEW_WHEN_LEFT of them is left.
        renew_at = min((j.lease_expires for j in claimed if j.lease_expires is not None), default=now) \
            - timedelta(seconds=self.lease_s * RENEW_WHEN_LEFT)
        try:
            for job in claimed:
                if stop is not None and stop.is_set():
                    return 0.0  # the leases taken are released by the daemon on its way out
                if (t := self.clock.now()) >= renew_at:
                    self.leases.renew(t)
                    renew_at = t + timedelta(seconds=self.lease_s * (1 - RENEW_WHEN_LEFT))
                try:
                    view = self._view(job, observed, ok)
                    self.money.track_prices(view, offers, self.offers.seen_at)
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
        finally:
            self._attempts = {}
        self._forget(claimed, live)
        self.money.finish_sweeps(now)
        sweep_orphans(self.store, self.providers, self.leases, observed, ok, now, live, self._terminated)
        self.volumes.sweep(ok, now)
        self.mirror.update(observed, ok, self._terminated, now)
        crashpoint("pass.done")
        return max(0.0, requeue)

    def _forget(self, claimed: list[Job], live: set[Key]) -> None:
        """Drop the caches of jobs and attempts this daemon no longer works on."""
        held = {j.id for j in claimed}
        self._specs = {k: v for k, v in self._specs.items() if k in held}
        alive = {(k[1], k[2]) for k in live}
        self._heartbeats = {k: v for k, v in self._heartbeats.items() if k in alive}

    # -- apply -------------------------------------------------------------------------------
    @contextmanager
    def _txn(self, job_id: int) -> Iterator[tuple[Session, Job]]:
        """A write on the job, only while this daemon holds its unexpired lease (else LeaseLost).

        The job's row stays locked until commit (``FOR UPDATE``; SQLite: BEGIN IMMEDIATE), so no
        other daemon's claim commits between this check and this write.
        """
        self._attempt_cache.pop(job_id, None)  # whatever this writes, the next pass reads afresh
        self._job_cache.pop(job_id, None)
        with self.store.write() as s:
            job = s.get(Job, job_id, with_for_update=True)
            now = self.clock.now()
            if not self.leases.held(job, now):
                raise LeaseLost(job_id)
            yield s, job  # type: ignore[misc]
            job.updated_at = self.clock.now()  # type: ignore[union-attr]

    def _heartbeat(self, job_id: int, a: AttemptView) -> None:
        """Tell the agent the control host is alive (its dead-man switch), every
        ``heartbeat_every_s``: often enough for the switch, not a file write per job per pass."""
        key, t = (job_id, a.row.number), self.clock.now()
        last = self._heartbeats.get(key)
        if last is not None and (t - last).total_seconds() < heartbeat_every_s(self.settings):
            return
        try:
            self.providers[a.row.provider].runner(a.instance).heartbeat()  # type: ignore[arg-type]
            self._heartbeats[key] = t
        except (RunnerUnavailable, ProviderError):
            pass

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
                    failed = None if volume_id is None else self._start_agent(view, a, now, volume_id or None)  # type: ignore[arg-type]
                    crashpoint("agent.started")
                    if failed is not None:  # the volume cannot be mounted there: end the attempt
                        follow = volume_failed(a, failed)  # type: ignore[arg-type]
                        self._apply(view, follow, observed, now)
                        self.money.after(follow)
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
                    self._heartbeat(job_id, a)  # type: ignore[arg-type]
