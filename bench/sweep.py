"""Sweeps: does a cost-capped overnight sweep spend its cap on trials that finish?

    python bench/sweep.py [--seed 0] [--cap 2.5] [--hours 10] [--no-prune]
    python bench/sweep.py --small-cap [--seed 0] [--hours 3]   # the small-cap night (issue 35)

One seeded overnight scenario, run twice through the real reconciler on a real SQLite store with
a fake clock (a night in seconds of CPU):

- **The market** is the sim provider's (``gpuorch_sim.market.SimMarket``) replaying the shipped
  p3 traces of four AWS zones (``tests/data``: us-east-1c, 1d, 1f, us-east-2a; the price series
  of 1f and 2a), from a seeded point in the traces. Spot capacity follows each zone's trace; a
  spot instance is reclaimed at its zone's next drop, after AWS's 120 s notice in three zones
  and with no notice in us-east-1d. The instances themselves are the FakeProvider's scripted jobs
  (``gpuorch.testing``), fed that market tick by tick: the sim's real agents run in wall time,
  which a 10-hour night cannot. Their runner recycles an instance for another attempt, as the
  local, sim and SSH runners do, so a trial's instance is kept warm (the trials' default
  ``keep_warm``) and the next trial that fits it runs there without a boot, through the
  daemon's own warm pool (``reconciler/apply/warm.py``).
- **The sweep**: a 3x3 grid over LR x SEED, ``max_parallel: 3``, a cap that cannot cover every
  trial, a deadline. Each trial is a 700-step job (6 s a step, 70 minutes of work) that
  checkpoints every 50 steps and reports its loss every 50 steps; the loss falls with the step
  and depends on LR (best at 0.003) and SEED. With pruning (default, unless ``--no-prune`` or
  the code has none), the sweep names a pruning rule on the loss (``--rule``, default ASHA: the
  median rule waits for finished trials, which a cap this tight may not allow), and names the
  trials' last step (``objective.max_step: 700``, unless ``--no-max-step``) so that money goes
  to the trials it can finish (``gpuorch.sweeps.finish``).
- **The night** ends at the sweep's deadline (plus 10 minutes), when every trial has ended, or
  after an hour with nothing running and no launch asked for (the sweep waits on money: the
  morning). An hour without spot capacity, with trials still probing for it, does not end it.
- **The serial baseline**: the same trials one at a time (``max_parallel: 1``), no cap, on the
  same market; it "finishes" the trials that end before its running spend passes the cap.

Spend on an attempt is *wasted* when the attempt was stopped with no use: no finished result,
no pruning decision, and no checkpoint of it that a later attempt resumed from. A warm
instance's idle time is spend (the caps count it) in its own bucket, as in the morning table
(``idle_usd``; ``idle_unused_usd``: that of instances released unused). ``--trace`` prints each
trial's attempts and idle periods, and which were wasted.

**The small-cap night** (``--small-cap``, ``small_cap``): 9 short trials and a cap of about three
of them on the night's market, plain (the trials' default ``keep_warm``), plain with ``keep_warm: 0s``
(``small_cap_cold_*``) and with ``max_step``, against its own serial baseline; it prints
``small_cap_trials_finished``, ``small_cap_serial_baseline``, ``small_cap_unspent_share`` (null when
every trial finished), ``small_cap_wasted_share`` (and the same ``small_cap_max_step_*``),
``warm_reuse_saved_usd`` (the serial loop's first three trials without warm reuse less with it) and
``small_cap_warm_reuse_saved_usd`` (the same comparison in the capped night).

Prints human lines, then one JSON object on its last line: ``trials_finished``,
``trials_pruned``, ``spend``, ``cap``, ``wasted_share``, ``serial_baseline_finished`` and a few
more.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "providers"))

import yaml  # noqa: E402
from sqlmodel import func, select  # noqa: E402

from gpuorch.clock import FakeClock  # noqa: E402
from gpuorch.errors import UserInputError  # noqa: E402
from gpuorch.money.caps import Policy  # noqa: E402
from gpuorch.money.cost import attempt_cost, cost_until  # noqa: E402
from gpuorch.reconciler import Reconciler  # noqa: E402
from gpuorch.store import Store  # noqa: E402
from gpuorch.store.models import Attempt, Checkpoint, Job, TerminationReason, WarmInstance  # noqa: E402
from gpuorch.sweeps import intent  # noqa: E402
from gpuorch.sweeps.spec import load_sweep  # noqa: E402
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider, WarmCapableProvider  # noqa: E402
from gpuorch.warm.ledger import idle_attempt, idle_cost  # noqa: E402
from gpuorch_sim.market import SimClock, SimMarket, SimOptions  # noqa: E402

DATA = REPO / "tests" / "data"
ZONES = ("us-east-1c", "us-east-1d", "us-east-1f", "us-east-2a")
PRICED = ("us-east-1f", "us-east-2a")  # the zones with a price series; the others sell at $0.9731/h
NO_NOTICE = "us-east-1d"
STEP_S = 6.0  # seconds of work per step
STEPS = 700
EVERY = 50  # steps between checkpoints and between loss reports
LRS = (0.0003, 0.003, 0.03)
SEEDS = (0, 1, 2)
START = datetime(2026, 11, 27, 22, 0, tzinfo=UTC)
BOOT_S = 60.0
# The small-cap night (--small-cap): short trials, a cap of about three of them.
SMALL_STEPS, SMALL_EVERY = 100, 10  # 10 minutes of work, a checkpoint and a loss line a minute
SMALL_TRIALS = 3.3  # the cap in trials' cost on the night's market: three, and the horizon the last one keeps reserved


def market(seed: int) -> SimMarket:
    """The three zones' traces and prices, from a seeded point of the seven weeks they cover."""
    traces = [f"{z}={next((DATA / 'spot-traces' / 'aws-p3-2023').glob(f'{z}_*.json'))}" for z in ZONES]
    prices = [f"{z}={next((DATA / 'spot-prices' / 'aws-p3-2023').glob(f'{z}_*.json'))}" for z in PRICED]
    opts = SimOptions(traces=traces, prices=prices, zones={NO_NOTICE: {"notice_s": 0}}, boot_s=0)
    start_s = random.Random(seed).uniform(0, 40 * 86400)
    return SimMarket(opts, SimClock(START.timestamp(), start_s, 1.0))


def loss(progress: float, env: dict[str, str]) -> dict:
    step = int(round(progress / STEP_S))
    lr, seed = float(env["LR"]), int(env["SEED"])
    base = 0.3 * abs(math.log10(lr / 0.003)) + 0.02 * seed
    return {"step": step, "loss": round(base + 2.0 * 50 / (50 + step), 6)}


class Feed:
    """Brings the FakeProvider up to date with the sim market at the clock's time."""

    def __init__(self, fake: FakeProvider, m: SimMarket, clock: FakeClock) -> None:
        self.fake, self.m, self.clock = fake, m, clock
        self.reclaims: dict[str, tuple[float | None, float]] = {}  # instance -> (notice, kill) epochs
        self.preemptions = self.unannounced = 0

    def tick(self) -> None:
        now = self.clock.now().timestamp()
        self.fake._offers = [o.model_copy(update={"provider": self.fake.name}) for o in self.m.offers(now)]
        for z in ZONES:
            self.fake.set_capacity(z, "p3.2xlarge", True, self.m.spot_available(z, now))
        for inst in self.fake.live_instances():
            if not inst.spot:
                continue
            if inst.id not in self.reclaims:
                r = self.m.reclaim(inst.zone, now)
                self.reclaims[inst.id] = (None, math.inf) if r is None else (r.notice_at, r.kill_at)
            notice, kill = self.reclaims[inst.id]
            if inst.preemption_deadline is None and notice is not None and now >= notice:
                self.fake.inject_preemption(inst.id, notice_s=max(1.0, kill - now))
                self.preemptions += 1
            elif notice is None and now >= kill:
                self.fake.vanish(inst.id)
                self.preemptions += 1
                self.unannounced += 1


TEMPLATE = {"run": "python train.py --lr {LR} --seed {SEED}", "resources": {"gpu": "V100:16GB:1"},
            "spot_policy": "spot", "checkpoint": {"store": "file:///tmp/bench-sweep-ckpt", "interval": "60s"},
            "retry": {"max_preemptions": 100}}


def maker(made: dict[tuple[int, str], int], job_id: int, name: str) -> int | None:
    """The attempt that wrote checkpoint ``name``: its row's, else the number the scripted job
    puts in the name (``p000300-a7``: attempt 7 uploaded it, and was lost before the daemon read
    its report, so no row records it, though a later attempt restored it)."""
    if (job_id, name) in made:
        return made[(job_id, name)]
    m = re.search(r"-a(\d+)$", name)
    return int(m.group(1)) if m else None


def run(seed: int, hours: float, parallel: int, cap: float | None, rule: str | None, workdir: Path,
        stop_at_spend: float | None = None, finish_first: bool = False, steps: int = STEPS,
        every: int = EVERY, keep_warm: str | None = None, trace: bool = False) -> dict:
    clock = FakeClock(START)
    store = Store(f"sqlite:///{workdir / 'state.db'}")
    m = market(seed)
    script = FakeJobScript(duration_s=steps * STEP_S, checkpoint_every_s=every * STEP_S, final_checkpoint_s=20,
                           metrics=loss, metrics_every_s=every * STEP_S)
    fake = WarmCapableProvider(clock, offers=[], name="sim", boot_s=BOOT_S, script=script)
    feed = Feed(fake, m, clock)
    feed.tick()
    rec = Reconciler(store, {"sim": fake}, clock=clock, budget=Policy())
    doc = {"name": "night", "job": TEMPLATE, "parameters": {"LR": list(LRS), "SEED": list(SEEDS)},
           "max_parallel": parallel, "deadline": f"{hours}h", "objective": {"metric": "loss", "mode": "min"}}
    if finish_first:
        doc["objective"]["max_step"] = steps
    if cap is not None:
        doc["budget"] = {"max_cost": cap}
    if keep_warm is not None:  # the sweep's keep_warm (issue 35 item 1); None: the trials' default
        doc["keep_warm"] = keep_warm
    if rule:
        doc["pruning"] = {"rule": rule}
    path = workdir / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    sweep = intent.submit(store, *load_sweep(path, clock.now()), clock.now())
    rng = random.Random(seed)
    end = START + timedelta(hours=hours, minutes=10)
    passes, idle_since = 0, clock.now()
    while clock.now() < end:
        feed.tick()
        rec.run_pass()
        passes += 1
        if fake.live_instances():
            idle_since = clock.now()
        elif (clock.now() - idle_since).total_seconds() > 3600:  # an hour with nothing running: the morning,
            with store.read() as s:  # unless trials are still asking for spot (no capacity is not the end)
                asked = s.exec(select(func.max(Attempt.requested_at))).one()
            if asked is None or asked.replace(tzinfo=UTC) <= clock.now() - timedelta(hours=1):
                break
        with store.read() as s:
            if all(j.status.terminal for j in intent.trials_of(s, sweep.id or 0)):
                break
            if stop_at_spend is not None and passes % 20 == 0:  # the serial baseline: past the money
                spent = sum(attempt_cost(a, clock.now()) for a in s.exec(select(Attempt))) + sum(
                    idle_cost(w, clock.now()) for w in s.exec(select(WarmInstance)))
                if spent > stop_at_spend:
                    break
        clock.advance(rng.uniform(10, 30))  # within the 30 s decision interval
    return tally(store, sweep.id or 0, feed, passes, clock.now(), trace)


def tally(store: Store, sweep_id: int, feed: Feed, passes: int, now: datetime, trace: bool) -> dict:
    """The night's figures from the store: spend, wasted spend, the finishes (module docstring)."""
    with store.read() as s:
        jobs = intent.trials_of(s, sweep_id)
        ids = [j.id for j in jobs]
        attempts = list(s.exec(select(Attempt).where(Attempt.job_id.in_(ids))))  # type: ignore[union-attr]
        made = {(c.job_id, c.name): c.attempt for c in s.exec(select(Checkpoint))}
        idle = list(s.exec(select(WarmInstance).where(WarmInstance.job_id.in_(ids))))  # type: ignore[attr-defined]
    resumed = {(a.job_id, n) for a in attempts if a.resumed_from and (n := maker(made, a.job_id, a.resumed_from))}
    useful_reasons = {TerminationReason.SUCCEEDED.value, "pruned"}
    spend = wasted = 0.0
    useless: dict[tuple[int, int], float] = {}
    for a in attempts:
        c = attempt_cost(a, now)
        spend += c
        if not ((a.reason is not None and a.reason.value in useful_reasons) or (a.job_id, a.number) in resumed):
            wasted += c
            useless[(a.job_id, a.number)] = c
    # A warm instance's idle time is spend (the caps count it), its own bucket as in the morning
    # table (sweeps/report.py), not an attempt's: ``idle_unused`` is that of the ones released unused.
    billed = [*attempts, *(idle_attempt(w) for w in idle)]
    spend += sum(idle_cost(w, now) for w in idle)
    finished = sorted((j.finished_at, j.id) for j in jobs if j.status.value == "succeeded")
    # the spend so far at each finish, for the serial baseline
    at_finish = [sum(cost_until(a, t, now) for a in billed) for t, _ in finished]
    out = {"finished": len(finished), "pruned": sum(j.status.value == "pruned" for j in jobs),
           "statuses": sorted(j.status.value for j in jobs), "spend": spend, "wasted": wasted,
           "spend_at_finish": at_finish, "passes": passes, "attempts": len(attempts),
           "preemptions": feed.preemptions, "unannounced": feed.unannounced,
           "warm_reused": sum(w.lessee_job_id is not None for w in idle),
           "idle_usd": sum(idle_cost(w, now) for w in idle),
           "idle_unused_usd": sum(idle_cost(w, now) for w in idle if w.lessee_job_id is None),
           "night_h": (now - START).total_seconds() / 3600}
    if trace:
        out["trace"] = trace_lines(jobs, attempts, idle, useless, now)
    return out


def trace_lines(jobs: list[Job], attempts: list[Attempt], idle: list[WarmInstance],
                useless: dict[tuple[int, int], float], now: datetime) -> list[str]:
    """Each trial, its attempts and the idle periods it left (minutes into the night), and what of
    its spend was wasted: the per-trial trace (``--trace``)."""
    def m(t: datetime | None) -> str:
        return "-" if t is None else f"{(t.replace(tzinfo=UTC) - START).total_seconds() / 60:6.1f}"

    out = []
    for j in jobs:
        cost = sum(attempt_cost(a, now) for a in attempts if a.job_id == j.id)
        step = json.loads(j.metrics).get("step") if j.metrics else None
        out.append(f"trial {j.id} {j.params}: {j.status.value}, ${cost:.4f} (step {step}): {j.message}")
        leased = {x.instance_id for x in idle if x.lessee_job_id == j.id}
        for a in sorted((a for a in attempts if a.job_id == j.id), key=lambda a: a.number):
            out.append(f"  a{a.number} {a.zone} {'spot' if a.spot else 'od'} {m(a.requested_at)}..{m(a.ended_at)} "
                       f"{a.reason.value if a.reason else a.status.value} ${attempt_cost(a, now):.4f}"
                       f"{' WASTED' if (j.id or 0, a.number) in useless else ''} from {a.resumed_from} last "
                       f"{a.last_checkpoint}{' (warm)' if a.instance_id in leased else ''}")
        for w in (w for w in idle if w.job_id == j.id):
            out.append(f"  idle {w.instance_id} {m(w.idle_since)}..{m(w.ended_at)} {w.status} -> "
                       f"{w.lessee_job_id or w.reason} ${idle_cost(w, now):.4f}")
    return out


def small_cap(seed: int, hours: float, workdir: Path, trace: bool = False) -> dict:
    """The small-cap night: 9 trials, each 10 minutes of work after a 60 s boot, ``max_parallel:
    3``, a cap of about three trials' cost on the night's market (``small_cap``), run as a new
    user writes it (no pruning, no ``max_step``: ``small_cap_*``), the same with ``keep_warm: 0s``
    (``small_cap_cold_*``: every trial boots), and naming the trials' last step
    (``small_cap_max_step_*``: finish first); and the serial baseline with the same money.

    Three trials' cost is what they cost on this market, not at a list price: the serial loop
    (one trial at a time, no cap) runs first, and the cap is ``SMALL_TRIALS / 3`` times its spend
    at its third finish (the market's prices and preemptions included; the tenth more is the
    horizon the last running trial keeps reserved to its end). At the zones' list spot price a
    trial costs ~$0.18, but where spot capacity comes and goes a trial costs up to a third more
    (its restarts, a dearer zone), and a cap set from the list price funded ~2.5 of them: no
    schedule could finish three. The serial loop's own baseline is then the trials it finished
    within that cap, as for the main night."""
    (workdir / "small-serial").mkdir()
    listed = SMALL_TRIALS * (SMALL_STEPS * STEP_S + BOOT_S) * 0.9731 / 3600
    serial = run(seed, hours, 1, None, None, workdir / "small-serial", stop_at_spend=3 * listed, steps=SMALL_STEPS,
                 every=SMALL_EVERY)
    costs = serial["spend_at_finish"]
    # a night whose serial loop cannot finish three (spot capacity gone for hours) keeps the list price
    cap = round(SMALL_TRIALS / 3 * costs[2] if len(costs) >= 3 else listed, 2)
    out: dict = {"small_cap": cap}
    nights = {}
    for key, finish, warm in (("small_cap", False, None), ("small_cap_cold", False, "0s"),
                              ("small_cap_max_step", True, None)):
        (workdir / key).mkdir()
        nights[key] = night = run(seed, hours, 3, cap, None, workdir / key, steps=SMALL_STEPS, every=SMALL_EVERY,
                                  finish_first=finish, keep_warm=warm, trace=trace)
        remain = night["finished"] < 9
        out.update({f"{key}_trials_finished": night["finished"],
                    f"{key}_unspent_share": round((cap - night["spend"]) / cap, 4) if remain else None,
                    f"{key}_wasted_share": round(night["wasted"] / night["spend"], 4) if night["spend"] else 0.0,
                    f"{key}_spend": round(night["spend"], 4), f"{key}_statuses": night["statuses"],
                    f"{key}_preemptions": night["preemptions"], f"{key}_attempts": night["attempts"],
                    f"{key}_warm_reused": night["warm_reused"], f"{key}_idle_usd": round(night["idle_usd"], 4),
                    f"{key}_idle_unused_usd": round(night["idle_unused_usd"], 4)})
        if trace:
            out[f"{key}_trace"] = night["trace"]
    out["small_cap_serial_baseline"] = sum(1 for c in serial["spend_at_finish"] if c <= cap + 1e-9)
    # Warm reuse (issue 35 item 1), with and without it in one run. Where trials follow one
    # another: the serial loop with the trials' default keep_warm against the same loop with
    # keep_warm 0 (every trial boots): what its first three trials cost less (warm_reuse_saved_usd).
    # In the capped night (small_cap_warm_reuse_saved_usd): what the warm night paid less per
    # finished trial, over the trials it finished; 0 where the cap's trials all start at once and
    # the money left never funds one more (no trial starts after another ended).
    (workdir / "small-serial-cold").mkdir()
    cold_serial = run(seed, hours, 1, None, None, workdir / "small-serial-cold", stop_at_spend=3 * listed,
                      steps=SMALL_STEPS, every=SMALL_EVERY, keep_warm="0s")
    both = len(costs) >= 3 and len(cold_serial["spend_at_finish"]) >= 3
    out["warm_reuse_saved_usd"] = round(cold_serial["spend_at_finish"][2] - costs[2], 4) if both else None
    out["serial_warm_reused"] = serial["warm_reused"]
    warm, cold = nights["small_cap"], nights["small_cap_cold"]
    out["small_cap_warm_reuse_saved_usd"] = (
        round((cold["spend"] / cold["finished"] - warm["spend"] / warm["finished"]) * warm["finished"], 4)
        if warm["finished"] and cold["finished"] else None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cap", type=float, default=2.5, help="the sweep's cap, USD")
    ap.add_argument("--hours", type=float, default=10.0, help="the sweep's deadline")
    ap.add_argument("--rule", default="asha", help="the sweep's pruning rule (median, asha)")
    ap.add_argument("--no-prune", action="store_true", help="no pruning rule in the sweep")
    ap.add_argument("--no-max-step", action="store_true", help="do not name the trials' last step (objective.max_step)")
    ap.add_argument("--keep-warm", default=None, help="the main night's keep_warm (default: the trials' own; 0s: "
                    "every trial boots)")
    ap.add_argument("--trace", action="store_true", help="print each trial's attempts and idle periods, and what "
                    "of its spend was wasted")
    ap.add_argument("--small-cap", action="store_true", help="the small-cap night instead (9 short trials, a cap "
                    "of about three)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.small_cap:
        with tempfile.TemporaryDirectory() as d:
            out = small_cap(args.seed, args.hours, Path(d), trace=args.trace)
        for key in ("small_cap", "small_cap_cold", "small_cap_max_step"):
            if args.trace:
                print(f"--- {key}", *out.pop(f"{key}_trace"), sep="\n")
            print(f"{key} ${out['small_cap']:.2f}: {out[key + '_trials_finished']} of 9 finished against the "
                  f"serial baseline's {out['small_cap_serial_baseline']}; ${out[key + '_spend']:.4f} spent, wasted "
                  f"{out[key + '_wasted_share']:.1%}; {out[key + '_attempts']} attempts, "
                  f"{out[key + '_preemptions']} preemptions, {out[key + '_warm_reused']} warm reuses (idle "
                  f"${out[key + '_idle_usd']:.4f}, ${out[key + '_idle_unused_usd']:.4f} of it unused); statuses "
                  f"{out[key + '_statuses']}")
        print(f"warm reuse saved ${out['warm_reuse_saved_usd']} over three serial trials "
              f"({out['serial_warm_reused']} reuses); ${out['small_cap_warm_reuse_saved_usd']} in the capped night")
        print(json.dumps({**out, "seed": args.seed, "wall_s": round(time.perf_counter() - t0, 1)}))
        return
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "a").mkdir()
        (Path(d) / "b").mkdir()
        rule = None if args.no_prune else args.rule
        finish = not args.no_max_step
        try:
            sweep = run(args.seed, args.hours, 3, args.cap, rule, Path(d) / "a", finish_first=finish,
                        keep_warm=args.keep_warm, trace=args.trace)
        except UserInputError as e:  # code without pruning rules or max_step: measure without them
            print(f"not available here ({e}); running without pruning and max_step")
            rule, finish = None, False
            sweep = run(args.seed, args.hours, 3, args.cap, rule, Path(d) / "a", keep_warm=args.keep_warm,
                        trace=args.trace)
        serial = run(args.seed, args.hours, 1, None, None, Path(d) / "b", stop_at_spend=args.cap,
                     keep_warm=args.keep_warm)
    baseline = sum(1 for c in serial["spend_at_finish"] if c <= args.cap + 1e-9)
    share = sweep["wasted"] / sweep["spend"] if sweep["spend"] else 0.0
    if args.trace:
        print(*sweep["trace"], sep="\n")
    print(f"sweep: {sweep['finished']} finished, {sweep['pruned']} pruned of 9; ${sweep['spend']:.4f} of "
          f"${args.cap:.2f}; wasted {share:.1%}; {sweep['attempts']} attempts, {sweep['preemptions']} preemptions "
          f"({sweep['unannounced']} without notice); {sweep['warm_reused']} warm reuses (idle "
          f"${sweep['idle_usd']:.4f}); {sweep['night_h']:.1f} h; statuses {sweep['statuses']}")
    print(f"serial baseline: {baseline} finished within ${args.cap:.2f} "
          f"(spend at each finish: {[round(c, 3) for c in serial['spend_at_finish']]})")
    print(json.dumps({
        "trials_finished": sweep["finished"], "trials_pruned": sweep["pruned"], "spend": round(sweep["spend"], 4),
        "cap": args.cap, "wasted_share": round(share, 4), "serial_baseline_finished": baseline,
        "attempts": sweep["attempts"], "preemptions": sweep["preemptions"], "pruning": rule,
        "max_step": STEPS if finish else None, "warm_reused": sweep["warm_reused"],
        "idle_usd": round(sweep["idle_usd"], 4), "idle_unused_usd": round(sweep["idle_unused_usd"], 4),
        "seed": args.seed,
        "wall_s": round(time.perf_counter() - t0, 1),
    }))


if __name__ == "__main__":
    main()
