"""Two ``gpuorch daemon`` processes on one PostgreSQL and one local provider (a shared home: its
instances are directories and processes on this machine) run many jobs: nothing is launched or
run twice; one daemon is SIGKILLed mid-run and the other takes its jobs over at its first pass
after their leases expire, and finishes them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from sqlmodel import select

from gpuorch.clock import utcnow
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.store import Store
from gpuorch.store.models import Attempt, Event, Job, JobStatus
from gpuorch.testing import wait_until
from gpuorch_local.provider import LocalProvider

pytestmark = pytest.mark.postgres

N_JOBS = 8
LEASE_S = 3.0
JOB = Path(__file__).with_name("ha_job.py")


def _daemon(cfg: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gpuorch", "--config", str(cfg), "daemon"], env=env,
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True)


def _rows(store: Store, model, *where):
    with store.read() as s:
        return list(s.exec(select(model).where(*where)))


def test_two_daemons_share_jobs_and_take_over_from_a_killed_one(pg_url, tmp_path):
    home = tmp_path / "home"
    runs, go = tmp_path / "runs.txt", tmp_path / "go"
    cfg = tmp_path / "daemon.yaml"
    cfg.write_text(f"home: {home}\nproviders: {{local: {{}}}}\npoll_s: 0.2\nlease_s: {LEASE_S}\nmax_sleep_s: 0.25\n")
    env = {**os.environ, "GPUORCH_DATABASE_URL": pg_url, "GPUORCH_HOME": str(home)}
    store = Store(pg_url)
    daemons = {}
    try:
        for name in ("a", "b"):
            p = _daemon(cfg, env, tmp_path / f"daemon-{name}.log")
            daemons[p.pid] = p
        spec = parse_spec({"name": "ha", "run": f"{sys.executable} {JOB} {runs} {go}", "spot_policy": "on-demand",
                           "resources": {"gpu": "A100:80GB:1"}})
        ids = set()
        for _ in range(N_JOBS):  # one at a time, each claimed before the next: both daemons get work
            job_id = jobs.submit(store, spec, utcnow()).id
            ids.add(job_id)
            wait_until(lambda job_id=job_id: _rows(store, Job, Job.id == job_id)[0].lease_owner, timeout_s=60,
                       what="a claim")

        def started() -> bool:
            return runs.exists() and len(runs.read_text().splitlines()) >= N_JOBS

        wait_until(started, timeout_s=120, step_s=0.1, what="every job to start")
        # Kill the daemon that holds the most jobs, in the middle of its passes.
        held = Counter(int(j.lease_owner.split("/")[1]) for j in _rows(store, Job) if j.lease_owner)
        victim_pid = held.most_common(1)[0][0]
        victim = daemons.pop(victim_pid)
        [survivor] = daemons.values()
        killed_at = utcnow()
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        victim_jobs = {j.id for j in _rows(store, Job)
                       if j.lease_owner and int(j.lease_owner.split("/")[1]) == victim_pid}
        assert victim_jobs, "the victim held no job"

        def taken_over():
            return all(j.lease_owner and int(j.lease_owner.split("/")[1]) == survivor.pid
                       for j in _rows(store, Job, Job.id.in_(victim_jobs)))

        wait_until(taken_over, timeout_s=60, step_s=0.1, what="the survivor to take the victim's jobs")
        go.touch()

        def finished():
            return all(j.status.terminal for j in _rows(store, Job))

        wait_until(finished, timeout_s=120, step_s=0.1, what="every job to finish")
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(60) == 0
    finally:
        go.touch()
        for p in daemons.values():
            if p.poll() is None:
                p.kill()
                p.wait(30)
        local = LocalProvider(home / "local")
        for inst in local.list_managed():
            local.terminate(inst.id)

    # Every job succeeded on its one attempt; one instance and one run per (job, attempt).
    assert {(j.id, j.status, j.exit_code) for j in _rows(store, Job)} == {(i, JobStatus.SUCCEEDED, 0) for i in ids}
    assert Counter(a.job_id for a in _rows(store, Attempt)) == Counter({i: 1 for i in ids})
    instances = Counter((i.tags["gpuorch:job"], i.tags["gpuorch:attempt"]) for i in local.list_managed())
    assert instances == Counter({(str(i), "1"): 1 for i in ids})
    ran = Counter(tuple(line.split()[:2]) for line in runs.read_text().splitlines())
    assert ran == Counter({(str(i), "1"): 1 for i in ids})
    # No double action: each step happened once per job, and nothing was swept as an orphan.
    kinds = Counter((e.job_id, e.kind) for e in _rows(store, Event))
    for i in ids:
        assert kinds[(i, "launch_requested")] == kinds[(i, "attempt_ended")] == 1, i
        assert kinds[(i, "launched")] + kinds[(i, "adopted")] == 1, i
        # "running" is missed if a job started and ended between its owner's looks (one was killed)
        assert kinds[(i, "running")] <= 1 and kinds[(i, "succeeded")] == 1, i
    assert not any(kind == "orphan_terminated" for _, kind in kinds)
    # The survivor took each of the victim's jobs at its first pass after the lease expired.
    # (A slow pass under load may lose a lease to the other live daemon before the kill: legal.)
    takeovers = [e for e in _rows(store, Event, Event.kind == "lease_taken_over", Event.ts >= killed_at)
                 if int(json.loads(e.data)["previous_owner"].split("/")[1]) == victim_pid]
    assert {e.job_id for e in takeovers} == victim_jobs and len(takeovers) == len(victim_jobs)
    for e in takeovers:
        d = json.loads(e.data)
        assert int(d["owner"].split("/")[1]) == survivor.pid
        last_pass, expired = datetime.fromisoformat(d["last_pass_at"]), datetime.fromisoformat(d["expired_at"])
        assert last_pass <= expired < e.ts  # never early; and the pass before this one was still too early
    assert not _rows(store, Job, Job.lease_owner.is_not(None))  # the survivor released its leases on SIGTERM
    for log in tmp_path.glob("daemon-*.log"):
        assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    store.close()
