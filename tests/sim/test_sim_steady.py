"""The steady pass over sim jobs skips decide for jobs whose observation did not change
(reconciler/steady.py), writes nothing, costs the same queries for 3 or 12 jobs, and still acts
at once on any change: a notice, an agent's new checkpoint, a cancel request.

Real SimProvider (``agents: external``, ``boot_s: 0``: this test plays the agents by writing
their ``status.json``, as bench/recovery.py does), real SQLite, the system clock (the sim's
instances live in wall time). Statements counted by a SQLAlchemy listener.

Bare Reconciler: the steady pass's memos and query counts are read off the reconciler object on a
SimProvider the test builds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sim_data import TRACES
from sqlalchemy import event
from sqlmodel import select

from gpuorch.agent.protocol import STATUS_FILE, AgentStatus, write_atomic
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Checkpoint, Job, JobStatus
from gpuorch_sim.provider import SimProvider

SIM = {"traces": str(TRACES), "agents": "external", "boot_s": 0}
WRITES = ("INSERT", "UPDATE", "DELETE", "BEGIN IMMEDIATE")


@contextmanager
def statements(store: Store) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn, cursor, statement, params, context, executemany):  # type: ignore[no-untyped-def]
        seen.append(statement.strip())

    for e in {store._read, store._write}:
        event.listen(e, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for e in {store._read, store._write}:
            event.remove(e, "before_cursor_execute", record)


def play_agent(run: Path, **fields: object) -> None:
    """Write the agent's status as the agent does, dated 10 s ago (settled: the runner keeps
    its parsed status while the file does not change)."""
    now = time.time()
    write_atomic(run / STATUS_FILE, AgentStatus(state="running", started_at=now, running_since=now, updated_at=now,
                                                **fields).to_json())  # type: ignore[arg-type]
    os.utime(run / STATUS_FILE, (now - 10, now - 10))


def settle_records(sim) -> None:  # type: ignore[no-untyped-def]
    """Date the instance records 10 s back, as the agents' statuses are: a record written less
    than SETTLE_S ago is read again at every listing (a rewrite in the same timestamp tick)."""
    past = time.time() - 10
    for d in sim.instances_dir.iterdir():
        if (d / "meta.json").exists():
            os.utime(d / "meta.json", (past, past))


def running(store: Store, sim, rec: Reconciler, n: int, tmp_path: Path) -> list[int]:  # type: ignore[no-untyped-def]
    spec = {"run": "python train.py", "spot_policy": "on-demand", "providers": ["sim"],
            "checkpoint": {"store": f"file://{tmp_path / 'ckpt'}", "interval": "10m"}}
    ids = [jobs.submit(store, parse_spec({**spec, "name": f"j{i}"}), rec.clock.now()).id for i in range(n)]
    for _ in range(20):
        rec.run_pass()
        for inst in sim._list():
            run = sim.instances_dir / inst.id / "run"
            if (run / "agent.json").exists() and not (run / STATUS_FILE).exists():
                play_agent(run)
        with store.read() as s:
            if [a.status for a in s.exec(select(Attempt))] == [AttemptStatus.RUNNING] * n:
                break
    settle_records(sim)
    rec.run_pass()  # the first pass that sees them running remembers their steady decisions
    return ids  # type: ignore[return-value]


def run_dir(store: Store, sim, job_id: int) -> Path:  # type: ignore[no-untyped-def]
    with store.read() as s:
        a = s.exec(select(Attempt).where(Attempt.job_id == job_id)).one()
    return sim.instances_dir / a.instance_id / "run"


def test_unchanged_sim_jobs_are_skipped_and_the_pass_writes_nothing(store, make_sim, tmp_path):
    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    running(store, sim, rec, 4, tmp_path)
    with statements(store) as seen:
        rec.run_pass()
        rec.run_pass()
    assert rec.steady.skipped == 4
    assert [s for s in seen if s.upper().startswith(WRITES)] == []


def test_a_steady_sim_pass_costs_the_same_queries_for_3_or_12_jobs(make_sim, tmp_path):
    counts = []
    for n in (3, 12):
        store = Store(f"sqlite:///{tmp_path / f'{n}.db'}")
        sim = make_sim(home=f"home{n}", **SIM)
        rec = Reconciler(store, {"sim": sim})
        running(store, sim, rec, n, tmp_path)
        with statements(store) as seen:
            rec.run_pass()
        assert rec.steady.skipped == n
        counts.append(len(seen))
        store.close()
    assert counts[0] == counts[1]


def test_a_notice_a_new_checkpoint_and_a_cancel_are_each_decided_in_the_next_pass(store, make_sim, tmp_path):
    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    noticed, checkpointed, cancelled, quiet = running(store, sim, rec, 4, tmp_path)
    with store.read() as s:
        inst = s.exec(select(Attempt).where(Attempt.job_id == noticed)).one().instance_id
    sim.inject_preemption(inst, 120.0)  # the instance's record changes: a new Instance object
    play_agent(run_dir(store, sim, checkpointed), uploaded=["ckpt-1"], last_checkpoint="ckpt-1",
               last_checkpoint_at=time.time())
    jobs.cancel(store, str(cancelled), rec.clock.now())
    rec.run_pass()
    assert rec.steady.skipped == 1  # only the quiet one
    with store.read() as s:
        status = {j.id: j.status for j in s.exec(select(Job))}
        attempts = {a.job_id: a.status for a in s.exec(select(Attempt).where(Attempt.number == 1))}
        names = list(s.exec(select(Checkpoint.name).where(Checkpoint.job_id == checkpointed)))
    assert attempts[noticed] == AttemptStatus.DRAINING and status[noticed] == JobStatus.RECOVERING
    assert names == ["ckpt-1"]
    assert status[cancelled] == JobStatus.CANCELLED
    assert status[quiet] == JobStatus.RUNNING
    rec.run_pass()  # the checkpointed job's rows were written, so read again: decided once more
    assert rec.steady.skipped == 1
    rec.run_pass()
    assert rec.steady.skipped == 2  # the quiet one, and the checkpointed one, steady again


class CountingSim(SimProvider):
    """The sim, counting how its agents' statuses are asked for."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.batches = self.singles = 0

    def agent_statuses(self, instances):  # type: ignore[no-untyped-def]
        self.batches += 1
        return super().agent_statuses(instances)

    def runner(self, instance):  # type: ignore[no-untyped-def]
        self.singles += 1
        return super().runner(instance)


def test_a_pass_reads_every_sim_agent_in_one_call(store, tmp_path):
    sim = CountingSim(tmp_path / "home" / "sim", SimProvider.from_config_options(SIM))
    try:
        rec = Reconciler(store, {"sim": sim})
        running(store, sim, rec, 5, tmp_path)
        sim.batches = sim.singles = 0
        rec.run_pass()
        assert (sim.batches, sim.singles) == (1, 0)  # five agents, one call; no runner asked on its own
        assert rec.steady.skipped == 5  # and the statuses are the runners' kept objects
    finally:
        for inst in sim._list():
            sim._terminate(inst.id)
        sim.stop_cloud()


def test_skipped_jobs_still_get_their_heartbeats_at_their_own_pace(store, make_sim, tmp_path):
    from datetime import UTC, datetime

    from gpuorch.clock import FakeClock
    from gpuorch.reconciler import Settings

    sim = make_sim(**SIM)
    clock = FakeClock(datetime.now(UTC))  # the daemon's time; the sim's instances live in wall time
    rec = Reconciler(store, {"sim": sim}, clock=clock, settings=Settings(heartbeat_timeout_s=40.0))  # every 10 s
    ids = running(store, sim, rec, 2, tmp_path)
    for _ in range(2):  # money corrects launched_at to the sim's wall-clock record once: a write, so decided again
        clock.advance(2)
        rec.run_pass()
    beats = {i: run_dir(store, sim, i) / "heartbeat" for i in ids}
    seen = {i: {path.stat().st_mtime_ns} for i, path in beats.items()}  # the ramp's last heartbeat
    skipped = []
    for _ in range(30):  # 60 s of passes every 2 s
        clock.advance(2)
        rec.run_pass()
        skipped.append(rec.steady.skipped)
        for i, path in beats.items():
            seen[i].add(path.stat().st_mtime_ns)
    assert skipped == [2] * 30  # never decided again...
    assert [len(v) - 1 for v in seen.values()] == [6, 6]  # ...yet a heartbeat every 10 s each, not every pass


class CountingMoney:
    """Counts the billing checks a reconciler's money step makes (the real step runs)."""

    def __init__(self, rec: Reconciler) -> None:
        self.calls = 0
        real = rec.money.record_billing

        def record_billing(view, now):  # type: ignore[no-untyped-def]
            self.calls += 1
            real(view, now)

        rec.money.record_billing = record_billing  # type: ignore[method-assign]


def test_skipped_jobs_do_not_check_their_billing_again_until_a_row_or_instance_changes(store, make_sim, tmp_path):
    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    ids = running(store, sim, rec, 3, tmp_path)
    for _ in range(2):  # money corrects launched_at to the sim's record once (a write): then steady
        rec.run_pass()
    counted = CountingMoney(rec)
    rec.run_pass()
    assert rec.steady.skipped == 3 and counted.calls == 0
    with store.read() as s:
        inst = s.exec(select(Attempt).where(Attempt.job_id == ids[0])).one().instance_id
    sim.inject_preemption(inst, 120.0)  # a new Instance object: its billing is looked at again
    rec.run_pass()
    assert counted.calls == 1


def test_billing_is_checked_every_pass_while_an_instance_time_lies_in_the_daemons_future(store, make_sim, tmp_path):
    from datetime import UTC, datetime

    from gpuorch.clock import FakeClock

    sim = make_sim(**SIM)
    clock = FakeClock(datetime.now(UTC))
    rec = Reconciler(store, {"sim": sim}, clock=clock)
    running(store, sim, rec, 2, tmp_path)
    clock.advance(-3600)  # the cloud's clock an hour ahead of ours (skew)
    counted = CountingMoney(rec)
    for _ in range(3):
        rec.run_pass()
    assert counted.calls == 6  # every job, every pass: a correction may become due as our clock passes


def test_a_sim_record_rewritten_within_one_timestamp_tick_is_read_again(make_sim):
    from gpuorch.provider.port import LaunchRequest

    sim = make_sim(**SIM)
    inst = sim.launch(LaunchRequest(job_id=1, attempt=1, offer=sim.offers()[0], spot=False, owner="me"))
    meta = sim.instances_dir / inst.id / "meta.json"
    os.utime(meta)  # written just now, however slowly the launch went on a loaded machine
    assert not sim.get(inst.id).spot
    st = os.stat(meta)
    text = meta.read_text()
    assert '"spot":false' in text  # compact: the sim's records (SimInstanceDir.indent)
    with open(meta, "r+") as f:  # same inode, same size, the same mtime: the cache key cannot tell
        f.write(text.replace('"spot":false', '"spot":true '))
    os.utime(meta, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(meta).st_ino == st.st_ino and os.stat(meta).st_size == st.st_size
    assert sim.get(inst.id).spot  # written less than SETTLE_S ago: read again


def test_the_instance_mirror_skips_a_listing_of_the_same_instances_and_records_a_change(store, make_sim, tmp_path):
    from gpuorch.store.models import Instance as InstanceRow

    sim = make_sim(**SIM)
    rec = Reconciler(store, {"sim": sim})
    ids = running(store, sim, rec, 2, tmp_path)
    rec.run_pass()
    with statements(store) as seen:
        rec.run_pass()
    assert not [s for s in seen if "instance" in s.lower() and "attempt" not in s.lower()]  # the table is not read
    with store.read() as s:
        inst = s.exec(select(Attempt).where(Attempt.job_id == ids[0])).one().instance_id
    sim._terminate(inst)  # ended behind the daemon's back: a new Instance object in the listing
    rec.run_pass()
    with store.read() as s:
        states = {r.instance_id: r.state for r in s.exec(select(InstanceRow))}
    assert states[inst] == "terminated"
