"""Placement by expected total cost on small hand-made catalogs."""

from __future__ import annotations

import math
import random

import pytest

from gpuorch import gpus
from gpuorch.placement import Candidate, PlacementOptions, candidates, fits, plan
from gpuorch.sizing import estimate_hours, estimate_memory

TEN_HOURS = PlacementOptions(default_hours=10)
CKPT = {"store": "s3://bucket/run", "interval": 60}


def test_cheapest_fitting_offer_wins(offer, job):
    offers = [
        offer("big", "A100-80GB", 3.0, zone="z1"),
        offer("big", "A100-80GB", 2.0, zone="z2"),
        offer("small", "L4", 0.5),
        offer("p4d", "A100", 1.5),  # 40 GB: below the 80 GB the job asks for
    ]
    ranked = candidates(job(resources={"gpu": "A100:80GB:1"}, spot_policy="on-demand"), offers)
    assert [(c.offer.zone, c.price_per_hour) for c in ranked] == [("z2", 2.0), ("z1", 3.0)]
    assert ranked[0].est_cost == pytest.approx(2.0 * (3600 + 480) / 3600)  # 1 h default + boot + setup


def test_spot_wins_only_when_its_expected_total_is_lower(offer, job):
    spec = job(checkpoint=CKPT)
    # On demand: $1.00 x (10 h + 480 s start-up) = $10.133
    # Spot, >20% bucket (0.30 interruptions/h): k = 0.30 x 36480 s / 3600 = 3.04 preemptions,
    # each costing a restart (480 s) and half a checkpoint interval (30 s): T = 36480 + 3.04 x 510 s
    od_cost = 36480 / 3600
    t_spot = 36480 + 3.04 * 510
    cheap = candidates(spec, [offer("g", "L4", 1.0, spot=0.95, bucket=">20%")], options=TEN_HOURS)
    assert [c.spot for c in cheap] == [True, False]
    assert cheap[0].est_cost == pytest.approx(0.95 * math.ceil(t_spot) / 3600)  # billed per second
    assert cheap[1].est_cost == pytest.approx(od_cost)
    assert cheap[0].est_finish_hours == pytest.approx(t_spot / 3600)
    # 3% off is not enough to pay for the expected preemptions: on-demand first.
    close = candidates(spec, [offer("g", "L4", 1.0, spot=0.97, bucket=">20%")], options=TEN_HOURS)
    assert [c.spot for c in close] == [False, True]
    # A quieter pool (<5%: 0.03/h) makes the same 3% worth taking.
    quiet = candidates(spec, [offer("g", "L4", 1.0, spot=0.97, bucket="<5%")], options=TEN_HOURS)
    assert quiet[0].spot


def test_spot_without_checkpoints_loses_half_the_work_per_preemption(offer, job):
    ranked = candidates(job(), [offer("g", "L4", 1.0, spot=0.6, bucket=">20%")], options=TEN_HOURS)
    assert [c.spot for c in ranked] == [False, True]  # 40% off, but each preemption redoes ~5 h
    assert ranked[1].est_cost == pytest.approx(0.6 * math.ceil(36480 + 3.04 * (480 + 18000)) / 3600)


def test_spot_policy(offer, job):
    offers = [offer("g", "L4", 1.0, spot=0.3), offer("h", "L4", 0.5)]
    assert {c.spot for c in candidates(job(spot_policy="spot"), offers)} == {True}
    assert {c.spot for c in candidates(job(spot_policy="on-demand"), offers)} == {False}
    assert len(candidates(job(spot_policy="auto"), offers)) == 3


def test_billing_granularity_flips_the_choice(offer, job):
    spec, short = job(), PlacementOptions(default_hours=10 / 60)  # 10 min of work + 8 min start-up
    hourly = offer("hourly", "L4", 1.00, granularity=3600, minimum=3600, provider="nimbus")
    per_second = offer("persec", "L4", 1.50)
    ranked = candidates(spec, [hourly, per_second], options=short)
    assert [c.offer.instance_type for c in ranked] == ["persec", "hourly"]
    assert [c.est_cost for c in ranked] == pytest.approx([1.50 * 1080 / 3600, 1.00])
    # Billed per second too, the cheaper hourly price wins again.
    fair = hourly.model_copy(update={"billing_granularity_s": 1, "min_billing_s": 60})
    assert candidates(spec, [fair, per_second], options=short)[0].offer.instance_type == "hourly"
    # And for a long job the per-hour rounding hardly matters.
    assert candidates(spec, [hourly, per_second], options=TEN_HOURS)[0].offer.instance_type == "hourly"


def test_a_dearer_but_faster_gpu_wins_on_total_cost(offer, job):
    spec = job(model={"params": "8B", "method": "qlora", "tokens": "20M"})
    l4_hours = estimate_hours(spec.model, gpus.lookup("L4"))
    h100_hours = estimate_hours(spec.model, gpus.lookup("H100"))
    assert h100_hours < l4_hours / 5
    offers = [offer("g6.xlarge", "L4", 0.80), offer("p5.4xlarge", "H100", 4.00)]
    ranked = candidates(spec, offers)
    assert [c.offer.gpu for c in ranked] == ["H100", "L4"]
    assert ranked[0].est_hours == pytest.approx(h100_hours)
    assert ranked[0].est_cost == pytest.approx(4.00 * math.ceil(h100_hours * 3600 + 480) / 3600)
    assert ranked[1].est_cost == pytest.approx(0.80 * math.ceil(l4_hours * 3600 + 480) / 3600)
    # When the fast GPU is dear enough, the slow cheap one wins.
    pricey = [offers[0], offer("p5.4xlarge", "H100", 40.0)]
    assert candidates(spec, pricey)[0].offer.gpu == "L4"


def test_equal_cost_goes_to_the_earlier_finish(offer, job):
    spec = job(model={"params": "8B", "method": "qlora", "tokens": "2M"})
    offers = [offer("a100", "A100-80GB", 3.0, granularity=3600, minimum=3600),
              offer("h100", "H100", 3.0, granularity=3600, minimum=3600)]  # fmt: skip
    ranked = candidates(spec, offers)
    assert ranked[0].est_cost == ranked[1].est_cost == 3.0  # both done within the first billed hour
    assert [c.offer.gpu for c in ranked] == ["H100", "A100-80GB"]
    assert ranked[0].est_finish_hours < ranked[1].est_finish_hours


def test_azure_offers_compete_on_expected_cost(offer, job):
    spec = job(resources={"gpu": "A100:80GB:4"}, spot_policy="on-demand")
    offers = [
        offer("p4de.24xlarge", "A100-80GB", 27.45, count=8, link="nvlink"),
        offer("Standard_NC96ads_A100_v4", "A100-80GB", 14.692, count=4, link="pcie", provider="azure", minimum=300),
        offer("a2-ultragpu-4g", "A100-80GB", 20.0, count=4, link="nvlink", provider="gcp"),
    ]
    ranked = candidates(spec, offers)
    assert [c.offer.provider for c in ranked] == ["azure", "gcp"]  # exactly 4: the 8-GPU p4de is out
    assert ranked[0].est_cost == pytest.approx(14.692 * (3600 + 480) / 3600)
    larger = candidates(job(resources={"gpu": "A100:80GB:4", "allow_larger": True}, spot_policy="on-demand"), offers)
    assert [(c.offer.provider, c.gpus_used, c.larger) for c in larger] == [
        ("azure", 4, False), ("gcp", 4, False), ("aws", 4, True)]


def test_volume_zone_constraint_holds(offer, job):
    offers = [offer("g", "L4", 0.5, zone="z1"), offer("g", "L4", 0.9, zone="z2"), offer("h", "A10G", 0.4, zone="z3")]
    spec = job(resources={"gpu": "24GB+"})
    assert {c.offer.zone for c in candidates(spec, offers, volume_zone="z2")} == {"z2"}
    p = plan(spec, offers, volume_zone="z9")
    assert p.candidates == [] and all("z9, the zone of the job's volume" in r.reason for r in p.rejected)


def test_memory_estimate_decides_the_gpu(offer, job):
    spec = job(model={"params": "70B", "method": "qlora"})
    need = estimate_memory(spec.model).per_gpu_gib
    offers = [offer("g5", "A10G", 1.0), offer("g6e", "L40S", 2.0), offer("p5", "H100", 6.0), offer("cpu", None, 0.1)]
    p = plan(spec, offers)
    assert [c.offer.gpu for c in p.candidates] == ["H100"]
    assert p.candidates[0].per_gpu_gib == pytest.approx(need) and p.candidates[0].sharding == "none"
    reasons = {r.instance_type: r.reason for r in p.rejected}
    assert reasons["g5"].startswith(f"needs {need:.1f} GiB per GPU") and reasons["cpu"] == "no GPU"
    short = plan(spec, offers[:2])
    assert short.shortfall is not None and short.shortfall.gpu == "L40S"
    assert short.shortfall.need_gib - short.shortfall.usable_gib == pytest.approx(need - 44.7, abs=0.1)


def test_a_job_without_a_strategy_uses_one_gpu_of_a_multi_gpu_offer(offer, job):
    pcie = offer("g6e.12xlarge", "L40S", 10.0, count=4, link="pcie")
    undeclared = job(model={"params": "70B", "method": "qlora"})
    refused = plan(undeclared, [pcie]).rejected[0].reason
    assert "on one GPU: the job declares no distributed strategy" in refused
    fits_one = job(model={"params": "8B", "method": "qlora", "tokens": "5M"})
    (c,) = candidates(fits_one, [pcie])
    assert c.gpus_used == 1 and c.sharding == "none"
    assert c.est_hours == pytest.approx(estimate_hours(fits_one.model, gpus.lookup("L40S")))  # one GPU's speed


def test_multi_gpu_offer_shards_as_declared_and_respects_interconnect(offer, job):
    spec = job(model={"params": "70B", "method": "qlora"}, distributed={"strategy": "fsdp"})
    pcie = offer("g6e.12xlarge", "L40S", 10.0, count=4, link="pcie")
    ranked = candidates(spec, [pcie])
    assert ranked[0].sharding == "fsdp" and ranked[0].gpus_used == 4 and ranked[0].per_gpu_gib < 44.7
    two = job(model={"params": "70B", "method": "qlora"}, distributed={"strategy": "fsdp", "degree": 8})
    assert plan(two, [pcie]).rejected[0].reason == "4 GPU(s), distributed: fsdp asks for 8"
    nvlink_only = job(model={"params": "70B", "method": "qlora", "interconnect": "nvlink"},
                      distributed={"strategy": "fsdp"})
    assert plan(nvlink_only, [pcie]).rejected[0].reason == "GPUs linked by pcie; the job asks for interconnect: nvlink"


def test_constraints_and_their_reasons(offer, job):
    offers = [offer("a", "L4", 1.0, provider="aws", region="r1"), offer("b", "L4", 2.0, provider="gcp", region="r2"),
              offer("c", "L4", 9.0, provider="gcp", region="r1", vcpus=2)]  # fmt: skip
    spec = job(resources={"gpu": "L4", "cpus": 4}, providers=["gcp"], regions=["r2"], max_price_per_hour=1.5)
    p = plan(spec, offers)
    assert p.candidates == []
    reasons = {r.instance_type: r.reason for r in p.rejected}
    assert reasons == {
        "a": "provider not in providers (gcp)",
        "b": "above max_price_per_hour $1.5/h (cheapest $2.00/h)",
        "c": "2 vCPUs, the job asks for 4",
    }
    assert [r.offers for r in p.rejected] == [1, 1, 1]
    assert "no spot offering" in plan(job(spot_policy="spot"), [offers[0]]).rejected[0].reason


def test_avoid_predicate_and_limit(offer, job):
    offers = [offer("g", "L4", 0.5 + i / 10, zone=f"z{i}") for i in range(6)]
    ranked = candidates(job(), offers, avoid=lambda c: c.offer.zone in ("z0", "z2"), limit=3)
    assert [c.offer.zone for c in ranked] == ["z1", "z3", "z4"]
    p = plan(job(), offers[:1], avoid=lambda c: True)
    assert p.candidates == [] and p.rejected[0].reason.startswith("avoided")


def test_limited_ranking_matches_the_full_ranking_on_a_large_catalog(offer, job):
    rng = random.Random(7)
    names = ["L4", "A10G", "L40S", "A100-80GB", "H100"]
    offers = [offer(f"i{i % 20}", names[i % 5], round(rng.uniform(0.3, 9), 3), zone=f"z{rng.randrange(40)}",
                    spot=round(rng.uniform(0.1, 3), 3) if i % 3 else None, bucket=rng.choice(["<5%", ">20%", None]))
              for i in range(5000)]  # fmt: skip
    spec = job(model={"params": "8B", "method": "qlora", "tokens": "5M"}, checkpoint=CKPT)
    full = candidates(spec, offers)
    head = candidates(spec, offers, limit=25)
    key = [(c.offer.zone, c.offer.instance_type, c.spot, c.est_cost) for c in full[:25]]
    assert [(c.offer.zone, c.offer.instance_type, c.spot, c.est_cost) for c in head] == key
    costs = [c.est_cost for c in full]
    assert costs == sorted(costs)


def test_checkpoint_restore_pays_egress_across_clouds_and_regions(offer, job):
    spec = job(checkpoint={"store": "gs://bucket/run"}, spot_policy="on-demand")
    offers = [offer("aws", "L4", 1.0, provider="aws", region="us-east1"),
              offer("gcp-near", "L4", 1.0, provider="gcp", region="us-east1"),
              offer("gcp-far", "L4", 1.0, provider="gcp", region="europe-west4")]  # fmt: skip
    opts = PlacementOptions(restore_gib=100, checkpoint_region="us-east1")
    cost = {c.offer.instance_type: c.est_cost for c in candidates(spec, offers, options=opts)}
    base = (3600 + 480 + 100 / 0.25) / 3600  # restoring 100 GiB at 0.25 GiB/s adds 400 s
    assert cost == pytest.approx({"gcp-near": base, "gcp-far": base + 100 * 0.02, "aws": base + 100 * 0.09})


def test_daemon_facing_api_is_backward_compatible(offer, job):
    o = offer("g", "L4", 1.0, spot=0.4)
    assert Candidate(o, True).price_per_hour == 0.4
    assert fits(job(resources={"gpu": "L4"}), o)
    assert not fits(job(resources={"gpu": "H100"}), o)
    assert not fits(job(resources={"gpu": "L4:2"}), o)
    cands = candidates(job(), [o], None)
    assert all(isinstance(c, Candidate) for c in cands) and cands[0].price_per_hour == 0.4
    assert candidates(job(), []) == []


def test_no_single_instance_needs_no_catalog(job):
    from gpuorch.placement.explain import no_single_instance

    assert no_single_instance(job(resources={"gpu": "A100:16"})) is None  # a2-megagpu-16g has 16
    assert "no instance has more than 8" in no_single_instance(job(resources={"gpu": "H100:9"}))
    # One 8-GPU node holds 30B full fine-tuning (no single GPU does), if the job says how to shard it ...
    assert no_single_instance(job(model={"params": "30B", "method": "full"}, distributed={"strategy": "zero3"})) is None
    # ... a job that does not is sized for one GPU, and told which strategy would do.
    undeclared = no_single_instance(job(model={"params": "30B", "method": "full"}))
    assert "declares no distributed strategy" in undeclared and "distributed: {strategy: " in undeclared
    assert no_single_instance(job(model={"params": "70B", "method": "full"}, distributed={"strategy": "zero3"})) is None
    line = no_single_instance(job(model={"params": "120B", "method": "full"}, distributed={"strategy": "zero3"}))
    assert "the smallest configuration is 2 nodes of 8x" in line and "(zero3)" in line and "qlora" in line
    assert "more GPUs" not in line
    assert "no configuration of up to 16 nodes" in no_single_instance(job(model={"params": "5T", "method": "full"}))


def test_the_largest_configuration_named_is_one_the_job_allows(offer, job):
    # A job that fits nowhere is told the largest configuration refused for memory among the offers
    # its providers, regions and volume zone leave it, never one it excluded.
    full = {"params": "70B", "method": "full"}
    offers = [offer("g6e", "L40S", 2.0, provider="aws", region="us-east-1"),
              offer("a3", "H100", 9.0, count=8, provider="gcp", region="us-central1"),
              offer("b200", "B200", 40.0, count=8, provider="lambda", region="us-east-1")]
    assert plan(job(model=full), offers).shortfall.gpu == "B200"
    assert plan(job(model=full, providers=["aws", "gcp"]), offers).shortfall.gpu == "H100"
    assert plan(job(model=full, regions=["us-east-1"], providers=["aws", "gcp"]), offers).shortfall.gpu == "L40S"
    assert plan(job(model=full, providers=["runpod"]), offers).shortfall is None
