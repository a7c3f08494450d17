"""A real container job on the local provider, through the reconciler and the real agent: the
tiny NumPy MLP runs inside a podman container, checkpoints, gets a preemption notice (the signal
crosses into the container), is preempted, resumes in a new container from the final checkpoint
and ends with bitwise the uninterrupted loss. And a missing image fails the attempt, with
podman's own words in the events, without a retry."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from podman_image import PODMAN, local_container, python_env
from sqlmodel import col, select

from gpuorch.jobs import intent as jobs
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import AttemptStatus, Checkpoint, Event, Job, JobStatus, TerminationReason
from gpuorch.testing import e2e
from gpuorch_local.provider import LocalProvider

pytestmark = pytest.mark.container

ENV = {"STEPS": "300", "CKPT_EVERY": "40", "STEP_SLEEP": "0.03", "SEED": "7"}
# /run/.containerenv exists only inside a podman container: the job refuses to run anywhere else.
RUN = 'test -e /run/.containerenv && cat /proc/1/cmdline > pid1.txt && "$PY" train.py'


def daemon(store, tmp_path):
    local = LocalProvider(tmp_path / "local", container=local_container())
    return local, Reconciler(store, {"local": local}, settings=Settings(poll_s=0.2), logs=LogMirror(tmp_path))


def containers(job_id):
    out = subprocess.run([*PODMAN, "ps", "--all", "--filter", f"label=gpuorch.job={job_id}", "--format", "{{.Names}}"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_container_job_checkpoints_is_preempted_and_resumes_with_the_same_loss(store, tmp_path, podman_image):
    local, rec = daemon(store, tmp_path)
    spec = parse_spec({"name": "mlp-box", "run": RUN, "workdir": str(e2e.TINY_MLP), "image": podman_image,
                       "env": {**ENV, **python_env()}, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
                       "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"}})
    job = jobs.submit(store, spec, rec.clock.now())

    def attempts():
        return e2e.attempts(store, job.id)

    e2e.passes_until(rec.run_pass, lambda: attempts() and attempts()[-1].last_checkpoint is not None)
    first = attempts()[-1]
    assert containers(job.id) == [f"gpuorch-{job.id}-1-running"]  # the job runs in the container
    local.inject_preemption(first.instance_id, notice_s=15)
    e2e.passes_until(rec.run_pass, lambda: len(attempts()) == 2)
    e2e.passes_until(rec.run_pass, lambda: e2e.job_status(store, job.id).terminal)

    a1, a2 = attempts()
    assert a1.reason == TerminationReason.PREEMPTED and a2.reason == TerminationReason.SUCCEEDED, (a1, a2)
    with store.read() as s:
        final = s.exec(select(Checkpoint).where(Checkpoint.job_id == job.id, Checkpoint.final == True)).one()  # noqa: E712
        done = s.get(Job, job.id)
    assert a2.resumed_from == final.name  # the checkpoint taken on the notice, inside the container
    assert a1.lost_work_s is not None and a1.lost_work_s < 5
    assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0
    assert json.loads(done.result)["final_loss"] == e2e.tiny_mlp_reference(tmp_path, ENV)  # bitwise
    log = LogMirror(tmp_path).path(job.id, 2).read_text()
    assert "resuming from" in log
    assert [i for i in local.list_managed() if i.state.alive] == []
    assert containers(job.id) == []  # none left running, the preempted attempt's included
    pid1 = (tmp_path / "local" / "instances" / a2.instance_id / "run" / "work" / "pid1.txt").read_bytes()
    assert pid1.startswith(b"/bin/sh\0-c\0")  # PID 1 was the signal proxy, in the container


def test_a_missing_image_fails_the_attempt_with_the_runtimes_message_and_no_retry(store, tmp_path, podman_image):
    _, rec = daemon(store, tmp_path)
    spec = parse_spec({"name": "no-image", "run": "echo never", "image": "localhost/gpuorch-no-such-image:1",
                       "resources": {"gpu": "A100:80GB:1"}, "retry": {"max_preemptions": 5}})
    job = jobs.submit(store, spec, rec.clock.now())
    e2e.passes_until(rec.run_pass, lambda: e2e.job_status(store, job.id).terminal)
    [attempt] = e2e.attempts(store, job.id)
    assert attempt.status == AttemptStatus.ENDED and attempt.reason == TerminationReason.FAILED
    assert "cannot pull image localhost/gpuorch-no-such-image:1" in (attempt.message or "")
    with store.read() as s:
        messages = [e.message for e in s.exec(select(Event).where(Event.job_id == job.id).order_by(col(Event.id)))]
    assert any("cannot pull image" in m and "localhost/gpuorch-no-such-image" in m for m in messages), messages
    assert e2e.job_status(store, job.id) == JobStatus.FAILED


def test_terminating_a_local_instance_removes_its_container(store, tmp_path, podman_image):
    local, rec = daemon(store, tmp_path)
    spec = parse_spec({"name": "sleeper", "run": "sleep 600", "image": podman_image,
                       "resources": {"gpu": "A100:80GB:1"}})
    job = jobs.submit(store, spec, rec.clock.now())
    e2e.passes_until(rec.run_pass, lambda: containers(job.id) != [], what="the container to start")
    [attempt] = e2e.attempts(store, job.id)
    local.terminate(attempt.instance_id)
    assert containers(job.id) == []


def test_the_notice_reaches_a_worker_behind_a_launcher_inside_the_container(tmp_path, podman_image):
    """The signal proxy applies the agent's rule inside: the launcher (no handler) survives, the
    worker in a session of its own gets the signal; the container's exit is the worker's."""
    from test_notice_targets import LAUNCHER, WORKER

    from gpuorch.agent.container import container_env, run_argv
    from gpuorch.agent.job import notify_job, spawn_argv
    from gpuorch.testing.contract import wait_until

    config = local_container()
    config.image = podman_image
    env = python_env()
    name = f"gpuorch-test-proxy-{tmp_path.name[-12:]}"
    argv = run_argv(config, name=name, command=f'"$PY" -c \'{LAUNCHER}\' \'{WORKER}\'', env=env,
                    mounts=[str(tmp_path)], workdir=str(tmp_path), gpus=False)
    proc = spawn_argv(argv, tmp_path, {**os.environ, **container_env(env, env)}, tmp_path / "job.log")
    try:
        wait_until(lambda: (tmp_path / "ready").exists(), timeout_s=60, what="the worker in the container")
        notify_job(proc, signal.SIGUSR1)
        assert proc.wait(timeout=60) == 0, (tmp_path / "job.log").read_text()
        assert (tmp_path / "checkpointed").exists()
    finally:
        subprocess.run([*PODMAN, "rm", "--force", name], capture_output=True, check=False)


def test_setup_runs_in_the_jobs_container_so_what_it_installs_is_there(store, tmp_path, podman_image):
    _, rec = daemon(store, tmp_path)
    spec = parse_spec({"name": "setup-box", "image": podman_image, "resources": {"gpu": "A100:80GB:1"},
                       "setup": "mkdir -p /opt/tool && echo installed > /opt/tool/marker",
                       "run": "test -e /run/.containerenv && cat /opt/tool/marker"})
    job = jobs.submit(store, spec, rec.clock.now())
    e2e.passes_until(rec.run_pass, lambda: e2e.job_status(store, job.id).terminal)
    assert e2e.job_status(store, job.id) == JobStatus.SUCCEEDED
    assert "installed" in LogMirror(tmp_path).path(job.id, 1).read_text()
