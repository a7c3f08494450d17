"""The change signal for agents' run directories (``localdir.watch.RunDirWatch``, issue 18): a
steady pass reads no file of an agent that wrote nothing, yet sees at once what one wrote.

Real inotify on real directories, the real SimProvider (``agents: external``) and SQLite; the
agents played by writing their files, as in test_sim_steady.py (whose helpers this uses). File
reads are counted by wrapping the runner's one read path; nothing is timed.

Bare Reconciler: the steady pass's reads are counted on a SimProvider built with options the test
inspects directly.
"""

from __future__ import annotations

import pytest
from test_sim_steady import SIM, run_dir, running
from test_sim_steady_unviewed import steady

from gpuorch.agent.protocol import HEARTBEAT_FILE, JOB_LOG, METRICS_FILE, STATUS_FILE
from gpuorch.jobs.logmirror import PULL_LIMIT, LogMirror
from gpuorch.provider.localdir import LocalRunner
from gpuorch.provider.localdir.watch import RunDirWatch
from gpuorch.reconciler import Reconciler

NAMES = (STATUS_FILE, JOB_LOG, METRICS_FILE)


class Ticks:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def watch():  # type: ignore[no-untyped-def]
    w = RunDirWatch(NAMES, full_s=60.0, clock=Ticks())
    if not w.available:
        pytest.skip("no inotify here")
    yield w
    w.close()


def test_the_first_look_reads_everything_then_only_what_an_agent_wrote(watch, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert watch.add("a", str(a)) and watch.add("b", str(b))
    assert watch.changes() is None  # nothing known yet: read everything
    assert watch.changes() == set()
    (a / STATUS_FILE).write_text("{}")
    (b / HEARTBEAT_FILE).write_text("1")  # the daemon's own file: not the agent's news
    assert watch.changes() == {"a"}
    with open(b / JOB_LOG, "ab") as f:
        f.write(b"step 1\n")
    (a / METRICS_FILE).write_text('{"loss": 1}\n')
    assert watch.changes() == {"a", "b"}
    assert watch.changes() == set()


def test_a_directory_that_goes_is_reported_and_unwatched(watch, tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    watch.add("a", str(a))
    watch.changes()
    a.rmdir()
    assert watch.changes() == {"a"}
    assert not watch.watching("a")
    assert not watch.add("a", str(a))  # not there: never reported quiet, its reader reads it


def test_everything_counts_as_changed_once_a_minute(watch, tmp_path):
    a = tmp_path / "a"
    a.mkdir()
    watch.add("a", str(a))
    watch.changes()
    watch.clock.t = 59.0  # type: ignore[attr-defined]
    assert watch.changes() == set()
    watch.clock.t = 60.5  # type: ignore[attr-defined]
    assert watch.changes() is None


def test_keep_drops_the_watches_of_keys_no_longer_asked(watch, tmp_path):
    for k in "ab":
        (tmp_path / k).mkdir()
        watch.add(k, str(tmp_path / k))
    watch.changes()
    watch.keep({"b"})
    assert not watch.watching("a") and watch.watching("b")
    (tmp_path / "a" / STATUS_FILE).write_text("{}")
    assert watch.changes() == set()


def counting_reads(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """The run-dir files the local runner reads (a stat at least) from now on."""
    seen: list[str] = []
    read, listed = LocalRunner._read, LocalRunner.listed_status

    def _read(self, name, offset, limit):  # type: ignore[no-untyped-def]
        seen.append(name)
        return read(self, name, offset, limit)

    def listed_status(self):  # type: ignore[no-untyped-def]
        seen.append(STATUS_FILE)
        return listed(self)

    monkeypatch.setattr(LocalRunner, "_read", _read)
    monkeypatch.setattr(LocalRunner, "listed_status", listed_status)
    return seen


def test_a_steady_pass_reads_no_file_of_a_quiet_agent_and_mirrors_a_new_log_line(store, make_sim, tmp_path,
                                                                                monkeypatch):
    sim = make_sim(**SIM)
    logs = LogMirror(tmp_path / "daemon")
    rec = Reconciler(store, {"sim": sim}, logs=logs)
    talking, quiet = running(store, sim, rec, 2, tmp_path)
    steady(rec, 2)
    rec.run_pass()
    seen = counting_reads(monkeypatch)
    rec.run_pass()
    assert seen == []  # before the signal: three files of each agent, every pass
    with open(run_dir(store, sim, talking) / JOB_LOG, "ab") as f:
        f.write(b"epoch 1\n")
    rec.run_pass()
    assert logs.path(talking, 1).read_bytes().endswith(b"epoch 1\n")
    assert STATUS_FILE in seen and JOB_LOG in seen
    assert rec.steady.skipped == 2  # still kept unviewed: only its log was new
    seen.clear()
    rec.run_pass()
    assert seen == []
    assert not logs.path(quiet, 1).exists()


def test_a_log_longer_than_one_pull_is_mirrored_whole_with_no_further_write(store, make_sim, tmp_path):
    sim = make_sim(**SIM)
    logs = LogMirror(tmp_path / "daemon")
    rec = Reconciler(store, {"sim": sim}, logs=logs)
    (job_id,) = running(store, sim, rec, 1, tmp_path)
    steady(rec, 1)
    rec.run_pass()
    data = b"x" * 99 + b"\n"
    with open(run_dir(store, sim, job_id) / JOB_LOG, "ab") as f:
        f.write(data * (2 * PULL_LIMIT // len(data) + 3))  # three pulls' worth, written once
    for _ in range(4):
        rec.run_pass()
    assert logs.path(job_id, 1).stat().st_size == (run_dir(store, sim, job_id) / JOB_LOG).stat().st_size


def test_the_provider_answers_with_the_same_object_while_an_agent_wrote_nothing(store, make_sim, tmp_path):
    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    talking, quiet = running(store, sim, rec, 2, tmp_path)
    listed = [i for i in sim._list() if i.state.alive]
    sim.agent_statuses(listed)  # the first call reads everything
    first = sim.agent_statuses(listed)
    (run_dir(store, sim, talking) / METRICS_FILE).write_text('{"loss": 0.5}\n')
    second = sim.agent_statuses(listed)
    ids = {i.tags["gpuorch:job"]: i.id for i in listed}
    assert second[ids[str(quiet)]] is first[ids[str(quiet)]]
    assert second[ids[str(talking)]] is not first[ids[str(talking)]]


def test_a_job_kept_unviewed_with_nothing_new_is_kept_next_pass_on_identity_alone(store, make_sim, tmp_path,
                                                                                 monkeypatch):
    """``QuietJobs``: no ``held`` / ``kept_unviewed`` for it; any change still brings them back."""
    import gpuorch.reconciler.memo as module  # the memo calls kept_unviewed

    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    talking, quiet = running(store, sim, rec, 2, tmp_path)
    steady(rec, 2)
    rec.run_pass()
    calls: list[int] = []
    kept = module.kept_unviewed

    def counted(memo, job_id, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(job_id)
        return kept(memo, job_id, *args, **kwargs)

    monkeypatch.setattr(module, "kept_unviewed", counted)
    rec.run_pass()
    assert calls == [] and rec.steady.skipped == 2
    with open(run_dir(store, sim, talking) / JOB_LOG, "ab") as f:
        f.write(b"epoch 2\n")
    rec.run_pass()
    assert calls == [talking] and rec.steady.skipped == 2  # its read was new: the usual check, and a pull
    calls.clear()
    rec.run_pass()
    assert calls == [talking]  # kept unviewed with nothing to pull: noted quiet again
    calls.clear()
    rec.run_pass()
    assert calls == []


def test_a_listed_heartbeat_touches_the_file_without_reading_the_record(store, make_sim, tmp_path, monkeypatch):
    import os
    import time

    from gpuorch.provider.localdir.instances import InstanceDir

    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    (job_id,) = running(store, sim, rec, 1, tmp_path)
    (inst,) = [i for i in sim._list() if i.state.alive]
    runner = sim.runner(inst)
    beat = run_dir(store, sim, job_id) / HEARTBEAT_FILE
    runner.heartbeat()  # type: ignore[attr-defined]
    os.utime(beat, (time.time() - 100, time.time() - 100))
    reads: list[str] = []
    observe = InstanceDir.observe
    monkeypatch.setattr(InstanceDir, "observe", lambda self, now=None: reads.append(self.id) or observe(self, now))
    assert runner.capabilities.listed_heartbeat
    runner.listed_heartbeat()
    assert time.time() - beat.stat().st_mtime < 50 and reads == []
    runner.heartbeat()
    assert reads == [inst.id]  # the plain one checks the record
