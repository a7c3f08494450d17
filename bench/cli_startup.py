"""Cold start of the CLI: `gpuorch offers --json` and `gpuorch status --json`, each a fresh process.

Median wall time of several runs, the fastest run, and the median CPU time, after one warm-up
run that fills the OS file cache and Python's bytecode cache. `status` runs against an empty
state directory; if the command does not exist yet or fails, it is reported as null.
Target (issue 3): <= 0.3 s each.

The bytecode cache lives in a temporary directory (``PYTHONPYCACHEPREFIX``), whatever
``PYTHONDONTWRITEBYTECODE`` says: an installed gpuorch runs from compiled bytecode, and a tree
that compiles every module on every start measures its source's size instead (as this
benchmark did in an environment with ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` in the
tree; its figures from before this change are not comparable with later ones).

``--old TREE`` (issue 32: no regression) alternates each command between this tree and TREE (an
older checkout: ``git worktree add /tmp/old 89a4b5f``), each with its own root and ``providers``
first on ``PYTHONPATH``, and prints min / median / max CPU and wall time of each; a tree whose
command fails is reported as null with its error line.

``calibration_s``: the time of the fixed Python loop of docs/benchmarks.md, taken before and after
the runs (machines and loads compare by it), beside the 1-minute load average at the end.
Prints one JSON object on its last line.
"""

from __future__ import annotations

import argparse
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
TREE = Path(__file__).resolve().parents[1]


def launcher() -> list[str]:
    script = Path(sys.executable).with_name("gpuorch")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpuorch"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def child_env(home: str, pycache: str, tree: Path | None = None) -> dict[str, str]:
    """The commands' environment: an empty state directory, no database URL, and the bytecode
    cache in ``pycache``; ``tree`` first on the import path."""
    env = {**os.environ, "GPUORCH_HOME": home, "PYTHONPYCACHEPREFIX": pycache}
    env.pop("GPUORCH_DATABASE_URL", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "providers")])
    return env


def works(cmd: list[str], env: dict[str, str]) -> str | None:
    """None if ``cmd`` succeeds (the warm-up run), else its last error line."""
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return None if p.returncode == 0 else (p.stderr.strip().splitlines() or [f"exit code {p.returncode}"])[-1]


def one(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``cmd``. CPU time (user + sys) is the steadier figure on
    a busy machine."""
    t, c = time.perf_counter(), _cpu()
    subprocess.run(cmd, env=env, capture_output=True, check=True)
    return time.perf_counter() - t, _cpu() - c


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float] | None:
    """(median wall, fastest wall, median CPU) seconds of ``cmd`` over RUNS cold processes, or
    None if it fails."""
    if works(cmd, env) is not None:
        return None
    runs = [one(cmd, env) for _ in range(RUNS)]
    return statistics.median(w for w, _ in runs), min(w for w, _ in runs), statistics.median(c for _, c in runs)


def calibration() -> float:
    """Seconds of docs/benchmarks.md's fixed loop, in a fresh interpreter."""
    code = "import time;t=time.perf_counter();[None for _ in range(10_000_000)];print(time.perf_counter()-t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return round(float(out), 3)


def spread(xs: list[float]) -> list[float]:
    return [round(min(xs), 3), round(statistics.median(xs), 3), round(max(xs), 3)]


def compare(old: Path, rounds: int, home: str, pycache: str) -> dict[str, object]:
    """Each command alternated between this tree and ``old``: min / median / max CPU and wall."""
    base = launcher()
    trees = {"new": TREE, "old": old.resolve()}
    out: dict[str, object] = {"old_tree": str(trees["old"]), "rounds": rounds}
    for name in ("offers", "status"):
        cmd = [*base, name, "--json"]
        envs = {k: child_env(str(Path(home) / k), pycache, t) for k, t in trees.items()}  # own stores
        errors = {k: works(cmd, e) for k, e in envs.items()}
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in trees if errors[k] is None}
        for _ in range(rounds):
            for k in runs:
                runs[k].append(one(cmd, envs[k]))
        for k in trees:
            r = runs.get(k)
            out[f"{name}_{k}"] = ({"cpu_s": spread([c for _, c in r]), "wall_s": spread([w for w, _ in r])} if r
                                  else {"error": errors[k]})
            figures = (f"CPU {'/'.join(f'{x:.3f}' for x in spread([c for _, c in r]))} s, wall "
                       f"{'/'.join(f'{x:.3f}' for x in spread([w for w, _ in r]))} s (min/median/max)" if r
                       else f"fails: {errors[k]}")
            print(f"gpuorch {name} --json, {k} tree: {figures}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, help="an older tree to alternate with (issue 32)")
    parser.add_argument("--rounds", type=int, default=15, help="with --old: runs of each command in each tree")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="gpuorch-bench-")
    pycache = tempfile.mkdtemp(prefix="gpuorch-bench-pyc-")
    before = calibration()
    try:
        if args.old is not None:
            result = compare(args.old, max(1, args.rounds), home, pycache)
        else:
            result = measure(home, pycache)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(pycache, ignore_errors=True)
    after, load = calibration(), round(os.getloadavg()[0], 2)
    result["calibration_s"], result["load_avg_1m"] = [before, after], load
    print(f"calibration loop {before:.3f} s before, {after:.3f} s after; load {load}")
    print(json.dumps(result))


def measure(home: str, pycache: str) -> dict[str, object]:
    env = child_env(home, pycache)
    base = launcher()
    runs = {
        "python_bare": timed([sys.executable, "-c", "pass"], env),
        # The floor of any typer command here: typer parses parameters through pydantic.
        "typer_import": timed([sys.executable, "-c", "import typer, typer._adapters"], env),
        "offers_json": timed([*base, "offers", "--json"], env),
        "status_json": timed([*base, "status", "--json"], env),
    }
    result: dict[str, object] = {"launcher": " ".join(Path(p).name for p in base), "runs": RUNS}
    for name, t in runs.items():
        result[f"{name}_s"] = round(t[0], 3) if t else None
        result[f"{name}_min_s"] = round(t[1], 3) if t else None
        result[f"{name}_cpu_s"] = round(t[2], 3) if t else None
    result["target_s"] = TARGET_S
    measured = [runs["offers_json"], runs["status_json"]]
    result["targets_met"] = all(t is not None and t[0] <= TARGET_S for t in measured)
    for name in ("offers", "status"):
        t = runs[f"{name}_json"]
        figures = f"median {t[0]:.3f} s, fastest {t[1]:.3f} s, CPU {t[2]:.3f} s" if t else "not available"
        print(f"gpuorch {name} --json: {figures}")
    return result


if __name__ == "__main__":
    main()
