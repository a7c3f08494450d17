"""The apply stage: carry out one job's decision. Side effects, each guarded by the job's lease.

No re-entry into decide: an action that fails is recorded (an event, the attempt's
``start_error``, a launch retry) or logged and decided on the NEXT pass, which observes its
result. Launches run on the ``LaunchPool`` (a hung cloud call holds only its own job).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

from gpuorch.clock import Clock
from gpuorch.errors import ProviderError
from gpuorch.jobs import events
from gpuorch.money.record import billed_end, reported_end
from gpuorch.ops.crashpoints import crashpoint
from gpuorch.provider.port import Provider
from gpuorch.reconciler import actions as A
from gpuorch.reconciler.launch_pool import LaunchPool
from gpuorch.reconciler.launching import Launching
from gpuorch.reconciler.leases import Leases
from gpuorch.reconciler.money import Money, Txn
from gpuorch.reconciler.recording import Recording
from gpuorch.reconciler.views import AttemptView, JobView
from gpuorch.reconciler.volumes import Volumes
from gpuorch.runners.keys import delete_job_keys
from gpuorch.runners.port import RunnerUnavailable
from gpuorch.store.models import Attempt, AttemptStatus, JobStatus, TerminationReason

log = logging.getLogger("gpuorch.reconciler")


class Applier:
    def __init__(self, providers: Mapping[str, Provider], txn: Txn, leases: Leases, clock: Clock, money: Money,
                 volumes: Volumes, launching: Launching, recording: Recording, pool: LaunchPool,
                 heartbeat_every_s: Callable[[], float], home: Path | None = None) -> None:
        self.providers, self._txn, self.leases, self.clock = providers, txn, leases, clock
        self.money, self.volumes, self.launching, self.recording, self.pool = money, volumes, launching, recording, pool
        self.heartbeat_every_s, self.home = heartbeat_every_s, home
        self.terminated: set[str] = set()  # this pass's terminations (the listing predates them)
        self.terminated_at: dict[str, datetime] = {}  # instance id -> when this daemon's terminate call returned
        self.heartbeats: dict[tuple[int, int], datetime] = {}  # (job, attempt) -> last heartbeat sent

    def _heartbeat(self, job_id: int, a: AttemptView) -> None:
        """Tell the agent the control host is alive (its dead-man switch), every
        ``heartbeat_every_s``: often enough for the switch, not a file write per job per pass."""
        key, t = (job_id, a.row.number), self.clock.now()
        last = self.heartbeats.get(key)
        if last is not None and (t - last).total_seconds() < self.heartbeat_every_s():
            return
        try:
            self.providers[a.row.provider].runner(a.instance).heartbeat()  # type: ignore[arg-type]
            self.heartbeats[key] = t
        except (RunnerUnavailable, ProviderError, NotImplementedError, OSError):
            pass

    def heartbeat(self, view: JobView, attempt: int) -> None:
        """The heartbeat of a job whose steady decision is not made again (steady.py), when due."""
        for a in reversed(view.attempts):  # the current attempt: the last one
            if a.row.number == attempt:
                self._heartbeat(view.job.id or 0, a)
                return

    def apply(self, view: JobView, d: A.Decision, now: datetime) -> None:
        job_id = view.job.id or 0
        by_number = {a.row.number: a for a in view.attempts}
        for action in d.actions:
            self._one(view, job_id, action, by_number.get(getattr(action, "attempt", -1)), now)

    def _one(self, view: JobView, job_id: int, action: A.Action, a: AttemptView | None, now: datetime) -> None:  # noqa: C901
        """One action; ``a``: the attempt it is about (None for job-wide ones)."""
        match action:
            case A.Launch():
                first = self.launching.intent(view, action, 0, now)  # intent here; the cloud call on the pool
                if first[1] is None:  # no candidate admitted: nothing to call
                    self.launching.launch(view, action, now, first)
                else:
                    self.pool.run(job_id, lambda: self.launching.launch(view, action, now, first))
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
                self.leases.check(job_id, self.clock.now())
                vol = view.spec.volume
                volume_id = "" if vol is None else self.volumes.attach(job_id, vol.size, a.row, a.instance.id, now,  # type: ignore[union-attr]
                                                                       vol.type)
                if volume_id is not None:
                    self.recording.start_agent(view, a, now, volume_id or None)  # type: ignore[arg-type]
                crashpoint("agent.started")
            case A.Progress():
                self.recording.progress(job_id, a, action.status, now)  # type: ignore[arg-type]
                crashpoint("progress.recorded")
            case A.Drain():
                self._drain(job_id, a, action, now)  # type: ignore[arg-type]
                crashpoint("drain.recorded")
            case A.End():
                # Billed until the cloud's end time, else our terminate call's, else this pass's look.
                row = a.row  # type: ignore[union-attr]
                stop = self.terminated_at.pop(row.instance_id, None) if row.instance_id else None
                until = billed_end(row.launched_at, reported_end(a.instance) or stop or now,  # type: ignore[union-attr]
                                   self.clock.now())
                self.recording.end(view, a, action, now, until)  # type: ignore[arg-type]
                crashpoint("end.recorded")
            case A.Terminate():
                self.leases.check(job_id, self.clock.now())
                try:
                    self.providers[a.row.provider].terminate(action.instance_id)  # type: ignore[union-attr]
                    self.terminated.add(action.instance_id)
                    if len(self.terminated_at) > 10_000:  # ids whose End never came (a crash, a lost lease)
                        self.terminated_at.clear()
                    self.terminated_at[action.instance_id] = self.clock.now()
                    crashpoint("terminate.called")
                except ProviderError as e:
                    log.warning("terminate %s failed (the orphan sweep retries): %s", action.instance_id, e)
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
