"""The memory estimator against the project's held-out published runs (issue 36).

``python bench/sizing.py`` prints one JSON line (the last line):

- ``median_abs_err_pct`` / ``worst_under_pct``: every held-out point (tests/data/sizing-holdout.yaml,
  never used to fit a constant) with the knobs its run set;
- ``stack_median_abs_err_pct`` / ``stack_worst_under_pct``: the same points described by their
  training stack alone (``model: {stack: ..., preset, method, precision, seq_len, micro_batch,
  lora_rank, lora_targets}`` and the job's ``distributed:``), every other knob at its default;
- ``picks_too_small`` / ``picks_too_big``: over those stack-only estimates, the smallest card of the
  GPU table the estimate accepts for the run's GPU count, against the run's measured need: too
  small when that card has less usable memory than the run needed, too big when a smaller card of
  the table would have held it (its usable memory less the fit's headroom covers the need);
- the calibration set's figures alongside (``calibration_*``), and the CPU seconds the bench took;
- ``runtime_fit_*`` / ``runtime_holdout_*``: the runtime estimator against published throughput
  (tests/data/runtime-calibration.yaml): median |error| and the worst error of the runs its
  constants were solved on and of those held out (``tests.sizing.runtime_calibration.summary``);
  ``runtime_gddr_*`` the same over the GDDR (PCIe) cards' runs alone (issue 36: the RTX 4090's).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuorch import gpus
from gpuorch.sizing import estimate_memory
from gpuorch.sizing.fit import unsupported
from gpuorch.sizing.memory import allowed_gib
from tests.sizing import calibration as c
from tests.sizing import runtime_calibration as rc


def _need(p: c.Point) -> float:
    """GiB per GPU the run needed on the whole card."""
    assert p.measured_gib is not None
    return p.measured_gib + (p.outside_torch(p.workload.strategy.strategy) if p.measures == "torch" else 0.0)


def _pick(p: c.Point) -> gpus.GpuSpec | None:
    """The smallest table card the estimate accepts for the run's layout."""
    mode = p.workload.strategy.strategy if p.gpus > 1 else "none"
    cards = sorted((g for g in gpus.GPUS if not unsupported(p.workload, g) and g.max_per_node * 16 >= p.gpus),
                   key=lambda g: g.usable)
    for g in cards:
        if estimate_memory(p.workload, p.gpus, mode, g.usable).per_gpu_gib <= allowed_gib(g.usable):
            return g
    return None


def _picks(points: list[c.Point]) -> tuple[int, int]:
    small = big = 0
    for p in points:
        pick = _pick(p)
        if pick is None:
            continue
        need = _need(p)
        if pick.usable < need:
            small += 1
        elif any(g.usable < pick.usable and allowed_gib(g.usable) >= need and not unsupported(p.workload, g)
                 for g in gpus.GPUS):
            big += 1
    return small, big


def _errors(points: list[c.Point]) -> tuple[float, float]:
    errs = [p.error() for p in c.measured(points)]
    return 100 * statistics.median(abs(e) for e in errs), 100 * min(0.0, min(errs))


def main() -> None:
    start = time.process_time()
    hold, cal = c.load(c.HOLDOUT), c.load(c.CALIBRATION)
    hold_stack = [c.by_stack(p) for p in hold]
    cal_stack = [c.by_stack(p) for p in cal]
    med, under = _errors(hold)
    s_med, s_under = _errors(hold_stack)
    small, big = _picks(c.measured(hold_stack))
    c_med, c_under = _errors(cal)
    cs_med, cs_under = _errors(cal_stack)
    c_small, c_big = _picks(c.measured(cal_stack))
    runs = rc.load()
    out = {
        "points": len(c.measured(hold)),
        "median_abs_err_pct": round(med, 1), "worst_under_pct": round(under, 1),
        "stack_median_abs_err_pct": round(s_med, 1), "stack_worst_under_pct": round(s_under, 1),
        "picks_too_small": small, "picks_too_big": big,
        "calibration_points": len(c.measured(cal)),
        "calibration_median_abs_err_pct": round(c_med, 1), "calibration_worst_under_pct": round(c_under, 1),
        "calibration_stack_median_abs_err_pct": round(cs_med, 1),
        "calibration_stack_worst_under_pct": round(cs_under, 1),
        "calibration_picks_too_small": c_small, "calibration_picks_too_big": c_big,
        **rc.summary(runs), **rc.summary(rc.gddr(runs), "runtime_gddr"),
        "cpu_s": round(time.process_time() - start, 3),
    }  # fmt: skip
    for p in c.measured(hold):
        sys.stdout.write(f"{p.id:40s} knobs {p.error():+7.1%}  stack {c.by_stack(p).error():+7.1%}\n")
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
