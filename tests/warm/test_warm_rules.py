"""The warm pool's pure rules (``reconciler/decide/warm.py``) and its idle time in the caps'
ledger (``gpuorch/warm/ledger.py``): a unit below the daemon, no store or provider."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from gpuorch.agent.protocol import AgentStatus
from gpuorch.jobs.spec import parse_spec
from gpuorch.money.caps import Ledger, Policy, SweepState, gate_for
from gpuorch.placement import candidates
from gpuorch.placement.cost import PlacementOptions
from gpuorch.provider.port import Instance, InstanceState, Offer
from gpuorch.reconciler.decide.actions import End, KeepWarm, Step, Terminate
from gpuorch.reconciler.decide.warm import (
    IDLE,
    KEEP,
    RECYCLE,
    RELEASE,
    WarmView,
    demand,
    match,
    step_for,
    with_end,
)
from gpuorch.reconciler.observe.views import AttemptView, JobView
from gpuorch.store.models import Attempt, AttemptStatus, Job, JobStatus, TerminationReason, WarmInstance
from gpuorch.warm.ledger import idle_attempt, idle_cost

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
OFFER = Offer(provider="local", region="r", zone="r-a", instance_type="a100x1", gpu="A100-80GB", gpu_count=1,
              gpu_memory_gib=80, price_per_hour=3.6, billing_granularity_s=1, min_billing_s=60)


def spec(**extra):
    return parse_spec({"name": "t", "run": "true", "resources": {"gpu": "A100:80GB:1"}, "spot_policy": "on-demand",
                       **extra}, "job")


def instance(**extra) -> Instance:
    return Instance(**{"id": "i-1", "provider": "local", "region": "r", "zone": "r-a", "instance_type": "a100x1",
                       "spot": False, "state": InstanceState.RUNNING, **extra})


def ended(view_spec, inst=None, code=0, agent=None):
    job = Job(id=1, name="t", spec="{}", status=JobStatus.RUNNING)
    row = Attempt(id=1, job_id=1, number=1, status=AttemptStatus.LAUNCHED, provider="local", instance_id="i-1")
    a = AttemptView(row, True, inst or instance(), agent or AgentStatus(state="exited", exit_code=code))
    reason = TerminationReason.SUCCEEDED if code == 0 else TerminationReason.FAILED
    step = with_end(JobView(job, view_spec, [a]), a, Step((Terminate(1, "i-1"),)),
                    End(1, reason, f"job exited with code {code}", exit_code=code), NOW)
    return step.actions


def test_an_exited_attempt_on_a_healthy_instance_hands_it_over_instead_of_terminating():
    acts = ended(spec(keep_warm="10m"))
    assert [type(x) for x in acts] == [End, KeepWarm]
    assert acts[1] == KeepWarm(1, "i-1", NOW + timedelta(minutes=10))
    assert [type(x) for x in ended(spec(keep_warm="10m"), code=3)] == [End, KeepWarm]  # the job failed, not the host


def test_no_hand_over_without_keep_warm_on_a_notice_on_a_gang_or_with_a_volume():
    for s, inst, agent in [
        (spec(), None, None),
        (spec(keep_warm="10m"), instance(preemption_deadline=NOW + timedelta(minutes=2)), None),
        (spec(keep_warm="10m"), None, AgentStatus(state="exited", exit_code=0, notice_at=NOW.timestamp())),
        (spec(keep_warm="10m", nodes=2), None, None),
        (spec(keep_warm="10m", volume={"size": 10, "mount": "/data"}), None, None),
    ]:
        assert [type(x) for x in ended(s, inst, agent=agent)] == [Terminate, End]


def warm(**extra) -> WarmView:
    return WarmView(**{"id": 1, "provider": "local", "instance_id": "i-1", "zone": "r-a", "instance_type": "a100x1",
                       "spot": False, "image": "", "offer": OFFER, "status": IDLE,
                       "keep_until": NOW + timedelta(minutes=5), "instance": instance(), **extra})


def test_a_launch_takes_an_idle_instance_of_the_same_market_and_image_only():
    assert match(spec(), [], [warm()]) is not None
    assert match(spec(image="python:3.11"), [], [warm()]) is None  # another image starts fresh
    assert match(spec(spot_policy="spot"), [], [warm()]) is None  # another market
    assert match(spec(), [], [warm(status="dirty")]) is None  # not recycled yet
    assert match(spec(resources={"gpu": "H100:1"}), [], [warm()]) is None  # does not fit the job


def test_a_launch_takes_a_warm_instance_only_where_its_run_costs_no_more_than_a_new_launch():
    """A warm instance saves a new one's start-up (boot and set-up), not its own price: one in a
    dearer zone is taken while the price gap costs less over the run than that start-up, and left
    for a new launch once it costs more; the cheaper of two warm ones wins."""

    def offer(zone, price):
        return OFFER.model_copy(update={"zone": zone, "price_per_hour": price})

    def fresh(price):  # the launch's first choice: a new instance in another zone at ``price``
        return candidates(spec(), [offer("r-b", price)])

    startup_h = (PlacementOptions().boot("local") + PlacementOptions().setup_s) / 3600
    dear = warm(offer=offer("r-a", 4.0))
    # the 1 h default run: 4.0 x 1 h against 3.6 x (1 h + start-up) = 4.08: the warm one is cheaper
    assert 3.6 * (1 + startup_h) > 4.0
    assert match(spec(), fresh(3.6), [dear]) == (dear, candidates(spec(), [dear.offer])[0])
    # at 3.0/h a new launch costs 3.4, less than the warm one's 4.0: launch
    assert match(spec(), fresh(3.0), [dear]) is None
    cheap = warm(id=2, instance_id="i-2", zone="r-c", offer=offer("r-c", 3.7))
    assert match(spec(), fresh(3.6), [dear, cheap])[0] is cheap
    assert match(spec(), [], [dear]) is not None  # nothing to launch: any that fits


def test_release_reasons_in_order():
    assert step_for(warm(), NOW, None) == (KEEP, None)
    assert step_for(warm(status="dirty"), NOW, None) == (RECYCLE, None)
    assert step_for(warm(), NOW, "no queued job fits it") == (RELEASE, "no queued job fits it")
    assert step_for(warm(), NOW + timedelta(minutes=6), None) == (RELEASE, "its keep_warm period is over")
    assert step_for(warm(stop="over the cap"), NOW, None) == (RELEASE, "over the cap")
    noticed = warm(instance=instance(preemption_deadline=NOW + timedelta(seconds=90)))
    assert step_for(noticed, NOW, None) == (RELEASE, "a preemption notice came while it was idle")
    heard = warm(noticed=NOW.timestamp() + 90)  # reported by its idle watcher; the listing says nothing
    assert step_for(heard, NOW, None) == (RELEASE, "a preemption notice came while it was idle")
    assert match(spec(), [], [heard]) is None  # never leased meanwhile
    assert step_for(warm(instance=instance(state=InstanceState.PREEMPTED)), NOW, None)[0] == RELEASE
    unlisted = warm(listed=False, instance=None)
    assert step_for(unlisted, NOW, "no queued job fits it") == (KEEP, None)  # not listed: conclude nothing


def test_an_idle_instance_is_wanted_only_by_a_waiting_job_that_fits_it_and_that_its_caps_fund():
    def fund(c):
        return None

    def refuse(c):
        return "job 2: waiting: the cap cannot also carry this one to its end"

    asked = []
    assert demand(warm(), []) == "no queued job fits it"
    assert demand(warm(), [(spec(resources={"gpu": "H100:1"}), lambda c: asked.append(c))]) == "no queued job fits it"
    assert asked == []  # the caps of a job that does not fit are not asked
    assert demand(warm(), [(spec(), fund)]) is None
    why = demand(warm(), [(spec(), refuse)])  # it fits, but cannot run: idle time would only be spend
    assert why == "no queued job that fits it can run there now (job 2: waiting: the cap cannot also carry this " \
                  "one to its end)"
    assert step_for(warm(), NOW, why) == (RELEASE, why)
    assert demand(warm(), [(spec(), refuse), (spec(), fund)]) is None  # one that can run keeps it


def test_idle_time_is_billed_to_the_job_that_left_it_and_the_caps_release_it_before_it_is_crossed():
    w = WarmInstance(id=7, provider="local", instance_id="i-1", price_per_hour=3.6, billing_granularity_s=1,
                     job_id=1, attempt=1, status=IDLE, idle_since=NOW, keep_until=NOW + timedelta(hours=1))
    later = NOW + timedelta(seconds=100)
    assert abs(idle_cost(w, later) - 0.1) < 1e-9  # 100 s at $3.60/h, no minimum bill of its own
    job = Job(id=1, name="t", spec="{}", status=JobStatus.SUCCEEDED)
    policy = Policy(decision_interval_s=30, stop_grace_s=60)  # a horizon of 120 s: $0.12 at this price
    budget = spec(budget={"max_cost": 0.25})
    assert gate_for(job, budget, None, Ledger.build([(idle_attempt(w), None)], later, policy), policy).stop is None
    # $0.20 spent + the horizon's two decision intervals alone ($0.06; an idle instance's stop grace is
    # the least there is) > $0.25
    crossing = NOW + timedelta(seconds=200)
    gate = gate_for(job, budget, None, Ledger.build([(idle_attempt(w), None)], crossing, policy), policy)
    assert gate.stop is not None and "job budget" in gate.stop.message


def test_another_jobs_idle_instance_reserves_nothing_ahead_of_a_launch_and_its_own_check_then_releases_it():
    """bench/sweep.py --small-cap seed 2 (max_step): a preempted trial that fitted the cap with the
    warm instance beside it was refused its launch for that instance's own reservation (its stop
    grace and a decision interval, from the launch's runway end: $0.04), so it could neither take
    it nor start; the instance idled two passes ($0.012) and the trial lost its resume margin. An
    idle instance gives way to another job's launch at no reservation: the warm sweep, which reads
    the caps as the pass's launches left them, releases it in that pass (or the launch leases it)."""
    w = WarmInstance(id=7, provider="local", instance_id="i-1", price_per_hour=3.6, billing_granularity_s=1,
                     job_id=1, attempt=1, status=IDLE, idle_since=NOW, keep_until=NOW + timedelta(hours=1))
    later = NOW + timedelta(seconds=100)  # $0.10 idle so far
    policy = Policy(decision_interval_s=30, stop_grace_s=60)
    cand = candidates(spec(), [OFFER])[0]
    ledger = Ledger.build([(idle_attempt(w), 9)], later, policy)
    sweep = SweepState(9, "warm", 0.0, None, max_parallel=3, in_flight=0)
    waiting = Job(id=2, name="t", spec="{}", status=JobStatus.QUEUED, sweep_id=9)
    need = gate_for(waiting, spec(), sweep, ledger, policy).need(cand)
    exact = replace(sweep, max_cost=0.10 + need + 1e-6)  # the spend and the launch: not a cent for the idle one
    assert gate_for(waiting, spec(), exact, ledger, policy).affords(cand)
    assert not gate_for(waiting, spec(), replace(exact, max_cost=0.10 + need - 1e-4), ledger, policy).affords(cand)
    # Once the launch is in the ledger, the idle instance's own check (it gives way to nothing) fails: released.
    launched = Attempt(job_id=2, number=1, provider="local", region="r", zone="r-a", instance_type="a100x1",
                       price_per_hour=3.6, billing_granularity_s=1, min_billing_s=60, requested_at=later,
                       status=AttemptStatus.REQUESTED)
    after = Ledger.build([(idle_attempt(w), 9), (launched, 9)], later, policy)
    origin = Job(id=1, name="t", spec="{}", status=JobStatus.SUCCEEDED, sweep_id=9)
    assert gate_for(origin, spec(), exact, after, policy).stop is not None
