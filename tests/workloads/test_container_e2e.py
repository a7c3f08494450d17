"""A real container job on the local provider, through the assembled daemon (``gpuorch.testing.daemon``,
the local provider's ``container`` options in its config file) and the real agent: the
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

from gpuorch.jobs.logmirror import LogMirror
from gpuorch.store.models import AttemptStatus, Checkpoint, Event, JobStatus, TerminationReason
from gpuorch.testing import e2e
from gpuorch.testing.daemon import AssembledDaemon

pytestmark = pytest.mark.container

ENV = {"STEPS": "300", "CKPT_EVERY": "40", "STEP_SLEEP": "0.03", "SEED": "7"}
# /run/.containerenv exists only inside a podman container: the job refuses to run anywhere else.
RUN = 'test -e /run/.containerenv && cat /proc/1/cmdline > pid1.txt && "$PY" train.py'


def daemon(tmp_path) -> AssembledDaemon:
    """The daemon with this host's podman as the local provider's container runtime."""
    c = local_container()
    return AssembledDaemon.start(tmp_path / "home", {"providers": {"local": {"container": {
        "runtime": c.runtime, "run_args": c.run_args, "gpus": c.gpus}}}})


def containers(d: AssembledDaemon, job_id: int) -> list[str]:
    """The names of this daemon's containers of the job (other tests' daemons have a job of that id too)."""
    labels = ["--filter", f"label=gpuorch.job={job_id}",
              "--filter", f"label=gpuorch.installation={d.store.installation_id}"]
    out = subprocess.run([*PODMAN, "ps", "--all", *labels, "--format", "{{.Names}}"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_container_job_checkpoints_is_preempted_and_resumes_with_the_same_loss(tmp_path, podman_image):
    with daemon(tmp_path) as d:
        job = d.submit({"name": "mlp-box", "run": RUN, "workdir": str(e2e.TINY_MLP), "image": podman_image,
                        "env": {**ENV, **python_env()}, "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "spot",
                        "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "1s"}})
        d.until(lambda: d.attempts(job) and d.attempts(job)[-1].last_checkpoint is not None)
        first = d.attempts(job)[-1]
        owner = d.store.installation_id[:12]
        assert containers(d, job) == [f"gpuorch-{owner}-{job}-1-running"]  # the job runs in the container
        local = d.adapter("local")
        local.inject_preemption(first.instance_id, notice_s=15)
        d.until(lambda: len(d.attempts(job)) == 2)
        done = d.until_terminal(job)

        a1, a2 = d.attempts(job)
        assert a1.reason == TerminationReason.PREEMPTED and a2.reason == TerminationReason.SUCCEEDED, (a1, a2)
        with d.store.read() as s:
            final = s.exec(select(Checkpoint).where(Checkpoint.job_id == job, Checkpoint.final == True)).one()  # noqa: E712
        assert a2.resumed_from == final.name  # the checkpoint taken on the notice, inside the container
        assert a1.lost_work_s is not None and a1.lost_work_s < 5
        assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0
        assert json.loads(done.result)["final_loss"] == e2e.tiny_mlp_reference(tmp_path, ENV)  # bitwise
        log = LogMirror(d.config.home).path(job, 2).read_text()
        assert "resuming from" in log
        assert [i for i in local.list_managed() if i.state.alive] == []
        assert containers(d, job) == []  # none left running, the preempted attempt's included
        pid1 = (local.instances_dir / a2.instance_id / "run" / "work" / "pid1.txt").read_bytes()
    assert pid1.startswith(b"/bin/sh\0-c\0")  # PID 1 was the signal proxy, in the container


def test_a_missing_image_fails_the_attempt_with_the_runtimes_message_and_no_retry(tmp_path, podman_image):
    with daemon(tmp_path) as d:
        job = d.submit({"name": "no-image", "run": "echo never", "image": "localhost/gpuorch-no-such-image:1",
                        "resources": {"gpu": "A100:80GB:1"}, "retry": {"max_preemptions": 5}})
        d.until_terminal(job)
        [attempt] = d.attempts(job)
        with d.store.read() as s:
            messages = [e.message for e in s.exec(select(Event).where(Event.job_id == job).order_by(col(Event.id)))]
        status = d.status(job)
    assert attempt.status == AttemptStatus.ENDED and attempt.reason == TerminationReason.FAILED
    assert "cannot pull image localhost/gpuorch-no-such-image:1" in (attempt.message or "")
    assert any("cannot pull image" in m and "localhost/gpuorch-no-such-image" in m for m in messages), messages
    assert status == JobStatus.FAILED


def test_terminating_a_local_instance_removes_its_container(tmp_path, podman_image):
    with daemon(tmp_path) as d:
        job = d.submit({"name": "sleeper", "run": "sleep 600", "image": podman_image,
                        "resources": {"gpu": "A100:80GB:1"}})
        d.until(lambda: containers(d, job) != [], what="the container to start")
        [attempt] = d.attempts(job)
        d.adapter("local").terminate(attempt.instance_id)
        assert containers(d, job) == []


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


def test_setup_runs_in_the_jobs_container_so_what_it_installs_is_there(tmp_path, podman_image):
    with daemon(tmp_path) as d:
        job = d.submit({"name": "setup-box", "image": podman_image, "resources": {"gpu": "A100:80GB:1"},
                        "setup": "mkdir -p /opt/tool && echo installed > /opt/tool/marker",
                        "run": "test -e /run/.containerenv && cat /opt/tool/marker"})
        assert d.until_terminal(job).status == JobStatus.SUCCEEDED
        assert "installed" in LogMirror(d.config.home).path(job, 1).read_text()
