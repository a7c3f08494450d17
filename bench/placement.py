"""Placement over a full-size synthetic catalog.

The shipped snapshot (public AWS + GCP slice) is replicated across synthetic regions and zones
with +-10% log-normal price noise and random AWS interruption buckets until it holds at least
50,000 offers. Then:

- per-job latency: each job spec of a mixed set placed alone (the daemon's call, top 10),
  cold (offer-class fits computed afresh) and warm (the index has seen the same needs);
- a queue of 10,000 jobs (a mix of sizes, methods, filters and token counts) placed in turn.

Targets (issue 3): median <= 5 ms per job; 10,000 queued jobs in < 10 s on a 2-core machine.
Prints one JSON object on its last line.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuorch.jobs.spec import parse_spec  # noqa: E402
from gpuorch.placement import OfferIndex, candidates  # noqa: E402
from gpuorch.provider.catalog import load_offers  # noqa: E402
from gpuorch.provider.port import Offer  # noqa: E402

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


def synthetic_catalog(target: int, rng: random.Random) -> list[Offer]:
    base = load_offers()
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


if __name__ == "__main__":
    main()
