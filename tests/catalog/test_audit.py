"""The row audit (``gpuorch.catalog.audit``): every shipped row passes it, each check catches
the row it names, and ``--catalog`` import refuses a bad row by its line."""

from __future__ import annotations

import io
import json

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch import gpus
from gpuorch.catalog import COLUMNS, flagged, load_rows, parse_csv, write_csv
from gpuorch.catalog.audit import SPOT_EXCEPTIONS, audit_rows, errors
from gpuorch.catalog.registry import catalog_of
from gpuorch.cli.app import app
from gpuorch.errors import UserInputError

HEADER = ",".join(COLUMNS)


def rows_of(*lines: str) -> list:
    return parse_csv(io.StringIO("\n".join([HEADER, *lines]) + "\n"), "cat.csv")


def test_every_shipped_row_passes_the_audit():
    rows = load_rows()
    assert len(rows) > 400
    assert audit_rows(rows) == []  # no error and no unexplained spot discount
    for r in rows:  # and every check had something to check against
        cat = catalog_of(r.provider)
        assert cat is not None and cat.family_of(r.instance_type) is not None, r.instance_type
        assert cat.shape_of(r.instance_type) is not None, r.instance_type
    assert all(key[0] in {"aws", "gcp", "azure"} and source for key, source in SPOT_EXCEPTIONS.items())


def test_shipped_spot_prices_are_plausible_discounts():
    for r in load_rows():
        if r.spot_price_per_hour is not None:
            assert r.spot_price_per_hour < r.price_per_hour, r
            assert r.spot_price_per_hour >= 0.10 * r.price_per_hour or (r.provider, r.zone, r.instance_type) in \
                SPOT_EXCEPTIONS, r


@pytest.mark.parametrize(
    "line, check, hint",
    [
        ("aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,1.2,,1", "spot", "above price_per_hour 1"),
        ("aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.05,,1", "spot-discount", "5.0% of on-demand"),
        ("aws,us-east-1,use1-az1,g5.xlarge,L4,1,22.35,4,16,1.0,,,1", "gpu", "g5.xlarge carries A10G"),
        ("aws,us-east-1,use1-az1,p4d.24xlarge,A100,9,40,96,1152,20,,,1", "gpu+shape", "its family has 1 to 8"),
        ("aws,us-east-1,use1-az1,p4d.24xlarge,A100,4,40,96,1152,20,,,1", "shape",
         "gpu_count 4, the instance type has 8"),
        ("aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,8,16,1.0,,,1", "shape", "vcpus 8, the instance type has 4"),
        ("azure,eastus,eastus,Standard_ND96amsr_A100_v4,A100-80GB,8,80,96,1800,30,,,1", "shape",
         "memory_gib 1800, the instance type has 1900"),
    ],
)
def test_each_check_names_the_row_and_the_fix(line, check, hint):
    found = audit_rows(rows_of(line))
    assert [f.check for f in found] == check.split("+") and hint in found[0].message
    assert (found[0].severity == "warning") == (check == "spot-discount")


def test_duplicates_and_unknown_providers():
    dup = "nimbus,r1,z1,box,L4,1,22.35,4,16,1.0,0.5,,1"
    found = audit_rows(rows_of(dup, dup))
    assert [(f.index, f.check) for f in found] == [(1, "duplicate")] and "listed twice (also row 1)" in found[0].message
    assert audit_rows(rows_of(dup)) == []  # no adapter for nimbus: prices and memory only


def test_import_resolves_the_variant_from_name_and_memory():
    a100, nvl, l4, a100_40 = rows_of(
        "nimbus,r1,z1,a,A100,1,80,8,64,2.0,,,1",
        "nimbus,r1,z2,b,H100,1,94,8,64,3.0,,,1",
        "nimbus,r1,z3,c,L4,1,22.35,8,64,0.7,,,1",
        "nimbus,r1,z4,d,A100,1,40,8,64,1.5,,,1",
    )
    assert (a100.gpu, nvl.gpu, l4.gpu, a100_40.gpu) == ("A100-80GB", "H100-NVL", "L4", "A100")
    assert l4.gpu_memory_gib == 22.35  # memory keeps its decimals
    out = io.StringIO()
    write_csv([l4], out)
    assert parse_csv(io.StringIO(out.getvalue()), "again.csv")[0].gpu_memory_gib == 22.35
    assert gpus.memory_matches(l4.gpu_memory_gib, 24)  # so 24GB+ still takes it


@pytest.mark.parametrize(
    "line, hint",
    [
        ("nimbus,r1,z1,a,A100,1,48,8,64,2.0,,,1",
         "line 2, column gpu_memory_gib: A100 with 48 GiB per GPU is no variant gpuorch knows"),
        ("nimbus,r1,z1,a,A100-80GB,1,40,8,64,2.0,,,1", "A100-80GB with 40 GiB per GPU is no variant"),
    ],
)
def test_unknown_gpu_and_memory_combinations_fail_naming_the_line(line, hint):
    with pytest.raises(UserInputError) as e:
        rows_of(line)
    assert hint in str(e.value) and "fix gpu_memory_gib, or name the variant in gpu" in str(e.value)


def test_catalog_import_refuses_a_bad_row_by_its_line_and_flags_cheap_spot(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([HEADER, "aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.4,,1", "",
                              "aws,us-east-1,use1-az2,g5.xlarge,A10G,1,22.35,4,16,1.0,1.5,,1"]) + "\n")
    r = CliRunner().invoke(app, ["offers", "--catalog", str(bad)])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [
        f"error: {bad} line 4: g5.xlarge in use1-az2: spot_price_per_hour 1.5 is above price_per_hour 1; "
        "fix the prices, or leave spot_price_per_hour empty"]
    cheap = tmp_path / "cheap.csv"
    cheap.write_text("\n".join([HEADER, "aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.05,,1"]) + "\n")
    assert len(load_rows(cheap)) == 1
    assert [line.split(": ", 1)[0] for line in flagged(cheap)] == [f"{cheap} line 2"]
    listed = CliRunner().invoke(app, ["offers", "--catalog", str(cheap), "--json"])
    assert listed.exit_code == 0 and f"warning: {cheap} line 2: g5.xlarge in use1-az1" in listed.stderr


def test_errors_keeps_only_errors():
    found = audit_rows(rows_of("aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.05,,1"))
    assert found and errors(found) == []


def test_the_snapshot_sells_h200_from_the_committed_aws_slice():
    import csv

    from gpuorch_aws.snapshot import H200_SLICE

    with H200_SLICE.open(newline="") as f:
        source = {r["AvailabilityZone"]: r for r in csv.DictReader(f)}
    p5en = [r for r in load_rows() if r.instance_type == "p5en.48xlarge"]
    assert {r.zone for r in p5en} == set(source) and len(p5en) == 14
    for r in p5en:
        raw = source[r.zone]
        assert (r.gpu, r.gpu_count, r.interconnect) == ("H200", 8, "nvlink")
        assert r.price_per_hour == float(raw["Price"])
        assert r.spot_price_per_hour == (float(raw["SpotPrice"]) if raw["SpotPrice"] else None)
    from gpuorch.jobs.spec import parse_spec
    from gpuorch.placement import candidates
    from gpuorch.provider.catalog import load_offers

    spec = parse_spec({"name": "h200", "run": "x", "resources": {"gpu": "H200:8"}, "spot_policy": "on-demand"})
    hyperscalers = [o for o in load_offers() if o.provider in ("aws", "gcp", "azure")]  # neoclouds sell H200 too
    assert {c.offer.instance_type for c in candidates(spec, hyperscalers)} == {"p5en.48xlarge", "a3-ultragpu-8g"}


def test_the_snapshot_sells_gcp_h200_from_the_committed_slice_host_plus_gpus():
    import csv

    from gpuorch_gcp.snapshot import H200_DOUBTFUL_ZONES, H200_SLICE

    with H200_SLICE.open(newline="") as f:
        raw = list(csv.DictReader(f))
    hosts = {r["AvailabilityZone"]: r for r in raw if r["InstanceType"] == "a3-ultragpu-8g"}
    gpus = {r["AvailabilityZone"]: r for r in raw if r["AcceleratorName"] == "H200"}
    a3u = {r.zone: r for r in load_rows() if r.instance_type == "a3-ultragpu-8g"}
    assert set(a3u) == set(hosts) - H200_DOUBTFUL_ZONES and a3u
    assert errors(audit_rows(list(a3u.values()))) == []
    for zone, r in a3u.items():  # a GCP VM costs host + attached GPUs, on demand and on spot
        host, gpu = hosts[zone], gpus[zone]
        assert (r.gpu, r.gpu_count, r.gpu_memory_gib, r.interconnect) == ("H200", 8, 141, "nvlink")
        assert r.price_per_hour == round(float(host["Price"]) + float(gpu["Price"]), 6)
        assert r.spot_price_per_hour == round(float(host["SpotPrice"]) + float(gpu["SpotPrice"]), 6)
    for zone in H200_DOUBTFUL_ZONES:  # left out: the GPU's on-demand price is the doubtful half price
        assert float(gpus[zone]["Price"]) < max(float(g["Price"]) for g in gpus.values())


def test_refresh_leaves_out_failing_rows_and_names_them():
    from gpuorch.ops.catalog_refresh import audited
    from gpuorch.provider.port import Offer

    good, bad = (Offer.model_construct(**r._asdict()) for r in rows_of(
        "aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.4,,1",
        "aws,us-east-1,use1-az2,g5.xlarge,A10G,1,22.35,4,16,1.0,1.4,,1"))
    lines: list[str] = []
    assert audited("aws", [good, bad], report=lines.append) == [good]
    assert lines == [(
        "left out: aws row 2: g5.xlarge in use1-az2: spot_price_per_hour 1.4 is above price_per_hour 1; "
        "fix the prices, or leave spot_price_per_hour empty")]


def test_a_price_lists_model_and_memory_satisfy_a_job_asking_for_the_variant(tmp_path):
    cat = tmp_path / "other-tool.csv"
    cat.write_text("\n".join([HEADER, "nimbus,r1,z1,box-a100,A100,1,80,8,64,2.0,,,1",
                              "nimbus,r1,z2,box-h100,H100,1,94,8,64,3.0,,,1"]) + "\n")
    job = tmp_path / "job.yaml"
    for gpu, chosen in (("A100:80GB:1", "box-a100"), ("A100-80GB", "box-a100"), ("H100-NVL", "box-h100")):
        job.write_text(f"name: j\nrun: x\nresources: {{gpu: '{gpu}'}}\nspot_policy: on-demand\n")
        r = CliRunner().invoke(app, ["plan", str(job), "--catalog", str(cat), "--json"])
        assert r.exit_code == 0, r.output
        assert [c["instance_type"] for c in json.loads(r.stdout)["candidates"]] == [chosen], gpu
