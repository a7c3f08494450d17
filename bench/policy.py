"""Deadline-aware spot policies on the real 9-zone p3 traces, against the published table.

    python bench/policy.py [--traces DIR] [--windows 20] [--seed 0] [--jobs 2]

Three settings from "Can't Be Late" (NSDI 2024): a 48 h job, on-demand $3.06/h, spot
$0.9731/h, deadline / changeover 52 h / 0.1 h, 52 h / 0.2 h, 70 h / 0.2 h; ``--windows``
random windows per zone (the same starts in every zone and for the multi-region runs).
Prints a table per setting and, on its last line, one JSON object: each policy's mean cost
and misses, single- and multi-region, the published means, and whether the targets hold
(no miss; single-region gpuorch <= Uniform Progress; multi-region gpuorch within 5% of the
multi-region optimum). Exits 1 when a target fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # runs from a checkout without an install: the imports below follow it (noqa: E402)

from gpuorch.policy.evaluate import Report, evaluate  # noqa: E402
from gpuorch.policy.model import Job  # noqa: E402
from gpuorch.policy.traces import load_trace, trace_files  # noqa: E402

DEFAULT_TRACES = REPO / "tests" / "data" / "spot-traces" / "aws-p3-2023"
SETTINGS = ((52.0, 0.1), (52.0, 0.2), (70.0, 0.2))
PUBLISHED = {  # mean $ per job, Wu et al. NSDI 2024 simulator (data/README.md)
    (52.0, 0.1): {"on-demand": 147.19, "greedy": 108.06, "uniform-progress": 94.86, "optimal": 83.65},
    (52.0, 0.2): {"on-demand": 147.52, "greedy": 110.72, "uniform-progress": 103.13, "optimal": 87.38},
    (70.0, 0.2): {"on-demand": 147.52, "greedy": 85.74, "uniform-progress": 81.49, "optimal": 74.75},
}
MULTI_REGION_GAP = 0.05


def run_setting(traces_dir: str, deadline_h: float, changeover_h: float, windows: int, seed: int) -> dict:
    traces = [load_trace(p) for p in trace_files(traces_dir)]
    job = Job.from_hours(
        work_h=48, deadline_h=deadline_h, changeover_h=changeover_h, gap_s=traces[0].gap_s,
        on_demand_price=3.06, spot_price=0.9731,
    )  # fmt: skip
    started = time.perf_counter()
    report: Report = evaluate(traces, job, windows, seed)
    single = {k: v.as_dict() for k, v in report.policies.items()}
    multi = {k: v.as_dict() for k, v in (report.multi_region or {}).items()}
    published = PUBLISHED[(deadline_h, changeover_h)]
    return {
        "deadline_h": deadline_h,
        "changeover_h": changeover_h,
        "single_region": single,
        "multi_region": multi,
        "published": published,
        "vs_published_pct": {k: round(100 * (single[k]["mean_cost"] / v - 1), 1) + 0.0 for k, v in published.items()},
        "per_zone_mean": {z: {k: round(s.mean_cost, 2) for k, s in st.items()} for z, st in report.per_zone.items()},
        "seconds": round(time.perf_counter() - started, 1),
    }


def check(result: dict) -> dict[str, bool]:
    single, multi = result["single_region"], result["multi_region"]
    missed = sum(s["missed"] for s in single.values()) + sum(s["missed"] for s in multi.values())
    return {
        "no_misses": missed == 0,
        "gpuorch_le_uniform_progress": single["gpuorch"]["mean_cost"] <= single["uniform-progress"]["mean_cost"],
        "multi_region_within_5pct": multi["gpuorch"]["mean_cost"]
        <= (1 + MULTI_REGION_GAP) * multi["optimal"]["mean_cost"],
    }


def print_table(result: dict) -> None:
    single, multi, published = result["single_region"], result["multi_region"], result["published"]
    print(f"\n48 h job, deadline {result['deadline_h']:g} h, changeover {result['changeover_h']:g} h "
          f"({result['seconds']} s)")  # fmt: skip
    print(f"{'policy':18} {'mean $':>8} {'P90 $':>8} {'missed':>6} {'published':>9} {'multi $':>8} {'multi miss':>10}")
    for name, s in single.items():
        pub = f"{published[name]:.2f}" if name in published else "-"
        m = multi.get(name)
        mm = (f"{m['mean_cost']:8.2f} {m['missed']:>10}") if m else f"{'-':>8} {'-':>10}"
        print(f"{name:18} {s['mean_cost']:8.2f} {s['p90_cost']:8.2f} {s['missed']:>6} {pub:>9} {mm}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=str(DEFAULT_TRACES), help="directory of *.json traces")
    parser.add_argument("--windows", type=int, default=20, help="random windows per zone")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="settings run in parallel")
    args = parser.parse_args()
    if not trace_files(args.traces):
        parser.error(f"--traces {args.traces}: no *.json traces there")
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_setting, args.traces, d, c, args.windows, args.seed) for d, c in SETTINGS]
        results = [f.result() for f in futures]
    for result in results:
        result["targets"] = check(result)
        print_table(result)
    met = all(all(r["targets"].values()) for r in results)
    summary = {
        "bench": "policy",
        "traces": Path(args.traces).name,
        "windows_per_zone": args.windows,
        "seed": args.seed,
        "settings": results,
        "targets_met": met,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(summary, separators=(",", ":")))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
