"""The SSH runner driving the real agent through a real sshd: start (idempotent, detached),
status, logs, heartbeat, quoting, and checkpoints restored from and uploaded to S3 (moto) and
GCS (gcp-storage-emulator)."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from gcs_emulator import GcsEmulator
from moto_s3 import MotoS3
from ssh_harness import config, wait_status

from gpuorch.agent.protocol import NoticeSource
from gpuorch.checkpoint import COMPLETE, download, latest, open_store, upload
from gpuorch.runners.ssh import SshRunner

pytestmark = pytest.mark.aws
Make = Callable[..., SshRunner]


def rundir(runner: SshRunner) -> Path:
    return Path(runner.remote_root) / "run"


def test_start_runs_the_job_and_status_log_heartbeat_work(make_runner: Make, tmp_path: Path):
    workdir = tmp_path / "src"
    (workdir / "lib").mkdir(parents=True)
    (workdir / "lib" / "data.txt").write_text("payload\n")
    script = workdir / "hello.sh"
    script.write_text("#!/bin/sh\necho hello from $GPUORCH_JOB_NAME\ncat lib/data.txt\n"
                      'printf "%s" "${SSH_CONNECTION-none}" > ssh.txt\n')
    script.chmod(0o755)
    runner = make_runner(notice=NoticeSource(kind="file", path="notice.json", poll_s=0.2))
    runner.start(config(job_name="greeter", run="./hello.sh"), workdir)

    status = wait_status(runner, lambda s: s.state == "exited")
    assert status.exit_code == 0
    data, offset = runner.read_log()
    assert data == b"hello from greeter\npayload\n" and offset == len(data)
    assert runner.read_log(6) == (data[6:], len(data))
    assert runner.read_log(offset) == (b"", offset)
    assert runner.read_log(0, limit=5) == (b"hello", 5)

    remote = rundir(runner)
    assert stat.S_IMODE((remote / "work" / "hello.sh").stat().st_mode) == 0o755  # modes survive the upload
    assert (remote / "work" / "ssh.txt").read_text() == "none"  # the agent left the SSH session behind
    written = json.loads((remote / "agent.json").read_text())
    assert written["notice"]["kind"] == "file" and written["job_name"] == "greeter"
    assert not [p.name for p in remote.iterdir() if p.name.startswith(".")]  # no upload temp files left

    before = time.time()
    runner.heartbeat()
    assert (remote / "heartbeat").stat().st_mtime >= before - 1


def test_the_notice_source_defaults_to_none(make_runner: Make):
    """The core names no cloud: each adapter hands its runners its own notice kind."""
    runner = make_runner(notice=None, shutdown_command="sudo -n shutdown -h now")
    runner.start(config(run="true", heartbeat_timeout_s=600))
    written = json.loads((rundir(runner) / "agent.json").read_text())
    assert written["notice"]["kind"] == "none" and written["shutdown_command"] == "sudo -n shutdown -h now"
    wait_status(runner, lambda s: s.state != "starting", timeout=20)


def test_start_is_idempotent_even_when_concurrent(make_runner: Make):
    count = "echo started >> ../starts.txt"
    runners = [make_runner() for _ in range(3)]
    threads = [threading.Thread(target=r.start, args=(config(run=count),)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_status(runners[0], lambda s: s.state == "exited")
    runners[0].start(config(run="echo second >> ../starts.txt"))  # already started: nothing happens
    time.sleep(0.3)
    assert (rundir(runners[0]) / "starts.txt").read_text() == "started\n"
    assert "second" not in (rundir(runners[0]) / "agent.json").read_text()


def parent_pid(pid: int) -> int:
    stat_line = Path(f"/proc/{pid}/stat").read_text()
    return int(stat_line.rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process details from /proc")
def test_the_agent_survives_the_ssh_connection(make_runner: Make):
    runner = make_runner()
    runner.start(config(run="sleep 1.5; echo finished > done.txt"))
    job_pid = wait_status(runner, lambda s: s.state == "running" and s.pid is not None).pid
    assert job_pid is not None
    agent_pid = parent_pid(job_pid)
    assert os.getsid(agent_pid) == agent_pid  # a session of its own: no SIGHUP from the login's
    stdio = {os.readlink(f"/proc/{agent_pid}/fd/{fd}") for fd in (0, 1, 2)}
    assert stdio == {"/dev/null", str(rundir(runner) / "agent.out")}  # nothing tied to the SSH channel
    runner.close()  # the daemon goes away (or its connection drops)
    time.sleep(0.3)
    later = make_runner()  # a fresh connection, as the next reconciler pass would make
    status = wait_status(later, lambda s: s.state == "exited")
    assert status.exit_code == 0 and (rundir(later) / "work" / "done.txt").read_text() == "finished\n"


def test_names_commands_paths_and_env_are_never_interpreted_by_the_remote_shell(make_runner: Make,
                                                                                tmp_path: Path):
    trap = tmp_path / "PWNED"
    nasty = f"it's \"$(touch {trap})\" `touch {trap}` $HOME; touch {trap} & |"
    root = tmp_path / f"remote root 'q' \"$(touch {trap})\" ;x"
    runner = make_runner(remote_root=str(root))
    command = ('printf "%s" "$GPUORCH_JOB_NAME" > name.txt; printf "%s" "$WEIRD" > env.txt; '
               'echo "$(echo sub) \'q\'" > out.txt')
    runner.start(config(job_name=nasty, run=command, env={"WEIRD": nasty}))  # the job's env (the agent's stays out)
    status = wait_status(runner, lambda s: s.state == "exited")
    work = root / "run" / "work"
    assert status.exit_code == 0
    assert (work / "name.txt").read_text() == nasty
    assert (work / "env.txt").read_text() == nasty
    assert (work / "out.txt").read_text() == "sub 'q'\n"  # the job's own command is run by bash, as written
    assert not trap.exists()


def test_a_missing_interpreter_is_reported_by_start(make_runner: Make):
    from gpuorch.runners.port import RunnerUnavailable

    runner = make_runner(python="/nonexistent/python3")
    with pytest.raises(RunnerUnavailable, match=r"needs Python 3.8\+ as '/nonexistent/python3'"):
        runner.start(config())
    assert not (rundir(runner) / "agent.json").exists()  # not claimed: a later start may succeed


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[MotoS3]:
    server = MotoS3()
    yield server
    server.stop()


def make_checkpoint(root: Path, name: str, step: int, state: str) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "state").write_text(state)
    (d / COMPLETE).write_text(json.dumps({"step": step}))
    return d


# The job resumes from what the agent restored and writes the next checkpoint.
RESUME_AND_CHECKPOINT = (
    'test "$GPUORCH_RESUMED_FROM" = step-1; n=$(cat "$GPUORCH_CHECKPOINT_DIR/step-1/state"); '
    'd="$GPUORCH_CHECKPOINT_DIR/step-2"; mkdir "$d"; echo $((n + 1)) > "$d/state"; '
    'echo \'{"step": 2}\' > "$d/COMPLETE"')


def test_the_agent_restores_from_and_uploads_to_s3(make_runner: Make, moto_s3: MotoS3, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    for name, value in moto_s3.env.items():
        monkeypatch.setenv(name, value)  # for this process's view of the store
    url = f"s3://{moto_s3.new_bucket()}/jobs/ft-1"
    store, prefix = open_store(url)
    upload(store, prefix, make_checkpoint(tmp_path / "previous", "step-1", 1, "41"), attempt=1)

    # The instance would use its instance profile; this test hands the agent moto's fake keys.
    runner = make_runner(agent_env=moto_s3.env)
    runner.start(config(attempt=2, run=RESUME_AND_CHECKPOINT, checkpoint_url=url, sync_interval_s=0.5))
    status = wait_status(runner, lambda s: s.state in ("exited", "failed"), timeout=20)
    assert (status.state, status.exit_code, status.restored_from) == ("exited", 0, "step-1")
    assert status.uploaded == ["step-2"]
    newest = latest(store, prefix)
    assert newest is not None and (newest.name, newest.step, newest.attempt) == ("step-2", 2, 2)


@pytest.fixture(scope="module")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsEmulator]:
    server = GcsEmulator(tmp_path_factory.mktemp("gcs"))
    yield server
    server.stop()


@pytest.mark.gcp
def test_the_agent_restores_from_and_uploads_to_gcs(make_runner: Make, gcs_emulator: GcsEmulator, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GPUORCH_GCS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in gcs_emulator.env.items():
        monkeypatch.setenv(name, value)  # for this process's view of the store
    url = f"gs://{gcs_emulator.new_bucket()}/jobs/ft-1"
    store, prefix = open_store(url)
    upload(store, prefix, make_checkpoint(tmp_path / "previous", "step-1", 1, "41"), attempt=1)

    # The VM would use its service account; this test points the agent at the emulator (no credentials).
    runner = make_runner(agent_env=gcs_emulator.env)
    runner.start(config(attempt=2, run=RESUME_AND_CHECKPOINT, checkpoint_url=url, sync_interval_s=0.5))
    status = wait_status(runner, lambda s: s.state in ("exited", "failed"), timeout=20)
    assert (status.state, status.exit_code, status.restored_from, status.error) == ("exited", 0, "step-1", None)
    assert status.uploaded == ["step-2"]
    newest = latest(store, prefix)
    assert newest is not None and (newest.name, newest.step, newest.attempt) == ("step-2", 2, 2)
    restored = download(store, prefix, newest, tmp_path / "restore")
    assert (restored / "state").read_text().strip() == "42"
