"""Placement over a full-size synthetic catalog.

The shipped snapshot (public AWS + GCP slice) is replicated across synthetic regions and zones
with +-10% log-normal price noise and random AWS interruption buckets until it holds at least
50,000 offers. Then:

- per-job latency: each job spec of a mixed set placed alone (the daemon's call, top 10),
  cold (offer-class fits computed afresh) and warm (the index has seen the same needs);
- a queue of 10,000 jobs (a mix of sizes, methods, filters and token counts) placed in turn.

Targets (issue 3): median <= 5 ms per job; 10,000 queued jobs in < 10 s on a 2-core machine.
Prints one JSON object on its last line.

``--catalog [--old TREE] [--runs N]`` measures ``gpuorch plan --catalog FILE`` instead (issue 36): the
CPU seconds (user + system) of the whole command on a 50,000-row CSV (the AWS and GCP rows, which
every tree since the CSV format reads, multiplied as above, spot kept within [10%, 100%] of
on-demand so no tree warns), in a fresh process each run, this tree and ``TREE`` (a checkout of an
older commit, e.g. ``git worktree add /tmp/old 89a4b5f``) alternated, each with its own paths first
on PYTHONPATH. This tree runs twice per round: with its audit cache cold (a new file) and warm.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuorch.jobs.spec import parse_spec
from gpuorch.placement import OfferIndex, candidates
from gpuorch.provider.catalog import load_offers
from gpuorch.provider.port import Offer

TARGET_OFFERS = 50_000
BUCKETS = ["<5%", "5-10%", "10-15%", "15-20%", ">20%", None]

SHAPES = [
    {"resources": {"gpu": "A100:8"}},
    {"resources": {"gpu": "H100:1"}, "spot_policy": "spot"},
    {"resources": {"gpu": "24GB+"}, "max_price_per_hour": 1.2},
    {"resources": {"gpu": "L4"}, "regions": ["us-east-1-s3", "us-central1-s7", "europe-west4"]},
    {"resources": {"gpu": "A100:80GB:1"}, "providers": ["gcp"], "spot_policy": "on-demand"},
    {"model": {"params": "8B", "method": "qlora", "seq_len": 4096}},
    {"model": {"params": "70B", "method": "qlora"}},
    {"model": {"params": "7B", "method": "full"}, "distributed": {"strategy": "zero3"}},  # undeclared = 1 GPU
    {"model": {"params": "13B", "method": "inference", "precision": "int4", "seq_len": 4096}},
    {"model": {"params": "70B", "method": "inference"}, "distributed": {"strategy": "tp"}},
    {"model": {"params": "8B", "method": "lora", "lora_targets": "attention"}, "providers": ["aws"]},
    {"model": {"params": "1B", "method": "full", "micro_batch": 8}, "spot_policy": "spot"},
]
TOKENS = ["5M", "20M", "50M", "100M", "300M"]


def synthetic_catalog(target: int, rng: random.Random, base: list[Offer] | None = None) -> list[Offer]:
    base = load_offers() if base is None else base
    copies = -(-target // len(base))
    out = []
    for j in range(copies):
        for o in base:
            noise = rng.lognormvariate(0, 0.1)
            spot = o.spot_price_per_hour
            out.append(Offer.model_construct(**{
                **o.__dict__,
                "region": f"{o.region}-s{j}" if j else o.region,
                "zone": f"{o.zone}-s{j}" if j else o.zone,
                "price_per_hour": round(o.price_per_hour * noise, 4),
                "spot_price_per_hour": round(spot * rng.lognormvariate(0, 0.15), 4) if spot is not None else None,
                "interruption_bucket": rng.choice(BUCKETS) if o.provider == "aws" else None,
            }))  # fmt: skip
    return out


def job(i: int, rng: random.Random):  # type: ignore[no-untyped-def]
    shape = dict(rng.choice(SHAPES))
    if "model" in shape:
        shape["model"] = {**shape["model"], "tokens": rng.choice(TOKENS)}
    shape["checkpoint"] = {"store": "s3://bucket/run", "interval": "10m"}
    return parse_spec({"name": f"job-{i}", "run": "python train.py", **shape})


def main() -> None:
    rng = random.Random(2024)
    offers = synthetic_catalog(TARGET_OFFERS, rng)
    t0 = time.perf_counter()
    index = OfferIndex(offers)
    build_s = time.perf_counter() - t0

    # Per-job latency. Cold: the fit of each offer class is computed afresh (a job unlike any
    # before it); warm: the index already knows jobs with the same needs (a sweep, a queue).
    singles = [job(i, rng) for i in range(300)]
    per_job, warm, full = [], [], []
    for spec in singles:
        index.fits.clear()
        t = time.perf_counter()
        top = candidates(spec, index, limit=10)
        per_job.append((time.perf_counter() - t) * 1000)
        assert top, spec
    for spec in singles:
        t = time.perf_counter()
        candidates(spec, index, limit=10)
        warm.append((time.perf_counter() - t) * 1000)
    for spec in singles[:50]:
        t = time.perf_counter()
        candidates(spec, index)
        full.append((time.perf_counter() - t) * 1000)

    queue = [job(i, rng) for i in range(10_000)]
    t = time.perf_counter()
    placed = sum(1 for spec in queue if candidates(spec, index, limit=10))
    queue_s = time.perf_counter() - t

    result = {
        "offers": len(offers),
        "offer_classes": len(index.classes),
        "cpus": os.cpu_count(),
        "index_build_s": round(build_s, 3),
        "median_ms_per_job": round(statistics.median(per_job), 3),
        "p95_ms_per_job": round(sorted(per_job)[int(0.95 * len(per_job))], 3),
        "median_ms_per_job_warm": round(statistics.median(warm), 3),
        "median_ms_full_ranking": round(statistics.median(full), 3),
        "queue_jobs": len(queue),
        "queue_placed": placed,
        "queue_s": round(queue_s, 3),
        "targets_met": statistics.median(per_job) <= 5 and queue_s < 10,
    }
    print(f"{len(offers)} offers in {len(index.classes)} classes; index built in {build_s:.2f} s")
    print(f"one job (top 10): median {result['median_ms_per_job']} ms cold, p95 {result['p95_ms_per_job']} ms, "
          f"median {result['median_ms_per_job_warm']} ms warm")
    print(f"one job, full ranking: median {result['median_ms_full_ranking']} ms")
    print(f"{len(queue)} queued jobs placed in {queue_s:.2f} s")
    print(json.dumps(result))


def write_catalog_csv(path: Path, rng: random.Random) -> int:
    """The 50k-row CSV of ``--catalog``: AWS and GCP rows only (what an old tree's GPU table knows)."""
    from gpuorch.catalog import OfferRow, write_csv

    base = [o for o in load_offers() if o.provider in ("aws", "gcp")]
    rows = []
    for o in synthetic_catalog(TARGET_OFFERS, rng, base)[:TARGET_OFFERS]:
        fields = {k: getattr(o, k) for k in OfferRow._fields}
        spot = fields["spot_price_per_hour"]
        if spot is not None:  # the noise may push spot past on-demand or under 10%: a clean list for every tree
            fields["spot_price_per_hour"] = round(min(max(spot, 0.1001 * o.price_per_hour), o.price_per_hour), 4)
        rows.append(OfferRow(**fields))
    with path.open("w", newline="") as f:
        write_csv(rows, f)
    return len(rows)


def plan_cpu_s(tree: Path, catalog: Path, job_file: Path, cache_home: Path) -> float:
    """CPU seconds (user + system) of one ``gpuorch plan --catalog`` in a fresh process run from ``tree``."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'providers'}", "XDG_CACHE_HOME": str(cache_home)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "gpuorch", "plan", "--catalog", str(catalog), str(job_file),
                           "--json"], env=env, cwd=tree, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: plan --catalog failed: {done.stderr.strip()[-500:]}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def catalog_main(old: Path | None, runs: int) -> None:
    new = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="gpuorch-bench-") as tmp:
        work = Path(tmp)
        catalog, job_file, cache = work / "offers-50k.csv", work / "job.yaml", work / "cache"
        rows = write_catalog_csv(catalog, random.Random(2024))
        job_file.write_text('name: bench\nrun: python train.py\nresources:\n  gpu: "A100:8"\n')
        times: dict[str, list[float]] = {"new_cold": [], "new_warm": [], **({"old": []} if old else {})}
        for i in range(runs):
            os.utime(catalog, ns=(time.time_ns(), time.time_ns() + i))  # a "new" file: the content hash decides
            for cold in (True, False):
                if cold:
                    for f in cache.rglob("*"):
                        if f.is_file():
                            f.unlink()
                times["new_cold" if cold else "new_warm"].append(plan_cpu_s(new, catalog, job_file, cache))
            if old is not None:
                times["old"].append(plan_cpu_s(old, catalog, job_file, cache))
    result: dict[str, object] = {"rows": rows, "runs": runs, "cpus": os.cpu_count(), "load_1m": os.getloadavg()[0]}
    for name, xs in times.items():
        result[name] = {"min": round(min(xs), 2), "median": round(statistics.median(xs), 2), "max": round(max(xs), 2)}
    print(json.dumps(result))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--catalog", action="store_true", help="measure plan --catalog on a 50k-row CSV instead")
    parser.add_argument("--old", type=Path, help="with --catalog: an older tree to alternate with (a git worktree)")
    parser.add_argument("--runs", type=int, default=5, help="with --catalog: rounds (default 5)")
    args = parser.parse_args()
    if args.catalog:
        catalog_main(args.old, max(1, args.runs))
    else:
        main()
