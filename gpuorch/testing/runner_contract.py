"""The runner contract suite: the tests every ``Runner`` passes (local, SSH, the fake's).

Each test checks one sentence of a docstring in ``gpuorch.runners.port``. A test module
subclasses ``RunnerContract`` (its name starting with ``Test``) and provides the ``runner``
fixture: a runner for one fresh instance that is reachable and has no agent yet::

    class TestMyRunnerContract(RunnerContract):
        @pytest.fixture
        def runner(self, tmp_path):
            return MyRunner(...)

Jobs: ``short_job`` (``contract-short``) prints ``greeting`` and exits 0; ``long_job``
(``contract-long``) runs until stopped; ``ending_job`` (``contract-ending``) runs a few seconds, for
a runner that cannot ``request_stop``. Real runners run them as shell commands; a runner that
plays jobs otherwise (the fake, by job name) sets ``greeting`` and overrides ``advance``. The
``unreachable`` fixture is a runner whose instance cannot be reached (skipped by default).
Requires pytest; nothing outside tests imports this.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import ClassVar, TypeVar

import pytest

from gpuorch.agent.protocol import AgentConfig, AgentStatus
from gpuorch.runners.port import Runner, RunnerUnavailable, status_value
from gpuorch.testing.contract import wait_until

T = TypeVar("T")
GREETING = b"hello from the runner contract\n"
ENDED = ("exited", "failed")


class RunnerContract:
    """Base class of every runner's contract tests. Override fixtures, hooks and timings."""

    greeting: ClassVar[bytes] = GREETING  # what ``short_job`` writes to its output
    timeout_s: ClassVar[float] = 30.0  # for anything the agent does, in the runner's clock
    poll_s: ClassVar[float] = 0.1

    # -- fixtures and hooks a subclass provides or overrides ----------------------------------
    @pytest.fixture
    def runner(self) -> Runner:
        raise NotImplementedError("a RunnerContract subclass must provide the `runner` fixture")

    def short_job(self, attempt: int = 1) -> AgentConfig:
        """A job that writes ``GREETING`` to its output and exits 0."""
        return AgentConfig(job_id=1, attempt=attempt, job_name="contract-short",
                           run="printf 'hello from the runner contract\\n'")

    def long_job(self, attempt: int = 1) -> AgentConfig:
        """A job that runs until it is stopped (longer than any test)."""
        return AgentConfig(job_id=1, attempt=attempt, job_name="contract-long",
                           run="echo started; exec sleep 300")

    def ending_job(self, attempt: int = 1) -> AgentConfig:
        """A job that runs a few seconds, then exits 0 (a change for a runner without ``request_stop``)."""
        return AgentConfig(job_id=1, attempt=attempt, job_name="contract-ending", run="echo started; exec sleep 5")

    def advance(self, runner: Runner, seconds: float) -> None:
        """Let ``seconds`` pass for the runner's agent. Fake clocks override this."""
        time.sleep(seconds)

    def now(self, runner: Runner) -> float:
        """The agent's clock (epoch seconds), for ``request_stop`` deadlines."""
        return time.time()

    @pytest.fixture
    def unreachable(self) -> Runner:
        """A runner whose instance cannot be reached (booting, gone, no network), or skip."""
        pytest.skip("no way to make this runner's instance unreachable in tests")

    # -- helpers ---------------------------------------------------------------------------
    def wait(self, runner: Runner, check: Callable[[], T | None], what: str) -> T:
        return wait_until(check, timeout_s=self.timeout_s, step_s=self.poll_s,
                          advance=lambda s: self.advance(runner, s), what=what)

    def wait_status(self, runner: Runner, condition: Callable[[AgentStatus], bool], what: str) -> AgentStatus:
        def check() -> AgentStatus | None:
            status = runner.status()
            return status if status is not None and condition(status) else None

        return self.wait(runner, check, what)

    def wait_log(self, runner: Runner) -> bytes:
        return self.wait(runner, lambda: runner.read_log()[0] or None, "job output")

    # -- status and logs before start --------------------------------------------------------
    def test_status_is_none_before_the_agent_wrote_one(self, runner: Runner) -> None:
        assert runner.status() is None

    def test_logs_and_metrics_are_empty_before_start(self, runner: Runner) -> None:
        assert runner.read_log() == (b"", 0)
        assert runner.read_metrics() == (b"", 0)

    # -- start -------------------------------------------------------------------------------
    def test_start_runs_the_job_detached_and_status_reports_it(self, runner: Runner) -> None:
        runner.start(self.short_job())  # returns at once: the job runs on its own
        status = self.wait_status(runner, lambda s: s.state in ENDED, "the job to end")
        assert (status.state, status.exit_code) == ("exited", 0)
        assert self.greeting in self.wait_log(runner)

    def test_start_is_idempotent_for_an_attempt(self, runner: Runner) -> None:
        runner.start(self.long_job())
        first = self.wait_status(runner, lambda s: s.started_at is not None, "the agent to start")
        runner.start(self.long_job())
        again = self.wait_status(runner, lambda s: s.started_at is not None, "the agent's status")
        # started_at is the agent's own start; the job's pid appears only once it runs ("starting" has none)
        assert again.started_at == first.started_at, "a second start started another agent"
        if first.pid is not None:
            assert again.pid == first.pid, "a second start started another job"

    # -- logs --------------------------------------------------------------------------------
    def test_read_log_pages_from_an_offset(self, runner: Runner) -> None:
        runner.start(self.short_job())
        self.wait_status(runner, lambda s: s.state in ENDED, "the job to end")
        data, end = runner.read_log()
        assert data and end == len(data)
        assert runner.read_log(3) == (data[3:], end)
        assert runner.read_log(0, limit=4) == (data[:4], 4)
        assert runner.read_log(end) == (b"", end), "nothing new: empty, and the offset stays"

    def test_read_metrics_of_a_job_that_writes_none_is_empty(self, runner: Runner) -> None:
        runner.start(self.short_job())
        self.wait_status(runner, lambda s: s.state in ENDED, "the job to end")
        assert runner.read_metrics() == (b"", 0)
        assert runner.read_metrics(7) == (b"", 7)

    # -- heartbeat and stop ------------------------------------------------------------------
    def test_heartbeat_reaches_a_started_agent(self, runner: Runner) -> None:
        runner.start(self.long_job())
        self.wait_status(runner, lambda s: s.state == "running", "the job to run")
        runner.heartbeat()
        runner.heartbeat()  # any number of times

    def test_request_stop_is_handled_like_a_notice_and_is_idempotent(self, runner: Runner) -> None:
        runner.start(self.long_job())
        self.wait_status(runner, lambda s: s.state == "running", "the job to run")
        try:
            runner.request_stop(self.now(runner) + 60)
        except NotImplementedError:
            pytest.skip(f"{type(runner).__name__} cannot request a clean stop (allowed by the port)")
        noticed = self.wait_status(runner, lambda s: s.notice_at is not None, "the agent to take the stop")
        runner.request_stop(self.now(runner) + 120)  # again, later: the first request stands
        later = self.wait_status(runner, lambda s: s.notice_at is not None, "the agent's status")
        assert later.notice_at == noticed.notice_at
        if noticed.notice_deadline is not None:
            assert later.notice_deadline == noticed.notice_deadline

    # -- a status is a value (the port's module docstring; Runner.status) ----------------------
    def start_for_a_change(self, runner: Runner) -> Callable[[], Callable[[AgentStatus], bool]]:
        """Start a job and wait until it runs; returns what makes its agent write a new status
        (which returns the test of that status): a stop it takes (``request_stop``) or, for a
        runner without one (the port's default raises NotImplementedError), its job's own end."""
        inner = runner.inner if isinstance(runner, InPlaceStatusRunner) else runner
        if type(inner).request_stop is Runner.request_stop:
            runner.start(self.ending_job())
            self.wait_status(runner, lambda s: s.state == "running", "the job to run")
            return lambda: (lambda s: s.state in ENDED)
        runner.start(self.long_job())
        self.wait_status(runner, lambda s: s.state == "running", "the job to run")

        def stop() -> Callable[[AgentStatus], bool]:
            runner.request_stop(self.now(runner) + 60)
            return lambda s: s.notice_at is not None

        return stop

    def test_a_status_answer_keeps_its_value_until_the_next_call(self, runner: Runner) -> None:
        """The daemon may read an answer again while the agent goes on: no runner changes one
        outside ``status`` (a thread of its own refreshing it, say)."""
        change = self.start_for_a_change(runner)
        first = runner.status()
        assert first is not None
        kept = status_value(first)
        changed = change()
        self.advance(runner, 10 * self.poll_s)  # the agent may write meanwhile; status() is not called
        assert status_value(first) == kept, "an answer changed after status() returned it"
        self.wait_status(runner, changed, "the agent's new status")

    def test_a_status_refreshed_in_place_is_a_change_the_daemon_sees(self, runner: Runner) -> None:
        """A runner may keep one status object and refresh it in place inside ``status``
        (``InPlaceStatusRunner`` around this one): the daemon's reads (``read_status``, and
        ``batch_reads`` handed the very answer again) take its value when read, so the change is
        seen; the same answer with nothing changed is not new."""
        from gpuorch.provider.capabilities import Capabilities
        from gpuorch.provider.port import Instance, InstanceState
        from gpuorch.reconciler.observe.status_reads import Read, batch_reads, read_status
        from gpuorch.testing.fake_provider import FakeProvider

        in_place = InPlaceStatusRunner(runner)
        inst = Instance(id="contract-1", provider="contract", region="r", zone="z", instance_type="t", spot=False,
                        state=InstanceState.RUNNING)
        key = ("contract", 1, 1, inst.id)
        answers: dict[tuple[str, int, int, str], tuple[object, Read]] = {}
        change = self.start_for_a_change(in_place)
        running = read_status(lambda _: in_place, inst)
        answer = (in_place, running.agent)  # a provider that hands out this one answer, ever

        class OneAnswer(FakeProvider):  # declares the capability: the core asks no other provider
            capabilities = Capabilities(agent_statuses=True)

            def agent_statuses(self, instances: Sequence[Instance]
                               ) -> Mapping[str, tuple[Runner, AgentStatus | None] | None]:
                return {inst.id: answer}

        assert batch_reads(OneAnswer(), [(key, inst)], answers)[key].new, "a first answer is new"
        assert not batch_reads(OneAnswer(), [(key, inst)], answers)[key].new, "nothing changed: not new"
        changed = self.wait_status(in_place, change(), "the agent's new status")
        assert changed is running.agent, "the in-place runner hands out one object"
        after = read_status(lambda _: in_place, inst)
        assert after.agent is running.agent and after.value != running.value, "the change was not seen"
        batched = batch_reads(OneAnswer(), [(key, inst)], answers)[key]
        assert batched.new and batched.value == after.value, "the very answer again, its status changed: not new"

    # -- an unreachable instance ---------------------------------------------------------------
    def test_an_unreachable_instance_raises_runner_unavailable(self, unreachable: Runner) -> None:
        runner = unreachable
        with pytest.raises(RunnerUnavailable):
            runner.start(self.short_job())
        with pytest.raises(RunnerUnavailable):
            runner.status()


class InPlaceStatusRunner(Runner):
    """A runner that refreshes ONE status object in place, as the port allows (``Runner.status``):
    it wraps ``inner`` and copies each of its answers into the object it handed out first, its
    ``uploaded`` list and ``result`` dict in place too. ``RunnerContract`` and the assembled-daemon
    test (tests/harness/test_change_by_value.py) use it to show the daemon still sees every change."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.kept: AgentStatus | None = None  # the one object every answer is

    def start(self, config: AgentConfig, workdir: Path | None = None) -> None:
        self.inner.start(config, workdir)

    def status(self) -> AgentStatus | None:
        fresh = self.inner.status()
        if fresh is None:
            return self.kept
        if self.kept is None:
            self.kept = AgentStatus()
        for f in fields(AgentStatus):
            new, old = getattr(fresh, f.name), getattr(self.kept, f.name)
            if isinstance(new, list) and isinstance(old, list):
                old[:] = new
            elif isinstance(new, dict) and isinstance(old, dict):
                old.clear()
                old.update(new)
            else:
                setattr(self.kept, f.name, copy.copy(new))  # its own list or dict, refreshed in place later
        return self.kept

    def read_log(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self.inner.read_log(offset, limit)

    def heartbeat(self) -> None:
        self.inner.heartbeat()

    def request_stop(self, deadline: float) -> None:
        self.inner.request_stop(deadline)

    def read_metrics(self, offset: int = 0, limit: int = 1 << 20) -> tuple[bytes, int]:
        return self.inner.read_metrics(offset, limit)
