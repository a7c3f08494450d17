"""What a job asks for is what it gets: exact GPU counts, ranges, allow_larger, GPU families,
and spot prices that do not trust one outlier zone (issue 19)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.cli.app import app
from gpuorch.placement import OfferIndex, PlacementOptions, candidates, plan
from gpuorch.placement.explain import count_advice, unsold_count
from gpuorch.placement.spot_price import robust_spot_prices

TEN_HOURS = PlacementOptions(default_hours=10)


def test_a_count_is_exact(offer, job):
    offers = [offer("p4d", "A100", 20.0, count=8, link="nvlink"), offer("a2-1g", "A100", 3.7),
              offer("a2-2g", "A100", 7.3, count=2)]  # fmt: skip
    p = plan(job(resources={"gpu": "A100:1"}, spot_policy="on-demand"), offers)
    assert [c.offer.instance_type for c in p.candidates] == ["a2-1g"]
    reasons = {r.instance_type: r.reason for r in p.rejected}
    assert reasons["p4d"] == ("8 GPUs, the job asks for exactly 1; to accept larger instances set "
                              "resources.allow_larger: true or write a range like A100:1..8")
    assert reasons["a2-2g"].startswith("2 GPUs, the job asks for exactly 1")
    assert [c.offer.instance_type for c in candidates(job(resources={"gpu": "A100:2"}), offers)] == ["a2-2g"]


def test_ranges_mean_at_least_and_at_most(offer, job):
    offers = [offer("one", "A100", 3.7), offer("two", "A100", 7.3, count=2), offer("eight", "A100", 20.0, count=8)]
    def chosen(gpu):
        return {c.offer.instance_type for c in candidates(job(resources={"gpu": gpu}, spot_policy="on-demand"), offers)}
    assert chosen("A100:2+") == {"two", "eight"}
    assert chosen("A100:1..2") == {"one", "two"}
    ranged = candidates(job(resources={"gpu": "A100:2+"}), offers)
    assert all(c.gpus_used == c.offer.gpu_count and not c.larger for c in ranged)  # a range uses what it gets


def test_larger_only_when_allowed_and_cheaper_by_expected_total(offer, job):
    spec = job(resources={"gpu": "A100:1", "allow_larger": True}, spot_policy="on-demand")
    dear_one = [offer("one", "A100", 3.0), offer("eight", "A100", 2.5, count=8)]
    ranked = candidates(spec, dear_one)
    assert [(c.offer.instance_type, c.larger, c.gpus_used) for c in ranked] == [("eight", True, 1), ("one", False, 1)]
    assert ranked[0].est_cost < ranked[1].est_cost
    cheap_one = [offer("one", "A100", 2.0), offer("eight", "A100", 2.5, count=8)]
    assert [c.offer.instance_type for c in candidates(spec, cheap_one)][0] == "one"
    # Without the permission the larger instance is never a candidate, however cheap.
    assert [c.offer.instance_type for c in candidates(job(resources={"gpu": "A100:1"}), dear_one)] == ["one"]


def test_a_job_allowed_onto_a_larger_instance_is_sized_for_the_gpus_it_uses(offer, job):
    model = {"params": "8B", "method": "qlora", "tokens": "20M"}
    one = candidates(job(resources={"gpu": "A100:1"}, model=model), [offer("one", "A100", 3.0)])[0]
    eight = candidates(job(resources={"gpu": "A100:1", "allow_larger": True}, model=model),
                       [offer("eight", "A100", 20.0, count=8, link="nvlink")])[0]
    assert eight.gpus_used == 1 and eight.est_hours == pytest.approx(one.est_hours)


def test_a_name_is_a_family_and_memory_narrows_it(offer, job):
    offers = [offer("a100-40", "A100", 1.5), offer("a100-80", "A100-80GB", 2.5),
              offer("a100-pcie", "A100-PCIE-80GB", 2.0), offer("h100", "H100", 4.0)]  # fmt: skip
    def chosen(gpu):
        ranked = candidates(job(resources={"gpu": gpu}, spot_policy="on-demand"), offers, options=TEN_HOURS)
        return [c.offer.instance_type for c in ranked]
    assert chosen("A100") == ["a100-40", "a100-pcie", "a100-80"]  # every variant, cheapest expected total first
    assert chosen("A100:80GB") == ["a100-pcie", "a100-80"]
    assert chosen("A100-80GB") == ["a100-80"]  # a variant name is that variant only
    assert chosen("A100-40GB") == ["a100-40"]
    h100s = [offer("sxm", "H100", 4.0), offer("pcie", "H100-PCIE", 3.0), offer("nvl", "H100-NVL", 3.5)]
    assert {c.offer.instance_type for c in candidates(job(resources={"gpu": "H100"}), h100s)} == {"sxm", "pcie", "nvl"}
    assert [c.offer.instance_type for c in candidates(job(resources={"gpu": "H100:94GB"}), h100s)] == ["nvl"]


def test_spot_far_below_its_sibling_zones_is_ranked_at_their_median(offer, job):
    zones = [offer("p4d", "A100", 21.96, count=8, zone=z, spot=s, bucket="<5%")
             for z, s in (("az1", 2.466), ("az4", 8.12), ("az6", 7.88))]  # issue 19's us-east-1 figures
    assert robust_spot_prices(zones) == [pytest.approx(8.0), 8.12, 7.88]
    spec = job(resources={"gpu": "A100:8"}, spot_policy="spot")
    ranked = candidates(spec, zones)
    assert [c.offer.zone for c in ranked] == ["az6", "az1", "az4"]  # az1 ranks at $8.00, not $2.47
    robust = next(c for c in ranked if c.offer.zone == "az1")
    assert robust.price_per_hour == 2.466 and robust.ranked_price_per_hour == pytest.approx(8.0)
    listed = candidates(job(resources={"gpu": "A100:8"}, spot_policy="spot", spot_price="listed"), zones)
    assert listed[0].offer.zone == "az1" and listed[0].ranked_price_per_hour is None
    # A zone only somewhat cheaper than its siblings keeps its own price.
    near = [offer("g", "L4", 1.0, zone=z, spot=s) for z, s in (("a", 0.30), ("b", 0.45), ("c", 0.50))]
    assert robust_spot_prices(near) == [0.30, 0.45, 0.50]


def test_count_messages_name_what_exists_and_the_fix(offer, job):
    idx = OfferIndex([offer("p4d", "A100", 20.0, count=8, region="us-east-1"),
                      offer("a2", "A100", 3.7, region="us-central1"), offer("nc", "A100", 7.0, count=2)])
    assert unsold_count(job(resources={"gpu": "A100:3"}), idx) == (
        "job: resources.gpu: no instance type has 3 A100; the counts sold are 1, 2, 8: write A100:8 or A100:3+")
    assert unsold_count(job(resources={"gpu": "A100:1"}), idx) is None
    line = count_advice(job(resources={"gpu": "A100:1"}, regions=["us-east-1"]), idx)
    assert line == ("job: resources.gpu asks for exactly 1 A100, and no offer in us-east-1 has 1 (GPUs per instance "
                    "there: 8 on p4d); write A100:8, or accept larger instances with resources.allow_larger: true "
                    "(or A100:1..8)")
    assert count_advice(job(resources={"gpu": "A100:1", "allow_larger": True}, regions=["us-east-1"]), idx) is None


runner = CliRunner()


def plan_cli(tmp_path, body: str, *args: str):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: one\nrun: python train.py\n" + body)
    return runner.invoke(app, ["plan", str(spec), "--price-list", *args])  # the shipped snapshot


def test_plan_a100_1_in_us_east_1_on_the_shipped_snapshot(tmp_path):
    """Issue 19's job: AWS sells A100s in us-east-1 only 8 to an instance, so plan says so in one
    line and names both fixes, instead of renting 8 GPUs for a 1-GPU job."""
    r = plan_cli(tmp_path, 'resources: {gpu: "A100:1"}\nproviders: [aws]\nregions: [us-east-1]\nspot_policy: spot\n')
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "no offer in us-east-1 on aws has 1" in r.output and "write A100:8" in r.output
    assert "resources.allow_larger: true (or A100:1..8)" in r.output
    # Anywhere, it lands on a one-GPU A100 instance.
    anywhere = plan_cli(tmp_path, 'resources: {gpu: "A100:1"}\nspot_policy: spot\n', "--json")
    assert {c["gpu_count"] for c in json.loads(anywhere.stdout)["candidates"]} == {1}


def test_plan_shows_a_larger_instance_and_a_robust_spot_price(tmp_path):
    r = plan_cli(tmp_path, 'resources: {gpu: "A100:1", allow_larger: true}\nregions: [us-east-1]\n'
                 "spot_policy: spot\n", "--top", "20")
    assert r.exit_code == 0, r.output
    rows = [line for line in r.stdout.splitlines() if "p4d.24xlarge" in line and "use1-az1" in line]
    assert rows and "8 GPUs, the job uses 1; listed $2.466/h, ranked at $" in rows[0]
    assert "the cheapest has 8 GPUs, the job uses 1" in r.stdout
    data = json.loads(plan_cli(tmp_path, 'resources: {gpu: "A100:1", allow_larger: true}\nregions: [us-east-1]\n'
                               "spot_policy: spot\n", "--json", "--top", "20").stdout)
    az1 = next(c for c in data["candidates"] if c["zone"] == "use1-az1" and c["instance_type"] == "p4d.24xlarge")
    assert az1["larger"] and az1["gpus_used"] == 1 and az1["price_per_hour"] == 2.4655
    assert az1["ranked_price_per_hour"] > 3 * az1["price_per_hour"]


@pytest.mark.parametrize(
    "gpu, hint",
    [
        ("A100:0", "resources.gpu: gpu 'A100:0': the GPU count must be at least 1"),
        ("A100:8..2", "the range 8..2 has its minimum above its maximum; write 2..8"),
        ("A100:3", "resources.gpu: no instance type has 3 A100; the counts sold are 1, 2, 4, 8: write A100:4"),
        ("H100:3", "no instance type has 3 H100; the counts sold are 1, 2, 4, 8"),  # RunPod sells 4
    ],
)
def test_bad_gpu_counts_are_one_line_and_exit_2(tmp_path, gpu, hint):
    r = plan_cli(tmp_path, f'resources: {{gpu: "{gpu}"}}\n')
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and hint in r.output, r.output


def test_the_sibling_median_is_statistics_median_for_odd_and_even_counts():
    import random
    import statistics

    from gpuorch.placement.spot_price import _median

    rng = random.Random(7)
    for n in range(1, 12):
        xs = [round(rng.uniform(0.1, 9.0), 3) for _ in range(n)]
        assert _median(list(xs)) == statistics.median(xs)
