"""One reconcile pass, in stages: observe (a pure snapshot) -> decide (pure) -> apply (side effects).

Per job: ``_view`` builds the job's ``JobView`` (views.py) from the store's rows, this pass's
instance listing and the runner's answer, writing nothing; a runner that is missing, not
implemented or unreachable is only "not reachable", so decide still runs (the boot timeout
fires). Then the observations are recorded (spot price moves, the job's log and metrics), the
money gate is read, ``decide`` (decide/job.py) returns the actions and ``Applier`` (apply/applier.py) carries
them out, never calling decide again: what fails is decided on the next pass. Launches run on a
bounded pool (launch_pool.py): a hung cloud call holds only its own job, which later passes
leave alone until its launch is over.

Intent is recorded before every side effect (an attempt row exists before its launch call), and
every write checks, with the job's row locked, that this daemon still holds the job's unexpired
lease (``leases.py``), so a restarted or second daemon never double-acts. Nothing here sleeps:
``run_pass`` returns how soon it wants to run again.

A pass costs little when nothing changes (docs/benchmarks.md, issue 18): a claim with nothing
committed since reads nothing (leases.py), held rows are kept (rows.py), agents are read in one
call that says what is new, and unchanged jobs are neither decided again nor viewed, but kept on
identity alone (steady.py); heartbeats go out every ``heartbeat_every_s``, not every pass.

The pass's parts, collaborators given what they need: ``observe/listing.py`` (offers, listing),
``apply/applier.py`` with ``launching.py`` and ``recording.py`` (agent progress, checkpoints, ends),
``orphans.py`` (instances and SSH keys nobody owns), ``mirror.py``, ``money.py``, ``volumes.py``.
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
from gpuorch.placement import KeyedAvoid
from gpuorch.provider.port import Instance, InstanceState, Offer, Provider
from gpuorch.reconciler.apply.applier import Applier
from gpuorch.reconciler.apply.batch_txn import BatchTxn
from gpuorch.reconciler.apply.launch_pool import LaunchPool
from gpuorch.reconciler.apply.launching import Launching
from gpuorch.reconciler.apply.mirror import InstanceMirror
from gpuorch.reconciler.apply.money import Money
from gpuorch.reconciler.apply.orphans import sweep_keys, sweep_orphans
from gpuorch.reconciler.apply.pulls import Pulls
from gpuorch.reconciler.apply.recording import Recording
from gpuorch.reconciler.apply.scheduled import ScheduledStops
from gpuorch.reconciler.apply.volumes import Volumes
from gpuorch.reconciler.decide.actions import Launch
from gpuorch.reconciler.decide.job import decide
from gpuorch.reconciler.observe.leases import RENEW_WHEN_LEFT, LeaseLost, Leases
from gpuorch.reconciler.observe.listing import Backoffs, Key, OfferCache, backoff_key, list_instances
from gpuorch.reconciler.observe.rows import HeldRows, UnreadableSpec
from gpuorch.reconciler.observe.status_reads import Read, ReadKey, StatusReads, read_status, start_reads
from gpuorch.reconciler.observe.views import AttemptView, JobView, Settings, for_providers
from gpuorch.reconciler.steady import Quiet, QuietJobs, SteadyJobs, kept_unviewed
from gpuorch.runners.port import Runner
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus
from gpuorch.store.quarantine import one_line, quarantine_job

log = logging.getLogger("gpuorch.reconciler")
DISK_FULL = DiskFullLog(log)  # one line a minute while the disk is full, for every job and pass

__all__ = ["LeaseLost", "Reconciler", "backoff_key"]

HEARTBEAT_EVERY_S = 30.0  # at most; and at least four heartbeats per dead-man timeout
KEY_SWEEP_EVERY_S = 60.0
QUEUED_CLAIM_MIN = 200  # queued jobs a pass claims at least (Leases.claim(queued=)): two launch batches


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
        self.offers = OfferCache(self.providers, offers_ttl_s)
        self.leases = Leases(store, self.owner, lease_s)
        self._last_pass_at: datetime | None = None
        self.queued_limit = QUEUED_CLAIM_MIN  # queued jobs the next claim takes at most (run_pass)
        self.money = Money(store, budget or Policy(), self._txn)  # caps, sweeps, prices, metrics
        if logs is not None:
            self.money.metrics_sink = logs.append_metrics
        self.pulls = Pulls(logs, self.money, self.clock.now)  # logs and metrics of agents that answered
        self.volumes = Volumes(store, self.providers, self._txn)  # spec volume: (docs/aws.md)
        self.mirror = InstanceMirror(store)
        self.scheduled_stops = ScheduledStops(store)  # warnings of stops announced far ahead
        self.pool = LaunchPool(launch_workers, launch_wait_s)
        self.reads = StatusReads(observe_workers, observe_wait_s)
        batch_txn = BatchTxn(store, self.leases, self.clock, lambda job_id: self.rows.drop(job_id))
        launching = Launching(self.providers, self._txn, self.money, self.settings, store.installation_id, backoff_s,
                              batch_txn, self.clock, batch_txn)
        recording = Recording(self.providers, self._txn, self.settings, self.volumes, store.installation_id)
        self.applier = Applier(self.providers, self._txn, self.leases, self.clock, self.money, self.volumes,
                               launching, recording, self.pool, lambda: heartbeat_every_s(self.settings), home,
                               batch_txn.held_ids)
        self._keys_swept_at: datetime | None = None
        self._runners: list[tuple[Attempt, Runner]] = []  # the job's runners that answered (observe -> record)
        self._attempts: dict[int, list[Attempt]] = {}  # this pass's attempts, by job id
        self._batched: dict[ReadKey, Read] = {}  # this pass's status reads made in one call per provider
        self.rows = HeldRows(store, self.leases)  # job and attempt rows, parsed specs: kept across passes
        self.steady = SteadyJobs(lambda: self.settings.boot_timeout_s)  # unchanged jobs are not decided again
        self.quiet = QuietJobs()  # and those kept unviewed, kept again on identity checks
        self._unreadable: dict[int, str] = {}  # spec text of live jobs logged as unreadable (once each)
        self._keys: dict[int, tuple[Instance, Key | None]] = {}  # list_instances' keys of the last listing

    # -- load ------------------------------------------------------------------------------
    def _current_offers(self, now: datetime) -> list[Offer]:
        return self.offers.current(now)

    def invalidate_offers(self) -> None:
        self.offers.invalidate()

    def _observe(self) -> tuple[dict[Key, Instance], set[str]]:
        """Instances of this installation by (provider, job, attempt), and providers listed OK."""
        return list_instances(self.providers, self.store.installation_id, self._keys)

    def release_leases(self) -> None:
        self.leases.release()

    def _view(self, job: Job, observed: dict[Key, Instance], ok: set[str]) -> JobView:
        """The observe stage for one job: a snapshot, with no write to the store or to files. The
        runners that answered are kept for ``_record_observed`` (its log and metrics)."""
        self._runners = []
        rows = self._attempts.get(job.id or 0)
        if rows is None:  # not loaded with this pass's batch
            rows = self.rows.load_attempts([job.id or 0])[job.id or 0]
        views = []
        for row in rows:
            if row.status == AttemptStatus.ENDED:
                views.append(AttemptView(row, observed=True))
                continue
            inst = observed.get((row.provider, job.id or 0, row.number))
            agent, reachable = None, False
            if (provider := self._worth_asking(row.provider, inst)) is not None:
                assert inst is not None
                # read off the pass (status_reads.py) if it may block; else, or not in this pass's batch, here
                key = (row.provider, row.job_id, row.number, inst.id)
                read = self.reads.take(key) if provider.runners_may_block else self._batched.get(key)
                read = read or read_status(provider.runner, inst)
                agent, reachable = read.agent, read.reachable
                if agent is not None and read.runner is not None:
                    self._runners.append((row, read.runner))
            views.append(AttemptView(row, observed=row.provider in ok, instance=inst, agent=agent, reachable=reachable))
        return JobView(job, self.rows.spec(job), views)

    def _worth_asking(self, name: str, inst: Instance | None) -> Provider | None:
        """Provider ``name``, if its runner is worth asking for an attempt's agent: only a running
        instance is worth a (possibly slow) connection, a booting one is not yet."""
        provider = self.providers.get(name)
        if inst is None or provider is None or not (
                inst.state == InstanceState.RUNNING or (not inst.state.alive and provider.runner_outlives_instance)):
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

    def _avoid(self, now: datetime) -> KeyedAvoid | None:
        return self.backoffs.read(now, self.leases.version)

    # -- the pass ----------------------------------------------------------------------------
    def run_pass(self, stop: Event | None = None) -> float:
        """Reconcile every job once; return the seconds until the next pass is due.

        Once ``stop`` is set (the daemon is shutting down) no more jobs are claimed and the jobs
        not reached yet are left alone: the pass ends after the job in hand.
        """
        if stop is not None and stop.is_set():
            return 0.0
        now = self.clock.now()
        self.pool.new_pass()
        self.applier.begin_pass()  # its launches are recorded a batch at a time (flush, below)
        # A launch still running now may finish after this pass's listing, leaving an attempt
        # launched whose instance the listing predates ("disappeared"): such jobs wait a pass.
        launching = self.pool.in_flight()
        for job_id in self.pool.stale():  # a background launch wrote these: read them afresh
            self.rows.drop(job_id)
        # Claim, then observe: observations then postdate every write of a daemon whose lease
        # this pass took over (its writes need an unexpired lease; we took an expired one).
        claimed = self.leases.claim(now, self._last_pass_at, known=self.rows.jobs, queued=self.queued_limit)
        ids = self.leases.ids  # the claimed jobs' ids, in order: no ORM attribute read a job
        self.rows.jobs = dict(zip(ids, claimed, strict=True))
        self._last_pass_at = now
        observed, ok = self._observe()  # before reading attempts: see orphans.py
        crashpoint("pass.observed")
        self.scheduled_stops.note(observed, self.rows.jobs, now)
        self._attempts = self.rows.held_attempts(ids)
        live = self.rows.live_keys(self._attempts)
        # Protection first: before the pass's launches and terminations (each a crash point), so a
        # daemon that dies mid-pass every life still sweeps what an earlier life left billing.
        sweep_orphans(self.store, self.providers, self.leases, observed, ok, now, live)
        rows = (row for i in ids if not self.pool.busy(i) for row in self._attempts.get(i, ()))  # if runners block
        self._batched, reading = start_reads(self.providers, self.reads, rows, observed, live, self._worth_asking)
        offers = self._current_offers(now)
        index = self.offers.index()  # one per catalog refresh: placements are memoised on it
        settings = self.settings
        if not self.offers.complete:  # a catalog is missing: "no offer" may be a blip
            settings = dataclasses.replace(settings, no_offer_retry_s=settings.poll_s)
        avoid = self._avoid(now)
        avoid_key = None if avoid is None else avoid.key
        seen_at = self.offers.seen_at  # when the catalog was last read (spot price moves)
        requeue = self.settings.no_offer_retry_s
        this_pass = (offers, seen_at)  # the memos' Steady.quick: one tuple shared by the pass's memos
        self.applier.terminated = set()  # this pass's terminations; `observed` predates them
        self.money.begin_pass(observed, live)
        self.steady.begin_pass(self.applier.started)  # the agent starts that went through (booting memos)
        # Leases are renewed (in bulk) once less than RENEW_WHEN_LEFT of them is left.
        renew_at = (self.leases.soonest or min((j.lease_expires for j in claimed if j.lease_expires), default=now)) \
            - timedelta(seconds=self.lease_s * RENEW_WHEN_LEFT)
        # Queued jobs launched this pass, and the time their decisions and launches took (Settings.launch_batch,
        # launch_budget_s; and the pass's age, at most twice that): at least one a pass, so a queue always drains.
        launched, launch_s, budget, most = 0, 0.0, settings.launch_budget(), settings.launch_batch
        considered, cut = 0, False  # queued jobs decided; whether the budget left some for the next pass
        self.quiet.begin_pass((index, avoid_key, settings, offers, seen_at, ok))
        quiet, memos, attempts, batched = self.quiet, self.steady, self._attempts, self._batched
        try:
            for job_id, job in zip(ids, claimed, strict=True):
                if stop is not None and stop.is_set():
                    return 0.0  # the leases taken are released by the daemon on its way out
                out = self.pool.busy(job_id) or job_id in launching or job_id in reading  # a launch or read still out
                # Kept on identity checks alone: kept unviewed last pass, every input the object it was (steady.py)
                if not out and (q := quiet.kept(job_id, job, attempts.get(job_id), memos.memo(job_id), observed,
                                                batched, now)) is not None:
                    memos.skipped += 1
                    if q.current is not None:
                        self.applier.beat(job_id, *q.current, number=q.memo.attempt, now=now)
                    requeue = min(requeue, q.memo.requeue_after)
                    continue
                quiet.drop(job_id)
                queued = job.status == JobStatus.QUEUED and not job.cancel_requested  # a cancel is never left
                if queued and launched and (cut or (most is not None and launched >= most) or launch_s >= budget
                                            or (self.clock.now() - now).total_seconds() >= 2 * budget):
                    requeue, cut = 0.0, True  # the next pass, at once, takes the next batch
                    continue
                considered += queued
                if (t := self.clock.now()) >= renew_at:
                    self.leases.renew(t)
                    renew_at = t + timedelta(seconds=self.lease_s * (1 - RENEW_WHEN_LEFT))
                if out:  # still out: leave it
                    requeue = min(requeue, self.settings.poll_s)
                    continue
                try:
                    # Kept without a view: a running job whose every input is the object it was (steady.py)
                    memo = memos.held(job_id, job, (index, avoid_key, settings), offers, seen_at, now)
                    if memo is not None and (kept := kept_unviewed(memo, job_id, attempts.get(job_id), observed, ok,
                                                                   self._worth_asking, batched,
                                                                   job_id in self.pulls.behind)):
                        runners, current, checks = kept
                        memos.skipped += 1
                        if runners:  # as _record_observed: prices and billing unchanged
                            self.pulls.pull(job_id, runners)
                        else:  # nothing new: the next pass may keep it on identity alone
                            quiet.note(job_id, Quiet(job, attempts.get(job_id), memo, checks, current))
                        if current is not None:
                            self.applier.beat(job_id, *current, number=memo.attempt, now=now)
                        requeue = min(requeue, memo.requeue_after)
                        continue
                    view = self._view(job, observed, ok)
                    billed_at = None if self.steady.billed(view) else self.clock.now()
                    self._record_observed(view, offers, seen_at, billed_at)
                    if (gate := self.money.gate(view, now)) is not None:
                        view = dataclasses.replace(view, gate=gate)
                    scoped = self.volumes.offers_for(view.spec, offers)  # a volume job: providers with volumes
                    placing = index if scoped is offers else scoped
                    context = (placing, avoid_key, settings)
                    quick = this_pass if placing is index and self.money.ungated(job, view.spec) else None
                    if (same := self.steady.unchanged(view, context, now, self.applier.started)) is not None:
                        self.steady.renew(view, same, billed_at, quick)
                        self.applier.heartbeat(view, same.attempt)
                        requeue = min(requeue, same.requeue_after)
                        continue
                    decision = decide(view, now, placing, avoid=avoid, settings=settings)
                    self.applier.apply(view, decision, now)
                    self.money.after(decision)
                    self.steady.note(view, decision, context, billed_at, quick)
                    if job.status == JobStatus.QUEUED and any(isinstance(a, Launch) for a in decision.actions):
                        launched += 1
                    requeue = min(requeue, decision.requeue_after)
                except LeaseLost:
                    log.info("job %s: lease lost (expired or taken over); its work this pass is dropped", job.id)
                except UnreadableSpec as e:
                    self._quarantine(job, str(e), now)
                except Exception as e:  # one job's trouble must not stall the others; the next pass retries it
                    if not DISK_FULL.report(e, f"job {job.id}: reconcile"):
                        log.exception("job %s: reconcile failed", job.id)
                    requeue = min(requeue, self.settings.poll_s)
                finally:
                    if queued:
                        launch_s += (self.clock.now() - t).total_seconds()
            # The next claim's limit on queued jobs (Leases.claim(queued=)): twice what the budget let this pass
            # decide; doubled, at once, when it left jobs out and the budget was not spent (jobs on hold).
            if cut:
                self.queued_limit = max(QUEUED_CLAIM_MIN, 2 * considered)
            elif self.leases.truncated:
                self.queued_limit, requeue = 2 * self.queued_limit, 0.0
            try:
                self.applier.flush(now)  # the pass's last launches; then its launches are waited for
            except Exception as e:  # the next pass decides the jobs again
                if not DISK_FULL.report(e, "launches"):
                    log.exception("the pass's launches failed")
        finally:
            self.applier.end_pass()
            self._attempts, self._batched, self._runners = {}, {}, []
        self._forget(ids, live)
        self.money.finish_sweeps(now, self.leases.version)
        terminated = self.applier.terminated
        self.money.record_finished_ends(self.clock.now())
        self.volumes.sweep(ok, now)
        self._sweep_keys(now)
        self.mirror.update(observed, ok, terminated, now)
        crashpoint("pass.done")
        return max(0.0, requeue)

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
        self.steady.forget(held)
        self.quiet.forget(held)
        self.applier.forget(set(map(itemgetter(1, 2), live)))

    def _sweep_keys(self, now: datetime) -> None:
        if self.home is None or (self._keys_swept_at is not None
                                 and (now - self._keys_swept_at).total_seconds() < KEY_SWEEP_EVERY_S):
            return
        self._keys_swept_at = now
        sweep_keys(self.home, self.store)

    # -- apply -------------------------------------------------------------------------------
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
