"""Queue drain through the daemon: how fast a real ``gpuorch daemon`` places a full queue.

(Issue 18 calls this ``bench/queue.py``; a script of that name would shadow the standard
library's ``queue`` module for every script in ``bench/``, whose directory Python puts first on
the path, and so break ``concurrent.futures`` in ``bench/recovery.py``.)

    python bench/queue_drain.py [--jobs 10000] [--offers 50000] [--seed 2024]
                                [--postgres URL [--daemons 2]]

A real ``gpuorch daemon`` process (SQLite store, the default configuration: 2 s poll, lease 60 s,
metrics on) runs the ``sim`` provider with ``agents: external`` and ``boot_s: 0`` (launches are
instant: a record on disk, no agent process) and the sim's ``catalog`` option: the synthetic
full-size catalog ``bench/placement.py`` builds (the shipped snapshot replicated over regions and
zones with price noise, ~50,000 offers), sold by the sim. ``--jobs`` jobs of mixed needs (the
shapes of ``bench/placement.py``: GPU requirements with region, price and spot constraints, model
blocks from 1B full fine-tuning to 70B inference, different token counts) are submitted before the
daemon starts.

**The simulated cloud's records live in memory** (a fresh directory under ``/dev/shm``, linked as
the home's ``sim/``; ``--cloud-on-disk`` keeps them in the home, ``cloud_records`` says which).
They stand for a cloud's own state, which is not on the control host: each launch writes an
instance directory and its record, each agent start a run directory and ``agent.json``, 40,000
inodes a drain. On this project's ext4 disk those allocations cost the daemon 3-4 system CPU-s a
drain, and more after earlier runs deleted theirs (ext4 skips inodes deleted in the last 60-360 s
one by one: the "drift" of docs/benchmarks.md), so the figure measured the disk's history as much
as the daemon. The daemon's own store (SQLite file, or PostgreSQL) stays where it was: on disk.

Measured:

- ``drain_s``: from the start of the daemon's first pass to every job having a launch request
  (its attempt row), polled by this script every 0.2 s;
- ``daemon_cpu_s``: the daemon's user + system CPU seconds over that time (all threads, /proc);
- the passes' times (the daemon's debug log line per pass): count, median, max;
- ``daemon_peak_rss_mb`` (VmHWM) and ``daemon_rss_mb`` at the end;
- with ``--postgres`` on this host: ``server_cpu_s``, the PostgreSQL server's processes' CPU
  seconds from the daemons' start to the end of the drain (its backends, WAL writer and
  checkpointer; this script's own polling connection included; a backend that exited meanwhile
  is not counted). The daemon's CPU leaves out what its statements cost the server, which on a
  shared host is CPU the daemon's pass then waits for;
- with ``--postgres``: ``wal_mb``, the WAL the server wrote over the same span (every database's,
  and full-page images after each checkpoint: noisy on a server others use), and
  ``job_row_writes``, the row versions written to the job table over the whole run
  (``pg_stat_user_tables``: the claims, launches and the daemons' lease release at exit, and the
  lease renewals, every held row each 20 s, so a slower drain counts more of them).

``--postgres URL``: the store is a fresh database on that PostgreSQL server instead of SQLite;
``--daemons N`` (PostgreSQL only): N daemons share the queue (HA mode). Their CPU is summed, the
RSS is the largest one's, the passes are all of theirs, and the drain starts at the first pass
of any of them.

Targets (issue 18): drain < 10 s and < 10 CPU-seconds for 10,000 jobs; no pass over 2 s.
Prints human lines, then one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "providers"))
sys.path.insert(0, str(REPO / "bench"))

import yaml  # noqa: E402
from daemon_kit import (  # noqa: E402
    cpu_times,
    daemon_env,
    drop_database,
    fresh_database,
    mem_mb,
    start_daemon,
    stop_daemons,
    submit_all,
)
from placement import SHAPES, TOKENS, synthetic_catalog  # noqa: E402
from sqlalchemy import text  # noqa: E402
from sqlmodel import func, select  # noqa: E402

from gpuorch.store import Store  # noqa: E402
from gpuorch.store.models import Attempt  # noqa: E402

TRACES = REPO / "tests" / "data" / "spot-traces" / "aws-p3-2023"
SHM = "/dev/shm"
PASS_LINE = re.compile(r"pass (\w+) in ([0-9.]+) s")


def job_fields(i: int, rng: random.Random) -> dict:
    shape = {k: v for k, v in rng.choice(SHAPES).items() if k != "providers"}  # every offer is the sim's here
    if "model" in shape:
        shape["model"] = {**shape["model"], "tokens": rng.choice(TOKENS)}
    return {"name": f"job-{i}", "run": "python train.py", "checkpoint": {"store": "s3://bucket/run", "interval": "10m"},
            **shape}


def cpu_of(daemons: list[subprocess.Popen]) -> tuple[float, float]:
    """The daemons' (user + system, system) CPU seconds, summed."""
    times = [cpu_times(d.pid) for d in daemons]
    return sum(t[0] for t in times), sum(t[1] for t in times)


def server_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of every process named ``postgres`` on this host, by pid."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() == "postgres":
                    out[int(d.name)] = cpu_times(int(d.name))[0]
            except OSError:  # it exited meanwhile
                continue
    return out


def wal_lsn(store: Store) -> str:
    """The PostgreSQL server's current WAL position."""
    with store.read() as s:
        return str(s.connection().execute(text("SELECT pg_current_wal_lsn()")).scalar_one())


def passes(log: Path) -> list[tuple[float, float]]:
    """(start, seconds) of every pass the daemon logged (JSON lines)."""
    out = []
    for line in log.read_text().splitlines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        m = PASS_LINE.fullmatch(rec.get("message", ""))
        if m:
            end = datetime.fromisoformat(rec["ts"].replace("Z", "+00:00")).timestamp()
            out.append((end - float(m.group(2)), float(m.group(2))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--offers", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--limit", type=float, default=900.0, help="give up on the drain after this many seconds")
    ap.add_argument("--postgres", metavar="URL", help="a fresh database on this PostgreSQL server (e.g. "
                    "postgresql+psycopg://postgres@127.0.0.1:5432/postgres) instead of SQLite")
    ap.add_argument("--daemons", type=int, default=1, help="daemons sharing the queue (HA: needs --postgres)")
    ap.add_argument("--keep", action="store_true", help="keep the run's home (its logs, catalog, store) afterwards")
    ap.add_argument("--cloud-on-disk", action="store_true",
                    help="the sim cloud's instance records in the run's home on disk, not in memory (docstring)")
    ap.add_argument("--profile", metavar="FILE", help="run the (first) daemon under py-spy, collapsed stacks to FILE")
    ap.add_argument("--profile-gil", action="store_true",
                    help="with --profile: sample only the thread holding the GIL (Python CPU, not GIL waits)")
    args = ap.parse_args()
    if args.daemons > 1 and not args.postgres:
        raise SystemExit("--daemons: several daemons need a shared PostgreSQL store; add --postgres URL")
    rng = random.Random(args.seed)
    home = Path(tempfile.mkdtemp(prefix="gpuorch-bench-queue-"))
    offers = synthetic_catalog(args.offers, rng)
    catalog = home / "catalog.json"
    catalog.write_text(json.dumps([o.model_dump(mode="json") for o in offers]))
    sim = {"traces": str(TRACES), "agents": "external", "boot_s": 0, "time_scale": 60, "catalog": str(catalog)}
    (home / "config.yaml").write_text(yaml.safe_dump({
        "providers": {"sim": sim}, "metrics": {"enabled": True, "port": 0}, "log_level": "debug",
        "log_format": "json"}))
    url, db_name = fresh_database(args.postgres) if args.postgres else (f"sqlite:///{home / 'state.db'}", "")
    store = Store(url)
    t = time.monotonic()
    submit_all(store, [job_fields(i, rng) for i in range(args.jobs)])  # as jobs.submit, a thousand a transaction
    print(f"{len(offers)} offers; {args.jobs} jobs submitted in {time.monotonic() - t:.1f} s")
    cloud = None
    if not args.cloud_on_disk and Path(SHM).is_dir():  # the simulated cloud's records: not the control host's disk
        cloud = Path(tempfile.mkdtemp(prefix="gpuorch-bench-cloud-", dir=SHM))
        (home / "sim").symlink_to(cloud)
    out_cloud = "memory" if cloud is not None else "disk"
    env = daemon_env(GPUORCH_HOME=str(home), GPUORCH_DATABASE_URL=url)
    logs = [home / f"daemon-{k}.log" for k in range(args.daemons)]
    local_pg = bool(args.postgres) and any(h in (args.postgres or "") for h in ("@127.0.0.1", "@localhost"))
    server_start = server_cpu() if local_pg else {}
    wal_start = wal_lsn(store) if args.postgres else None
    daemons = [start_daemon(env, home, open(path, "wb")) for path in logs]  # noqa: SIM115
    daemon = daemons[0]
    spy = None
    samples: list[tuple[float, tuple[float, float]]] = []  # (wall, daemon CPU s (all, system))
    out: dict = {"jobs": args.jobs, "offers": len(offers), "store": "postgresql" if args.postgres else "sqlite",
                 "daemons": args.daemons, "cloud_records": out_cloud}
    try:  # from here on the daemons are stopped whatever fails (a missing py-spy once left one running)
        if args.profile:  # sampling slows the daemon a little: its figures are then not the benchmark's
            gil = ["--gil"] if args.profile_gil else []
            spy = subprocess.Popen(["py-spy", "record", "-p", str(daemon.pid), "-r", "200", "-f", "raw", "-o",
                                    args.profile, "-d", "300", "--nonblocking", *gil],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.monotonic()
        while True:
            samples.append((time.time(), cpu_of(daemons)))
            with store.read() as s:
                requested = s.exec(select(func.count(func.distinct(Attempt.job_id)))).one()
            if requested >= args.jobs:
                break
            if any(d.poll() is not None for d in daemons) or time.monotonic() - t0 > args.limit:
                print(f"only {requested} of {args.jobs} jobs have a launch request; see {logs[0]}")
                break
            time.sleep(0.2)
        done_at, cpu_done = time.time(), cpu_of(daemons)
        if local_pg:
            out["server_cpu_s"] = round(sum(t - server_start.get(pid, 0.0) for pid, t in server_cpu().items()), 2)
        if wal_start is not None:
            with store.read() as s:
                diff = s.connection().execute(text("SELECT pg_wal_lsn_diff(CAST(:a AS pg_lsn), CAST(:b AS pg_lsn))"),
                                              {"a": wal_lsn(store), "b": wal_start}).scalar_one()
                out["wal_mb"] = round(float(diff) / 2**20, 1)
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait(30)
        out["daemon_rss_mb"] = round(max(mem_mb(d.pid, "VmRSS") for d in daemons), 1)
        out["daemon_peak_rss_mb"] = round(max(mem_mb(d.pid, "VmHWM") for d in daemons), 1)
        out["launch_requested"] = requested
    finally:
        stop_daemons(daemons)
        from gpuorch_sim.provider import SimProvider
        # agents: external starts no process, so nothing runs on the instances: stopping the
        # sim's cloud process is the whole cleanup (ending 10,000 records one by one took minutes)
        SimProvider.from_config(sim, home).stop_cloud()
        if args.postgres:
            with store.read() as s:  # the daemons have exited: their statistics are flushed
                out["job_row_writes"] = s.connection().execute(text(
                    "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'job'")).scalar_one()
        store.close()
        if db_name:
            drop_database(args.postgres, db_name)
    seen = sorted(p for path in logs for p in passes(path))
    if not seen:
        raise SystemExit(f"no pass logged; see {logs[0]}")
    first = seen[0][0]
    before = [c for w, c in samples if w <= first]  # CPU at the first pass's start (startup excluded)
    cpu_first = before[-1] if before else samples[0][1]
    during = [s for start, s in seen if start < done_at]
    out.update({
        "drain_s": round(done_at - first, 2),
        "daemon_cpu_s": round(cpu_done[0] - cpu_first[0], 2),
        "daemon_sys_s": round(cpu_done[1] - cpu_first[1], 2),
        "passes": len(during),
        "pass_s_median": round(statistics.median(during), 3),
        "pass_s_max": round(max(during), 3),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    })
    out["targets_met"] = (out["launch_requested"] >= args.jobs and out["drain_s"] < 10 and out["daemon_cpu_s"] < 10
                          and out["pass_s_max"] <= 2)
    print(f"{out['launch_requested']} jobs with a launch request {out['drain_s']} s after the first pass; daemon CPU "
          f"{out['daemon_cpu_s']} s; {out['passes']} passes, median {out['pass_s_median']} s, "
          f"max {out['pass_s_max']} s; RSS {out['daemon_rss_mb']} MB (peak {out['daemon_peak_rss_mb']} MB)")
    if not args.keep and out["launch_requested"] >= args.jobs:  # a failed run keeps its logs to read
        shutil.rmtree(home, ignore_errors=True)
        if cloud is not None:
            shutil.rmtree(cloud, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
