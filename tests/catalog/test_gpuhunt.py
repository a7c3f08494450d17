"""Price lists in gpuhunt's CSV format through the real CLI (``offers``/``plan --catalog``): an
instance's on-demand and spot rows become one offer, every row is parsed and audited as ours, a
malformed row is reported with its line and skipped, or with ``--strict`` refuses the file."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch import catalog as cat
from gpuorch.catalog.gpuhunt import COLUMNS
from gpuorch.cli.app import app

runner = CliRunner()
# instance_name, location, price, cpu, memory, gpu_count, gpu_name, gpu_memory, spot, disk, vendor, flags, provider
GOOD = [
    ("gpu_1x_a100_sxm4", "us-east-1", "1.29", "30", "200", "1", "A100", "40", "False", "512", "nvidia", "",
     "lambdalabs"),
    ("NVIDIA GeForce RTX 4090", "EU-RO-1", "0.69", "16", "62", "1", "RTX4090", "24", "False", "40", "nvidia", "",
     "runpod"),
    ("NVIDIA GeForce RTX 4090", "EU-RO-1", "0.34", "16", "62", "1", "RTX4090", "24", "True", "40", "nvidia", "",
     "runpod"),
    ("c5.large", "us-east-1", "0.085", "2", "4", "0", "", "", "False", "", "", "", "aws"),
]
WORKLOAD = """\
name: ft-8b
run: python train.py
model: {params: 8B, method: qlora, tokens: 20M}
checkpoint: {store: "s3://bucket/ft", interval: 10m}
"""


def write(tmp_path: Path, rows: list[tuple[str, ...]], name: str = "hunt.csv") -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(rows)
    path = tmp_path / name
    path.write_text(out.getvalue())
    return str(path)


def cli(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture(autouse=True)
def _lenient():
    with cat.strict_rows(False):
        yield


def test_on_demand_and_spot_rows_become_one_offer_and_cpu_rows_stay_cpu(tmp_path):
    r = cli("offers", "--catalog", write(tmp_path, GOOD), "--json")
    assert r.exit_code == 0, r.output
    offers = {o["instance_type"]: o for o in json.loads(r.stdout)["offers"]}
    rtx = offers["NVIDIA GeForce RTX 4090"]
    assert (rtx["provider"], rtx["region"], rtx["gpu"], rtx["gpu_count"]) == ("runpod", "EU-RO-1", "RTX4090", 1)
    assert (rtx["price_per_hour"], rtx["spot_price_per_hour"]) == (0.69, 0.34)
    a100 = offers["gpu_1x_a100_sxm4"]
    assert (a100["gpu"], a100["gpu_memory_gib"], a100["vcpus"], a100["memory_gib"]) == ("A100", 40, 30, 200)
    assert a100["spot_price_per_hour"] is None
    assert offers["c5.large"]["gpu"] is None and offers["c5.large"]["gpu_count"] == 0
    assert r.stderr == ""


BAD_ROWS = [  # (row, the gpuhunt column the report names)
    (("x1", "us-east-1", "abc", "8", "32", "1", "A100", "40", "False", "", "nvidia", "", "p"), "price"),
    (("x2", "us-east-1", "1.0", "8", "32", "1", "GTX9999", "24", "False", "", "nvidia", "", "p"), "gpu_name"),
    (("x3", "us-east-1", "1.0", "8", "32", "1", "A100", "40", "maybe", "", "nvidia", "", "p"), "spot"),
    (("x4", "us-east-1", "nan", "8", "32", "1", "A100", "40", "False", "", "nvidia", "", "p"), "price"),
    (("x5", "us-east-1", "1.0", "8", "32", "-2", "A100", "40", "False", "", "nvidia", "", "p"), "gpu_count"),
    (("x6", "us-east-1", "1.0", "8", "32", "1", "A100", "12", "False", "", "nvidia", "", "p"), "gpu_memory"),
    (("x7", "", "1.0", "8", "32", "1", "A100", "40", "False", "", "nvidia", "", "p"), "location"),
    (("v5p-8", "us-east5", "4.2", "208", "448", "4", "v5p", "95", "False", "", "google", "", "gcp"), "gpu_vendor"),
    (("x8", "us-east-1", "1.0", "8", "32", "1", "A100", "40", "True", "", "nvidia", "", "p"), "spot"),  # spot only
]


@pytest.mark.parametrize("bad, column", BAD_ROWS)
def test_a_malformed_row_is_skipped_with_its_line_and_strict_refuses_the_file(tmp_path, bad, column):
    path = write(tmp_path, [GOOD[0], bad, GOOD[1]])
    r = cli("offers", "--catalog", path, "--json")
    assert r.exit_code == 0, r.output
    kept = {o["instance_type"] for o in json.loads(r.stdout)["offers"]}
    assert kept == {"gpu_1x_a100_sxm4", "NVIDIA GeForce RTX 4090"}
    warnings = r.stderr.strip().splitlines()
    assert len(warnings) == 1 and f"{path} line 3, column {column}:" in warnings[0], warnings
    strict = cli("offers", "--catalog", path, "--strict")
    assert strict.exit_code == 2 and strict.stdout == ""
    lines = strict.stderr.strip().splitlines()
    assert len(lines) == 1 and f"line 3, column {column}:" in lines[0] and "--strict" in lines[0], lines


def test_the_audit_checks_gpuhunt_rows_as_ours(tmp_path):
    """A spot price above on-demand, and a second row for one instance, are the audit's errors."""
    dearer_spot = ("gpu_1x_a10", "us-east-1", "0.75", "30", "200", "1", "A10", "24", "False", "", "nvidia", "", "x")
    its_spot = ("gpu_1x_a10", "us-east-1", "0.95", "30", "200", "1", "A10", "24", "True", "", "nvidia", "", "x")
    path = write(tmp_path, [GOOD[0], dearer_spot, its_spot])
    r = cli("offers", "--catalog", path, "--json")
    assert r.exit_code == 0, r.output
    assert {o["instance_type"] for o in json.loads(r.stdout)["offers"]} == {"gpu_1x_a100_sxm4"}
    assert "line 3" in r.stderr and "spot" in r.stderr and "skipped" in r.stderr
    assert cli("offers", "--catalog", path, "--strict").exit_code == 2
    twice = write(tmp_path, [GOOD[0], GOOD[0]], "twice.csv")
    r2 = cli("offers", "--catalog", twice, "--strict")
    assert r2.exit_code == 2 and "line 3, column spot" in r2.stderr


def test_plan_ranks_a_gpuhunt_price_list(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(WORKLOAD)
    r = cli("plan", str(job), "--catalog", write(tmp_path, GOOD), "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["candidates"] and {c["provider"] for c in got["candidates"]} <= {"lambda", "runpod"}


def test_our_format_skips_a_bad_row_the_same_way_and_strict_refuses_the_file(tmp_path):
    path = tmp_path / "ours.csv"
    path.write_text(",".join(cat.COLUMNS) + "\naws,us-east-1,use1-az1,g6.xlarge,L4,1,22.35,4,16,abc,,,1\n"
                    "aws,us-east-1,use1-az2,g6.xlarge,L4,1,22.35,4,16,0.8,,,1\n")
    r = cli("offers", "--catalog", str(path), "--json")
    assert r.exit_code == 0 and [o["zone"] for o in json.loads(r.stdout)["offers"]] == ["use1-az2"]
    assert r.stderr.strip().splitlines() == [
        f"warning: {path} line 2, column price_per_hour: 'abc' is not a number (row skipped)"]
    strict = cli("offers", "--catalog", str(path), "--strict")
    assert strict.exit_code == 2 and strict.stderr.strip().splitlines() == [
        f"error: {path} line 2, column price_per_hour: 'abc' is not a number; fix the row, or leave out --strict to "
        "skip it"]
