"""Cold start of the CLI: `gpuorch offers --json` and `gpuorch status --json`, each a fresh process.

Median wall time of several runs, the fastest run, and the median CPU time, after one warm-up
run that fills the OS file cache and Python's bytecode cache. `status` runs against an empty
state directory; if the command does not exist yet or fails, it is reported as null.
Target (issue 3): <= 0.3 s each.
Prints one JSON object on its last line.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 7
TARGET_S = 0.3


def launcher() -> list[str]:
    script = Path(sys.executable).with_name("gpuorch")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpuorch"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float] | None:
    """(median wall, fastest wall, median CPU) seconds of ``cmd`` over RUNS cold processes, or
    None if it fails. CPU time (user + sys) is the steadier figure on a busy machine."""
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:  # warm-up, and does it work?
        return None
    wall, cpu = [], []
    for _ in range(RUNS):
        t, c = time.perf_counter(), _cpu()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        wall.append(time.perf_counter() - t)
        cpu.append(_cpu() - c)
    return statistics.median(wall), min(wall), statistics.median(cpu)


def main() -> None:
    home = tempfile.mkdtemp(prefix="gpuorch-bench-")
    env = {**os.environ, "GPUORCH_HOME": home}
    env.pop("GPUORCH_DATABASE_URL", None)
    try:
        base = launcher()
        runs = {
            "python_bare": timed([sys.executable, "-c", "pass"], env),
            # The floor of any typer command here: typer parses parameters through pydantic.
            "typer_import": timed([sys.executable, "-c", "import typer, typer._adapters"], env),
            "offers_json": timed([*base, "offers", "--json"], env),
            "status_json": timed([*base, "status", "--json"], env),
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)
    result: dict[str, object] = {"launcher": " ".join(Path(p).name for p in base), "runs": RUNS}
    for name, t in runs.items():
        result[f"{name}_s"] = round(t[0], 3) if t else None
        result[f"{name}_min_s"] = round(t[1], 3) if t else None
        result[f"{name}_cpu_s"] = round(t[2], 3) if t else None
    result["load_avg_1m"] = round(os.getloadavg()[0], 2)
    result["target_s"] = TARGET_S
    measured = [runs["offers_json"], runs["status_json"]]
    result["targets_met"] = all(t is not None and t[0] <= TARGET_S for t in measured)
    for name in ("offers", "status"):
        t = runs[f"{name}_json"]
        figures = f"median {t[0]:.3f} s, fastest {t[1]:.3f} s, CPU {t[2]:.3f} s" if t else "not available"
        print(f"gpuorch {name} --json: {figures}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
