"""The sim market: traces and prices replayed on a scaled clock, reclaims with the flavours'
notices, capacity from the trace, boot and changeover, and the lifetime backstop."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sim_data import PRICES, TRACES, write_trace

from gpuorch.errors import NoCapacityError, PermanentError, UserInputError
from gpuorch.provider.localdir.instances import Meta
from gpuorch.provider.port import InstanceState, LaunchRequest
from gpuorch.testing import wait_until
from gpuorch_sim.cloud import ensure_cloud
from gpuorch_sim.market import region_of
from gpuorch_sim.provider import SimProvider
from gpuorch_sim.traces import PriceSeries, Trace, zone_files


def test_real_traces_and_prices_load_by_zone():
    traces = zone_files(str(TRACES), "traces")
    assert len(traces) == 9 and "us-east-1a" in traces
    t = Trace.load("us-east-1a", traces["us-east-1a"])
    assert t.gap_s == 195 and len(t.data) == 20158
    assert t.fraction_available() == pytest.approx(0.17, abs=0.01)
    p = PriceSeries.load("us-east-2a", zone_files(str(PRICES), "prices")["us-east-2a"])
    assert p.on_demand == 3.06 and 0.9 < p.at(0) < 1.9


def test_trace_lookup_and_next_drop(tmp_path):
    t = Trace.load("z", write_trace(tmp_path / "z.json", [1, 1, 0, 1], gap_s=10))
    assert [t.available(x) for x in (0, 15, 25, 35, 45)] == [True, True, False, True, True]  # cyclic
    assert t.next_drop(5) == 20 and t.next_drop(35) == 60  # the next cycle's tick 2
    assert Trace.load("z", write_trace(tmp_path / "all.json", [1, 1])).next_drop(0) is None


def test_next_drop_is_the_first_zero_tick_after_t_across_cycles(tmp_path):
    samples = [0, 1, 1, 0, 0, 1, 1, 1]
    t = Trace.load("z", write_trace(tmp_path / "z.json", samples, gap_s=10))
    for x in range(-100, 200, 3):  # every tick position, before the trace's start and across wraps
        k = x // 10
        first = next(i for i in range(k + 1, k + 1 + len(samples)) if samples[i % len(samples)] == 0)
        assert t.next_drop(x) == first * 10
    one = Trace.load("z", write_trace(tmp_path / "one.json", [0], gap_s=10))
    assert one.next_drop(5) == 10 and one.next_drop(-5) == 0


def test_zone_files_name_zones_and_explain_mistakes(tmp_path):
    f = write_trace(tmp_path / "anything.json", [1])
    assert zone_files([f"eu-west-1b={f}"], "traces") == {"eu-west-1b": f.resolve()}
    with pytest.raises(UserInputError, match="traces: .*neither a directory nor ZONE=FILE"):
        zone_files(str(tmp_path / "missing"), "traces")
    (tmp_path / "bad.json").write_text("[1, 0]")
    with pytest.raises(UserInputError, match="not a spot trace|expected a JSON object"):
        Trace.load("x", tmp_path / "bad.json")


@pytest.mark.parametrize(("zone", "region"), [("us-east-1a", "us-east-1"), ("us-central1-a", "us-central1"),
                                                ("eastus-2", "eastus"), ("local", "local")])
def test_region_of(zone, region):
    assert region_of(zone) == region


def test_offers_one_per_zone_with_the_series_price(make_sim):
    sim = make_sim(traces=str(TRACES), prices=str(PRICES))
    offers = {o.zone: o for o in sim.offers()}
    assert len(offers) == 9 and {o.provider for o in offers.values()} == {"sim"}
    assert offers["us-east-2a"].spot_price_per_hour == 0.918  # from its price series at the start
    assert offers["us-east-1a"].spot_price_per_hour == 0.9731  # no series: the default
    assert offers["us-east-1a"].price_per_hour == 3.06 and offers["us-east-1a"].region == "us-east-1"


def test_spot_follows_the_trace_on_demand_is_always_there(make_sim, tmp_path):
    f = write_trace(tmp_path / "z.json", [0, 1])
    sim = make_sim(traces=[f"zz-1a={f}"], time_scale=1)
    offer = sim.offers()[0]
    with pytest.raises(NoCapacityError, match=r"\(trace\)"):
        sim.launch(LaunchRequest(job_id=1, attempt=1, offer=offer, spot=True))
    assert sim.launch(LaunchRequest(job_id=1, attempt=2, offer=offer, spot=False)).state.alive
    with pytest.raises(PermanentError):
        sim.launch(LaunchRequest(job_id=1, attempt=3, offer=offer.model_copy(update={"zone": "mars-1a"}), spot=False))


def test_reclaim_comes_after_the_flavours_notice(make_sim, tmp_path):
    # One tick of 600 s available, then a drop: at 60x the drop is 10 s of wall time away.
    f = write_trace(tmp_path / "z.json", [1, 0], gap_s=600)
    zones = {"aws-1a": {}, "gcp-1a": {"flavour": "gcp"}, "none-1a": {"notice_s": 0}}
    sim = make_sim(traces=[f"{z}={f}" for z in zones], zones=zones, time_scale=60, min_notice_wall_s=0.1)
    created = time.time()
    kill = sim.market.clock.wall(600)
    aws, gcp, none = (sim.market.reclaim(z, created) for z in zones)
    assert aws.kill_at == gcp.kill_at == none.kill_at == pytest.approx(kill)
    assert aws.notice_at == pytest.approx(kill - 2.0)  # 120 s at 60x
    assert gcp.notice_at == pytest.approx(kill - 0.5)  # 30 s at 60x
    assert none.notice_at is None
    slow = write_trace(tmp_path / "slow.json", [1, 0], gap_s=6000)  # the drop 10 s away at 600x
    floor = make_sim("floor", traces=[f"aws-1a={slow}"], time_scale=600, min_notice_wall_s=1.5)
    r = floor.market.reclaim("aws-1a", time.time())
    assert r.kill_at - r.notice_at == pytest.approx(1.5)  # 0.2 s would be too short for an agent


def test_a_reclaimed_instance_is_announced_then_killed_on_time(make_sim, tmp_path):
    f = write_trace(tmp_path / "z.json", [1, 0], gap_s=60)
    sim = make_sim(traces=[f"zz-1a={f}"], time_scale=30, boot_s=0, flavour="gcp", min_notice_wall_s=0.5)
    inst = sim.launch(LaunchRequest(job_id=1, attempt=1, offer=sim.offers()[0], spot=True))
    noticed = wait_until(lambda: (i := sim.get(inst.id)).preemption_deadline and i, timeout_s=10, what="the notice")
    assert noticed.state.alive and noticed.preemption_deadline.timestamp() == pytest.approx(sim.market.clock.wall(60))
    gone = wait_until(lambda: not (i := sim.get(inst.id)).state.alive and i, timeout_s=10, what="the reclaim")
    assert gone.state == InstanceState.PREEMPTED and gone.ended_at >= noticed.preemption_deadline


def test_boot_and_changeover_are_market_seconds(make_sim, tmp_path):
    f = write_trace(tmp_path / "z.json", [1])
    sim = make_sim(traces=[f"zz-1a={f}"], time_scale=100, boot_s=100, changeover_s=400)
    offer = sim.offers()[0]
    first = sim.launch(LaunchRequest(job_id=1, attempt=1, offer=offer, spot=False))
    later = sim.launch(LaunchRequest(job_id=1, attempt=2, offer=offer, spot=False))
    meta1 = (sim.instances_dir / first.id / "meta.json").read_text()
    assert first.state == later.state == InstanceState.PENDING
    meta2 = (sim.instances_dir / later.id / "meta.json").read_text()
    m1, m2 = Meta.model_validate_json(meta1), Meta.model_validate_json(meta2)
    assert (m1.ready_at - m1.created_at).total_seconds() == pytest.approx(1.0)
    assert (m2.ready_at - m2.created_at).total_seconds() == pytest.approx(5.0)


def test_max_lifetime_is_a_cloud_side_backstop(make_sim, tmp_path):
    f = write_trace(tmp_path / "z.json", [1])
    sim = make_sim(traces=[f"zz-1a={f}"], time_scale=10, boot_s=0)
    inst = sim.launch(LaunchRequest(job_id=1, attempt=1, offer=sim.offers()[0], spot=False, max_lifetime_s=1.0))
    sim.stop_cloud()  # the backstop holds even with nobody asking: the cloud process ends it
    ensure_cloud(sim.home)
    gone = wait_until(lambda: (m := sim._instances.read(sim._dir(inst.id)).meta).state != InstanceState.PENDING and m,
                      timeout_s=10, what="the lifetime limit")
    assert (gone.state, gone.state_reason) == (InstanceState.TERMINATED, "max-lifetime")


def test_options_are_checked_with_the_option_named(tmp_path):
    with pytest.raises(UserInputError, match="providers.sim.traces"):
        SimProvider.from_config({}, tmp_path)
    with pytest.raises(UserInputError, match="providers.sim.time_scale"):
        SimProvider.from_config({"traces": str(TRACES), "time_scale": 0}, tmp_path)
    with pytest.raises(UserInputError, match="providers.sim.faults"):
        SimProvider.from_config({"traces": str(TRACES), "faults": {"rate": 3}}, tmp_path)


def test_a_batch_of_launches_on_many_threads_starts_one_cloud_process(make_sim, tmp_path, monkeypatch):
    import gpuorch_sim.cloud as cloud

    spawned = []
    real = cloud.spawn_detached
    monkeypatch.setattr(cloud, "spawn_detached", lambda *a, **k: spawned.append(real(*a, **k)))
    f = write_trace(tmp_path / "z.json", [1])
    sim = make_sim(traces=[f"zz-1a={f}"], boot_s=0)
    offer = sim.offers()[0]
    with ThreadPoolExecutor(8) as pool:  # the launch pool's shape: concurrent launches, no cloud yet
        list(pool.map(lambda j: sim.launch(LaunchRequest(job_id=j, attempt=1, offer=offer, spot=False)), range(16)))
    wait_until(lambda: cloud.cloud_running(sim.home), what="the cloud process")
    assert len(spawned) == 1
    sim.stop_cloud()  # a deliberate stop: the next launch may start one at once
    wait_until(lambda: not cloud.cloud_running(sim.home), what="the cloud to stop")
    sim.launch(LaunchRequest(job_id=99, attempt=1, offer=offer, spot=False))
    assert len(spawned) == 2
