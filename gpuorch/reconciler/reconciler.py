"""One reconcile pass, in three stages: claim and observe, keep or decide, flush and sweep.

Claim and observe (``observe/``): take the jobs' leases, list every provider's instances, read
the held rows and start the agents' status reads. Keep or decide, each job in claim order: kept
as it was when nothing it was decided from changed (``memo.py``), else its ``JobView`` is built
(``observe/snapshot.py``, writing nothing), what was observed is recorded (spot price moves, its
log and metrics), the money gate is read, ``decide`` (``decide/job.py``, pure) returns the actions
and ``Applier`` (``apply/applier.py``) carries them out, never calling decide again: what fails
is decided on the next pass. Flush and sweep: the pass's last batch of launches (on a bounded
pool: a hung cloud call holds only its own job), then sweeps, volumes, keys and the instance table.

Intent is recorded before every side effect (an attempt row exists before its launch call), and
every write checks, with the job's row locked, that this daemon still holds the job's unexpired
lease (``observe/leases.py``), so a restarted or second daemon never double-acts. Nothing here
sleeps: ``run_pass`` returns how soon it wants to run again. A pass costs little when nothing
changes (docs/benchmarks.md, issue 18): a claim with nothing committed reads nothing, held rows
are kept (``observe/rows.py``), agents are read in one call that says what is new, unchanged
jobs are neither viewed nor decided, and heartbeats go out every ``heartbeat_every_s``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from operator import itemgetter
from pathlib import Path
from threading import Event

from sqlmodel import Session

from gpuorch.clock import Clock, SystemClock
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.money.caps import Policy
from gpuorch.ops.crashpoints import crashpoint
from gpuorch.ops.diskfull import DiskFullLog
from gpuorch.provider.port import Instance, InstanceState, Offer, Provider
from gpuorch.reconciler.apply.applier import Applier
from gpuorch.reconciler.apply.batch_txn import BatchTxn
from gpuorch.reconciler.apply.capwatch import CapWatch
from gpuorch.reconciler.apply.launch_pool import LaunchPool
from gpuorch.reconciler.apply.launching import Launching
from gpuorch.reconciler.apply.mirror import InstanceMirror
from gpuorch.reconciler.apply.money import Money
from gpuorch.reconciler.apply.orphans import sweep_keys, sweep_orphans
from gpuorch.reconciler.apply.pulls import Pulls
from gpuorch.reconciler.apply.recording import Recording
from gpuorch.reconciler.apply.scheduled import ScheduledStops
from gpuorch.reconciler.apply.volumes import Volumes
from gpuorch.reconciler.apply.warm import Warm, alias
from gpuorch.reconciler.decide.actions import Launch
from gpuorch.reconciler.decide.job import decide
from gpuorch.reconciler.memo import Memo
from gpuorch.reconciler.observe.leases import RENEW_WHEN_LEFT, LeaseLost, Leases
from gpuorch.reconciler.observe.listing import Backoffs, CredentialAlarm, Key, OfferCache, backoff_key, list_instances
from gpuorch.reconciler.observe.rows import HeldRows, UnreadableSpec
from gpuorch.reconciler.observe.snapshot import attempt_views
from gpuorch.reconciler.observe.status_reads import Read, ReadKey, StatusReads, start_reads
from gpuorch.reconciler.observe.views import JobView, Settings, for_providers
from gpuorch.reconciler.pass_state import LAUNCH_BATCH, Pass
from gpuorch.runners.port import Runner
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus
from gpuorch.store.quarantine import one_line, quarantine_job

log = logging.getLogger("gpuorch.reconciler")
DISK_FULL = DiskFullLog(log)  # one line a minute while the disk is full, for every job and pass

__all__ = ["LeaseLost", "Reconciler", "backoff_key"]

HEARTBEAT_EVERY_S = 30.0  # at most; and at least four heartbeats per dead-man timeout
KEY_SWEEP_EVERY_S = 60.0
QUEUED_CLAIM_MIN = 2 * LAUNCH_BATCH  # queued jobs a pass claims at least (Leases.claim(queued=)): two launch batches


def heartbeat_every_s(settings: Settings) -> float:
    timeout = settings.heartbeat_timeout_s
    return min(HEARTBEAT_EVERY_S, timeout / 4) if timeout else HEARTBEAT_EVERY_S


class Reconciler:
    def __init__(self, store: Store, providers: Mapping[str, Provider], *, clock: Clock | None = None,
                 settings: Settings | None = None, owner: str | None = None, lease_s: float = 60.0,
                 backoff_s: float = 300.0, offers_ttl_s: float = 300.0, logs: LogMirror | None = None,
                 budget: Policy | None = None, home: Path | None = None, launch_workers: int = 8,
                 launch_wait_s: float = 5.0, observe_workers: int = 16, observe_wait_s: float = 5.0) -> None:
        """``home``: where the providers keep the jobs' SSH keys (``runners.keys``), deleted when
        a job finishes and swept when no live attempt owns them (None: not looked after).
        ``launch_workers`` / ``launch_wait_s``: the LaunchPool's size and how long a pass waits
        for one job's launch before going on without it. ``observe_workers`` / ``observe_wait_s``:
        the same for the agents' status reads (``StatusReads``)."""
        self.store, self.providers = store, dict(providers)
        self.clock = clock or SystemClock()
        self.settings = for_providers(settings or Settings(), self.providers)
        # host/pid/random: operators see which process holds a job; unique across restarts
        self.owner = owner or f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:6]}"
        self.lease_s, self.backoff_s, self.offers_ttl_s = lease_s, backoff_s, offers_ttl_s
        self.logs, self.home = logs, home
        self.backoffs = Backoffs(store)  # the back-offs in force, read again after a commit
        self.offers = OfferCache(self.providers, offers_ttl_s, CredentialAlarm(store, self.clock.now))
        self.leases = Leases(store, self.owner, lease_s)
        self._last_pass_at: datetime | None = None
        self.queued_limit = QUEUED_CLAIM_MIN  # queued jobs the next claim takes at most (run_pass)
        self.money = Money(store, budget or Policy(), self._txn)  # caps, sweeps, prices, metrics
        self.capwatch = CapWatch(store)  # cap.warning: a cap 80 % spent, told once per crossing
        if logs is not None:
            self.money.metrics_sink = logs.append_metrics
        self.pulls = Pulls(logs, self.money, self.clock.now)  # logs and metrics of agents that answered
        self.volumes = Volumes(store, self.providers, self._txn)  # spec volume: (docs/aws.md)
        self.mirror = InstanceMirror(store)
        self.scheduled_stops = ScheduledStops(store)  # warnings of stops announced far ahead
        self.pool = LaunchPool(launch_workers, launch_wait_s)
        self.reads = StatusReads(observe_workers, observe_wait_s, self.offers.alarm)  # an AuthError is told
        batch_txn = BatchTxn(store, self.leases, self.clock, lambda job_id: self.rows.drop(job_id))
        launching = Launching(self.providers, self._txn, self.money, self.settings, store.installation_id, backoff_s,
                              batch_txn, self.clock, batch_txn)
        recording = Recording(self.providers, self._txn, self.settings, self.volumes, store.installation_id,
                              self.offers.alarm, backoff_s)
        self.warm = Warm(store, self.providers, self._txn, self.money, launching._row, lambda: self.settings.poll_s,
                         lambda: heartbeat_every_s(self.settings))  # an idle instance's watcher hears it
        self.applier = Applier(self.providers, self._txn, self.leases, self.clock, self.money, self.volumes,
                               launching, recording, self.pool, lambda: heartbeat_every_s(self.settings), home,
                               batch_txn.held_ids, self.warm)
        self._keys_swept_at: datetime | None = None
        self._runners: list[tuple[Attempt, Runner]] = []  # the job's runners that answered (observe -> record)
        self._attempts: dict[int, list[Attempt]] = {}  # this pass's attempts, by job id
        self._batched: dict[ReadKey, Read] = {}  # this pass's status reads made in one call per provider
        self.rows = HeldRows(store, self.leases)  # job and attempt rows, parsed specs: kept across passes
        # jobs unchanged since the last pass are kept: not viewed, not decided (their pulls and heartbeats go on)
        self.memo = Memo(lambda: self.settings.boot_timeout_s, self.pulls.pull, self.applier.beat, self._worth_asking)
        self.steady = self.memo.steady  # its steady decisions (tests and benchmarks read ``skipped``)
        self._unreadable: dict[int, str] = {}  # spec text of live jobs logged as unreadable (once each)
        self._keys: dict[int, tuple[Instance, Key | None]] = {}  # list_instances' keys of the last listing

    def _current_offers(self, now: datetime) -> list[Offer]:  # tests call it
        return self.offers.current(now)
    def invalidate_offers(self) -> None:
        self.offers.invalidate()

    def _observe(self) -> tuple[dict[Key, Instance], set[str]]:
        """Instances of this installation by (provider, job, attempt), and providers listed OK."""
        return list_instances(self.providers, self.store.installation_id, self._keys, self.offers.alarm)

    def release_leases(self) -> None:
        self.leases.release()

    def _view(self, job: Job, observed: dict[Key, Instance], ok: set[str]) -> JobView:
        """The observe stage for one job (``observe/snapshot.py``). The runners that answered are
        kept for ``_record_observed`` (its log and metrics)."""
        self._runners = []
        job_id = job.id or 0
        rows = self._attempts.get(job_id)
        if rows is None:  # not loaded with this pass's batch
            rows = self.rows.load_attempts([job_id])[job_id]
        views, self._runners = attempt_views(job_id, rows, observed, ok, self._worth_asking, self.reads, self._batched)
        return JobView(job, self.rows.spec(job), views)

    def _worth_asking(self, name: str, inst: Instance | None) -> Provider | None:
        """Provider ``name``, if its runner is worth asking for an attempt's agent: only a running
        instance is worth a (possibly slow) connection, a booting one is not yet."""
        provider = self.providers.get(name)
        if inst is None or provider is None or not (inst.state == InstanceState.RUNNING or (
                not inst.state.alive and provider.capabilities.runner_outlives_instance)):
            return None
        return provider

    def _record_observed(self, view: JobView, offers: list[Offer], seen_at: datetime | None,
                         billed_at: datetime | None) -> None:
        """Apply's first step: record what observe saw (spot price moves, the log and the metrics
        of each attempt whose agent answered), before the money gate is read. ``billed_at``: when
        the billed times were checked against the cloud's record (None: a steady job, ``steady.py``)."""
        self.money.track_prices(view, offers, seen_at)
        if billed_at is not None:
            self.money.record_billing(view, billed_at)  # launch and end times from the cloud's record
        seen, self._runners = self._runners, []
        self.pulls.pull(view.job.id or 0, seen)

    # -- the pass ----------------------------------------------------------------------------
    def run_pass(self, stop: Event | None = None) -> float:
        """Reconcile every job once; return the seconds until the next pass is due. Three stages:
        claim and observe, keep or decide (each job), flush and sweep.

        Once ``stop`` is set (the daemon is shutting down) no more jobs are claimed and the jobs
        not reached yet are left alone: the pass ends after the job in hand.
        """
        if stop is not None and stop.is_set():
            return 0.0
        p = self._claim_and_observe(self.clock.now())
        try:
            if not self._keep_or_decide(p, stop):
                return 0.0  # the leases taken are released by the daemon on its way out
            self._flush(p)
        finally:
            self.applier.end_pass()
            self._attempts, self._batched, self._runners = {}, {}, []
        self._sweep(p)
        crashpoint("pass.done")
        return max(0.0, p.requeue)

    def _claim_and_observe(self, now: datetime) -> Pass:
        """Claim the jobs, then observe: observations then postdate every write of a daemon whose
        lease this pass took over (its writes need an unexpired lease; we took an expired one)."""
        self.pool.new_pass()
        self.applier.begin_pass()  # its launches are recorded a batch at a time (flush, below)
        # A launch still running now may finish after this pass's listing, leaving an attempt
        # launched whose instance the listing predates ("disappeared"): such jobs wait a pass.
        launching = self.pool.in_flight()
        for job_id in self.pool.stale():  # a background launch wrote these: read them afresh
            self.rows.drop(job_id)
        claimed = self.leases.claim(now, self._last_pass_at, known=self.rows.jobs, queued=self.queued_limit)
        ids = self.leases.ids  # the claimed jobs' ids, in order: no ORM attribute read a job
        self.rows.jobs = dict(zip(ids, claimed, strict=True))
        self._last_pass_at = now
        observed, ok = self._observe()  # before reading attempts: see orphans.py
        crashpoint("pass.observed")
        self.scheduled_stops.note(observed, self.rows.jobs, now)
        self._attempts = self.rows.held_attempts(ids)
        live = self.rows.live_keys(self._attempts)
        alias(observed, self._attempts, live)  # a leased warm instance, under its lessee's key too
        # Protection first: before the pass's launches and terminations (each a crash point), so a
        # daemon that dies mid-pass every life still sweeps what an earlier life left billing.
        sweep_orphans(self.store, self.providers, self.leases, observed, ok, now, live)
        rows = (row for i in ids if not self.pool.busy(i) for row in self._attempts.get(i, ()))  # if runners block
        self._batched, reading = start_reads(self.providers, self.reads, rows, observed, live, self._worth_asking)
        return self._new_pass(now, ids, claimed, observed, ok, live, launching | reading)

    def _new_pass(self, now: datetime, ids: list[int], claimed: list[Job], observed: dict[Key, Instance],
                  ok: set[str], live: set[Key], busy: set[int]) -> Pass:
        """The pass's offers, back-offs and settings, and its memos told a pass begins."""
        offers = self._current_offers(now)
        settings = self.settings
        if not self.offers.complete:  # a catalog is missing: "no offer" may be a blip
            settings = dataclasses.replace(settings, no_offer_retry_s=settings.poll_s)
        # Leases are renewed (in bulk) once less than RENEW_WHEN_LEFT of them is left.
        renew_at = (self.leases.soonest or min((j.lease_expires for j in claimed if j.lease_expires), default=now)) \
            - timedelta(seconds=self.lease_s * RENEW_WHEN_LEFT)
        avoid = self.backoffs.read(now, self.leases.version)  # the back-offs in force, and when the first ends
        p = Pass(now, ids, claimed, observed, ok, live, busy, offers, self.offers.index(), settings, avoid,
                 self.offers.seen_at, renew_at, self.settings.no_offer_retry_s, settings.launch_budget_s,
                 settings.launch_batch or LAUNCH_BATCH, complete=self.offers.complete,
                 backoff_until=self.backoffs.until, unchanged=self.leases.unchanged)
        self.applier.terminated = set()  # this pass's terminations; `observed` predates them
        self.money.begin_pass(observed, live, avoid)
        self.memo.begin_pass(p, self.applier.started, self._batched, self.pulls.behind, self._attempts)
        return p

    def _keep_or_decide(self, p: Pass, stop: Event | None) -> bool:
        """Each claimed job, in claim order: kept as it was (``steady.py``) or decided and applied.
        False when ``stop`` was set before the last one."""
        keep, attempts = self.memo.keep, self._attempts
        for job_id, job in self.memo.todo(p):
            if stop is not None and stop.is_set():
                return False
            out = self.pool.busy(job_id) or job_id in p.busy  # a launch or read still out
            if not out:
                try:
                    kept = keep(job_id, job, attempts.get(job_id))
                except Exception as e:  # decided the usual way instead
                    kept = self._trouble(job_id, e, "keep")
                if kept is not None:
                    p.requeue = min(p.requeue, kept)  # most jobs of a steady pass end here
                    continue
            queued = job.status == JobStatus.QUEUED and not job.cancel_requested  # a cancel is never left
            if queued and p.out_of_budget((self.clock.now() - p.now).total_seconds()):
                p.requeue, p.cut = 0.0, True  # the next pass, at once, takes the next batch
                continue
            p.considered += queued
            if (t := self.clock.now()) >= p.renew_at:
                self.leases.renew(t)
                p.renew_at = t + timedelta(seconds=self.lease_s * (1 - RENEW_WHEN_LEFT))
            if out:  # still out: leave it
                p.lower(self.settings.poll_s)
                continue
            try:
                self._one(p, job_id, job)
            finally:
                if queued:
                    p.launch_s += (self.clock.now() - t).total_seconds()
        return True

    @staticmethod
    def _trouble(job_id: int, e: Exception, what: str) -> None:
        """One job's trouble, logged (once a minute while the disk is full): it never stalls the others."""
        if not DISK_FULL.report(e, f"job {job_id}: {what}"):
            log.exception("job %s: %s failed", job_id, what)

    def _one(self, p: Pass, job_id: int, job: Job) -> None:
        """One job's keep or decide; its trouble is logged and never stalls the others."""
        try:
            self._decide(p, job)
        except LeaseLost:
            log.info("job %s: lease lost (expired or taken over); its work this pass is dropped", job.id)
        except UnreadableSpec as e:
            self._quarantine(job, str(e), p.now)
        except Exception as e:  # one job's trouble must not stall the others; the next pass retries it
            self._trouble(job_id, e, "reconcile")
            p.lower(self.settings.poll_s)

    def _decide(self, p: Pass, job: Job) -> None:
        """Observe the job, record what was observed, and decide and apply, unless its view is what
        it was when last decided (``steady.py``)."""
        view = self._view(job, p.observed, p.ok)
        billed_at = None if self.memo.billed(view) else self.clock.now()
        self._record_observed(view, p.offers, p.seen_at, billed_at)
        if (gate := self.money.gate(view, p.now)) is not None:
            view = dataclasses.replace(view, gate=gate)
            self.capwatch.check(view.job, gate)
        scoped = self.volumes.offers_for(view.spec, p.offers)  # a volume job: providers with volumes
        placing = p.index if scoped is p.offers else scoped
        context = (placing, p.avoid_key, p.settings)
        quick = (p.offers, p.seen_at) if placing is p.index and self.money.ungated(job, view.spec) else None
        if (same := self.memo.keep_viewed(view, context, p, billed_at, quick, self.applier.started)) is not None:
            self.applier.heartbeat(view, same.attempt)
            p.lower(same.requeue_after)
            return
        decision = self.memo.unplaceable(view, decide(view, p.now, placing, avoid=p.avoid, settings=p.settings),
                                         context, quick)  # no offer fits: waits on what it depends on (memo.py)
        self.applier.apply(view, decision, p.now)
        self.money.after(decision)
        self.memo.note(view, decision, context, billed_at, quick)
        if job.status == JobStatus.QUEUED and any(isinstance(a, Launch) for a in decision.actions):
            p.launched += 1
        p.lower(decision.requeue_after)

    def _flush(self, p: Pass) -> None:
        """The next claim's limit on queued jobs (Leases.claim(queued=)): twice what the budget let
        this pass decide; doubled, at once, when it left jobs out and the budget was not spent (jobs
        on hold). Then the pass's last launches; then its launches are waited for."""
        if p.cut:
            self.queued_limit = max(QUEUED_CLAIM_MIN, 2 * p.considered)
        elif self.leases.truncated:
            self.queued_limit, p.requeue = 2 * self.queued_limit, 0.0
        try:
            self.applier.flush(p.now)
        except Exception as e:  # the next pass decides the jobs again
            if not DISK_FULL.report(e, "launches"):
                log.exception("the pass's launches failed")

    def _sweep(self, p: Pass) -> None:
        """After the jobs: forget what is no longer held, finish sweeps, record finished ends, sweep
        volumes and keys nobody owns, and bring the instance table up to date."""
        self._forget(p.ids, p.live)
        self.money.finish_sweeps(p.now, self.leases.version)
        p.lower(self.warm.sweep(p.observed, p.ok, p.now, p.claimed, self.rows.spec, self.leases.version))  # keep_warm
        terminated = self.applier.terminated
        self.money.record_finished_ends(self.clock.now())
        self.volumes.sweep(p.ok, p.now)
        self._sweep_keys(p.now)
        self.mirror.update(p.observed, p.ok, terminated, p.now)

    def _quarantine(self, job: Job, reason: str, now: datetime) -> None:
        """Fail a job whose spec cannot be loaded, once (``store.quarantine``). One with an attempt
        still live is left to the orphan sweep's view of it and logged once: failing it here would
        leave its instance to nobody."""
        job_id = job.id or 0
        if any(r.status != AttemptStatus.ENDED for r in self._attempts.get(job_id, ())):
            if self._unreadable.get(job_id) != job.spec:
                self._unreadable[job_id] = job.spec
                log.error("job %s: its stored spec cannot be read (%s); it has a live attempt, so it is left "
                          "running; cancel it with `gpuorch cancel %s`", job_id, one_line(reason), job_id)
            return
        with self._txn(job_id) as (s, row):
            quarantine_job(s, row, reason, now)
        log.error("job %s: quarantined: its stored spec cannot be read (%s)", job_id, one_line(reason))

    def _forget(self, ids: list[int], live: set[Key]) -> None:
        """Drop the caches of jobs and attempts this daemon no longer works on."""
        held: set[int | None] = set(ids)
        self.rows.forget(held)
        self.pulls.forget(held)
        self.memo.forget(held)
        self.applier.forget(set(map(itemgetter(1, 2), live)))

    def _sweep_keys(self, now: datetime) -> None:
        if self.home is None or (self._keys_swept_at is not None
                                 and (now - self._keys_swept_at).total_seconds() < KEY_SWEEP_EVERY_S):
            return
        self._keys_swept_at = now
        sweep_keys(self.home, self.store)

    @contextmanager
    def _txn(self, job_id: int) -> Iterator[tuple[Session, Job]]:
        """A write on the job, only while this daemon holds its unexpired lease (else LeaseLost).

        The job's row stays locked until commit (``FOR UPDATE``; SQLite: BEGIN IMMEDIATE), so no
        other daemon's claim commits between this check and this write.
        """
        self.rows.drop(job_id)  # whatever this writes, the next pass reads afresh
        with self.store.write() as s:
            job = s.get(Job, job_id, with_for_update=True)
            now = self.clock.now()
            if not self.leases.held(job, now):
                raise LeaseLost(job_id)
            yield s, job  # type: ignore[misc]
            job.updated_at = self.clock.now()  # type: ignore[union-attr]
