"""Queued jobs that no offer fits: what they cost a real ``gpuorch daemon`` while nothing changes.

    python bench/unplaceable.py [--jobs 5000] [--offers 50000] [--window 300] [--seed 2024]

A real ``gpuorch daemon`` (SQLite, the default configuration: 2 s poll, 300 s catalog TTL) runs
the ``sim`` provider with ``agents: external`` and the full-size synthetic catalog of
``bench/placement.py`` (~50,000 offers), as ``bench/queue_drain.py`` does. ``--jobs`` jobs of the
``bench/placement.py`` shapes are queued, each with a price limit no offer meets
(``max_price_per_hour: 0.001``), so that no offer fits any of them; twelve shapes and five token
counts make many placement keys, as a real queue would. Measured:

- ``settle_s``: from the daemon's start to every job saying "no offer fits" (each decided once);
- ``daemon_cpu_pct``: the daemon's user + system CPU over the next ``--window`` seconds, as a
  share of one core (/proc), with the passes it logged in that window. The window should hold a
  catalog refresh (``offers_ttl_s``, 300 s): the sim's spot prices move with its market clock, so
  each refresh is a new catalog, an input of every "no offer", and every job is decided again.

Target (issue 32, item 5): < 1 % of a core for 5,000 such jobs. Prints human lines, then one
JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "providers"))
sys.path.insert(0, str(REPO / "bench"))

import yaml  # noqa: E402
from daemon_kit import cpu_times, daemon_env, mem_mb, start_daemon, stop_daemons, submit_all  # noqa: E402
from placement import synthetic_catalog  # noqa: E402
from queue_drain import TRACES, job_fields, passes  # noqa: E402
from sqlmodel import col, func, select  # noqa: E402

from gpuorch.store import Store  # noqa: E402
from gpuorch.store.models import Attempt, Job  # noqa: E402

NO_OFFER = "no offer fits%"


def calibration() -> float:
    """The time of a fixed Python loop (docs/benchmarks.md compares machines by it)."""
    t = time.perf_counter()
    [None for _ in range(10_000_000)]
    return time.perf_counter() - t


def counts(store: Store) -> tuple[int, int]:
    """(jobs saying "no offer fits", jobs with an attempt)."""
    with store.read() as s:
        waiting = s.exec(select(func.count()).select_from(Job).where(col(Job.message).like(NO_OFFER))).one()
        launched = s.exec(select(func.count(func.distinct(Attempt.job_id)))).one()
    return waiting, launched


def settle(store: Store, daemon: subprocess.Popen, jobs: int, limit_s: float) -> float:
    """Seconds until every job says "no offer fits" (SystemExit if the daemon stops or launches one)."""
    t0 = time.monotonic()
    while True:
        waiting, launched = counts(store)
        if launched:
            raise SystemExit(f"{launched} jobs were launched: an offer fits them; this bench needs none to fit")
        if waiting >= jobs:
            return time.monotonic() - t0
        if daemon.poll() is not None or time.monotonic() - t0 > limit_s:
            raise SystemExit(f"only {waiting} of {jobs} jobs said 'no offer fits' in {limit_s:.0f} s")
        time.sleep(1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=5_000)
    ap.add_argument("--offers", type=int, default=50_000)
    ap.add_argument("--window", type=float, default=300.0, help="seconds of steady state measured")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--limit", type=float, default=600.0, help="give up settling after this many seconds")
    args = ap.parse_args()
    cal = calibration()
    rng = random.Random(args.seed)
    home = Path(tempfile.mkdtemp(prefix="gpuorch-bench-unplaceable-"))
    catalog = home / "catalog.json"
    catalog.write_text(json.dumps([o.model_dump(mode="json") for o in synthetic_catalog(args.offers, rng)]))
    sim = {"traces": str(TRACES), "agents": "external", "boot_s": 0, "time_scale": 60, "catalog": str(catalog)}
    (home / "config.yaml").write_text(yaml.safe_dump({
        "providers": {"sim": sim}, "metrics": {"enabled": True, "port": 0}, "log_level": "debug",
        "log_format": "json"}))
    url = f"sqlite:///{home / 'state.db'}"
    store = Store(url)
    submit_all(store, [{**job_fields(i, rng), "max_price_per_hour": 0.001} for i in range(args.jobs)])
    log = home / "daemon.log"
    load_before = os.getloadavg()[0]
    daemon = start_daemon(daemon_env(GPUORCH_HOME=str(home), GPUORCH_DATABASE_URL=url), home, open(log, "wb"))  # noqa: SIM115
    out: dict = {"jobs": args.jobs, "window_s": args.window, "calibration_s": round(cal, 3)}
    try:
        out["settle_s"] = round(settle(store, daemon, args.jobs, args.limit), 1)
        start, cpu0 = time.time(), cpu_times(daemon.pid)[0]
        time.sleep(args.window)  # the steady state is the daemon's own: nothing to wait on
        end, cpu1 = time.time(), cpu_times(daemon.pid)[0]
        out["daemon_rss_mb"] = round(mem_mb(daemon.pid, "VmRSS"), 1)
        waiting, launched = counts(store)
    finally:
        stop_daemons([daemon])
        from gpuorch_sim.provider import SimProvider

        SimProvider.from_config(sim, home).stop_cloud()
        store.close()
    during = [s for at, s in passes(log) if start <= at < end]
    out.update({
        "daemon_cpu_s": round(cpu1 - cpu0, 2),
        "daemon_cpu_pct": round(100 * (cpu1 - cpu0) / (end - start), 3),
        "passes": len(during),
        "pass_s_max": round(max(during, default=0.0), 3),
        "still_waiting": waiting,
        "launched": launched,
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    })
    out["targets_met"] = out["daemon_cpu_pct"] < 1.0 and waiting >= args.jobs and not launched
    print(f"{args.jobs} jobs no offer fits, settled in {out['settle_s']} s; over {args.window:.0f} s the daemon used "
          f"{out['daemon_cpu_s']} CPU-s ({out['daemon_cpu_pct']} % of a core) in {out['passes']} passes")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
