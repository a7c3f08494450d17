"""Warm instances (issue 35, item 1) through the assembled daemon on the local and sim providers: a trial's
instance kept warm runs the next trial without a launch; a cap its idle time would cross and a
preemption notice release it; nothing queued that fits releases it at once; and no instance is
left running at the end."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from sqlmodel import select

from gpuorch.store.models import Job, JobStatus, Sweep, WarmInstance
from gpuorch.testing.daemon import AssembledDaemon
from gpuorch.testing.e2e import events
from gpuorch.warm.status import open_periods
from gpuorch.web import data as web_data
from gpuorch.web.pages import jobs_page

pytestmark = pytest.mark.timeout(300)

CONFIG = {"max_sleep_s": 0.5}


def sim_config(tmp_path: Path) -> dict:
    traces = tmp_path / "traces"
    traces.mkdir()
    for zone in ("aa-1a", "bb-1a"):  # spot always available
        (traces / f"{zone}_v100.json").write_text(json.dumps({"metadata": {"gap_seconds": 60}, "data": [1] * 100}))
    return {"max_sleep_s": 0.5, "providers": {"sim": {"traces": str(traces), "boot_s": 0, "time_scale": 1}}}


def sweep_file(tmp_path: Path, values: list[int], gpu: str = "A100:80GB:1", **fields: object) -> Path:
    job = {"run": "sleep {S}", "resources": {"gpu": gpu}, "spot_policy": "on-demand", "keep_warm": "10m"}
    doc = {"name": "warm", "parameters": {"S": values}, "max_parallel": 1, "job": job, **fields}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def trials(d: AssembledDaemon, sweep_id: int) -> list[Job]:
    with d.store.read() as s:
        return list(s.exec(select(Job).where(Job.sweep_id == sweep_id).order_by(Job.id)))  # type: ignore[arg-type]


def warm_rows(d: AssembledDaemon) -> list[WarmInstance]:
    with d.store.read() as s:
        return list(s.exec(select(WarmInstance).order_by(WarmInstance.id)))  # type: ignore[arg-type]


def alive(d: AssembledDaemon) -> list[str]:
    return [i.id for name in d.rec.providers for i in d.provider(name).list_managed() if i.state.alive]


def instances_of(d: AssembledDaemon, jobs: list[Job]) -> list[str]:
    return [a.instance_id for j in jobs for a in d.attempts(j.id or 0) if a.instance_id]


@pytest.mark.parametrize("provider", ["local", "sim"])
def test_two_trials_run_back_to_back_on_one_instance(tmp_path, provider):
    config, gpu = (CONFIG, "A100:80GB:1") if provider == "local" else (sim_config(tmp_path), "V100:1")
    with AssembledDaemon.start(tmp_path / "home", config) as d:
        sweep_id = d.submit_sweep(sweep_file(tmp_path, [0, 0], gpu))["id"]
        d.until(lambda: all(j.status.terminal for j in trials(d, sweep_id)), what="both trials to end")
        done = trials(d, sweep_id)
        assert [j.status for j in done] == [JobStatus.SUCCEEDED] * 2, [(j.status, j.message) for j in done]
        used = instances_of(d, done)
        assert len(used) == 2 and len(set(used)) == 1, used  # one instance launched, both jobs on it
        [reused] = events(d.store, "warm_reused")
        assert reused.job_id == done[1].id
        # Nothing queued fits it any more: released at once, and nothing is left billing.
        d.until(lambda: all(w.ended_at is not None for w in warm_rows(d)) and not alive(d),
                what="the warm instance to be released")
        first, last = warm_rows(d)
        assert (first.status, first.lessee_job_id) == ("leased", done[1].id)
        assert (last.status, last.reason) == ("released", "no queued job fits it")
        assert [e.message for e in events(d.store, "warm_released")][-1].startswith(f"warm instance {used[0]}")



def test_a_capped_sweep_runs_its_first_trial_alone_and_the_next_on_its_instance(tmp_path):
    """Trials in turn (``sweeps/plain.in_turn``): a capped sweep with ``max_parallel: 3`` whose
    deadline (8 h) is past twice the time its $5 buys on one instance ($3.43/h) starts its first
    trial alone (what a trial costs is not known before one finishes, and the money, not the
    deadline, limits the sweep); the next trial waits, saying why, and runs on the first's
    instance, kept warm for it."""
    with AssembledDaemon.start(tmp_path / "home", CONFIG) as d:
        sweep_id = d.submit_sweep(sweep_file(tmp_path, [6, 0], max_parallel=3, budget={"max_cost": 5.0},
                                             deadline="8h"))["id"]
        d.until(lambda: trials(d, sweep_id)[0].status == JobStatus.RUNNING, what="the first trial to run")
        d.run_pass()
        first, second = trials(d, sweep_id)
        if first.status == JobStatus.RUNNING:  # (a pass slower than its 6 s may see it end)
            assert second.status == JobStatus.QUEUED and not d.attempts(second.id or 0), second
            assert "not known before one finishes" in second.message and "one after another" in second.message
        d.until(lambda: all(j.status.terminal for j in trials(d, sweep_id)), what="both trials to end")
        first, second = trials(d, sweep_id)
        assert [first.status, second.status] == [JobStatus.SUCCEEDED] * 2, [first.message, second.message]
        ran, [then] = d.attempts(first.id or 0), d.attempts(second.id or 0)
        assert then.instance_id == ran[-1].instance_id  # on its instance: no launch
        assert ran[-1].ended_at is not None and then.requested_at >= ran[-1].ended_at  # after it, not beside it
        d.until(lambda: not alive(d), what="the warm instance to be released")

def _idle_with_a_waiting_trial(d: AssembledDaemon, tmp_path: Path) -> tuple[int, WarmInstance]:
    """A sweep of two trials, one at a time: the second is kept from starting (a back-off, as a
    no-offer retry sets) while the first ends; the first's instance then idles, wanted by it."""
    sweep_id = d.submit_sweep(sweep_file(tmp_path, [0, 0], budget={"max_cost": 50.0}))["id"]
    first, second = trials(d, sweep_id)
    with d.store.write() as s:
        row = s.get(Job, second.id)
        assert row is not None
        row.not_before = d.rec.clock.now() + timedelta(hours=1)
    w = d.until(lambda: (rows := warm_rows(d)) and rows[0].status == "idle" and rows[0],
                what="the first trial's instance to idle, warm")
    assert d.status(first.id or 0) == JobStatus.SUCCEEDED
    d.run_pass()
    assert warm_rows(d)[0].status == "idle" and alive(d) == [w.instance_id]  # wanted: kept
    # `gpuorch status` and the dashboard's jobs page show it, with its idle cost so far.
    [shown] = open_periods(d.service, d.rec.clock.now())
    assert (shown["instance_id"], shown["job_id"], shown["status"]) == (w.instance_id, first.id, "idle")
    assert shown["idle_s"] > 0 and shown["idle_usd"] > 0
    page = jobs_page(web_data.jobs(d.service))
    assert "Warm instances" in page and w.instance_id in page
    return sweep_id, w


def test_a_cap_the_idle_time_would_cross_releases_the_warm_instance(tmp_path):
    with AssembledDaemon.start(tmp_path / "home", CONFIG) as d:
        sweep_id, w = _idle_with_a_waiting_trial(d, tmp_path)
        # The sweep's money nearly gone: the idle instance's next horizon no longer fits the cap.
        with d.store.write() as s:
            sweep = s.get(Sweep, sweep_id)
            assert sweep is not None
            sweep.max_cost = 0.0001
        d.until(lambda: warm_rows(d)[0].status == "released", what="the release before the cap is crossed")
        row = warm_rows(d)[0]
        assert row.reason is not None and "cap" in row.reason and "sweep warm budget" in row.reason, row.reason
        assert w.instance_id not in alive(d)


def test_a_warm_instance_whose_waiting_job_its_caps_refuse_is_released_at_once(tmp_path):
    """The trial that fits the idle instance cannot run (its own budget cannot fund a run there):
    the idle time would buy nothing, so the instance goes at once, not at its keep_warm's end."""
    with AssembledDaemon.start(tmp_path / "home", CONFIG) as d:
        sweep_id, w = _idle_with_a_waiting_trial(d, tmp_path)
        _, second = trials(d, sweep_id)
        with d.store.write() as s:
            row = s.get(Job, second.id)
            assert row is not None
            row.spec = json.dumps({**json.loads(row.spec), "budget": {"max_cost": 1e-6}})
            row.lease_owner, row.lease_expires = None, None  # read afresh (the daemon keeps the row it leases)
        d.until(lambda: warm_rows(d)[0].status == "released", what="the release of an instance nothing can use")
        reason = warm_rows(d)[0].reason or ""
        assert reason.startswith("no queued job that fits it can run there now (job "), reason
        assert "caps cannot fund a run there" in reason, reason
        assert w.instance_id not in alive(d)


def test_a_notice_on_a_warm_instance_releases_it(tmp_path):
    with AssembledDaemon.start(tmp_path / "home", CONFIG) as d:
        sweep_id, w = _idle_with_a_waiting_trial(d, tmp_path)
        d.adapter("local").inject_preemption(w.instance_id, 60.0)
        d.until(lambda: warm_rows(d)[0].status == "released", what="the release on the notice")
        assert warm_rows(d)[0].reason == "a preemption notice came while it was idle"
        assert w.instance_id not in alive(d)
        assert not events(d.store, "notice")  # no attempt of any job was preempted: only the idle instance went
        # The trial that was waiting for it runs now, on an instance of its own.
        _, second = trials(d, sweep_id)
        with d.store.write() as s:
            row = s.get(Job, second.id)
            assert row is not None
            row.not_before = None
            row.lease_owner, row.lease_expires = None, None  # read afresh (the daemon keeps the row it leases)
        assert d.until_terminal(second.id or 0).status == JobStatus.SUCCEEDED
        [used] = instances_of(d, [second])
        assert used != w.instance_id and not events(d.store, "warm_reused")


def test_a_waiting_trial_the_cap_funds_beside_the_idle_instance_but_not_with_its_reservation_takes_it(tmp_path):
    """bench/sweep.py --small-cap seed 2 (max_step): a trial the cap funded (its launch's
    reservation fitted after the spend) waited beside the warm instance it fitted, because that
    instance's own reservation (a stop grace and a decision interval past the launch's runway) did
    not fit too; the instance idled on, and the trial lost its margin. An idle instance now gives
    way to another job's launch at no reservation (the warm sweep releases it in the pass that
    sees the launch): the trial leases it, and the cap holds."""
    from gpuorch.placement import candidates
    from gpuorch.provider.port import Offer
    from gpuorch.reconciler.observe.views import JobView
    from tests.kit.sweeps import report

    with AssembledDaemon.start(tmp_path / "home", CONFIG) as d:
        sweep_id, w = _idle_with_a_waiting_trial(d, tmp_path)
        _, second = trials(d, sweep_id)
        offer, spec = Offer.model_validate_json(w.offer), d.rec.rows.spec(second)
        gate = d.rec.money.gate(JobView(second, spec, ()), d.rec.clock.now())
        assert gate is not None
        spent = next(c for c in gate.caps if c.scope.startswith("sweep")).spent
        # 20 s of idle for the test's own passes; the old reservation was 150 s of it (90 s runway, S, I)
        cap = spent + gate.need(candidates(spec, [offer])[0]) + w.price_per_hour * 20 / 3600
        with d.store.write() as s:
            sweep, row = s.get(Sweep, sweep_id), s.get(Job, second.id)
            assert sweep is not None and row is not None
            sweep.max_cost, row.not_before = cap, None
            row.lease_owner, row.lease_expires = None, None  # read afresh (the daemon keeps the row it leases)
        d.until(lambda: [e.job_id for e in events(d.store, "warm_reused")] == [second.id], what="the lease")
        d.until(lambda: all(j.status.terminal for j in trials(d, sweep_id)), what="both trials to end")
        assert [j.status for j in trials(d, sweep_id)] == [JobStatus.SUCCEEDED] * 2
        assert report(d.store, sweep_id, d.rec.clock)["spent"] <= cap + 1e-9
