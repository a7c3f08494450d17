"""The apply stage: carry out one job's decision. Side effects, each guarded by the job's lease.

No re-entry into decide: an action that fails is recorded (an event, the attempt's
``start_error``, a launch retry) or logged and decided on the NEXT pass, which observes its
result. Launches run on the ``LaunchPool`` (a hung cloud call holds only its own job).

Within a pass (``begin_pass`` .. ``flush``) launches and agent starts are collected and carried
out a batch at a time (``LAUNCH_BATCH``): the launches' intents in one write transaction, the
starts after one lease check for all of them. An agent whose runner's ``start`` returned is not
started again by this daemon (a runner's start does nothing once it has).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime, timedelta
from pathlib import Path

from gpuorch.clock import Clock
from gpuorch.errors import ProviderError
from gpuorch.jobs import events
from gpuorch.money.record import billed_end, reported_end
from gpuorch.ops.crashpoints import crashpoint
from gpuorch.provider.port import Instance, Provider
from gpuorch.reconciler.apply.launch_pool import LaunchPool
from gpuorch.reconciler.apply.launching import First, Launched, Launching
from gpuorch.reconciler.apply.money import Money, Txn
from gpuorch.reconciler.apply.recording import Recording
from gpuorch.reconciler.apply.volumes import Volumes
from gpuorch.reconciler.apply.warm import Warm
from gpuorch.reconciler.decide import actions as A
from gpuorch.reconciler.observe.leases import LeaseLost, Leases
from gpuorch.reconciler.observe.views import AttemptView, JobView
from gpuorch.runners.keys import delete_job_keys
from gpuorch.runners.port import RunnerUnavailable
from gpuorch.store.models import Attempt, AttemptStatus, JobStatus, TerminationReason

log = logging.getLogger("gpuorch.reconciler")
# Queued launches whose intents one write transaction records (100 -> 250: a 10,000-job drain on
# PostgreSQL waits on a third fewer commits, 12.1-12.3 -> 11.3-11.5 s; 500 gained nothing more).
LAUNCH_BATCH = 250
LAUNCHES_PER_WORKER = 25  # launches a pool worker makes, then records in one transaction, at least


class Applier:
    def __init__(self, providers: Mapping[str, Provider], txn: Txn, leases: Leases, clock: Clock, money: Money,
                 volumes: Volumes, launching: Launching, recording: Recording, pool: LaunchPool,
                 heartbeat_every_s: Callable[[], float], home: Path | None = None,
                 held_ids: Callable[[Sequence[int], datetime], set[int]] | None = None,
                 warm: Warm | None = None) -> None:
        self.providers, self._txn, self.leases, self.clock = providers, txn, leases, clock
        self.money, self.volumes, self.launching, self.recording, self.pool = money, volumes, launching, recording, pool
        self.heartbeat_every_s, self.home = heartbeat_every_s, home
        self.warm = warm  # the warm pool (spec keep_warm): a launch tries it first; an End may hand over to it
        self._beat_every = timedelta(seconds=heartbeat_every_s())
        self.held_ids = held_ids or (lambda ids, t: {i for i in ids if self._holds(i, t)})
        self.terminated: set[str] = set()  # this pass's terminations (the listing predates them)
        self.terminated_at: dict[str, datetime] = {}  # instance id -> when this daemon's terminate call returned
        self.heartbeats: dict[tuple[int, int], datetime] = {}  # (job, attempt) -> last heartbeat sent
        self._batch: list[tuple[JobView, A.Launch]] | None = None  # the pass's launches not yet recorded
        self._started: list[tuple[list[int], Future[object]]] = []  # the pass's launch batches on the pool
        self._starts: list[tuple[JobView, AttemptView]] = []  # the pass's agent starts not yet made
        self._renew_lock = threading.Lock()
        self._renewed_at: datetime | None = None  # the leases' last renewal (a pass's slow launches)
        self.started: set[tuple[int, int, str]] = set()  # (job, attempt, instance) whose runner started its agent
        self._alive: set[tuple[int, int]] | None = None  # the live attempts ``forget`` last pruned ``started`` by

    def _holds(self, job_id: int, now: datetime) -> bool:
        try:
            self.leases.check(job_id, now)
            return True
        except LeaseLost:
            return False

    def begin_pass(self) -> None:
        """From now until ``flush``, launches are recorded and made a batch at a time."""
        self._renewed_at = self.clock.now()  # the claim left every lease at least 2/3 of its length
        self._beat_every = timedelta(seconds=self.heartbeat_every_s())  # read once a pass, not a job
        self._batch, self._started, self._starts = [], [], []

    def flush(self, now: datetime) -> None:
        """Record the pass's last launches, then wait for the pass's launches together (at most
        the launch pool's wait); the first error of one that ended is raised."""
        if self._starts:
            self._start_batch(now)
        if self._batch:
            self._launch_batch(now)
        started, self._started = self._started, []
        self.pool.wait(started)

    def _start_agent(self, view: JobView, a: AttemptView, now: datetime) -> None:
        job_id = view.job.id or 0
        vol = view.spec.volume
        volume_id = "" if vol is None else self.volumes.attach(job_id, vol.size, a.row, a.instance.id, now,  # type: ignore[union-attr]
                                                               vol.type)
        if volume_id is not None and self.recording.start_agent(view, a, now, volume_id or None):
            self.started.add((job_id, a.row.number, a.instance.id))  # type: ignore[union-attr]
        crashpoint("agent.started")

    def _start_batch(self, now: datetime) -> None:
        """The agent starts the pass collected, after one lease check for all of them (a read)."""
        starts, self._starts = self._starts, []
        held = self.held_ids([view.job.id or 0 for view, _ in starts], self.clock.now())
        for view, a in starts:
            if view.job.id not in held:
                log.info("job %s: lease lost (expired or taken over); its agent start is dropped", view.job.id)
                continue
            try:
                self._start_agent(view, a, now)
            except LeaseLost:
                log.info("job %s: lease lost (expired or taken over); its agent start is dropped", view.job.id)
            except Exception:  # one job's trouble must not stall the others; the next pass retries it
                log.exception("job %s: agent start failed", view.job.id)

    def forget(self, alive: set[tuple[int, int]]) -> None:
        """Drop what is kept of attempts that are no longer live (``alive``: (job, attempt))."""
        if not self.heartbeats.keys() <= alive:  # a C subset test on most passes: nothing left
            self.heartbeats = {k: v for k, v in self.heartbeats.items() if k in alive}
        # A start is noted for an attempt live at its pass's start: while no attempt live at the
        # last prune has ended since (a C superset test), every start noted is still live.
        if self.started and not (self._alive is not None and alive >= self._alive):
            self.started = {k for k in self.started if k[:2] in alive}
        self._alive = alive

    def end_pass(self) -> None:
        """Launches not recorded by now are dropped (a pass that stopped early): nothing was
        recorded or called for them, and the next pass decides them again."""
        started, self._batch, self._started, self._starts = self._started, None, [], []
        try:  # launches started and not waited for: their jobs stay busy until those end
            self.pool.wait(started, block=False)
        except Exception:
            log.exception("a launch batch of this pass failed")

    def _launch_batch(self, now: datetime) -> None:
        """The batch's intents in one transaction (``Launching.intents``), then its cloud calls on
        the pool, a share per worker (those that cannot block: one share, made on the pass's
        thread), each share's launches recorded in one transaction."""
        batch, self._batch = self._batch or [], []
        go = []
        for view, action, first in self.launching.intents(batch, now):
            if first[1] is not None:
                go.append((view, action, first))
                continue
            try:  # no candidate admitted: nothing to call; the job says why
                self.launching.launch(view, action, now, first)
            except LeaseLost:
                log.info("job %s: lease lost (expired or taken over); its work this pass is dropped", view.job.id)
        # Launches that may block share the pool's threads; the rest, one share, are made here.
        remote: list[tuple[JobView, A.Launch, First]] = []
        local: list[tuple[JobView, A.Launch, First]] = []
        for g in go:
            (remote if self._may_block(g[2][1].provider) else local).append(g)  # type: ignore[union-attr]
        share = max(LAUNCHES_PER_WORKER, -(-len(remote) // self.pool.workers))
        parts = [(remote[k:k + share], True) for k in range(0, len(remote), share)]
        if local:
            parts.append((local, False))
        for part, may_block in parts:
            ids = [v.job.id or 0 for v, _, _ in part]
            self._started.append((ids, self.pool.start(ids, lambda part=part: self._launch_share(part, now),  # type: ignore[misc]
                                                       may_block)))

    def _may_block(self, provider: str) -> bool:
        p = self.providers.get(provider)
        return p is None or p.capabilities.launches_may_block

    def _renew_when_due(self) -> None:
        """Slow launches must not outlive the leases of the jobs they are for: renewed (in bulk)
        every third of a lease, as the pass does between jobs."""
        t = self.clock.now()
        with self._renew_lock:
            if self._renewed_at is not None and (t - self._renewed_at).total_seconds() < self.leases.lease_s / 3:
                return
            self._renewed_at = t
        self.leases.renew(t)

    def _launch_share(self, part: list[tuple[JobView, A.Launch, First]], now: datetime) -> None:
        launched: Launched = []
        for view, action, first in part:
            self._renew_when_due()
            try:
                self.launching.launch(view, action, now, first, launched)
            except LeaseLost:
                log.info("job %s: lease lost (expired or taken over); its launch is dropped", view.job.id)
            except Exception:  # one job's trouble must not stall the others; the next pass retries it
                log.exception("job %s: launch failed", view.job.id)
        self._renew_when_due()
        self.launching.record_launched(launched, now)

    def _heartbeat(self, job_id: int, a: AttemptView) -> None:
        self.beat(job_id, a.row, a.instance)

    def beat(self, job_id: int, row: Attempt, instance: Instance | None, number: int | None = None,
             now: datetime | None = None) -> None:
        """Tell the agent the control host is alive (its dead-man switch), every
        ``heartbeat_every_s``: often enough for the switch, not a file write per job per pass.
        ``number``: the row's, known without an ORM read; ``now``: the pass's time (else the clock's)."""
        key, t = (job_id, row.number if number is None else number), self.clock.now() if now is None else now
        last = self.heartbeats.get(key)
        if last is not None and t - last < self._beat_every:
            return
        try:
            runner = self.providers[row.provider].runner(instance)  # type: ignore[arg-type]
            # ``instance`` is this pass's listing's: alive there, a local runner need not read its record again
            alive = instance is not None and instance.state.alive
            if alive and runner.capabilities.listed_heartbeat:
                runner.listed_heartbeat()
            else:
                runner.heartbeat()
            self.heartbeats[key] = t
        except (RunnerUnavailable, ProviderError, NotImplementedError, OSError):
            pass

    def heartbeat(self, view: JobView, attempt: int | None) -> None:
        """The heartbeat of a job whose steady decision is not made again (steady.py), when due
        (None: a booting attempt's, whose agent never answered: none)."""
        for a in reversed(view.attempts):  # the current attempt: the last one
            if a.row.number == attempt:
                self._heartbeat(view.job.id or 0, a)
                return

    def apply(self, view: JobView, d: A.Decision, now: datetime) -> None:
        job_id = view.job.id or 0
        by_number = {a.row.number: a for a in view.attempts}
        for action in d.actions:
            self._one(view, job_id, action, by_number.get(getattr(action, "attempt", -1)), now)

    def _one(self, view: JobView, job_id: int, action: A.Action, a: AttemptView | None, now: datetime) -> None:
        """One action; ``a``: the attempt it is about (None for job-wide ones)."""
        match action:
            # In a pass: a first launch is recorded with the pass's other launches, unless caps apply
            # to the job (the next job's gate must see this one's attempt, as it did when each launch
            # came at once). A replacement goes at once: its job is losing time, and the batch would
            # wait for the rest of the pass (~0.05 s at 1,000 jobs, docs/benchmarks.md, issue 11).
            case A.Launch():
                self._launch(view, job_id, action, now)
            case A.Relaunch():
                self.leases.check(job_id, self.clock.now())
                row = a.row  # type: ignore[union-attr]
                self.pool.run(job_id, lambda: self.launching.launch_attempt(view, row, now))
            case A.Adopt():
                with self._txn(job_id) as (s, _):
                    row = s.get(Attempt, a.row.id)  # type: ignore[union-attr]
                    row.status, row.instance_id, row.launched_at = AttemptStatus.LAUNCHED, action.instance.id, now  # type: ignore[union-attr]
                    events.record(s, now, "adopted", f"found instance {action.instance.id} already launched",
                                  job_id=job_id, attempt=row.number)  # type: ignore[union-attr]
            case A.StartAgent():
                self._start(view, job_id, a, now)  # type: ignore[arg-type]
            case A.Progress():
                self.recording.progress(job_id, a, action.status, now)  # type: ignore[arg-type]
                crashpoint("progress.recorded")
            case A.Drain():
                self._drain(job_id, a, action, now)  # type: ignore[arg-type]
                crashpoint("drain.recorded")
            case A.End():
                self._end(view, a, action, now)  # type: ignore[arg-type]
            case A.Terminate() | A.KeepWarm():
                self._terminate_or_keep(view, job_id, a, action, now)  # type: ignore[arg-type]
            case A.SetJob():
                self._set_job(view, action, now)
            case A.Note():
                with self._txn(job_id) as (s, _):
                    events.record(s, now, action.kind, action.message, job_id=job_id, attempt=action.attempt,
                                  **action.data)
            case A.StopCleanly():
                self.money.stop_cleanly(self.providers[a.row.provider], view, a, action, now)  # type: ignore[union-attr,arg-type]
            case A.Heartbeat():
                self._heartbeat(job_id, a)  # type: ignore[arg-type]

    def _launch(self, view: JobView, job_id: int, action: A.Launch, now: datetime) -> None:
        # In a pass: a first launch is recorded with the pass's other launches, unless caps apply
        # to the job (the next job's gate must see this one's attempt, as it did when each launch
        # came at once). A replacement goes at once: its job is losing time, and the batch would
        # wait for the rest of the pass (~0.05 s at 1,000 jobs, docs/benchmarks.md, issue 11).
        if self.warm is not None and self.warm.reuse(view, action, now):
            return  # a warm instance runs it (spec keep_warm): no launch
        if self._batch is not None and view.gate is None and not view.attempts:
            self._batch.append((view, action))
            if len(self._batch) >= LAUNCH_BATCH:
                self._launch_batch(now)
            return
        first = self.launching.intent(view, action, 0, now)  # intent here; the cloud call on the pool
        if first[1] is None:  # no candidate admitted: nothing to call
            self.launching.launch(view, action, now, first)
        else:
            self.pool.run(job_id, lambda: self.launching.launch(view, action, now, first))

    def _start(self, view: JobView, job_id: int, a: AttemptView, now: datetime) -> None:
        if (job_id, a.row.number, a.instance.id) in self.started:  # type: ignore[union-attr]
            return  # its runner started it: a runner's start does nothing once it has (Runner.start)
        if self._batch is not None:  # in a pass: one lease check for the pass's starts
            self._starts.append((view, a))
            if len(self._starts) >= LAUNCH_BATCH:
                self._start_batch(now)
            return
        self.leases.check(job_id, self.clock.now())
        self._start_agent(view, a, now)

    def _end(self, view: JobView, a: AttemptView, action: A.End, now: datetime) -> None:
        # Billed until the cloud's end time, else our terminate call's, else this pass's look.
        row = a.row
        stop = self.terminated_at.pop(row.instance_id, None) if row.instance_id else None
        until = billed_end(row.launched_at, reported_end(a.instance) or stop or now, self.clock.now())
        self.recording.end(view, a, action, now, until)
        crashpoint("end.recorded")

    def _terminate_or_keep(self, view: JobView, job_id: int, a: AttemptView, action: A.Terminate | A.KeepWarm,
                           now: datetime) -> None:
        """A Terminate, or a KeepWarm (after the attempt's End): the instance goes to the warm pool
        (``apply/warm.py``), or is terminated when it cannot."""
        if isinstance(action, A.KeepWarm):
            if self.warm is not None and self.warm.keep(view, a, action, now):
                return
            action = A.Terminate(action.attempt, action.instance_id)
        self._terminate(job_id, a, action)

    def _terminate(self, job_id: int, a: AttemptView, action: A.Terminate) -> None:
        self.leases.check(job_id, self.clock.now())
        try:
            self.providers[a.row.provider].terminate(action.instance_id)
            self.terminated.add(action.instance_id)
            if len(self.terminated_at) > 10_000:  # ids whose End never came (a crash, a lost lease)
                self.terminated_at.clear()
            self.terminated_at[action.instance_id] = self.clock.now()
            crashpoint("terminate.called")
        except ProviderError as e:
            log.warning("terminate %s failed (the orphan sweep retries): %s", action.instance_id, e)

    def _drain(self, job_id: int, a: AttemptView, action: A.Drain, now: datetime) -> None:
        with self._txn(job_id) as (s, job):
            row = s.get(Attempt, a.row.id)
            row.status, row.reason = AttemptStatus.DRAINING, TerminationReason.PREEMPTED  # type: ignore[union-attr]
            row.notice_at, row.drain_until = action.notice_at, action.until  # type: ignore[union-attr]
            job.preemptions += 1
            job.status, job.message = JobStatus.RECOVERING, f"preemption notice on attempt {a.row.number}"
            left = (action.until - now).total_seconds()
            events.record(s, now, "notice", f"preemption notice: {a.row.instance_id} reclaimed in {left:.0f}s; "
                          "final checkpoint requested, replacement requested now", job_id=job_id, attempt=a.row.number)

    def _set_job(self, view: JobView, action: A.SetJob, now: datetime) -> None:
        job_id = view.job.id or 0
        with self._txn(job_id) as (s, job):
            if job.status != action.status or job.message != action.message:
                if action.status != job.status:
                    events.record(s, now, action.status.value, action.message or action.status.value, job_id=job_id)
                job.status, job.message = action.status, action.message
            job.not_before = action.not_before
            if action.finished:
                job.finished_at = now
        if action.finished and view.spec.volume is not None:
            self.volumes.release(job_id, now)
        if action.finished and self.home is not None:  # its instances are gone: nobody logs in again
            delete_job_keys(self.home, job_id)
