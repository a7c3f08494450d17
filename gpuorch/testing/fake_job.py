"""The FakeProvider's jobs: ``FakeJobScript`` (what a job does, as a function of the clock),
the fake agent that plays it on one instance, and ``FakeRunner``, the Runner port over it.

A fake job checkpoints every N seconds of progress, takes a final checkpoint on a notice (or a
clean stop request), resumes from the latest checkpoint of its job as the real agent does, and
writes metrics lines if its script says how. Its whole life is a function of its start, the
restore point, the notice and the kill, so nothing here runs in the background.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

from gpuorch.agent.protocol import AgentConfig, AgentStatus
from gpuorch.clock import FakeClock
from gpuorch.provider.port import Instance, InstanceState
from gpuorch.runners.port import Runner, RunnerUnavailable, VolumeNotReady


class FakeHost(Protocol):
    """What the fake agent and runner use of their provider (``FakeProvider``): a structural
    type, so that this module does not import the provider that imports it."""

    clock: FakeClock
    script: FakeJobScript
    scripts: dict[str, FakeJobScript]
    volume_device_delay_s: float
    volume_attached_at: dict[tuple[str, str], datetime]
    _instances: dict[str, _FakeInstance]
    _agents: dict[str, _FakeAgent]
    _vanished: dict[str, _FakeInstance]

    def _record(self, method: str, *args: object) -> None: ...
    def _peek(self, instance_id: str) -> Instance: ...
    def _agent_of(self, job_id: int, attempt: int) -> _FakeAgent | None: ...
    def _latest_checkpoint(self, config: AgentConfig, at: datetime, exclude: _FakeAgent) -> _Ckpt | None: ...


@dataclass
class FakeJobScript:
    duration_s: float = 600.0  # seconds of work the job needs
    checkpoint_every_s: float = 60.0  # seconds of work between checkpoints
    final_checkpoint_s: float = 5.0  # time to write a checkpoint after a notice
    exit_code: int = 0
    # metrics(progress_s, env) -> one metrics line, written every metrics_every_s of progress
    metrics: Callable[[float, dict[str, str]], dict] | None = None
    metrics_every_s: float = 60.0


@dataclass
class _FakeInstance:
    instance: Instance
    killed_at: datetime | None = None
    notice_at: datetime | None = None


@dataclass
class _Ckpt:
    at: datetime
    progress: float
    attempt: int
    final: bool = False

    @property
    def name(self) -> str:
        return f"p{int(self.progress):06d}-a{self.attempt}"


@dataclass
class _FakeAgent:
    provider: FakeHost
    instance_id: str
    config: AgentConfig
    started: datetime
    script: FakeJobScript
    _memo: dict[str, object] = field(default_factory=dict)

    # The job's whole life is a function of the start, the restore point, the notice and the kill.
    def _rec(self) -> _FakeInstance:
        p = self.provider
        return p._instances.get(self.instance_id) or p._vanished[self.instance_id]

    def resume_time(self) -> datetime:
        """When the job starts running: after waiting for the predecessor's final checkpoint."""
        t = self.started
        if self.config.predecessor_attempt is not None:
            pred = self.provider._agent_of(self.config.job_id, self.config.predecessor_attempt)
            final = pred.final_checkpoint() if pred else None
            if final is not None:
                t = max(t, final.at)
            elif self.config.predecessor_deadline is not None:
                t = max(t, datetime.fromtimestamp(self.config.predecessor_deadline, self.started.tzinfo))
        return t

    def restored(self) -> _Ckpt | None:
        if "restored" not in self._memo:
            tr = self.resume_time()
            self._memo["restored"] = self.provider._latest_checkpoint(self.config, tr, exclude=self)
        return self._memo["restored"]  # type: ignore[return-value]

    def _start_progress(self) -> float:
        r = self.restored()
        return r.progress if r else 0.0

    def finish_time(self) -> datetime:
        return self.resume_time() + timedelta(seconds=self.script.duration_s - self._start_progress())

    def stop_time(self) -> datetime:
        rec = self._rec()
        ends = [self.finish_time()] + ([rec.killed_at] if rec.killed_at else [])
        return min(ends)

    def progress_at(self, t: datetime) -> float:
        t = min(t, self.stop_time())
        return self._start_progress() + max(0.0, (t - self.resume_time()).total_seconds())

    def final_checkpoint(self) -> _Ckpt | None:
        rec = self._rec()
        if rec.notice_at is None or rec.notice_at >= self.stop_time():
            return None
        at = max(rec.notice_at, self.resume_time()) + timedelta(seconds=self.script.final_checkpoint_s)
        if at > self.stop_time():
            return None
        return _Ckpt(at, self.progress_at(rec.notice_at), self.config.attempt, final=True)

    def checkpoints(self) -> list[_Ckpt]:
        """Every checkpoint this attempt ever writes (some may lie in the clock's future)."""
        out: list[_Ckpt] = []
        every, p0, tr = self.script.checkpoint_every_s, self._start_progress(), self.resume_time()
        limit = min(self.stop_time(), self._rec().notice_at or self.stop_time())
        k = math.floor(p0 / every) + 1
        while True:
            at = tr + timedelta(seconds=k * every - p0)
            if at >= limit or k * every >= self.script.duration_s:
                break
            out.append(_Ckpt(at, k * every, self.config.attempt))
            k += 1
        final = self.final_checkpoint()
        return out + ([final] if final else [])

    def status(self, now: datetime) -> AgentStatus:
        done = [c for c in self.checkpoints() if c.at <= now]
        st = AgentStatus(state="starting", started_at=self.started.timestamp(), pid=1000 + self.config.attempt,
                         updated_at=now.timestamp())
        if now < self.resume_time():
            return st
        r = self.restored()
        st.restored_from = r.name if r else None
        st.state, st.running_since = "running", self.resume_time().timestamp()
        st.uploaded = [c.name for c in done]
        if done:
            st.last_checkpoint, st.last_checkpoint_at = done[-1].name, done[-1].at.timestamp()
            st.last_checkpoint_step = int(done[-1].progress)
        rec = self._rec()
        if rec.notice_at is not None and rec.notice_at <= now:
            st.notice_at = rec.notice_at.timestamp()
            deadline = rec.instance.preemption_deadline
            st.notice_deadline = deadline.timestamp() if deadline else None
            final = self.final_checkpoint()
            st.state = "checkpointing"
            if final is not None and final.at <= now:
                st.final_checkpoint, st.final_done = final.name, True
        if self.finish_time() <= now and self.finish_time() == self.stop_time():
            st.state, st.exit_code = "exited", self.script.exit_code
            st.ended_at = self.finish_time().timestamp()
            st.result = {"progress": self.script.duration_s}
        return st

    def metrics_text(self, now: datetime) -> bytes:
        """This attempt's metrics file at ``now``: a line per ``metrics_every_s`` of progress."""
        fn, every = self.script.metrics, self.script.metrics_every_s
        if fn is None or now < self.resume_time():
            return b""
        k, last, lines = math.floor(self._start_progress() / every) + 1, self.progress_at(now), []
        while k * every <= last:
            lines.append(json.dumps(fn(k * every, self.config.env)) + "\n")
            k += 1
        return "".join(lines).encode()


class FakeRunner(Runner):
    def __init__(self, provider: FakeHost, instance_id: str) -> None:
        self.provider, self.instance_id = provider, instance_id

    def _check(self) -> None:
        inst = self.provider._peek(self.instance_id)  # not a port call: no faults, not recorded
        if inst.state != InstanceState.RUNNING:
            raise RunnerUnavailable(f"{self.instance_id} is {inst.state}")

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        self.provider._record("runner.start", self.instance_id, config.attempt)
        if self.instance_id in self.provider._agents:
            return
        self._check()
        if config.volume_id and config.volume_dir:
            self._mount(config.volume_id, config.volume_dir)
        script = self.provider.scripts.get(config.job_name, self.provider.script)
        self.provider._agents[self.instance_id] = _FakeAgent(
            self.provider, self.instance_id, config, self.provider.clock.now(), script)

    def _mount(self, volume_id: str, path: str) -> None:
        """Like the SSH runner's mount step: one look, never a wait (see FakeProvider's knobs)."""
        self.provider._record("runner.mount", self.instance_id, volume_id)
        since = self.provider.volume_attached_at.get((volume_id, self.instance_id))
        now = self.provider.clock.now()
        if since is None or (now - since).total_seconds() < self.provider.volume_device_delay_s:
            raise VolumeNotReady(volume_id, path, f"no device yet on {self.instance_id}")

    def status(self) -> AgentStatus | None:
        agent = self.provider._agents.get(self.instance_id)
        if agent is None:
            self._check()
            return None
        return agent.status(self.provider.clock.now())

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        agent = self.provider._agents.get(self.instance_id)
        text = f"fake job {agent.config.job_name} attempt {agent.config.attempt}\n".encode() if agent else b""
        return text[offset:offset + limit], min(len(text), offset + limit)

    def heartbeat(self) -> None:
        self.provider._record("runner.heartbeat", self.instance_id)

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        agent = self.provider._agents.get(self.instance_id)
        text = agent.metrics_text(self.provider.clock.now()) if agent else b""
        return text[offset:offset + limit], offset + len(text[offset:offset + limit])

    def request_stop(self, deadline: float) -> None:
        """Like a notice without a kill: the fake job takes its final checkpoint; see Runner."""
        self.provider._record("runner.request_stop", self.instance_id)
        self._check()
        if self.instance_id not in self.provider._agents:
            raise RunnerUnavailable(f"{self.instance_id} has no agent yet")
        rec = self.provider._instances[self.instance_id]
        rec.notice_at = rec.notice_at or self.provider.clock.now()
