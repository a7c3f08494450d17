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
    for r in rows:  # and every check had something to check against (shapes: where the adapter declares them)
        cat = catalog_of(r.provider)
        assert cat is not None and cat.family_of(r.instance_type) is not None, r.instance_type
        assert not cat.shapes or cat.shape_of(r.instance_type) is not None, r.instance_type
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
        ("aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.05,,1", "spot-discount", "5.0% of price_per_hour 1"),
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


def test_catalog_import_skips_a_bad_row_by_its_line_and_strict_refuses_the_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([HEADER, "aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.4,,1", "",
                              "aws,us-east-1,use1-az2,g5.xlarge,A10G,1,22.35,4,16,1.0,1.5,,1",
                              "aws,us-east-1,use1-az3,g5.xlarge,A10G,1,22.35,4,16,1.0,1.25,,1"]) + "\n")
    r = CliRunner().invoke(app, ["offers", "--catalog", str(bad), "--json"])
    assert r.exit_code == 0, r.output
    assert [o["zone"] for o in json.loads(r.stdout)["offers"]] == ["use1-az1"]  # the rest is used
    assert r.stderr.strip().splitlines() == [  # one line per skipped row: line, column, values, fix
        f"warning: {bad} line {n}, column spot_price_per_hour: g5.xlarge in {zone}: spot_price_per_hour {spot} is "
        f"above price_per_hour 1 (by {by}); fix the prices, or leave spot_price_per_hour empty (row skipped)"
        for n, zone, spot, by in ((4, "use1-az2", "1.5", "0.5"), (5, "use1-az3", "1.25", "0.25"))]
    strict = CliRunner().invoke(app, ["offers", "--catalog", str(bad), "--strict"])
    assert strict.exit_code == 2 and strict.stdout == ""
    assert strict.stderr.strip().splitlines() == [
        f"error: {bad} line 4, column spot_price_per_hour: g5.xlarge in use1-az2: spot_price_per_hour 1.5 is above "
        "price_per_hour 1 (by 0.5); fix the prices, or leave spot_price_per_hour empty; fix the row, or leave out "
        "--strict to skip it"]
    cheap = tmp_path / "cheap.csv"
    cheap.write_text("\n".join([HEADER, "aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.05,,1"]) + "\n")
    assert len(load_rows(cheap)) == 1
    assert [line.split(": ", 1)[0] for line in flagged(cheap)] == [f"{cheap} line 2, column spot_price_per_hour"]
    listed = CliRunner().invoke(app, ["offers", "--catalog", str(cheap), "--json"])
    assert listed.exit_code == 0 and f"warning: {cheap} line 2, column spot_price_per_hour: g5.xlarge in use1-az1" \
        in listed.stderr


def test_close_prices_print_apart():
    # A spot price a hair above on-demand: both printed in full, never "27.433 is above 27.433".
    found = audit_rows(rows_of("aws,us-east-1,use1-az1,p4de.24xlarge,A100-80GB,8,80,96,1152,27.433,27.4331,,1"))
    assert [f.check for f in found] == ["spot"]
    assert "spot_price_per_hour 27.4331 is above price_per_hour 27.433 (by 0.0001)" in found[0].message


def test_errors_keeps_only_errors():
    found = audit_rows(rows_of("aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.05,,1"))
    assert found and errors(found) == []


def test_refresh_leaves_out_failing_rows_and_names_them():
    from gpuorch.ops.catalog_refresh import audited
    from gpuorch.provider.port import Offer

    good, bad = (Offer.model_construct(**r._asdict()) for r in rows_of(
        "aws,us-east-1,use1-az1,g5.xlarge,A10G,1,22.35,4,16,1.0,0.4,,1",
        "aws,us-east-1,use1-az2,g5.xlarge,A10G,1,22.35,4,16,1.0,1.4,,1"))
    lines: list[str] = []
    assert audited("aws", [good, bad], report=lines.append) == [good]
    assert lines == [(
        "left out: aws row 2, column spot_price_per_hour: g5.xlarge in use1-az2: spot_price_per_hour 1.4 is above "
        "price_per_hour 1 (by 0.4); fix the prices, or leave spot_price_per_hour empty")]


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
