"""Recovery: how fast the daemon reacts, how much work a preemption costs, what 1,000 jobs cost.

    python bench/recovery.py [--jobs 1000] [--window 30] [--notices 16] [--trials 30] [--seed 0]
                             [--postgres URL [--daemons 2]] [--no-lost-work]

Three measurements, all with the real reconciler on a real SQLite store:

1. **Daemon CPU and memory with 1,000 running jobs.** A real ``gpuorch daemon`` process at its
   default poll interval (2 s) runs 1,000 on-demand jobs on the ``sim`` provider with
   ``agents: external``: the instances are real sim instances (records on disk, listed, settled
   and reclaimed by the sim's cloud process), but no agent process is started; this script
   plays the agents by writing each instance's ``status.json`` as the agent does. Once every
   job is running, the daemon's CPU time (user + system, all threads, from /proc) is read over
   ``--window`` wall seconds: CPU% = CPU seconds / wall seconds x 100, i.e. share of one core.
   RSS is the daemon's resident memory at the end (VmHWM, its peak, is printed too).
2. **Decision latency**, under that load: ``--notices`` running instances get a preemption
   (half with a 30 s notice, half reclaimed without one), one every 2.5 s so they land at random
   points of the poll cycle. Latency = the replacement instance's creation (the daemon's launch
   call) minus the start of the pass that observed the notice or the reclaim (the ``notice`` /
   ``attempt_ended`` event's time: the pass start, just before it lists instances, so this
   slightly overstates). Also printed: from the injection itself (adds the wait for the next
   poll, up to one poll interval).
3. **Lost work**, with a fake clock (hours of work in seconds): ``--trials`` jobs on the
   FakeProvider, whose scripted jobs checkpoint every 10 minutes of work and take a final
   checkpoint 21.3 s after a notice (off the 2 s poll grid), are each preempted once at a
   random time between 10 minutes and 2 hours into their run; half with a 120 s notice (AWS),
   half without. Passes run every 2 s of fake time. Lost work is what the daemon records on the
   attempt: from the last durable checkpoint to the kill.

Prints human lines, then one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "providers"))

import yaml  # noqa: E402
from daemon_kit import (  # noqa: E402
    Agents,
    cpu_s,
    daemon_env,
    drop_database,
    free_port,
    fresh_database,
    mem_mb,
    pass_totals,
    seed_running,
    start_daemon,
    stop_daemons,
    submit_all,
)
from sqlmodel import func, select  # noqa: E402

from gpuorch.clock import FakeClock  # noqa: E402
from gpuorch.jobs import intent as jobs  # noqa: E402
from gpuorch.jobs.spec import parse_spec  # noqa: E402
from gpuorch.reconciler import Reconciler, Settings  # noqa: E402
from gpuorch.store import Store  # noqa: E402
from gpuorch.store.models import Attempt, AttemptStatus, Event, Job, TerminationReason  # noqa: E402
from gpuorch.store.models import Instance as InstanceRow  # noqa: E402
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider  # noqa: E402

TRACES = REPO / "tests" / "data" / "spot-traces" / "aws-p3-2023"
POLL_S = 2.0  # the daemon's default (configs/daemon.yaml)
RAMP_LIMIT_S = 1800  # 10,000 jobs launch in a few minutes on a loaded 2-core machine


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q * (len(v) - 1))))]


# -- 1 and 2: a real daemon with 1,000 running sim jobs -------------------------------------------
def daemon_bench(n: int, window: float, notices: int, rng: random.Random, url: str | None = None,
                 daemons: int = 1, pass_time: bool = False, seed: bool = False, profile: str | None = None) -> dict:
    """``url``: the store (None: SQLite in the bench's home); ``daemons``: how many daemon
    processes share it (HA mode needs PostgreSQL); their CPU is summed, RSS is the largest.
    ``pass_time``: also the mean pass time over the window, from the (first) daemon's /metrics."""
    home = Path(tempfile.mkdtemp(prefix="gpuorch-bench-recovery-"))
    sim = {"traces": str(TRACES), "agents": "external", "boot_s": 0, "time_scale": 60}
    port = free_port() if pass_time else 0
    (home / "config.yaml").write_text(yaml.safe_dump({
        "providers": {"sim": sim}, "poll_s": POLL_S, "metrics": {"enabled": True, "port": port},
        "log_level": "warning"}))
    url = url or f"sqlite:///{home / 'state.db'}"
    store = Store(url)
    spec = {"run": "python train.py", "spot_policy": "on-demand", "providers": ["sim"],
            "checkpoint": {"store": f"file://{home / 'ckpt'}", "interval": "10m"}}
    seeded = seed_running(store, home, sim, spec, n, POLL_S) if seed else set()
    if not seed:
        submit_all(store, [{**spec, "name": f"job-{i}"} for i in range(n)])
    env = daemon_env(GPUORCH_HOME=str(home), GPUORCH_DATABASE_URL=url)
    log = open(home / "daemon.log", "wb")  # noqa: SIM115
    procs = [start_daemon(env, home, log) for _ in range(daemons)]
    agents = Agents(home / "sim" / "instances")
    agents.done |= seeded
    out: dict = {}
    try:
        t0 = time.monotonic()
        while True:
            agents.step()
            with store.read() as s:
                running = s.exec(select(func.count()).select_from(Attempt)
                                 .where(Attempt.status == AttemptStatus.RUNNING)).one()
                if seed:  # the rows say running from the start: wait for the daemon to hold and mirror them
                    held = s.exec(select(func.count()).select_from(Job).where(Job.lease_owner.is_not(None))).one()  # type: ignore[union-attr]
                    mirrored = s.exec(select(func.count()).select_from(InstanceRow)).one()
                    running = min(running, held, mirrored)
            if running >= n:
                break
            if any(d.poll() is not None for d in procs) or time.monotonic() - t0 > RAMP_LIMIT_S:
                raise SystemExit(f"daemon did not get {n} jobs running ({running}); see {home / 'daemon.log'}")
            time.sleep(0.5)
        print(f"{n} jobs running after {time.monotonic() - t0:.0f} s; settling one lease period")
        time.sleep(5)
        with store.read() as s:
            events_before = s.exec(select(func.count()).select_from(Event)).one()
        p0 = pass_totals(port) if pass_time else (0.0, 0)
        spy = None
        if profile:  # sampling costs the daemon CPU: a profiled run's figures are not the benchmark's
            spy = subprocess.Popen(["py-spy", "record", "-p", str(procs[0].pid), "-r", "100", "-f", "raw", "-o",
                                    profile, "-d", str(int(window)), "--nonblocking"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c0, w0 = sum(cpu_s(d.pid) for d in procs), time.monotonic()
        time.sleep(window)
        c1, w1 = sum(cpu_s(d.pid) for d in procs), time.monotonic()
        if spy is not None:
            spy.wait(60)
        if pass_time:
            p1 = pass_totals(port)
            out["passes_in_window"] = p1[1] - p0[1]
            out["pass_s_mean"] = round((p1[0] - p0[0]) / max(1, p1[1] - p0[1]), 4)
            out["daemon_cpu_s_per_pass"] = round((c1 - c0) / max(1, p1[1] - p0[1]), 4)
        with store.read() as s:
            events_after = s.exec(select(func.count()).select_from(Event)).one()
        out["daemon_cpu_pct"] = round(100 * (c1 - c0) / (w1 - w0), 2)
        out["daemon_rss_mb"] = round(max(mem_mb(d.pid, "VmRSS") for d in procs), 1)
        out["daemon_peak_rss_mb"] = round(max(mem_mb(d.pid, "VmHWM") for d in procs), 1)
        out["events_written_in_window"] = events_after - events_before
        print(f"daemon CPU {out['daemon_cpu_pct']}% of one core over {w1 - w0:.0f} s at poll {POLL_S} s; "
              f"RSS {out['daemon_rss_mb']} MB (peak {out['daemon_peak_rss_mb']}); "
              f"{out['events_written_in_window']} events written meanwhile")
        out.update(latencies(store, home, sim, agents, notices, rng))
    finally:
        stop_daemons(procs)
        from gpuorch_sim.provider import SimProvider
        # agents: external starts no process, so nothing runs on the instances: stopping the
        # sim's cloud process is the whole cleanup (ending 10,000 records one by one took minutes)
        SimProvider.from_config(sim, home).stop_cloud()
        store.close()
    return out


def latencies(store: Store, home: Path, sim: dict, agents: Agents, notices: int, rng: random.Random) -> dict:
    from gpuorch_sim.provider import SimProvider

    p = SimProvider.from_config(sim, home)  # the same market (same options, same origin)
    with store.read() as s:
        running = list(s.exec(select(Attempt).where(Attempt.status == AttemptStatus.RUNNING)))
    picks = rng.sample(running, notices)
    injected: dict[int, tuple[float, bool]] = {}  # job -> (wall time, with notice)
    for k, a in enumerate(picks):
        with_notice = k % 2 == 0
        injected[a.job_id] = (time.time(), with_notice)
        p.inject_preemption(a.instance_id, 30.0 if with_notice else 0.0)  # type: ignore[arg-type]
        end = time.monotonic() + 2.5
        while time.monotonic() < end:
            agents.step()
            time.sleep(0.25)
    deadline = time.monotonic() + 60
    decision: dict[bool, list[float]] = {True: [], False: []}
    total: dict[bool, list[float]] = {True: [], False: []}
    while time.monotonic() < deadline:
        agents.step()
        decision, total = {True: [], False: []}, {True: [], False: []}
        with store.read() as s:
            for job_id, (at, with_notice) in injected.items():
                seen = s.exec(select(Event).where(Event.job_id == job_id, Event.attempt == 1,
                                                  Event.kind.in_(["notice", "attempt_ended"]))  # type: ignore[attr-defined]
                              .order_by(Event.id)).first()
                second = s.exec(select(Attempt).where(Attempt.job_id == job_id, Attempt.number == 2)).first()
                if seen is None or second is None or second.instance_id is None:
                    continue
                created = p.get(second.instance_id).created_at.timestamp()
                decision[with_notice].append(created - seen.ts.timestamp())
                total[with_notice].append(created - at)
        if sum(map(len, decision.values())) == len(injected):
            break
        time.sleep(0.5)
    every = decision[True] + decision[False]
    if len(every) < len(injected):
        print(f"only {len(every)} of {len(injected)} replacements seen within a minute")
    for kind, name in ((True, "with notice"), (False, "without notice")):
        if decision[kind]:
            print(f"{name}: observed -> replacement launched p50 {statistics.median(decision[kind]):.3f} s, "
                  f"max {max(decision[kind]):.3f} s; injected -> launched p50 {statistics.median(total[kind]):.2f} s, "
                  f"max {max(total[kind]):.2f} s ({len(decision[kind])} preemptions)")
    return {"decision_latency_s_p50": round(pct(every, 0.5), 3), "decision_latency_s_p99": round(pct(every, 0.99), 3),
            "preemption_to_launch_s_p50": round(pct(total[True] + total[False], 0.5), 3),
            "preemption_to_launch_s_max": round(max(total[True] + total[False]), 3), "preemptions_measured": len(every)}


# -- 3: lost work, fake clock ---------------------------------------------------------------------------
def lost_work_bench(trials: int, rng: random.Random) -> dict:
    home = Path(tempfile.mkdtemp(prefix="gpuorch-bench-lostwork-"))
    store, clock = Store(f"sqlite:///{home / 'state.db'}"), FakeClock()
    script = FakeJobScript(duration_s=6 * 3600, checkpoint_every_s=600, final_checkpoint_s=21.3)
    fake = FakeProvider(clock, script=script)
    rec = Reconciler(store, {"fake": fake}, clock=clock, settings=Settings(poll_s=POLL_S))
    spec = {"run": "python train.py", "resources": {"gpu": "A100:80GB:1"},
            "checkpoint": {"store": f"file://{home / 'ckpt'}", "interval": "10m"}}
    ids = [jobs.submit(store, parse_spec({**spec, "name": f"t{i}"}), clock.now()).id for i in range(trials)]
    plan = {job_id: (rng.uniform(600, 7200), i % 2 == 0) for i, job_id in enumerate(ids)}  # (after s, notice)
    hit: set[int] = set()
    for _ in range(int(3 * 3600 / POLL_S)):
        rec.run_pass()
        clock.advance(POLL_S)
        with store.read() as s:
            for a in s.exec(select(Attempt).where(Attempt.number == 1, Attempt.status == AttemptStatus.RUNNING)):
                after, notice = plan[a.job_id]
                if a.job_id not in hit and (clock.now() - a.started_at).total_seconds() >= after:  # type: ignore[operator]
                    fake.inject_preemption(a.instance_id, 120.0 if notice else 0.0)  # type: ignore[arg-type]
                    hit.add(a.job_id)
        if len(hit) == trials and _all_ended(store):
            break
    lost: dict[bool, list[float]] = {True: [], False: []}
    with store.read() as s:
        for a in s.exec(select(Attempt).where(Attempt.number == 1, Attempt.reason == TerminationReason.PREEMPTED)):
            lost[plan[a.job_id][1]].append(a.lost_work_s or 0.0)
    store.close()
    for kind, name in ((True, "with a 120 s notice"), (False, "without notice")):
        v = lost[kind]
        print(f"lost work {name}: mean {statistics.mean(v):.1f} s, max {max(v):.1f} s over {len(v)} preemptions "
              f"(checkpoint every 600 s)")
    return {"lost_work_s_mean_with_notice": round(statistics.mean(lost[True]), 1),
            "lost_work_s_mean_without_notice": round(statistics.mean(lost[False]), 1)}


def _all_ended(store: Store) -> bool:
    with store.read() as s:
        return s.exec(select(func.count()).select_from(Attempt).where(
            Attempt.number == 1, Attempt.status != AttemptStatus.ENDED)).one() == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--notices", type=int, default=16)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--postgres", metavar="URL", help="run the daemons on a fresh database of this PostgreSQL "
                    "server (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/postgres) instead of SQLite")
    ap.add_argument("--profile", metavar="FILE", help="py-spy the (first) daemon over the window: raw stacks to FILE")
    ap.add_argument("--daemons", type=int, default=1, help="daemon processes sharing the store (HA: --postgres)")
    ap.add_argument("--no-lost-work", action="store_true", help="skip measurement 3 (a shorter run)")
    ap.add_argument("--seed-running", action="store_true", help="the fast ramp: one job launched the real way, "
                    "the others copies of its rows and sim files, adopted by the daemon (see seed_running)")
    ap.add_argument("--pass-time", action="store_true", help="also the passes' mean time and CPU over the window "
                    "(the daemon's /metrics)")
    args = ap.parse_args()
    if args.daemons > 1 and not args.postgres:
        raise SystemExit("--daemons: several daemons need a shared PostgreSQL store; add --postgres URL")
    rng = random.Random(args.seed)
    started = time.monotonic()
    result = {"jobs": args.jobs, "poll_s": POLL_S, "store": "postgresql" if args.postgres else "sqlite",
              "daemons": args.daemons}
    if not args.no_lost_work:
        result.update(lost_work_bench(args.trials, rng))
    url, name = fresh_database(args.postgres) if args.postgres else (None, "")
    try:
        result.update(daemon_bench(args.jobs, args.window, args.notices, rng, url, args.daemons, args.pass_time,
                                   args.seed_running, args.profile))
    finally:
        if name:
            drop_database(args.postgres, name)
    result["load_avg_1m"] = round(os.getloadavg()[0], 2)
    result["cpus"] = os.cpu_count()
    result["bench_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
