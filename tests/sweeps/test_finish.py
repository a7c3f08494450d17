"""Finish first (objective.max_step): the budget goes to the trials it can carry to their last
step, instead of being spread over more trials than it can finish.

Bare Reconciler: the FakeProvider and a fake clock (which the providers' entry points cannot
build) make time and faults exact; tests/harness/ and tests/e2e/ run the assembled daemon.
"""

from __future__ import annotations

from dataclasses import replace

from gpuorch.money.caps import Policy
from gpuorch.reconciler import Reconciler
from gpuorch.store.models import JobStatus
from gpuorch.sweeps.finish import Unfinished, finish_first
from gpuorch.testing.fake_provider import FakeJobScript, FakeProvider, WarmCapableProvider
from tests.kit.sweeps import loss, report, submit, trials


def run(store, clock, tmp_path, deadline=None, keep_warm=None, **objective):
    """The sweep's trials' statuses, its report, the most instances live at once, and the launches."""
    fake = WarmCapableProvider(clock, script=FakeJobScript(duration_s=600, checkpoint_every_s=60, metrics=loss,
                                                    metrics_every_s=30))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    # $1.2/h: a trial costs $0.20; $0.50 finishes two (and their overheads), not three
    sweep = submit(store, clock, tmp_path, max_parallel=3, budget={"max_cost": 0.50}, deadline=deadline,
                   parameters={"LR": [0.003, 0.001, 0.0003]}, objective={"metric": "loss", "mode": "min", **objective},
                   **({"keep_warm": keep_warm} if keep_warm else {}))
    peak = 0
    for _ in range(300):
        rec.run_pass()
        peak = max(peak, len(fake.live_instances()))
        clock.advance(7)
    return [t.status for t in trials(store, sweep.id)], report(store, sweep.id, clock), peak, fake.count("launch")


def test_max_step_spends_less_on_trials_that_never_finish(tmp_path):
    """A deadline that needs trials at once (40 min: twice the 25 min the $0.50 buys on one
    instance is past it), so that finish first is what differs; and with one that does not (2 h),
    a plain sweep runs its trials in turn (``sweeps/plain.in_turn``), and so does a finish-first one
    that keeps no instance warm (``finish.in_turn``)."""
    from gpuorch.clock import FakeClock
    from gpuorch.store import Store

    out = {}
    for name, objective, deadline, warm in (("with", {"max_step": 600}, "40m", None), ("without", {}, "40m", None),
                                            ("turns", {}, "2h", None), ("cold", {"max_step": 600}, "2h", "0s")):
        (tmp_path / name).mkdir()
        store = Store(f"sqlite:///{tmp_path / name / 'state.db'}")
        out[name] = run(store, FakeClock(), tmp_path / name, deadline, warm, **objective)
        store.close()
    (with_, r_with, _, _), (without, r_without, at_once, _) = out["with"], out["without"]
    assert at_once == 3
    # in turn: one trial at a time, the second on the first's instance (one boot); the third waits, unspent
    turns, r_turns, one, boots = out["turns"]
    assert one == 1 and boots == 1 and turns.count(JobStatus.SUCCEEDED) == 2 and turns[2] == JobStatus.QUEUED, turns
    assert r_turns["spend"]["wasted"] == 0.0 and r_turns["spent"] <= 0.50 + 1e-9, r_turns
    # max_step with keep_warm 0s: in turn too, each trial booting when the one ahead ends
    cold, r_cold, one, boots = out["cold"]
    assert one == 1 and boots == 2 and cold.count(JobStatus.SUCCEEDED) == 2, (cold, r_cold)
    assert r_cold["spend"]["wasted"] == 0.0 and r_cold["spent"] <= 0.50 + 1e-9, r_cold
    # the last trial waits (held with its checkpoint, or, started after the first checkpoint of
    # the others, queued before it spends anything)
    assert with_[2] in (JobStatus.HELD, JobStatus.QUEUED) and JobStatus.HELD not in without
    assert with_.count(JobStatus.SUCCEEDED) > without.count(JobStatus.SUCCEEDED)  # without: all three, none done
    assert r_with["spend"]["wasted"] < r_without["spend"]["wasted"]
    assert r_with["spent"] <= 0.50 + 1e-9 and r_without["spent"] <= 0.50 + 1e-9


def test_finish_first_holds_what_the_money_cannot_finish():
    def u(i, step, cost, running=True, held=False):
        return Unfinished(i, running, held, step, cost)

    # three at step 100 of 600, $0.10 each so far: each needs $0.50 more; $1.01 left of $1.31
    assert set(finish_first(1.31, 0.30, 600, [u(1, 100, 0.1), u(2, 100, 0.1), u(3, 100, 0.1)])) == {3}
    assert set(finish_first(0.50, 0.30, 600, [u(1, 100, 0.1), u(2, 100, 0.1), u(3, 100, 0.1)])) == {2, 3}  # not 1
    assert finish_first(5.0, 0.3, 600, [u(1, 100, 0.1), u(2, 100, 0.1), u(3, 100, 0.1)]) == {}
    assert finish_first(1.0, 0.0, 600, [u(1, None, 0.0), u(2, None, 0.0)]) == {}  # nothing to estimate from yet
    # a held trial goes before a queued one; a later, cheaper one may still fit
    waits = finish_first(1.0, 0.4, 600, [u(1, 500, 0.4), u(2, 0, 0.0, running=False),
                                         u(3, 300, 0.0, running=False, held=True)])
    assert 3 not in waits and 2 in waits



def test_under_a_pruning_rule_a_trial_runs_to_the_first_rung_before_finish_first_may_hold_it():
    """bench/sweep.py seed 1: trials started before any estimate existed were held minutes later,
    below the rung, and never resumed: spend that bought neither a pruning decision nor a finish."""
    from gpuorch.sweeps.finish import first_rung, unjudged

    def u(i, step, running=True, held=False):
        return Unfinished(i, running, held, step, 0.1)

    assert first_rung(0, []) is None and first_rung(0, [50, 100]) == 50 and first_rung(0, [0]) == 1
    assert first_rung(200, [50]) == 200
    trials = [u(1, 100), u(2, 38), u(3, None), u(4, None, running=False), u(5, 20, running=False, held=True),
              u(6, 50)]
    # 1 and 6 are at or past the rung (the rule has had its say); 5 is held (it resumes by finish-first's order)
    assert unjudged(trials, 50) == {2, 3, 4}
    assert unjudged(trials, None) == {1, 2, 3, 4, 6}  # nothing reported anywhere yet: no rung known
    # what finish-first would hold, less what the rule has not judged yet
    waits = finish_first(0.60, 0.30, 600, [u(1, 100), u(2, 38)])
    assert set(waits) == {2} and set(waits) - unjudged([u(1, 100), u(2, 38)], 50) == set()


def test_a_trial_started_before_any_estimate_reaches_the_rung_instead_of_being_held_below_it(store, clock, tmp_path):
    """Through the reconciler: the second trial starts with no estimate yet; when the first one's
    progress gives one, the cap cannot finish both. The second runs on to ASHA's rung (step 300)
    and is pruned there, instead of being held at about step 60 with nothing to show for it."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=600, checkpoint_every_s=60, metrics=loss,
                                                    metrics_every_s=30))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    sweep = submit(store, clock, tmp_path, max_parallel=2, budget={"max_cost": 0.36},
                   parameters={"LR": [0.003, 0.001]}, pruning={"rule": "asha", "min_steps": 300},
                   objective={"metric": "loss", "mode": "min", "max_step": 600})
    for _ in range(300):
        rec.run_pass()
        clock.advance(7)
    first, second = trials(store, sweep.id)
    assert first.status == JobStatus.SUCCEEDED
    assert second.status == JobStatus.PRUNED, second.message
    assert "at step 300" in (second.message or "")
    r = report(store, sweep.id, clock)
    assert r["spend"]["wasted"] == 0 and r["spent"] <= 0.36 + 1e-9


def test_under_a_pruning_rule_fresh_trials_take_only_what_the_leaders_finish_leaves():
    """bench/sweep.py seed 3: fresh trials started (and were pruned at the rung) on the money the
    leader needed to finish; preempted at step 450, it was left without it. A fresh trial needs
    the money to the first rung after the finishes of the trials ahead, and, should the rule let
    it past the rung, the money to finish it (seeds 0-1: the best trials, let through, were held
    there for good); a running one below the rung is still never held; a queued trial with
    progress (a preemption's) goes before fresh ones."""
    def u(i, step, cost, running=True, held=False):
        return Unfinished(i, running, held, step, cost)

    # $0.002 a step (the leader's $0.20 for 100 steps): the leader needs $1.00 more, $1.10 at its
    # resume margin (what it needs to start again if preempted); a fresh trial $0.10 to the rung
    # at step 50 (x 1.1 to start), $1.20 to finish; $0.90 spent of $2.25: three fresh trials would
    # reach the rung (0.90 + 1.10 + 2 x 0.11 fits), but none could be finished if let through
    lead = u(1, 100, 0.2)
    fresh = [u(i, None, 0.0, running=False) for i in (4, 5, 6)]
    waits = finish_first(2.25, 0.90, 600, [lead, *fresh], pruning=True, rung=50)
    assert set(waits) == {4, 5, 6} and "if the rule let it past the first rung" in waits[4]
    # $3.15: one finishes after the leader (1.90 + 1.20); the next also after the first's way to the rung
    waits = finish_first(3.15, 0.90, 600, [lead, *fresh], pruning=True, rung=50)
    assert set(waits) == {5, 6}
    # $3.25: two; unless trials pruned at the rung spent $0.55 each there (start-up, final
    # checkpoint): that is the price of the way to the rung, which the next one comes after
    assert set(finish_first(3.25, 0.90, 600, [lead, *fresh], pruning=True, rung=50)) == {6}
    assert set(finish_first(3.25, 0.90, 600, [lead, *fresh], pruning=True, rung=50, pruned=[0.5, 0.6])) == {5, 6}
    # without pruning, none may start (each needs $1.20, at its margin)
    assert set(finish_first(2.25, 0.90, 600, [lead, *fresh])) == {4, 5, 6}
    # a running trial below the rung runs on to it, and its way there counts for those behind
    below = u(2, 20, 0.04)
    waits = finish_first(3.20, 0.90, 600, [lead, below, *fresh], pruning=True, rung=50)
    assert 2 not in waits and set(waits) == {5, 6}
    # preempted at step 450 (queued, not held): it goes before the fresh ones, which wait for it;
    # with nothing ahead of it, it resumes when its finish fits ($1.28 + $0.30), margin or not
    leader = u(1, 450, 0.9, running=False)
    waits = finish_first(1.60, 1.28, 600, [leader, *fresh], pruning=True, rung=50)
    assert 1 not in waits and set(waits) == {4, 5, 6}


def test_a_plain_capped_sweep_starts_a_fresh_trial_only_if_a_whole_trial_fits():
    """bench/sweep.py --small-cap: with three trials' money gone but $0.07, a fourth trial started,
    was held, and its spend was wasted; a finished trial said what one costs ($0.19)."""
    from gpuorch.sweeps.plain import fund_fresh

    def u(i, running=False, held=False, step=None, cost=0.0):
        return Unfinished(i, running, held, step, cost)

    assert fund_fresh(0.59, 0.2, [u(2, True, cost=0.1), u(4)], []) == {}  # nothing finished: nothing known
    # trial 2 running needs $0.09 more: $0.39 + $0.09 leaves $0.11, less than a trial's $0.19
    waits = fund_fresh(0.59, 0.39, [u(2, True, cost=0.1), u(4), u(5)], [0.19])
    assert set(waits) == {4, 5} and "$0.19" in waits[4] and "$0.09" in waits[4]
    assert set(fund_fresh(0.80, 0.39, [u(2, True, cost=0.1), u(4), u(5)], [0.19])) == {5}  # one more fits (margin)
    # held and preempted trials (progress or spend) are the caps' to resume, never waited here
    assert set(fund_fresh(0.40, 0.39, [u(3, held=True, step=50, cost=0.1), u(6, cost=0.02), u(7)], [0.19])) == {7}
    assert fund_fresh(0.59, 0.39, [u(4)], [0.19]) == {}  # nothing ahead: no margin



def test_a_plain_capped_sweep_runs_fresh_trials_in_turn_where_the_money_not_the_deadline_limits_it():
    """bench/sweep.py --small-cap seed 21 (plain): a second trial booted blind five minutes after
    the first, in its zone; both were lost there without notice, and a third trial, started cold
    on what was left, was held for good (23 % of the spend wasted). Before a trial has finished
    its cost is not known, and the first runs alone where the money left, paid on one instance,
    takes less than half the time to the deadline; after, fresh trials wait their turn where the
    cap funds fewer whole trials than are left."""
    from gpuorch.sweeps.finish import IN_TURN, Warm, for_warm
    from gpuorch.sweeps.plain import in_turn

    lead = Unfinished(1, True, False, 20, 0.05, price=0.97)
    fresh = [Unfinished(i, False, False, None, 0.0, price=0.97) for i in (2, 3, 4)]
    keeps, hours = Warm(keeps=True), 10 * 3600.0
    why = in_turn(0.60, 0.05, [lead, *fresh], [], keeps, hours)
    assert set(why) == {2, 3, 4} and all(for_warm(w) and w.endswith(IN_TURN) for w in why.values()), why
    assert "not known before one finishes" in why[2] and "$0.55 left" in why[2], why
    assert in_turn(0.60, 0.05, [lead, *fresh], [], keeps, None) == {}  # no deadline: max_parallel at once
    # the deadline needs trials at once: $0.55 at $0.97/h is 34 min on one instance, twice that is past 1 h
    assert in_turn(0.60, 0.05, [lead, *fresh], [], keeps, 3600.0) == {}
    # with none ahead the first fresh trial starts, the others wait for it; one starts on each idle
    # warm instance of the sweep, and one being readied is ahead (kept for the trial that waits)
    assert set(in_turn(0.60, 0.0, fresh, [], keeps, hours)) == {3, 4}
    assert set(in_turn(0.60, 0.0, fresh, [], Warm(idle=(0.97, 0.97), keeps=True), hours)) == {4}
    assert set(in_turn(0.60, 0.0, fresh, [], Warm(readying=(0.97,), keeps=True), hours)) == {2, 3, 4}
    # trials that boot each (keep_warm 0s) run in turn too, each booting when the one ahead ends
    cold = in_turn(0.60, 0.05, [lead, *fresh], [], Warm(keeps=False), hours)
    assert set(cold) == {2, 3, 4} and not for_warm(cold[2]) and "when the trial ahead of it ends" in cold[2], cold
    # a trial costs $0.18 once one has finished: after trial 1's $0.13 more, $0.75 - $0.23 funds 2 of 3 fresh
    after = in_turn(0.75, 0.23, [lead, *fresh], [0.18], keeps, hours)
    assert set(after) == {2, 3, 4} and "funds about 2 more trials, fewer than are left" in after[2], after
    assert in_turn(0.95, 0.23, [lead, *fresh], [0.18], keeps, hours) == {}  # funds all three: they boot now
    # held and preempted trials (progress) are not fresh: they are the caps' to resume
    resumed = Unfinished(5, False, True, 40, 0.08, price=0.97)
    assert 5 not in in_turn(0.75, 0.23, [lead, resumed, *fresh], [0.18], keeps, hours)

def test_the_estimate_reads_the_spend_when_each_step_was_read():
    """Steps are reported every few minutes while the spend grows by the second: the spend now over
    the latest step ran up to half again too high just after a report, and counted a start again
    in the steps a running trial has left. Figures of bench/sweep.py seed 0 at 13.5 minutes."""
    from gpuorch.sweeps.finish import estimate

    # read at step 50 with $0.103 spent, at step 100 with $0.181; $0.023 more since (steps done, not reported)
    lead = Unfinished(1, True, False, 100, 0.204, span=(50, 0.103, 100, 0.181), lag=0.023)
    est = estimate(700, [lead])
    assert abs(est.per_step - 0.078 / 50) < 1e-12 and abs(est.start - (0.103 - 50 * 0.078 / 50)) < 1e-12
    assert abs(est.left(lead, 700) - (600 * est.per_step - 0.023)) < 1e-12  # running: no start, the lag is paid
    held = Unfinished(2, False, True, 100, 0.2)
    assert abs(est.left(held, 700) - (est.start + 600 * est.per_step)) < 1e-12  # not running: boots again
    # the work within one attempt, when known, is the cost of a step (not the restarts between attempts)
    assert estimate(700, [Unfinished(1, True, False, 100, 0.3, span=(50, 0.1, 100, 0.25), work=(40, 0.06))]
                    ).per_step == 0.06 / 40
    # one read only, or less than a tenth of max_step done: nothing to go on (the old ratio, if any)
    assert estimate(700, [Unfinished(1, True, False, 50, 0.1, span=(50, 0.1, 50, 0.1))]) is None
    # the leader and the best trial, just promoted at the rung: $0.305 + $0.94 + $1.01 fits in $2.50;
    # the spend-now ratio ($0.204 / 100 steps) said $1.33 for the second and held it for good
    best = Unfinished(2, True, False, 50, 0.101, span=(50, 0.101, 50, 0.101))
    assert finish_first(2.50, 0.305, 700, [lead, best], pruning=True, rung=50) == {}
    old = [Unfinished(1, True, False, 100, 0.204), Unfinished(2, True, False, 50, 0.101)]
    assert set(finish_first(2.50, 0.305, 700, old, pruning=True, rung=50)) == {2}


def test_a_trial_held_only_for_its_resume_margin_keeps_its_money_from_fresh_trials():
    """bench/sweep.py seed 0: two trials preempted at steps 350 and 250; the second fits after the
    first, though not with its 10% margin, and waits; fresh trials took the money it waited for
    and its $0.47 went for nothing. Its finish stays counted: the fresh trials wait behind it."""
    est_span = (50, 0.10, 350, 0.58)  # $0.0016 a step, a start of $0.02
    first = Unfinished(1, False, False, 350, 0.58, span=est_span)
    second = Unfinished(2, False, False, 250, 0.47, span=(50, 0.1, 250, 0.42))
    fresh = [Unfinished(i, False, False, None, 0.0) for i in (4, 5)]
    # spent $1.17; the first needs ~$0.58, the second ~$0.74: $2.49 fits, $2.56 (its margin) does not
    waits = finish_first(2.50, 1.17, 700, [first, second, *fresh], pruning=True, rung=50)
    assert set(waits) == {2, 4, 5}
    # with more room the second resumes and the fresh ones still wait for the money to the rung
    assert 2 not in finish_first(2.70, 1.17, 700, [first, second, *fresh], pruning=True, rung=50)


def test_a_fresh_trial_the_cap_could_not_finish_if_let_past_the_rung_waits_instead(store, clock, tmp_path):
    """Through the reconciler (bench/sweep.py seeds 0-2): with the first trial's finish counted,
    the money left takes a third trial to ASHA's rung but could not finish it. The rule lets the
    best ones through, and such a one was held at the rung for good, its spend lost; now it waits,
    queued, spending nothing, and says why. The second trial, started before any estimate, still
    runs to the rung and is pruned there."""
    fake = FakeProvider(clock, script=FakeJobScript(duration_s=600, checkpoint_every_s=60, metrics=loss,
                                                    metrics_every_s=30))
    rec = Reconciler(store, {"fake": fake}, clock=clock, budget=Policy(decision_interval_s=30, stop_grace_s=60))
    # $1.2/h: a trial costs $0.20, $0.035 to the rung at step 100; $0.38 finishes the first, not a third too
    sweep = submit(store, clock, tmp_path, max_parallel=2, budget={"max_cost": 0.38},
                   parameters={"LR": [0.0003, 0.1, 0.003]}, pruning={"rule": "asha", "min_steps": 100},
                   objective={"metric": "loss", "mode": "min", "max_step": 600})
    for _ in range(300):
        rec.run_pass()
        clock.advance(7)
    first, second, third = trials(store, sweep.id)
    assert first.status == JobStatus.SUCCEEDED and second.status == JobStatus.PRUNED, second.message
    assert third.status == JobStatus.QUEUED and "if the rule let it past the first rung" in (third.message or "")
    r = report(store, sweep.id, clock)
    assert r["spend"]["wasted"] == 0 and r["spend"]["held"] == 0 and r["spent"] <= 0.38 + 1e-9


def test_a_finish_is_estimated_at_the_price_each_trial_pays_now_or_would_on_its_next_start():
    """bench/sweep.py seed 3: the leader ran on the dearest market ($1.20/h, the only one with
    capacity) and a fresh trial's finish was estimated at the leader's spend per step, $1.42,
    where the cheapest market's $0.92/h made it $1.11 (the serial loop's second trial cost $1.13).
    A step takes the time it took (6 s, read within one attempt); a start the time the first read
    took beyond its steps (a lost attempt's 377 s, a boot, 50 steps redone: 137 s); each trial
    pays them at its own price: a running one its attempt's, one not running its next start's."""
    from gpuorch.sweeps.finish import estimate

    # read at step 100 with $0.22 and 737 s billed, at step 150 with $0.32; 300 s for those 50 steps
    lead = Unfinished(1, True, False, 150, 0.33, span=(100, 0.22, 150, 0.32), work=(50, 0.10), work_s=300.0,
                      first_s=737.0, price=1.20)
    fresh = Unfinished(2, False, False, None, 0.0, price=0.92)
    est = estimate(700, [lead, fresh])
    assert est.step_s == 6.0 and abs(est.start_s - 137.0) < 1e-9
    assert abs(est.left(lead, 700) - 550 * 6 * 1.20 / 3600) < 1e-12  # $1.10 at its own $1.20/h
    assert abs(est.left(fresh, 700) - (137 + 700 * 6) * 0.92 / 3600) < 1e-12  # $1.11, not $1.42
    # $0.33 spent, the leader's $1.10 to go: a second finish fits $2.60 at $0.92/h ($2.54)
    assert finish_first(2.60, 0.33, 700, [lead, fresh], pruning=True, rung=50) == {}
    # at the leader's own rate it did not ($1.42: $2.85)
    unpriced = [Unfinished(1, True, False, 150, 0.33, span=(100, 0.22, 150, 0.32), work=(50, 0.10)),
                Unfinished(2, False, False, None, 0.0)]
    assert abs(estimate(700, unpriced).left(unpriced[1], 700) - 1.42) < 1e-9
    assert set(finish_first(2.60, 0.33, 700, unpriced, pruning=True, rung=50)) == {2}
    # a dearer next start (the market moved) is estimated dearer: at $1.30/h it waits
    dear = Unfinished(2, False, False, None, 0.0, price=1.30)
    assert set(finish_first(2.60, 0.33, 700, [lead, dear], pruning=True, rung=50)) == {2}
    # no time read (no pair of reads within one attempt): the sweep's spend per step, as before
    assert estimate(700, [Unfinished(1, True, False, 150, 0.33, span=(100, 0.22, 150, 0.32))]).step_s is None


def test_before_a_finish_can_be_estimated_fresh_trials_wait_for_the_evidence_a_trial_ahead_brings():
    """bench/sweep.py seed 4: the second trial started when the leader had reported one step, no
    estimate yet; the rule let it through the rung and the cap, once estimated, could not finish
    it after the leader: held there for good, its $0.11 wasted. The evidence (a tenth of max_step,
    read twice) was one report away; fresh trials wait for it while a trial ahead has progress."""
    lead = Unfinished(1, True, False, 50, 0.1, span=(50, 0.1, 50, 0.1))
    fresh = [Unfinished(i, False, False, None, 0.0) for i in (2, 3)]
    waits = finish_first(2.50, 0.1, 700, [lead, *fresh], pruning=True, rung=50)
    assert set(waits) == {2, 3}
    assert "not known yet (trial 1 of the sweep has not reported enough of its 700 steps" in waits[2]
    # preempted before the estimate, the leader (queued with progress) still brings it when it resumes
    queued = Unfinished(1, False, False, 50, 0.1, span=(50, 0.1, 50, 0.1))
    assert set(finish_first(2.50, 0.1, 700, [queued, *fresh], pruning=True, rung=50)) == {2, 3}
    # nothing reported anywhere (a trial booting, or one that never reports a step): nothing is known
    # to be coming, and nothing waits
    booting = Unfinished(1, True, False, None, 0.02)
    assert finish_first(2.50, 0.02, 700, [booting, *fresh], pruning=True, rung=50) == {}
    assert finish_first(2.50, 0.0, 700, fresh) == {}
    # once estimated, the rule is finish first's as before: one more fits to the rung and to its end
    lead = Unfinished(1, True, False, 100, 0.2, span=(50, 0.1, 100, 0.2))
    assert set(finish_first(2.85, 0.2, 700, [lead, *fresh], pruning=True, rung=50)) == {3}


def test_steps_timed_within_one_attempt_give_an_estimate_before_a_tenth_of_max_step():
    """Fresh trials wait for the estimate while a trial ahead reports steps (``unestimated``); with
    a long trial a tenth of max_step is hours. Two reads within one attempt time a step exactly
    (the start is apart), so they give the estimate at any share of max_step; spend alone does not."""
    from gpuorch.sweeps.finish import estimate

    # 100,000 steps; read at 500 and 1,000 within one attempt: 500 steps in 250 s, $0.0833 at $1.20/h
    timed = Unfinished(1, True, False, 1000, 0.2, span=(500, 0.1, 1000, 0.1833), work=(500, 0.0833),
                       work_s=250.0, first_s=300.0, price=1.20)
    est = estimate(100_000, [timed])
    assert est is not None and est.step_s == 0.5 and abs(est.start_s - 50.0) < 1e-9
    fresh = Unfinished(2, False, False, None, 0.0, price=1.20)
    assert abs(est.left(fresh, 100_000) - (50 + 0.5 * 100_000) * 1.20 / 3600) < 1e-12
    # the same reads without their times: a tenth is needed, and a fresh trial waits for it
    untimed = Unfinished(1, True, False, 1000, 0.2, span=(500, 0.1, 1000, 0.1833))
    assert estimate(100_000, [untimed]) is None
    assert set(finish_first(50.0, 0.2, 100_000, [untimed, fresh])) == {2}
    assert finish_first(50.0, 0.2, 100_000, [timed, fresh]) == {}  # $16.7 + $16.7 fits


def test_a_trial_not_running_starts_on_the_sweeps_warm_capacity_without_a_start_or_waits_for_it():
    """bench/sweep.py --small-cap seed 11 (max_step): a third trial started cold 18 s before the
    first trial's instance came free, paid a boot, and was held at step 10 for want of about that
    boot's cost. An idle warm instance of the sweep starts a trial without the start's cost; one
    being made ready, or a running trial that ends sooner than a start takes, is waited for."""
    from gpuorch.sweeps.finish import Warm, estimate, for_warm

    # a step takes 6 s and a start 60 s; trial 1 is at step 95 of 100 (30 s of work left), at $0.97/h
    lead = Unfinished(1, True, False, 95, 0.17, span=(10, 0.03, 95, 0.17), work=(85, 0.1374), work_s=510.0,
                      first_s=120.0, price=0.97)
    fresh = Unfinished(2, False, False, None, 0.0, price=0.97)
    est = estimate(100, [lead, fresh])
    assert est.step_s == 6.0 and est.start_s == 60.0
    assert abs(est.ends_within_start(lead, 100) - 30.0) < 1e-9
    cold, warm = est.left(fresh, 100), est.left(fresh, 100, warm=True)
    assert abs(cold - warm - 60 * 0.97 / 3600) < 1e-12
    # the money fits a warm start (with its 10% margin) and not a cold one
    cap = 0.17 + est.left(lead, 100) + warm * 1.1 + 0.001
    assert cap < 0.17 + est.left(lead, 100) + cold * 1.1
    assert set(finish_first(cap, 0.17, 100, [lead, fresh])) == {2}  # no warm capacity: it waits for money
    # trial 1 leaves its instance warm: trial 2 waits for it, not for money, and says so
    why = finish_first(cap, 0.17, 100, [lead, fresh], warm=Warm(keeps=True))
    assert for_warm(why[2]) and "trial 1 ends in about 30 s" in why[2], why
    # the instance being made ready: the same; idle: it starts there, at that instance's price
    done = Unfinished(1, False, False, 100, 0.175, span=(10, 0.03, 100, 0.175), work=(90, 0.1455), work_s=540.0,
                      first_s=120.0, price=0.97)
    assert for_warm(finish_first(cap, 0.175, 100, [fresh], [done], warm=Warm(readying=(0.97,), keeps=True))[2])
    assert finish_first(cap, 0.175, 100, [fresh], [done], warm=Warm(idle=(0.97,), keeps=True)) == {}
    # an idle instance takes one trial; the next one is estimated cold
    other = Unfinished(3, False, False, None, 0.0, price=0.97)
    assert set(finish_first(cap + warm, 0.175, 100, [fresh, other], [done], warm=Warm(idle=(0.97,)))) == {3}
    # a trial further from its end than a start takes frees nothing soon: trial 2 waits for money
    far = Unfinished(1, True, False, 50, 0.09, span=(10, 0.03, 50, 0.09), work=(40, 0.0647), work_s=240.0,
                     first_s=120.0, price=0.97)
    assert not for_warm(finish_first(cap, 0.09, 100, [far, fresh], warm=Warm(keeps=True)).get(2, ""))


def test_with_no_trial_ahead_a_spot_start_keeps_one_more_start_and_every_start_the_caps_last_horizon():
    """bench/sweep.py seed 4 (main night): a second trial, with nothing ahead of it, started with
    $0.017 to spare on spot, was preempted at step 550 of 700 and could not start again: its $0.89
    was wasted. A fresh start with no trial ahead now keeps what one more start costs (on spot)
    and the caps' last horizon (reserved to its last look); with trials ahead, the 10 % margin,
    and at least the horizon. A trial with progress and none ahead resumes on its finish alone."""
    from gpuorch.sweeps.finish import estimate

    done = Unfinished(1, False, False, 700, 1.38, span=(50, 0.10, 700, 1.30), work=(650, 1.0), work_s=3900.0,
                      first_s=500.0, price=0.918)
    fresh = Unfinished(2, False, False, None, 0.0, price=0.918)
    est = estimate(700, [fresh], [done])
    start, left = est.rates(fresh)[1], est.left(fresh, 700)  # 200 s and 700 steps of 6 s at $0.918/h
    assert abs(start - 200 * 0.918 / 3600) < 1e-9 and abs(left - start - 4200 * 0.918 / 3600) < 1e-9
    tail = 120 * 0.918 / 3600
    cap = 1.38 + left + tail + start / 2  # the finish and its horizon fit; a preemption's start more does not
    assert finish_first(cap, 1.38, 700, [fresh], [done], horizon_s=120) == {}  # on-demand: no preemption
    assert set(finish_first(cap, 1.38, 700, [fresh], [done], horizon_s=120, spot=True)) == {2}
    assert finish_first(cap + start, 1.38, 700, [fresh], [done], horizon_s=120, spot=True) == {}
    # the last horizon alone: a cap the finish fits to the cent
    assert set(finish_first(1.38 + left + tail / 2, 1.38, 700, [fresh], [done], horizon_s=120)) == {2}
    # under a pruning rule, the money to finish should it pass the first rung keeps the same cushion
    # (the trial that wasted $0.89 on seed 4 was started so: the money to the rung, and to its end bare)
    waits = finish_first(cap, 1.38, 700, [fresh], [done], horizon_s=120, spot=True, pruning=True, rung=50)
    assert "if the rule let it past the first rung" in waits[2]
    assert finish_first(cap + start, 1.38, 700, [fresh], [done], horizon_s=120, spot=True, pruning=True,
                        rung=50) == {}
    # one with progress (held, or preempted) resumes on its finish alone: that is the only use of its spend
    held = Unfinished(2, False, True, 100, 0.2, span=(50, 0.10, 100, 0.2), work=(50, 0.08), work_s=300.0,
                      first_s=500.0, price=0.918)
    assert finish_first(0.2 + est.left(held, 700), 0.2, 700, [held], [done], horizon_s=120, spot=True) == {}
    # a running trial is never held for either: the caps stop it at the edge if need be
    running = Unfinished(2, True, False, 100, 0.2, span=(50, 0.10, 100, 0.2), work=(50, 0.08), work_s=300.0,
                         first_s=500.0, price=0.918)
    assert finish_first(0.2 + est.left(running, 700), 0.2, 700, [running], [done], horizon_s=120, spot=True) == {}


def test_where_the_money_not_the_deadline_limits_the_sweep_a_fresh_trial_waits_its_turn_on_a_warm_instance():
    """bench/sweep.py --small-cap seed 21 (max_step): a second trial booted five minutes after the
    first, in its zone; both were lost there without notice, and the $0.04 the second had cost was
    the margin the third trial lacked. Where the cap funds fewer whole trials than are left and the
    deadline leaves twice the time to run those one after another, a fresh trial that the money
    funds waits for a running trial's instance (kept warm for it: ``for_warm``) instead of booting."""
    from gpuorch.sweeps.finish import AFTER_TURN, IN_TURN, Warm, estimate, for_warm

    # a step takes 6 s and a start 60 s at $0.97/h; trial 1 is at step 20 of 100
    lead = Unfinished(1, True, False, 20, 0.05, span=(10, 0.03, 20, 0.0462), work=(10, 0.0162), work_s=60.0,
                      first_s=120.0, price=0.97)
    fresh = [Unfinished(i, False, False, None, 0.0, price=0.97) for i in (2, 3, 4)]
    est = estimate(100, [lead, *fresh])
    whole, ahead = est.left(fresh[0], 100), est.left(lead, 100)
    cap = 0.05 + ahead + 2.5 * whole  # funds two more whole trials, not three
    keeps, hours = Warm(keeps=True), 10 * 3600.0
    why = finish_first(cap, 0.05, 100, [lead, *fresh], warm=keeps, time_left_s=hours)
    assert for_warm(why[2]) and why[2].endswith(IN_TURN) and "funds about 2 more trials" in why[2], why
    assert for_warm(why[3]) and "funds about 1 more trial " in why[3], why
    assert not for_warm(why[4]) and "cannot also finish this trial" in why[4], why  # the money's wait, as before
    # the money funds every trial left: they boot now, in parallel
    assert finish_first(0.05 + ahead + 3.5 * whole, 0.05, 100, [lead, *fresh], warm=keeps, time_left_s=hours) == {}
    # the deadline needs two at once (twice the time one after another is past it): trial 2 boots
    serial_s = (100 - 20) * 6.0 + 2 * (100 * 6.0 + 60.0)
    why = finish_first(cap, 0.05, 100, [lead, *fresh], warm=keeps, time_left_s=2 * serial_s - 1)
    assert 2 not in why and for_warm(why[3]), why
    assert set(finish_first(cap, 0.05, 100, [lead, *fresh], warm=keeps, time_left_s=2 * serial_s + 1)) == {2, 3, 4}
    # a sweep that keeps no instance warm waits the same, and boots when the trial ahead ends
    cold = finish_first(cap, 0.05, 100, [lead, *fresh], time_left_s=hours)
    assert set(cold) == {2, 3, 4} and cold[2].endswith(AFTER_TURN) and not for_warm(cold[2]), cold
    # no trial running (nothing to wait for), or a pruning rule (trials are compared at its rungs): they boot
    assert set(finish_first(cap, 0.05, 100, fresh, [replace(lead, running=False)], warm=keeps)) == {4}
    assert set(finish_first(cap, 0.05, 100, [lead, *fresh], warm=keeps)) == {4}  # no deadline: max_parallel
    assert not any(for_warm(w) for w in finish_first(cap, 0.05, 100, [lead, *fresh], pruning=True, rung=50,
                                                      warm=keeps, time_left_s=hours).values())
