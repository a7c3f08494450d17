"""Recording what the agents report and how attempts end: the agent's start, progress
(running, restored, new durable checkpoints), and the end of an attempt with its lost work.

A collaborator of the apply stage, given the providers, the lease-checked ``txn``, the settings
and the volumes. Only what changed is written: most polls of a running job write nothing. An
agent that cannot start for good (its volume, or a runner's ``PermanentError``: a workdir that cannot
be copied) is recorded as the attempt's ``start_error``; the next pass's decide ends the attempt
(``attempt_steps.start_failed``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from sqlmodel import Session, col, select

from gpuorch.agent.limits import bounded_result
from gpuorch.agent.protocol import AgentStatus
from gpuorch.errors import AuthError, PermanentError, ProviderError
from gpuorch.jobs import events
from gpuorch.provider.port import Provider
from gpuorch.reconciler.apply import refusals
from gpuorch.reconciler.apply.agent_config import agent_config, recorded_checkpoints, with_registry_login
from gpuorch.reconciler.apply.launching import back_off
from gpuorch.reconciler.apply.money import Txn
from gpuorch.reconciler.apply.volumes import Volumes
from gpuorch.reconciler.decide import actions as A
from gpuorch.reconciler.observe.credentials import CredentialAlarm
from gpuorch.reconciler.observe.listing import backoff_key
from gpuorch.reconciler.observe.views import AttemptView, JobView, Settings
from gpuorch.runners.port import RunnerUnavailable, VolumeMountFailed, VolumeNotReady
from gpuorch.store.models import Attempt, AttemptStatus, Backoff, Checkpoint, Job, JobStatus, TerminationReason

log = logging.getLogger("gpuorch.reconciler")


class Recording:
    def __init__(self, providers: Mapping[str, Provider], txn: Txn, settings: Settings, volumes: Volumes,
                 installation: str, alarm: CredentialAlarm | None = None, backoff_s: float = 300.0) -> None:
        self.providers, self._txn, self.settings, self.volumes = providers, txn, settings, volumes
        self.backoff_s = backoff_s  # the daemon's: how long an attempt that found no capacity backs its class off
        self.installation = installation  # the store's: names every job's checkpoint prefix
        self.alarm = alarm  # told of a runner refused its credentials (provider.credentials_failed)

    def start_agent(self, view: JobView, a: AttemptView, now: datetime, volume_id: str | None = None) -> bool:
        """Start the agent (idempotent; retried next pass while the runner is not ready); True if
        the runner started it (or had: its ``start`` returned). When the attempt cannot go on
        because its volume cannot be mounted (the runner said so, or its device is still not
        there ``volume_wait_s`` after the attach) or the runner raised ``PermanentError`` (a
        workdir that cannot be copied), record why as its ``start_error``: the next pass's
        decide ends it (``attempt_steps.start_failed``)."""
        failed = self._start(view, a, now, volume_id)
        if failed:
            with self._txn(view.job.id or 0) as (s, _):
                r = s.get(Attempt, a.row.id)
                if r is not None and r.start_error is None:
                    r.start_error = failed
        return failed == ""

    def _start(self, view: JobView, a: AttemptView, now: datetime, volume_id: str | None) -> str | None:
        """Why the agent cannot start for good; "" if it started; None if not yet."""
        pred_deadline = None
        if a.row.predecessor is not None:
            pred = next((p.row for p in view.attempts if p.row.number == a.row.predecessor), None)
            if pred is not None and pred.drain_until is not None:
                pred_deadline = pred.drain_until.timestamp()
        legacy = None
        if view.job.checkpoint_prefix and view.spec.checkpoint:  # stored before namespacing: its old checkpoints
            with self._txn(view.job.id or 0) as (s, _):
                legacy = recorded_checkpoints(s, view.job.id or 0)
        cfg = agent_config(view.job, view.spec, a.row, predecessor_deadline=pred_deadline,
                           heartbeat_timeout_s=self.settings.heartbeat_timeout_s, volume_id=volume_id,
                           installation=self.installation, legacy_checkpoints=legacy)
        cfg = with_registry_login(cfg, self.providers[a.row.provider])
        workdir = Path(view.spec.workdir) if view.spec.workdir else None
        try:
            self.providers[a.row.provider].runner(a.instance).start(cfg, workdir)  # type: ignore[arg-type]
            return ""
        except VolumeMountFailed as e:
            return str(e) or "the volume cannot be mounted"
        except AuthError as e:  # a person can mend credentials before the boot timeout: not the attempt's fault
            log.warning("job %s attempt %s: the runner cannot authenticate: %s", view.job.id, a.row.number, e)
            if self.alarm is not None:
                self.alarm.refused(a.row.provider, "starting the agent", e)
        except PermanentError as e:  # the runner says trying again will not help (a workdir that cannot be copied)
            return " ".join(str(e).split()) or f"the runner cannot start the agent ({e.code or 'no reason given'})"
        except VolumeNotReady as e:
            waited = (now - (a.row.volume_attached_at or now)).total_seconds()
            if waited >= self.settings.volume_wait_s:
                return (f"{e} (still none {waited:.0f}s after the attach; "
                        f"volume_wait_s is {self.settings.volume_wait_s:g})")
            log.info("job %s attempt %s: volume not ready %.0fs after the attach: %s", view.job.id, a.row.number,
                     waited, e)
        except (RunnerUnavailable, ProviderError, NotImplementedError, OSError) as e:
            log.info("job %s attempt %s: runner not ready: %s", view.job.id, a.row.number, e)
        return None

    def progress(self, job_id: int, a: AttemptView, st: AgentStatus, now: datetime) -> None:
        """Write only what changed: most polls of a running job change nothing."""
        row = a.row
        became_running = row.status == AttemptStatus.LAUNCHED and st.state != "starting"
        new_ckpt = bool(st.uploaded) and st.uploaded[-1] != row.last_checkpoint
        # The agent may be seen first while still restoring: what it resumed from comes later.
        restored = not became_running and st.restored_from is not None and row.resumed_from is None
        refused = refusals.pending(row, st)
        if not (became_running or new_ckpt or restored or refused):
            return
        with self._txn(job_id) as (s, job):
            r = s.get(Attempt, row.id)
            assert r is not None  # the lease is ours: nobody deletes attempt rows
            if restored:
                r.resumed_from = st.restored_from
                events.record(s, now, "restored", f"resumed from checkpoint {st.restored_from}", job_id=job_id,
                              attempt=row.number)
            if became_running:
                r.status, r.started_at, r.resumed_from = AttemptStatus.RUNNING, now, st.restored_from
                job.status, job.message = JobStatus.RUNNING, None
                how = f"resumed from checkpoint {st.restored_from}" if st.restored_from else "started fresh"
                events.record(s, now, "running", f"agent up on {r.instance_id}, {how}", job_id=job_id,
                              attempt=row.number)
            if new_ckpt:
                self._record_checkpoints(s, job_id, r, st, now)
            if refused:  # after the running message, which it amends
                refusals.record(s, job, r, st, now)

    def _record_checkpoints(self, s: Session, job_id: int, r: Attempt, st: AgentStatus, now: datetime) -> None:
        known = set(s.exec(select(Checkpoint.name).where(Checkpoint.job_id == job_id)))
        if st.final_checkpoint and st.final_checkpoint not in known:
            # One final per attempt, the newest: after a notice the agent names each upload final
            # (a sync already under way lands first), and hands off with the last.
            for old in s.exec(select(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.attempt == r.number,
                                                       col(Checkpoint.final).is_(True))):
                old.final = False
        for name in st.uploaded:
            if name in known:
                continue
            known.add(name)  # an agent may list a name twice (a checkpoint whose COMPLETE changed)
            last = name == st.last_checkpoint
            completed = (datetime.fromtimestamp(st.last_checkpoint_at, now.tzinfo)
                         if last and st.last_checkpoint_at else None)
            s.add(Checkpoint(job_id=job_id, attempt=r.number, name=name, recorded_at=now, completed_at=completed,
                             step=st.last_checkpoint_step if last else None, final=name == st.final_checkpoint))
            final = " (final, on notice)" if name == st.final_checkpoint else ""
            events.record(s, now, "checkpoint", f"checkpoint {name} durable{final}", job_id=job_id, attempt=r.number)
        if st.last_checkpoint:
            r.last_checkpoint = st.last_checkpoint
            if st.last_checkpoint_at:
                r.last_checkpoint_at = datetime.fromtimestamp(st.last_checkpoint_at, now.tzinfo)

    def _last_status(self, s: Session, job: Job, r: Attempt, st: AgentStatus, now: datetime, ended: datetime) -> None:
        """What an ended attempt's last agent status adds: checkpoints, what it resumed from, and
        for an agent first seen ended (it ran between two polls), when it started and what it
        refused."""
        if st.uploaded and st.uploaded[-1] != r.last_checkpoint:
            self._record_checkpoints(s, job.id or 0, r, st, now)
        if st.final_checkpoint:  # handed off one already recorded
            _mark_final(s, job.id or 0, r.number, st.final_checkpoint)
        if r.resumed_from is None:
            r.resumed_from = st.restored_from
        if r.started_at is None:
            r.started_at = _agent_start(r, st, ended)
        if refusals.pending(r, st):
            refusals.record(s, job, r, st, now)

    def end(self, view: JobView, a: AttemptView, end: A.End, now: datetime, ended_at: datetime | None = None) -> None:
        """Record the attempt's end; ``ended_at``: when its billing stopped (the cloud's record,
        ``gpuorch.money.record.billed_end``), default ``now``. An end for no capacity (an attempt
        that never ran: a Kueue admission wait past ``max_wait``, ``decide.owned``) backs its offer
        class off, as a launch that found none does; another end on owned capacity lifts that
        provider's back-offs (its capacity is free again)."""
        job_id = view.job.id or 0
        with self._txn(job_id) as (s, job):
            r = s.get(Attempt, a.row.id)
            assert r is not None
            was_draining = r.status == AttemptStatus.DRAINING
            if end.status is not None:
                self._last_status(s, job, r, end.status, now, ended_at or now)
            r.status, r.ended_at, r.message = AttemptStatus.ENDED, ended_at or now, end.message
            # A draining attempt keeps the reason its drain recorded, unless the job finished first.
            finished = end.reason == TerminationReason.SUCCEEDED
            r.reason = (r.reason or TerminationReason.PREEMPTED) if was_draining and not finished else end.reason
            r.exit_code, r.lost_work_s = end.exit_code, end.lost_work_s
            if not was_draining:
                if end.reason.counts_as == "preemption":
                    job.preemptions += 1
                elif end.reason.counts_as == "failure":
                    job.failures += 1
            if not was_draining or finished:
                if end.exit_code is not None:
                    job.exit_code = end.exit_code
                if end.result is not None:  # bounded again: the daemon never trusts an agent (agent.limits)
                    job.result, dropped = bounded_result(end.result)
                    dropped = (end.status.result_dropped if end.status is not None else None) or dropped
                    if dropped:
                        events.record(s, now, "result_dropped", dropped, job_id=job_id, attempt=r.number)
            lost = f"; lost work {end.lost_work_s:.0f}s" if end.lost_work_s is not None else ""
            events.record(s, now, "attempt_ended", f"{r.reason.value}: {end.message}{lost}", job_id=job_id,
                          attempt=r.number, reason=r.reason.value, lost_work_s=end.lost_work_s)
            if end.reason == TerminationReason.NO_CAPACITY:  # never ran (an admission wait past max_wait):
                # its class is full, as for a launch that found no capacity; nothing was freed
                back_off(s, self.providers.get(r.provider), backoff_key(r.provider, r.region, r.instance_type, r.spot),
                         end.message, now, self.backoff_s)
            elif r.provider in self.settings.owned and r.instance_id:
                _lift_backoffs(s, r.provider)
            volume_job = job if view.spec.volume is not None else None
        if volume_job is not None:
            self.volumes.detach(volume_job, a.row.instance_id)


def _agent_start(r: Attempt, st: AgentStatus, ended: datetime) -> datetime | None:
    """When an agent first seen ended had started its job, by its own clock, kept between the
    launch and the end (an instance's clock may drift from ours); None if it never got past
    starting."""
    if st.state == "starting" or st.started_at is None:
        return None
    started = datetime.fromtimestamp(st.started_at, ended.tzinfo)
    earliest = r.launched_at or r.requested_at
    return min(max(started, earliest) if earliest else started, ended)


def _lift_backoffs(s: Session, provider: str) -> None:
    """An attempt that held owned capacity ended: a job waiting for that capacity (its launch found
    it full and backed the class off; ``decide.owned``) tries again at the next pass, not after
    the back-off's length. The SSH pool's slot ledger does the same on a release; this covers
    every owned provider (a Kubernetes cluster lists no free count to watch)."""
    mine = col(Backoff.key).startswith(f"{provider}/", autoescape=True) | (col(Backoff.key) == provider)
    for backoff in s.exec(select(Backoff).where(mine)).all():
        s.delete(backoff)


def _mark_final(s: Session, job_id: int, attempt: int, name: str) -> None:
    """``name`` is the attempt's one final checkpoint (the one its agent handed off), where this
    attempt recorded it; the attempt's others are not."""
    rows = list(s.exec(select(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.attempt == attempt)))
    if any(c.name == name for c in rows):
        for c in rows:
            c.final = c.name == name
