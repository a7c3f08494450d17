"""Experiment (not shipped): a model-based multi-region spot policy, learned from market history.

    python bench/policy_markov.py [--use all|leave|outage|leave,odout] [--refresh-h H] [--held-out] [--only markov]

Issue 12 item 8 asks for the multi-region policy within 5 % of the omniscient optimum on the v100
set. This script records the model-based attempt of session 7 (docs/benchmarks.md, "Session 7"),
so that its rows can be rerun; nothing in ``gpuorch/`` uses it.

The model. A virtual *follower* replays the market's history up to now (the ticks before a window
start are history): it stays on a zone until that zone loses spot, then moves to the zone with the
longest current run, or waits through an all-zone outage. Its state per tick is one of 24 "up"
states (age of the followed zone's run in 8 buckets x other zones up: 0, 1, 2+) or 6 "out" states
(age of the all-zone outage). Counting its tick-to-tick transitions, split by whether the followed
zone survived, gives two matrices (survives / preempted), smoothed towards a prior (runs of 2 h,
outages of 0.5 h, worth ``--prior-ticks`` ticks), raised to steps of about 3 minutes.

The decision. A finite-horizon dynamic programme over (steps left, slack in steps, the mode still
running: idle / on-demand / spot, market state) minimises expected cost; a start (a changeover)
jumps ``changeover + 1`` steps and spends a changeover of slack; running out of slack is infinite
cost. It is solved at the job's start (numpy, 0.3-2 s per solve) and, with ``--refresh-h H``,
again every H hours of the job from the history seen by then (the window's ticks so far
included). ``--use all`` lets the programme take every decision (``best_spot_zone`` still picks
the zone); ``--use leave`` keeps gpuorch's rules except when the job is on on-demand and spot is
up somewhere (leave or stay); ``outage`` only for the choice between idling and on-demand with
no spot; ``odout`` idle-from-on-demand in an outage. The shared deadline guard has the last word
in every variant.

Windows, seeds and the optimum as in ``bench/policy.py`` (v100 10 windows, p3 20 windows per
seed); design seeds v100 1-3 and p3 777, ``--held-out`` v100 0, 11, 12 and p3 0, 999, 4242. Prints
one line per set: mean cost / mean optimum - 1, in %, at 52 h / 0.1 h, 52 h / 0.2 h, 70 h / 0.2 h,
and the misses, for the variant and for the shipped gpuorch policy, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # runs from a checkout without an install (noqa: E402)

from gpuorch.policy.baselines import deadline_guard, live_spot  # noqa: E402
from gpuorch.policy.deadline import GpuorchPolicy, best_spot_zone  # noqa: E402
from gpuorch.policy.evaluate import window_starts  # noqa: E402
from gpuorch.policy.model import OD, Action, Job, Observation, State  # noqa: E402
from gpuorch.policy.optimal import optimal_costs  # noqa: E402
from gpuorch.policy.simulator import simulate  # noqa: E402
from gpuorch.policy.traces import load_trace, trace_files  # noqa: E402

TRACES = REPO / "tests" / "data" / "spot-traces"
SETS = {"v100": "aws-v100-2023-04", "p3": "aws-p3-2023"}
WINDOWS = {"v100": 10, "p3": 20}
SETTINGS = ((52.0, 0.1), (52.0, 0.2), (70.0, 0.2))
DESIGN = (("v100", 1), ("v100", 2), ("v100", 3), ("p3", 777))
HELD_OUT = (("v100", 0), ("v100", 11), ("v100", 12), ("p3", 0), ("p3", 999), ("p3", 4242))

UP_EDGES_H = (0, 0.1, 0.25, 0.5, 1, 2, 4, 8)
OUT_EDGES_H = (0, 0.1, 0.25, 0.5, 1, 2)
OTHERS = 3  # other zones up: 0, 1, 2+
N_UP = len(UP_EDGES_H) * OTHERS
N_STATES = N_UP + len(OUT_EDGES_H)
BIG = 1e9
STEP_S = 180  # the programme's step, rounded to whole ticks


def bucket(edges: tuple[float, ...], age_h: float) -> int:
    k = 0
    while k + 1 < len(edges) and age_h >= edges[k + 1]:
        k += 1
    return k


def up_state(age_h: float, others: int) -> int:
    return bucket(UP_EDGES_H, age_h) * OTHERS + min(others, OTHERS - 1)


_FOLLOWERS: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def follower(avail: np.ndarray, gap_s: int) -> tuple[np.ndarray, np.ndarray]:
    """Per tick, the follower's state, and whether its zone lost spot before the next tick.

    Causal: tick t's entries depend on ticks <= t + 1 only, and :func:`learn` reads them up to now.
    """
    hit = _FOLLOWERS.get(id(avail))
    if hit is not None and hit[0] is avail:  # the entry holds the array: its id cannot be reused meanwhile
        return hit[1], hit[2]
    zones, ticks = avail.shape
    rows = avail.T.tolist()
    up = [0] * zones
    zone, outage = -1, 0
    state = np.zeros(ticks, np.int16)
    ended = np.zeros(ticks, bool)
    for t in range(ticks):
        row = rows[t]
        for z in range(zones):
            up[z] = up[z] + 1 if row[z] else 0
        if t > 0:
            ended[t - 1] = zone >= 0 and not row[zone]
        if not (zone >= 0 and row[zone]):
            live = [z for z in range(zones) if row[z]]
            zone = max(live, key=lambda z: up[z]) if live else -1
        if zone >= 0:
            outage = 0
            state[t] = up_state(up[zone] * gap_s / 3600, sum(row) - 1)
        else:
            outage += 1
            state[t] = N_UP + bucket(OUT_EDGES_H, outage * gap_s / 3600)
    _FOLLOWERS[id(avail)] = (avail, state, ended)
    return state, ended


def learn(avail: np.ndarray, gap_s: int, now: int, ticks_per_step: int, prior: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-step transition matrices (followed zone survives, it is lost) from the ticks before ``now``."""
    state, ended = follower(avail, gap_s)
    n = max(now - 1, 0)
    s0, s1, e = state[:n], state[1 : n + 1], ended[:n]
    keep, lost = np.zeros((N_STATES, N_STATES)), np.zeros((N_STATES, N_STATES))
    np.add.at(keep, (s0[~e], s1[~e]), 1.0)
    np.add.at(lost, (s0[e], s1[e]), 1.0)
    prior_keep, prior_lost = np.zeros_like(keep), np.zeros_like(keep)
    for i in range(N_UP):  # runs of 2 h on average, ending in an outage
        prior_lost[i, N_UP] = gap_s / 7200
        prior_keep[i, i] = 1 - gap_s / 7200
    for i in range(N_UP, N_STATES):  # outages of 0.5 h
        prior_keep[i, 0] = gap_s / 1800
        prior_keep[i, i] = 1 - gap_s / 1800
    total = keep.sum(1) + lost.sum(1) + prior
    keep = (keep + prior * prior_keep) / total[:, None]
    lost = (lost + prior * prior_lost) / total[:, None]
    both = np.linalg.matrix_power(keep + lost, ticks_per_step)
    survive = np.linalg.matrix_power(keep, ticks_per_step)
    return survive, both - survive


def solve(keep: np.ndarray, lost: np.ndarray, steps: int, slack: int, co: int, od: float, sp: float) -> np.ndarray:
    """``act[steps left, slack, mode, market]``: 0 idle, 1 on-demand, 2 spot; mode as the action codes."""
    every = keep + lost
    n = co + 1
    every_n = np.linalg.matrix_power(every, n)
    keep_n = np.linalg.matrix_power(keep, n)
    lost_n = every_n - keep_n
    out = np.ones(N_STATES, bool)
    out[:N_UP] = False
    tr = {k: m.T.copy() for k, m in (("e", every), ("k", keep), ("l", lost), ("en", every_n), ("kn", keep_n),
                                      ("ln", lost_n))}  # fmt: skip
    values = {0: np.zeros((slack + 1, 3, N_STATES))}
    act = np.zeros((steps + 1, slack + 1, 3, N_STATES), np.int8)
    done = np.arange(slack + 1)
    q = np.empty((3, slack + 1, N_STATES))
    for t in range(1, steps + 1):
        prev = values[t - 1]
        idle = np.full((slack + 1, N_STATES), BIG)
        idle[1:] = (prev[:, 0, :] @ tr["e"])[:-1]
        od_keep = od + prev[:, 1, :] @ tr["e"]
        spot_keep = sp + prev[:, 2, :] @ tr["k"] + prev[:, 0, :] @ tr["l"]
        spot_keep[:, out] = BIG
        od_start = np.full((slack + 1, N_STATES), BIG)
        spot_start = np.full((slack + 1, N_STATES), BIG)
        if t - n >= 0 and co <= slack:
            back = values[t - n][: slack + 1 - co]
            od_start[co:] = od * n + back[:, 1, :] @ tr["en"]
            spot_start[co:] = sp * n + back[:, 2, :] @ tr["kn"] + back[:, 0, :] @ tr["ln"]
            spot_start[:, out] = BIG
        value = np.empty((slack + 1, 3, N_STATES))
        for mode in range(3):
            q[0], q[1], q[2] = idle, od_keep if mode == 1 else od_start, spot_keep if mode == 2 else spot_start
            act[t, :, mode, :] = q.argmin(0)
            value[:, mode, :] = np.minimum(q.min(0), BIG)
        value[done >= t] = 0.0  # the work is done
        values[t] = value
        values.pop(t - n - 1, None)
    return act


class MarkovPolicy:
    """The programme's decisions where ``use`` says so, gpuorch's rules elsewhere (module docstring)."""

    name = "markov"

    def __init__(self, job: Job, avail: np.ndarray, start: int, use: str = "all", prior: float = 100.0,
                 refresh_h: float | None = None) -> None:  # fmt: skip
        self.use, self.avail, self.start, self.gap, self.prior = use, avail, start, job.gap_s, prior
        self.per_step = max(1, round(STEP_S / job.gap_s))
        self.step_s = self.per_step * job.gap_s
        self.co = max(1, round(job.changeover_s / self.step_s))
        self.state, _ = follower(avail, job.gap_s)
        self.refresh = None if refresh_h is None else max(1, round(refresh_h * 3600 / job.gap_s))
        self.built: int | None = None
        self.rules = GpuorchPolicy()

    def build(self, job: Job, tick: int) -> None:
        """Learn from the market up to this tick and solve the programme for the time left."""
        keep, lost = learn(self.avail, job.gap_s, self.start + tick, self.per_step, self.prior)
        steps = (job.deadline_ticks - tick) * job.gap_s // self.step_s
        slack = min(steps, (job.deadline_ticks * job.gap_s - job.work_s) // self.step_s + 2)
        per_h = self.step_s / 3600
        self.act = solve(keep, lost, steps, slack, self.co, job.on_demand_price * per_h, job.spot_price * per_h)
        self.built = tick

    def programme(self, job: Job, state: State, obs: Observation) -> Action:
        if self.built is None or (self.refresh is not None and state.tick - self.built >= self.refresh):
            self.build(job, state.tick)
        spot = live_spot(state) or best_spot_zone(obs)
        if spot is not None:
            market = up_state(obs.up_ticks[spot.zone] * self.gap / 3600, sum(obs.spot) - 1)
        else:
            market = max(int(self.state[self.start + state.tick]), N_UP)  # the outage's age: history only
        left_s = (job.deadline_ticks - state.tick) * job.gap_s
        work_s = state.remaining_work_s(job) + (state.changeover_left_s if state.placement else 0)
        t = min(left_s // self.step_s, self.act.shape[0] - 1)
        s = max(0, min((left_s - work_s) // self.step_s, self.act.shape[1] - 1))
        mode = 0 if state.placement is None else 1 if state.placement == OD else 2
        a = int(self.act[t, s, mode, market])
        action = None if a == 0 else OD if a == 1 or spot is None else spot
        return deadline_guard(job, state, action, spot)

    def decide(self, job: Job, state: State, obs: Observation) -> Action:
        anywhere, on_od = any(obs.spot), state.placement == OD
        mine = (
            self.use == "all"
            or ("leave" in self.use and anywhere and on_od)
            or ("outage" in self.use and not anywhere and not on_od)
            or ("odout" in self.use and not anywhere and on_od)
        )
        return self.programme(job, state, obs) if mine else self.rules.decide(job, state, obs)


_SETS: dict[str, tuple[np.ndarray, int]] = {}


def market(name: str) -> tuple[np.ndarray, int]:
    """``(avail[zone, tick], gap_s)`` of one shipped set, loaded once."""
    if name not in _SETS:
        traces = [load_trace(p) for p in trace_files(TRACES / SETS[name])]
        _SETS[name] = (np.stack([t.available for t in traces]), traces[0].gap_s)
    return _SETS[name]


def gap_pct(name: str, seed: int, deadline_h: float, changeover_h: float, make) -> tuple[float, float, int]:
    """(mean cost, mean optimum, misses) of ``make(job, avail, start)`` over one seed's windows, multi-region."""
    avail, gap_s = market(name)
    job = Job.from_hours(work_h=48, deadline_h=deadline_h, changeover_h=changeover_h, gap_s=gap_s,
                         on_demand_price=3.06, spot_price=0.9731)  # fmt: skip
    starts = window_starts(avail.shape[1], job, WINDOWS[name], seed)
    best = optimal_costs(job, np.stack([avail[:, s : s + job.deadline_ticks] for s in starts]))
    runs = [simulate(make(job, avail, int(s)), job, avail, int(s)) for s in starts]
    return float(np.mean([r.cost for r in runs])), float(best.mean()), sum(r.missed for r in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--use", default="leave", help="where the programme decides: all, leave, outage, odout")
    parser.add_argument("--prior-ticks", type=float, default=100.0)
    parser.add_argument("--refresh-h", type=float, help="learn again and re-solve every so many hours of the job")
    parser.add_argument("--only", help="run only this variant: gpuorch or markov")
    parser.add_argument("--held-out", action="store_true", help="the held-out seeds instead of the design seeds")
    args = parser.parse_args()
    seeds = HELD_OUT if args.held_out else DESIGN
    makers = {
        "gpuorch": lambda job, avail, start: GpuorchPolicy(),
        f"markov[{args.use}]": lambda job, avail, start: MarkovPolicy(
            job, avail, start, args.use, args.prior_ticks, args.refresh_h
        ),
    }
    makers = {k: v for k, v in makers.items() if args.only is None or k.startswith(args.only)}
    started = time.process_time()
    out: dict[str, dict[str, list[float | int]]] = {}
    for label, make in makers.items():
        for name in SETS:
            pct, missed = [], 0
            for deadline_h, changeover_h in SETTINGS:
                rows = [gap_pct(name, seed, deadline_h, changeover_h, make) for n, seed in seeds if n == name]
                pct.append(round(100 * (np.mean([r[0] for r in rows]) / np.mean([r[1] for r in rows]) - 1), 1))
                missed += sum(r[2] for r in rows)
            out.setdefault(label, {})[name] = [*pct, missed]
            print(f"{label:18} {name:5} {' / '.join(f'{p:+.1f}' for p in pct)} %  missed {missed}", flush=True)
    summary = {"bench": "policy_markov", "use": args.use, "prior_ticks": args.prior_ticks, "refresh_h": args.refresh_h,
               "seeds": ",".join(f"{n}:{s}" for n, s in seeds), "pct_above_optimum_and_misses": out,
               "cpu_s": round(time.process_time() - started, 1)}  # fmt: skip
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
