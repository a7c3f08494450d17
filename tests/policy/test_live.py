"""The live deadline policy as a pure function, on hand-made situations (gpuorch.policy.live)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuorch.policy.live import Market, Situation, decide_live, feasibility, progress, slack_s

T0 = datetime(2026, 11, 27, 20, 0, tzinfo=UTC)
H = 3600.0


def sit(*, deadline_h: float, work_h: float = 4.0, now_h: float = 0.0, done_h: float = 0.0,
        markets: tuple[Market, ...] = (), **kw) -> Situation:
    base = dict(submitted=T0, deadline=T0 + timedelta(hours=deadline_h), now=T0 + timedelta(hours=now_h),
                work_s=work_h * H, done_s=done_h * H, startup_s=600.0, checkpoint_s=600.0, markets=markets,
                margin_s=34.0)
    return Situation(**{**base, **kw})


A, B = Market("fake/r1/r1-a"), Market("fake/r1/r1-b")


def test_lots_of_slack_and_no_spot_waits():
    d = decide_live(sit(deadline_h=12))
    assert d.kind == "wait" and d.market is None
    assert d.slack_s > d.reserve_s  # 7.8 h of slack, 6 h held in reserve
    assert "waits for spot capacity" in d.reason


def test_no_spot_and_slack_down_to_the_reserve_goes_on_demand():
    # 8 h into a 12 h deadline with 2.5 h of the 4 h done: slack 1.3 h, the reserve (the UP line) 2.7 h
    d = decide_live(sit(deadline_h=12, now_h=8, done_h=2.5))
    assert d.kind == "on-demand" and 0 < d.slack_s < d.reserve_s
    assert "down to the reserve" in d.reason


def test_no_spot_and_too_little_slack_ever_to_leave_on_demand_waits_while_spot_stays_safe():
    # 20 min of slack (one 634 s start-up leaves too little for a later spot run and its fallback):
    # on-demand now would be on-demand to the end, so it waits for spot capacity instead
    d = decide_live(sit(deadline_h=4 + 30.6 / 60, checkpoint_s=300.0))
    assert d.kind == "wait" and d.slack_s < d.reserve_s and "too little to ever move to spot" in d.reason
    # checkpoints every 10 min: a spot launch would already be refused for risk, so waiting buys nothing
    d = decide_live(sit(deadline_h=4 + 30.6 / 60, checkpoint_s=600.0))
    assert d.kind == "on-demand" and "could no longer absorb a preemption" in d.reason


def test_no_slack_goes_on_demand_even_with_spot():
    d = decide_live(sit(deadline_h=4 + 20 / 60, markets=(A, B)))  # 20 min of slack: not two start-ups
    assert d.kind == "on-demand" and 0 < d.slack_s < 2 * 634 and "too risky" in d.reason
    d = decide_live(sit(deadline_h=4 + 11.5 / 60, markets=(A, B)))  # not a minute to spare
    assert d.kind == "on-demand" and d.slack_s == 0 and "only on-demand" in d.reason


def test_spot_available_with_slack_takes_spot_in_the_steadiest_market():
    assert decide_live(sit(deadline_h=12, markets=(A, B))).market == A.key  # ties: placement order
    d = decide_live(sit(deadline_h=12, markets=(Market(A.key, up_s=600), B)))  # A just preempted the job
    assert (d.kind, d.market) == ("spot", B.key)


def test_spot_needs_room_for_a_checkpoint_interval():
    # 1.5 h of slack: enough for two start-ups, not for a job that checkpoints every 2 h
    tight = sit(deadline_h=5.5, markets=(A,), checkpoint_s=2 * H)
    assert decide_live(tight).kind == "on-demand" and "too risky" in decide_live(tight).reason
    assert decide_live(sit(deadline_h=5.5, markets=(A,))).kind == "spot"  # every 10 min: fine
    # a job that never checkpoints risks all its remaining work on every preemption
    assert decide_live(sit(deadline_h=5.5, markets=(A,), checkpoint_s=None)).kind == "on-demand"
    assert decide_live(sit(deadline_h=9, markets=(A,), checkpoint_s=None)).kind == "spot"


def test_a_running_spot_attempt_whose_slack_ran_out_moves_to_on_demand():
    # 5 h deadline, 3 h in, 1.5 h of the 4 h saved: a preemption now leaves 2 h for 2.5 h of work
    running = dict(running="spot", running_market=A.key, unsaved_s=0.4 * H, markets=(A,))
    d = decide_live(sit(deadline_h=5, now_h=3, done_h=1.5, **running))
    assert d.kind == "move" and d.move and "moves to on-demand" in d.reason
    # the same attempt with its work saved by a checkpoint keeps going
    d = decide_live(sit(deadline_h=5, now_h=3, done_h=2.6, **running))
    assert d.kind == "keep" and d.market == A.key and not d.move


def test_a_running_on_demand_attempt_stays():
    d = decide_live(sit(deadline_h=12, now_h=1, markets=(A,), running="on-demand"))
    assert d.kind == "keep" and d.market is None


def test_a_deadline_that_can_no_longer_be_met_runs_on_demand_as_soon_as_possible():
    d = decide_live(sit(deadline_h=5, now_h=4, done_h=1, markets=(A,)))
    assert d.kind == "on-demand" and d.slack_s < 0 and "can no longer be met (short by 2.2 h)" in d.reason


def test_slack_counts_whole_minutes_from_the_saved_progress():
    s = sit(deadline_h=12, now_h=2, done_h=1)  # 10 h left, 3 h of work, one 634 s start-up
    assert slack_s(s) == pytest.approx(10 * H - 3 * H - 660, abs=60)


def test_progress_adds_each_attempts_run_up_to_its_last_checkpoint():
    t = lambda m: T0 + timedelta(minutes=m)  # noqa: E731
    spans = [(t(5), t(45), t(50)),  # preempted at 50: 40 min saved, 5 min lost
             (None, None, t(60)),  # never ran (no capacity)
             (t(70), t(100), None)]  # running: 30 min saved, 20 min since its checkpoint
    assert progress(spans, t(120), checkpointed=True) == (70 * 60, 20 * 60)
    assert progress(spans, t(120), checkpointed=False) == (0.0, 50 * 60)  # starts over each time


def test_feasibility_refuses_what_on_demand_cannot_meet_and_warns_when_only_on_demand_can():
    now = T0
    bad = feasibility(now + timedelta(hours=3), now, 4.0, None, [], 600.0, True)
    assert bad.error is not None and bad.error.startswith("deadline: cannot be met even on on-demand")
    assert "deadline.job_hours 4 h" in bad.error and "give a later deadline" in bad.error
    tight = feasibility(now + timedelta(hours=4.3), now, 4.0, None, [], 600.0, True)
    assert tight.error is None and "only on-demand can meet it" in (tight.warning or "")
    assert feasibility(now + timedelta(hours=4.3), now, 4.0, None, [], 600.0, False) == type(tight)()
    assert feasibility(now + timedelta(hours=12), now, 4.0, None, [], 600.0, True) == type(tight)()
    past = feasibility(now - timedelta(hours=1), now, 4.0, None, [], 600.0, True)
    assert "in the past" in (past.error or "")


def test_the_replacement_of_a_moved_attempt_runs_on_demand_even_with_spot_and_slack():
    assert decide_live(sit(deadline_h=12, markets=(A,))).kind == "spot"
    d = decide_live(sit(deadline_h=12, markets=(A,), moved=True))
    assert d.kind == "on-demand" and "moved off spot" in d.reason


@pytest.mark.parametrize("written, resolved", [
    ("8h", datetime(2026, 11, 28, 4, 0, tzinfo=UTC)),  # from submission
    ("2026-11-28T08:00", datetime(2026, 11, 28, 8, 0, tzinfo=UTC)),  # UTC
    ("2026-11-28T09:00+01:00", datetime(2026, 11, 28, 8, 0, tzinfo=UTC)),
    (datetime(2026, 11, 28, 8, 0), datetime(2026, 11, 28, 8, 0, tzinfo=UTC)),  # what YAML makes of ...T08:00:00
])
def test_spec_deadline_shapes(written, resolved):
    from gpuorch.jobs.spec import parse_spec

    spec = parse_spec({"name": "x", "run": "y", "deadline": {"at": written, "job_hours": 2}})
    assert spec.deadline.resolve(T0) == resolved
    assert parse_spec({"name": "x", "run": "y"}).deadline is None  # specs without one stay valid
    short = parse_spec({"name": "x", "run": "y", "deadline": "8h", "model": {"params": "8B", "duration": "2h"}})
    assert short.deadline.at == "8h" and short.deadline.job_hours is None
