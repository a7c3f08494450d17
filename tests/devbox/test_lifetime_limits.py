"""``reconciler/decide/limits.py`` as a pure function of a view (no store, no daemon): what counts
as running time for ``max_duration`` and as idle time for ``idle_stop``, and what each stop does.
The daemon-level behaviour is in test_lifetime_daemon.py; these pin the arithmetic."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from gpuorch.jobs.spec import parse_spec
from gpuorch.provider.port import Instance, InstanceState
from gpuorch.reconciler.decide.actions import End, SetJob, StopCleanly, Terminate
from gpuorch.reconciler.decide.limits import idle_s, lifetime_stop, running_s, stopped_box
from gpuorch.reconciler.observe.views import AttemptView, JobView, Settings
from gpuorch.store.models import Attempt, Job
from gpuorch.store.states import AttemptStatus, JobStatus, TerminationReason

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def attempt(number: int, start: float | None, end: float | None = None, *, reason: TerminationReason | None = None,
            notice: float | None = None, provider: str = "local") -> AttemptView:
    live = end is None and notice is None
    row = Attempt(job_id=1, number=number, provider=provider, region="r", zone="z", instance_type="t",
                  status=AttemptStatus.RUNNING if live else AttemptStatus.ENDED, reason=reason,
                  started_at=at(start) if start is not None else None, ended_at=at(end) if end is not None else None,
                  notice_at=at(notice) if notice is not None else None, instance_id=f"i-{number}")
    inst = Instance(id=f"i-{number}", provider=provider, region="r", zone="z", instance_type="t", spot=False,
                    state=InstanceState.RUNNING if live else InstanceState.TERMINATED)
    return AttemptView(row, True, inst)


def view(spec: dict, attempts: list[AttemptView], metrics: dict | None = None, metrics_at: float | None = None,
         status: JobStatus = JobStatus.RUNNING, message: str | None = None) -> JobView:
    job = Job(id=1, name=spec["name"], spec="{}", status=status, message=message,
              metrics=json.dumps(metrics) if metrics is not None else None,
              metrics_at=at(metrics_at) if metrics_at is not None else None)
    return JobView(job, parse_spec({"run": "true", **spec}), attempts)


def test_running_time_adds_every_attempt_and_a_drained_one_counts_to_its_notice():
    v = view({"name": "j", "max_duration": "1h"},
             [attempt(1, 0, 30, reason=TerminationReason.PREEMPTED, notice=20), attempt(2, 40)])
    assert running_s(v, at(50)) == (20 + 10) * 60
    assert running_s(v, at(50), (("local", 60.0),)) == (20 + 10) * 3600  # market time on a simulated market
    assert lifetime_stop(v, v.attempts[-1], at(79), Settings()).done is False  # 20 + 39 minutes
    step = lifetime_stop(v, v.attempts[-1], at(80), Settings())
    assert step.done
    terminate, end, set_job = step.actions
    assert isinstance(terminate, Terminate) and isinstance(end, End) and isinstance(set_job, SetJob)
    assert end.reason == TerminationReason.CANCELLED and set_job.status == JobStatus.CANCELLED and set_job.finished
    assert end.message == "max_duration 1h reached: stopped by the daemon"


def test_a_dev_box_counts_its_running_time_from_its_last_start():
    box = {"name": "b", "kind": "dev", "max_duration": "1h"}
    v = view(box, [attempt(1, 0, 50, reason=TerminationReason.HELD), attempt(2, 100)])
    assert running_s(v, at(110)) == 10 * 60


def test_idle_time_is_the_box_s_report_plus_the_time_since_it_was_read():
    box = {"name": "b", "kind": "dev", "idle_stop": "30m"}
    cur = attempt(1, 0)
    assert idle_s(view(box, [cur]), cur, at(10)) == 600  # no report yet: idle since it started
    v = view(box, [cur], {"idle_s": 300, "ssh_sessions": 0}, metrics_at=20)
    assert idle_s(v, cur, at(21)) == 300 + 60
    old = view(box, [attempt(1, 0, 5, reason=TerminationReason.HELD), attempt(2, 30)], {"idle_s": 9999}, metrics_at=4)
    assert idle_s(old, old.attempts[-1], at(31)) == 60  # a report of the earlier box does not count
    not_yet = attempt(1, None)
    assert idle_s(view(box, [not_yet]), not_yet, at(99)) is None


def test_an_idle_box_is_held_and_waits_and_a_checkpointed_one_stops_cleanly():
    box = {"name": "b", "kind": "dev", "idle_stop": "30m"}
    cur = attempt(1, 0)
    v = view(box, [cur], {"idle_s": 0}, metrics_at=10)
    assert not lifetime_stop(v, cur, at(39), Settings()).done
    step = lifetime_stop(v, cur, at(40), Settings())
    set_job = step.actions[-1]
    assert isinstance(set_job, SetJob) and set_job.status == JobStatus.HELD and not set_job.finished
    held = view(box, [attempt(1, 0, 40, reason=TerminationReason.HELD)], status=JobStatus.HELD,
                message=set_job.message)
    assert stopped_box(held).done and not stopped_box(view(box, [], status=JobStatus.QUEUED)).done

    ckpt = {**box, "checkpoint": {"store": "file:///tmp/ckpt"}}
    from gpuorch.agent.protocol import AgentStatus

    cur = AttemptView(cur.row, True, cur.instance, AgentStatus(state="running"))
    step = lifetime_stop(view(ckpt, [cur], {"idle_s": 0}, metrics_at=10), cur, at(40), Settings())
    (stop,) = step.actions
    assert isinstance(stop, StopCleanly) and stop.reason == TerminationReason.HELD and stop.job_status == JobStatus.HELD
