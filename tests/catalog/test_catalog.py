"""The offers catalog: the shipped snapshot, CSV parsing and its errors, billing rules."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

from gpuorch import catalog
from gpuorch.catalog import COLUMNS, load_rows, parse_csv, select, write_csv
from gpuorch.catalog.families import fabric_for, interconnect_for
from gpuorch.catalog.registry import billing_rule
from gpuorch.errors import UserInputError
from gpuorch.money import billing
from gpuorch.provider.catalog import load_offers
from gpuorch.provider.port import Offer

HEADER = ",".join(COLUMNS)
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def csv_rows(*lines: str, header: str = HEADER) -> list[catalog.OfferRow]:
    return parse_csv(io.StringIO("\n".join([header, *lines]) + "\n"), "cat.csv")


def test_snapshot_loads_typed_offers_and_caches_them():
    offers = load_offers()
    assert len(offers) > 300 and all(isinstance(o, Offer) for o in offers)
    assert {o.provider for o in offers} >= {"aws", "gcp"}  # and every other installed adapter's
    assert "azure" not in {o.provider for o in offers}  # no citable source for its rows: docs/catalog.md, "Sources"
    assert {o.gpu for o in offers} >= {"A10G", "L4", "L40S", "A100", "A100-80GB", "H100"}
    assert all(o.price_per_hour > 0 and o.gpu_count >= 1 for o in offers)
    again = load_offers()
    assert again is not offers and all(a is b for a, b in zip(again, offers, strict=True))


def test_snapshot_rows_follow_the_provider_billing_and_families():
    rows = load_rows()
    assert all((r.billing_granularity_s, r.min_billing_s) == (1, 60) for r in rows if r.provider in ("aws", "gcp"))
    assert all((r.billing_granularity_s, r.min_billing_s) == (60, 60) for r in rows if r.provider == "lambda")
    assert all((r.billing_granularity_s, r.min_billing_s) == (1, 300) for r in rows if r.provider == "azure")
    p4d = next(r for r in rows if r.instance_type == "p4d.24xlarge")
    assert (p4d.gpu, p4d.gpu_count, p4d.gpu_memory_gib, p4d.interconnect) == ("A100", 8, 40.0, "nvlink")
    assert next(r for r in rows if r.instance_type == "g5.xlarge").interconnect is None
    assert any(r.interruption_bucket == ">20%" for r in rows if r.provider == "aws")
    assert all(r.interruption_bucket is None for r in rows if r.provider == "gcp")


def test_gcp_gpu_vm_price_is_host_plus_gpus():
    a2 = next(r for r in load_rows() if r.zone == "us-central1-a" and r.instance_type == "a2-highgpu-1g")
    # host 0.73948 + A100 2.93391 on demand; spot 0.36975 + 1.4341 (catalog-sample, us-central1-a)
    assert a2.price_per_hour == pytest.approx(0.73948 + 2.93391)
    assert a2.spot_price_per_hour == pytest.approx(0.36975 + 1.4341)


def test_azure_ships_no_rows_but_knows_its_sizes():
    """No Azure price row is shipped (no first-party source to cite per row: docs/catalog.md,
    "Sources"); refreshed and ``--catalog`` rows are read and audited against its families and shapes."""
    from gpuorch.catalog.registry import catalogs

    azure = catalogs()["azure"]
    assert azure.rows is None and azure.builder is None and not [r for r in load_rows() if r.provider == "azure"]
    family = azure.family_of
    assert family("Standard_NC80adis_H100_v5").gpu == "H100-NVL"  # the 94 GB NVL card of NC H100 v5
    assert family("Standard_NC24ads_A100_v4").gpu == "A100-PCIE-80GB"
    assert azure.interconnect_for("Standard_NC96ads_A100_v4", 4) == "pcie"
    assert azure.interconnect_for("Standard_ND96amsr_A100_v4", 8) == "nvlink"
    nd = azure.shape_of("Standard_ND96isr_H100_v5")
    assert nd is not None and (nd.gpus, nd.vcpus, nd.memory_gib) == (8, 96, 1900)


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="the public data slice is not checked out next to the repo")
def test_snapshot_is_reproducible_from_the_public_data():
    from gpuorch.catalog.snapshot import build_one, buildable, main

    built = {c.provider: c for c in buildable()}
    assert set(built) == {"aws", "gcp", "vast"}
    for c in built.values():
        assert c.rows is not None and build_one(c, SHARED_DATA)[0] == c.rows.read_text(), c.provider
    assert main([str(SHARED_DATA), "--check"]) == 0


def test_the_snapshot_is_the_union_of_the_adapters_rows_found_through_the_registry():
    from gpuorch.catalog.registry import catalogs

    found = catalogs()
    assert set(found) >= {"aws", "gcp", "azure", "local", "sim"}
    assert catalog.snapshot_files() == [c.rows for c in found.values() if c.rows is not None]
    per_file = [load_rows(f) for f in catalog.snapshot_files()]
    assert load_rows() == [r for rows in per_file for r in rows]
    for rows in per_file:  # each adapter ships its own cloud's rows only
        assert len({r.provider for r in rows}) == 1


def test_the_core_holds_no_cloud_rows():
    from gpuorch.money import billing as core_billing

    assert not hasattr(core_billing, "RULES")
    core = Path(catalog.__file__).resolve().parents[1]
    assert not (core / "data" / "offers.csv").exists()
    assert not list((core / "catalog").glob("**/*.csv"))


def test_csv_with_extra_columns_empty_spot_and_defaults():
    rows = csv_rows(
        "aws,us-east-1,us-east-1a,g5.xlarge,A10G,1,22.35,4,16,1.006,,,,note",
        "gcp,us-central1,,g2-standard-4,l4,1,,4,16,0.71,0.28,pcie,1,x",
        header=HEADER + ",comment",
    )
    assert rows[0].spot_price_per_hour is None and rows[0].billing_granularity_s == 1 and rows[0].min_billing_s == 60
    assert rows[1].gpu == "L4" and rows[1].zone == "us-central1" and rows[1].gpu_memory_gib == 22.35
    assert rows[1].interconnect == "pcie"


def test_csv_round_trip():
    rows = csv_rows("azure,eastus,eastus-1,Standard_ND96isr_H100_v5,H100,8,80,96,1900,98.32,,nvswitch,,")
    assert rows[0].interconnect == "nvlink" and (rows[0].billing_granularity_s, rows[0].min_billing_s) == (1, 300)
    out = io.StringIO()
    write_csv(rows, out)
    assert parse_csv(io.StringIO(out.getvalue()), "again") == rows


def test_missing_columns_named():
    with pytest.raises(UserInputError, match=r"cat.csv line 1: missing columns spot_price_per_hour, interconnect"):
        csv_rows("x", header=HEADER.replace(",spot_price_per_hour,interconnect", ""))


@pytest.mark.parametrize(
    "line, message",
    [
        ("aws,us-east-1,a,g5.xlarge,A10G,1,22,4,16,cheap,,,", "column price_per_hour: 'cheap' is not a number"),
        ("aws,us-east-1,a,g5.xlarge,A10G,1,22,4,16,-1,,,", "column price_per_hour: '-1' must be a non-negative number"),
        ("aws,us-east-1,a,g5.xlarge,A10G,1,22,4,16,,,,", "column price_per_hour: is empty"),
        ("aws,us-east-1,a,g5.xlarge,Z900,1,22,4,16,1,,,", "column gpu: unknown GPU 'Z900'"),
        ("aws,us-east-1,a,g5.xlarge,A10G,1.5,22,4,16,1,,,", "column gpu_count: '1.5' must be a whole number"),
        ("aws,us-east-1,a,g5.xlarge,A10G,0,22,4,16,1,,,", "column gpu_count: must be at least 1"),
        ("aws,us-east-1,a,g5.xlarge,A10G,1,22,4,16,1,,infiniband,", "column interconnect: 'infiniband' is not one of"),
        ("aws,us-east-1,a,g5.xlarge,A10G,1,22,4,16,1,0.5,,0", "column billing_granularity_s: must be at least 1"),
        (",us-east-1,a,g5.xlarge,A10G,1,22,4,16,1,,,", "column provider: is empty"),
    ],
)
def test_bad_values_name_line_and_column(line, message):
    good = "aws,us-east-1,a,g5.xlarge,A10G,1,22,4,16,1,,,"
    with pytest.raises(UserInputError, match=re.escape(f"cat.csv line 3, {message}")):
        csv_rows(good, line)


def test_unreadable_catalog_is_a_user_error(tmp_path):
    with pytest.raises(UserInputError, match="cannot read the catalog"):
        load_rows(tmp_path / "nope.csv")
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UserInputError):
        load_rows(binary)


def test_select_filters_and_sorts_cheapest_first():
    rows = csv_rows(
        "aws,us-east-1,a,p4de.24xlarge,A100-80GB,8,80,96,1152,40,16,nvlink,",
        "aws,us-east-1,b,p4d.24xlarge,A100,8,40,96,1152,32,12,nvlink,",
        "gcp,us-central1,c,g2-standard-4,L4,1,22.35,4,16,0.7,,,",
        "gcp,us-central1,d,a3-highgpu-1g,H100-PCIE,1,80,26,234,11,2.2,,",
    )
    assert [r.instance_type for r, _ in select(rows, gpu="A100")] == ["p4d.24xlarge", "p4de.24xlarge"]
    assert [r.instance_type for r, _ in select(rows, gpu="A100-80GB")] == ["p4de.24xlarge"]
    assert [r.instance_type for r, _ in select(rows, gpu="A100-40GB")] == ["p4d.24xlarge"]  # a variant alias
    assert [r.instance_type for r, _ in select(rows, gpu="H100")] == ["a3-highgpu-1g"]  # the family, PCIe included
    assert [p for _, p in select(rows, market="on-demand")] == [0.7, 11, 32, 40]
    assert [p for _, p in select(rows, market="spot")] == [2.2, 12, 16]
    assert [r.gpu for r, _ in select(rows, min_vram_gib=24)] == ["L4", "H100-PCIE", "A100", "A100-80GB"]
    assert [r.gpu for r, _ in select(rows, min_vram_gib=80, provider="AWS", region="us-east-1")] == ["A100-80GB"]
    with pytest.raises(UserInputError, match="unknown GPU"):
        select(rows, gpu="Z900")


def test_families():
    assert interconnect_for("nimbus", "p5.48xlarge", 8) is None  # no adapter declares it
    assert interconnect_for("aws", "p5.48xlarge", 8) == "nvlink"
    assert interconnect_for("aws", "g6e.48xlarge", 8) == "pcie"
    assert interconnect_for("gcp", "a3-megagpu-8g", 8) == "nvlink"
    assert interconnect_for("azure", "Standard_ND96isr_MI300X_v5", 8) == "infinity-fabric"
    assert interconnect_for("aws", "p5.4xlarge", 1) is None


def test_family_fabrics_between_nodes():
    # The network a gang's nodes talk over (docs/sizing.md, "Instance families"): kind and Gb/s per node.
    assert fabric_for("aws", "p5.48xlarge") == ("efa", 3200)
    assert fabric_for("aws", "p4d.24xlarge") == ("efa", 400)
    assert fabric_for("aws", "g5.48xlarge") == ("ethernet", 100)
    assert fabric_for("gcp", "a3-highgpu-8g") == ("tcpx", 1000)
    assert fabric_for("gcp", "a4-highgpu-8g") == ("rdma", 3200)
    assert fabric_for("azure", "Standard_ND96isr_H100_v5") == ("infiniband", 3200)
    assert fabric_for("azure", "Standard_NC80adis_H100_v5") == ("ethernet", 80)
    assert fabric_for("nimbus", "p5.48xlarge") is None and fabric_for("aws", "m7i.large") is None


@pytest.mark.parametrize(
    "provider, seconds, billed",
    [("aws", 0, 0), ("aws", 30, 60), ("aws", 60.2, 61), ("gcp", 59, 60), ("gcp", 3601, 3601),
     ("azure", 61, 300), ("azure", 300.5, 301), ("azure", 3601, 3601),
     ("nimbus", 10, 3600), ("nimbus", 3601, 7200), ("local", 5, 5)],
)  # fmt: skip
def test_billed_seconds(provider, seconds, billed):
    assert billing.billed_seconds(billing_rule(provider), seconds) == billed


def test_billing_from_an_offer_arrays_and_cost():
    offer = load_offers()[0].model_copy(update={"billing_granularity_s": 3600, "min_billing_s": 3600})
    assert billing.billed_seconds(offer, 3601) == 7200
    assert billing.cost(offer, 1800, 2.0) == 2.0
    assert billing.cost(billing_rule("aws"), 1800, 2.0) == 1.0
    arr = billing_rule("azure").billed(np.array([0.0, 1.0, 300.0, 301.5]))
    assert arr.tolist() == [0, 300, 300, 302]
