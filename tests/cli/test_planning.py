"""estimate, offers and plan through typer's runner: JSON shapes, one-line errors, exit code 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch.catalog import COLUMNS
from gpuorch.cli.app import app
from gpuorch.sizing.memory import COMPONENTS

runner = CliRunner()

CATALOG = "\n".join([
    ",".join(COLUMNS),
    "aws,us-east-1,use1-az1,g6.xlarge,L4,1,22.35,4,16,0.80,0.30,,1",
    "aws,us-east-1,use1-az2,p5.4xlarge,H100,1,80,16,256,4.00,,,1",
    "gcp,us-central1,us-central1-a,a3-highgpu-8g,H100,8,80,208,1872,88.0,20.0,nvlink,1",
    "gcp,europe-west4,europe-west4-a,g2-standard-4,L4,1,22.35,4,16,0.70,0.25,,1",
]) + "\n"  # fmt: skip

JOB = """\
name: ft-8b
run: python train.py
model: {params: 8B, method: qlora, tokens: 20M}
checkpoint: {store: "s3://bucket/ft", interval: 10m}
"""


def cli(*args: str):
    return runner.invoke(app, list(args))


def one_line_error(r, code: int = 2) -> str:
    assert r.exit_code == code, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and r.stdout == ""
    return lines[0]


@pytest.fixture
def catalog(tmp_path):
    p = tmp_path / "offers.csv"
    p.write_text(CATALOG)
    return str(p)


@pytest.fixture
def job_file(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text(JOB)
    return str(p)


def test_estimate_json_shape():
    r = cli("estimate", "--params", "70B", "--method", "qlora", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert {"per_gpu_gib", "total_gib", "breakdown", "fits"} <= set(data)
    assert set(data["breakdown"]) == set(COMPONENTS)
    assert data["per_gpu_gib"] == pytest.approx(sum(data["breakdown"].values()), abs=0.05)
    assert {"gpu", "gpu_count", "nodes", "scope", "per_gpu_gib", "usable_gib", "sharding"} <= set(data["fits"][0])
    assert data["smallest"]["single"]["gpu_count"] == 1


def test_estimate_with_architecture_gpus_and_tokens():
    r = cli("estimate", "--params", "7e9", "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
            "--method", "full", "--gpus", "8", "--gpu", "A100-80GB", "--tokens", "100M", "--json")  # fmt: skip
    data = json.loads(r.stdout)
    assert data["gpus"] == 8 and data["gpu"] == "A100-80GB" and data["sharding"] in ("zero2", "zero3")
    assert data["total_gib"] == pytest.approx(8 * data["per_gpu_gib"], abs=0.1)
    assert all(f["est_hours"] > 0 for f in data["fits"])


def test_estimate_text_output():
    r = cli("estimate", "--preset", "llama-3-8b", "--method", "inference", "--precision", "int4")
    assert r.exit_code == 0 and "kv_cache" in r.stdout and "smallest configurations that fit" in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--params", "seven"], "--params: cannot read params 'seven'"),
        (["--params", "7B", "--method", "dpo"], "--method:"),
        (["--params", "7B", "--gpu", "Z900"], "unknown GPU 'Z900'"),
        (["--params", "70B", "--method", "qlora", "--gpu", "T4"], "T4 has no bf16 tensor cores"),
        (["--params", "70B", "--method", "qlora", "--gpu", "L4"], "1xL4 is too small: needs 5"),
        (["--params", "5T", "--method", "full"], "no configuration fits: the largest, 16 nodes of 8xB300"),
        (["--params", "7B", "--layers", "32"], "--layers, --hidden and --heads go together"),
        (["--params", "7B", "--method", "full", "--precision", "int4"], "use precision bf16, fp16 or fp8"),
    ],
)
def test_estimate_errors(args, message):
    assert message in one_line_error(cli("estimate", *args))


def test_impossible_fit_suggests_qlora():
    line = one_line_error(cli("estimate", "--params", "5T", "--method", "full"))
    assert "GiB missing" in line and "qlora" in line and "more GPUs" in line


def test_offers_json_cheapest_first(catalog):
    r = cli("offers", "--catalog", catalog, "--json")
    data = json.loads(r.stdout)
    prices = [o["listed_price"] for o in data["offers"]]
    assert prices == sorted(prices) and data["count"] == 4
    fields = {"provider", "region", "zone", "instance_type", "gpu", "gpu_count", "price_per_hour",
              "spot_price_per_hour"}
    assert fields <= set(data["offers"][0])
    spot = json.loads(cli("offers", "--catalog", catalog, "--spot", "--json").stdout)["offers"]
    assert [o["spot_price_per_hour"] for o in spot] == [0.25, 0.30, 20.0]
    od = json.loads(cli("offers", "--catalog", catalog, "--on-demand", "--gpu", "h100", "--json").stdout)["offers"]
    assert [o["price_per_hour"] for o in od] == [4.0, 88.0]
    big = json.loads(cli("offers", "--catalog", catalog, "--min-vram", "80GB", "--provider", "gcp", "--json").stdout)
    assert [o["instance_type"] for o in big["offers"]] == ["a3-highgpu-8g"]


def test_offers_from_the_snapshot():
    r = cli("offers", "--price-list", "--gpu", "A100", "--region", "us-east-1", "--top", "3")
    assert r.exit_code == 0 and "p4d.24xlarge" in r.stdout and "3 offer(s)" in r.stdout


# Azure offers for these tests: made-up test prices (tests/azure/azure_test_catalog.py), never shipped.
AZURE_TEST_CATALOG = Path(__file__).resolve().parents[1] / "azure" / "data" / "test-catalog.csv"


def test_offers_provider_azure_reads_a_catalog_and_the_price_list_has_none():
    # gpuorch ships no Azure prices (docs/catalog.md, "Sources"): the price list says where to get them
    line = one_line_error(cli("offers", "--price-list", "--provider", "azure"))
    assert "gpuorch ships no azure prices; `gpuorch catalog refresh --provider azure` fetches them" in line
    azure = ("--catalog", str(AZURE_TEST_CATALOG), "--provider", "azure")
    data = json.loads(cli("offers", *azure, "--on-demand", "--json").stdout)
    assert data["count"] == 6 and {o["provider"] for o in data["offers"]} == {"azure"}
    prices = [o["price_per_hour"] for o in data["offers"]]
    assert prices == sorted(prices) and prices[0] == 0.5  # Standard_NC4as_T4_v3, eastus
    assert data["offers"][-1]["instance_type"] == "Standard_ND96isr_H100_v5"
    assert all(o["min_billing_s"] == 300 for o in data["offers"])
    text = cli("offers", *azure, "--gpu", "A100", "--region", "westus3", "--top", "1")
    assert text.exit_code == 0 and "Standard_NC24ads_A100_v4 1xA100-PCIE-80GB" in text.stdout


def test_plan_picks_azure_when_it_is_cheapest(tmp_path):
    from gpuorch.catalog.registry import catalogs

    gcp = catalogs()["gcp"].rows
    assert gcp is not None
    both = tmp_path / "both.csv"  # GCP's shipped rows and the Azure test rows (same columns)
    both.write_text(gcp.read_text() + "".join(AZURE_TEST_CATALOG.read_text().splitlines(keepends=True)[1:]))
    spec = tmp_path / "a100.yaml"
    spec.write_text("name: a100\nrun: x\nresources: {gpu: 'A100:80GB:1'}\n"
                    "checkpoint: {store: 's3://bucket/ft', interval: 10m}\n")
    data = json.loads(cli("plan", str(spec), "--catalog", str(both), "--json", "--top", "3").stdout)
    best = data["candidates"][0]
    # the test rows' NC24ads_A100_v4 spot $0.40/h in westus3 beats GCP's a2-ultragpu-1g spot
    assert (best["provider"], best["region"], best["instance_type"], best["spot"]) == (
        "azure", "westus3", "Standard_NC24ads_A100_v4", True)
    assert best["price_per_hour"] == 0.4
    od = tmp_path / "od.yaml"
    od.write_text("name: od\nrun: x\nresources: {gpu: 'A100:80GB:1'}\nspot_policy: on-demand\n")
    # on demand, GCP us-east4 ($3.318/h) is under the test rows' $3.60/h (GCP us-central1's $2.94582 is
    # not shipped: its GPU part's spot price is above its on-demand price, docs/catalog.md)
    ranked = json.loads(cli("plan", str(od), "--catalog", str(both), "--json", "--top", "20").stdout)["candidates"]
    assert [c["provider"] for c in ranked][0] == "gcp"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpu", "Z900"], "unknown GPU 'Z900'"),
        (["--min-vram", "lots"], "--min-vram: cannot read size 'lots'"),
        (["--spot", "--on-demand"], "--spot and --on-demand exclude each other"),
        (["--catalog", "/nonexistent.csv"], "cannot read the catalog"),
    ],
)
def test_offers_errors(args, message):
    assert message in one_line_error(cli("offers", *args))


def test_bad_catalog_names_the_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(CATALOG + "aws,us-east-1,x,g5.xlarge,A10G,1,22,4,16,free,,,1\n")
    error = one_line_error(cli("offers", "--catalog", str(bad), "--strict"))  # without: the row is skipped
    assert "line 6, column price_per_hour: 'free' is not a number" in error
    missing = tmp_path / "missing.csv"
    missing.write_text("provider,region\naws,us-east-1\n")
    assert "line 1: missing columns zone, instance_type" in one_line_error(cli("offers", "--catalog", str(missing)))


def test_plan_json(catalog, job_file):
    r = cli("plan", job_file, "--catalog", catalog, "--json", "--top", "3")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert len(data["candidates"]) == 3 and data["job"] == "ft-8b"
    keys = {"provider", "region", "zone", "instance_type", "gpu", "gpu_count", "spot", "price_per_hour",
            "est_hours", "est_cost"}
    assert all(keys <= set(c) for c in data["candidates"])
    costs = [c["est_cost"] for c in data["candidates"]]
    assert costs == sorted(costs)
    assert data["rejected"] == []


def test_plan_rejections_and_text(tmp_path, catalog):
    spec = tmp_path / "h100.yaml"
    spec.write_text("name: big\nrun: x\nresources: {gpu: 'H100:8'}\nspot_policy: on-demand\n")
    data = json.loads(cli("plan", str(spec), "--catalog", catalog, "--json").stdout)
    assert [c["instance_type"] for c in data["candidates"]] == ["a3-highgpu-8g"]
    reasons = {r["instance_type"]: r["reason"] for r in data["rejected"]}
    assert reasons["p5.4xlarge"] == "1 GPU(s), the job asks for 8" and reasons["g6.xlarge"].startswith("GPU is L4")
    text = cli("plan", str(spec), "--catalog", catalog)
    assert text.exit_code == 0 and "a3-highgpu-8g" in text.stdout and "rejected aws p5.4xlarge" in text.stdout


def test_plan_impossible_fit_names_the_largest_configuration(tmp_path, catalog):
    spec = tmp_path / "huge.yaml"
    spec.write_text("name: huge\nrun: x\nmodel: {params: 400B, method: full}\n")
    line = one_line_error(cli("plan", str(spec), "--catalog", catalog))
    assert "largest configuration, gcp a3-highgpu-8g (8xH100)" in line and "GiB missing" in line and "qlora" in line


def test_plan_says_when_only_several_nodes_would_hold_the_job(tmp_path, catalog):
    spec = tmp_path / "multi.yaml"
    spec.write_text("name: big\nrun: x\nmodel: {params: 70B, method: full, activation_checkpointing: full}\n"
                    "distributed: {strategy: zero3}\n")
    line = one_line_error(cli("plan", str(spec), "--catalog", catalog))
    assert "the largest configuration, gcp a3-highgpu-8g (8xH100), needs " in line
    assert re.search(r"it needs \d+ nodes of 8xH100 \(zero3\), but gpuorch places a job on one instance", line)
    assert "unless it asks for a gang with nodes: N" in line and "method qlora or lora" in line
    assert "more GPUs" not in line  # the largest configuration is a full node already
    spec.write_text("name: wide\nrun: x\nresources: {gpu: 'H100:16'}\n")
    line = one_line_error(cli("plan", str(spec), "--catalog", catalog))
    assert line == ("error: wide: resources.gpu asks for 16 H100 on one instance; no instance has more than 8, and "
                    "gpuorch places a job on one instance unless it asks for a gang with nodes: N (N instances of "
                    "one type, on a provider that places that many): "
                    f"ask for at most 8 GPUs, or use a model: block to size the job (ranked price list {catalog})")


@pytest.mark.parametrize(
    "body, message",
    [
        ("name: x\nrun: y\nmodel: {params: lots}\n", "model.params: cannot read params 'lots'"),
        ("name: x\nrun: y\nmodel: {params: 8B, method: sft}\n", "model.method"),
        ("name: x\nrun: y\nmodel: {params: 8B, colour: red}\n", "model.colour: unknown key"),
        ("name: x\nrun: y\nresources: {gpu: Z900}\n", "unknown GPU 'Z900'"),
        ("name: x\nrun: y\nregions: [mars-1]\n", "regions: unknown region 'mars-1' in price list"),
    ],
)
def test_plan_errors(tmp_path, catalog, body, message):
    spec = tmp_path / "job.yaml"
    spec.write_text(body)
    assert message in one_line_error(cli("plan", str(spec), "--catalog", catalog))
