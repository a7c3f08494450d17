"""What the daemon benchmarks share (``recovery.py``, ``queue_drain.py``): a daemon process's CPU
and memory from /proc, its pass totals from /metrics, and a population of sim jobs (submitted in
bulk, played agents, or seeded running)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from sqlmodel import func, select

from gpuorch.agent.protocol import CONFIG_FILE, STATUS_FILE, AgentStatus, write_atomic
from gpuorch.jobs.spec import parse_spec
from gpuorch.reconciler import Reconciler, Settings
from gpuorch.store import Store
from gpuorch.store.models import Attempt, AttemptStatus, Job

TICK = os.sysconf("SC_CLK_TCK")


def cpu_times(pid: int) -> tuple[float, float]:
    """The process's (user + system, system) CPU seconds, all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[12]) / TICK


def cpu_s(pid: int) -> float:
    return cpu_times(pid)[0]


def daemon_env(**extra: str) -> dict[str, str]:
    """The environment of a daemon a bench starts: this tree's code, its providers included (an
    editable install may point at another checkout, e.g. from a worktree), and ``extra``."""
    repo = Path(__file__).resolve().parents[1]
    path = os.pathsep.join(p for p in (str(repo), str(repo / "providers"), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def start_daemon(env: dict[str, str], home: Path, out: IO[bytes]) -> subprocess.Popen:
    """``gpuorch daemon`` with ``env`` (``daemon_env``), its output to ``out``, run from ``home``:
    ``python -m`` puts the working directory first on the path, so a daemon started from another
    checkout would run that checkout's code whatever ``PYTHONPATH`` says."""
    return subprocess.Popen([sys.executable, "-m", "gpuorch", "daemon"], env=env, cwd=home, stdout=out,
                            stderr=subprocess.STDOUT)


def stop_daemons(procs: list[subprocess.Popen]) -> None:
    """SIGTERM every daemon, then wait for each (a minute), killing one that does not exit."""
    for d in procs:
        d.send_signal(signal.SIGTERM)
    for d in procs:
        try:
            d.wait(60)
        except subprocess.TimeoutExpired:
            d.kill()


def mem_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


class Agents:
    """Plays the agents of ``agents: external`` instances: running, as soon as started."""

    def __init__(self, instances: Path) -> None:
        self.instances = instances
        self.done: set[str] = set()

    def step(self) -> int:
        started = 0
        if not self.instances.exists():
            return 0
        for d in os.scandir(self.instances):
            if d.name in self.done or d.name.startswith("."):
                continue
            run = Path(d.path) / "run"
            if (run / CONFIG_FILE).exists():
                now = time.time()
                write_atomic(run / STATUS_FILE, AgentStatus(state="running", started_at=now, running_since=now,
                                                            updated_at=now).to_json())
                self.done.add(d.name)
                started += 1
        return started


SUBMIT_BATCH = 1000  # jobs per writing transaction when the bench submits them


def submit_all(store: Store, specs: list[dict]) -> None:
    """Queue the jobs as ``jobs.submit`` does (a job row and its ``submitted`` event each), a
    thousand per transaction: 10,000 single-job transactions take minutes on a loaded machine."""
    from gpuorch.jobs import events
    from gpuorch.store.models import Job, JobStatus

    parsed = [parse_spec(spec) for spec in specs]
    for k in range(0, len(parsed), SUBMIT_BATCH):
        with store.write() as s:
            now = datetime.now(UTC)
            rows = [Job(name=p.name, spec=p.model_dump_json(), status=JobStatus.QUEUED, created_at=now, updated_at=now)
                    for p in parsed[k:k + SUBMIT_BATCH]]
            s.add_all(rows)
            s.flush()
            for job in rows:
                events.record(s, now, "submitted", f"job {job.name} queued", job_id=job.id)


def seed_running(store: Store, home: Path, sim: dict, spec: dict, n: int, poll_s: float) -> set[str]:
    """The fast ramp (``--seed-running``): job 1 goes the real way (submitted, launched on the
    sim and its agent played by a reconciler in this process, which then releases its lease);
    jobs 2..n are copies of its job and attempt rows and of its sim instance's files (the record,
    ``agent.json``, ``status.json``), each with its own id, client token and tags, written in bulk.
    The daemon then adopts n running jobs at its first pass, as after a restart. Launching 10,000
    jobs through the daemon takes over 20 minutes on a loaded 2-core machine; this takes seconds,
    and the steady state it measures is the same. Returns the instance ids (their agents are
    played already)."""
    from gpuorch.provider.localdir import instance_id_for
    from gpuorch.provider.port import TAG_JOB, client_token
    from gpuorch_sim.provider import SimProvider

    p = SimProvider.from_config(sim, home)
    rec = Reconciler(store, {"sim": p}, settings=Settings(poll_s=poll_s))
    submit_all(store, [{**spec, "name": "job-0"}])
    agents = Agents(home / "sim" / "instances")
    for _ in range(600):
        rec.run_pass()
        agents.step()
        with store.read() as s:
            if s.exec(select(func.count()).select_from(Attempt).where(Attempt.status == AttemptStatus.RUNNING)).one():
                break
        time.sleep(0.1)
    rec.release_leases()
    rec.pool.close()
    rec.reads.close()
    with store.read() as s:
        job, att = s.exec(select(Job)).one(), s.exec(select(Attempt)).one()
    root = home / "sim" / "instances"
    src = root / str(att.instance_id)
    meta = json.loads((src / "meta.json").read_text())
    agent_json, status_json = (src / "run" / CONFIG_FILE).read_text(), (src / "run" / STATUS_FILE).read_text()
    job_cols = job.model_dump(exclude={"id", "lease_owner", "lease_expires"})
    att_cols = att.model_dump(exclude={"id", "job_id", "instance_id"})
    seeded = {str(att.instance_id)}
    for k in range(1, n, SUBMIT_BATCH):
        with store.write() as s:
            rows = [Job(**{**job_cols, "name": f"job-{i}"}) for i in range(k, min(n, k + SUBMIT_BATCH))]
            s.add_all(rows)
            s.flush()
            for j in rows:
                token = client_token(j.id or 0, att.number, store.installation_id)
                iid = instance_id_for(token, "sim")
                run = root / iid / "run"
                run.mkdir(parents=True)
                (root / iid / "meta.json").write_text(json.dumps(
                    {**meta, "id": iid, "client_token": token, "tags": {**meta["tags"], TAG_JOB: str(j.id)}}))
                (run / CONFIG_FILE).write_text(agent_json)
                (run / STATUS_FILE).write_text(status_json)
                s.add(Attempt(**{**att_cols, "job_id": j.id, "instance_id": iid}))
                seeded.add(iid)
    return seeded


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pass_totals(port: int) -> tuple[float, int]:
    """(seconds, count) of the daemon's passes so far, from its /metrics."""
    from urllib.request import urlopen

    total, count = 0.0, 0
    with urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:  # a local daemon
        for line in r.read().decode().splitlines():
            if line.startswith("gpuorch_reconcile_pass_duration_seconds_sum"):
                total = float(line.split()[-1])
            elif line.startswith("gpuorch_reconcile_pass_duration_seconds_count"):
                count = int(float(line.split()[-1]))
    return total, count


def fresh_database(server: str) -> tuple[str, str]:
    """A new empty database on the PostgreSQL server ``server`` (a SQLAlchemy URL naming any
    database there): (its URL, its name)."""
    import psycopg

    base, _, _ = server.rpartition("/")
    name = f"gpuorch_bench_{os.getpid()}_{random.randrange(1 << 30)}"
    with psycopg.connect(server.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}", name


def drop_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
