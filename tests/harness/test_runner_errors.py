"""A runner error that will never clear ends the attempt at once, with its cause, through the
daemon ``gpuorch daemon`` builds (issue 31). Before, a workdir the local runner could not copy (a
FIFO inside, or deleted after submit) left the job ``starting`` with its instance billing until
the boot timeout, relaunched again and again, with no event naming the cause. ``submit`` refuses
such a workdir when it can know (one line, exit 2, nothing stored)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from gpuorch.cli import app
from gpuorch.errors import UserInputError
from gpuorch.store.models import JobStatus, TerminationReason
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events

pytestmark = pytest.mark.timeout(300)


def _spec(workdir, name="wd"):
    return {"name": name, "run": "cat input.txt", "workdir": str(workdir), "resources": {"gpu": "A100:80GB:1"},
            "spot_policy": "on-demand"}


def _workdir(tmp_path):
    wd = tmp_path / "wd"
    (wd / "data").mkdir(parents=True)
    (wd / "input.txt").write_text("hello\n")
    return wd


def _ends_failed_at_once(d, job_id, cause):
    """The attempt ends FAILED with ``cause`` (an event says it), its instance terminated, and the
    job fails (retry.max_failures 0): no boot timeout, no relaunch."""
    done = d.until_terminal(job_id)
    assert done.status == JobStatus.FAILED, d.attempts(job_id)
    (a,) = d.attempts(job_id)  # not relaunched
    assert a.reason == TerminationReason.FAILED and cause in (a.message or ""), a.message
    assert "not reachable" not in (a.message or "")  # ended by the cause, not by the boot timeout
    [note] = events(d.store, "start_failed", job_id)
    assert cause in note.message and note.attempt == a.number
    inst = d.adapter("local").get(a.instance_id)
    assert not inst.state.alive, inst.state  # terminated: nothing bills
    return a


def test_a_fifo_that_appears_after_submit_fails_the_attempt_at_once_and_names_it(tmp_path):
    wd = _workdir(tmp_path)
    with AssembledDaemon.start(tmp_path / "home") as d:
        job = d.submit(_spec(wd))
        os.mkfifo(wd / "data" / "pipe")  # after submit: only the runner can see it
        a = _ends_failed_at_once(d, job, "a FIFO at data/pipe cannot be copied; remove it")
        assert f"workdir {wd}" in (a.message or "")


def test_a_workdir_deleted_after_submit_fails_the_attempt_at_once_and_says_so(tmp_path):
    wd = _workdir(tmp_path)
    with AssembledDaemon.start(tmp_path / "home") as d:
        job = d.submit(_spec(wd))
        shutil.rmtree(wd)
        _ends_failed_at_once(d, job, f"workdir {wd}: does not exist")


def test_a_good_workdir_still_runs_and_its_files_reach_the_job(tmp_path):
    wd = _workdir(tmp_path)
    (wd / "link").symlink_to("input.txt")  # a link is copied as a link: fine
    with AssembledDaemon.start(tmp_path / "home") as d:
        job = d.submit({**_spec(wd), "run": "cat link"})
        done = d.until_terminal(job)
        assert done.status == JobStatus.SUCCEEDED, d.attempts(job)
        assert events(d.store, "start_failed", job) == []


@pytest.mark.parametrize("make", ["fifo", "socket", "missing", "file"])
def test_submit_refuses_a_workdir_no_runner_can_copy_with_one_line_and_stores_nothing(tmp_path, make):
    wd = _workdir(tmp_path)
    if make == "fifo":
        os.mkfifo(wd / "data" / "pipe")
    elif make == "socket":
        import socket

        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(wd / "data" / "s"))
    elif make == "missing":
        shutil.rmtree(wd)
    else:
        shutil.rmtree(wd)
        wd.write_text("not a directory\n")
    with AssembledDaemon.start(tmp_path / "home") as d:
        with pytest.raises(UserInputError) as info:
            d.submit(_spec(wd))
        line = str(info.value)
        assert "\n" not in line and "workdir:" in line and str(wd) in line
        assert ("remove it" in line) if make in ("fifo", "socket") else ("directory" in line or "exist" in line)
        assert d.service.jobs() == []


def test_cli_submit_of_a_workdir_with_a_fifo_exits_2_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUORCH_HOME", str(tmp_path / "home"))
    wd = _workdir(tmp_path)
    os.mkfifo(wd / "data" / "pipe")
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({**_spec("wd"), "workdir": "wd"}))
    cli = CliRunner()
    r = cli.invoke(app, ["submit", str(spec)])
    assert r.exit_code == 2, r.output
    [line] = r.output.strip().splitlines()
    assert "workdir:" in line and "a FIFO at data/pipe cannot be copied; remove it" in line
    assert json.loads(cli.invoke(app, ["status", "--json"]).output)["jobs"] == []


def test_the_ssh_runner_refuses_to_pack_a_workdir_with_a_fifo_for_good(tmp_path):
    """The SSH runner's equivalent: its start packs the workdir on this host first, and a workdir
    that cannot be copied is a PermanentError there too (the reconciler then ends the attempt)."""
    from gpuorch.errors import PermanentError
    from gpuorch.runners.ssh import _pack

    wd = _workdir(tmp_path)
    os.mkfifo(wd / "data" / "pipe")
    with pytest.raises(PermanentError, match="a FIFO at data/pipe cannot be copied") as info:
        _pack(wd, tmp_path / "w.tar.gz")
    assert info.value.code == "InvalidWorkdir"
    shutil.rmtree(wd)
    with pytest.raises(PermanentError, match="does not exist"):
        _pack(wd, tmp_path / "w.tar.gz")
