"""The steady pass in process: what one reconcile pass over N running jobs costs, and what it keeps.

    python bench/steady_pass.py [--jobs 1000] [--passes 7] [--profile FILE] [--tracemalloc] [--postgres URL]

The daemon's own reconciler (``ops.daemon.build_reconciler`` with metrics on), a real SQLite
store and the sim with ``agents: external``, its jobs seeded running as ``bench/recovery.py
--seed-running`` does (``daemon_kit.seed_running``). Once every job is held and skipped as
steady, ``--passes`` passes are timed (CPU of this process's thread, ``time.thread_time``; the
pass runs on it) and their median printed. This is the A/B harness: the same tree's figure moves
with the machine's load, so compare trees run one after the other. ``--profile`` writes a cProfile
of the timed passes; ``--tracemalloc`` prints the largest allocations kept by the steady state;
``--postgres`` puts the store on a fresh database of that PostgreSQL server instead of SQLite.

Prints human lines, then one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "providers"))

from daemon_kit import drop_database, fresh_database, mem_mb, seed_running  # noqa: E402

TRACES = REPO / "tests" / "data" / "spot-traces" / "aws-p3-2023"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--passes", type=int, default=7)
    ap.add_argument("--profile", help="write a cProfile of the timed passes here")
    ap.add_argument("--tracemalloc", action="store_true", help="print the steady state's largest allocations")
    ap.add_argument("--postgres", metavar="URL", help="the store on a fresh database of this PostgreSQL server")
    args = ap.parse_args()
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start(1)
    home = Path(tempfile.mkdtemp(prefix="gpuorch-bench-steady-"))
    os.environ["GPUORCH_HOME"] = str(home)
    from gpuorch.metrics import Metrics
    from gpuorch.ops.config import DaemonConfig
    from gpuorch.ops.daemon import build_reconciler
    from gpuorch.store import Store

    sim = {"traces": str(TRACES), "agents": "external", "boot_s": 0, "time_scale": 60}
    url, name = fresh_database(args.postgres) if args.postgres else (f"sqlite:///{home / 'state.db'}", "")
    try:
        store = Store(url)
        spec = {"run": "python train.py", "spot_policy": "on-demand", "providers": ["sim"],
                "checkpoint": {"store": f"file://{home / 'ckpt'}", "interval": "10m"}}
        t0 = time.monotonic()
        seed_running(store, home, sim, spec, args.jobs, 2.0)
        seeded_s = time.monotonic() - t0
        modules_before = len(sys.modules)
        config = DaemonConfig(providers={"sim": sim}, home=home, database_url=url, log_level="warning")
        rec = build_reconciler(config, store, Metrics(store))
        warm = 0
        while warm < 30:  # adopt, mirror, then settle into the steady skip
            warm += 1
            rec.run_pass()
            if rec.steady.skipped == args.jobs:
                break
        cpu = []
        prof = None
        if args.profile:
            import cProfile

            prof = cProfile.Profile()
        for _ in range(args.passes):
            c0 = time.thread_time()
            if prof is not None:
                prof.enable()
            rec.run_pass()
            if prof is not None:
                prof.disable()
            cpu.append(time.thread_time() - c0)
        if prof is not None:
            prof.dump_stats(args.profile)
        if args.tracemalloc:
            import tracemalloc

            snap = tracemalloc.take_snapshot()
            for stat in snap.statistics("filename")[:25]:
                print(f"{stat.size / 1e6:8.2f} MB {stat.count:8d}  {stat.traceback[0].filename}")
            print(f"traced total {sum(s.size for s in snap.statistics('filename')) / 1e6:.1f} MB")
        out = {"jobs": args.jobs, "passes": args.passes, "warm_passes": warm, "skipped": rec.steady.skipped,
               "pass_cpu_ms_median": round(statistics.median(cpu) * 1000, 1),
               "pass_cpu_ms_min": round(min(cpu) * 1000, 1),
               "us_per_job": round(statistics.median(cpu) / args.jobs * 1e6),
               "rss_mb": round(mem_mb(os.getpid(), "VmRSS"), 1), "modules": len(sys.modules),
               "modules_by_daemon": len(sys.modules) - modules_before, "seed_s": round(seeded_s, 1),
               "load_avg_1m": round(os.getloadavg()[0], 2)}
        rec.release_leases()
        rec.pool.close()
        rec.reads.close()
    finally:  # the sim's cloud process outlives a daemon by design: a benchmark ends it itself
        from gpuorch_sim.provider import SimProvider

        SimProvider.from_config(sim, home).stop_cloud()
        if name:
            store.close()
            drop_database(args.postgres, name)
    print(json.dumps({**out, "store": "postgresql" if name else "sqlite"}))


if __name__ == "__main__":
    main()
