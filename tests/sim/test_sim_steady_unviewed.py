"""A steady running job is kept without building its view (``SteadyJobs.held``,
``Reconciler._held``): the next pass does not view it or read its rows, yet its log is mirrored
and its heartbeat goes out; any change (its agent's status file, a notice, a price refresh, a
write on its rows) makes it viewed again at once. Counts, never time.

Real SimProvider (``agents: external``), real SQLite; the agents played by writing their files,
as in test_sim_steady.py (whose helpers this uses).

Bare Reconciler: the steady pass's memos and query counts are read off the reconciler object on a
SimProvider the test builds.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from sqlmodel import select
from test_sim_steady import SIM, play_agent, run_dir, running

from gpuorch.agent.protocol import JOB_LOG
from gpuorch.clock import FakeClock
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.logmirror import LogMirror
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, TerminationReason


def counting(rec: Reconciler) -> dict[str, list[int]]:
    """Record the job ids ``_view`` builds and ``rows.load_attempts`` reads, from now on."""
    seen: dict[str, list[int]] = {"viewed": [], "loaded": []}
    view, load = rec._view, rec.rows.load_attempts

    def viewed(job, observed, ok):  # type: ignore[no-untyped-def]
        seen["viewed"].append(job.id)
        return view(job, observed, ok)

    def loaded(ids):  # type: ignore[no-untyped-def]
        seen["loaded"].extend(ids)
        return load(ids)

    rec._view = viewed  # type: ignore[method-assign]
    rec.rows.load_attempts = loaded  # type: ignore[method-assign]
    return seen


def steady(rec: Reconciler, n: int) -> None:
    """Passes until every job is kept steady (the first passes after the ramp may correct billing)."""
    for _ in range(5):
        rec.run_pass()
        if rec.steady.skipped == n:
            return
    raise AssertionError(f"not steady: {rec.steady.skipped} of {n} skipped")


def test_an_unchanged_running_job_is_not_viewed_and_its_rows_not_read_in_the_next_pass(store, make_sim, tmp_path):
    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    running(store, sim, rec, 4, tmp_path)
    steady(rec, 4)
    seen = counting(rec)
    rec.run_pass()
    rec.run_pass()
    assert rec.steady.skipped == 4
    assert seen == {"viewed": [], "loaded": []}


def test_a_changed_status_file_a_notice_and_a_price_refresh_each_make_a_job_viewed_again(store, make_sim, tmp_path):
    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    changed, noticed, quiet = running(store, sim, rec, 3, tmp_path)
    steady(rec, 3)
    seen = counting(rec)
    play_agent(run_dir(store, sim, changed), pid=4242)  # a new status.json: a new AgentStatus object
    with store.read() as s:
        inst = s.exec(select(Attempt).where(Attempt.job_id == noticed)).one().instance_id
    sim.inject_preemption(inst, 120.0)  # a new instance record: a new Instance object
    rec.run_pass()
    assert sorted(seen["viewed"]) == sorted([changed, noticed])  # the quiet one is not viewed
    seen["viewed"].clear()
    rec.run_pass()
    assert quiet not in seen["viewed"]
    rec.invalidate_offers()  # a catalog refresh: new offers and seen_at, so prices are tracked on a view
    seen["viewed"].clear()
    rec.run_pass()
    assert quiet in seen["viewed"]
    seen["viewed"].clear()
    rec.run_pass()
    assert quiet not in seen["viewed"]  # steady again on the new catalog


def test_an_unviewed_job_still_gets_its_log_mirrored_and_its_heartbeats(store, make_sim, tmp_path):
    sim = make_sim(**SIM)
    clock = FakeClock(datetime.now(UTC))  # the daemon's time; the sim's instances live in wall time
    logs = LogMirror(tmp_path / "daemon")
    rec = Reconciler(store, {"sim": sim}, clock=clock, settings=Settings(heartbeat_timeout_s=40.0), logs=logs)
    (job_id,) = running(store, sim, rec, 1, tmp_path)
    seen = counting(rec)
    for _ in range(10):  # until a pass views nothing: the daemon's fake clock passes the sim's wall-clock
        clock.advance(2)  # launch time first (until then billing is checked, and corrected, on a view)
        seen["viewed"].clear()
        rec.run_pass()
        if not seen["viewed"]:
            break
    assert seen["viewed"] == []
    run = run_dir(store, sim, job_id)
    with open(run / JOB_LOG, "ab") as f:
        f.write(b"epoch 1\n")
    clock.advance(2)
    rec.run_pass()
    assert logs.path(job_id, 1).read_bytes().endswith(b"epoch 1\n")
    beat = run / "heartbeat"
    beats = {beat.stat().st_mtime_ns}
    for _ in range(15):  # 30 s of passes every 2 s: a heartbeat every 10 s
        clock.advance(2)
        time.sleep(0.01)  # distinct mtimes on a coarse file system clock
        rec.run_pass()
        beats.add(beat.stat().st_mtime_ns)
    assert seen["viewed"] == []
    assert len(beats) - 1 == 3


def test_a_job_under_a_daily_cap_is_viewed_every_pass(store, make_sim, tmp_path):
    """Its money gate reads the ledger, which grows with time: never kept without a view."""
    from gpuorch.money.caps import Policy

    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim}, budget=Policy(daily_cap=1000.0))
    (job_id,) = running(store, sim, rec, 1, tmp_path)
    seen = counting(rec)
    for _ in range(3):
        rec.run_pass()
    assert seen["viewed"] == [job_id] * 3


def test_a_booting_job_is_kept_without_its_view_until_its_boot_deadline(store, make_sim, tmp_path):
    """A launched job whose agent never answers (a queue drain's, issue 18) is kept on identity
    checks once its agent start went through: no view, no row read; the boot deadline still ends
    the attempt on time, and an agent that answers is seen at once."""
    sim = make_sim(**SIM)
    clock = FakeClock(datetime.now(UTC))
    rec = Reconciler(store, {"sim": sim}, clock=clock, settings=Settings(boot_timeout_s=120.0))
    spec = {"run": "python train.py", "spot_policy": "on-demand", "providers": ["sim"],
            "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "10m"}}
    ids = [jobs.submit(store, parse_spec({**spec, "name": f"j{i}"}), clock.now()).id for i in range(3)]
    seen = counting(rec)
    for _ in range(10):  # launch, start the agents (never played), until a pass views nothing
        clock.advance(2)
        seen["viewed"].clear()
        rec.run_pass()
        if not seen["viewed"]:
            break
    assert seen["viewed"] == [] and rec.steady.skipped == 3
    seen["loaded"].clear()
    for _ in range(3):
        clock.advance(2)
        rec.run_pass()
    assert seen == {"viewed": [], "loaded": []} and rec.steady.skipped == 3
    play_agent(run_dir(store, sim, ids[0]))  # one agent answers: its job is viewed, and runs
    clock.advance(2)
    rec.run_pass()
    assert seen["viewed"] == [ids[0]]
    with store.read() as s:
        assert s.get(Job, ids[0]).status == JobStatus.RUNNING  # type: ignore[union-attr]
    clock.advance(120)  # past the others' boot deadline: viewed, and their attempts ended as lost
    seen["viewed"].clear()
    rec.run_pass()
    assert set(ids[1:]) <= set(seen["viewed"])  # (the running one may be too: its agent is 2 min quiet)
    with store.read() as s:
        ended = {a.job_id: (a.status, a.reason) for a in s.exec(select(Attempt)) if a.number == 1}
    assert ended[ids[1]] == ended[ids[2]] == (AttemptStatus.ENDED, TerminationReason.LOST)
