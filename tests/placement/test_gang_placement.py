"""Placing a gang (``nodes: N``): N instances of one offer, costed over every node, sized over
every GPU, slowed by the family's fabric, and refused where the provider places fewer nodes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.cli.app import app
from gpuorch.placement import PlacementOptions, plan
from gpuorch.provider.catalog import load_offers
from gpuorch.reconciler.apply.launching import gang_candidate

GANGS = PlacementOptions(max_nodes={"aws": 4, "gcp": 4, "azure": 4})
MODEL = {"preset": "llama-3.1-8b", "method": "full", "seq_len": 4096, "tokens": "2B"}


def _p5(offer, **kw):
    return offer("p5.48xlarge", "H100", 98.32, count=8, link="nvlink", **kw)


def test_a_gang_costs_every_node_and_keeps_per_node_prices(offer, job):
    o = _p5(offer)
    one = plan(job(resources={"gpu": "H100:8"}, spot_policy="on-demand", deadline={"at": "10d", "job_hours": 5}),
               [o], options=GANGS).candidates[0]
    two = plan(job(resources={"gpu": "H100:8"}, spot_policy="on-demand", nodes=2,
                   deadline={"at": "10d", "job_hours": 5}), [o], options=GANGS).candidates[0]
    assert (one.nodes, two.nodes) == (1, 2)
    assert two.price_per_hour == one.price_per_hour == 98.32 and two.total_price_per_hour == pytest.approx(196.64)
    assert two.est_cost == pytest.approx(2 * one.est_cost)  # the same hours (job_hours), twice the instances
    # The daemon's gang candidate bills the nodes once, not twice.
    billed = gang_candidate(two, 2)
    assert billed.est_cost == pytest.approx(two.est_cost) and billed.price_per_hour == pytest.approx(196.64)
    assert gang_candidate(one, 2).est_cost == pytest.approx(2 * one.est_cost)  # a one-instance candidate still scales


def test_spot_gangs_pay_for_every_node_s_preemptions(offer, job):
    o = _p5(offer, spot=40.0, bucket=">20%")
    spec = {"resources": {"gpu": "H100:8"}, "spot_policy": "spot", "deadline": {"at": "10d", "job_hours": 5}}
    one = plan(job(**spec), [o], options=GANGS).candidates[0]
    two = plan(job(**spec, nodes=2), [o], options=GANGS).candidates[0]
    # Any node's preemption ends the gang's attempt: more than twice one node's expected cost and a later finish.
    assert two.est_cost > 2 * one.est_cost and two.est_finish_hours > one.est_finish_hours


def test_the_price_cap_is_on_the_gang_s_total(offer, job):
    o = _p5(offer)
    base = {"resources": {"gpu": "H100:8"}, "nodes": 2, "spot_policy": "on-demand"}
    assert plan(job(**base, max_price_per_hour=200), [o], options=GANGS).candidates
    capped = plan(job(**base, max_price_per_hour=150), [o], options=GANGS)
    assert not capped.candidates
    assert capped.rejected[0].reason == "above max_price_per_hour $150/h (cheapest $196.64/h for 2 nodes)"


def test_providers_that_place_fewer_nodes_are_refused_naming_nodes(offer, job):
    offers = [_p5(offer), offer("a3-highgpu-8g", "H100", 88.0, count=8, link="nvlink", provider="gcp")]
    result = plan(job(resources={"gpu": "H100:8"}, nodes=3), offers, options=PlacementOptions(max_nodes={"aws": 4}))
    assert {c.offer.provider for c in result.candidates} == {"aws"}
    (gcp,) = [r for r in result.rejected if r.provider == "gcp"]
    assert gcp.reason.startswith("nodes: 3, but provider gcp places at most 1 per job; use nodes: 1")
    # Without the capability map (max_nodes None) placement does not guess.
    assert {c.offer.provider for c in plan(job(resources={"gpu": "H100:8"}, nodes=3), offers).candidates} == {
        "aws", "gcp"}


def test_memory_is_sized_over_every_gpu_of_the_gang(offer, job):
    o = offer("p4d.24xlarge", "A100", 21.96, count=8, link="nvlink")
    spec = {"model": {**MODEL, "seq_len": 2048, "activation_checkpointing": "full"},
            "distributed": {"strategy": "zero3"}}
    one = plan(job(**spec), [o], options=GANGS)
    two = plan(job(**spec, nodes=2), [o], options=GANGS)
    assert two.candidates and two.candidates[0].per_gpu_gib < (one.candidates[0].per_gpu_gib if one.candidates
                                                               else one.shortfall.need_gib)
    assert two.candidates[0].gpus_used == 8 and two.candidates[0].sharding == "zero3"


def test_an_undeclared_strategy_on_a_gang_is_ddp_over_every_gpu(offer, job):
    o = _p5(offer)
    c = plan(job(model={**MODEL, "method": "lora"}, nodes=2), [o], options=GANGS).candidates[0]
    assert c.sharding == "ddp" and c.gpus_used == 8
    # DDP keeps a full replica per GPU: 8B full fine-tuning does not fit, and the reason says so.
    refused = plan(job(model=MODEL, nodes=2), [o], options=GANGS)
    assert not refused.candidates and "(ddp over 16 on 2 nodes)" in refused.rejected[0].reason


def test_runtime_pays_for_the_fabric_between_nodes(offer, job):
    # Same GPUs, same price: AWS p5 (3,200 Gb/s EFA) against GCP a3-highgpu (1,000 Gb/s GPUDirect-TCPX).
    offers = [_p5(offer), offer("a3-highgpu-8g", "H100", 98.32, count=8, link="nvlink", provider="gcp")]
    spec = {"model": MODEL, "distributed": {"strategy": "fsdp"}, "spot_policy": "on-demand"}
    one = {c.offer.provider: c.est_hours for c in plan(job(**spec), offers, options=GANGS).candidates}
    two = {c.offer.provider: c.est_hours for c in plan(job(**spec, nodes=2), offers, options=GANGS).candidates}
    assert one["aws"] == pytest.approx(one["gcp"])  # one node: the fabric plays no part
    assert one["aws"] / 2 < two["aws"] < two["gcp"] < one["gcp"]
    best = plan(job(**spec, nodes=2), offers, options=GANGS).candidates[0]
    assert best.offer.provider == "aws"  # the faster fabric finishes sooner at the same price


def test_plan_cli_refuses_a_gang_no_ranked_provider_places(tmp_path):
    spec = tmp_path / "gang.yaml"
    # the clouds' adapters place gangs of up to MAX_NODES (16): one node more than that
    spec.write_text("name: g\nrun: torchrun train.py\nnodes: 17\nresources: {gpu: 'H100:8'}\n")
    r = CliRunner().invoke(app, ["plan", str(spec), "--price-list"])
    assert r.exit_code == 2
    line = r.output.strip().splitlines()[-1]
    ranked = ", ".join(sorted({o.provider for o in load_offers()}))  # every shipped snapshot's providers
    assert line.startswith(f"error: nodes: 17 instances, but none of the providers ranked ({ranked}) places "
                           "more than 16 per job; use nodes: 16")


def test_plan_cli_shows_per_node_and_total_prices_for_a_gang(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("providers:\n  local: {}\n")
    spec = tmp_path / "gang.yaml"
    spec.write_text("name: g\nrun: torchrun train.py\nnodes: 2\nresources: {gpu: 'A100-80GB:8'}\n")
    r = CliRunner().invoke(app, ["--config", str(cfg), "plan", str(spec), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["nodes"] == 2 and data["candidates"]
    c = data["candidates"][0]
    assert c["nodes"] == 2 and c["total_price_per_hour"] == pytest.approx(2 * c["price_per_hour"])
    text = CliRunner().invoke(app, ["--config", str(cfg), "plan", str(spec)]).stdout.splitlines()
    assert "a gang of 2 instances of one type in one zone" in text[0] and "total $/h" in text[1]
    assert " 2x8xA100-80GB " in text[2] and "ddp 2x8" in text[2]


def test_inference_nodes_serve_replicas(offer, job):
    o = offer("g6e.xlarge", "L40S", 1.86, count=1)
    spec = {"model": {"preset": "llama-3.1-8b", "method": "inference", "tokens": "100M", "micro_batch": 8},
            "spot_policy": "on-demand"}
    one = plan(job(**spec), [o], options=GANGS).candidates[0]
    two = plan(job(**spec, nodes=2), [o], options=GANGS).candidates[0]
    # Two replicas generate twice as fast for the same memory per GPU; the nodes cost about the same in all.
    assert two.est_hours == pytest.approx(one.est_hours / 2)
    assert two.per_gpu_gib == pytest.approx(one.per_gpu_gib)


def test_the_daemon_s_gang_limits_are_memoised_and_respected(offer, job):
    from gpuorch.placement import OfferIndex, candidates

    offers = [_p5(offer), offer("a3-highgpu-8g", "H100", 88.0, count=8, link="nvlink", provider="gcp")]
    idx = OfferIndex(offers)
    limits = PlacementOptions(max_nodes={"aws": 4, "gcp": 1})
    spec = job(resources={"gpu": "H100:8"}, nodes=2)
    first = candidates(spec, idx, options=limits)
    assert {c.offer.provider for c in first} == {"aws"} and len(idx.placed) == 1  # memoised, gcp refused
    assert candidates(spec, idx, options=limits) == first and len(idx.placed) == 1
    # Other limits are another key, and a one-node job ignores them (one memo for any limits).
    assert {c.offer.provider for c in candidates(spec, idx, options=PlacementOptions(max_nodes={"gcp": 2}))} == {
        "gcp"}
    single = job(resources={"gpu": "H100:8"})
    candidates(single, idx, options=limits)
    candidates(single, idx)
    assert len(idx.placed) == 3
    # Options that set anything else are not memoised.
    candidates(spec, idx, options=PlacementOptions(default_hours=3))
    assert len(idx.placed) == 3
