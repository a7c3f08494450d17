"""A job volume's storage in placement's total cost (issue 33 item 6): a job with ``volume:`` pays
its volume's storage for the expected run at its market's rate, so the cheaper GPU loses where its
market's storage is dear enough; ``gpuorch plan`` shows the storage part per option, through the
same options the daemon's decide builds (``placement.cost.with_job``)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.catalog import COLUMNS
from gpuorch.cli.app import app
from gpuorch.money.storage import rate_of, rate_table
from gpuorch.placement import PlacementOptions, candidates, plan
from gpuorch.placement.cost import HOURS_PER_MONTH, with_job

# RunPod's network volumes at $0.07/GiB-month against Vast's $0.15 (their catalogs): 3500 GiB for a
# run costs $0.336/h on RunPod and $0.719/h on Vast, more than the GPUs' difference ($0.69 - $0.39).
RATES = (("runpod", "", 0.07), ("vast", "", 0.15))
VOLUME = {"size": "3500GB", "mount": "/data"}
START_S = 480  # default boot + setup


def offers(offer):
    return [offer("rtx4090.1", "RTX4090", 0.69, provider="runpod", region="secure", zone="secure", minimum=0),
            offer("RTX4090x1", "RTX4090", 0.39, provider="vast", region="global", zone="global", minimum=0)]


def test_the_cheaper_gpu_loses_once_its_markets_storage_is_counted(offer, job) -> None:
    spec = job(resources={"gpu": "RTX4090:1"}, spot_policy="on-demand", volume=VOLUME)
    opts = with_job(spec, PlacementOptions(default_hours=10), storage_rates=RATES)
    ranked = candidates(spec, offers(offer), options=opts)
    assert [c.offer.provider for c in ranked] == ["runpod", "vast"]
    hours = (10 * 3600 + START_S) / 3600  # the volume exists for the whole run, start-up included
    for c, rate in zip(ranked, (0.07, 0.15), strict=True):
        assert c.est_storage_usd == pytest.approx(3500 * rate / HOURS_PER_MONTH * hours)
        assert c.est_cost == pytest.approx(c.price_per_hour * hours + c.est_storage_usd)
    # Without the volume, or without rates, the GPU price alone decides (and nothing is storage).
    bare = candidates(job(resources={"gpu": "RTX4090:1"}, spot_policy="on-demand"), offers(offer),
                      options=PlacementOptions(default_hours=10, storage_rates=RATES))
    assert [(c.offer.provider, c.est_storage_usd) for c in bare] == [("vast", 0.0), ("runpod", 0.0)]
    unpriced = candidates(spec, offers(offer), options=PlacementOptions(default_hours=10))
    assert [c.offer.provider for c in unpriced] == ["vast", "runpod"]


def test_spot_storage_covers_the_expected_preemptions_and_a_disk_type_has_its_own_rate(offer, job) -> None:
    spec = job(resources={"gpu": "L4:1"}, spot_policy="spot", checkpoint={"store": "gs://b/run", "interval": 600},
               volume={"size": "100GB", "mount": "/data", "type": "pd-ssd"})
    rates = (("gcp", "", 0.10), ("gcp", "pd-ssd", 0.17), ("gcp", "pd-standard", 0.04))
    [c] = plan(spec, [offer("g2-standard-4", "L4", 0.7, spot=0.25, provider="gcp", bucket=">20%")],
               options=PlacementOptions(default_hours=10, storage_rates=rates)).candidates
    assert c.est_finish_hours > 10 + START_S / 3600  # preemptions lengthen the run, and the storage with it
    assert c.est_storage_usd == pytest.approx(100 * 0.17 / HOURS_PER_MONTH * c.est_finish_hours)
    assert PlacementOptions(storage_rates=rates).storage_rate("gcp", "hyperdisk-balanced") == 0.10  # unlisted: default
    assert PlacementOptions(storage_rates=rates).storage_rate("aws", None) == 0.0  # not named: not counted


def test_with_job_sets_only_what_the_job_needs_so_other_placements_stay_memoised(job) -> None:
    base = PlacementOptions(default_hours=3)
    plain = job()
    assert with_job(plain, None, (("aws", 4),), RATES) is None
    assert with_job(plain, base, (("aws", 4),), RATES) is base
    gang = with_job(job(resources={"gpu": "H100:8"}, nodes=2), None, (("aws", 4),), RATES)
    assert gang == PlacementOptions(max_nodes={"aws": 4})
    vol = with_job(job(volume=VOLUME), base, (), RATES)
    assert vol == PlacementOptions(default_hours=3, storage_rates=RATES)


def test_the_rate_table_is_each_catalogs_rates() -> None:
    table = rate_table(["runpod", "vast", "gcp"])
    assert ("runpod", "", rate_of("runpod")) in table and ("vast", "", rate_of("vast")) in table
    assert ("gcp", "pd-ssd", rate_of("gcp", "pd-ssd")) in table
    assert {p for p, _, _ in table} == {"runpod", "vast", "gcp"}
    every = PlacementOptions(storage_rates=rate_table())
    assert every.storage_rate("gcp", "pd-standard") == rate_of("gcp", "pd-standard")


CATALOG = "\n".join([
    ",".join((*COLUMNS, "min_billing_s")),
    "runpod,secure,secure,rtx4090.1,RTX4090,1,23.99,0,0,0.69,,,1,0",
    "vast,global,global,RTX4090x1,RTX4090,1,23.99,4,16,0.39,,,1,0",
]) + "\n"  # fmt: skip


@pytest.mark.parametrize("volume, first", [(VOLUME, "runpod"), (None, "vast")])
def test_plan_ranks_by_gpu_and_storage_and_shows_the_storage_part(tmp_path, volume, first) -> None:
    cat = tmp_path / "offers.csv"
    cat.write_text(CATALOG)
    spec = {"name": "lora", "run": "python train.py", "resources": {"gpu": "RTX4090:1"},
            "spot_policy": "on-demand"} | ({"volume": volume} if volume else {})
    job = tmp_path / "job.yaml"
    job.write_text(json.dumps(spec))
    r = CliRunner().invoke(app, ["plan", str(job), "--catalog", str(cat), "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)["candidates"]
    assert [c["provider"] for c in got] == [first, "vast" if first == "runpod" else "runpod"]
    rate = {"runpod": rate_of("runpod"), "vast": rate_of("vast")}
    for c in got:
        storage = 3500 * rate[c["provider"]] / HOURS_PER_MONTH * c["est_finish_hours"] if volume else 0.0
        assert c["est_storage_usd"] == pytest.approx(storage, rel=1e-3)
    text = CliRunner().invoke(app, ["plan", str(job), "--catalog", str(cat)])
    assert text.exit_code == 0, text.output
    assert ("storage $" in text.stdout) == (volume is not None)
    if volume:
        assert "includes the 3500 GiB volume's storage for the run" in text.stdout
        row = next(line for line in text.stdout.splitlines() if line.startswith("runpod"))
        assert row.split()[-1] == f"{got[0]['est_storage_usd']:.2f}"
