"""Issue 36: the audit's rules over many rows (regional spread, GCP parts), generic GPU names
resolved to the variant an instance carries, the dropped-rows file of the snapshot, and the
audit's result cached by the file's content."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

import gpuorch.cli.planning  # noqa: F401 - registers the commands
from gpuorch import catalog
from gpuorch.catalog import COLUMNS, load_rows, parse_csv
from gpuorch.catalog.audit import REGION_BAND, audit_rows, errors, part_findings
from gpuorch.catalog.registry import catalog_of
from gpuorch.cli.app import app

HEADER = ",".join(COLUMNS)


def rows_of(*lines: str) -> list:
    return parse_csv(io.StringIO("\n".join([HEADER, *lines]) + "\n"), "cat.csv")


def priced(prices: dict[str, float], itype: str = "box") -> list:
    return rows_of(*(f"nimbus,{region},{region}-a,{itype},L4,1,22.35,8,32,{p},,,1" for region, p in prices.items()))


def test_a_price_far_from_its_types_regional_median_fails_either_way():
    rows = priced({"r1": 10.0, "r2": 11.0, "r3": 12.5, "r4": 30.0, "r5": 4.0})
    found = audit_rows(rows)
    assert [(f.index, f.check, f.column) for f in found] == [(3, "region-spread", "price_per_hour"),
                                                             (4, "region-spread", "price_per_hour")]
    assert "price_per_hour 30 is 2.73x the median 11 of its 5 regions' prices" in found[0].message
    # within the band both ways, nothing; and fewer than 3 regions give no majority to judge by
    assert audit_rows(priced({"r1": 10.0, "r2": 10.0 * REGION_BAND * 0.99, "r3": 10.0 / REGION_BAND * 1.01})) == []
    assert audit_rows(priced({"r1": 1.0, "r2": 9.0})) == []
    # a region's zones count once, so a region with many zones does not outvote the others
    many = rows_of(*(f"nimbus,big,big-{z},box,L4,1,22.35,8,32,1.0,,,1" for z in "abcdef"),
                   "nimbus,r2,r2-a,box,L4,1,22.35,8,32,3.0,,,1", "nimbus,r3,r3-a,box,L4,1,22.35,8,32,3.1,,,1")
    assert {f.index for f in audit_rows(many)} == set(range(6))


def test_parts_each_keep_spot_at_or_below_on_demand():
    assert part_findings([("host", 1.0, 0.5), ("1 x A100 GPU", 2.0, 1.0)]) == []
    assert part_findings([("host", 1.0, 0.5), ("1 x A100-80GB GPU", 1.8462, 1.964), ("x", 1.0, None)]) == [
        "1 x A100-80GB GPU: spot 1.964 is above on-demand 1.8462 (by 0.1178)"]


def test_the_snapshot_drops_failing_rows_by_rule_and_says_why():
    from gpuorch.catalog.snapshot import dropped_file

    gcp = catalog_of("gcp")
    assert gcp is not None
    with dropped_file(gcp).open(newline="") as f:
        dropped = list(csv.DictReader(f))
    shipped = {(r.zone, r.instance_type) for r in load_rows(gcp.rows)}
    assert dropped and all((d["zone"], d["instance_type"]) not in shipped for d in dropped)
    assert {d["check"] for d in dropped} == {"part", "region-spread"}
    for d in dropped:  # each names the values that failed
        assert d["reason"] and any(ch.isdigit() for ch in d["reason"]), d
    # The GCP rows the issue found: a3-highgpu-8g's half-price regions and a2-ultragpu-1g whose GPU part's
    # spot is above its on-demand, both left out by the rules, not by name.
    assert ("us-central1-a", "a3-highgpu-8g") not in shipped and ("us-east4-a", "a3-highgpu-8g") in shipped
    assert ("us-central1-a", "a2-ultragpu-1g") not in shipped
    assert errors(audit_rows(load_rows())) == []


def test_no_shipped_row_comes_from_the_unlicensed_slices():
    rows = load_rows()
    assert not any(r.instance_type in ("p5en.48xlarge", "a3-ultragpu-8g") for r in rows)
    for provider in ("aws", "gcp"):
        cat = catalog_of(provider)
        assert cat is not None and cat.rows is not None
        assert not list((cat.rows.parent / "sources").glob("*.csv"))


@pytest.mark.parametrize("gpu, memory", [("A100", "80"), ("a100", ""), ("A100", "81.92")])
def test_a_generic_gpu_name_is_the_variant_the_instance_carries(gpu, memory):
    (row,) = rows_of(f"azure,eastus,eastus,Standard_NC24ads_A100_v4,{gpu},1,{memory},24,220,3.673,,,1")
    assert row.gpu == "A100-PCIE-80GB" and audit_rows([row]) == []
    (nvl,) = rows_of("azure,eastus,eastus,Standard_NC40ads_H100_v5,H100,1,94,40,320,6.98,,,1")
    assert nvl.gpu == "H100-NVL" and audit_rows([nvl]) == []
    (elsewhere,) = rows_of("nimbus,r1,z1,box,A100,1,80,8,64,2.0,,,1")  # no family known: the table's first
    assert elsewhere.gpu == "A100-80GB"


def test_only_a_real_contradiction_is_refused(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text("\n".join([HEADER, "azure,eastus,eastus,Standard_NC24ads_A100_v4,A100,1,80,24,220,3.673,,,1",
                               "azure,westus,westus,Standard_NC24ads_A100_v4,A100,1,40,24,220,3.673,,,1",
                               "azure,westus2,westus2,Standard_NC24ads_A100_v4,A100-80GB,1,80,24,220,3.673,,,1"])
                    + "\n")
    r = CliRunner().invoke(app, ["offers", "--catalog", str(path), "--json"])
    assert r.exit_code == 0, r.output
    assert [(o["region"], o["gpu"]) for o in json.loads(r.stdout)["offers"]] == [("eastus", "A100-PCIE-80GB")]
    assert r.stderr.strip().splitlines() == [
        f"warning: {path} line 3, column gpu: Standard_NC24ads_A100_v4 in westus: gpu A100, but "
        "Standard_NC24ads_A100_v4 carries A100-PCIE-80GB (the azure adapter's instance families); fix gpu "
        "(row skipped)",
        f"warning: {path} line 4, column gpu: Standard_NC24ads_A100_v4 in westus2: gpu A100-80GB, but "
        "Standard_NC24ads_A100_v4 carries A100-PCIE-80GB (the azure adapter's instance families); fix gpu "
        "(row skipped)"]
    strict = CliRunner().invoke(app, ["offers", "--catalog", str(path), "--strict"])
    assert strict.exit_code == 2 and len(strict.stderr.strip().splitlines()) == 1 and "line 3, column gpu" in \
        strict.stderr


def test_plan_skips_a_bad_row_and_ranks_the_rest(tmp_path):
    cat = tmp_path / "list.csv"
    cat.write_text("\n".join([HEADER, "aws,us-east-1,use1-az1,g6.xlarge,L4,1,22.35,4,16,0.8048,0.9,,1",
                              "aws,us-east-1,use1-az2,g6.xlarge,L4,1,22.35,4,16,0.8048,0.3,,1"]) + "\n")
    job = tmp_path / "job.yaml"
    job.write_text("name: j\nrun: x\nresources: {gpu: L4}\n")
    r = CliRunner().invoke(app, ["plan", str(job), "--catalog", str(cat), "--json"])
    assert r.exit_code == 0, r.output
    assert {c["zone"] for c in json.loads(r.stdout)["candidates"]} == {"use1-az2"}
    assert r.stderr.count("(row skipped)") == 1 and "line 2, column spot_price_per_hour" in r.stderr
    strict = CliRunner().invoke(app, ["plan", str(job), "--catalog", str(cat), "--strict"])
    assert strict.exit_code == 2 and strict.stdout == "" and len(strict.stderr.strip().splitlines()) == 1


def test_the_audit_runs_once_per_content(tmp_path, monkeypatch):
    from gpuorch.catalog import audit, auditcache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "list.csv"
    path.write_text("\n".join([HEADER, "aws,us-east-1,use1-az1,g6.xlarge,L4,1,22.35,4,16,0.8,0.9,,1",
                               "aws,us-east-1,use1-az2,g6.xlarge,L4,1,22.35,4,16,0.8,0.3,,1"]) + "\n")
    calls: list[int] = []
    real = audit.audit_rows

    def counted(rows, **kw):  # the real audit, counted
        calls.append(len(rows))
        return real(rows, **kw)

    monkeypatch.setattr(audit, "audit_rows", counted)

    def fresh_process_load() -> list:
        catalog._ROWS.clear()  # what a new process starts with
        return load_rows(path)

    first = fresh_process_load()
    again = fresh_process_load()
    assert calls == [2] and [r.zone for r in first] == [r.zone for r in again] == ["use1-az2"]
    assert catalog.flagged(path) and "(row skipped)" in catalog.flagged(path)[0]  # the cached findings still say why
    assert len(list(auditcache.directory().glob("*.json"))) == 1
    path.write_text(path.read_text().replace("0.3,", "0.31,"))  # another content: audited again
    assert [r.spot_price_per_hour for r in fresh_process_load()] == [0.31] and calls == [2, 2]
    (entry,) = [p for p in auditcache.directory().glob("*.json") if p.name.startswith(auditcache.entry(
        path.read_bytes()).name[:64])]
    entry.write_text("{not json")  # a damaged entry is audited again, never trusted
    fresh_process_load()
    assert calls == [2, 2, 2]
