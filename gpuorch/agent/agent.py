"""The on-instance agent: restore the latest checkpoint, run the job, keep checkpoints synced,
and turn a preemption notice (or a silent control host, or SIGTERM) into a final checkpoint.

One ``Agent`` per attempt and run dir. Only the main thread decides; the ``Syncer`` thread
uploads. Every state change is written to ``status.json`` at once (``AgentStatus``).
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuorch.agent.images import ImageHost
from gpuorch.agent.job import (
    RESULT_FILE,
    job_env,
    notify_job,
    parse_signal,
    read_result,
    shell_exit_code,
    signal_group,
    spawn,
)
from gpuorch.agent.notice import FileNotice, make_notice_source
from gpuorch.agent.protocol import (
    AGENT_LOG,
    HEARTBEAT_FILE,
    JOB_LOG,
    STATUS_FILE,
    STOP_FILE,
    WORK_DIR,
    AgentConfig,
    AgentStatus,
    write_atomic,
)
from gpuorch.agent.restore import Restorer
from gpuorch.agent.syncer import Syncer
from gpuorch.checkpoint import (
    CheckpointError,
    CorruptCheckpoint,
    LocalCheckpoint,
    Manifest,
    ObjectStore,
    Order,
    download,
    newest_checkpoint,
    open_store,
    read_checkpoint,
    wait_for_final,
    write_final,
)
from gpuorch.checkpoint.handoff import read_completed, write_completed
from gpuorch.checkpoint.namespace import Owner, record_refusal

log = logging.getLogger("gpuorch.agent")

POLL_S = 0.2
SIGTERM_GRACE_S = 10.0  # notice deadline when the agent itself is told to stop
DEADMAN_GRACE_S = 60.0  # notice deadline when the control host has gone silent
PREDECESSOR_POLL_S = 0.5


@dataclass
class _Notice:
    reason: str  # "preemption", "heartbeat", "sigterm" or "stop" (the daemon's stop.json)
    deadline: float
    baseline: Order | None  # order key of the newest local checkpoint when it arrived
    upload_requested: bool = False
    ticket: int = 0


class Agent:
    """Runs one attempt in ``rundir`` as ``config`` says; ``run()`` returns the job's exit code.

    Raises (from the constructor or ``run``) only on its own failures: bad config, an unusable
    store, no checkpoint that verifies. ``__main__`` turns those into status ``failed``.
    """

    def __init__(self, rundir: Path, config: AgentConfig) -> None:
        self.rundir, self.config = rundir, config
        self.status = AgentStatus(started_at=time.time())
        self.work = rundir / WORK_DIR
        self.checkpoint_dir = self.work / config.checkpoint_dir  # an absolute one wins
        self.signal = parse_signal(config.signal)
        self.notices = make_notice_source(config.notice, rundir)
        self.stop_requests = FileNotice(rundir / STOP_FILE)  # the daemon's clean stop (budget, deadline)
        self.store: ObjectStore | None = None
        self.prefix = ""
        self.owner = Owner(config.installation, config.job_id, config.attempt, config.job_name)
        self.restorer: Restorer | None = None  # only this job's checkpoints (gpuorch.agent.restore)
        if config.checkpoint_url:
            self.store, self.prefix = open_store(config.checkpoint_url)
            self.restorer = Restorer(config, self.store, self.prefix)
        self.terminate = threading.Event()  # set from the SIGTERM handler
        self.syncer: Syncer | None = None
        self.notice: _Notice | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # status is updated from the main and the sync thread
        self._next_notice_poll = 0.0
        self.images: ImageHost | None = None  # with an image: the runtime that runs the job

    def update(self, **changes: Any) -> None:
        with self._lock:
            for name, value in changes.items():
                setattr(self.status, name, value)
            self.status.updated_at = time.time()
            write_atomic(self.rundir / STATUS_FILE, self.status.to_json())

    # -- the attempt, start to end ---------------------------------------------------------

    def run(self) -> int:
        """Run the attempt to the end; returns the job's exit code (128+N if killed by N)."""
        self.update(state="starting", started_at=self.status.started_at)
        self.work.mkdir(exist_ok=True)
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        if self.config.container is not None:  # a missing image fails the attempt before any restore
            self.update(state="pulling")
            self.images = ImageHost.prepare(self.config.container, self.rundir)
        self._await_predecessor()
        if self._completed_before():
            return 0
        baseline = self._restore()
        if self.store is not None and self.config.upload_checkpoints:
            self.syncer = Syncer(
                self.store,
                self.prefix,
                self.checkpoint_dir,
                self.config.attempt,
                self.config.keep_checkpoints,
                self._on_upload,
                baseline,
                self.owner,
            )
        env = job_env(self.config, self.rundir, self.checkpoint_dir, self.status.restored_from)
        if self.config.setup and self.images is None:  # in a container, setup runs in the job's own (ImageHost)
            code = self._supervise(self.config.setup, "setup", env)
            if code != 0 or self.terminate.is_set():
                return self._finish(code)
        return self._finish(self._supervise(self.config.run, "running", env))

    def _completed_before(self) -> bool:
        """An earlier attempt already ran the job to its end (``handoff.read_completed``): report
        its result and exit 0 without running the job again."""
        if self.restorer is None:
            return False
        done = self.restorer.completed()
        if done is None:
            return False
        log.info("attempt %d already completed the job; reporting its result instead of running it again",
                 done.attempt)
        if done.result is not None:
            write_atomic(self.rundir / RESULT_FILE, json.dumps(done.result))
        self.update(state="exited", exit_code=0, result=done.result, ended_at=time.time())
        return True

    def _await_predecessor(self) -> None:
        attempt = self.config.predecessor_attempt
        if attempt is None or self.store is None:
            return
        deadline = self.config.predecessor_deadline or time.time()
        log.info("waiting for attempt %d's handoff record (at most %.0f s)", attempt, deadline - time.time())
        record = wait_for_final(self.store, self.prefix, attempt, deadline, PREDECESSOR_POLL_S)
        why = None if record is None else record_refusal(record.installation, record.job_id, self.owner,
                                                         f"the handoff record of attempt {attempt}")
        if why is not None and self.restorer is not None:  # it only sequences; the restore checks each checkpoint
            self.restorer.refuse(why)
        elif record is None:
            log.warning("attempt %d left no handoff record by the deadline; restoring what is there", attempt)
        else:
            log.info("attempt %d handed off checkpoint %s", attempt, record.checkpoint)

    def _restore(self) -> Order | None:
        """Restore the newest checkpoint that verifies; returns its order key (None if none)."""
        if self.restorer is None:
            return None
        self.update(state="restoring")
        candidates = self.restorer.candidates()  # this job's own only; the others are refused
        for store, prefix, manifest in candidates:
            try:
                path = download(store, prefix, manifest, self.checkpoint_dir)
            except CorruptCheckpoint as e:  # fall back to the one before
                log.error("cannot restore %s: %s", manifest.name, e)
                continue
            log.info("restored checkpoint %s (step %s)", manifest.name, manifest.step)
            # The refusals go out with the outcome, in one write: the daemon records them once.
            self.update(
                restored_from=manifest.name,
                last_checkpoint=manifest.name,
                last_checkpoint_step=manifest.step,
                last_checkpoint_at=manifest.completed_at,
                refused=self.restorer.refused(),
            )
            restored = read_checkpoint(path)
            return restored.order if restored else None
        self.update(refused=self.restorer.refused())
        if candidates:
            raise CheckpointError(f"none of the {len(candidates)} checkpoints in the store verifies; see {AGENT_LOG}")
        log.info("no checkpoint of this job in the store; starting fresh")
        return None

    def _supervise(self, command: str, phase: str, env: dict[str, str]) -> int:
        """Run one command (setup or the job) to its end, handling syncs and notices meanwhile."""
        is_job = phase == "running"
        if self.images is not None:
            own = set(self.config.env)
            mounts = [str(self.rundir), str(self.checkpoint_dir.resolve())]
            if self.config.volume_dir:
                mounts.append(self.config.volume_dir)
            self.proc = proc = self.images.spawn(self.config, phase, command, env, own, mounts, self.work,
                                                 self.rundir / JOB_LOG)
        else:
            self.proc = proc = spawn(command, self.work, env, self.rundir / JOB_LOG, self.signal if is_job else None)
        log.info("started %s (pid %d)", phase, proc.pid)
        handling = self.notice is not None and not self.status.final_done
        since = {"running_since": time.time()} if is_job else {}  # lost work counts from here, not the restore
        self.update(state="checkpointing" if handling else phase, pid=proc.pid if is_job else None, **since)
        next_sync = time.time() + self.config.sync_interval_s
        while True:
            code = proc.poll()
            now = time.time()
            if self.notice is None:
                self._check_triggers(now, proc if is_job else None)
            if self.notice is not None:
                if not self.status.final_done:
                    self._advance_notice(now, code is not None or not is_job, phase)
                elif self.terminate.is_set() and code is None:
                    return self._stop(proc, max(2.0, self.notice.deadline - now))
            elif self.syncer is not None and is_job and now >= next_sync:
                self.syncer.request()
                next_sync = now + self.config.sync_interval_s
            if code is not None and (self.notice is None or self.status.final_done):
                log.info("%s exited with %d", phase, shell_exit_code(code))
                if self.images is not None:
                    self.images.remove_all()  # after a killed client the container may still run
                return shell_exit_code(code)
            time.sleep(POLL_S)

    def _finish(self, code: int) -> int:
        if self.syncer is not None and not self.status.final_done:  # after a handoff, upload nothing more
            ticket = self.syncer.request()
            give_up: float | None = None
            while not self.syncer.wait(ticket, POLL_S):
                if self.terminate.is_set():
                    give_up = give_up or time.time() + SIGTERM_GRACE_S
                    if time.time() > give_up:
                        log.warning("stopping before the last sync finished")
                        break
        result, dropped = read_result(self.rundir)  # bounded: gpuorch.agent.limits
        # Before reporting, so a relaunch does not run it again (exit 0 is success, as the daemon
        # reads it, also after a notice).
        if code == 0 and self.store is not None:
            try:
                first = read_completed(self.store, self.prefix)  # this job's first completion stands
                if first is None or record_refusal(first.installation, first.job_id, self.owner, "") is not None:
                    write_completed(self.store, self.prefix, self.config.attempt, result, self.owner)
            except Exception as e:  # the store is down: the daemon still hears of the exit (at least once)
                log.warning("could not record the completion in the store: %s", e)
        self.update(state="exited", exit_code=code, result=result, result_dropped=dropped, ended_at=time.time())
        return code

    # -- notices -------------------------------------------------------------------------------

    def _check_triggers(self, now: float, job: subprocess.Popen[bytes] | None) -> None:
        if self.terminate.is_set():
            self._begin_notice("sigterm", now + SIGTERM_GRACE_S, job)
            return
        if now >= self._next_notice_poll:
            self._next_notice_poll = now + self.config.notice.poll_s
            deadline = self.notices.poll()
            if deadline is not None:
                self._begin_notice("preemption", deadline, job)
                return
            deadline = self.stop_requests.poll()
            if deadline is not None:
                self._begin_notice("stop", deadline, job)
                return
        if self._heartbeat_lost(now):
            self._begin_notice("heartbeat", now + DEADMAN_GRACE_S, job)

    def _heartbeat_lost(self, now: float) -> bool:
        timeout = self.config.heartbeat_timeout_s
        if timeout is None:
            return False
        try:
            last = (self.rundir / HEARTBEAT_FILE).stat().st_mtime
        except FileNotFoundError:
            last = self.status.started_at or now
        return now - last > timeout

    def _begin_notice(self, reason: str, deadline: float, job: subprocess.Popen[bytes] | None) -> None:
        newest = newest_checkpoint(self.checkpoint_dir)
        self.notice = _Notice(reason, deadline, newest.order if newest else None)
        log.warning("%s: final checkpoint due %.1f s from now", reason, deadline - time.time())
        self.update(state="checkpointing", notice_at=time.time(), notice_deadline=deadline, notice_reason=reason)
        if job is not None and job.poll() is None:
            notify_job(job, self.signal)  # in a container: the runtime's client, which proxies it

    def _advance_notice(self, now: float, job_gone: bool, phase: str) -> None:
        """Wait for the job's next checkpoint (or its exit, or the grace point), upload it, hand off."""
        n = self.notice
        assert n is not None
        if not n.upload_requested:
            newest = newest_checkpoint(self.checkpoint_dir)
            fresh = newest is not None and (n.baseline is None or newest.order > n.baseline)
            if not (fresh or job_gone or now >= n.deadline - self.config.final_checkpoint_grace_s):
                return
            n.upload_requested = True
            n.ticket = self.syncer.request() if self.syncer else 0
        if self.syncer is not None:
            # An upload in flight is always waited for, even past the deadline: handing off
            # early could let the next attempt restore an older checkpoint than the one landing.
            if not self.syncer.done(n.ticket):
                return
            if self.syncer.failed and now < n.deadline:  # e.g. a network blip: try again
                n.ticket = self.syncer.request()
                return
        self._hand_off(phase)

    def _hand_off(self, phase: str) -> None:
        assert self.notice is not None
        if self.store is not None and self.config.upload_checkpoints:
            try:
                write_final(self.store, self.prefix, self.config.attempt, self.status.last_checkpoint, self.owner)
            except Exception:  # the successor then waits until its deadline instead
                log.exception("could not write the handoff record")
        # The checkpoint handed off is the attempt's final one, also when no upload followed the
        # notice (the newest was already in the store): the daemon records it final at the end.
        self.update(final_done=True, state=phase,
                    final_checkpoint=self.status.final_checkpoint or self.status.last_checkpoint)
        log.info("handed off with checkpoint %s", self.status.last_checkpoint)
        if self.notice.reason == "stop":  # nothing will kill the instance for us: stop the job now
            self.terminate.set()
        if self.notice.reason == "heartbeat" and self.config.shutdown_command:
            log.warning("no heartbeat for %.0f s: running the shutdown command", self.config.heartbeat_timeout_s)
            try:
                done = subprocess.run(
                    ["/bin/bash", "-c", self.config.shutdown_command],
                    cwd=str(self.work),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    timeout=60,
                    check=False,
                )
                log.info("shutdown command exited %d: %s", done.returncode, done.stdout.decode(errors="replace"))
            except (OSError, subprocess.SubprocessError):
                log.exception("the shutdown command failed")

    def _on_upload(self, ckpt: LocalCheckpoint, manifest: Manifest) -> None:
        """Called from the sync thread after each upload."""
        changes: dict[str, Any] = dict(
            last_checkpoint=ckpt.name,
            last_checkpoint_at=ckpt.completed_at,
            last_checkpoint_step=ckpt.step,
            uploaded=self.status.uploaded + [ckpt.name],
        )
        if self.notice is not None:
            changes["final_checkpoint"] = ckpt.name
        self.update(**changes)

    def _stop(self, proc: subprocess.Popen[bytes], grace_s: float) -> int:
        """SIGTERM the job's group, SIGKILL it after ``grace_s``; returns its exit code."""
        signal_group(proc, signal.SIGTERM)
        try:
            code = proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            code = proc.wait()
        if self.images is not None:
            self.images.remove_all()
        return shell_exit_code(code)

    def kill_job(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self._stop(self.proc, 5.0)
        if self.images is not None:
            self.images.remove_all()
