"""A daemon killed outright is known dead by the next one on its host, which takes its jobs over at
its first pass instead of ``lease_s`` later (``gpuorch.ops.presence``).

Real ``gpuorch daemon`` processes on the local provider, SIGKILLed; ``lease_s`` is 600 s, so a
takeover by the leases' expiry would come long after these tests' waits give up.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from daemon_proc import CONFIG, DaemonProcess, wait_until
from sqlmodel import select

from gpuorch.clock import utcnow
from gpuorch.jobs import intent as jobs
from gpuorch.jobs.spec import parse_spec
from gpuorch.ops.presence import DIR, Presence
from gpuorch.store import Store
from gpuorch.store.models import AttemptStatus, Event, Job, JobStatus

LONG_LEASES = CONFIG + "lease_s: 600\nmetrics: {enabled: false}\n"


def test_a_restart_after_a_sigkill_takes_the_dead_daemons_jobs_over_at_once(tmp_path, _isolated_home):
    home, gate = _isolated_home, tmp_path / "gate"
    store = Store(f"sqlite:///{home / 'state.db'}")
    spec = {"name": "gated", "run": 'while [ ! -e "$GATE" ]; do sleep 0.1; done', "env": {"GATE": str(gate)},
            "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand"}
    job_id = jobs.submit(store, parse_spec(spec), utcnow()).id

    def job() -> Job:
        with store.read() as s:
            row = s.get(Job, job_id)
            assert row is not None
            return row

    def running() -> bool:
        with store.read() as s:
            return any(a.status == AttemptStatus.RUNNING for a in jobs.attempts_of(s, job_id))

    first = DaemonProcess(home, "first", LONG_LEASES)
    try:
        first.ready()
        wait_until(running, what="the job to run")
        dead = job().lease_owner
        first.proc.kill()  # no release: its leases would hold for 600 s
        first.proc.wait()
    finally:
        first.close()
    gate.touch()  # the job ends while no daemon runs; its instance bills until one notices
    again = DaemonProcess(home, "again", LONG_LEASES)
    try:
        again.ready()
        wait_until(lambda: job().status.terminal, what="the new daemon to take the job over and end it")
        assert job().status == JobStatus.SUCCEEDED, job().message
        with store.read() as s:
            taken = [e.message for e in s.exec(select(Event).where(Event.kind == "lease_taken_over"))]
        assert len(taken) == 1 and f"took over from {dead}" in taken[0], taken
        gone = [r for r in again.log() if r.get("gone")]
        assert [(r["gone"], r["leases"]) for r in gone] == [(dead, 1)], gone
        assert len(list((home / DIR).glob("*.lock"))) == 1  # the dead one's lock is gone; the new one's is held
        assert again.terminate() == 0
    finally:
        again.close()
    assert not list((home / DIR).glob("*.lock"))  # a clean stop takes its lock with it
    store.close()


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from gpuorch.ops.presence import Presence
    assert Presence.hold(Path(sys.argv[1]), "otherhost/123/abcdef") is not None
    print("held", flush=True)
    time.sleep(600)
""")


def test_a_live_daemons_lock_is_never_taken_and_a_dead_ones_is(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        me = Presence.hold(tmp_path, "thishost/1/000000")
        assert me is not None
        assert me.gone() == []  # alive: its lock is held
        holder.kill()
        holder.wait()
        [gone] = me.gone()
        assert gone.owner == "otherhost/123/abcdef"
        assert me.gone() == []  # held by this process until forgotten
        gone.forget()
        assert [p.name for p in (tmp_path / DIR).glob("*.lock")] == [me.path.name]
        me.close()
    finally:
        holder.kill()
        holder.wait()
